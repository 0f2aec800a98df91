/*
 * ctrl.c — the emulated controller: set open/close, BAR registers, admin
 * commands, I/O queue management, fault injection, statistics, and the
 * service thread of mode=thread.
 *
 * Register semantics: CAP/VS are read-only (restored after any store);
 * CC.EN 0->1 sets CSTS.RDY only when AQA/ASQ/ACQ and CC.MPS/CSS/AMS are valid
 * (else CSTS.CFS); CC.EN 1->0 deletes every queue and clears RDY/CFS/SHST;
 * CC.SHN != 0 sets CSTS.SHST = complete.  Doorbells at 0x1000 with the
 * CAP.DSTRD stride; a write of an out-of-range value is ignored.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nvme/emu/emu_internal.h"
#include "nvme/uri.h"

#define EMU_MN               "nvmelab emulated controller"
#define EMU_FR               "0.1.0"
#define EMU_RAB              6u
#define EMU_ACL              3u       /* 0-based: 4 outstanding Abort commands */
#define EMU_FRMW_1SLOT       0x02u
#define EMU_SQES             ((NVME_SQES_LOG2 << 4) | NVME_SQES_LOG2)
#define EMU_CQES             ((NVME_CQES_LOG2 << 4) | NVME_CQES_LOG2)
#define EMU_DLFEAT           0x09u    /* deallocated blocks read as zeros; Write Zeroes may deallocate */
#define EMU_NSFEAT_THIN      0x01u
#define EMU_FEAT_SEL_SHIFT   8u
#define EMU_FEAT_SEL_MASK    0x7u
#define EMU_FEAT_SEL_SUPPORTED 3u
#define EMU_FEAT_CAP_CHANGEABLE 0x4u
#define EMU_FEAT_SV          (1u << 31)
#define EMU_LOG_LID_MASK     0xffu
#define EMU_LOG_NUMDL_SHIFT  16u
#define EMU_LOG_NUMDU_MASK   0xffffu
#define EMU_ABORT_NOT_DONE   1u
#define EMU_QID_MASK         0xffffu
#define EMU_QSIZE_SHIFT      16u
#define EMU_ADMIN_XFER_MAX   (1u << 20)
#define EMU_SMART_TEMP_OFF   1u
#define EMU_SMART_DUR_OFF    32u
#define EMU_SMART_DUW_OFF    48u
#define EMU_SMART_HRC_OFF    64u
#define EMU_SMART_HWC_OFF    80u
#define EMU_SMART_SPARE_OFF  3u
#define EMU_SMART_SPARE_THR  4u
#define EMU_FULL_PERCENT     100u
#define EMU_SPARE_THRESHOLD  10u

/* ---------------------------------------------------------------- registers in BAR memory */
static inline void reg_w32(struct emu_ctrl *c, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(void *)(c->mem + off), v, __ATOMIC_RELEASE);
}
static inline void reg_w64(struct emu_ctrl *c, uint32_t off, uint64_t v)
{
    reg_w32(c, off, (uint32_t)v);
    reg_w32(c, off + 4, (uint32_t)(v >> 32));
}
static inline uint32_t reg_r32(const struct emu_ctrl *c, uint32_t off)
{
    return __atomic_load_n((const uint32_t *)(const void *)(c->mem + off), __ATOMIC_ACQUIRE);
}
static inline uint64_t reg_r64(const struct emu_ctrl *c, uint32_t off)
{
    return reg_r32(c, off) | ((uint64_t)reg_r32(c, off + 4) << 32);
}

static void csts_publish(struct emu_ctrl *c)
{
    reg_w32(c, NVME_REG_CSTS, atomic_load_explicit(&c->csts, memory_order_acquire));
}

static void csts_set(struct emu_ctrl *c, uint32_t set, uint32_t clear)
{
    uint32_t v = atomic_load_explicit(&c->csts, memory_order_relaxed);
    atomic_store_explicit(&c->csts, (v & ~clear) | set, memory_order_release);
    csts_publish(c);
}

static void restore_ro(struct emu_ctrl *c)
{
    reg_w64(c, NVME_REG_CAP, c->cap);
    reg_w32(c, NVME_REG_VS, NVME_VS(1, 4, 0));
    csts_publish(c);
}

static inline uint32_t db_stride(const struct emu_ctrl *c) { return NVME_DB_BASE_STRIDE << c->cfg.dstrd; }

/* ---------------------------------------------------------------- queues */
static void sq_free(struct emu_sq *sq)
{
    if (!sq)
        return;
    free(sq->cid_bits);
    free(sq->heap);
    free(sq);
}

static void cq_free(struct emu_cq *cq)
{
    if (!cq)
        return;
    free(cq->sqids);
    free(cq);
}

static struct emu_cq *cq_new(struct emu_ctrl *c, uint16_t qid, uint64_t base, uint32_t size)
{
    struct emu_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return NULL;
    cq->id = qid;
    cq->size = size;
    cq->ring = (volatile struct nvme_cqe *)(uintptr_t)base;
    cq->phase = NVME_CQE_P;
    atomic_flag_clear(&cq->lock);
    reg_w32(c, nvme_db_cq_off(qid, c->cfg.dstrd), 0);
    if (c->db_seen)
        c->db_seen[2 * qid + 1] = 0;
    return cq;
}

static struct emu_sq *sq_new(struct emu_ctrl *c, uint16_t qid, uint64_t base, uint32_t size, struct emu_cq *cq)
{
    struct emu_sq *sq = calloc(1, sizeof(*sq));
    if (!sq)
        return NULL;
    sq->cid_bits = calloc(EMU_CID_WORDS, sizeof(uint64_t));
    sq->heap = calloc(size, sizeof(struct emu_pend));
    if (cq->nsq == cq->sqids_cap) {
        uint16_t ncap = cq->sqids_cap ? (uint16_t)(cq->sqids_cap * 2) : 4;
        uint16_t *n = realloc(cq->sqids, ncap * sizeof(uint16_t));
        if (!n) {
            sq_free(sq);
            return NULL;
        }
        cq->sqids = n;
        cq->sqids_cap = ncap;
    }
    if (!sq->cid_bits || !sq->heap) {
        sq_free(sq);
        return NULL;
    }
    sq->id = qid;
    sq->size = size;
    sq->ring = (const volatile struct nvme_sqe *)(uintptr_t)base;
    sq->cq = cq;
    sq->st = &c->qstats[qid];
    sq->rng = (c->set->cfg.seed * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)c->index << 32) ^ qid ^ 0x5DEECE66Dull;
    if (!sq->rng)
        sq->rng = 1;
    memset(sq->st, 0, sizeof(*sq->st));
    reg_w32(c, nvme_db_sq_off(qid, c->cfg.dstrd), 0);
    if (c->db_seen)
        c->db_seen[2 * qid] = 0;
    cq->sqids[cq->nsq++] = qid;
    return sq;
}

static void cq_unbind(struct emu_cq *cq, uint16_t sqid)
{
    for (uint16_t i = 0; i < cq->nsq; i++)
        if (cq->sqids[i] == sqid) {
            cq->sqids[i] = cq->sqids[--cq->nsq];
            return;
        }
}

/* delete an SQ: commands still held complete with "Command Aborted due to SQ Deletion" where the CQ has room */
static void sq_delete(struct emu_ctrl *c, uint16_t qid, bool post)
{
    struct emu_sq *sq = atomic_load_explicit(&c->sqs[qid], memory_order_relaxed);
    if (!sq)
        return;
    atomic_store_explicit(&c->sqs[qid], NULL, memory_order_release);
    if (post) {
        for (uint32_t i = 0; i < sq->nheap; i++) {
            sq->heap[i].due = 0;
            sq->heap[i].status = EMU_ST(NVME_SCT_GENERIC, NVME_SC_ABORT_SQ_DELETED);
        }
        emu_sq_drain(c, sq, 1);
    }
    atomic_store_explicit(&sq->st->inflight, 0, memory_order_relaxed);
    cq_unbind(sq->cq, qid);
    sq_free(sq);
}

static void queues_reset(struct emu_ctrl *c)
{
    for (uint32_t q = 0; q <= c->cfg.nioq; q++)
        sq_delete(c, (uint16_t)q, false);
    for (uint32_t q = 0; q <= c->cfg.nioq; q++) {
        cq_free(c->cqs[q]);
        c->cqs[q] = NULL;
    }
    /* doorbells read 0 after a reset */
    memset(c->mem + NVME_REG_DBS, 0, c->memsize - NVME_REG_DBS);
    if (c->db_seen)
        memset(c->db_seen, 0, 2 * (c->cfg.nioq + 1) * sizeof(uint32_t));
}

/* ---------------------------------------------------------------- CC */
static void ctrl_disable(struct emu_ctrl *c)
{
    queues_reset(c);
    c->enabled = false;
    c->nq_set = false;
    c->nsq_alloc = c->ncq_alloc = c->cfg.nioq;
    memset(c->feat, 0, sizeof(c->feat));
    atomic_store(&c->cfs, false);
    atomic_store(&c->iops_tat, 0);
    atomic_store(&c->bw_tat, 0);
    csts_set(c, 0, NVME_CSTS_RDY | NVME_CSTS_CFS | NVME_CSTS_SHST_MASK);
}

static void ctrl_enable(struct emu_ctrl *c, uint32_t cc)
{
    uint32_t aqa = reg_r32(c, NVME_REG_AQA);
    uint64_t asq = reg_r64(c, NVME_REG_ASQ), acq = reg_r64(c, NVME_REG_ACQ);
    uint32_t asqs = nvme_aqa_asqs(aqa) + 1, acqs = nvme_aqa_acqs(aqa) + 1;
    bool ok = asqs >= NVME_QUEUE_MIN_ENTRIES && acqs >= NVME_QUEUE_MIN_ENTRIES && asqs <= c->cfg.mqes &&
              acqs <= c->cfg.mqes && asq && acq && !(asq & (EMU_PAGE_SIZE - 1)) && !(acq & (EMU_PAGE_SIZE - 1)) &&
              nvme_cc_mps(cc) == 0 && nvme_cc_css(cc) == NVME_CC_CSS_NVM && nvme_cc_ams(cc) == 0 &&
              emu_dma_ok(c->set, asq, (uint64_t)asqs * NVME_SQE_SIZE) &&
              emu_dma_ok(c->set, acq, (uint64_t)acqs * NVME_CQE_SIZE);
    if (!ok) {
        /* the host asked for something this controller cannot run: fatal status, RDY stays 0 */
        atomic_store(&c->cfs, true);
        csts_set(c, NVME_CSTS_CFS, NVME_CSTS_RDY);
        return;
    }
    struct emu_cq *cq = cq_new(c, 0, acq, acqs);
    struct emu_sq *sq = cq ? sq_new(c, 0, asq, asqs, cq) : NULL;
    if (!sq) {
        cq_free(cq);
        atomic_store(&c->cfs, true);
        csts_set(c, NVME_CSTS_CFS, NVME_CSTS_RDY);
        return;
    }
    c->cqs[0] = cq;
    atomic_store_explicit(&c->sqs[0], sq, memory_order_release);
    c->enabled = true;
    csts_set(c, NVME_CSTS_RDY, NVME_CSTS_SHST_MASK);
}

static void cc_write(struct emu_ctrl *c, uint32_t cc)
{
    uint32_t old = c->cc;
    c->cc = cc;
    if (!nvme_cc_en(old) && nvme_cc_en(cc))
        ctrl_enable(c, cc);
    else if (nvme_cc_en(old) && !nvme_cc_en(cc))
        ctrl_disable(c);
    if (nvme_cc_shn(cc) != NVME_CC_SHN_NONE && nvme_cc_shn(old) == NVME_CC_SHN_NONE)
        csts_set(c, NVME_CSTS_SHST_COMPLETE << NVME_CSTS_SHST_SHIFT, NVME_CSTS_SHST_MASK);
}

/* ---------------------------------------------------------------- BAR ops */
static void bar_write(void *ctx, uint32_t off, uint64_t val, unsigned width)
{
    struct emu_ctrl *c = ctx;
    const bool threaded = c->set->cfg.mode == EMU_MODE_THREAD;
    (void)width;
    if (off >= NVME_REG_DBS) {
        if (threaded || off >= c->memsize)
            return; /* the service thread reads the doorbell words itself */
        uint32_t rel = off - NVME_REG_DBS, stride = db_stride(c);
        if (rel % stride)
            return;
        uint32_t idx = rel / stride, qid = idx >> 1;
        if (qid > c->cfg.nioq || !c->enabled)
            return;
        if (idx & 1) {
            struct emu_cq *cq = c->cqs[qid];
            if (!cq || val >= cq->size)
                return;
            cq->head = (uint32_t)val;
            emu_cq_service(c, cq);
        } else {
            struct emu_sq *sq = atomic_load_explicit(&c->sqs[qid], memory_order_acquire);
            if (!sq || val >= sq->size)
                return;
            sq->tail = (uint32_t)val;
            emu_sq_service(c, sq);
        }
        return;
    }
    if (threaded)
        pthread_mutex_lock(&c->lock);
    if (off == NVME_REG_CC)
        cc_write(c, (uint32_t)val);
    restore_ro(c);
    if (threaded)
        pthread_mutex_unlock(&c->lock);
}

static void bar_idle(void *ctx, uint16_t cqid)
{
    struct emu_ctrl *c = ctx;
    if (c->set->cfg.mode == EMU_MODE_THREAD || cqid > c->cfg.nioq || !c->enabled)
        return;
    struct emu_cq *cq = c->cqs[cqid];
    if (cq)
        emu_cq_service(c, cq);
}

static const struct nvme_bar_ops emu_bar_ops = {.write = bar_write, .idle = bar_idle};

/* ---------------------------------------------------------------- admin: data out */
struct outbuf {
    const uint8_t *src;
    uint64_t srclen; /* bytes past srclen read as zero */
    uint64_t skip;   /* offset into src (log page offset) */
};

static int seg_out(void *arg, uint8_t *host, size_t len, uint64_t xo)
{
    struct outbuf *o = arg;
    for (size_t i = 0; i < len; i++) {
        uint64_t s = o->skip + xo + i;
        host[i] = s < o->srclen ? o->src[s] : 0;
    }
    return 0;
}

static uint16_t copy_out(struct emu_ctrl *c, const struct nvme_sqe *cmd, const void *src, uint64_t srclen,
                         uint64_t skip, uint64_t len)
{
    struct outbuf o = {src, srclen, skip};
    return emu_prp_walk(c->set, cmd->prp1, cmd->prp2, len, seg_out, &o);
}

static void pad_copy(char *dst, size_t n, const char *src)
{
    memset(dst, ' ', n);
    size_t l = strlen(src);
    memcpy(dst, src, l < n ? l : n);
}

static uint16_t admin_identify(struct emu_ctrl *c, const struct nvme_sqe *cmd)
{
    uint8_t cns = cmd->cdw10 & 0xffu;
    union {
        struct nvme_id_ctrl ctrl;
        struct nvme_id_ns ns;
        uint32_t list[NVME_NS_LIST_MAX];
        uint8_t raw[NVME_IDENTIFY_SIZE];
    } id;
    memset(&id, 0, sizeof(id));
    char tmp[64];
    switch (cns) {
    case NVME_CNS_CTRL: {
        struct nvme_id_ctrl *ic = &id.ctrl;
        ic->vid = ic->ssvid = EMU_VID;
        snprintf(tmp, sizeof(tmp), "EMU%08llX%02u", (unsigned long long)(c->set->cfg.seed & 0xffffffffu), c->index);
        pad_copy(ic->sn, NVME_SN_LEN, tmp);
        pad_copy(ic->mn, NVME_MN_LEN, EMU_MN);
        pad_copy(ic->fr, NVME_FR_LEN, EMU_FR);
        ic->rab = EMU_RAB;
        uint8_t mdts = 0;
        if (c->cfg.mdts)
            while ((EMU_PAGE_SIZE << mdts) < c->cfg.mdts)
                mdts++;
        ic->mdts = mdts;
        ic->cntlid = (uint16_t)(c->index + 1);
        ic->ver = NVME_VS(1, 4, 0);
        ic->acl = EMU_ACL;
        ic->aerl = EMU_AERL;
        ic->frmw = EMU_FRMW_1SLOT;
        ic->sqes = EMU_SQES;
        ic->cqes = EMU_CQES;
        ic->nn = c->cfg.nns;
        ic->oncs = NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES;
        snprintf(ic->subnqn, sizeof(ic->subnqn), "nqn.2024-01.org.nvmelab:emu:%llu:%u",
                 (unsigned long long)c->set->cfg.seed, c->index);
        break;
    }
    case NVME_CNS_NS: {
        if (cmd->nsid == 0 || cmd->nsid > c->cfg.nns)
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        const struct emu_ns *ns = &c->ns[cmd->nsid - 1];
        struct nvme_id_ns *in = &id.ns;
        in->nsze = ns->nlb;
        in->ncap = c->cfg.ncap >> ns->lba_shift;
        in->nuse = emu_ns_used_lbas(ns);
        if (in->nuse > in->ncap)
            in->nuse = in->ncap;
        in->nsfeat = in->ncap < in->nsze ? EMU_NSFEAT_THIN : 0;
        in->nlbaf = 0;
        in->flbas = 0;
        in->dlfeat = EMU_DLFEAT;
        in->lbaf[0].lbads = (uint8_t)ns->lba_shift;
        uint64_t eui = (c->set->cfg.seed << 24) ^ ((uint64_t)c->index << 8) ^ ns->nsid;
        memcpy(in->eui64, &eui, sizeof(in->eui64));
        memcpy(in->nguid, &eui, sizeof(eui));
        break;
    }
    case NVME_CNS_ACTIVE_NS_LIST: {
        if (cmd->nsid >= UINT32_MAX - 1)
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        unsigned n = 0;
        for (uint32_t i = cmd->nsid + 1; i <= c->cfg.nns && n < NVME_NS_LIST_MAX; i++)
            id.list[n++] = i;
        break;
    }
    default:
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    }
    return copy_out(c, cmd, id.raw, sizeof(id.raw), 0, NVME_IDENTIFY_SIZE);
}

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, sizeof(v)); }

static uint16_t admin_get_log(struct emu_ctrl *c, const struct nvme_sqe *cmd)
{
    uint8_t lid = cmd->cdw10 & EMU_LOG_LID_MASK;
    uint64_t numd = ((uint64_t)(cmd->cdw11 & EMU_LOG_NUMDU_MASK) << 16 | (cmd->cdw10 >> EMU_LOG_NUMDL_SHIFT)) + 1;
    uint64_t len = numd * 4, off = cmd->cdw12 | ((uint64_t)cmd->cdw13 << 32);
    uint8_t page[EMU_SMART_LOG_SIZE];
    uint64_t plen;
    memset(page, 0, sizeof(page));
    switch (lid) {
    case NVME_LOGPAGE_ERROR: /* no errors recorded: one all-zero entry (ELPE = 0) */
        plen = EMU_ERROR_LOG_ENTRY;
        break;
    case NVME_LOGPAGE_SMART: {
        if (cmd->nsid != 0 && cmd->nsid != UINT32_MAX)
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD); /* no per-namespace SMART (LPA bit 0 = 0) */
        uint64_t rdb = 0, wrb = 0, rdc = 0, wrc = 0;
        for (uint32_t q = 0; q <= c->cfg.nioq; q++) {
            rdb += atomic_load_explicit(&c->qstats[q].rd_bytes, memory_order_relaxed);
            wrb += atomic_load_explicit(&c->qstats[q].wr_bytes, memory_order_relaxed);
            rdc += atomic_load_explicit(&c->qstats[q].rd_cmds, memory_order_relaxed);
            wrc += atomic_load_explicit(&c->qstats[q].wr_cmds, memory_order_relaxed);
        }
        uint16_t temp = EMU_TEMP_KELVIN;
        memcpy(page + EMU_SMART_TEMP_OFF, &temp, sizeof(temp));
        page[EMU_SMART_SPARE_OFF] = EMU_FULL_PERCENT;
        page[EMU_SMART_SPARE_THR] = EMU_SPARE_THRESHOLD;
        put_u64(page + EMU_SMART_DUR_OFF, (rdb + EMU_DATA_UNIT_BYTES - 1) / EMU_DATA_UNIT_BYTES);
        put_u64(page + EMU_SMART_DUW_OFF, (wrb + EMU_DATA_UNIT_BYTES - 1) / EMU_DATA_UNIT_BYTES);
        put_u64(page + EMU_SMART_HRC_OFF, rdc);
        put_u64(page + EMU_SMART_HWC_OFF, wrc);
        plen = EMU_SMART_LOG_SIZE;
        break;
    }
    default:
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_LOG_PAGE);
    }
    if ((off & 3) || off >= plen || len > EMU_ADMIN_XFER_MAX || (c->cfg.mdts && len > c->cfg.mdts))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    return copy_out(c, cmd, page, plen, off, len);
}

static bool feature_known(uint8_t fid)
{
    switch (fid) {
    case NVME_FEAT_ARBITRATION: case NVME_FEAT_POWER_MGMT: case NVME_FEAT_TEMP_THRESH:
    case NVME_FEAT_ERR_RECOVERY: case NVME_FEAT_NUM_QUEUES: case NVME_FEAT_IRQ_COALESCE:
    case NVME_FEAT_IRQ_CONFIG: case NVME_FEAT_WRITE_ATOMIC: case NVME_FEAT_ASYNC_EVENT:
        return true;
    default:
        return false;
    }
}

static bool any_io_queue(const struct emu_ctrl *c)
{
    for (uint32_t q = 1; q <= c->cfg.nioq; q++)
        if (c->cqs[q] || atomic_load_explicit(&c->sqs[q], memory_order_relaxed))
            return true;
    return false;
}

static uint16_t admin_set_features(struct emu_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0)
{
    uint8_t fid = cmd->cdw10 & 0xffu;
    if (!feature_known(fid))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if (cmd->cdw10 & EMU_FEAT_SV)
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_FEATURE_NOT_SAVEABLE);
    if (fid == NVME_FEAT_NUM_QUEUES) {
        uint32_t nsqr = cmd->cdw11 & 0xffffu, ncqr = cmd->cdw11 >> 16;
        if (nsqr == 0xffffu || ncqr == 0xffffu)
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
        if (any_io_queue(c))
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR);
        c->nsq_alloc = nsqr + 1 < c->cfg.nioq ? nsqr + 1 : c->cfg.nioq;
        c->ncq_alloc = ncqr + 1 < c->cfg.nioq ? ncqr + 1 : c->cfg.nioq;
        c->nq_set = true;
        *dw0 = NVME_NUM_QUEUES(c->nsq_alloc, c->ncq_alloc);
        return EMU_ST_OK;
    }
    c->feat[fid] = cmd->cdw11;
    return EMU_ST_OK;
}

static uint16_t admin_get_features(struct emu_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0)
{
    uint8_t fid = cmd->cdw10 & 0xffu;
    uint32_t sel = (cmd->cdw10 >> EMU_FEAT_SEL_SHIFT) & EMU_FEAT_SEL_MASK;
    if (!feature_known(fid) || sel > EMU_FEAT_SEL_SUPPORTED)
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if (sel == EMU_FEAT_SEL_SUPPORTED) {
        *dw0 = EMU_FEAT_CAP_CHANGEABLE;
        return EMU_ST_OK;
    }
    if (fid == NVME_FEAT_NUM_QUEUES) {
        *dw0 = sel == 0 ? NVME_NUM_QUEUES(c->nsq_alloc, c->ncq_alloc) : NVME_NUM_QUEUES(c->cfg.nioq, c->cfg.nioq);
        return EMU_ST_OK;
    }
    *dw0 = sel == 0 ? c->feat[fid] : 0;
    return EMU_ST_OK;
}

static uint16_t admin_create_cq(struct emu_ctrl *c, const struct nvme_sqe *cmd)
{
    uint32_t qid = cmd->cdw10 & EMU_QID_MASK, size = (cmd->cdw10 >> EMU_QSIZE_SHIFT) + 1;
    if (qid == 0 || qid > c->ncq_alloc || c->cqs[qid])
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    if (size < NVME_QUEUE_MIN_ENTRIES || size > c->cfg.mqes)
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QUEUE_SIZE);
    if (!(cmd->cdw11 & NVME_CREATE_Q_PC) || nvme_cc_iocqes(c->cc) != NVME_CQES_LOG2)
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if ((cmd->cdw11 & NVME_CREATE_CQ_IEN) && (cmd->cdw11 >> NVME_CREATE_CQ_IV_SHIFT) != 0)
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_VECTOR);
    if (!cmd->prp1 || !emu_dma_ok(c->set, cmd->prp1, (uint64_t)size * NVME_CQE_SIZE))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if (cmd->prp1 & (EMU_PAGE_SIZE - 1))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
    struct emu_cq *cq = cq_new(c, (uint16_t)qid, cmd->prp1, size);
    if (!cq)
        return EMU_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
    c->cqs[qid] = cq;
    return EMU_ST_OK;
}

static uint16_t admin_create_sq(struct emu_ctrl *c, const struct nvme_sqe *cmd)
{
    uint32_t qid = cmd->cdw10 & EMU_QID_MASK, size = (cmd->cdw10 >> EMU_QSIZE_SHIFT) + 1;
    uint32_t cqid = cmd->cdw11 >> NVME_CREATE_SQ_CQID_SHIFT;
    if (qid == 0 || qid > c->nsq_alloc || atomic_load_explicit(&c->sqs[qid], memory_order_relaxed))
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    if (size < NVME_QUEUE_MIN_ENTRIES || size > c->cfg.mqes)
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QUEUE_SIZE);
    if (cqid == 0 || cqid > c->cfg.nioq || !c->cqs[cqid])
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_CQ_INVALID);
    if (!(cmd->cdw11 & NVME_CREATE_Q_PC) || nvme_cc_iosqes(c->cc) != NVME_SQES_LOG2)
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if (!cmd->prp1 || !emu_dma_ok(c->set, cmd->prp1, (uint64_t)size * NVME_SQE_SIZE))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if (cmd->prp1 & (EMU_PAGE_SIZE - 1))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
    struct emu_sq *sq = sq_new(c, (uint16_t)qid, cmd->prp1, size, c->cqs[cqid]);
    if (!sq)
        return EMU_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
    atomic_store_explicit(&c->sqs[qid], sq, memory_order_release);
    return EMU_ST_OK;
}

static uint16_t admin_delete_sq(struct emu_ctrl *c, const struct nvme_sqe *cmd)
{
    uint32_t qid = cmd->cdw10 & EMU_QID_MASK;
    if (qid == 0 || qid > c->cfg.nioq || !atomic_load_explicit(&c->sqs[qid], memory_order_relaxed))
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    sq_delete(c, (uint16_t)qid, true);
    return EMU_ST_OK;
}

static uint16_t admin_delete_cq(struct emu_ctrl *c, const struct nvme_sqe *cmd)
{
    uint32_t qid = cmd->cdw10 & EMU_QID_MASK;
    if (qid == 0 || qid > c->cfg.nioq || !c->cqs[qid])
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    if (c->cqs[qid]->nsq)
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_QUEUE_DELETION);
    cq_free(c->cqs[qid]);
    c->cqs[qid] = NULL;
    return EMU_ST_OK;
}

void emu_admin_exec(struct emu_ctrl *c, struct emu_sq *sq, const struct nvme_sqe *cmd, uint16_t *status,
                    uint32_t *dw0, bool *hold)
{
    if (cmd->flags & (NVME_SQE_FUSE_MASK | NVME_SQE_PSDT_MASK)) {
        *status = EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
        return;
    }
    switch (cmd->opc) {
    case NVME_ADM_IDENTIFY: *status = admin_identify(c, cmd); break;
    case NVME_ADM_GET_LOG_PAGE: *status = admin_get_log(c, cmd); break;
    case NVME_ADM_SET_FEATURES: *status = admin_set_features(c, cmd, dw0); break;
    case NVME_ADM_GET_FEATURES: *status = admin_get_features(c, cmd, dw0); break;
    case NVME_ADM_CREATE_CQ: *status = admin_create_cq(c, cmd); break;
    case NVME_ADM_CREATE_SQ: *status = admin_create_sq(c, cmd); break;
    case NVME_ADM_DELETE_SQ: *status = admin_delete_sq(c, cmd); break;
    case NVME_ADM_DELETE_CQ: *status = admin_delete_cq(c, cmd); break;
    case NVME_ADM_KEEP_ALIVE: *status = EMU_ST_OK; break;
    case NVME_ADM_ABORT: {
        /* Best effort, as the spec allows: this controller never aborts a command (DW0 bit 0 = 1). */
        uint32_t sqid = cmd->cdw10 & EMU_QID_MASK;
        if (sqid > c->cfg.nioq || !atomic_load_explicit(&c->sqs[sqid], memory_order_relaxed))
            *status = EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
        else
            *dw0 = EMU_ABORT_NOT_DONE;
        break;
    }
    case NVME_ADM_ASYNC_EVENT:
        if (sq->aers > EMU_AERL) {
            *status = EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_AER_LIMIT);
        } else {
            sq->aers++;
            *hold = true; /* no events are ever generated: outstanding until reset */
        }
        break;
    default:
        *status = EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
        break;
    }
}

/* ---------------------------------------------------------------- mode=thread */
static void *svc_main(void *arg)
{
    struct emu_ctrl *c = arg;
    unsigned spins = 0;
    const uint32_t dstrd = c->cfg.dstrd;
    while (!atomic_load_explicit(&c->svc_stop, memory_order_acquire)) {
        bool work = false;
        pthread_mutex_lock(&c->lock);
        if (c->enabled && !atomic_load_explicit(&c->cfs, memory_order_relaxed)) {
            for (uint32_t q = 0; q <= c->cfg.nioq; q++) {
                struct emu_cq *cq = c->cqs[q];
                struct emu_sq *sq = atomic_load_explicit(&c->sqs[q], memory_order_relaxed);
                if (cq) {
                    uint32_t v = reg_r32(c, nvme_db_cq_off(q, dstrd));
                    if (v != c->db_seen[2 * q + 1] && v < cq->size) {
                        c->db_seen[2 * q + 1] = v;
                        cq->head = v;
                        work = true;
                    }
                }
                if (sq) {
                    uint32_t v = reg_r32(c, nvme_db_sq_off(q, dstrd));
                    if (v != c->db_seen[2 * q] && v < sq->size) {
                        c->db_seen[2 * q] = v;
                        sq->tail = v;
                    }
                    if (sq->tail != sq->head || sq->nheap) {
                        uint64_t before = atomic_load_explicit(&sq->st->completed, memory_order_relaxed) +
                                          atomic_load_explicit(&sq->st->fetched, memory_order_relaxed);
                        emu_sq_service(c, sq);
                        /* sq may be gone if an admin command deleted it */
                        struct emu_sq *again = atomic_load_explicit(&c->sqs[q], memory_order_relaxed);
                        if (again == sq &&
                            atomic_load_explicit(&sq->st->completed, memory_order_relaxed) +
                                    atomic_load_explicit(&sq->st->fetched, memory_order_relaxed) != before)
                            work = true;
                    }
                }
            }
        }
        pthread_mutex_unlock(&c->lock);
        if (work) {
            spins = 0;
        } else if (++spins > EMU_SVC_IDLE_SPINS) {
            struct timespec ts = {0, EMU_SVC_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- set open / close */
static int open_backing(const struct emu_cfg *cfg, unsigned ci, unsigned nsi, uint64_t nsze, int *fd_out,
                        char *err, size_t errlen)
{
    char path[EMU_MAX_PATH + 32];
    unsigned total = 0;
    for (unsigned i = 0; i < cfg->ndev; i++)
        total += cfg->c[i].nns;
    if (total == 1)
        snprintf(path, sizeof(path), "%s", cfg->path);
    else
        snprintf(path, sizeof(path), "%s.%u.%u", cfg->path, ci, nsi + 1);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "emu: parameter 'backing': cannot open '%s': %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, errlen, "emu: parameter 'backing': '%s' is not a regular file", path);
        return -EINVAL;
    }
    if ((uint64_t)st.st_size < nsze && ftruncate(fd, (off_t)nsze)) {
        int e = errno;
        close(fd);
        snprintf(err, errlen, "emu: parameter 'backing': cannot size '%s' to %llu bytes: %s", path,
                 (unsigned long long)nsze, strerror(e));
        return -e;
    }
    *fd_out = fd;
    return 0;
}

static void ctrl_fini(struct emu_ctrl *c)
{
    if (c->svc_running) {
        atomic_store(&c->svc_stop, true);
        pthread_join(c->svc, NULL);
        c->svc_running = false;
    }
    if (c->sqs && c->cqs)
        queues_reset(c);
    for (unsigned i = 0; i < EMU_MAX_NS; i++)
        if (c->ns[i].nsid)
            emu_ns_fini(&c->ns[i]);
    free(c->sqs);
    free(c->cqs);
    free(c->qstats);
    free(c->db_seen);
    free(c->mem);
    pthread_mutex_destroy(&c->lock);
}

static int ctrl_init(struct nvme_emu_set *set, unsigned idx, char *err, size_t errlen)
{
    struct emu_ctrl *c = &set->ctrls[idx];
    const struct emu_cfg *cfg = &set->cfg;
    c->set = set;
    c->index = idx;
    c->cfg = cfg->c[idx];
    pthread_mutex_init(&c->lock, NULL);
    size_t dbend = NVME_REG_DBS + 2u * ((size_t)c->cfg.nioq + 1) * (NVME_DB_BASE_STRIDE << c->cfg.dstrd);
    c->memsize = (dbend + EMU_PAGE_SIZE - 1) & ~(size_t)(EMU_PAGE_SIZE - 1);
    if (c->memsize < NVME_BAR0_MIN_SIZE)
        c->memsize = NVME_BAR0_MIN_SIZE;
    c->mem = aligned_alloc(EMU_PAGE_SIZE, c->memsize);
    c->sqs = calloc(c->cfg.nioq + 1, sizeof(*c->sqs));
    c->cqs = calloc(c->cfg.nioq + 1, sizeof(*c->cqs));
    c->qstats = calloc(c->cfg.nioq + 1, sizeof(*c->qstats));
    if (!c->mem || !c->sqs || !c->cqs || !c->qstats) {
        snprintf(err, errlen, "emu: out of memory creating controller %u", idx);
        return -ENOMEM;
    }
    memset(c->mem, 0, c->memsize);
    for (unsigned i = 0; i < c->cfg.nns; i++) {
        int fd = -1, r;
        if (cfg->backing == EMU_BACKING_FILE && (r = open_backing(cfg, idx, i, c->cfg.nsze, &fd, err, errlen)))
            return r;
        if ((r = emu_ns_init(&c->ns[i], i + 1, &c->cfg, fd))) {
            snprintf(err, errlen, "emu: out of memory for namespace %u of controller %u", i + 1, idx);
            return r;
        }
    }
    c->cap = NVME_CAP_MQES(c->cfg.mqes - 1) | NVME_CAP_CQR | NVME_CAP_TO(EMU_CAP_TO_UNITS) |
             NVME_CAP_DSTRD(c->cfg.dstrd) | NVME_CAP_CSS(NVME_CAP_CSS_NVM) | NVME_CAP_MPSMIN(0) | NVME_CAP_MPSMAX(0);
    c->nsq_alloc = c->ncq_alloc = c->cfg.nioq;
    restore_ro(c);
    c->bar.base = c->mem;
    c->bar.size = c->memsize;
    c->bar.ops = &emu_bar_ops;
    c->bar.ctx = c;
    if (cfg->mode == EMU_MODE_THREAD) {
        c->db_seen = calloc(2 * ((size_t)c->cfg.nioq + 1), sizeof(uint32_t));
        if (!c->db_seen) {
            snprintf(err, errlen, "emu: out of memory creating controller %u", idx);
            return -ENOMEM;
        }
        int r = pthread_create(&c->svc, NULL, svc_main, c);
        if (r) {
            snprintf(err, errlen, "emu: cannot start the service thread of controller %u: %s", idx, strerror(r));
            return -r;
        }
        c->svc_running = true;
    }
    return 0;
}

int nvme_emu_target_open_kv(const struct nvme_emu_kv *kv, size_t nkv, struct nvme_emu_set **out, char *err,
                            size_t errlen)
{
    char dummy[8];
    if (!err || !errlen)
        err = dummy, errlen = sizeof(dummy);
    if (!out || (nkv && !kv)) {
        snprintf(err, errlen, "emu: bad arguments");
        return -EINVAL;
    }
    *out = NULL;
    struct nvme_emu_set *set = calloc(1, sizeof(*set));
    if (!set) {
        snprintf(err, errlen, "emu: out of memory");
        return -ENOMEM;
    }
    int r = emu_parse_cfg(kv, nkv, &set->cfg, err, errlen);
    if (r) {
        free(set);
        return r;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    set->epoch_ns = (uint64_t)ts.tv_sec * EMU_NS_PER_S + (uint64_t)ts.tv_nsec;
    pthread_mutex_init(&set->dma_lock, NULL);
    set->ctrls = calloc(set->cfg.ndev, sizeof(*set->ctrls));
    if (!set->ctrls) {
        free(set);
        snprintf(err, errlen, "emu: out of memory");
        return -ENOMEM;
    }
    for (unsigned i = 0; i < set->cfg.ndev; i++) {
        set->n = i + 1;
        if ((r = ctrl_init(set, i, err, errlen))) {
            nvme_emu_set_close(set);
            return r;
        }
    }
    snprintf(set->desc, sizeof(set->desc), "profile=%s scale=%g mode=%s ndev=%u data=%s%s", set->cfg.profile->name,
             set->cfg.scale, set->cfg.mode == EMU_MODE_THREAD ? "thread" : "inline", set->cfg.ndev,
             set->cfg.data ? "copy" : "none", set->cfg.ooo ? " ooo=1" : "");
    *out = set;
    return 0;
}

int nvme_emu_target_open(const struct nvme_uri *u, struct nvme_emu_set **out, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen)
        err = dummy, errlen = sizeof(dummy);
    if (!u || !out) {
        snprintf(err, errlen, "emu: bad arguments");
        return -EINVAL;
    }
    if (strcmp(u->scheme, "emu") != 0) {
        snprintf(err, errlen, "emu: not an emu:// URI: scheme '%s'", u->scheme);
        return -EINVAL;
    }
    if (u->authority && u->authority[0]) {
        snprintf(err, errlen, "emu: emu:// takes no host part ('%s'); use emu://?ndev=...", u->authority);
        return -EINVAL;
    }
    if (u->path && u->path[0] && strcmp(u->path, "/") != 0) {
        snprintf(err, errlen, "emu: emu:// takes no path ('%s'); use emu://?ndev=...", u->path);
        return -EINVAL;
    }
    struct nvme_emu_kv kv[NVME_URI_MAX_PARAMS];
    for (unsigned i = 0; i < u->nparams && i < NVME_URI_MAX_PARAMS; i++) {
        kv[i].key = u->params[i].key;
        kv[i].val = u->params[i].value;
    }
    return nvme_emu_target_open_kv(kv, u->nparams, out, err, errlen);
}

void nvme_emu_set_close(struct nvme_emu_set *set)
{
    if (!set)
        return;
    for (unsigned i = 0; i < set->n; i++)
        ctrl_fini(&set->ctrls[i]);
    free(set->ctrls);
    pthread_mutex_destroy(&set->dma_lock);
    free(set);
}

unsigned nvme_emu_set_count(const struct nvme_emu_set *set) { return set ? set->n : 0; }

const struct nvme_bar *nvme_emu_set_bar(const struct nvme_emu_set *set, unsigned i)
{
    return set && i < set->n ? &set->ctrls[i].bar : NULL;
}

int nvme_emu_set_describe(const struct nvme_emu_set *set, char *buf, size_t len)
{
    return snprintf(buf, len, "%s", set ? set->desc : "");
}

const char *nvme_emu_set_profile(const struct nvme_emu_set *set) { return set ? set->cfg.profile->name : ""; }
double nvme_emu_set_scale(const struct nvme_emu_set *set) { return set ? set->cfg.scale : 0; }

/* ---------------------------------------------------------------- DMA windows */
int nvme_emu_dma_allow(struct nvme_emu_set *set, const void *addr, size_t len)
{
    if (!set || !addr || !len || (uintptr_t)addr + len < (uintptr_t)addr)
        return -EINVAL;
    pthread_mutex_lock(&set->dma_lock);
    unsigned n = atomic_load(&set->ndma);
    if (n >= EMU_MAX_DMA_WINDOWS) {
        pthread_mutex_unlock(&set->dma_lock);
        return -ENOSPC;
    }
    set->dma[n].lo = (uintptr_t)addr;
    set->dma[n].hi = (uintptr_t)addr + len;
    atomic_store_explicit(&set->ndma, n + 1, memory_order_release);
    pthread_mutex_unlock(&set->dma_lock);
    return 0;
}

void nvme_emu_dma_clear(struct nvme_emu_set *set)
{
    if (set)
        atomic_store_explicit(&set->ndma, 0, memory_order_release);
}

/* ---------------------------------------------------------------- faults and stats */
int nvme_emu_inject(struct nvme_emu_set *set, unsigned ctrl, const struct nvme_emu_fault *f)
{
    if (!set || ctrl >= set->n || !f)
        return -EINVAL;
    struct emu_ctrl *c = &set->ctrls[ctrl];
    switch (f->kind) {
    case NVME_EMU_FAULT_CLEAR:
        for (unsigned i = 0; i < NVME_EMU_MAX_FAULTS; i++)
            atomic_store(&c->faults[i].armed, false);
        atomic_store(&c->nfaults, 0);
        return 0;
    case NVME_EMU_FAULT_CFS:
        atomic_store(&c->cfs, true);
        csts_set(c, NVME_CSTS_CFS, 0);
        return 0;
    case NVME_EMU_FAULT_DELAY:
    case NVME_EMU_FAULT_DROP:
    case NVME_EMU_FAULT_STATUS:
        break;
    default:
        return -EINVAL;
    }
    if (f->nth == 0 || f->qid < NVME_EMU_FAULT_ANY_QUEUE || f->qid > (int32_t)c->cfg.nioq)
        return -EINVAL;
    unsigned n = atomic_load(&c->nfaults), slot = n;
    for (unsigned i = 0; i < n; i++)
        if (!atomic_load(&c->faults[i].armed)) {
            slot = i;
            break;
        }
    if (slot >= NVME_EMU_MAX_FAULTS)
        return -ENOSPC;
    struct emu_fault *e = &c->faults[slot];
    e->f = *f;
    atomic_store(&e->seen, 0);
    atomic_store_explicit(&e->armed, true, memory_order_release);
    if (slot == n)
        atomic_store_explicit(&c->nfaults, n + 1, memory_order_release);
    return 0;
}

int nvme_emu_queue_stats(const struct nvme_emu_set *set, unsigned ctrl, uint16_t sqid, struct nvme_emu_qstats *out)
{
    if (!set || ctrl >= set->n || !out || sqid > set->ctrls[ctrl].cfg.nioq)
        return -EINVAL;
    struct emu_qstats_int *s = &set->ctrls[ctrl].qstats[sqid];
    out->fetched = atomic_load_explicit(&s->fetched, memory_order_relaxed);
    out->completed = atomic_load_explicit(&s->completed, memory_order_relaxed);
    out->errors = atomic_load_explicit(&s->errors, memory_order_relaxed);
    out->cq_full_held = atomic_load_explicit(&s->cq_full_held, memory_order_relaxed);
    out->dropped = atomic_load_explicit(&s->dropped, memory_order_relaxed);
    return 0;
}

uint64_t nvme_emu_inflight(const struct nvme_emu_set *set, unsigned ctrl)
{
    if (!set || ctrl >= set->n)
        return 0;
    uint64_t n = 0;
    for (uint32_t q = 0; q <= set->ctrls[ctrl].cfg.nioq; q++)
        n += atomic_load_explicit(&set->ctrls[ctrl].qstats[q].inflight, memory_order_relaxed);
    return n;
}
