/* SPDX-License-Identifier: BSD-3-Clause */
/* qpair_setup.c — a qpair's bring-up and teardown: one DMA block for the SQ ring, the CQ ring (with its
 * sentinel) and a PRP-list page per tracker, the trackers, doorbell offsets, batching and timeout scales
 * (see qpair.h). The hot path is in qpair.c and qpair_batch.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/ctrl_internal.h"
#include "nvme/qpair.h"
#include "nvme/target.h"

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) & ~(a - 1);
}

static bool ring_contiguous(const struct nvme_dma *d, size_t off, size_t len)
{
    return nvme_dma_iova_at(d, off + len - 1) == nvme_dma_iova_at(d, off) + len - 1;
}

int nvme_qpair_setup(struct nvme_qpair *q, struct nvme_ctrl *c, uint16_t qid, uint32_t depth, uint32_t cq_depth,
                     uint32_t timeout_ms, uint32_t batch)
{
    memset(q, 0, sizeof(*q));
    size_t psz = (size_t)1 << c->page_shift;
    size_t sq_bytes = round_up((size_t)depth * NVME_SQE_SIZE, psz);
    size_t cq_ring = (size_t)cq_depth * NVME_CQE_SIZE;
    size_t cq_bytes = round_up(cq_ring + NVME_CQ_SENTINELS * NVME_CQE_SIZE, psz);
    uint32_t ntrk = depth - 1; /* the N-1 rule: one slot always stays empty */
    size_t total = sq_bytes + cq_bytes + (size_t)ntrk * psz + psz /* alignment slack */;
    int rc = nvme_dma_alloc_in(&c->target->dma, total, &q->mem);
    if (rc)
        return rc;
    uintptr_t base = (uintptr_t)q->mem->vaddr;
    size_t off0 = round_up(base, psz) - base;
    if (!ring_contiguous(q->mem, off0, sq_bytes) || !ring_contiguous(q->mem, off0 + sq_bytes, cq_ring)) {
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
        q->trk[i].fast_dw0 = (uint64_t)i << NVME_SQE_CID_SHIFT;
    }
    q->sq_end = q->sq + depth;
    q->fast_dma = &nvme_qpair_no_fast_dma;
    q->ntrk = ntrk;
    q->depth = depth;
    q->cq_depth = cq_depth;
    q->cq_cap = cq_depth - 1;
    q->qid = qid;
    q->bar = &c->bar;
    q->ctrl = c;
    q->batch = batch ? batch : 1;
    q->cq_batch = 1;
    if (q->batch > depth - 1)
        q->batch = depth - 1; /* at most N-1 SQEs can be unrung */
    q->sq_db_off = nvme_db_sq_off(qid, c->dstrd);
    q->cq_db_off = nvme_db_cq_off(qid, c->dstrd);
    q->page_shift = c->page_shift;
    q->page_size = (uint32_t)1 << c->page_shift;
    q->page_mask = (uint64_t)q->page_size - 1;
    q->max_xfer = c->max_xfer;
    q->fast_ok = q->page_size <= q->max_xfer; /* a one-page PRP1 transfer never exceeds the transfer limit */
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
