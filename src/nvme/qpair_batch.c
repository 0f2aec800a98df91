/* SPDX-License-Identifier: BSD-3-Clause */
/* qpair_batch.c — nvme_qpair_submit_many: nvme_qpair_submit's fast path over a batch of Read/Write commands;
 * nvme_qpair_submit_one / nvme_qpair_poll_one: the same for a queue with one command in flight (QD 1).
 *
 * What nvme_qpair_submit checks per call splits in two: what holds for a whole batch (the namespace is
 * fast_ns, the controller generation, fast_dma is the cached DMA object, one opcode, one length, one
 * callback) is checked once per batch; what depends on the command (a free tracker, the buffer inside one
 * controller page of fast_dma and dword aligned, the LBA range) once per command, with the reduced checks of
 * qpair.c's fast path (see the comment above nvme_qpair_submit). The ring state (tail slot, free tracker,
 * countdown to the next SQ event, outstanding count) stays in registers across the batch and is written
 * back before an SQ event and at the end. A command that fails a check goes through nvme_qpair_submit,
 * which takes its general path and reports the precise error; the batch resumes after it. */
#include <errno.h>

#include "nvme/ctrl_internal.h"
#include "nvme/qpair.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

typedef uint64_t __attribute__((may_alias)) sqe_qword; /* as in qpair.c: the SQE as eight qwords */

/* Zero the SQE words the fast path does not write (the slot held a general-path command). */
static __attribute__((noinline)) void sqe_clean(struct nvme_sqe *slot)
{
    sqe_qword *w = (sqe_qword *)slot;
    w[1] = 0; /* CDW2-3 */
    w[2] = 0; /* MPTR */
    w[4] = 0; /* PRP2 */
    w[7] = 0; /* CDW14-15 */
}

/* Queue io[i..n) on the fast path while every command qualifies; returns the index of the first that does
 * not (n when all did). The caller has checked the batch-wide conditions; len is 1..one page. */
static uint32_t submit_run(struct nvme_qpair *q, uint8_t opc, uint64_t nlb, uint64_t len, const struct nvme_io *io,
                           uint32_t i, uint32_t n, nvme_cb cb)
{
    const struct nvme_dma *d = q->fast_dma;
    const uintptr_t base = (uintptr_t)d->vaddr;
    const uint64_t size = d->size, iova = d->iova, page_mask = q->page_mask, last = len - 1u;
    const uint64_t max_slba = q->fast_ns->nsze - nlb; /* nsze >= one page of blocks >= nlb (fast_ns_update) */
    const uint64_t dw6 = nlb - 1u;
    /* room for this many more commands: CQ entries (room_used < cq_cap) and free trackers (ntrk less the active
     * and the timed-out ones; inside a poll's callback outstanding still counts the entries that poll collected,
     * so busy may exceed ntrk: no room then); the rest goes to the general path, which makes room (CQ head
     * doorbell) or answers -EBUSY */
    const uint32_t busy = q->outstanding + q->nzombie;
    const uint32_t cq_room = q->cq_cap - q->room_used, trk_room = busy < q->ntrk ? (uint32_t)q->ntrk - busy : 0u;
    const uint32_t room = cq_room < trk_room ? cq_room : trk_room;
    if (n - i > room)
        n = i + room;
    const uint32_t i0 = i;
    struct nvme_sqe *slot = q->sq_next;
    struct nvme_tracker *t = q->free_trk;
    while (i < n) {
        /* a chunk: up to the next SQ event (wrap or batch doorbell), slots the fast path may write as they are
         * (a dirty slot takes a chunk of one) */
        const uint32_t left = q->sq_left, dirty = q->sq_dirty;
        const uint32_t k = dirty ? 1u : (n - i < left ? n - i : left);
        const struct nvme_io *x = io + i, *const end = x + k;
        for (; x < end; x++) {
            const uint64_t off = (uintptr_t)x->buf - base; /* integer math: buf may lie outside */
            const uint64_t slba = x->slba;
            if (unlikely(off >= size || (off & (NVME_PRP_ALIGN - 1)) || ((off + last) ^ off) > page_mask ||
                         slba > max_slba))
                break;
            sqe_qword *w = (sqe_qword *)slot;
            w[0] = opc | t->fast_dw0;
            w[3] = iova + off;
            w[5] = slba;
            w[6] = dw6;
            struct nvme_tracker *next = t->next_free;
            t->cb = cb;
            t->arg = x->arg;
            t->opc = opc;
            t = next;
            slot++;
        }
        const uint32_t done = (uint32_t)(x - (io + i));
        if (dirty && done) {
            sqe_clean(slot - 1);
            q->sq_dirty = dirty - 1;
        }
        i += done;
        q->sq_left = left - done;
        if (q->sq_left == 0) {
            q->sq_next = slot;
            q->free_trk = t;
            nvme_qpair_sq_event(q); /* may wrap sq_next and ring the doorbell (it reads no count) */
            slot = q->sq_next;
        }
        if (done < k)
            break; /* io[i] does not qualify */
    }
    q->sq_next = slot;
    q->free_trk = t;
    q->outstanding += i - i0;
    q->room_used += i - i0;
    return i;
}

int nvme_qpair_submit_many(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t opc, uint32_t nlb,
                           const struct nvme_io *io, uint32_t n, nvme_cb cb, uint32_t *queued)
{
    uint32_t i = 0;
    const uint64_t len = (uint64_t)nlb * ns->lba_size;
    const bool rw_ok =
        (uint8_t)(opc - NVME_CMD_WRITE) <= (NVME_CMD_READ - NVME_CMD_WRITE) && cb && nlb != 0 && len <= q->page_size;
    while (i < n) {
        if (likely(rw_ok && ns == q->fast_ns && q->gen == *q->ctrl_gen && q->fast_dma == q->dma_cache &&
                   q->room_used < q->cq_cap)) { /* free trackers: submit_run */
            i = submit_run(q, opc, nlb, len, io, i, n, cb);
            if (i == n)
                break;
        }
        /* this command does not qualify for the fast path (or the batch-wide state changed): one general call,
         * which may also refill the fast path's caches */
        const struct nvme_io *x = &io[i];
        int rc = nvme_qpair_submit(q, ns, opc, x->slba, nlb, x->buf, (size_t)len, cb, x->arg);
        if (rc) {
            *queued = i;
            return rc;
        }
        i++;
    }
    *queued = n;
    return 0;
}

/* QD 1: what submit_run does for one command, with the SQ doorbell in the same call. Every check of
 * submit_many's batch and of submit_run's command in one test (len from fast_lba_size: ns must be fast_ns);
 * a command that fails any of them takes submit_many, which reports the precise error, and then the ring. */
int nvme_qpair_submit_one(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t opc, uint32_t nlb, const struct nvme_io *io,
                          nvme_cb cb)
{
    const struct nvme_dma *d = q->fast_dma;
    struct nvme_tracker *t = q->free_trk;
    const uint64_t len = (uint64_t)nlb * q->fast_lba_size, off = (uintptr_t)io->buf - (uintptr_t)d->vaddr;
    /* nlb >= 1 and the transfer inside one controller page bound nlb to the page's blocks, <= nsze (fast_ns) */
    if (likely(ns == q->fast_ns && q->gen == *q->ctrl_gen && d == q->dma_cache && t && q->room_used < q->cq_cap &&
               (uint8_t)(opc - NVME_CMD_WRITE) <= (NVME_CMD_READ - NVME_CMD_WRITE) && cb && nlb != 0 && off < d->size &&
               !(off & (NVME_PRP_ALIGN - 1)) && ((off + len - 1u) ^ off) <= q->page_mask &&
               io->slba <= ns->nsze - nlb)) {
        struct nvme_sqe *slot = q->sq_next;
        sqe_qword *w = (sqe_qword *)slot;
        w[0] = opc | t->fast_dw0;
        w[3] = d->iova + off;
        w[5] = io->slba;
        w[6] = nlb - 1u;
        if (unlikely(q->sq_dirty))
            nvme_qpair_sq_clean(q, slot);
        q->free_trk = t->next_free;
        t->cb = cb;
        t->arg = io->arg;
        t->opc = opc;
        q->sq_next = slot + 1;
        q->outstanding++;
        q->room_used++;
        if (unlikely(--q->sq_left == 0)) {
            nvme_qpair_sq_event(q); /* wraps the tail; may ring */
            if (!nvme_qpair_sq_unrung(q))
                return 0;
        }
        nvme_qpair_sq_ring(q);
        return 0;
    }
    uint32_t queued;
    const int rc = nvme_qpair_submit_many(q, ns, opc, nlb, io, 1, cb, &queued);
    nvme_qpair_ring(q);
    return rc;
}

/* QD 1: the entry at the CQ head, when it is a plain success of a cb command, as poll_run takes it (collected);
 * the rest of poll_impl's work for one entry: the head and phase, the coalesced CQ head doorbell, the expiry
 * clock's countdown. A pending SQ doorbell (poll rings it first) sends the call to the general poll too. */
int nvme_qpair_poll_one(struct nvme_qpair *q, nvme_cb cb, void **out, uint32_t *nout)
{
    const uint32_t head = q->cq_head;
    const volatile struct nvme_cqe *const ve = q->cq + head;
    const uint32_t st = *(const volatile uint16_t *)&ve->status ^ q->phase;
    if (likely(!(st & (NVME_CQE_STATUS_NOT_OK | NVME_CQE_P)) && q->gen == *q->ctrl_gen && !nvme_qpair_sq_unrung(q))) {
        nvme_dma_rmb();
        const struct nvme_cqe *e = (const struct nvme_cqe *)ve;
        const size_t cid = e->cid;
        struct nvme_tracker *t;
        if (likely(cid < q->ntrk && (t = &q->trk[cid])->cb == cb)) {
            *out = t->arg;
            t->cb = NULL; /* trk_free */
            t->deadline = 0;
            t->next_free = q->free_trk;
            q->free_trk = t;
            q->outstanding--;
            if (unlikely(head + 1u == q->cq_depth)) {
                q->cq_head = 0;
                q->phase ^= 1u;
            } else {
                q->cq_head = head + 1u;
            }
            if (++q->cq_unrung >= q->cq_batch)
                nvme_qpair_cq_ring(q);
            if (unlikely(--q->clock_left == 0))
                nvme_qpair_clock_check(q);
            *nout = 1;
            return 1;
        }
    }
    return nvme_qpair_poll_collect(q, 1, cb, out, nout);
}
