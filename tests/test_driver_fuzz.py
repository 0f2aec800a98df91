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
    q.submit_raw(fields)
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
