/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gemu_plan.h — how the GPU-resident emulator (gpu_emu.cu) lays its work out, as plain C that the
 * host tests can run: which warp of the persistent kernel serves which queue, and whether a requested
 * `warps` per block fits the kernel as compiled.
 *
 * Key functions:
 *   gemu_plan_first_queue()/gemu_plan_queue_stride()  queue q is served by block q % blocks, warp
 *       (q / blocks) % warps of that block: consecutive queues land on different blocks (so on different
 *       SMs), instead of filling the warps of block 0 first (16 queues on 8x8 warps used two blocks).
 *   gemu_plan_block_of()   the block that serves queue q.
 *   gemu_plan_warps_check() refuse warps above what the kernel can launch with (maxThreadsPerBlock of
 *       cudaFuncGetAttributes, which reflects its registers and __launch_bounds__), naming the parameter
 *       and its limit.
 *
 * Caveats: pure functions, no CUDA include; NVME_HD (spec.h) makes them __host__ __device__ under nvcc.
 */
#ifndef NVME_CUDA_GEMU_PLAN_H
#define NVME_CUDA_GEMU_PLAN_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nvme/spec.h"

#define GEMU_PLAN_WARP 32u /* threads per warp */

/* The first queue served by warp `warp_in_block` of block `block`; it then serves every
 * gemu_plan_queue_stride()-th queue after it. */
static inline NVME_HD uint32_t gemu_plan_first_queue(uint32_t block, uint32_t warp_in_block, uint32_t blocks)
{
    return block + warp_in_block * blocks;
}
static inline NVME_HD uint32_t gemu_plan_queue_stride(uint32_t blocks, uint32_t warps)
{
    return blocks * warps;
}
static inline NVME_HD uint32_t gemu_plan_block_of(uint32_t queue, uint32_t blocks)
{
    return queue % blocks;
}

/* 0 when `warps` warps per block fit a kernel whose cudaFuncGetAttributes says max_threads_per_block
 * (and regs registers per thread); else -E2BIG and one line naming the parameter and its limit. */
static inline int gemu_plan_warps_check(uint32_t warps, int max_threads_per_block, int regs, char *err, size_t errlen)
{
    uint32_t limit = max_threads_per_block > 0 ? (uint32_t)max_threads_per_block / GEMU_PLAN_WARP : 0u;
    if (warps <= limit)
        return 0;
    if (err && errlen)
        snprintf(err, errlen,
                 "parameter 'warps': %u is more than the %u warps per block the emulator kernel can launch with "
                 "on this GPU (it uses %d registers per thread; cudaFuncGetAttributes: maxThreadsPerBlock %d)",
                 warps, limit, regs, max_threads_per_block);
    return -E2BIG;
}

#endif /* NVME_CUDA_GEMU_PLAN_H */
