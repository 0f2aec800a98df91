/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuq_ctrl.c — I/O queue pairs with host-memory rings for device-side drivers, and the CPU stand-in
 * that drives them (gpuq_ctrl.h). Uses only the public driver API (admin commands, qid allocator, DMA
 * objects, BAR access) and the queue logic shared with the GPU (nvme/nvme_gpuq.h). */
#include "nvme/gpuq_ctrl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvme/barrier.h"
#include "nvme/ctrl_internal.h"
#include "nvme/mmio.h"
#include "nvme/nvme_gpuq.h"
#include "nvme/spec.h"

#define GPUQ_NS_PER_S 1000000000ull

static uint64_t gpuq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * GPUQ_NS_PER_S + (uint64_t)ts.tv_nsec;
}

static size_t gpuq_round_up(size_t n, size_t a)
{
    return (n + a - 1u) / a * a;
}

/* One admin command; -EIO with the status name in err when the controller refused it. */
static int gpuq_admin(struct nvme_ctrl *c, struct nvme_sqe *cmd, const char *what, char *err, size_t errlen)
{
    struct nvme_cpl cpl;
    int rc = nvme_ctrl_admin_own(c, cmd, &cpl, NVME_GPUQ_CTRL_ADMIN_TIMEOUT_MS); /* rings: driver memory */
    if (rc) {
        if (err && errlen)
            snprintf(err, errlen, "%s: %s", what, strerror(-rc));
        return rc;
    }
    if (!nvme_cpl_ok(&cpl)) {
        char b[128];
        if (err && errlen)
            snprintf(err, errlen, "%s: the controller refused it (%s)", what, nvme_cpl_str(&cpl, b, sizeof(b)));
        return -EIO;
    }
    return 0;
}

/* True when [p, p+len) is one bus-contiguous range (a PC=1 queue must be). */
static bool gpuq_contiguous(const struct nvme_dma *d, const uint8_t *p, size_t len, size_t page)
{
    uint64_t base = nvme_dma_iova(d, p);
    for (size_t o = page; o < len; o += page)
        if (nvme_dma_iova(d, p + o) != base + o)
            return false;
    return base != UINT64_MAX;
}

int nvme_gpuq_pair_create(struct nvme_ctrl *c, uint32_t entries, struct nvme_gpuq_pair **out, char *err, size_t errlen)
{
    *out = NULL;
    const uint32_t maxd = nvme_ctrl_max_depth(c);
    if (entries < NVME_QUEUE_MIN_ENTRIES || entries > maxd) {
        snprintf(err, errlen, "queue entries=%u: must be in %u..%u (CAP.MQES + 1)", entries, NVME_QUEUE_MIN_ENTRIES,
                 maxd);
        return -EINVAL;
    }
    struct nvme_gpuq_pair *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->ctrl = c;
    p->entries = entries;
    const size_t page = nvme_ctrl_page_size(c);
    const size_t sq_bytes = gpuq_round_up((size_t)entries * sizeof(struct nvme_sqe), page);
    const size_t cq_bytes = gpuq_round_up((size_t)entries * sizeof(struct nvme_cqe), page);
    int rc = nvme_ctrl_qid_alloc(c);
    if (rc < 0) {
        snprintf(err, errlen, "no I/O queue identifier left (the controller granted %u)", nvme_ctrl_max_qpairs(c));
        free(p);
        return rc;
    }
    p->qid = (uint16_t)rc;
    rc = nvme_dma_alloc(nvme_ctrl_target(c), sq_bytes + cq_bytes, &p->mem);
    if (rc) {
        snprintf(err, errlen, "allocating %zu bytes of DMA memory for the rings: %s", sq_bytes + cq_bytes,
                 strerror(-rc));
        goto fail;
    }
    nvme_dma_mark_internal(p->mem); /* the rings: no raw command may point into them */
    p->mem_len = sq_bytes + cq_bytes;
    p->sq = nvme_dma_vaddr(p->mem);
    p->cq = (struct nvme_cqe *)((uint8_t *)p->sq + sq_bytes);
    if (!gpuq_contiguous(p->mem, (const uint8_t *)p->sq, sq_bytes, page) ||
        !gpuq_contiguous(p->mem, (const uint8_t *)p->cq, cq_bytes, page)) {
        snprintf(err, errlen, "queue memory is not bus-contiguous (rings of %u entries need %zu bytes in one run)",
                 entries, sq_bytes);
        rc = -ENOMEM;
        goto fail;
    }
    p->sq_iova = nvme_dma_iova(p->mem, p->sq);
    p->cq_iova = nvme_dma_iova(p->mem, p->cq);
    const uint32_t dstrd = nvme_cap_dstrd(nvme_ctrl_cap(c));
    p->sq_db_off = nvme_db_sq_off(p->qid, dstrd);
    p->cq_db_off = nvme_db_cq_off(p->qid, dstrd);
    if (p->cq_db_off + sizeof(uint32_t) > nvme_ctrl_bar(c)->size) {
        snprintf(err, errlen, "qid %u: its doorbell (BAR0 + 0x%x) lies outside the mapped BAR (%zu bytes)", p->qid,
                 p->cq_db_off, nvme_ctrl_bar(c)->size);
        rc = -EINVAL;
        goto fail;
    }

    struct nvme_sqe cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.opc = NVME_ADM_CREATE_CQ;
    cmd.prp1 = p->cq_iova;
    cmd.cdw10 = NVME_CREATE_Q_CDW10(p->qid, entries);
    cmd.cdw11 = NVME_CREATE_Q_PC; /* IEN = 0: GPU threads poll, nobody takes interrupts */
    if ((rc = gpuq_admin(c, &cmd, "Create I/O Completion Queue", err, errlen)))
        goto fail;
    p->cq_created = true;
    memset(&cmd, 0, sizeof(cmd));
    cmd.opc = NVME_ADM_CREATE_SQ;
    cmd.prp1 = p->sq_iova;
    cmd.cdw10 = NVME_CREATE_Q_CDW10(p->qid, entries);
    cmd.cdw11 = NVME_CREATE_Q_PC | ((uint32_t)p->qid << NVME_CREATE_SQ_CQID_SHIFT);
    if ((rc = gpuq_admin(c, &cmd, "Create I/O Submission Queue", err, errlen)))
        goto fail;
    p->sq_created = true;
    *out = p;
    return 0;
fail:
    nvme_gpuq_pair_destroy(p, false);
    return rc;
}

int nvme_gpuq_pair_quiesce(struct nvme_gpuq_pair *p, bool timed_out)
{
    if (!p || p->quiesced)
        return p ? p->quiesce_rc : 0;
    int rc = 0, drc;
    bool gone = true;
    struct nvme_sqe cmd;
    if (p->sq_created) {
        memset(&cmd, 0, sizeof(cmd));
        cmd.opc = NVME_ADM_DELETE_SQ;
        cmd.cdw10 = p->qid;
        if ((drc = gpuq_admin(p->ctrl, &cmd, "Delete I/O Submission Queue", NULL, 0)))
            rc = rc ? rc : drc, gone = false;
    }
    if (p->cq_created && gone) {
        memset(&cmd, 0, sizeof(cmd));
        cmd.opc = NVME_ADM_DELETE_CQ;
        cmd.cdw10 = p->qid;
        if ((drc = gpuq_admin(p->ctrl, &cmd, "Delete I/O Completion Queue", NULL, 0)))
            rc = rc ? rc : drc, gone = false;
    }
    /* A deleted SQ has aborted its commands, so nothing more is fetched or written to the payload. When
     * the deletion failed, or it could not be confirmed after a timeout, only a reset stops the DMA. */
    if ((p->sq_created || p->cq_created) && (!gone || (timed_out && rc))) {
        if ((drc = nvme_ctrl_reset(p->ctrl))) {
            nvme_log(NVME_LOG_ERROR,
                     "gpuq: qid %u could not be deleted and the reset failed (%d): its rings are "
                     "leaked so the controller cannot write into freed memory",
                     p->qid, drc);
            rc = -EIO;
        }
    }
    p->sq_created = p->cq_created = false;
    p->quiesced = true;
    p->quiesce_rc = rc;
    return rc;
}

int nvme_gpuq_pair_destroy(struct nvme_gpuq_pair *p, bool timed_out)
{
    if (!p)
        return 0;
    int rc = nvme_gpuq_pair_quiesce(p, timed_out);
    if (rc == -EIO)
        return rc; /* p->mem deliberately not freed: the controller may still write it */
    nvme_dma_free(p->mem);
    if (p->qid)
        nvme_ctrl_qid_free(p->ctrl, p->qid);
    free(p);
    return rc;
}

int nvme_gpuq_lut(const struct nvme_dma *d, uint64_t *lut, size_t npages)
{
    const uint8_t *base = nvme_dma_vaddr(d);
    if ((uint64_t)npages * NVME_GPUQ_PAGE_SIZE > nvme_dma_size(d))
        return -EINVAL;
    for (size_t i = 0; i < npages; i++) {
        lut[i] = nvme_dma_iova(d, base + i * NVME_GPUQ_PAGE_SIZE);
        if (lut[i] == UINT64_MAX)
            return -EINVAL;
    }
    return 0;
}

/* The missing-fence model: the last o->unordered SQEs of the round are built here and stored after the
 * doorbell, unless the fence orders them before the read-back. */
#define GPUQ_UNORDERED_MAX 64u

static int gpuq_round_timeout(const struct nvme_gpuq_pair *p, uint32_t i, uint32_t qdepth, uint64_t timeout_ns,
                              char *err, size_t errlen)
{
    snprintf(err, errlen, "qid %u: completion %u of %u (round %u) did not arrive within %.3f s", p->qid, i + 1u, qdepth,
             p->round, (double)timeout_ns / GPUQ_NS_PER_S);
    return -ETIMEDOUT;
}

static int gpuq_round_bad(const struct nvme_gpuq_pair *p, int r, uint32_t k, uint16_t cid, char *err, size_t errlen)
{
    snprintf(err, errlen, "qid %u: a completion (round position %u) named %s (CID 0x%04x) in round %u", p->qid, k,
             r == -NVME_GPUQ_BAD_SQID ? "another SQ" : "a command that is not outstanding", cid, p->round);
    return -EPROTO;
}

/* A round that stamps commands (or follows one that did) begins: the last round's sampled[] entries cleared,
 * this one's stamped commands (first, n) set in sampled[]; returns the first (qdepth when none). The stamped
 * commands are those whose running number is a multiple of every (nvme_bd_sampled), found by counting
 * (ts->next, the next such number) rather than a remainder per command: a round without one costs the
 * caller one compare (gpuq_stamps_due). */
static uint32_t gpuq_stamps_round(struct nvme_gpuq_stamps *ts, uint32_t qdepth)
{
    for (uint32_t k = 0, i = ts->first; k < ts->n; k++, i += ts->every)
        ts->sampled[i] = 0;
    ts->n = 0;
    ts->first = qdepth;
    if (ts->next - ts->cmds >= qdepth)
        return qdepth;
    ts->first = (uint32_t)(ts->next - ts->cmds);
    ts->n = 1u + (qdepth - 1u - ts->first) / ts->every;
    for (uint32_t k = 0, i = ts->first; k < ts->n; k++, i += ts->every)
        ts->sampled[i] = 1;
    ts->next += (uint64_t)ts->n * ts->every;
    return ts->first;
}

static inline int gpuq_stamps_due(const struct nvme_gpuq_stamps *ts, uint32_t qdepth)
{
    return ts->n || ts->next - ts->cmds < qdepth;
}

/* A completion matched: count it, and stamp T3P/T3 of a sampled command (T3P is T2 when the first look saw it).
 * *left counts the round's stamped commands not yet seen: once it is 0 no completion looks further. */
static inline void gpuq_stamp_seen(struct nvme_gpuq_pair *p, struct nvme_gpuq_stamps *ts, uint32_t *left, uint32_t idx,
                                   uint64_t t2, uint64_t t_empty, uint64_t tp)
{
    p->completed++;
    if (*left && ts->sampled[idx]) {
        ts->t[idx][NVME_GPUQ_T3P] = t_empty > t2 ? t_empty : t2;
        ts->t[idx][NVME_GPUQ_T3] = tp;
        --*left;
    }
}

int nvme_gpuq_cpu_round_opt(struct nvme_gpuq_pair *p, uint8_t opc, uint32_t nsid, const uint64_t *slba, uint32_t nlb,
                            const uint64_t *prp1, const uint64_t *prp2, uint32_t qdepth, uint64_t timeout_ns,
                            const struct nvme_gpuq_round_opt *o, struct nvme_gpuq_match_ctr *ctr, uint16_t *st,
                            char *err, size_t errlen)
{
    if (!qdepth || qdepth >= p->entries || qdepth > NVME_GPUQ_MAX_QDEPTH || !timeout_ns) {
        snprintf(err, errlen, "qdepth=%u: must be in 1..%u for a ring of %u entries", qdepth,
                 p->entries - 1u < NVME_GPUQ_MAX_QDEPTH ? p->entries - 1u : NVME_GPUQ_MAX_QDEPTH, p->entries);
        return -EINVAL;
    }
    if (o->match < 0 || o->match >= (int)NVME_GPUQ_MATCH_MODES || o->unordered > GPUQ_UNORDERED_MAX) {
        snprintf(err, errlen, "match=%d unordered=%u: a mode 0..%u and at most %u late SQE stores", o->match,
                 o->unordered, NVME_GPUQ_MATCH_MODES - 1u, GPUQ_UNORDERED_MAX);
        return -EINVAL;
    }
    struct nvme_gpuq_match_ctr local = {0};
    if (!ctr)
        ctr = &local;
    const struct nvme_bar *bar = nvme_ctrl_bar(p->ctrl);
    const uint32_t n = p->entries;
    struct nvme_gpuq_stamps *ts = p->stamps && p->stamps->every ? p->stamps : NULL;
    const uint32_t next0 = ts && gpuq_stamps_due(ts, qdepth) ? gpuq_stamps_round(ts, qdepth) : qdepth; /* first */
    uint32_t next = next0;
    uint32_t left = 0; /* stamped commands of the round not yet seen */
    const uint32_t late = o->unordered < qdepth ? o->unordered : qdepth;
    struct nvme_sqe pend[GPUQ_UNORDERED_MAX];
    for (uint32_t i = 0; i < qdepth; i++) { /* "thread" i owns SQ slot tail + i */
        const int smp = i == next;
        if (smp)
            ts->t[i][NVME_GPUQ_T0] = gpuq_now_ns();
        const bool held = i >= qdepth - late;
        nvme_gpuq_sqe_rw(held ? &pend[i - (qdepth - late)] : &p->sq[nvme_gpuq_cq_slot(p->sq_pos + i, n)], opc,
                         nvme_gpuq_cid_make(p->round, i), nsid, slba[i], nlb, prp1[i], prp2[i]);
        if (smp) {
            ts->t[i][NVME_GPUQ_T1] = gpuq_now_ns(), left++;
            next = ts->every < qdepth - i ? i + ts->every : qdepth;
        }
    }
    if (!o->no_fence) /* the fence: every store of the round lands before anything that follows it */
        for (uint32_t j = 0; j < late; j++)
            p->sq[nvme_gpuq_cq_slot(p->sq_pos + qdepth - late + j, n)] = pend[j];
    const uint64_t sq_pos0 = p->sq_pos;
    p->sq_pos += qdepth;
    nvme_wmb(); /* SQEs before the doorbell */
    /* the GPU's rule for SQs in host memory: read the round's last SQE back before the doorbell */
    const volatile struct nvme_sqe *last = &p->sq[nvme_gpuq_cq_slot(nvme_gpuq_last_sqe_pos(p->sq_pos), n)];
    if (!o->no_readback && !nvme_gpuq_sqe_readback_ok(last->cid, p->round, qdepth)) {
        p->sq_pos = sq_pos0; /* nothing was rung: the slots are free again */
        snprintf(err, errlen, "qid %u: the last SQE read back did not hold CID 0x%04x (round %u)", p->qid,
                 nvme_gpuq_cid_make(p->round, qdepth - 1u), p->round);
        return -EIO;
    }
    nvme_mmio_write32(bar, p->sq_db_off, nvme_gpuq_db(p->sq_pos - (p->db_short < qdepth ? p->db_short : 0u), n));
    const uint64_t t2 = left ? gpuq_now_ns() : 0;
    if (o->no_fence) /* the stores that were not ordered land now, after the controller may have fetched */
        for (uint32_t j = 0; j < late; j++)
            p->sq[nvme_gpuq_cq_slot(sq_pos0 + qdepth - late + j, n)] = pend[j];

    uint32_t seen[NVME_GPUQ_MAX_QDEPTH];
    memset(seen, 0, qdepth * sizeof(seen[0]));
    if (o->match == NVME_GPUQ_MATCH_SCAN) {
        /* BaM: every command scans the round's positions for its own CID; played command by command */
        for (uint32_t k = 0; k < qdepth; k++) {
            const uint64_t deadline = nvme_gpuq_deadline(gpuq_now_ns(), timeout_ns);
            uint32_t idx;
            uint16_t s = 0;
            int r;
            uint64_t tp, t_empty = 0; /* start of this look, of the last one that saw nothing */
            for (;;) {
                tp = gpuq_now_ns();
                r = nvme_gpuq_match_scan(p->cq, n, p->cq_pos, k, p->qid, p->round, qdepth, NVME_GPUQ_SCOPE_SYSTEM, seen,
                                         &idx, &s, ctr);
                if (r != NVME_GPUQ_POLL_EMPTY)
                    break;
                if (nvme_gpuq_expired(tp, deadline))
                    return gpuq_round_timeout(p, k, qdepth, timeout_ns, err, errlen);
                t_empty = tp;
                nvme_mmio_idle(bar, p->qid);
            }
            if (r < 0)
                return gpuq_round_bad(p, r, k, s, err, errlen);
            st[idx] = s;
            gpuq_stamp_seen(p, ts, &left, idx, t2, t_empty, tp);
        }
    } else {
        /* the poller warp, played lane by lane: step k looks at positions k*32 .. k*32+31 of the round, each
         * lane waiting for its own (nvme_gpuq_poller_idx), so the CQ is read in the GPU's order */
        const uint32_t steps = nvme_gpuq_poller_count(0, qdepth);
        for (uint32_t k = 0; k < steps; k++)
            for (uint32_t lane = 0; lane < NVME_GPUQ_POLLER_LANES && k < nvme_gpuq_poller_count(lane, qdepth); lane++) {
                const uint32_t i = nvme_gpuq_poller_idx(lane, k);
                const uint64_t deadline = nvme_gpuq_deadline(gpuq_now_ns(), timeout_ns);
                uint32_t idx;
                uint16_t s = 0;
                int r;
                uint64_t tp, t_empty = 0;
                for (;;) {
                    tp = gpuq_now_ns();
                    r = nvme_gpuq_match_look(o->match, p->cq, n, p->cq_pos, i, p->qid, p->round, qdepth,
                                             NVME_GPUQ_SCOPE_SYSTEM, seen, &idx, &s, ctr);
                    if (r != NVME_GPUQ_POLL_EMPTY)
                        break;
                    if (nvme_gpuq_expired(tp, deadline))
                        return gpuq_round_timeout(p, i, qdepth, timeout_ns, err, errlen);
                    t_empty = tp;
                    nvme_mmio_idle(bar, p->qid);
                }
                if (r < 0)
                    return gpuq_round_bad(p, r, i, s, err, errlen);
                st[idx] = s;
                gpuq_stamp_seen(p, ts, &left, idx, t2, t_empty, tp);
            }
    }
    p->cq_pos += qdepth;
    p->round++;
    nvme_mmio_write32(bar, p->cq_db_off, nvme_gpuq_db(p->cq_pos, n));
    if (ts) {
        if (next0 < qdepth) { /* released: T4 of the stamped commands (T2 was read after the doorbell) */
            const uint64_t t4 = gpuq_now_ns();
            for (uint32_t k = 0, i = next0; k < ts->n; k++, i += ts->every) {
                ts->t[i][NVME_GPUQ_T2] = t2;
                ts->t[i][NVME_GPUQ_T4] = t4;
            }
        }
        ts->cmds += qdepth;
    }
    return 0;
}

int nvme_gpuq_cpu_round(struct nvme_gpuq_pair *p, uint8_t opc, uint32_t nsid, const uint64_t *slba, uint32_t nlb,
                        const uint64_t *prp1, const uint64_t *prp2, uint32_t qdepth, uint64_t timeout_ns, uint16_t *st,
                        char *err, size_t errlen)
{
    const struct nvme_gpuq_round_opt o = {.match = NVME_GPUQ_MATCH_CID};
    return nvme_gpuq_cpu_round_opt(p, opc, nsid, slba, nlb, prp1, prp2, qdepth, timeout_ns, &o, NULL, st, err, errlen);
}
