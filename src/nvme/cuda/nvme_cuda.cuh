/*
 * nvme_cuda.cuh — device-side NVMe queue access from CUDA threads: the clock, doorbell stores, CQE polls
 * with a deadline, and the lock-step round (one block per queue pair, one thread per command).
 *
 * Key functions:
 *   nvme_cuda_now_ns()        %globaltimer (ns); every poll deadline is measured on it
 *   nvme_cuda_db_write()      one doorbell store (mapped MMIO BAR0 word or a device-memory word)
 *   nvme_cuda_sqe_store()     write a built SQE into an SQ slot (four 16-byte stores)
 *   nvme_cuda_cqe_wait()      wait for the CQE of position pos: phase, then CID/SQID; deadline -> TIMEOUT
 *   nvme_cuda_round_submit()  the block's submission half: __syncthreads, fence, SQ doorbell (thread 0)
 *   nvme_cuda_round_complete() the completion half: CQ head doorbell (thread 0)
 *
 * Memory ordering: SQEs and write payloads are plain stores; after __syncthreads() thread 0 issues
 * __threadfence_system() (fence.sc.sys, cumulative over what the block wrote before the barrier) and
 * then the doorbell store, so a controller that sees the new tail sees the SQEs. A CQE is taken by one
 * 32-bit volatile load of its last word (CID + status/phase); when the phase is new, __threadfence() and
 * then volatile loads of SQHD/SQID and of read payloads, so no stale L1 line is used. Completions are
 * matched to commands by CID (nvme_gpuq_cqe_match), never by the slot they land in.
 *
 * Caveats: CUDA only (include from .cu). A qpair belongs to one block; no locks. The controller must
 * write a CQE's first 12 bytes before its last 4 (the emulator does; PCIe writes a CQE in one TLP).
 */
#ifndef NVME_CUDA_NVME_CUDA_CUH
#define NVME_CUDA_NVME_CUDA_CUH

#include <stdint.h>

#include "nvme/cuda/nvme_gpuq.h"

#define NVME_CUDA_CQE_W3_OFF  12u   /* byte offset of the CID + status word in a CQE */
#define NVME_CUDA_CID_SHIFT   0u    /* in that little-endian word: CID is the low half */
#define NVME_CUDA_STATUS_SHIFT 16u  /* status (with phase) the high half */
#define NVME_CUDA_SQE_VEC     4u    /* 16-byte vectors per SQE */

static __device__ __forceinline__ uint64_t nvme_cuda_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One doorbell store (MMIO or device word); the caller fences before it. */
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

/* The last word of CQE `slot` (CID low half, status with phase high half), bypassing L1. */
static __device__ __forceinline__ uint32_t nvme_cuda_cqe_w3(const struct nvme_cqe *cq, uint32_t slot)
{
    const volatile uint32_t *w = reinterpret_cast<const volatile uint32_t *>(
        reinterpret_cast<const volatile uint8_t *>(cq + slot) + NVME_CUDA_CQE_W3_OFF);
    return *w;
}

struct nvme_cuda_cqe_seen {
    uint16_t cid, status, sqhd, sqid;
};

/* Wait until the CQE for queue position `pos` is new, or the deadline passes, or *abort becomes non-zero
 * (another thread of the queue already failed). Returns NVME_GPUQ_OK with *out filled, or
 * NVME_GPUQ_TIMEOUT. */
static __device__ int nvme_cuda_cqe_wait(const struct nvme_cqe *cq, uint32_t entries, uint64_t pos,
                                         uint64_t timeout_ns, const volatile int *abort,
                                         struct nvme_cuda_cqe_seen *out)
{
    const uint32_t slot = nvme_gpuq_cq_slot(pos, entries);
    const uint64_t deadline = nvme_gpuq_deadline(nvme_cuda_now_ns(), timeout_ns);
    for (;;) {
        uint32_t w3 = nvme_cuda_cqe_w3(cq, slot);
        uint16_t status = (uint16_t)(w3 >> NVME_CUDA_STATUS_SHIFT);
        if (nvme_gpuq_cqe_new(status, pos, entries)) {
            __threadfence();
            const volatile struct nvme_cqe *c = cq + slot;
            out->cid = (uint16_t)(w3 >> NVME_CUDA_CID_SHIFT);
            out->status = status;
            out->sqhd = c->sqhd;
            out->sqid = c->sqid;
            return NVME_GPUQ_OK;
        }
        if (nvme_gpuq_expired(nvme_cuda_now_ns(), deadline) || *abort)
            return NVME_GPUQ_TIMEOUT;
    }
}

/* Submission half of a lock-step round. Every thread has stored its SQE; thread 0 publishes them. */
static __device__ __forceinline__ void nvme_cuda_round_submit(volatile uint32_t *sq_db, uint64_t sq_pos_after,
                                                              uint32_t entries)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        nvme_cuda_db_write(sq_db, nvme_gpuq_db(sq_pos_after, entries));
    }
}

/* Completion half: every thread has consumed its CQE; thread 0 frees the CQ slots. */
static __device__ __forceinline__ void nvme_cuda_round_complete(volatile uint32_t *cq_db, uint64_t cq_pos_after,
                                                                uint32_t entries)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        nvme_cuda_db_write(cq_db, nvme_gpuq_db(cq_pos_after, entries));
    }
}

#endif /* NVME_CUDA_NVME_CUDA_CUH */
