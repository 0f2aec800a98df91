# SPDX-License-Identifier: BSD-3-Clause
"""NVMe status and fault handling through the Python API: every validation status the emulated
controller returns surfaces as NvmeError with the spec's name; fault injection -> TimeoutError ->
reset() -> the controller works again."""

from __future__ import annotations

import pickle
import threading
import time

import numpy as np
import pytest

import nvmelab
from nvmelab.driver import spec
from nvmelab.driver.errors import ClosedError, NvmeError

URI = "emu://?ndev=1&nsze=8MiB&mdts=64KiB"
PAGE = 4096


@pytest.fixture()
def ctrl():
    with nvmelab.open(URI) as t:
        yield t[0]


def _raw_io(ctrl, sqe, buf=None, nbytes=None):
    with ctrl.qpair(depth=4, timeout=2) as q:
        q.submit_raw(sqe, buf, nbytes=nbytes)
        (c,) = q.wait_all(timeout=5)
        return c


# --- I/O validation statuses (raw SQEs go past the Python checks on purpose) ---


def test_io_validation_statuses(ctrl):
    ns = ctrl.namespace(1)
    bs = ns.lba_size
    with ctrl.alloc(2 * PAGE) as buf:
        iova = buf.iova()
        cases = [
            ("Invalid Command Opcode", dict(opc=0x7E, nsid=1), buf, bs),  # may move data: given a buffer
            ("Invalid Namespace or Format", dict(opc=spec.OPC_READ, nsid=99), buf, bs),
            ("LBA Out of Range", dict(opc=spec.OPC_READ, nsid=1, cdw10=ns.nsze), buf, bs),
            ("LBA Out of Range", dict(opc=spec.OPC_WRITE_ZEROES, nsid=1, cdw10=ns.nsze - 1, cdw12=1), None, None),
            ("Invalid Field in Command", dict(opc=spec.OPC_READ, nsid=1, flags=1), buf, bs),  # FUSE set
            ("PRP Offset Invalid", dict(opc=spec.OPC_READ, nsid=1, prp1=iova + 2), None, None),
            (
                "PRP Offset Invalid",
                dict(opc=spec.OPC_READ, nsid=1, cdw12=PAGE // bs, prp1=iova + 512, prp2=iova + PAGE + 8),
                None,
                None,
            ),
        ]
        for name, sqe, b, n in cases:
            c = _raw_io(ctrl, sqe, b, n)
            assert not c.ok, (name, sqe)
            assert c.name == name, (name, c)
            assert isinstance(c.error, NvmeError)
            assert c.error.name == name and c.error.sct == c.sct and c.error.sc == c.sc
            assert name in str(c.error)
            with pytest.raises(NvmeError, match=name):
                c.check()
    # PRP1 0 is in no DMA buffer: the driver's IOMMU refuses it before the controller sees it
    # (tests/test_driver_iommu.py), with the PRP and address named and the queue left as it was
    with ctrl.qpair(depth=4, timeout=2) as q:
        with pytest.raises(ValueError, match=r"PRP1 0x0 \(512 bytes\) is in no DMA buffer"):
            q.submit_raw(dict(opc=spec.OPC_READ, nsid=1, prp1=0))
        assert q.outstanding == 0
    # the controller still works after all of that
    ns.write(0, np.full(bs, 3, np.uint8))
    assert (ns.read(0, 1) == 3).all()


def test_admin_validation_statuses(ctrl):
    cases = [
        ("Invalid Command Opcode", dict(opc=0xC3)),
        ("Invalid Queue Identifier", dict(opc=spec._native.spec.ADM_DELETE_SQ, cdw10=999)),
        ("Invalid Queue Identifier", dict(opc=spec._native.spec.ADM_DELETE_CQ, cdw10=999)),
        ("Invalid Field in Command", dict(opc=spec._native.spec.ADM_IDENTIFY, cdw10=0xEE)),
    ]
    buf = ctrl.alloc(PAGE)  # Identify and an unknown opcode may move data: a buffer the driver's IOMMU admits
    for name, sqe in cases:
        c = ctrl.admin_raw(sqe, buf)
        assert c.name == name and not c.ok, (name, c)
        assert c.command.startswith("admin ")
        with pytest.raises(NvmeError, match=name):
            ctrl.admin_raw(sqe, buf, check=True)
    buf.close()
    ok = ctrl.admin_raw(dict(opc=spec._native.spec.ADM_GET_FEATURES, cdw10=7), check=True)
    assert ok.ok and ok.cdw0 != 0  # Number of Queues granted


def test_admin_queue_management_statuses(ctrl):
    """Create/Delete I/O queue statuses, with queue identifiers the driver is not using."""
    S = spec._native.spec
    idf = ctrl.identify()
    free_qid = idf["max_qpairs"]  # the driver hands out low qids first
    too_big = idf["max_depth"] + 1
    # the queues' memory (PRP1) and the log page (buf) in data buffers: the driver's IOMMU admits them
    with ctrl.qpair(depth=4) as q, ctrl.alloc(PAGE) as buf, ctrl.alloc(too_big * spec.SQE_SIZE) as qmem:
        base = qmem.iova(0)
        cases = [
            (
                "Invalid Queue Size",
                dict(opc=S.ADM_CREATE_CQ, prp1=base, cdw10=free_qid | ((too_big - 1) << 16), cdw11=1),
            ),
            (
                "Completion Queue Invalid",
                dict(opc=S.ADM_CREATE_SQ, prp1=base, cdw10=free_qid | (1 << 16), cdw11=1 | (free_qid << 16)),
            ),
            ("Invalid Queue Deletion", dict(opc=S.ADM_DELETE_CQ, cdw10=q.qid)),  # its SQ still exists
            ("Invalid Log Page", dict(opc=0x02, cdw10=0x7F | (1 << 16))),
        ]
        for name, sqe in cases:
            c = ctrl.admin_raw(sqe, buf if sqe["opc"] == 0x02 else None)
            assert c.name == name and isinstance(c.error, NvmeError), (name, c)
        q.wait_all(timeout=1)
    with ctrl.qpair(depth=4) as q2:  # queue management still works
        assert q2.qid >= 1


def test_capacity_exceeded():
    """A thin namespace (ncap < nsze) fills up: Capacity Exceeded, reported by name."""
    with nvmelab.open("emu://?nsze=8MiB&ncap=2MiB") as c:
        ns = c.namespace(1)
        per_mib = (1 << 20) // ns.lba_size
        block = np.ones(ns.lba_size, np.uint8)
        ns.write(0, block)
        ns.write(per_mib, block)
        with pytest.raises(NvmeError, match="Capacity Exceeded") as ei:
            ns.write(5 * per_mib, block)
        assert ei.value.name == "Capacity Exceeded" and ei.value.dnr
        assert (ns.read(per_mib, 1) == 1).all()


def test_nvme_error_attributes_and_pickle():
    e = NvmeError(0, 0x80, "LBA Out of Range", True, "Read nsid=1 slba=9 nlb=1")
    assert (e.sct, e.sc, e.name, e.dnr) == (0, 0x80, "LBA Out of Range", True)
    assert "Read nsid=1 slba=9 nlb=1" in str(e) and "LBA Out of Range" in str(e) and "DNR" in str(e)
    e2 = pickle.loads(pickle.dumps(e))
    assert str(e2) == str(e) and e2.name == e.name
    assert spec.status_name(0, 0x80) == "LBA Out of Range"


# --- fault injection ---


def test_injected_status_on_sync_io(ctrl):
    ns = ctrl.namespace(1)
    ctrl.emu_inject("status", sct=2, sc=0x81, dnr=True, qid=-1)
    with pytest.raises(NvmeError) as ei:
        ns.read(12, 2)
    e = ei.value
    assert (e.sct, e.sc, e.name, e.dnr) == (2, 0x81, "Unrecovered Read Error", True)
    assert "Read nsid=1 slba=12 nlb=2" in str(e)
    ns.read(12, 2)  # one command only


def test_injected_status_on_qpair(ctrl):
    ns = ctrl.namespace(1)
    with ctrl.qpair(depth=8) as q, ctrl.alloc(PAGE) as buf:
        ctrl.emu_inject("status", nth=2, sct=0, sc=0x80, qid=q.qid)
        for i in range(3):
            q.submit_read(ns, i, 1, buf, tag=i)
        got = {c.tag: c for c in q.wait_all(timeout=5)}
        assert got[0].ok and got[2].ok
        assert got[1].name == "LBA Out of Range" and isinstance(got[1].error, NvmeError)
        assert got[1].error.command == "Read nsid=1 slba=1 nlb=1"


def test_drop_timeout_reset_works_again(ctrl):
    ns = ctrl.namespace(1)
    data = np.arange(ns.lba_size, dtype=np.uint32).astype(np.uint8)
    ns.write(20, data)
    q = ctrl.qpair(depth=8, timeout=0.2)
    buf = ctrl.alloc(PAGE)
    ctrl.emu_inject("drop", qid=q.qid)
    q.submit_read(ns, 20, 1, buf, tag="lost")
    t0 = time.monotonic()
    (c,) = q.wait_all(timeout=5)
    assert time.monotonic() - t0 < 3
    assert c.tag == "lost" and not c.ok and isinstance(c.error, TimeoutError)
    with pytest.raises(TimeoutError, match="Read nsid=1 slba=20 nlb=1"):
        c.check()
    ctrl.reset()
    assert q.closed
    with pytest.raises(ClosedError, match="reset"):
        q.submit_read(ns, 0, 1, buf)
    assert np.array_equal(ns.read(20, 1), data)  # data survives the reset
    with ctrl.qpair(depth=8) as q2:
        q2.submit_read(ns, 20, 1, buf)
        q2.wait_all(timeout=5, check=True)
        assert np.array_equal(buf.array[: ns.lba_size], data)
    buf.close()


def test_controller_fatal_status_then_reset(ctrl):
    ns = ctrl.namespace(1)
    with ctrl.qpair(depth=4, timeout=0.2) as q, ctrl.alloc(PAGE) as buf:
        ctrl.emu_inject("cfs")
        q.submit_read(ns, 0, 1, buf)
        (c,) = q.wait_all(timeout=5)
        assert not c.ok and isinstance(c.error, OSError)
    ctrl.reset()
    ns.write(1, np.full(ns.lba_size, 4, np.uint8))
    assert (ns.read(1, 1) == 4).all()


def test_delayed_completion(ctrl):
    ns = ctrl.namespace(1)
    with ctrl.qpair(depth=4, timeout=5) as q, ctrl.alloc(PAGE) as buf:
        ctrl.emu_inject("delay", delay_ms=150, qid=q.qid)
        t0 = time.monotonic()
        q.submit_read(ns, 0, 1, buf)
        assert q.poll(timeout=0) == []
        (c,) = q.wait_all(timeout=5, check=True)
        assert time.monotonic() - t0 >= 0.14


def test_qpair_used_from_two_threads_is_detected(ctrl):
    ns = ctrl.namespace(1)
    with ctrl.qpair(depth=4, timeout=5) as q, ctrl.alloc(PAGE) as buf:
        ctrl.emu_inject("delay", delay_ms=400, qid=q.qid)
        q.submit_read(ns, 0, 1, buf)
        started = threading.Event()
        result: list = []

        def poller():
            started.set()
            result.extend(q.poll(timeout=3))

        t = threading.Thread(target=poller)
        t.start()
        started.wait()
        time.sleep(0.1)  # the poller is inside poll (GIL released)
        with pytest.raises(RuntimeError, match="two threads"):
            q.submit_read(ns, 1, 1, buf)
        t.join()
        assert len(result) == 1 and result[0].ok


def test_emu_inject_bad_arguments(ctrl):
    with pytest.raises(ValueError, match="kind: 'explode'"):
        ctrl.emu_inject("explode")
    with pytest.raises(ValueError, match="nth"):
        ctrl.emu_inject("drop", nth=0)
    with pytest.raises(ValueError, match="sc"):
        ctrl.emu_inject("status", sc=256)
    with pytest.raises(TypeError, match="kind"):
        ctrl.emu_inject(3)


def test_reset_after_close_raises():
    t = nvmelab.open(URI)
    c = t[0]
    t.close()
    with pytest.raises(ClosedError):
        c.reset()
    with pytest.raises(ClosedError):
        c.emu_inject("drop")


def test_ctrl_c_interrupts_a_blocking_poll(ctrl, sigint):
    import os
    import signal

    ns = ctrl.namespace(1)
    with ctrl.qpair(depth=4, timeout=10) as q, ctrl.alloc(PAGE) as buf:
        ctrl.emu_inject("drop", qid=q.qid)
        q.submit_read(ns, 0, 1, buf)
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            q.poll(timeout=8)
        assert time.monotonic() - t0 < 2
        timer.join()
    # closing the queue pair with the lost command outstanding is fine; the controller still works
    assert (ns.read(0, 1) == ns.read(0, 1)).all()


def test_ram_namespaces_beyond_the_memory_share_are_refused_with_the_numbers():
    """4 TiB of RAM namespaces that hold data used to be accepted (issue 21); sparse ones still are."""
    with pytest.raises(
        ValueError, match=r"namespaces total 4 TiB of RAM .* more than 75 % of this host's [0-9.]+ [GT]iB"
    ):
        nvmelab.open("emu://?nsze=4TiB")
    with nvmelab.open("emu://?nsze=4TiB&data=none") as t:
        assert t[0].namespace(1).nbytes == 4 << 40


@pytest.mark.parametrize("uri", ["emu://?nsze=4MiB\x00&ndev=99", "emu://\x00"])
def test_uri_with_a_nul_is_refused_naming_it(uri):
    """Text after an embedded NUL used to be dropped silently (issue 21): the URI opened as its prefix."""
    with pytest.raises(ValueError, match="contains a NUL character at offset"):
        nvmelab.open(uri)


def test_uri_that_is_not_utf8_text_is_one_clear_error():
    """A str with undecodable bytes (surrogateescape) used to produce a pybind11 signature dump."""
    with pytest.raises(ValueError, match="not (valid|UTF-8) text") as exc:
        nvmelab.open(b"emu://?nsze=\xff".decode("utf-8", "surrogateescape"))
    assert "incompatible" not in str(exc.value)


def test_engine_uris_refuse_nul_too():
    from nvmelab.engines import perf

    with pytest.raises(ValueError, match="NUL character"):
        perf.open_target("file:///tmp/x\x00y", "psync")
    with pytest.raises(TypeError, match="expected (a )?str, got bytes"):
        perf.open_target(b"file:///tmp/x", "psync")
