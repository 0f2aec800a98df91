/* qpair.c — SQ/CQ rings, CID trackers with a PRP-list page each, batched doorbells, phase-tag polling,
 * lazy-stamped timeouts. The admin queue (ctrl.c) runs on the same code. See qpair.h. */
#include "nvme/qpair.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvme/barrier.h"
#include "nvme/ctrl.h"
#include "nvme/mmio.h"
#include "nvme/target.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define NS_PER_MS        1000000ull
#define CALIBRATE_NS     (2 * NS_PER_MS)   /* TSC calibration interval */

/* ------------------------------------------------------------------------------------------------ */
/* Clock: a cheap tick counter read once per poll.                                                  */
/* ------------------------------------------------------------------------------------------------ */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t nvme_clock_ticks(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
#else
    return mono_ns();
#endif
}

static uint64_t ticks_per_ms;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

static void clock_calibrate(void)
{
#if defined(__x86_64__)
    uint64_t t0 = mono_ns(), c0 = nvme_clock_ticks();
    struct timespec pause = {0, (long)CALIBRATE_NS};
    nanosleep(&pause, NULL);
    uint64_t t1 = mono_ns(), c1 = nvme_clock_ticks();
    uint64_t dt = t1 - t0 ? t1 - t0 : 1;
    ticks_per_ms = (c1 - c0) * NS_PER_MS / dt;
#elif defined(__aarch64__)
    uint64_t frq;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(frq));
    ticks_per_ms = frq / 1000u;
#else
    ticks_per_ms = NS_PER_MS;
#endif
    if (ticks_per_ms == 0)
        ticks_per_ms = 1;
}

uint64_t nvme_clock_ticks_per_ms(void)
{
    pthread_once(&clock_once, clock_calibrate);
    return ticks_per_ms;
}

/* ------------------------------------------------------------------------------------------------ */
/* Setup / teardown                                                                                 */
/* ------------------------------------------------------------------------------------------------ */
static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) & ~(a - 1);
}

static void trackers_reset(struct nvme_qpair *q)
{
    for (uint32_t i = 0; i < q->ntrk; i++) {
        q->trk[i].state = NVME_TRK_FREE;
        q->trk[i].cb = NULL;
        q->trk[i].arg = NULL;
        q->trk[i].next_free = (uint16_t)(i + 1 < q->ntrk ? i + 1 : NVME_TRK_NONE);
    }
    q->free_head = q->ntrk ? 0 : NVME_TRK_NONE;
    q->outstanding = 0;
    q->nzombie = 0;
}

void nvme_qpair_reset_rings(struct nvme_qpair *q)
{
    memset((void *)q->cq, 0, (size_t)q->depth * NVME_CQE_SIZE);
    memset(q->sq, 0, (size_t)q->depth * NVME_SQE_SIZE);
    q->sq_tail = 0;
    q->cq_head = 0;
    q->sq_head = 0;
    q->phase = 1;
    q->pending = 0;
    q->dead = false;
    trackers_reset(q);
}

static bool ring_contiguous(const struct nvme_dma *d, size_t off, size_t len)
{
    return nvme_dma_iova_at(d, off + len - 1) == nvme_dma_iova_at(d, off) + len - 1;
}

int nvme_qpair_setup(struct nvme_qpair *q, struct nvme_ctrl *c, uint16_t qid, uint32_t depth, uint32_t timeout_ms,
                     uint32_t batch)
{
    memset(q, 0, sizeof(*q));
    size_t psz = (size_t)1 << c->page_shift;
    size_t sq_bytes = round_up((size_t)depth * NVME_SQE_SIZE, psz);
    size_t cq_bytes = round_up((size_t)depth * NVME_CQE_SIZE, psz);
    uint32_t ntrk = depth - 1;   /* the N-1 rule: one slot always stays empty */
    size_t total = sq_bytes + cq_bytes + (size_t)ntrk * psz + psz /* alignment slack */;
    int rc = nvme_dma_alloc_in(&c->target->dma, total, &q->mem);
    if (rc)
        return rc;
    uintptr_t base = (uintptr_t)q->mem->vaddr;
    size_t off0 = round_up(base, psz) - base;
    if (!ring_contiguous(q->mem, off0, sq_bytes) || !ring_contiguous(q->mem, off0 + sq_bytes, cq_bytes)) {
        nvme_log(NVME_LOG_ERROR, "queue %u rings are not contiguous in bus memory (depth %u too large?)", qid, depth);
        nvme_dma_free(q->mem);
        q->mem = NULL;
        return -ENOMEM;
    }
    q->trk = calloc(ntrk ? ntrk : 1, sizeof(*q->trk));
    if (!q->trk) {
        nvme_dma_free(q->mem);
        q->mem = NULL;
        return -ENOMEM;
    }
    q->sq = (struct nvme_sqe *)(q->mem->vaddr + off0);
    q->cq = (volatile struct nvme_cqe *)(q->mem->vaddr + off0 + sq_bytes);
    size_t prp_off = off0 + sq_bytes + cq_bytes;
    for (uint32_t i = 0; i < ntrk; i++) {
        q->trk[i].prp_list = (uint64_t *)(q->mem->vaddr + prp_off + (size_t)i * psz);
        q->trk[i].prp_iova = nvme_dma_iova_at(q->mem, prp_off + (size_t)i * psz);
    }
    q->ntrk = ntrk;
    q->depth = depth;
    q->qid = qid;
    q->bar = &c->bar;
    q->ctrl = c;
    q->batch = batch ? batch : 1;
    q->sq_db_off = nvme_db_sq_off(qid, c->dstrd);
    q->cq_db_off = nvme_db_cq_off(qid, c->dstrd);
    q->page_shift = c->page_shift;
    q->max_xfer = c->max_xfer;
    q->gen = c->generation;
    q->ctrl_gen = &c->generation;
    uint64_t tpm = nvme_clock_ticks_per_ms();
    q->timeout_ticks = (uint64_t)timeout_ms * tpm;
    uint32_t scan_ms = timeout_ms / NVME_SCAN_DIVISOR;
    if (scan_ms == 0)
        scan_ms = 1;
    if (scan_ms > NVME_SCAN_MAX_MS)
        scan_ms = NVME_SCAN_MAX_MS;
    q->scan_ticks = (uint64_t)scan_ms * tpm;
    q->now = nvme_clock_ticks();
    q->next_scan = q->now + q->scan_ticks;
    nvme_qpair_reset_rings(q);
    return 0;
}

void nvme_qpair_teardown(struct nvme_qpair *q)
{
    free(q->trk);
    q->trk = NULL;
    if (q->mem)
        nvme_dma_free(q->mem);
    q->mem = NULL;
}

/* ------------------------------------------------------------------------------------------------ */
/* PRPs                                                                                             */
/* ------------------------------------------------------------------------------------------------ */
int nvme_prp_build(struct nvme_qpair *q, struct nvme_tracker *t, struct nvme_dma *d, const void *buf, size_t len,
                   struct nvme_sqe *sqe)
{
    size_t off = (size_t)((const uint8_t *)buf - d->vaddr);
    uint64_t a = nvme_dma_iova_at(d, off);
    if (unlikely(a & (NVME_PRP_ALIGN - 1)))
        return -EINVAL;
    const uint32_t shift = q->page_shift;
    const size_t psz = (size_t)1 << shift;
    const size_t first = psz - (size_t)(a & (psz - 1));
    sqe->prp1 = a;
    if (likely(len <= first)) {
        sqe->prp2 = 0;
        return 0;
    }
    size_t rem = len - first;
    off += first;
    if (rem <= psz) {
        sqe->prp2 = nvme_dma_iova_at(d, off);
        return 0;
    }
    size_t n = (rem + psz - 1) >> shift;
    uint64_t *list = t->prp_list;
    if (!d->pages) {
        uint64_t b = d->iova + off;
        for (size_t i = 0; i < n; i++)
            list[i] = b + ((uint64_t)i << shift);
    } else {
        for (size_t i = 0; i < n; i++)
            list[i] = nvme_dma_iova_at(d, off + (i << shift));
    }
    sqe->prp2 = t->prp_iova;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Hot path                                                                                         */
/* ------------------------------------------------------------------------------------------------ */
static inline void sq_ring(struct nvme_qpair *q)
{
    nvme_wmb();
    nvme_mmio_write32(q->bar, q->sq_db_off, q->sq_tail);
    q->pending = 0;
}

void nvme_qpair_ring(struct nvme_qpair *q)
{
    if (q->pending)
        sq_ring(q);
}

static struct nvme_dma *dma_lookup_slow(struct nvme_qpair *q, const void *buf, size_t len)
{
    struct nvme_dma *d = nvme_dma_find(&q->ctrl->target->dma, buf, len);
    if (d)
        q->dma_cache = d;
    return d;
}

/* Take a tracker, fill CID and the data pointer of the SQE slot s (already holding the command), advance
 * the tail, maybe ring. s is the SQ slot at q->sq_tail. */
static inline int finish_submit(struct nvme_qpair *q, struct nvme_sqe *s, void *buf, size_t len, nvme_cb cb,
                                void *arg, uint16_t ti)
{
    struct nvme_tracker *t = &q->trk[ti];
    if (len) {
        struct nvme_dma *d = q->dma_cache;
        if (unlikely(!nvme_dma_contains(d, buf, len))) {
            d = dma_lookup_slow(q, buf, len);
            if (!d)
                return -EINVAL;
        }
        if (unlikely(nvme_prp_build(q, t, d, buf, len, s) != 0))
            return -EINVAL;
    }
    q->free_head = t->next_free;
    t->state = NVME_TRK_ACTIVE;
    t->cb = cb;
    t->arg = arg;
    t->deadline = 0;
    t->opc = s->opc;
    s->cid = ti;
    uint32_t tail = q->sq_tail + 1;
    q->sq_tail = tail == q->depth ? 0 : tail;
    q->outstanding++;
    if (++q->pending >= q->batch)
        sq_ring(q);
    return 0;
}

int nvme_qpair_submit(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t opc, uint64_t slba, uint32_t nlb, void *buf,
                      size_t len, nvme_cb cb, void *arg)
{
    if (unlikely(q->gen != *q->ctrl_gen || q->dead))
        return -ENXIO;
    if (unlikely(!ns || ns->ctrl != q->ctrl))
        return -EINVAL;
    uint16_t ti = q->free_head;
    if (unlikely(ti == NVME_TRK_NONE))
        return -EBUSY;
    uint32_t cdw10 = (uint32_t)slba, cdw11 = (uint32_t)(slba >> 32), cdw12 = nlb - 1;
    switch (opc) {
    case NVME_CMD_READ:
    case NVME_CMD_WRITE:
        if (unlikely(nlb == 0 || nlb > NVME_NLB_MAX || !buf || len != ((size_t)nlb << ns->lba_shift)))
            return -EINVAL;
        if (unlikely(len > q->max_xfer))
            return -E2BIG;
        if (unlikely(slba >= ns->nsze || nlb > ns->nsze - slba))
            return -ERANGE;
        break;
    case NVME_CMD_WRITE_ZEROES:
        if (unlikely(nlb == 0 || nlb > NVME_NLB_MAX || len != 0))
            return -EINVAL;
        if (unlikely(slba >= ns->nsze || nlb > ns->nsze - slba))
            return -ERANGE;
        break;
    case NVME_CMD_FLUSH:
        if (unlikely(len != 0))
            return -EINVAL;
        cdw10 = cdw11 = cdw12 = 0;
        break;
    case NVME_CMD_DSM:
        if (unlikely(nlb == 0 || nlb > NVME_DSM_MAX_RANGES || !buf || len != (size_t)nlb * NVME_DSM_RANGE_SIZE))
            return -EINVAL;
        cdw10 = nlb - 1;
        cdw11 = NVME_DSM_AD;
        cdw12 = 0;
        break;
    default:
        return -EINVAL;
    }
    struct nvme_sqe *s = &q->sq[q->sq_tail];
    s->opc = opc;
    s->flags = 0;
    s->nsid = ns->nsid;
    s->cdw2 = 0;
    s->cdw3 = 0;
    s->mptr = 0;
    s->prp1 = 0;
    s->prp2 = 0;
    s->cdw10 = cdw10;
    s->cdw11 = cdw11;
    s->cdw12 = cdw12;
    s->cdw13 = 0;
    s->cdw14 = 0;
    s->cdw15 = 0;
    return finish_submit(q, s, buf, len, cb, arg, ti);
}

int nvme_qpair_submit_raw(struct nvme_qpair *q, const struct nvme_sqe *sqe, void *buf, size_t len, nvme_cb cb,
                          void *arg)
{
    if (unlikely(q->gen != *q->ctrl_gen || q->dead))
        return -ENXIO;
    if (unlikely(!sqe || (len && !buf)))
        return -EINVAL;
    if (unlikely(len > q->max_xfer))
        return -E2BIG;
    uint16_t ti = q->free_head;
    if (unlikely(ti == NVME_TRK_NONE))
        return -EBUSY;
    struct nvme_sqe *s = &q->sq[q->sq_tail];
    *s = *sqe;
    return finish_submit(q, s, buf, len, cb, arg, ti);
}

static void expire(struct nvme_qpair *q, uint16_t cid, int err)
{
    struct nvme_tracker *t = &q->trk[cid];
    t->state = NVME_TRK_ZOMBIE;
    q->nzombie++;
    q->outstanding--;
    nvme_log(NVME_LOG_WARN, "queue %u: %s command cid %u %s", q->qid, nvme_opc_name(q->qid == NVME_ADMIN_QID, t->opc),
             cid, err == -ETIMEDOUT ? "timed out" : "abandoned");
    struct nvme_cpl cpl = {.err = err, .cid = cid};
    if (t->cb)
        t->cb(t->arg, &cpl);
}

/* Used by ctrl.c's admin wait, which keeps its own per-call deadline. */
void nvme_qpair_expire_cid(struct nvme_qpair *q, uint16_t cid, int err);
void nvme_qpair_expire_cid(struct nvme_qpair *q, uint16_t cid, int err)
{
    if (cid < q->ntrk && q->trk[cid].state == NVME_TRK_ACTIVE)
        expire(q, cid, err);
}

static void scan_timeouts(struct nvme_qpair *q, uint64_t now)
{
    for (uint32_t i = 0; i < q->ntrk; i++) {
        struct nvme_tracker *t = &q->trk[i];
        if (t->state != NVME_TRK_ACTIVE)
            continue;
        if (t->deadline == 0)
            t->deadline = now + q->timeout_ticks;
        else if (now >= t->deadline)
            expire(q, (uint16_t)i, -ETIMEDOUT);
    }
    q->next_scan = now + q->scan_ticks;
}

void nvme_qpair_fail_all(struct nvme_qpair *q, int err)
{
    for (uint32_t i = 0; i < q->ntrk; i++) {
        struct nvme_tracker *t = &q->trk[i];
        uint8_t st = t->state;
        if (st == NVME_TRK_FREE)
            continue;
        t->state = NVME_TRK_FREE;
        if (st == NVME_TRK_ACTIVE && t->cb) {
            struct nvme_cpl cpl = {.err = err, .cid = (uint16_t)i};
            t->cb(t->arg, &cpl);
        }
    }
    trackers_reset(q);
}

int nvme_qpair_poll(struct nvme_qpair *q, uint32_t max)
{
    if (unlikely(q->gen != *q->ctrl_gen || q->dead)) {
        if (!q->dead) {
            q->dead = true;
            nvme_qpair_fail_all(q, -ENXIO);
        }
        return -ENXIO;
    }
    if (q->pending)
        sq_ring(q);
    if (max == 0)
        max = UINT32_MAX;
    uint32_t n = 0, consumed = 0;
    bool retried = false;
again:
    while (n < max) {
        volatile struct nvme_cqe *e = &q->cq[q->cq_head];
        uint16_t status = e->status;
        if ((status & NVME_CQE_P) != q->phase)
            break;
        nvme_dma_rmb();
        uint16_t cid = e->cid;
        uint32_t cdw0 = e->cdw0;
        q->sq_head = e->sqhd;
        uint32_t head = q->cq_head + 1;
        if (head == q->depth) {
            head = 0;
            q->phase ^= 1;
        }
        q->cq_head = head;
        consumed++;
        if (unlikely(cid >= q->ntrk)) {
            q->spurious++;
            continue;
        }
        struct nvme_tracker *t = &q->trk[cid];
        if (unlikely(t->state != NVME_TRK_ACTIVE)) {
            if (t->state == NVME_TRK_ZOMBIE) { /* late completion of a timed-out command: slot is free again */
                t->state = NVME_TRK_FREE;
                t->next_free = q->free_head;
                q->free_head = cid;
                q->nzombie--;
            } else {
                q->spurious++;
            }
            continue;
        }
        nvme_cb cb = t->cb;
        void *arg = t->arg;
        t->state = NVME_TRK_FREE;
        t->next_free = q->free_head;
        q->free_head = cid;
        q->outstanding--;
        n++;
        if (cb) {
            struct nvme_cpl cpl = {
                .err = 0,
                .sct = nvme_cqe_sct(status),
                .sc = nvme_cqe_sc(status),
                .dnr = nvme_cqe_dnr(status),
                .cdw0 = cdw0,
                .cid = cid,
            };
            cb(arg, &cpl);
        }
    }
    if (consumed) {
        nvme_mmio_write32(q->bar, q->cq_db_off, q->cq_head);
    } else if (q->bar->ops && !retried) {
        /* a software controller may post due completions now; look once more */
        nvme_mmio_idle(q->bar, q->qid);
        retried = true;
        goto again;
    }
    q->now = nvme_clock_ticks();
    if (unlikely(q->now >= q->next_scan))
        scan_timeouts(q, q->now);
    return (int)n;
}

/* ------------------------------------------------------------------------------------------------ */
/* Public create/destroy and accessors                                                              */
/* ------------------------------------------------------------------------------------------------ */
uint32_t nvme_qpair_outstanding(const struct nvme_qpair *q)
{
    return q->outstanding;
}

uint32_t nvme_qpair_depth(const struct nvme_qpair *q)
{
    return q->depth;
}

uint16_t nvme_qpair_qid(const struct nvme_qpair *q)
{
    return q->qid;
}

struct nvme_ctrl *nvme_qpair_ctrl(const struct nvme_qpair *q)
{
    return q->ctrl;
}
