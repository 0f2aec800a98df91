/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvme_cuda.cuh — device-side NVMe queue access from CUDA threads: the clock, doorbell stores, CQE polls
 * with a deadline, and the lock-step round (one block per queue pair, one thread per command).
 *
 * Key functions:
 *   nvme_cuda_now_ns()        %globaltimer (ns); every poll deadline is measured on it
 *   nvme_cuda_db_write()      one doorbell store (mapped MMIO BAR0 word or a device-memory word)
 *   nvme_cuda_sqe_store()     write a built SQE into an SQ slot (four 16-byte stores)
 *   nvme_cuda_match_wait()    wait for a completion by the run's matching mode (cid, positional, scan:
 *                             nvme_gpuq_match.h), with the deadline and the poll discipline -> TIMEOUT
 *   nvme_cuda_sq_publish()    the block's submission half: per-thread system fence (SQs in host memory),
 *                             __syncthreads, read-back of the last SQE (host SQs), fence, SQ doorbell
 *
 * Memory ordering. Submission: SQEs and write payloads are plain stores; after __syncthreads() thread 0
 * issues a fence cumulative over what the block wrote before the barrier (nvme_cuda_db_fence: fence.sc.sys
 * for a controller outside the GPU, fence.sc.gpu when it is a kernel on the same GPU) and then the doorbell
 * store, so a controller that sees the new tail sees the SQEs.
 * Completion: a CQE is taken by one 32-bit ACQUIRE load of its last word (CID + status/phase), whose
 * scope is the writer's:
 *   - a real controller writes the CQE (and read payloads before it: PCIe posted writes from one
 *     requester stay in order, and the spec has the controller write data before the completion) from
 *     outside the GPU, into pinned host memory mapped into the GPU: the load is ld.acquire.sys. A
 *     relaxed/volatile load plus __threadfence() (fence.sc.gpu) does not order it against later loads of
 *     the payload at system scope: a GPU-scope fence says nothing about writes from the system.
 *   - the GPU-resident emulator writes from another thread of the same GPU (payload, __threadfence(),
 *     then the CQE word): device scope is enough, and ld.acquire.gpu is cheaper than .sys (no system
 *     coherence traffic), so gpu-emu keeps it.
 * Everything the thread loads after the acquire (SQHD/SQID, then the payload, through volatile loads that
 * bypass L1) sees what the writer wrote before the CQE. Completions are matched to commands by CID
 * (match=cid, the default), never by the slot they land in; match=positional and match=scan are the
other designs' rules, kept as study subjects (the cuda_match study). An empty look backs off with __nanosleep
 * (nvme_gpuq_backoff_ns, up to the run's `poll` parameter, or not at all with poll=spin) and the deadline
 * is checked after every look.
 *
 * Caveats: CUDA only (include from .cu). A qpair belongs to one block; no locks. The controller must
 * write a CQE's first 12 bytes before its last 4 (the emulator does; PCIe writes a CQE in one TLP).
 */
#ifndef NVME_NVME_CUDA_CUH
#define NVME_NVME_CUDA_CUH

#include <stdint.h>

#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"

#define NVME_CUDA_SQE_VEC 4u /* 16-byte vectors per SQE */

static __device__ __forceinline__ uint64_t nvme_cuda_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The fence before a doorbell store, cumulative over what the block wrote before its barrier. Its scope is
 * the reader's: fence.sc.sys where the controller is outside this GPU (rings in host memory, a BAR
 * doorbell), fence.sc.gpu where rings, doorbells and the controller are all in this GPU (gpu-emu://): a
 * system-scope fence there only adds system coherence traffic to every round. */
static __device__ __forceinline__ void nvme_cuda_db_fence(int system_scope)
{
    if (system_scope)
        __threadfence_system();
    else
        __threadfence();
}

/* One doorbell store (MMIO or device word); the caller fences before it (nvme_cuda_db_fence). */
static __device__ __forceinline__ void nvme_cuda_db_write(volatile uint32_t *db, uint32_t value)
{
    *db = value;
}

/* s must be 16-byte aligned (declare it alignas(16)); slot is, as SQ memory is. */
static __device__ __forceinline__ void nvme_cuda_sqe_store(struct nvme_sqe *slot, const struct nvme_sqe *s)
{
    const uint4 *src = reinterpret_cast<const uint4 *>(s);
    uint4 *dst = reinterpret_cast<uint4 *>(slot);
#pragma unroll
    for (unsigned v = 0; v < NVME_CUDA_SQE_VEC; v++)
        dst[v] = src[v];
}

/* Who writes the CQs a kernel polls: the scope of its acquire loads (nvme_gpuq_cqe_w3_load). */
enum nvme_cuda_scope { NVME_CUDA_SCOPE_GPU = NVME_GPUQ_SCOPE_GPU, NVME_CUDA_SCOPE_SYSTEM = NVME_GPUQ_SCOPE_SYSTEM };

/* Wait, by the run's matching mode (nvme_gpuq_match.h), until waiter k (round position for cid and
 * positional, the command for scan) gets a completion, the deadline passes, or *abort becomes non-zero
 * (another thread of the queue already failed). Returns NVME_GPUQ_OK with *idx and *status (no phase),
 * NVME_GPUQ_TIMEOUT, or -NVME_GPUQ_BAD_CID / -NVME_GPUQ_BAD_SQID (*status: the CID refused); ctr counts the looks.
 * For the breakdown: *t_seen is the %globaltimer at the start of the look that saw the completion (T3),
 * *t_miss that of the last look that did not (T3P), 0 when the first look saw it. */
static __device__ int nvme_cuda_match_wait(int mode, const struct nvme_cqe *cq, uint32_t entries, uint64_t pos0,
                                           uint32_t k, uint16_t sqid, uint32_t round, uint32_t qdepth, int scope,
                                           uint64_t timeout_ns, uint32_t poll_max_ns, const volatile int *abort,
                                           uint32_t *seen, uint32_t *idx, uint16_t *status,
                                           struct nvme_gpuq_match_ctr *ctr, uint64_t *t_seen, uint64_t *t_miss)
{
    const uint64_t deadline = nvme_gpuq_deadline(nvme_cuda_now_ns(), timeout_ns);
    uint64_t miss = 0;
    for (uint32_t n_empty = 0;; n_empty++) {
        const uint64_t now = nvme_cuda_now_ns(); // the start of this look
        const int r =
            nvme_gpuq_match_look(mode, cq, entries, pos0, k, sqid, round, qdepth, scope, seen, idx, status, ctr);
        if (r == NVME_GPUQ_POLL_NEW) {
            *t_seen = now;
            *t_miss = miss;
            return NVME_GPUQ_OK;
        }
        if (r < 0)
            return r;
        if (nvme_gpuq_expired(nvme_cuda_now_ns(), deadline) || *abort)
            return NVME_GPUQ_TIMEOUT;
        miss = now;
        const uint32_t ns = nvme_gpuq_backoff_ns(n_empty, poll_max_ns); // 0: spin
        if (ns)
            __nanosleep(ns);
    }
}

/* Submission half of a lock-step round: every thread has stored its SQE (of round `round`, qdepth commands).
 * SQs in host memory: every thread fences at system scope, and thread 0 reads the round's last SQE back
 * before the doorbell (nvme_gpuq.h, "SQs in host memory"); a read-back that does not hold the CID just
 * written returns NVME_GPUQ_SQ_READBACK (thread 0 only) and rings nothing. */
static __device__ __forceinline__ int nvme_cuda_sq_publish(struct nvme_sqe *sq, volatile uint32_t *sq_db,
                                                           uint64_t sq_pos_after, uint32_t entries, uint32_t round,
                                                           uint32_t qdepth, int sq_host, int fence_sys)
{
    if (sq_host)
        __threadfence_system(); // this thread's SQE before anything it does next, at system scope
    __syncthreads();
    if (threadIdx.x != 0)
        return NVME_GPUQ_OK;
    nvme_cuda_db_fence(fence_sys);
    if (sq_host) {
        const uint64_t last = nvme_gpuq_last_sqe_pos(sq_pos_after);
        const volatile struct nvme_sqe *s = sq + nvme_gpuq_cq_slot(last, entries);
        if (!nvme_gpuq_sqe_readback_ok(s->cid, round, qdepth))
            return NVME_GPUQ_SQ_READBACK;
    }
    nvme_cuda_db_write(sq_db, nvme_gpuq_db(sq_pos_after, entries));
    return NVME_GPUQ_OK;
}

#endif /* NVME_NVME_CUDA_CUH */
