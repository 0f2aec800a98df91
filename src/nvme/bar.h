/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bar.h — the transport hook between the driver and what it talks to: BAR0 of an NVMe controller.
 *
 * A struct nvme_bar names the register window (base, size) and, optionally, operations that let a
 * software controller observe the driver's register writes and empty completion polls:
 *   - real hardware (pci://): ops == NULL; the driver does plain MMIO and nothing else.
 *   - the emulator (emu://): base is ordinary memory; ops->write is called after every register or
 *     doorbell store (so the emulator processes new SQEs inline, on the calling thread) and ops->idle
 *     when a completion poll on a queue found nothing new (so delayed completions get posted without a
 *     dedicated core).
 *
 * Key items: struct nvme_bar_ops, struct nvme_bar. Accessors live in mmio.h.
 *
 * Caveats: the ops are called on whatever thread touched the register; a qpair belongs to one thread,
 * so doorbell and idle calls for one queue never race with each other, but calls for different queues
 * of one controller can run concurrently. 64-bit registers are stored as two dword stores (low first)
 * and reported with ONE write(off, val, 8) call after both stores.
 */
#ifndef NVME_BAR_H
#define NVME_BAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nvme_bar_ops {
    /* After the driver stored val (width 4 or 8 bytes) at BAR0 + off. */
    void (*write)(void *ctx, uint32_t off, uint64_t val, unsigned width);
    /* A completion poll on cqid found nothing new. */
    void (*idle)(void *ctx, uint16_t cqid);
};

struct nvme_bar {
    volatile uint8_t *base;         /* BAR0 mapping */
    size_t size;                    /* bytes mapped */
    const struct nvme_bar_ops *ops; /* NULL on real hardware */
    void *ctx;                      /* passed to ops */
};

#ifdef __cplusplus
}
#endif

#endif /* NVME_BAR_H */
