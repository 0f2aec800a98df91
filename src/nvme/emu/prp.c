/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prp.c — the emulator's IOMMU (DMA windows) and PRP walk (rules in cmd_rules.h, shared with the GPU
 * emulator).
 *
 * Windows: per IOMMU domain (struct emu_dma_dom: the set's, shared by its controllers, or a controller's own), an
 * immutable snapshot (sorted, disjoint) published through dom->map. Readers (every entry
 * of the host into the controller, emu_dma_enter/exit in ctrl.c) take no lock: they count themselves in
 * one of two per-shard counters chosen by the epoch's parity. A writer (map/unmap, under dom->lock)
 * publishes the new snapshot, flips the epoch and waits until the counters of the old parity drain;
 * then no section can still hold the old snapshot or be copying through a removed window, and the old
 * snapshot (and, for unmap, the caller's memory) may go. Readers that start after the flip count in the
 * new parity and load the new snapshot (both are seq_cst, so they are ordered after its publication).
 */
#include "nvme/emu/prp.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/emu_internal.h"

#define EMU_DMA_SPINS 64u /* busy polls of a draining counter before yielding the CPU */

/* Index + 1 of the window holding [addr, end), 0 when none does. */
static unsigned dma_find(const struct emu_dma_map *m, uint64_t addr, uint64_t end)
{
    /* the last window whose lo <= addr is the only candidate (windows are disjoint) */
    unsigned lo = 0, hi = m->n;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (m->w[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || end > m->w[lo - 1].hi)
        return 0;
    return lo;
}

bool emu_dma_ok_slow(const struct emu_dma_map *m, uint64_t addr, uint64_t end)
{
    unsigned i = dma_find(m, addr, end);
    if (!i)
        return false;
    atomic_store_explicit(&((struct emu_dma_map *)m)->hint, i - 1, memory_order_relaxed);
    return true;
}

uint8_t *emu_dma_ptr_slow(const struct emu_dma_map *m, uint64_t addr, uint64_t end)
{
    unsigned i = dma_find(m, addr, end);
    if (!i)
        return NULL;
    atomic_store_explicit(&((struct emu_dma_map *)m)->hint, i - 1, memory_order_relaxed);
    return (uint8_t *)(uintptr_t)(addr + m->w[i - 1].delta);
}

bool emu_dma_window(const struct emu_dma_dom *d, uint64_t addr, uint64_t len, struct emu_dma_win *out)
{
    const struct emu_dma_map *m = atomic_load_explicit(&((struct emu_dma_dom *)d)->map, memory_order_seq_cst);
    uint64_t end = addr + (len ? len : 1);
    if (!m || end < addr)
        return false;
    unsigned i = dma_find(m, addr, end);
    if (!i)
        return false;
    *out = m->w[i - 1];
    return true;
}

/* Wait until no read-side section that began before this call is still running (d->lock held). */
static void dma_synchronize(struct emu_dma_dom *d)
{
    unsigned old = atomic_fetch_xor_explicit(&d->epoch, 1u, memory_order_seq_cst) & 1u;
    for (unsigned i = 0; i < EMU_DMA_SHARDS; i++)
        for (unsigned spin = 0; atomic_load_explicit(&d->rd[i].n[old], memory_order_seq_cst); spin++)
            if (spin > EMU_DMA_SPINS)
                sched_yield();
}

/* Publish m (may be NULL), wait for readers of the old snapshot, free it. d->lock held. */
static void dma_publish(struct emu_dma_dom *d, struct emu_dma_map *m)
{
    struct emu_dma_map *old = atomic_exchange_explicit(&d->map, m, memory_order_seq_cst);
    atomic_fetch_add_explicit(&d->gen, 1, memory_order_seq_cst);
    dma_synchronize(d);
    free(old);
}

static struct emu_dma_map *map_new(unsigned n)
{
    struct emu_dma_map *m = malloc(sizeof(*m) + (size_t)n * sizeof(struct emu_dma_win));
    if (m) {
        m->n = n;
        atomic_init(&m->hint, 0);
    }
    return m;
}

/* Insert window [lo, hi) -> lo + delta. */
static int dma_insert(struct emu_dma_dom *d, uint64_t lo, uint64_t hi, uint64_t delta)
{
    pthread_mutex_lock(&d->lock);
    const struct emu_dma_map *cur = atomic_load_explicit(&d->map, memory_order_relaxed);
    unsigned n = cur ? cur->n : 0, at = 0;
    while (at < n && cur->w[at].lo < lo)
        at++;
    int rc = 0;
    struct emu_dma_map *m = NULL;
    if ((at && cur->w[at - 1].hi > lo) || (at < n && cur->w[at].lo < hi))
        rc = -EEXIST; /* overlaps a window (vfio refuses overlapping mappings the same way) */
    else if (!(m = map_new(n + 1)))
        rc = -ENOMEM;
    if (!rc) {
        if (at)
            memcpy(m->w, cur->w, at * sizeof(m->w[0]));
        m->w[at] = (struct emu_dma_win){lo, hi, delta};
        if (n > at)
            memcpy(m->w + at + 1, cur->w + at, (n - at) * sizeof(m->w[0]));
        dma_publish(d, m);
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* Remove the window [lo, hi) exactly. */
static int dma_remove(struct emu_dma_dom *d, uint64_t lo, uint64_t hi)
{
    pthread_mutex_lock(&d->lock);
    const struct emu_dma_map *cur = atomic_load_explicit(&d->map, memory_order_relaxed);
    unsigned n = cur ? cur->n : 0, at = 0;
    while (at < n && cur->w[at].lo != lo)
        at++;
    int rc = 0;
    struct emu_dma_map *m = NULL;
    if (at == n || cur->w[at].hi != hi)
        rc = -ENOENT;
    else if (n > 1 && !(m = map_new(n - 1)))
        rc = -ENOMEM;
    if (!rc) {
        if (m) {
            memcpy(m->w, cur->w, at * sizeof(m->w[0]));
            memcpy(m->w + at, cur->w + at + 1, (n - at - 1) * sizeof(m->w[0]));
        }
        dma_publish(d, m);
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static unsigned dma_count(struct emu_dma_dom *d)
{
    pthread_mutex_lock(&d->lock);
    const struct emu_dma_map *m = atomic_load_explicit(&d->map, memory_order_relaxed);
    unsigned n = m ? m->n : 0;
    pthread_mutex_unlock(&d->lock);
    return n;
}

/* [iova, iova+len) -> va in domain d: identity when va == iova. */
static int dma_map_at(struct emu_dma_dom *d, uint64_t iova, const void *va, size_t len)
{
    uint64_t hi = iova + len, vhi = (uintptr_t)va + len;
    if (!va || !len || hi < iova || vhi < (uintptr_t)va)
        return -EINVAL;
    return dma_insert(d, iova, hi, (uint64_t)(uintptr_t)va - iova);
}

static int dma_unmap_at(struct emu_dma_dom *d, uint64_t iova, size_t len)
{
    uint64_t hi = iova + len;
    if (!len || hi < iova)
        return -EINVAL;
    return dma_remove(d, iova, hi);
}

void emu_dma_dom_init(struct emu_dma_dom *d)
{
    memset(d, 0, sizeof(*d));
    pthread_mutex_init(&d->lock, NULL);
}

void emu_dma_dom_fini(struct emu_dma_dom *d)
{
    free(atomic_load(&d->map)); /* no controller runs any more: no reader is left */
    pthread_mutex_destroy(&d->lock);
}

int nvme_emu_dma_map(struct nvme_emu_set *set, const void *addr, size_t len)
{
    return set && addr ? dma_map_at(&set->dma, (uintptr_t)addr, addr, len) : -EINVAL;
}

int nvme_emu_dma_map_at(struct nvme_emu_set *set, uint64_t iova, void *va, size_t len)
{
    return set ? dma_map_at(&set->dma, iova, va, len) : -EINVAL;
}

int nvme_emu_dma_allow(struct nvme_emu_set *set, const void *addr, size_t len)
{
    return nvme_emu_dma_map(set, addr, len);
}

int nvme_emu_dma_unmap(struct nvme_emu_set *set, const void *addr, size_t len)
{
    return set && addr ? dma_unmap_at(&set->dma, (uintptr_t)addr, len) : -EINVAL;
}

int nvme_emu_dma_unmap_at(struct nvme_emu_set *set, uint64_t iova, size_t len)
{
    return set ? dma_unmap_at(&set->dma, iova, len) : -EINVAL;
}

int nvme_emu_ctrl_dma_map_at(struct nvme_emu_set *set, unsigned ctrl, uint64_t iova, void *va, size_t len)
{
    return set && ctrl < set->n ? dma_map_at(set->ctrls[ctrl].dma, iova, va, len) : -EINVAL;
}

int nvme_emu_ctrl_dma_unmap_at(struct nvme_emu_set *set, unsigned ctrl, uint64_t iova, size_t len)
{
    return set && ctrl < set->n ? dma_unmap_at(set->ctrls[ctrl].dma, iova, len) : -EINVAL;
}

void nvme_emu_dma_clear(struct nvme_emu_set *set)
{
    if (!set)
        return;
    pthread_mutex_lock(&set->dma.lock);
    dma_publish(&set->dma, NULL);
    pthread_mutex_unlock(&set->dma.lock);
}

unsigned nvme_emu_dma_count(const struct nvme_emu_set *set)
{
    if (!set)
        return 0;
    struct nvme_emu_set *s = (struct nvme_emu_set *)set;
    unsigned n = dma_count(&s->dma);
    for (unsigned i = 0; i < s->n; i++)
        if (s->ctrls[i].dma != &s->dma)
            n += dma_count(s->ctrls[i].dma);
    return n;
}

bool emu_sq_rings_ok(struct emu_ctrl *c, struct emu_sq *sq)
{
    uint64_t gen = atomic_load_explicit(&c->dma->gen, memory_order_seq_cst);
    struct emu_cq *cq = sq->cq;
    const uint8_t *s = emu_dma_ptr(c->dma, sq->ring_iova, (uint64_t)sq->size * NVME_SQE_SIZE);
    uint8_t *q = emu_dma_ptr(c->dma, cq->ring_iova, (uint64_t)cq->size * NVME_CQE_SIZE);
    if (!s || !q) {
        emu_ctrl_fatal(c);
        return false;
    }
    /* a window mapped again at the same IOVA may lie elsewhere in this process: the rings follow it (stores
     * only when they moved, so that queues sharing a CQ on other threads see no write with identity windows) */
    if ((const volatile uint8_t *)sq->ring != s)
        sq->ring = (const volatile struct nvme_sqe *)(const void *)s;
    if ((volatile uint8_t *)cq->ring != q)
        cq->ring = (volatile struct nvme_cqe *)(void *)q;
    sq->ring_gen = gen;
    sq->win_lo = sq->win_hi = sq->win_delta = 0; /* the window the fast path remembered may be gone */
    return true;
}

/* ---------------------------------------------------------------- PRPs */
/* One pass over the PRPs: every address is checked before fn sees it. */
static uint16_t prp_pass(const struct emu_dma_dom *set, uint64_t prp1, uint64_t prp2, uint64_t len, emu_seg_fn fn,
                         void *arg)
{
    const uint64_t page = EMU_PAGE_SIZE;
    uint16_t st;
    int r;
    if ((st = nvme_cr_prp1_offset(prp1)))
        return st;
    uint64_t n = nvme_cr_prp_first(prp1, len, page);
    uint8_t *h1 = emu_dma_ptr(set, prp1, n), *h;
    if ((st = nvme_cr_addr(prp1, h1 != NULL)))
        return st;
    uint64_t done = n, rem = len - n;
    if (!rem)
        return fn ? (uint16_t)fn(arg, h1, (size_t)n, 0) : EMU_ST_OK;
    if (rem <= page) {
        if ((st = nvme_cr_prp_page(prp2, page)))
            return st;
        h = emu_dma_ptr(set, prp2, rem);
        if ((st = nvme_cr_addr(prp2, h != NULL)))
            return st;
        if (fn && (r = fn(arg, h1, (size_t)n, 0)))
            return (uint16_t)r;
        if (fn && (r = fn(arg, h, (size_t)rem, done)))
            return (uint16_t)r;
        return EMU_ST_OK;
    }
    if (fn && (r = fn(arg, h1, (size_t)n, 0)))
        return (uint16_t)r;
    /* PRP2 points at a PRP list (qword aligned, any offset in its page) */
    if ((st = nvme_cr_prp_list(prp2)))
        return st;
    uint64_t list = prp2, hops = 0, max_hops = len / page + 2;
    while (rem) {
        if (++hops > max_hops) /* a chain that loops */
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
        uint64_t nent = nvme_cr_prp_list_room(list, page);
        const volatile uint64_t *ent =
            (const volatile uint64_t *)(void *)emu_dma_ptr(set, list, nent * NVME_PRP_ENTRY_SIZE);
        if ((st = nvme_cr_addr(list, ent != NULL)))
            return st;
        uint64_t next = 0;
        for (uint64_t i = 0; i < nent && rem; i++) {
            uint64_t e = ent[i];
            if (i == nent - 1 && rem > page) { /* last slot of the page chains to the next list */
                if ((st = nvme_cr_prp_list(e)))
                    return st;
                next = e;
                break;
            }
            if ((st = nvme_cr_prp_page(e, page)))
                return st;
            n = rem < page ? rem : page;
            h = emu_dma_ptr(set, e, n);
            if ((st = nvme_cr_addr(e, h != NULL)))
                return st;
            if (fn && (r = fn(arg, h, (size_t)n, done)))
                return (uint16_t)r;
            done += n, rem -= n;
        }
        list = next;
    }
    return EMU_ST_OK;
}

uint16_t emu_prp_walk(const struct emu_dma_dom *set, uint64_t prp1, uint64_t prp2, uint64_t len, emu_seg_fn fn,
                      void *arg)
{
    if (!len)
        return EMU_ST_OK;
    const uint64_t in_page = EMU_PAGE_SIZE - (prp1 & (EMU_PAGE_SIZE - 1));
    if (len <= in_page) { /* the common case: one segment in PRP1's page */
        uint16_t st = nvme_cr_prp1_offset(prp1);
        uint8_t *h = st ? NULL : emu_dma_ptr(set, prp1, len);
        if (!st)
            st = nvme_cr_addr(prp1, h != NULL);
        return st || !fn ? st : (uint16_t)fn(arg, h, (size_t)len, 0);
    }
    /* A transfer through a PRP list is checked whole before the first byte moves, so a refused command
     * touches no memory (the copy pass checks again: the host may change its lists meanwhile). */
    uint16_t st;
    if (fn && len > in_page + EMU_PAGE_SIZE && (st = prp_pass(set, prp1, prp2, len, NULL, NULL)))
        return st;
    return prp_pass(set, prp1, prp2, len, fn, arg);
}
