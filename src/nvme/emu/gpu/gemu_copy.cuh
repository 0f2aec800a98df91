/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gemu_copy.cuh — payload movement of the GPU emulator (gpu_emu.cu) between a namespace in GPU memory and
 * PRP-addressed buffers, with several commands in flight per warp.
 *
 * Key functions:
 *   gemu_xfer_lane()  one lane moves one whole command (transfers of at most GEMU_LANE_XFER_MAX bytes, at
 *                     most two PRP segments): 32 small commands move at once, each lane keeping
 *                     GEMU_LANE_UNROLL 16-byte loads in flight
 *   gemu_xfer_warp()  the warp moves one large command; the PRP list is read 32 entries at a time (one
 *                     coalesced load, entry k in lane k % 32) and handed out by shuffle, so no lane walks
 *                     the list alone
 *   gemu_ld64()       a 64-bit load that bypasses L1 (the other side was written by another SM or the host)
 *
 * Caveats: CUDA only, include from gpu_emu.cu. The command must have passed every check first (cmd_rules.h,
 * the IOMMU windows, gemu_list_check): these functions trust the PRPs they are given.
 */
#ifndef NVME_EMU_GPU_GEMU_COPY_CUH
#define NVME_EMU_GPU_GEMU_COPY_CUH

#include <stdint.h>

#include "nvme/emu/cmd_rules.h"
#include "nvme/nvme_gpuq.h"

#define GEMU_COPY_WARP     32u
#define GEMU_COPY_MASK     0xffffffffu
#define GEMU_COPY_VEC      16u   /* bytes per vector copy */
#define GEMU_COPY_WORD     4u    /* bytes per scalar copy (PRPs are dword aligned) */
#define GEMU_COPY_UNROLL   8u    /* loads in flight per lane, warp copies */
#define GEMU_LANE_UNROLL   8u    /* loads in flight per lane, lane copies */
#define GEMU_LANE_XFER_MAX 1024u /* commands up to this size are moved by one lane each */

static __device__ __forceinline__ uint64_t gemu_ld64(const uint64_t *p)
{
    return __ldcv(reinterpret_cast<const unsigned long long *>(p));
}

// The warp copies n elements of T; each lane keeps GEMU_COPY_UNROLL loads in flight.
template <typename T>
static __device__ __forceinline__ void gemu_warp_copy_t(T *d, const T *s, uint64_t n, unsigned lane)
{
    uint64_t i = lane;
    for (; i + (GEMU_COPY_UNROLL - 1u) * GEMU_COPY_WARP < n; i += GEMU_COPY_UNROLL * GEMU_COPY_WARP) {
        T t[GEMU_COPY_UNROLL];
#pragma unroll
        for (unsigned u = 0; u < GEMU_COPY_UNROLL; u++)
            t[u] = __ldcg(s + i + u * GEMU_COPY_WARP);
#pragma unroll
        for (unsigned u = 0; u < GEMU_COPY_UNROLL; u++)
            d[i + u * GEMU_COPY_WARP] = t[u];
    }
    for (; i < n; i += GEMU_COPY_WARP)
        d[i] = __ldcg(s + i);
}

static __device__ void gemu_warp_copy(uint8_t *dst, const uint8_t *src, uint64_t n, unsigned lane)
{
    if (!((uintptr_t)dst % GEMU_COPY_VEC) && !((uintptr_t)src % GEMU_COPY_VEC) && !(n % GEMU_COPY_VEC))
        gemu_warp_copy_t(reinterpret_cast<uint4 *>(dst), reinterpret_cast<const uint4 *>(src), n / GEMU_COPY_VEC, lane);
    else
        gemu_warp_copy_t(reinterpret_cast<uint32_t *>(dst), reinterpret_cast<const uint32_t *>(src), n / GEMU_COPY_WORD,
                         lane);
}

// One lane copies n elements of T, GEMU_LANE_UNROLL loads in flight.
template <typename T> static __device__ __forceinline__ void gemu_lane_copy_t(T *d, const T *s, uint64_t n)
{
    uint64_t i = 0;
    for (; i + GEMU_LANE_UNROLL <= n; i += GEMU_LANE_UNROLL) {
        T t[GEMU_LANE_UNROLL];
#pragma unroll
        for (unsigned u = 0; u < GEMU_LANE_UNROLL; u++)
            t[u] = __ldcg(s + i + u);
#pragma unroll
        for (unsigned u = 0; u < GEMU_LANE_UNROLL; u++)
            d[i + u] = t[u];
    }
    for (; i < n; i++)
        d[i] = __ldcg(s + i);
}

static __device__ void gemu_lane_copy(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    if (!((uintptr_t)dst % GEMU_COPY_VEC) && !((uintptr_t)src % GEMU_COPY_VEC) && !(n % GEMU_COPY_VEC))
        gemu_lane_copy_t(reinterpret_cast<uint4 *>(dst), reinterpret_cast<const uint4 *>(src), n / GEMU_COPY_VEC);
    else
        gemu_lane_copy_t(reinterpret_cast<uint32_t *>(dst), reinterpret_cast<const uint32_t *>(src),
                         n / GEMU_COPY_WORD);
}

// Direction: a Read moves namespace -> host buffer, a Write host buffer -> namespace.
static __device__ __forceinline__ void gemu_lane_seg(bool rd, uint64_t addr, uint8_t *ns, uint64_t n)
{
    uint8_t *host = reinterpret_cast<uint8_t *>(addr);
    if (rd)
        gemu_lane_copy(host, ns, n);
    else
        gemu_lane_copy(ns, host, n);
}

static __device__ __forceinline__ void gemu_warp_seg(bool rd, uint64_t addr, uint8_t *ns, uint64_t n, unsigned lane)
{
    uint8_t *host = reinterpret_cast<uint8_t *>(addr);
    if (rd)
        gemu_warp_copy(host, ns, n, lane);
    else
        gemu_warp_copy(ns, host, n, lane);
}

// A small command (len <= GEMU_LANE_XFER_MAX < two pages: PRP1 and at most PRP2) moved by this lane alone.
static __device__ void gemu_xfer_lane(bool rd, uint8_t *ns, uint64_t prp1, uint64_t prp2, uint64_t len)
{
    const uint64_t n0 = nvme_cr_prp_first(prp1, len, NVME_GPUQ_PAGE_SIZE);
    gemu_lane_seg(rd, prp1, ns, n0);
    if (len > n0)
        gemu_lane_seg(rd, prp2, ns + n0, len - n0);
}

// A command moved by the whole warp (every lane calls with the same arguments).
static __device__ void gemu_xfer_warp(bool rd, uint8_t *ns, uint64_t prp1, uint64_t prp2, uint64_t len, unsigned lane)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;
    const uint64_t n0 = nvme_cr_prp_first(prp1, len, page);
    gemu_warp_seg(rd, prp1, ns, n0, lane);
    const uint64_t rem = len - n0;
    if (!rem)
        return;
    if (rem <= page) {
        gemu_warp_seg(rd, prp2, ns + n0, rem, lane);
        return;
    }
    const uint64_t *list = reinterpret_cast<const uint64_t *>(prp2);
    const uint64_t nent = (rem + page - 1u) / page;
    uint64_t done = n0;
    for (uint64_t base = 0; base < nent; base += GEMU_COPY_WARP) {
        const uint64_t mine = base + lane < nent ? gemu_ld64(list + base + lane) : 0; // 32 entries, one load
        const uint32_t cnt = nent - base < GEMU_COPY_WARP ? (uint32_t)(nent - base) : GEMU_COPY_WARP;
        for (uint32_t k = 0; k < cnt; k++) {
            const uint64_t a = __shfl_sync(GEMU_COPY_MASK, mine, k), left = len - done;
            const uint64_t sz = left < page ? left : page;
            gemu_warp_seg(rd, a, ns + done, sz, lane);
            done += sz;
        }
    }
}

#endif /* NVME_EMU_GPU_GEMU_COPY_CUH */
