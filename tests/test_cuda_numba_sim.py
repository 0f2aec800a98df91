# SPDX-License-Identifier: BSD-3-Clause
"""The numba-cuda example kernel (nvmelab.engines.gpu_kernels) on the CPU, under numba's CUDA simulator.

The simulator is chosen by NUMBA_ENABLE_CUDASIM=1 before numba is imported, so the check runs in a
fresh interpreter. It feeds the kernel the rows gpu-emu serves with fill=stamp, compares every row's
checksum with the NumPy reference, and checks that one flipped bit and two swapped words change it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

SCRIPT = textwrap.dedent("""
    import warnings
    import numpy as np
    from nvmelab.engines import gpu
    warnings.simplefilter("ignore", RuntimeWarning)  # the simulator computes in NumPy scalars: wrap-around warns
    rows = np.stack([gpu.stamps(d, lba, 1024) for d, lba in gpu.read_lbas(1024, qdepth=2, nqueues=2, ndevs=2)])
    ref = gpu.checksum_reference(rows)
    got = gpu.block_checksums(rows).copy_to_host()
    assert got.dtype == np.uint64 and got.shape == (8,), got
    assert np.array_equal(got, ref), (got, ref)
    assert len(set(ref.tolist())) == 8  # different blocks, different sums
    bad = rows.copy()
    bad[5, 100] ^= 0x10
    w = bad[6].view(np.uint64)
    w[[3, 4]] = w[[4, 3]]
    got2 = gpu.block_checksums(bad).copy_to_host()
    changed = np.nonzero(got2 != ref)[0].tolist()
    assert changed == [5, 6], changed
    assert np.array_equal(got2, gpu.checksum_reference(bad))
    print("ok")
""")


def test_checksum_kernel_in_the_cuda_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().endswith("ok")
