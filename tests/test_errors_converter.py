# SPDX-License-Identifier: BSD-3-Clause
"""The one errno / NVMe-status -> Python exception converter of nvmelab._native (src/bindings/errors.cpp)."""

from __future__ import annotations

import errno

import pytest

from nvmelab import _native
from nvmelab.driver.errors import NvmeError

DNR = 1 << 16  # PERF_STATUS_DNR


@pytest.mark.parametrize(
    "code,exc",
    [
        (-errno.EINVAL, ValueError),
        (-errno.ERANGE, ValueError),
        (-errno.E2BIG, ValueError),
        (-errno.ENOENT, FileNotFoundError),
        (-errno.ETIMEDOUT, TimeoutError),
        (-errno.EBUSY, OSError),
        (-errno.ENOTSUP, OSError),
    ],
)
def test_errno_rule(code: int, exc: type) -> None:
    with pytest.raises(exc, match="what went wrong") as ei:
        _native._raise_code(code, "what went wrong")
    if issubclass(exc, OSError):
        assert ei.value.errno == -code


def test_nvme_status_keeps_sct_sc_and_name() -> None:
    with pytest.raises(NvmeError) as ei:
        _native._raise_code((0 << 8) | 0x80 | DNR, "read of LBA 9")  # generic / LBA Out of Range
    e = ei.value
    assert (e.sct, e.sc, e.dnr) == (0, 0x80, True) and "Out of Range" in str(e) and "read of LBA 9" in str(e)


def test_bindings_share_the_converter() -> None:
    """perf, blksum, driver and cuda call the converter; none carries its own rule any more."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "bindings"
    for name in ("perf.cpp", "blksum.cpp", "driver_state.h", "cuda.cpp"):
        text = (src / name).read_text()
        assert '#include "errors.h"' in text, name
    for path in src.glob("*.[ch]*"):
        if path.name != "errors.cpp":
            text = path.read_text()
            assert 'attr("OSError")' not in text and "PyExc_OSError" not in text, path.name
