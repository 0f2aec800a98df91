/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * barrier.h — memory barriers between the host CPU, DMA memory and device registers, spelled out per
 * architecture (x86-64, aarch64) with a C11 <stdatomic.h> fallback elsewhere.
 *
 * Key functions:
 *   nvme_wmb()      all earlier stores (e.g. SQEs in DMA memory) are visible before later stores
 *                   (e.g. the SQ tail doorbell write to MMIO).
 *   nvme_rmb()      all earlier loads complete before later loads (device-visible ordering).
 *   nvme_mb()       full barrier.
 *   nvme_dma_rmb()  a load from coherent DMA memory (the CQE phase tag) completes before later loads from
 *                   the same memory (the rest of the CQE); cheaper than nvme_rmb() where the arch allows.
 *   nvme_compiler_barrier()  stops the compiler reordering, emits nothing.
 *
 * Caveats: on x86-64 ordinary stores are not reordered with other stores and uncached MMIO stores are
 * ordered with earlier write-back stores, so the doorbell path could use a compiler barrier; we still emit
 * sfence in nvme_wmb() (what SPDK does) because the driver can also be used with write-combining BAR
 * mappings. nvme_dma_rmb() on x86-64 is a compiler barrier (loads are not reordered with loads).
 */
#ifndef NVME_BARRIER_H
#define NVME_BARRIER_H

#if defined(__x86_64__)

static inline void nvme_compiler_barrier(void)
{
    __asm__ __volatile__("" ::: "memory");
}
static inline void nvme_wmb(void)
{
    __asm__ __volatile__("sfence" ::: "memory");
}
static inline void nvme_rmb(void)
{
    __asm__ __volatile__("lfence" ::: "memory");
}
static inline void nvme_mb(void)
{
    __asm__ __volatile__("mfence" ::: "memory");
}
static inline void nvme_dma_rmb(void)
{
    __asm__ __volatile__("" ::: "memory");
}

#elif defined(__aarch64__)

static inline void nvme_compiler_barrier(void)
{
    __asm__ __volatile__("" ::: "memory");
}
static inline void nvme_wmb(void)
{
    __asm__ __volatile__("dsb st" ::: "memory");
}
static inline void nvme_rmb(void)
{
    __asm__ __volatile__("dsb ld" ::: "memory");
}
static inline void nvme_mb(void)
{
    __asm__ __volatile__("dsb sy" ::: "memory");
}
static inline void nvme_dma_rmb(void)
{
    __asm__ __volatile__("dmb oshld" ::: "memory");
}

#else /* C11 fallback: correct for coherent memory, not a device-ordering guarantee on every arch. */

#include <stdatomic.h>
static inline void nvme_compiler_barrier(void)
{
    atomic_signal_fence(memory_order_seq_cst);
}
static inline void nvme_wmb(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}
static inline void nvme_rmb(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}
static inline void nvme_mb(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}
static inline void nvme_dma_rmb(void)
{
    atomic_thread_fence(memory_order_acquire);
}

#endif

#endif /* NVME_BARRIER_H */
