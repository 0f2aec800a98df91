# SPDX-License-Identifier: BSD-3-Clause
"""The GPU entry points on a host without a CUDA device (issue 33): each fails at once with one line,
OSError(ENODEV) naming the entry point and the reason (the one `run_cuda` gives), not numba's multi-line
CudaSupportError after seconds of driver probing. "At once" is checked by what runs, not by a clock: numba is
never asked for a device (its device calls are replaced by ones that fail the test)."""

from __future__ import annotations

import errno

import numpy as np
import pytest

from nvmelab.engines import gpu

pytestmark = pytest.mark.skipif(
    gpu.available()[0] or gpu.simulated(), reason="a CUDA device (or numba's simulator) is here: nothing to refuse"
)

STAMPED = "gpu-emu://?ndev=1&profile=null&fill=stamp&nsze=16MiB"
ENTRY_POINTS = {
    "device_buffer": lambda: gpu.device_buffer(4096),
    "read_blocks": lambda: gpu.read_blocks("gpu-emu://?profile=null", qdepth=2),
    "block_checksums": lambda: gpu.block_checksums(np.zeros((2, 64), dtype=np.uint8)),
    "read_and_checksum": lambda: gpu.read_and_checksum(STAMPED, qdepth=2, nqueues=1, ndevs=1),
}


@pytest.fixture
def numba_untouched(monkeypatch):
    """numba's device calls fail the test if reached (they probe the driver for seconds, then raise over many
    lines)."""
    cuda = pytest.importorskip("numba.cuda")

    def reached(*a, **kw):
        raise AssertionError("numba was asked for a CUDA device")

    for name in ("device_array", "to_device", "as_cuda_array", "synchronize"):
        monkeypatch.setattr(cuda, name, reached)


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_an_entry_point_without_a_gpu_is_one_line(name, numba_untouched):
    with pytest.raises(OSError) as ei:
        ENTRY_POINTS[name]()
    exc = ei.value
    assert exc.errno == errno.ENODEV, repr(exc)
    assert exc.strerror.startswith(f"{name}: no CUDA device (") and "\n" not in exc.strerror, exc.strerror
    assert exc.strerror.endswith(gpu.available()[1])  # the reason run_cuda gives too


def test_bad_parameters_are_still_named_before_the_device():
    """read_blocks checks its parameters first (a ValueError naming the bad one), as run_cuda does."""
    with pytest.raises(ValueError, match="rw="):
        gpu.read_blocks("gpu-emu://?profile=null", rw="write")
    with pytest.raises(ValueError, match="fill=stamp"):
        gpu.read_and_checksum("gpu-emu://?profile=null")
