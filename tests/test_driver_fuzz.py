# SPDX-License-Identifier: BSD-3-Clause
"""Hypothesis-driven bad input to the Python driver API: random URIs, LBAs, block counts, buffers,
types and raw SQEs. Only ValueError / TypeError / NvmeError (or success) may come out; never a crash
and never another exception type."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvmelab
from nvmelab.driver import spec
from nvmelab.driver.errors import NvmeError

ALLOWED = (ValueError, TypeError, NvmeError)
FUZZ = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# keys of emu:// plus unknown ones; "backing" is left out so that no file is ever created
KEYS = [
    "ndev",
    "nns",
    "nsze",
    "ncap",
    "lbads",
    "mdts",
    "mqes",
    "nioq",
    "dstrd",
    "profile",
    "scale",
    "mode",
    "seed",
    "ooo",
    "data",
    "lat",
    "iops",
    "bw",
    "qiops",
    "fetch",
    "link",
    "bogus",
    "NSZE",
    "",
]
VALUES = [
    "",
    "0",
    "1",
    "2",
    "3",
    "-1",
    "512",
    "4096",
    "9",
    "12",
    "13",
    "1MiB",
    "64MiB",
    "12Q",
    "1e3",
    "0x10",
    "abc",
    "inline",
    "thread",
    "null",
    "pm1753",
    "1,2",
    "1,,2",
    "%41",
    "%zz",
    "4KiB",
    "1ms",
    "5us",
    "1GiB/s",
    "99999999999999999999",
    "true",
    "off",
    " 1",
    "1 ",
]


@st.composite
def uris(draw):
    if draw(st.booleans()):
        return draw(st.text(max_size=40))
    scheme = draw(st.sampled_from(["emu", "emu", "emu", "EMU", "pci", "file", "gpu-emu", "x"]))
    params = draw(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)), max_size=4))
    q = "&".join(f"{k}={v}" if draw(st.booleans()) or not v else k for k, v in params)
    sep = draw(st.sampled_from(["://?", "://", ":/?", "://host?"]))
    return f"{scheme}{sep}{q}"


@FUZZ
@given(uri=uris())
def test_random_uris(uri):
    if uri.startswith(("pci", "file", "blk")):
        return  # never touch a real device or file from a fuzz test
    try:
        t = nvmelab.open(uri)
    except ALLOWED:
        return
    except OSError as exc:  # a valid URI whose resources the machine lacks (e.g. memory): named, not a crash
        assert str(exc)
        return
    with t:
        assert len(t) >= 1


@pytest.fixture(scope="module")
def env():
    with nvmelab.open("emu://?nsze=4MiB&mdts=32KiB") as t:
        c = t[0]
        with c.qpair(depth=8, timeout=2) as q, c.alloc(3 * 4096) as buf:
            yield c, c.namespace(1), q, buf


def anything():
    return st.one_of(
        st.integers(min_value=-(2**70), max_value=2**70),
        st.integers(min_value=-2, max_value=9000),
        st.floats(allow_nan=True),
        st.text(max_size=5),
        st.none(),
        st.booleans(),
        st.binary(max_size=600),
        st.just(np.int64(3)),
        st.just(np.uint8(1)),
        st.just([1, 2]),
    )


def data_values():
    return st.one_of(
        st.binary(max_size=2048),
        st.integers(min_value=0, max_value=4096).map(lambda n: np.zeros(n, np.uint8)),
        st.integers(min_value=0, max_value=1024).map(lambda n: np.zeros(n, np.float64)),
        st.integers(min_value=0, max_value=2048).map(lambda n: bytearray(n)),
        st.just(np.zeros((2, 512), np.uint8)),
        st.just(np.zeros(2048, np.uint8)[::2]),
        st.text(max_size=8),
        st.none(),
        st.integers(),
    )


@FUZZ
@given(
    op=st.sampled_from(
        [
            "read",
            "write",
            "write_zeroes",
            "deallocate",
            "submit_read",
            "submit_write",
            "submit_write_zeroes",
            "submit_deallocate",
            "alloc",
            "poll",
            "namespace",
            "qpair",
        ]
    ),
    a=anything(),
    b=anything(),
    data=data_values(),
    off=anything(),
)
def test_random_api_arguments(env, op, a, b, data, off):
    c, ns, q, buf = env
    try:
        if op == "read":
            ns.read(a, b)
        elif op == "write":
            ns.write(a, data)
        elif op == "write_zeroes":
            ns.write_zeroes(a, b)
        elif op == "deallocate":
            ns.deallocate(a, b)
        elif op == "submit_read":
            q.submit_read(ns, a, b, buf, offset=off)
        elif op == "submit_write":
            q.submit_write(ns, a, b, buf if isinstance(off, int) else data, offset=off if isinstance(off, int) else 0)
        elif op == "submit_write_zeroes":
            q.submit_write_zeroes(ns, a, b)
        elif op == "submit_deallocate":
            q.submit_deallocate(ns, a, b)
        elif op == "alloc":
            if isinstance(a, (int, np.integer)) and not isinstance(a, bool) and a > 0:
                return  # valid sizes are not the point here (a huge one may be MemoryError)
            c.alloc(a)
        elif op == "poll":
            q.poll(max=a, timeout=0)
        elif op == "namespace":
            c.namespace(a)
        elif op == "qpair":
            with c.qpair(depth=a, batch=1):
                pass
    except ALLOWED:
        pass
    finally:
        for cpl in q.wait_all(timeout=5):
            assert cpl.ok or isinstance(cpl.error, NvmeError)


sqe_fields = st.fixed_dictionaries(
    {
        "opc": st.integers(0, 255),
        "nsid": st.sampled_from([0, 1, 2, 0xFFFFFFFF, 7]),
        "flags": st.sampled_from([0, 0, 1, 2, 0x40]),
        "cdw10": st.integers(0, 2**32 - 1),
        "cdw11": st.sampled_from([0, 1, 2**32 - 1]),
        "cdw12": st.integers(0, 2**32 - 1),
        "cdw13": st.integers(0, 2**32 - 1),
        "prp1": st.sampled_from([0, 2, 4096, 0xDEAD0000, 2**63]),
    }
)


@FUZZ
@given(fields=sqe_fields)
def test_random_raw_io_sqes(env, fields):
    """Random I/O SQEs without a buffer: the controller answers each with a status, no crash."""
    c, ns, q, _ = env
    try:
        q.submit_raw(fields)
    except ValueError as e:  # the driver's IOMMU: a PRP outside every data buffer (issue 33)
        assert str(e).startswith("submit_raw: refused: "), e
        assert q.outstanding == 0
        return
    (cpl,) = q.wait_all(timeout=5)
    assert cpl.ok or isinstance(cpl.error, NvmeError), cpl
    if cpl.error is not None:
        assert cpl.name == spec.status_name(cpl.sct, cpl.sc)


@FUZZ
@given(fields=st.dictionaries(st.sampled_from(list(spec.SQE_FIELDS) + ["bogus"]), anything(), max_size=4))
def test_random_sqe_building(fields):
    try:
        raw = spec.sqe(**fields)
    except ALLOWED:
        return
    assert len(raw) == spec.SQE_SIZE
    assert {k: v for k, v in spec.sqe_fields(raw).items() if k in fields} == {k: int(v) for k, v in fields.items()}


# ---- the emulator's IOMMU: raw commands reach only DMA buffers (issue 21) --------------------------------
# Since issue 33 the driver's own IOMMU refuses at submit a raw I/O command whose PRPs leave the data buffers
# (tests/test_driver_iommu.py); these cases accept either refusal, the driver's or the emulator's.

PAGE = 4096
READ, WRITE, DSM = 0x02, 0x01, 0x09
IDENTIFY, GET_LOG, CREATE_CQ, CREATE_SQ = 0x06, 0x02, 0x05, 0x01
DATA_XFER_ERROR, INVALID_PRP_OFFSET = 0x04, 0x13


class _DriverRefused:
    """A raw command the driver's IOMMU refused at submit (it never reached the controller)."""

    ok = False

    def __init__(self, error: ValueError) -> None:
        self.error = error


def _raw_io(q, opc, prp1, prp2=0, slba=0, nlb=1, **kw):
    try:
        q.submit_raw({"opc": opc, "nsid": 1, "prp1": prp1, "prp2": prp2, "cdw10": slba, "cdw12": nlb - 1, **kw})
    except ValueError as e:
        assert str(e).startswith("submit_raw: refused: "), e
        assert q.outstanding == 0
        return _DriverRefused(e)
    (cpl,) = q.wait_all(timeout=5)
    return cpl


def _admin(c, sqe):
    try:
        return c.admin_raw(sqe)
    except ValueError as e:
        assert str(e).startswith("admin_raw: refused: "), e
        return _DriverRefused(e)


def _refused(cpl, sc=DATA_XFER_ERROR):
    if isinstance(cpl, _DriverRefused):
        assert "PRP" in str(cpl.error), cpl.error
        return
    assert not cpl.ok and isinstance(cpl.error, NvmeError), cpl
    assert (cpl.sct, cpl.sc) == (0, sc), cpl
    with pytest.raises(NvmeError, match="Data Transfer Error" if sc == DATA_XFER_ERROR else "PRP"):
        cpl.check()


@pytest.fixture()
def iommu_env():
    with nvmelab.open("emu://?nsze=4MiB&mdts=64KiB") as t:
        c = t[0]
        with c.qpair(depth=8, timeout=2) as q, c.alloc(16 * PAGE) as buf:
            ns = c.namespace(1)
            ns.write(0, np.full(16 * PAGE, 0x3C, np.uint8))
            yield c, ns, q, buf


def test_raw_read_to_wild_address_is_refused(iommu_env):
    """Used to segfault the interpreter: the emulator wrote a Read's data to 0xDEAD0000."""
    _, _, q, _ = iommu_env
    _refused(_raw_io(q, READ, 0xDEAD0000))


def test_raw_write_from_low_address_is_refused(iommu_env):
    """Used to segfault: a Write took its data from 0x1000."""
    _, _, q, _ = iommu_env
    _refused(_raw_io(q, WRITE, 0x1000))


def test_raw_read_into_numpy_array_is_refused_and_leaves_it_unchanged(iommu_env):
    """Used to complete successfully and overwrite the array: ordinary memory is no DMA window."""
    _, _, q, _ = iommu_env
    a = np.full(2 * PAGE, 0x77, np.uint8)
    addr = (a.ctypes.data + PAGE - 1) // PAGE * PAGE
    _refused(_raw_io(q, READ, addr, nlb=8))
    assert (a == 0x77).all()


def test_raw_read_with_prp_list_into_numpy_array_writes_nothing(iommu_env):
    """Used to fail with Data Transfer Error after writing the first 4 KiB (PRP1) anyway."""
    _, _, q, buf = iommu_env
    a = np.full(4 * PAGE, 0x77, np.uint8)
    target = (a.ctypes.data + PAGE - 1) // PAGE * PAGE
    lst = buf.array[8 * PAGE : 9 * PAGE].view(np.uint64)
    lst[0] = buf.iova(PAGE)
    lst[1] = target  # the second list entry points into the numpy array
    buf.array[: 4 * PAGE] = 0x11
    _refused(_raw_io(q, READ, buf.iova(0), buf.iova(8 * PAGE), nlb=24))  # 3 pages: PRP1 + 2 list entries
    assert (a == 0x77).all()
    assert (buf.array[: 4 * PAGE] == 0x11).all(), "a refused Read must not write its first pages either"


def test_raw_identify_and_dsm_with_wild_address_are_refused(iommu_env):
    """Used to segfault: Identify wrote 4 KiB to a wild PRP, DSM read its range list from one."""
    c, _, q, _ = iommu_env
    for prp1 in (0xDEAD0000, 0x1000, 2**47 - PAGE):
        cpl = _admin(c, {"opc": IDENTIFY, "nsid": 0, "prp1": prp1, "cdw10": 1})
        _refused(cpl)
        _refused(_raw_io(q, DSM, prp1, cdw11=4))
    cpl = _admin(c, {"opc": GET_LOG, "nsid": 0xFFFFFFFF, "prp1": 0xDEAD0000, "cdw10": 2 | (127 << 16)})
    _refused(cpl)


def test_create_io_cq_at_wild_address_is_refused(iommu_env):
    """Used to be accepted: the emulator would later post completions to 0xDEAD0000."""
    c, _, _, buf = iommu_env
    for base in (0xDEAD0000, 0x1000):
        cpl = _admin(c, {"opc": CREATE_CQ, "prp1": base, "cdw10": 7 | (15 << 16), "cdw11": 1})
        assert isinstance(cpl, _DriverRefused) or (not cpl.ok and isinstance(cpl.error, NvmeError)), cpl
        cpl = _admin(c, {"opc": CREATE_SQ, "prp1": base, "cdw10": 7 | (15 << 16), "cdw11": 1 | (1 << 16)})
        assert isinstance(cpl, _DriverRefused) or (not cpl.ok and isinstance(cpl.error, NvmeError)), cpl
    # a DMA buffer is a valid queue base: created, then deleted again
    cpl = _admin(c, {"opc": CREATE_CQ, "prp1": buf.iova(4 * PAGE), "cdw10": 7 | (15 << 16), "cdw11": 1})
    assert cpl.ok, cpl
    assert c.admin_raw({"opc": 0x04, "cdw10": 7}).ok  # Delete I/O CQ


def test_freed_buffer_is_no_longer_reachable(iommu_env):
    """A DMA buffer leaves the emulator's windows when it is freed (its address is refused after)."""
    c, _, q, _ = iommu_env
    with c.alloc(PAGE) as b:
        addr = b.iova(0)
        assert _raw_io(q, READ, addr).ok
    _refused(_raw_io(q, READ, addr))


# in-range commands (valid nsid, SLBA, NLB within MDTS) with wild, misaligned, list-crossing and
# window-straddling PRPs: each reaches the emulator's PRP walk; none may crash or write outside a buffer

WILD = [0, 0x1000, 0xDEAD0000, 2**47 - PAGE, 2**63]


@st.composite
def wild_prps(draw, npages):
    """(kind, offset, page, wild address, list slot): how the test builds PRP1/PRP2 in its buffer."""
    kind = draw(st.sampled_from(["wild", "misaligned", "edge", "numpy", "list_numpy", "list_wild", "list_cross", "ok"]))
    off = draw(st.integers(0, PAGE // 4 - 1)) * 4
    page = draw(st.integers(0, 7))
    return kind, off, page, draw(st.sampled_from(WILD)), draw(st.integers(0, npages))


@FUZZ
@given(
    opc=st.sampled_from([READ, WRITE, DSM, IDENTIFY, GET_LOG, CREATE_CQ, CREATE_SQ]),
    nlb=st.integers(1, 128),
    slba=st.integers(0, 4096),
    prps=wild_prps(npages=16),
)
def test_in_range_commands_with_wild_prps(iommu_env, opc, nlb, slba, prps):
    from hypothesis import event

    c, _, q, buf = iommu_env
    kind, off, page, wild, cut = prps
    canary = np.full(4 * PAGE, 0xC5, np.uint8)
    canary_page = (canary.ctypes.data + PAGE - 1) // PAGE * PAGE
    lst = buf.array[12 * PAGE : 14 * PAGE].view(np.uint64)
    lst[:] = [buf.iova(((i % 8) + 1) * PAGE) for i in range(len(lst))]
    prp1, prp2 = buf.iova(page * PAGE + off), buf.iova(12 * PAGE)  # PRP2: a data page or the PRP list
    if kind == "wild":
        prp1 = wild
    elif kind == "misaligned":
        prp1 = buf.iova(page * PAGE) + 1 + off % 3
    elif kind == "edge":  # starts in a buffer, runs on into a numpy array
        prp1, prp2 = buf.iova(9 * PAGE + off), canary_page
    elif kind == "numpy":
        prp1 = canary_page
    else:
        prp2 = buf.iova(12 * PAGE + (PAGE - 8 if kind == "list_cross" else 0))
        lst[min(cut, len(lst) - 1)] = canary_page if kind == "list_numpy" else wild
        if kind == "list_cross":
            lst[PAGE // 8 - 1] = buf.iova(13 * PAGE)  # chain to the second list page
    before = buf.array[: 12 * PAGE].copy()
    queue_checked = False
    if opc in (READ, WRITE, DSM):
        slba = min(slba, 8192 - nlb)
        if opc == DSM:  # a range list of nlb % 256 + 1 entries, deallocate
            cpl = _raw_io(q, DSM, prp1, prp2, slba=nlb % 256, nlb=1, cdw11=4)
        else:
            cpl = _raw_io(q, opc, prp1, prp2, slba=slba, nlb=nlb)
    elif opc in (CREATE_CQ, CREATE_SQ):  # queue 7 (16 entries) at PRP1's page; deleted again when created
        base = prp1 & ~(PAGE - 1)
        if opc == CREATE_CQ:
            cpl = _admin(c, {"opc": CREATE_CQ, "prp1": base, "cdw10": 7 | (15 << 16), "cdw11": 1})
        else:
            assert c.admin_raw({"opc": CREATE_CQ, "prp1": buf.iova(10 * PAGE), "cdw10": 7 | (15 << 16), "cdw11": 1}).ok
            cpl = _admin(c, {"opc": CREATE_SQ, "prp1": base, "cdw10": 7 | (15 << 16), "cdw11": 1 | (7 << 16)})
            if cpl.ok:
                assert c.admin_raw({"opc": 0x00, "cdw10": 7}).ok  # Delete I/O SQ
        if cpl.ok or opc == CREATE_SQ:
            assert c.admin_raw({"opc": 0x04, "cdw10": 7}).ok  # Delete I/O CQ
        if not cpl.ok:  # a queue outside every buffer: refused by the driver, or Invalid Field (emulator's IOMMU)
            assert isinstance(cpl, _DriverRefused) or (cpl.sct, cpl.sc) == (0, 0x02), cpl
            queue_checked = True
    elif opc == IDENTIFY:
        cpl = _admin(c, {"opc": IDENTIFY, "nsid": 1, "prp1": prp1, "prp2": prp2, "cdw10": nlb % 3})
    else:
        cpl = _admin(c, {"opc": GET_LOG, "nsid": 0xFFFFFFFF, "prp1": prp1, "prp2": prp2, "cdw10": 2 | (127 << 16)})
    driver = isinstance(cpl, _DriverRefused)  # the driver's IOMMU refused it: it walked the PRPs itself
    reached = driver or cpl.ok or queue_checked
    reached = reached or (cpl.sct, cpl.sc) in ((0, DATA_XFER_ERROR), (0, INVALID_PRP_OFFSET))
    event(f"reached the PRP walk: {reached}")
    event(f"status: {'refused by the driver' if driver else cpl.name}")
    _REACHED[reached] += 1
    assert driver or cpl.ok or isinstance(cpl.error, NvmeError), cpl
    assert (canary == 0xC5).all(), f"{kind}: the emulator wrote outside every DMA buffer"
    if not cpl.ok:
        assert (buf.array[: 12 * PAGE] == before).all(), f"{kind}: a refused command wrote memory"


_REACHED = {True: 0, False: 0}


def test_in_range_fuzz_reached_the_dereference():
    """The fuzz above must have sent commands that got past the LBA checks into the PRP walk."""
    if not sum(_REACHED.values()):
        pytest.skip("runs after test_in_range_commands_with_wild_prps")
    assert _REACHED[True] > 50, _REACHED
