/* SPDX-License-Identifier: BSD-3-Clause */
/* complete.c — posting completions: held completions in a min-heap per SQ (by due time, then
 * order), the CQ lock of shared CQs, and emu_complete()/emu_sq_drain() (see emu_internal.h). */
#include <string.h>

#include "nvme/emu/emu_internal.h"

static inline void cq_lock(struct emu_cq *cq)
{
    if (cq->nsq > 1)
        while (atomic_flag_test_and_set_explicit(&cq->lock, memory_order_acquire))
            ;
}

static inline void cq_unlock(struct emu_cq *cq)
{
    if (cq->nsq > 1)
        atomic_flag_clear_explicit(&cq->lock, memory_order_release);
}

/* ---------------------------------------------------------------- pending heap */
static inline bool pend_lt(const struct emu_pend *a, const struct emu_pend *b)
{
    return a->due < b->due || (a->due == b->due && a->key < b->key);
}

void emu_heap_push(struct emu_sq *sq, const struct emu_pend *p)
{
    uint32_t i = sq->nheap++;
    while (i) {
        uint32_t parent = (i - 1) / 2;
        if (!pend_lt(p, &sq->heap[parent]))
            break;
        sq->heap[i] = sq->heap[parent];
        i = parent;
    }
    sq->heap[i] = *p;
}

static void heap_pop(struct emu_sq *sq)
{
    struct emu_pend last = sq->heap[--sq->nheap];
    uint32_t i = 0, n = sq->nheap;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        const struct emu_pend *best = &last;
        if (l < n && pend_lt(&sq->heap[l], best))
            m = l, best = &sq->heap[l];
        if (r < n && pend_lt(&sq->heap[r], best))
            m = r;
        if (m == i)
            break;
        sq->heap[i] = sq->heap[m];
        i = m;
    }
    if (n)
        sq->heap[i] = last;
}

static inline void cid_clear(struct emu_sq *sq, uint16_t cid)
{
    sq->cid_bits[cid >> 6] &= ~(1ull << (cid & 63));
}

uint64_t emu_sq_drain(struct emu_ctrl *c, struct emu_sq *sq, uint64_t now)
{
    if (!sq->nheap)
        return 0;
    struct emu_cq *cq = sq->cq;
    uint64_t posted = 0, errors = 0, held = 0;
    cq_lock(cq);
    while (sq->nheap) {
        struct emu_pend *p = &sq->heap[0];
        if (p->due > now) {
            if (p->due == EMU_DUE_NEVER || now) /* `now` already read, or a dropped command: stop */
                break;
            now = emu_now_ns(c->set);
            if (p->due > now)
                break;
        }
        if (!emu_cq_post(cq, sq->id, (uint16_t)sq->head, p->cid, p->status, p->dw0)) {
            held = 1;
            break;
        }
        posted++;
        errors += p->status != 0;
        cid_clear(sq, p->cid);
        heap_pop(sq);
    }
    cq_unlock(cq);
    emu_st_add(&sq->st->completed, posted);
    emu_st_add(&sq->st->errors, errors);
    emu_st_add(&sq->st->cq_full_held, held);
    atomic_store_explicit(&sq->st->inflight, sq->nheap, memory_order_relaxed);
    return posted;
}

void emu_complete(struct emu_ctrl *c, struct emu_sq *sq, uint16_t cid, uint16_t status, uint32_t dw0, uint64_t due)
{
    (void)c;
    struct emu_pend p = {.due = due, .key = sq->seq++, .dw0 = dw0, .cid = cid, .status = status};
    emu_heap_push(sq, &p);
}
