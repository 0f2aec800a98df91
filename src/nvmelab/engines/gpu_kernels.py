# SPDX-License-Identifier: BSD-3-Clause
"""numba-cuda kernels that consume data read by device-initiated I/O (imported lazily by nvmelab.engines.gpu).

`checksum_rows` computes, per row of a (rows, bytes) uint8 array, the XOR over its 64-bit little-endian
words w_k of w_k * (2k + 1) mod 2^64 -- cheap, order-sensitive, and the same as
nvmelab.engines.gpu.checksum_reference. One CUDA block per row. Runs on a GPU, or on the CPU under numba's CUDA
simulator (NUMBA_ENABLE_CUDASIM=1 set before numba is imported).
"""

from __future__ import annotations

import numpy as np

# numba-cuda (0.30.4, and the GPU image's) registers an overload for np.row_stack when it first compiles a kernel;
# NumPy 2.5 removed that alias of np.vstack, and the GPU image has NumPy 2.5.2: the first lease's two numba tests
# failed there with "module 'numpy' has no attribute 'row_stack'". The alias back, before numba-cuda looks.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

from numba import cuda, uint64  # noqa: E402 (after the alias above)

#: Bytes per checksummed word.
WORD = 8


@cuda.jit
def checksum_rows(blocks, out):
    row = cuda.blockIdx.x
    nwords = blocks.shape[1] // WORD
    acc = uint64(0)
    k = cuda.threadIdx.x
    while k < nwords:
        w = uint64(0)
        for b in range(WORD):  # assembled from bytes: rows may have any stride and alignment
            w |= uint64(blocks[row, k * WORD + b]) << uint64(8 * b)
        acc ^= w * (uint64(2) * uint64(k) + uint64(1))
        k += cuda.blockDim.x
    cuda.atomic.xor(out, row, acc)
