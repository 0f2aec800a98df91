# SPDX-License-Identifier: BSD-3-Clause
"""The driver's IOMMU per buffer (issue 33, item 5): a raw command's PRPs are admitted only into the
user's data buffers, never into the queue's own rings or PRP-list pages, and a refused command leaves
the queue working.

Before: PRPs were checked only by the emulator against its DMA windows, and every DMA object of the
target is a window, the queue's SQ/CQ rings and PRP-list pages included. A PRP aimed just past a
buffer (or anywhere into the queue's memory) was admitted, and a Read there could overwrite SQEs and
leave the queue refusing later submits. Each case below raised nothing then (the command went to the
controller); now each is refused at submit with ValueError naming the PRP and its address, takes no
command slot (``outstanding`` stays 0), and a normal write + read on the same queue works after it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import nvmelab
from nvmelab.driver import spec

PAGE = 4096
NPAGES = 4


@pytest.fixture()
def env():
    with nvmelab.open("emu://?nsze=4MiB&mdts=64KiB") as t:
        c = t[0]
        with c.qpair(depth=8, timeout=2) as q, c.alloc(NPAGES * PAGE) as buf:
            yield c, c.namespace(1), q, buf


def _read(prp1: int, prp2: int = 0, nbytes: int = PAGE, **kw) -> dict:
    return dict(opc=spec.OPC_READ, nsid=1, prp1=prp1, prp2=prp2, cdw12=nbytes // 512 - 1, **kw)


def _still_works(ns, q, buf, seed: int) -> None:
    """A normal Write then Read on the same queue: both complete, the data round-trips."""
    assert q.outstanding == 0
    data = np.random.default_rng(seed).integers(0, 256, 2 * PAGE, dtype=np.uint8)
    buf.array[: 2 * PAGE] = data
    q.submit_write(ns, slba=16, nlb=2 * PAGE // ns.lba_size, buf=buf, offset=0)
    q.wait_all(timeout=5, check=True)
    buf.array[:] = 0
    q.submit_read(ns, slba=16, nlb=2 * PAGE // ns.lba_size, buf=buf, offset=PAGE)
    q.wait_all(timeout=5, check=True)
    assert (buf.array[PAGE : 3 * PAGE] == data).all()
    assert q.outstanding == 0


def _refused(q, sqe: dict, what: str, addr: int | None = None, buf=None, nbytes=None) -> str:
    with pytest.raises(ValueError, match=re.escape(what)) as e:
        q.submit_raw(sqe, buf, nbytes=nbytes)
    msg = str(e.value)
    if addr is not None:
        assert f"0x{addr:x}" in msg, msg
    assert q.outstanding == 0, "a refused command took a command slot"
    return msg


def test_prp1_just_past_the_end_of_a_buffer(env):
    _, ns, q, buf = env
    end = buf.iova(0) + NPAGES * PAGE
    _refused(q, _read(end), "PRP1", end)
    _still_works(ns, q, buf, 1)


def test_prp1_inside_the_sq_ring(env):
    _, ns, q, buf = env
    sq, sq_bytes = q.memory["sq"]
    assert sq_bytes == q.depth * spec.SQE_SIZE
    for addr in (sq, sq + 3 * spec.SQE_SIZE):
        msg = _refused(q, _read(addr), "PRP1", addr)
        assert "SQ ring" in msg, msg
        _still_works(ns, q, buf, addr)


def test_prp1_inside_the_cq_ring(env):
    _, ns, q, buf = env
    cq, _ = q.memory["cq"]
    msg = _refused(q, _read(cq), "PRP1", cq)
    assert "CQ ring" in msg, msg
    _still_works(ns, q, buf, 2)


def test_prp1_inside_a_prp_list_page(env):
    _, ns, q, buf = env
    lists, nbytes = q.memory["prp_lists"]
    assert nbytes == (q.depth - 1) * PAGE
    for addr in (lists, lists + PAGE + 64):
        msg = _refused(q, _read(addr), "PRP1", addr)
        assert "PRP-list page" in msg, msg
        _still_works(ns, q, buf, addr)


def test_prp_list_entry_out_of_bounds(env):
    _, ns, q, buf = env
    sq, _ = q.memory["sq"]
    lst = buf.array[3 * PAGE : 4 * PAGE].view(np.uint64)
    for bad in (buf.iova(0) + NPAGES * PAGE, sq, 0xDEAD0000):
        lst[:2] = [buf.iova(PAGE), bad]  # three pages: PRP1 + two list entries, the second bad
        msg = _refused(q, _read(buf.iova(0), buf.iova(3 * PAGE), 3 * PAGE), "PRP-list entry 1", bad)
        assert "PRP2" not in msg
        _still_works(ns, q, buf, bad)


def test_prp_list_itself_in_the_queue_memory(env):
    """PRP2 as a list pointer into the queue's own PRP-list page: the controller would read the driver's list."""
    _, ns, q, buf = env
    lists, _ = q.memory["prp_lists"]
    msg = _refused(q, _read(buf.iova(0), lists, 3 * PAGE), "PRP list", lists)
    assert "PRP-list page" in msg, msg
    _still_works(ns, q, buf, 3)


def test_a_length_that_runs_past_the_buffer_end(env):
    _, ns, q, buf = env
    # no buffer given: PRP1 on the last page, the second page (PRP2) just past the end
    end = buf.iova(0) + NPAGES * PAGE
    _refused(q, _read(buf.iova((NPAGES - 1) * PAGE), end, 2 * PAGE), "PRP2", end)
    _still_works(ns, q, buf, 4)
    # a buffer given: the SQE's NLB moves more than nbytes of it
    msg = _refused(q, _read(0, 0, 2 * PAGE), "moves 8192 bytes but buf gives 4096", buf=buf, nbytes=PAGE)
    assert "Read" in msg, msg
    _still_works(ns, q, buf, 5)


def test_address_arithmetic_does_not_wrap(env):
    """A page at the top of the 64-bit space: [start, start + len) must not wrap to a small address."""
    _, ns, q, buf = env
    top = 2**64 - PAGE
    _refused(q, _read(top, buf.iova(0), 2 * PAGE), "PRP1", top)
    _still_works(ns, q, buf, 6)


def test_unknown_opcode_is_checked_for_the_largest_transfer(env):
    """An opcode the driver cannot size may move up to the largest transfer: its PRP1 must lie in a buffer."""
    c, ns, q, buf = env
    sq, _ = q.memory["sq"]
    _refused(q, dict(opc=0x7E, nsid=1, prp1=sq), "PRP1", sq)
    _still_works(ns, q, buf, 7)


def test_commands_inside_the_buffers_are_still_admitted(env):
    """No over-refusal: PRP1 + a PRP list (in the buffer) and a Flush with junk PRPs go to the controller."""
    _, ns, q, buf = env
    data = np.arange(3 * PAGE, dtype=np.uint32).view(np.uint8)[: 3 * PAGE]
    buf.array[: 3 * PAGE] = data
    q.submit_write(ns, slba=64, nlb=3 * PAGE // ns.lba_size, buf=buf, offset=0)
    q.wait_all(timeout=5, check=True)
    buf.array[:] = 0
    lst = buf.array[3 * PAGE : 4 * PAGE].view(np.uint64)
    lst[:2] = [buf.iova(PAGE), buf.iova(2 * PAGE)]
    q.submit_raw(_read(buf.iova(0), buf.iova(3 * PAGE), 3 * PAGE, cdw10=64))
    lst[:2] = 0  # the controller reads the driver's copy of the list, not this one
    q.wait_all(timeout=5, check=True)
    assert (buf.array[: 3 * PAGE] == data).all()
    sq, _ = q.memory["sq"]
    q.submit_raw(dict(opc=spec.OPC_FLUSH, nsid=1, prp1=sq))  # moves no data: its PRPs are never read
    q.wait_all(timeout=5, check=True)


# ---- admin_raw: the same IOMMU for the SQE's own PRPs (with buf, the data is bounced by the driver) ----

IDENTIFY, GET_LOG, GET_FEATURES = 0x06, 0x02, 0x0A
CREATE_CQ, CREATE_SQ, DELETE_CQ = 0x05, 0x01, 0x04


def _admin_refused(c, sqe: dict, what: str, addr: int | None = None, buf=None) -> str:
    with pytest.raises(ValueError, match=re.escape(what)) as e:
        c.admin_raw(sqe, buf)
    msg = str(e.value)
    assert msg.startswith("admin_raw: refused: "), msg
    if addr is not None:
        assert f"0x{addr:x}" in msg, msg
    assert c.admin_raw(dict(opc=GET_FEATURES, cdw10=7), check=True).cdw0 != 0  # the admin queue still works
    return msg


def test_admin_data_into_a_queue_is_refused(env):
    c, ns, q, buf = env
    sq, _ = q.memory["sq"]
    lists, _ = q.memory["prp_lists"]
    _admin_refused(c, dict(opc=IDENTIFY, cdw10=1, prp1=sq), "PRP1", sq)  # 4 KiB over the I/O queue's SQEs
    _admin_refused(c, dict(opc=GET_LOG, nsid=0xFFFFFFFF, cdw10=2 | (127 << 16), prp1=lists), "PRP1", lists)
    # a log page that runs past the end of its buffer: 512 bytes from 256 before the end (PRP2 0)
    start = buf.iova(0) + NPAGES * PAGE - 256
    _admin_refused(c, dict(opc=GET_LOG, nsid=0xFFFFFFFF, cdw10=2 | (127 << 16), prp1=start), "PRP2 0x0")
    _still_works(ns, q, buf, 8)


def test_admin_queue_over_driver_memory_is_refused(env):
    """Create I/O CQ/SQ: the controller would write CQEs into (or fetch SQEs from) the driver's own ring."""
    c, ns, q, buf = env
    cq, _ = q.memory["cq"]
    _admin_refused(c, dict(opc=CREATE_CQ, prp1=cq, cdw10=7 | (15 << 16), cdw11=1), "PRP1 (the queue)", cq)
    # a queue that starts in the buffer and runs past its end: 128 entries of 64 bytes from its last page
    last = buf.iova((NPAGES - 1) * PAGE)
    _admin_refused(c, dict(opc=CREATE_SQ, prp1=last, cdw10=7 | (127 << 16), cdw11=1 | (1 << 16)), "runs past", last)
    # buf would be the driver's admin bounce buffer, kept by the controller after the command
    _admin_refused(c, dict(opc=CREATE_CQ, cdw10=7 | (15 << 16), cdw11=1), "cannot be buf", buf=buf)
    _admin_refused(c, dict(opc=CREATE_CQ, prp1=buf.iova(0), cdw10=7 | (15 << 16), cdw11=0), "PC=0")
    # inside a data buffer it is admitted: created, then deleted again
    assert c.admin_raw(dict(opc=CREATE_CQ, prp1=buf.iova(PAGE), cdw10=7 | (15 << 16), cdw11=1)).ok
    assert c.admin_raw(dict(opc=DELETE_CQ, cdw10=7)).ok
    _still_works(ns, q, buf, 9)
