/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mmio.h — controller register access: one access per function, no policy (the caller decides what to
 * wait for and how long). Each write is followed by the transport hook (bar.h) when one is set; a read
 * goes to the hook's optional read op when it has one (vfio-user), else it is a plain load.
 *
 * Key functions: nvme_mmio_read32/write32/read64/write64(bar, off[, val]); nvme_mmio_idle(bar, cqid).
 *
 * Caveats: 64-bit registers (CAP, ASQ, ACQ) are accessed as two dword accesses, low dword first, which
 * the spec permits and which works on hosts/bridges without 64-bit MMIO. Reading CAP this way is safe
 * because it is constant; ASQ/ACQ are only written while CC.EN = 0. Doorbell writes (the hot path) are
 * nvme_mmio_write32 on a precomputed offset; ordering against earlier SQE stores is the caller's
 * nvme_wmb() (barrier.h). Offsets are not range-checked here (the caller validated them once). With a
 * read op, read64 is ONE read of width 8 (the transport decides how to split it).
 */
#ifndef NVME_MMIO_H
#define NVME_MMIO_H

#include <stdint.h>

#include "nvme/bar.h"

#define NVME_MMIO_DWORD 4u
#define NVME_MMIO_QWORD 8u

static inline uint32_t nvme_mmio_read32(const struct nvme_bar *bar, uint32_t off)
{
    if (bar->ops && bar->ops->read)
        return (uint32_t)bar->ops->read(bar->ctx, off, NVME_MMIO_DWORD);
    return *(volatile uint32_t *)(bar->base + off);
}

static inline void nvme_mmio_write32(const struct nvme_bar *bar, uint32_t off, uint32_t val)
{
    *(volatile uint32_t *)(bar->base + off) = val;
    if (bar->ops)
        bar->ops->write(bar->ctx, off, val, NVME_MMIO_DWORD);
}

static inline uint64_t nvme_mmio_read64(const struct nvme_bar *bar, uint32_t off)
{
    if (bar->ops && bar->ops->read)
        return bar->ops->read(bar->ctx, off, NVME_MMIO_QWORD);
    uint64_t lo = *(volatile uint32_t *)(bar->base + off);
    uint64_t hi = *(volatile uint32_t *)(bar->base + off + NVME_MMIO_DWORD);
    return lo | (hi << 32);
}

static inline void nvme_mmio_write64(const struct nvme_bar *bar, uint32_t off, uint64_t val)
{
    *(volatile uint32_t *)(bar->base + off) = (uint32_t)val;
    *(volatile uint32_t *)(bar->base + off + NVME_MMIO_DWORD) = (uint32_t)(val >> 32);
    if (bar->ops)
        bar->ops->write(bar->ctx, off, val, NVME_MMIO_QWORD);
}

/* Tell a software controller that a poll of cqid found nothing (no-op on hardware). */
static inline void nvme_mmio_idle(const struct nvme_bar *bar, uint16_t cqid)
{
    if (bar->ops && bar->ops->idle)
        bar->ops->idle(bar->ctx, cqid);
}

#endif /* NVME_MMIO_H */
