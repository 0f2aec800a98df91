/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * emu_testhost.h — a raw NVMe host for the emulator's C tests: drives emu://
 * controllers through BAR memory stores and the bar ops, with its own queues,
 * independent of the driver (so the emulator is tested against the spec, not
 * against the driver's reading of it).
 *
 * Key functions: th_open(), th_enable(), th_cmd(), th_submit(), th_poll(),
 * th_create_ioq(), th_close(); checks from check.h; th_alloc()/th_free() host buffers that are DMA
 * windows of the open set (mapped at th_open when allocated before it; the
 * emulator reaches no other memory); th_alloc_raw() memory it cannot reach.
 * Caveats: header-only, one set open at a time, single-threaded per queue;
 * test code, not library code.
 */
#ifndef EMU_TESTHOST_H
#define EMU_TESTHOST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nvme/bar.h"
#include "nvme/emu/emu.h"
#include "nvme/spec.h"
#include "nvme/uri.h"

#define TH_PAGE       4096u
#define TH_MAXQ       17u
#define TH_POLL_LIMIT 200000000ull

struct th_q {
    struct nvme_sqe *sq;
    struct nvme_cqe *cq;
    uint32_t size, sqsize, sqt, cqh; /* size: CQ entries, sqsize: SQ entries */
    uint16_t phase;
};

struct th {
    struct nvme_emu_set *set;
    const struct nvme_bar *bar;
    unsigned ctrl;
    uint32_t dstrd;
    struct th_q q[TH_MAXQ];
    uint16_t next_cid;
};

#define TH_MAXBUF 256u
static struct nvme_emu_set *th_iommu; /* the open set th_alloc maps buffers into */
static struct {
    void *p;
    size_t n;
    bool mapped;
} th_bufs[TH_MAXBUF];

/* Page-aligned zeroed memory the emulator cannot reach (no DMA window). */
static inline void *th_alloc_raw(size_t len)
{
    size_t n = (len + TH_PAGE - 1) / TH_PAGE * TH_PAGE;
    void *p = aligned_alloc(TH_PAGE, n);
    REQUIRE(p);
    memset(p, 0, n);
    return p;
}

static inline void *th_alloc(size_t len)
{
    size_t n = (len + TH_PAGE - 1) / TH_PAGE * TH_PAGE;
    void *p = th_alloc_raw(len);
    unsigned i = 0;
    while (i < TH_MAXBUF && th_bufs[i].p)
        i++;
    REQUIRE(i < TH_MAXBUF);
    th_bufs[i].p = p;
    th_bufs[i].n = n;
    th_bufs[i].mapped = th_iommu && nvme_emu_dma_map(th_iommu, p, n) == 0;
    CHECK(!th_iommu || th_bufs[i].mapped);
    return p;
}

/* Unmap (when the set is open) and free a th_alloc buffer; NULL is ignored. */
static inline void th_free(void *p)
{
    if (!p)
        return;
    for (unsigned i = 0; i < TH_MAXBUF; i++)
        if (th_bufs[i].p == p) {
            if (th_bufs[i].mapped && th_iommu)
                CHECK_EQ(nvme_emu_dma_unmap(th_iommu, p, th_bufs[i].n), 0);
            th_bufs[i].p = NULL;
            th_bufs[i].mapped = false;
            break;
        }
    free(p);
}

/* Take a th_alloc buffer out of the DMA windows (it stays allocated). */
static inline void th_unmap(void *p)
{
    for (unsigned i = 0; i < TH_MAXBUF; i++)
        if (th_bufs[i].p == p && th_bufs[i].mapped) {
            CHECK_EQ(nvme_emu_dma_unmap(th_iommu, p, th_bufs[i].n), 0);
            th_bufs[i].mapped = false;
        }
}

/* Map every live th_alloc buffer into the newly opened set. */
static inline void th_iommu_attach(struct nvme_emu_set *set)
{
    th_iommu = set;
    for (unsigned i = 0; i < TH_MAXBUF; i++)
        if (th_bufs[i].p) {
            th_bufs[i].mapped = nvme_emu_dma_map(set, th_bufs[i].p, th_bufs[i].n) == 0;
            CHECK(th_bufs[i].mapped);
        }
}

static inline void th_w32(struct th *t, uint32_t off, uint32_t v)
{
    *(volatile uint32_t *)(t->bar->base + off) = v;
    t->bar->ops->write(t->bar->ctx, off, v, 4);
}

static inline void th_w64(struct th *t, uint32_t off, uint64_t v)
{
    *(volatile uint32_t *)(t->bar->base + off) = (uint32_t)v;
    *(volatile uint32_t *)(t->bar->base + off + 4) = (uint32_t)(v >> 32);
    t->bar->ops->write(t->bar->ctx, off, v, 8);
}

static inline uint32_t th_r32(struct th *t, uint32_t off)
{
    return *(volatile uint32_t *)(t->bar->base + off);
}
static inline uint64_t th_r64(struct th *t, uint32_t off)
{
    return th_r32(t, off) | ((uint64_t)th_r32(t, off + 4) << 32);
}

/* Open "emu://?..." and take controller ctrl; returns the open error (and message) instead of failing. */
static inline int th_open_err(struct th *t, const char *uri, unsigned ctrl, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    struct nvme_uri *u;
    int r = nvme_uri_parse(uri, &u, err, errlen);
    if (r)
        return r;
    r = nvme_emu_target_open(u, &t->set, err, errlen);
    nvme_uri_free(u);
    if (r)
        return r;
    th_iommu_attach(t->set);
    t->ctrl = ctrl;
    t->bar = nvme_emu_set_bar(t->set, ctrl);
    REQUIRE(t->bar);
    t->dstrd = nvme_cap_dstrd(th_r64(t, NVME_REG_CAP));
    return 0;
}

static inline void th_open(struct th *t, const char *uri)
{
    char err[256];
    int r = th_open_err(t, uri, 0, err, sizeof(err));
    if (r) {
        fprintf(stderr, "th_open(%s): %s\n", uri, err);
        REQUIRE(!"th_open failed");
    }
}

static inline void th_free_queues(struct th *t)
{
    for (unsigned i = 0; i < TH_MAXQ; i++) {
        th_free(t->q[i].sq);
        th_free(t->q[i].cq);
        memset(&t->q[i], 0, sizeof(t->q[i]));
    }
}

static inline void th_close(struct th *t)
{
    th_free_queues(t);
    nvme_emu_set_close(t->set);
    th_iommu = NULL;
    for (unsigned i = 0; i < TH_MAXBUF; i++)
        th_bufs[i].mapped = false;
}

static inline bool th_wait_rdy(struct th *t, bool want)
{
    for (int i = 0; i < 1000000; i++) {
        uint32_t csts = th_r32(t, NVME_REG_CSTS);
        if (nvme_csts_cfs(csts))
            return false;
        if (nvme_csts_rdy(csts) == want)
            return true;
    }
    return false;
}

static inline uint32_t th_cc(void)
{
    return NVME_CC_EN | (NVME_SQES_LOG2 << NVME_CC_IOSQES_SHIFT) | (NVME_CQES_LOG2 << NVME_CC_IOCQES_SHIFT);
}

/* Admin queue of `entries`, CC.EN = 1, wait RDY. */
static inline bool th_enable(struct th *t, uint32_t entries)
{
    th_free_queues(t);
    struct th_q *q = &t->q[0];
    q->size = q->sqsize = entries;
    q->sq = th_alloc(entries * NVME_SQE_SIZE);
    q->cq = th_alloc(entries * NVME_CQE_SIZE);
    q->phase = 1;
    th_w32(t, NVME_REG_AQA, NVME_AQA(entries, entries));
    th_w64(t, NVME_REG_ASQ, (uintptr_t)q->sq);
    th_w64(t, NVME_REG_ACQ, (uintptr_t)q->cq);
    th_w32(t, NVME_REG_CC, th_cc());
    return th_wait_rdy(t, true);
}

static inline void th_submit(struct th *t, uint16_t qid, const struct nvme_sqe *cmd)
{
    struct th_q *q = &t->q[qid];
    q->sq[q->sqt] = *cmd;
    q->sqt = (q->sqt + 1) % q->sqsize;
    th_w32(t, nvme_db_sq_off(qid, t->dstrd), q->sqt);
}

/* Store SQEs without ringing the doorbell (batching). */
static inline void th_queue(struct th *t, uint16_t qid, const struct nvme_sqe *cmd)
{
    struct th_q *q = &t->q[qid];
    q->sq[q->sqt] = *cmd;
    q->sqt = (q->sqt + 1) % q->sqsize;
}

static inline void th_ring(struct th *t, uint16_t qid)
{
    th_w32(t, nvme_db_sq_off(qid, t->dstrd), t->q[qid].sqt);
}

/* One completion if present (idle hook called when not); head doorbell written when `ack`. */
static inline bool th_poll1(struct th *t, uint16_t qid, struct nvme_cqe *out, bool ack)
{
    struct th_q *q = &t->q[qid];
    volatile struct nvme_cqe *e = &q->cq[q->cqh];
    if ((e->status & NVME_CQE_P) != q->phase) {
        t->bar->ops->idle(t->bar->ctx, qid);
        return false;
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    *out = *(struct nvme_cqe *)e;
    q->cqh = (q->cqh + 1) % q->size;
    if (!q->cqh)
        q->phase ^= 1;
    if (ack)
        th_w32(t, nvme_db_cq_off(qid, t->dstrd), q->cqh);
    return true;
}

static inline bool th_poll(struct th *t, uint16_t qid, struct nvme_cqe *out)
{
    for (unsigned long long i = 0; i < TH_POLL_LIMIT; i++)
        if (th_poll1(t, qid, out, true))
            return true;
    return false;
}

static inline uint16_t th_status(const struct nvme_cqe *e)
{
    return e->status & ~(uint16_t)NVME_CQE_P;
}
#define TH_ST(sct, sc) ((uint16_t)(((sct) << NVME_CQE_SCT_SHIFT) | ((sc) << NVME_CQE_SC_SHIFT)))
/* status without DNR */
static inline uint16_t th_sc(const struct nvme_cqe *e)
{
    return th_status(e) & ~(uint16_t)NVME_CQE_DNR;
}

/* Submit, wait, return the CQE (cid assigned here). */
static inline struct nvme_cqe th_cmd(struct th *t, uint16_t qid, struct nvme_sqe cmd)
{
    cmd.cid = t->next_cid++;
    th_submit(t, qid, &cmd);
    struct nvme_cqe e = {0};
    REQUIRE(th_poll(t, qid, &e));
    CHECK_EQ(e.cid, cmd.cid);
    CHECK_EQ(e.sqid, qid);
    return e;
}

static inline struct nvme_cqe th_create_cq(struct th *t, uint16_t qid, uint32_t entries)
{
    static struct th_q scratch; /* qid 0 (a refused request) must not replace the admin queue */
    struct th_q *q = qid ? &t->q[qid] : &scratch;
    th_free(q->cq);
    q->cq = th_alloc(entries * NVME_CQE_SIZE);
    q->cqh = 0;
    q->phase = 1;
    q->size = entries;
    struct nvme_sqe c = {.opc = NVME_ADM_CREATE_CQ,
                         .prp1 = (uintptr_t)q->cq,
                         .cdw10 = NVME_CREATE_Q_CDW10(qid, entries),
                         .cdw11 = NVME_CREATE_Q_PC};
    return th_cmd(t, 0, c);
}

static inline struct nvme_cqe th_create_sq(struct th *t, uint16_t qid, uint32_t entries, uint16_t cqid)
{
    static struct th_q scratch;
    struct th_q *q = qid ? &t->q[qid] : &scratch;
    th_free(q->sq);
    q->sq = th_alloc(entries * NVME_SQE_SIZE);
    q->sqt = 0;
    q->sqsize = entries;
    struct nvme_sqe c = {.opc = NVME_ADM_CREATE_SQ,
                         .prp1 = (uintptr_t)q->sq,
                         .cdw10 = NVME_CREATE_Q_CDW10(qid, entries),
                         .cdw11 = NVME_CREATE_Q_PC | ((uint32_t)cqid << NVME_CREATE_SQ_CQID_SHIFT)};
    return th_cmd(t, 0, c);
}

/* I/O queue pair qid (SQ qid on CQ qid) of `entries`. */
static inline void th_create_ioq(struct th *t, uint16_t qid, uint32_t entries)
{
    struct nvme_cqe e = th_create_cq(t, qid, entries);
    CHECK_EQ(th_status(&e), 0);
    e = th_create_sq(t, qid, entries, qid);
    CHECK_EQ(th_status(&e), 0);
}

static inline struct nvme_sqe th_rw(uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb, const void *buf,
                                    uint64_t prp2)
{
    struct nvme_sqe c = {.opc = opc,
                         .nsid = nsid,
                         .prp1 = (uintptr_t)buf,
                         .prp2 = prp2,
                         .cdw10 = (uint32_t)slba,
                         .cdw11 = (uint32_t)(slba >> 32),
                         .cdw12 = nlb - 1};
    return c;
}

#endif /* EMU_TESTHOST_H */
