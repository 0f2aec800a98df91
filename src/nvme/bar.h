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
 *     dedicated core). ops->read is NULL: register reads are plain loads.
 *   - a vfio-user server (vfio-user://, vfio_user_client.h): base is a private page for the registers
 *     below 0x1000 with the server's doorbell page mapped over the rest; ops->read answers register
 *     reads from the server (REGION_READ) and ops->write forwards register stores (REGION_WRITE);
 *     doorbell stores land in the shared page, which the server polls.
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
    /* A completion poll on cqid found nothing new. Optional (NULL: nothing to do). */
    void (*idle)(void *ctx, uint16_t cqid);
    /* Optional: the value of the register at BAR0 + off (width 4 or 8), in place of a load from base;
     * all-ones when the device cannot answer (as a PCI function that is gone reads). NULL: plain loads. */
    uint64_t (*read)(void *ctx, uint32_t off, unsigned width);
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
