# SPDX-License-Identifier: BSD-3-Clause
"""Asynchronous I/O through QPair on the emulated target: read-after-write through several
queue pairs and threads, PRP edge cases, MDTS, phase wrap, queue full, buffer lifetimes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nvmelab
from nvmelab.driver.errors import ClosedError

URI = "emu://?ndev=1&nsze=32MiB&mdts=64KiB"
PAGE = 4096


@pytest.fixture(scope="module")
def ctrl():
    with nvmelab.open(URI) as t:
        yield t[0]


@pytest.fixture(scope="module")
def ns(ctrl):
    return ctrl.namespace(1)


def _rand(rng, n):
    return rng.integers(0, 256, n, dtype=np.uint8)


def test_submit_poll_roundtrip(ctrl, ns):
    rng = np.random.default_rng(10)
    with ctrl.qpair(depth=16) as q, ctrl.alloc(64 * 1024) as buf:
        data = _rand(rng, 8 * ns.lba_size)
        buf.array[: data.size] = data
        tag = q.submit_write(ns, 40, 8, buf, tag="w")
        assert tag == "w"
        cpls = q.wait_all(timeout=5)
        assert [c.tag for c in cpls] == ["w"] and cpls[0].ok and cpls[0].error is None
        assert cpls[0].name == "Successful Completion" and cpls[0].command == "Write nsid=1 slba=40 nlb=8"
        buf.array[:] = 0
        t = q.submit_read(ns, 40, 8, buf, offset=PAGE)
        assert isinstance(t, int)
        (c,) = q.wait_all(timeout=5, check=True)
        assert c.tag == t
        assert np.array_equal(buf.array[PAGE : PAGE + data.size], data)
        assert (buf.array[:PAGE] == 0).all()


def test_read_after_write_several_qpairs_and_threads(ctrl, ns):
    """Each thread owns one queue pair; >= 20x depth commands per queue so the phase tag wraps."""
    depth, nthreads, region = 8, 3, 4096  # blocks per thread's private region
    ncmds = 20 * depth
    errors: list = []

    def worker(k: int) -> None:
        try:
            rng = np.random.default_rng(100 + k)
            base = k * region
            nlb_max = 8
            with (
                ctrl.qpair(depth=depth) as q,
                ctrl.alloc(ncmds * nlb_max * ns.lba_size) as wbuf,
                ctrl.alloc(ncmds * nlb_max * ns.lba_size) as rbuf,
            ):
                w, r = wbuf.array, rbuf.array
                w[:] = _rand(rng, w.size)
                # distinct random slots so writes never overlap within the thread's region
                slots = rng.choice(region // nlb_max, size=ncmds, replace=False)
                plan = [(base + int(s) * nlb_max, int(rng.integers(1, nlb_max + 1))) for s in slots]
                done = 0
                for i, (slba, nlb) in enumerate(plan):
                    while q.outstanding >= depth - 1:
                        done += sum(1 for c in q.poll(timeout=1) if c.check())
                    q.submit_write(ns, slba, nlb, wbuf, offset=i * nlb_max * ns.lba_size, tag=i)
                done += len(q.wait_all(timeout=10, check=True))
                assert done == ncmds
                for i, (slba, nlb) in enumerate(plan):
                    while q.outstanding >= depth - 1:
                        q.poll(timeout=1)
                    q.submit_read(ns, slba, nlb, rbuf, offset=i * nlb_max * ns.lba_size, tag=i)
                q.wait_all(timeout=10, check=True)
                for i, (slba, nlb) in enumerate(plan):
                    o = i * nlb_max * ns.lba_size
                    n = nlb * ns.lba_size
                    assert np.array_equal(r[o : o + n], w[o : o + n]), (k, i, slba, nlb)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


# --- PRP edge cases: every offset class x 1, 2 and many pages ---

OFFSETS = [0, 4, 512, 2048, PAGE - 512, PAGE - 4, PAGE, PAGE + 512]
SIZES = [512, 1024, PAGE, PAGE + 512, 2 * PAGE, 2 * PAGE + 512, 3 * PAGE, 9 * PAGE + 512]


@pytest.mark.parametrize("offset", OFFSETS)
def test_prp_offsets_and_lengths(ctrl, ns, offset):
    rng = np.random.default_rng(offset)
    with ctrl.qpair(depth=32) as q, ctrl.alloc(offset + max(SIZES) + PAGE) as buf:
        slba = 1000 + offset
        for size in SIZES:
            nlb = size // ns.lba_size
            data = _rand(rng, size)
            buf.array[:] = 0
            buf.array[offset : offset + size] = data
            q.submit_write(ns, slba, nlb, buf, offset=offset)
            q.wait_all(timeout=5, check=True)
            assert np.array_equal(ns.read(slba, nlb), data), (offset, size)
            buf.array[:] = 0xEE
            q.submit_read(ns, slba, nlb, buf, offset=offset)
            q.wait_all(timeout=5, check=True)
            a = buf.array
            assert np.array_equal(a[offset : offset + size], data), (offset, size)
            assert (a[:offset] == 0xEE).all() and (a[offset + size :] == 0xEE).all(), "wrote outside the span"


@pytest.mark.parametrize("offset", [0, 4, 512, PAGE - 4])
def test_exactly_mdts_and_mdts_plus_one(ctrl, ns, offset):
    mdts = ctrl.mdts_bytes
    assert mdts == 64 * 1024 == ctrl.max_transfer
    nlb = mdts // ns.lba_size
    rng = np.random.default_rng(7)
    with ctrl.qpair(depth=8) as q, ctrl.alloc(offset + mdts + ns.lba_size) as buf:
        data = _rand(rng, mdts)
        buf.array[offset : offset + mdts] = data
        q.submit_write(ns, 5000, nlb, buf, offset=offset)
        q.wait_all(timeout=5, check=True)
        assert np.array_equal(ns.read(5000, nlb), data)
        with pytest.raises(ValueError, match=r"nlb: 129 blocks \(66048 bytes\) exceed the controller's MDTS"):
            q.submit_read(ns, 5000, nlb + 1, buf, offset=offset)
        assert q.outstanding == 0


def test_mdts_plus_one_refused_by_the_controller_when_sent_raw(ctrl, ns):
    """Past the Python check, the emulated controller itself refuses a transfer over MDTS."""
    from nvmelab.driver import spec

    mdts = ctrl.mdts_bytes
    nlb = mdts // ns.lba_size + 1
    with ctrl.qpair(depth=4) as q, ctrl.alloc(mdts + PAGE) as buf:
        with pytest.raises(ValueError, match="largest transfer|nbytes"):
            q.submit_raw(dict(opc=spec.OPC_READ, nsid=1, cdw12=nlb - 1), buf, nbytes=nlb * ns.lba_size)


# --- queue full, phases, batching ---


def test_queue_full_then_recovers(ctrl, ns):
    depth = 8
    with ctrl.qpair(depth=depth) as q, ctrl.alloc(PAGE) as buf:
        for i in range(depth - 1):
            q.submit_read(ns, i, 1, buf)
        assert q.outstanding == depth - 1
        with pytest.raises(BlockingIOError, match="queue full"):
            q.submit_read(ns, 0, 1, buf)
        got = q.poll(max=2, timeout=5)
        assert 1 <= len(got) <= 2
        q.submit_read(ns, 0, 1, buf)  # room again
        rest = q.wait_all(timeout=5, check=True)
        assert len(got) + len(rest) == depth


def test_phase_wraps_with_minimum_depth(ctrl, ns):
    """depth 2: one command at a time, 50 times around a 2-entry ring."""
    with ctrl.qpair(depth=2) as q, ctrl.alloc(ns.lba_size) as buf:
        for i in range(50):
            buf.array[:] = i
            q.submit_write(ns, 7000 + i, 1, buf)
            (c,) = q.wait_all(timeout=5, check=True)
        assert (ns.read(7049, 1) == 49).all()


def test_batched_doorbell(ctrl, ns):
    with ctrl.qpair(depth=16, batch=4) as q, ctrl.alloc(PAGE) as buf:
        tags = [q.submit_read(ns, i, 1, buf) for i in range(6)]
        q.ring()
        got = q.wait_all(timeout=5, check=True)
        assert sorted(c.tag for c in got) == tags


def test_flush_write_zeroes_deallocate(ctrl, ns):
    ns.write(8000, np.full(8 * ns.lba_size, 0x5A, np.uint8))
    with ctrl.qpair(depth=8) as q:
        q.submit_write_zeroes(ns, 8000, 2, tag="wz")
        q.submit_deallocate(ns, 8004, 2, tag="dsm")
        q.submit_flush(ns, tag="fl")
        got = {c.tag: c for c in q.wait_all(timeout=5, check=True)}
        assert set(got) == {"wz", "dsm", "fl"}
        assert got["dsm"].command.startswith("Dataset Management")
    blocks = ns.read(8000, 8).reshape(8, ns.lba_size)
    assert (blocks[0:2] == 0).all() and (blocks[2:4] == 0x5A).all()
    assert (blocks[4:6] == 0).all() and (blocks[6:8] == 0x5A).all()


# --- buffer lifetimes and closed objects ---


def test_buffer_with_outstanding_command_cannot_be_closed(ctrl, ns):
    with ctrl.qpair(depth=4) as q:
        buf = ctrl.alloc(PAGE)
        q.submit_read(ns, 0, 1, buf)
        assert buf.outstanding == 1
        with pytest.raises(BufferError, match="outstanding"):
            buf.close()
        q.wait_all(timeout=5, check=True)
        assert buf.outstanding == 0
        buf.close()


def test_leaving_a_with_block_with_outstanding_commands_retires_the_buffer(ctrl, ns):
    ns.write(9000, np.full(ns.lba_size, 0x42, np.uint8))
    with ctrl.qpair(depth=4) as q:
        with ctrl.alloc(PAGE) as buf:
            view = buf.array
            q.submit_read(ns, 9000, 1, buf)
        assert buf.closed  # no BufferError: the command keeps the memory
        (c,) = q.wait_all(timeout=5, check=True)
        assert (view[: ns.lba_size] == 0x42).all()


def test_dropping_the_last_reference_under_a_command_is_safe(ctrl, ns):
    with ctrl.qpair(depth=4) as q:
        buf = ctrl.alloc(PAGE)
        q.submit_read(ns, 0, 8, buf)
        del buf  # the queue pair keeps the memory alive
        (c,) = q.wait_all(timeout=5)
        assert c.ok


def test_closing_a_qpair_with_outstanding_commands(ctrl, ns):
    q = ctrl.qpair(depth=8)
    buf = ctrl.alloc(PAGE)
    q.submit_read(ns, 0, 1, buf)
    q.close()
    q.close()
    assert q.closed and buf.outstanding == 0
    with pytest.raises(ClosedError, match="closed"):
        q.submit_read(ns, 0, 1, buf)
    with pytest.raises(ClosedError):
        q.poll()
    buf.close()


def test_submit_argument_checks(ctrl, ns):
    with ctrl.qpair(depth=4) as q, ctrl.alloc(PAGE) as buf:
        with pytest.raises(TypeError, match="buf: expected a DmaBuffer"):
            q.submit_read(ns, 0, 1, np.zeros(PAGE, np.uint8))
        with pytest.raises(ValueError, match="buf: offset 3584 \\+ 1024 bytes exceeds"):
            q.submit_read(ns, 0, 2, buf, offset=PAGE - 512)
        with pytest.raises(ValueError, match="offset: 2 is not dword aligned"):
            q.submit_read(ns, 0, 1, buf, offset=2)
        with pytest.raises(ValueError, match="slba"):
            q.submit_read(ns, ns.nsze, 1, buf)
        with pytest.raises(TypeError, match="ns: expected a Namespace"):
            q.submit_read(1, 0, 1, buf)
        with pytest.raises(ValueError, match="max"):
            q.poll(max=0)
        with pytest.raises(ValueError, match="timeout"):
            q.poll(timeout=-1)
        assert q.outstanding == 0


def test_qpair_depth_limits(ctrl):
    with pytest.raises(ValueError, match="depth"):
        ctrl.qpair(depth=1)
    with pytest.raises(ValueError, match="depth: 1000000 is outside"):
        ctrl.qpair(depth=1_000_000)
    with pytest.raises(ValueError, match="timeout"):
        ctrl.qpair(timeout=0)


def test_namespace_of_another_controller_is_refused():
    with nvmelab.open("emu://?ndev=2&nsze=1MiB") as t:
        with t[0].qpair(depth=4) as q, t.alloc(PAGE) as buf:
            with pytest.raises(ValueError, match="another controller"):
                q.submit_read(t[1].namespace(1), 0, 1, buf)
