# SPDX-License-Identifier: BSD-3-Clause
"""The Python driver API on the emulated target: bring-up, identify, synchronous I/O,
argument checks, lifetimes (nvmelab.open / Controller / Namespace / DmaBuffer)."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import nvmelab
from nvmelab import driver
from nvmelab.driver.errors import ClosedError

URI2 = "emu://?ndev=2&nsze=16MiB"
URI1 = "emu://?nsze=8MiB"


@pytest.fixture(scope="module")
def target():
    with nvmelab.open(URI2) as t:
        yield t


@pytest.fixture(scope="module")
def ns(target):
    return target[0].namespace(1)


# --- bring-up and identify ---


def test_open_returns_sequence_of_controllers(target):
    assert len(target) == 2
    assert [c.index for c in target] == [0, 1]
    assert isinstance(target[0], nvmelab.Controller)
    assert target[-1] is target[1]


def test_identify_fields(target):
    sns = set()
    for c in target:
        d = c.identify()
        for key in (
            "vid",
            "ssvid",
            "sn",
            "mn",
            "fr",
            "mdts",
            "mdts_bytes",
            "cntlid",
            "ver",
            "nn",
            "sqes",
            "cqes",
            "oncs",
            "vwc",
        ):
            assert key in d, key
        assert isinstance(d["sn"], str) and d["sn"] == d["sn"].strip() and d["sn"]
        assert isinstance(d["mn"], str) and d["mn"]
        assert d["nn"] >= 1
        assert d["sqes"] & 0xF == 6 and d["cqes"] & 0xF == 4  # required entry sizes 64 B / 16 B
        if d["mdts"]:
            assert d["mdts_bytes"] == c.mdts_bytes and d["mdts_bytes"] % 4096 == 0
        sns.add(d["sn"])
        d["sn"] = "mutated"  # a copy: the cache is unaffected
        assert c.identify()["sn"] != "mutated"
    assert len(sns) == 2, "each controller has its own serial number"


def test_namespace_geometry(target):
    ns = target[0].namespace(1)
    assert ns.nsid == 1
    assert ns.lba_size in (512, 4096)
    assert ns.nsze * ns.lba_size == 16 << 20 == ns.nbytes
    assert target[0].nsids[0] == 1
    assert [n.nsid for n in target[0].namespaces()] == target[0].nsids


def test_single_controller_target_forwards():
    with nvmelab.open(URI1) as c:
        assert len(c) == 1
        assert c.identify()["sn"] == c[0].identify()["sn"]
        ns = c.namespace(1)
        assert ns.nsze * ns.lba_size == 8 << 20
        with c.qpair(depth=4) as q:
            assert q.depth == 4


def test_multi_controller_target_refuses_forwarding(target):
    with pytest.raises(ValueError, match="2 controllers"):
        target.identify()


def test_lba_format_4k():
    with nvmelab.open("emu://?nsze=8MiB&lbads=4096") as c:
        ns = c.namespace(1)
        assert ns.lba_size == 4096 and ns.nsze == 2048
        data = np.random.default_rng(1).integers(0, 256, 8192, dtype=np.uint8)
        ns.write(7, data)
        assert np.array_equal(ns.read(7, 2), data)


# --- synchronous I/O ---


def test_read_after_write_random(ns):
    rng = np.random.default_rng(2)
    for _ in range(20):
        nlb = int(rng.integers(1, 64))
        slba = int(rng.integers(0, ns.nsze - nlb))
        data = rng.integers(0, 256, nlb * ns.lba_size, dtype=np.uint8)
        ns.write(slba, data)
        got = ns.read(slba, nlb)
        assert got.dtype == np.uint8 and got.shape == (nlb * ns.lba_size,)
        assert np.array_equal(got, data)


def test_write_accepts_bytes_like(ns):
    b = bytes(range(256)) * (ns.lba_size // 256)
    ns.write(3, b)
    assert ns.read(3, 1).tobytes() == b
    ns.write(4, bytearray(b))
    ns.write(5, memoryview(b))
    assert ns.read(4, 2).tobytes() == b + b


def test_large_sync_io_is_split_by_mdts(target, ns):
    mdts = target[0].mdts_bytes or (1 << 20)
    n = 2 * mdts + 3 * ns.lba_size
    data = np.random.default_rng(3).integers(0, 256, n, dtype=np.uint8)
    ns.write(100, data)
    assert np.array_equal(ns.read(100, n // ns.lba_size), data)


def test_read_into_caller_memory(target, ns):
    ns.write(0, np.arange(2 * ns.lba_size, dtype=np.uint16).astype(np.uint8))
    with target.alloc(8192) as buf:
        r = ns.read(0, 2, out=buf)  # into DMA memory: a view of it, no copy
        assert np.shares_memory(r, buf.array) and r.size == 2 * ns.lba_size
        host = np.zeros(3 * ns.lba_size, np.uint8)
        h = ns.read(0, 2, out=host)  # into a numpy array: a view of it
        assert np.shares_memory(h, host) and np.array_equal(h, r)
        with pytest.raises(ValueError, match="out: 512 bytes is smaller"):
            ns.read(0, 2, out=np.zeros(512, np.uint8))
        with pytest.raises(TypeError, match="out"):
            ns.read(0, 1, out=np.zeros(512, np.uint16))


def test_write_zeroes_and_deallocate(ns):
    ns.write(200, np.full(4 * ns.lba_size, 0xAB, np.uint8))
    ns.write_zeroes(201, 2)
    got = ns.read(200, 4).reshape(4, ns.lba_size)
    assert (got[0] == 0xAB).all() and (got[1:3] == 0).all() and (got[3] == 0xAB).all()
    ns.deallocate(200, 4)
    assert (ns.read(200, 4) == 0).all()
    ns.flush()


def test_controllers_are_independent(target):
    a, b = target[0].namespace(1), target[1].namespace(1)
    a.write(0, np.full(a.lba_size, 1, np.uint8))
    b.write(0, np.full(b.lba_size, 2, np.uint8))
    assert (a.read(0, 1) == 1).all() and (b.read(0, 1) == 2).all()


def test_sync_io_from_threads(target):
    ns = target[1].namespace(1)
    errors = []

    def worker(k):
        try:
            rng = np.random.default_rng(k)
            for i in range(20):
                slba = k * 1000 + i * 4
                data = rng.integers(0, 256, 4 * ns.lba_size, dtype=np.uint8)
                ns.write(slba, data)
                assert np.array_equal(ns.read(slba, 4), data)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# --- argument checks ---


@pytest.mark.parametrize(
    "call, exc, needle",
    [
        (lambda ns: ns.read(10**12, 1), ValueError, "slba: 1000000000000 is beyond the namespace"),
        (lambda ns: ns.read(ns.nsze - 1, 2), ValueError, "nlb: slba"),
        (lambda ns: ns.read(0, 0), ValueError, "nlb: 0 is below the minimum 1"),
        (lambda ns: ns.read(-1, 1), ValueError, "slba: -1"),
        (lambda ns: ns.read("0", 1), TypeError, "slba: expected an int, got str"),
        (lambda ns: ns.read(0.0, 1), TypeError, "slba"),
        (lambda ns: ns.read(True, 1), TypeError, "slba"),
        (lambda ns: ns.write(0, b"x" * 100), ValueError, "data: length 100 is not a multiple of lba_size"),
        (lambda ns: ns.write(0, b""), ValueError, "data: length 0"),
        (lambda ns: ns.write(0, "text"), TypeError, "data: expected bytes-like"),
        (lambda ns: ns.write(0, np.zeros(512, np.float32)), TypeError, "data: expected a numpy uint8 array"),
        (lambda ns: ns.write(0, None), TypeError, "data"),
        (lambda ns: ns.write(ns.nsze, b"\0" * ns.lba_size), ValueError, "slba"),
        (lambda ns: ns.read(0, 1, out=bytearray(4096)), TypeError, "out: expected a DmaBuffer"),
        (lambda ns: ns.write_zeroes(ns.nsze, 1), ValueError, "slba"),
        (lambda ns: ns.deallocate(0, 0), ValueError, "nlb"),
    ],
)
def test_bad_arguments_name_the_argument(ns, call, exc, needle):
    with pytest.raises(exc, match=needle.replace("(", r"\(")):
        call(ns)


def test_bad_namespace(target):
    with pytest.raises(ValueError, match="nsid"):
        target[0].namespace(99)
    with pytest.raises(ValueError, match="nsid"):
        target[0].namespace(0)


@pytest.mark.parametrize(
    "uri, needle",
    [
        ("emu://?nsze=12Q", "nsze"),
        ("emu://?bogus=1", "bogus"),
        ("emu://?ndev=0", "ndev"),
        ("nope://x", "unsupported scheme 'nope://'"),
        ("", "empty URI"),
        ("emu://?nsze=1MiB&nsze=2MiB", "'nsze' given twice"),
    ],
)
def test_bad_uri_is_value_error_naming_the_part(uri, needle):
    with pytest.raises(ValueError, match=needle):
        nvmelab.open(uri)


def test_open_type_errors():
    with pytest.raises(TypeError, match="uri"):
        nvmelab.open(42)
    with pytest.raises(TypeError, match="unexpected keyword"):
        nvmelab.open(URI1, ndev=2)


# --- lifetimes ---


def test_closed_target_raises_and_double_close_is_safe():
    t = nvmelab.open(URI1)
    c = t[0]
    ns = c.namespace(1)
    q = c.qpair(depth=8)
    buf = c.alloc(4096)
    t.close()
    t.close()
    assert t.closed and c.closed and q.closed
    for call in (
        lambda: c.identify(),
        lambda: ns.read(0, 1),
        lambda: c.qpair(),
        lambda: t.alloc(4096),
        lambda: ns.write(0, b"\0" * 512),
        lambda: q.submit_read(ns, 0, 1, buf),
        lambda: q.poll(),
        lambda: c.reset(),
        lambda: c.namespace(1),
    ):
        with pytest.raises(ClosedError, match="closed"):
            call()
    q.close()
    buf.close()
    buf.close()
    assert "closed" in repr(t)


def test_dma_buffer_is_numpy_view_without_copies(target):
    with target.alloc(3 * 4096 + 100) as buf:
        assert buf.nbytes == 3 * 4096 + 100 and len(buf) == buf.nbytes
        a = buf.array
        assert a.dtype == np.uint8 and a.shape == (buf.nbytes,)
        b = np.asarray(buf)
        assert np.shares_memory(a, b)
        a[:4] = [1, 2, 3, 4]
        assert bytes(memoryview(buf.array)[:4]) == b"\x01\x02\x03\x04"
        assert buf.iova() % 4096 == 0
    assert buf.closed
    with pytest.raises(ClosedError):
        _ = buf.array
    with pytest.raises(ClosedError):
        buf.iova()


def test_views_outlive_closed_buffer_and_target():
    t = nvmelab.open(URI1)
    ns = t.namespace(1)
    ns.write(0, np.full(ns.lba_size, 7, np.uint8))
    a = ns.read(0, 1)
    buf = t.alloc(4096)
    v = buf.array
    v[:] = 9
    buf.close()
    t.close()
    gc.collect()
    assert (a == 7).all() and (v == 9).all()  # still valid memory: freed after the last view
    del a, v
    gc.collect()


def test_alloc_bad_sizes(target):
    with pytest.raises(ValueError, match="nbytes"):
        target.alloc(0)
    with pytest.raises(TypeError, match="nbytes"):
        target.alloc("4096")
    with pytest.raises((ValueError, MemoryError)):
        target.alloc(1 << 62)


def test_identify_cli(capsys):
    from nvmelab.cli import main

    assert main(["identify", URI2]) == 0
    out = capsys.readouterr().out
    assert "2 controller(s)" in out and "nsid 1" in out
    assert main(["identify", "--json", URI1]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["controllers"][0]["namespaces"][0]["nbytes"] == 8 << 20
    assert main(["identify", "emu://?nsze=12Q"]) == 2
    assert "nsze" in capsys.readouterr().err


def test_lazy_exports():
    for name in ("open", "NvmeError", "Controller", "Namespace", "QPair", "DmaBuffer"):
        assert getattr(nvmelab, name) is getattr(driver, name)


def test_objects_dropped_without_close_are_released():
    t = nvmelab.open(URI1)
    c = t[0]
    q = c.qpair(depth=4)
    buf = c.alloc(4096)
    q.submit_read(c.namespace(1), 0, 1, buf)
    del q, buf, c, t
    gc.collect()
    with nvmelab.open(URI1) as t2:  # nothing left behind that breaks a new target
        assert t2.namespace(1).read(0, 1).size == 512


def test_running_out_of_queue_identifiers():
    with nvmelab.open("emu://?nsze=1MiB&nioq=2") as c:
        q1, q2 = c.qpair(depth=4), c.qpair(depth=4)
        with pytest.raises(OSError, match="no I/O queue identifier left"):
            c.qpair(depth=4)
        q1.close()
        with c.qpair(depth=4) as q3:
            assert q3.qid >= 1
        q2.close()
