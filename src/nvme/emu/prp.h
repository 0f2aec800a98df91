/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prp.h — the emulator's IOMMU (prp.c): DMA windows, their read-side sections and the PRP walk (private to emu/).
 *
 * Purpose: prp.c's functions and its fast-path window checks, kept with their owner (emu_internal.h holds the
 * window types, embedded in the set and the controllers, and no code that calls up into the files above it).
 * Key functions: emu_dma_enter/exit() (a read-side section), emu_dma_ok()/emu_dma_ptr() (inline: the last
 * window hit, else prp.c's slow path), emu_dma_window(), emu_sq_rings_ok(), emu_prp_walk().
 * Caveats: every check only inside a read-side section; a pointer stays valid until that section ends.
 */
#ifndef NVME_EMU_PRP_H
#define NVME_EMU_PRP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nvme/emu/emu_internal.h"

/* ---- DMA windows (prp.c) ----
 * Every host address the controller touches (queue rings, PRP entries, PRP lists, admin and DSM data) is
 * checked with emu_dma_ok() inside a read-side section: enter/exit bracket every entry into the
 * controller from the host (a doorbell or register store, an idle poll, a service-thread sweep). */
static inline unsigned emu_dma_enter(struct emu_dma_dom *d, unsigned shard)
{
    unsigned e = atomic_load_explicit(&d->epoch, memory_order_seq_cst) & 1u;
    atomic_fetch_add_explicit(&d->rd[shard % EMU_DMA_SHARDS].n[e], 1, memory_order_seq_cst);
    return e;
}
static inline void emu_dma_exit(struct emu_dma_dom *d, unsigned shard, unsigned e)
{
    atomic_fetch_sub_explicit(&d->rd[shard % EMU_DMA_SHARDS].n[e], 1, memory_order_release);
}

void emu_dma_dom_init(struct emu_dma_dom *d);
void emu_dma_dom_fini(struct emu_dma_dom *d); /* frees its snapshot: no reader may be left */
bool emu_dma_ok_slow(const struct emu_dma_map *m, uint64_t addr, uint64_t end);
uint8_t *emu_dma_ptr_slow(const struct emu_dma_map *m, uint64_t addr, uint64_t end);

/* true when [addr, addr+len) lies inside one registered window (false with none registered).
 * Only inside a read-side section. The last window hit is tried first: O(1) for the common case. */
static inline bool emu_dma_ok(const struct emu_dma_dom *d, uint64_t addr, uint64_t len)
{
    const struct emu_dma_map *m = atomic_load_explicit(&((struct emu_dma_dom *)d)->map, memory_order_seq_cst);
    uint64_t end = addr + (len ? len : 1);
    if (!m || end < addr)
        return false;
    unsigned h = atomic_load_explicit(&((struct emu_dma_map *)m)->hint, memory_order_relaxed);
    if (h < m->n && addr >= m->w[h].lo && end <= m->w[h].hi)
        return true;
    return emu_dma_ok_slow(m, addr, end);
}

/* The host pointer of controller address range [addr, addr+len) (len 0 taken as 1): addr translated through the
 * one window that holds the range whole, NULL when none does (then no byte may be touched). The one place a
 * controller address becomes a pointer. Only inside a read-side section; the pointer stays valid until it ends. */
static inline uint8_t *emu_dma_ptr(const struct emu_dma_dom *d, uint64_t addr, uint64_t len)
{
    const struct emu_dma_map *m = atomic_load_explicit(&((struct emu_dma_dom *)d)->map, memory_order_seq_cst);
    uint64_t end = addr + (len ? len : 1);
    if (!m || end < addr)
        return NULL;
    unsigned h = atomic_load_explicit(&((struct emu_dma_map *)m)->hint, memory_order_relaxed);
    if (h < m->n && addr >= m->w[h].lo && end <= m->w[h].hi)
        return (uint8_t *)(uintptr_t)(addr + m->w[h].delta);
    return emu_dma_ptr_slow(m, addr, end);
}

/* The window holding [addr, addr+len) into *out; false when none does. Only inside a read-side section. */
bool emu_dma_window(const struct emu_dma_dom *d, uint64_t addr, uint64_t len, struct emu_dma_win *out);

/* Rings of sq (and of its CQ) still inside windows after a map change; false: the controller is
 * put in fatal status (a real device whose queue fetch faults in the IOMMU). */
bool emu_sq_rings_ok(struct emu_ctrl *c, struct emu_sq *sq);

/* Walk the PRPs of a transfer of len bytes; calls fn for each contiguous host segment (fn returns a
 * status too, e.g. Capacity Exceeded). Returns a status without phase (EMU_ST) or EMU_ST_OK. */
typedef int (*emu_seg_fn)(void *arg, uint8_t *host, size_t len, uint64_t xfer_off);
uint16_t emu_prp_walk(const struct emu_dma_dom *d, uint64_t prp1, uint64_t prp2, uint64_t len, emu_seg_fn fn,
                      void *arg);

#endif /* NVME_EMU_PRP_H */
