/* SPDX-License-Identifier: BSD-3-Clause */
/* admin.c — the emulated controller's admin command set and its I/O queue management.
 *
 * Identify (CNS 00h/01h/02h/03h), Get Log Page (Error Information, SMART / Health, Firmware Slot
 * Information), Set/Get Features (the mandatory ones, Keep Alive Timer with its timeout, Host Behavior
 * Support), Create/Delete I/O CQ/SQ (IV below the host's vector count, nvme_emu_ctrl_set_vectors), Keep
 * Alive, Asynchronous Event Request (held), Abort (not aborted), with the statuses the specification
 * names; and the queue objects behind them (emu_cq_new/emu_sq_new/emu_sq_delete/emu_queues_reset), which
 * controller reset (ctrl.c) uses too. Calls down into prp.c, complete.c and ns.c only, so io.c -> admin.c
 * and ctrl.c -> admin.c form no cycle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/emu/emu_internal.h"
#include "nvme/emu/ns.h"
#include "nvme/emu/prp.h"

#define EMU_MN                  "nvmelab emulated controller"
#define EMU_FR                  "0.1.0"
#define EMU_RAB                 6u
#define EMU_ACL                 3u /* 0-based: 4 outstanding Abort commands */
#define EMU_FRMW_1SLOT          0x02u
#define EMU_SQES                ((NVME_SQES_LOG2 << 4) | NVME_SQES_LOG2)
#define EMU_CQES                ((NVME_CQES_LOG2 << 4) | NVME_CQES_LOG2)
#define EMU_DLFEAT              0x09u /* deallocated blocks read as zeros; Write Zeroes may deallocate */
#define EMU_NSFEAT_THIN         0x01u
#define EMU_FEAT_SEL_SHIFT      8u
#define EMU_FEAT_SEL_MASK       0x7u
#define EMU_FEAT_SEL_SUPPORTED  3u
#define EMU_FEAT_CAP_CHANGEABLE 0x4u
#define EMU_FEAT_SV             (1u << 31)
#define EMU_LOG_LID_MASK        0xffu
#define EMU_LOG_NUMDL_SHIFT     16u
#define EMU_LOG_NUMDU_MASK      0xffffu
#define EMU_ABORT_NOT_DONE      1u
#define EMU_QID_MASK            0xffffu
#define EMU_QSIZE_SHIFT         16u
#define EMU_ADMIN_XFER_MAX      (1u << 20)
#define EMU_SMART_TEMP_OFF      1u
#define EMU_SMART_DUR_OFF       32u
#define EMU_SMART_DUW_OFF       48u
#define EMU_SMART_HRC_OFF       64u
#define EMU_SMART_HWC_OFF       80u
#define EMU_SMART_SPARE_OFF     3u
#define EMU_SMART_SPARE_THR     4u
#define EMU_FULL_PERCENT        100u
#define EMU_NIDT_EUI64          0x01u /* Namespace Identification Descriptor types and lengths */
#define EMU_NIDL_EUI64          8u
#define EMU_NIDT_NGUID          0x02u
#define EMU_NIDL_NGUID          16u
#define EMU_NID_HDR             4u
#define EMU_FW_LOG_SIZE         512u /* Firmware Slot Information log page */
#define EMU_FW_AFI_SLOT1        0x01u
#define EMU_FW_FRS1_OFF         8u
#define EMU_FEAT_KATO           0x0fu /* Keep Alive Timer */
#define EMU_FEAT_HBS            0x16u /* Host Behavior Support */
#define EMU_HBS_SIZE            512u
#define EMU_KAS_OFF             (320u - 270u) /* Identify Controller KAS (bytes 321:320) in rsvd270 */
#define EMU_KAS_UNITS           1u            /* KAS: 100 ms granularity */
#define EMU_KAS_MS              100u
#define EMU_SPARE_THRESHOLD     10u

/* ---------------------------------------------------------------- queues */
static void sq_free(struct emu_sq *sq)
{
    if (!sq)
        return;
    free(sq->cid_bits);
    free(sq->heap);
    free(sq);
}

void emu_cq_free(struct emu_cq *cq)
{
    if (!cq)
        return;
    free(cq->sqids);
    free(cq);
}

struct emu_cq *emu_cq_new(struct emu_ctrl *c, uint16_t qid, uint64_t base, uint32_t size)
{
    struct emu_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return NULL;
    cq->id = qid;
    cq->size = size;
    cq->ring_iova = base;
    cq->ring = (volatile struct nvme_cqe *)(void *)emu_dma_ptr(c->dma, base, (uint64_t)size * NVME_CQE_SIZE);
    cq->ien = qid == 0; /* the admin CQ: interrupts always enabled, vector 0; I/O CQs: admin_create_cq */
    cq->phase = NVME_CQE_P;
    atomic_flag_clear(&cq->lock);
    emu_reg_w32(c, nvme_db_cq_off(qid, c->cfg.dstrd), 0);
    if (c->db_seen)
        c->db_seen[2 * qid + 1] = 0;
    return cq;
}

struct emu_sq *emu_sq_new(struct emu_ctrl *c, uint16_t qid, uint64_t base, uint32_t size, struct emu_cq *cq)
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
    sq->ring_iova = base;
    sq->ring =
        (const volatile struct nvme_sqe *)(const void *)emu_dma_ptr(c->dma, base, (uint64_t)size * NVME_SQE_SIZE);
    sq->cq = cq;
    sq->ring_gen = UINT64_MAX; /* rings checked against the DMA windows at the first service (prp.c) */
    sq->st = &c->qstats[qid];
    sq->rng = (c->set->cfg.seed * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)c->index << 32) ^ qid ^ 0x5DEECE66Dull;
    if (!sq->rng)
        sq->rng = 1;
    memset(sq->st, 0, sizeof(*sq->st));
    emu_reg_w32(c, nvme_db_sq_off(qid, c->cfg.dstrd), 0);
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
void emu_sq_delete(struct emu_ctrl *c, uint16_t qid, bool post)
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
        if (emu_sq_drain(c, sq, 1))
            emu_cq_irq(c, sq->cq);
    }
    atomic_store_explicit(&sq->st->inflight, 0, memory_order_relaxed);
    cq_unbind(sq->cq, qid);
    sq_free(sq);
}

void emu_queues_reset(struct emu_ctrl *c)
{
    for (uint32_t q = 0; q <= c->cfg.nioq; q++)
        emu_sq_delete(c, (uint16_t)q, false);
    for (uint32_t q = 0; q <= c->cfg.nioq; q++) {
        emu_cq_free(c->cqs[q]);
        c->cqs[q] = NULL;
    }
    /* doorbells read 0 after a reset */
    memset(c->mem + NVME_REG_DBS, 0, c->memsize - NVME_REG_DBS);
    if (c->db_seen)
        memset(c->db_seen, 0, 2 * (c->cfg.nioq + 1) * sizeof(uint32_t));
}

/* ---------------------------------------------------------------- admin commands */
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
    return emu_prp_walk(c->dma, cmd->prp1, cmd->prp2, len, seg_out, &o);
}

static int seg_in(void *arg, uint8_t *host, size_t len, uint64_t xo)
{
    memcpy((uint8_t *)arg + xo, host, len);
    return 0;
}

/* len bytes of host memory (PRP1/PRP2) into dst */
static uint16_t copy_in(struct emu_ctrl *c, const struct nvme_sqe *cmd, void *dst, uint64_t len)
{
    return emu_prp_walk(c->dma, cmd->prp1, cmd->prp2, len, seg_in, dst);
}

static void pad_copy(char *dst, size_t n, const char *src)
{
    memset(dst, ' ', n);
    size_t l = strlen(src);
    memcpy(dst, src, l < n ? l : n);
}

static uint64_t ns_eui64(const struct emu_ctrl *c, uint32_t nsid)
{
    return (c->set->cfg.seed << 24) ^ ((uint64_t)c->index << 8) ^ nsid;
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
        uint16_t kas = EMU_KAS_UNITS; /* Keep Alive supported, KATO in 100 ms steps */
        memcpy(ic->rsvd270 + EMU_KAS_OFF, &kas, sizeof(kas));
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
        uint64_t eui = ns_eui64(c, ns->nsid);
        memcpy(in->eui64, &eui, sizeof(in->eui64));
        memcpy(in->nguid, &eui, sizeof(eui));
        break;
    }
    case NVME_CNS_NS_DESC_LIST: {
        /* Namespace Identification Descriptor list (mandatory from NVMe 1.3 on; this controller reports 1.4):
         * the EUI-64 and the NGUID of Identify Namespace, each as {NIDT, NIDL, 2 reserved, NID}; zeros end it */
        if (cmd->nsid == 0 || cmd->nsid > c->cfg.nns)
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        uint64_t eui = ns_eui64(c, cmd->nsid);
        uint8_t *d = id.raw;
        d[0] = EMU_NIDT_EUI64;
        d[1] = EMU_NIDL_EUI64;
        memcpy(d + EMU_NID_HDR, &eui, sizeof(eui));
        d += EMU_NID_HDR + EMU_NIDL_EUI64;
        d[0] = EMU_NIDT_NGUID;
        d[1] = EMU_NIDL_NGUID;
        memcpy(d + EMU_NID_HDR, &eui, sizeof(eui)); /* as in Identify Namespace: the EUI-64, then zeros */
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

static void put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof(v));
}

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
            rdc += emu_st_rd_cmds(&c->qstats[q]);
            wrc += emu_st_wr_cmds(&c->qstats[q]);
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
    case NVME_LOGPAGE_FW_SLOT: /* mandatory: slot 1 (the only one, FRMW) active, holding revision FR */
        page[0] = EMU_FW_AFI_SLOT1;
        pad_copy((char *)page + EMU_FW_FRS1_OFF, NVME_FR_LEN, EMU_FR);
        plen = EMU_FW_LOG_SIZE;
        break;
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
    case NVME_FEAT_ARBITRATION:
    case NVME_FEAT_POWER_MGMT:
    case NVME_FEAT_TEMP_THRESH:
    case NVME_FEAT_ERR_RECOVERY:
    case NVME_FEAT_NUM_QUEUES:
    case NVME_FEAT_IRQ_COALESCE:
    case NVME_FEAT_IRQ_CONFIG:
    case NVME_FEAT_WRITE_ATOMIC:
    case NVME_FEAT_ASYNC_EVENT:
    case EMU_FEAT_KATO:
    case EMU_FEAT_HBS:
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
    if (fid == EMU_FEAT_KATO) {
        /* KATO in ms, rounded up to the KAS granularity; the timer restarts now (0 turns it off) */
        uint64_t kato = ((uint64_t)cmd->cdw11 + EMU_KAS_MS - 1) / EMU_KAS_MS * EMU_KAS_MS;
        atomic_store_explicit(&c->ka_last, emu_now_ns(c->set), memory_order_relaxed);
        atomic_store_explicit(&c->kato, kato > UINT32_MAX ? UINT32_MAX / EMU_KAS_MS * EMU_KAS_MS : (uint32_t)kato,
                              memory_order_relaxed);
        return EMU_ST_OK;
    }
    if (fid == EMU_FEAT_HBS) {
        /* a 512-byte data structure; NVMe 1.4 defines byte 0 (ACRE, 0 or 1), the rest is reserved */
        uint8_t hbs[EMU_HBS_SIZE];
        uint16_t st = copy_in(c, cmd, hbs, sizeof(hbs));
        if (st)
            return st;
        for (unsigned i = 1; i < sizeof(hbs); i++)
            if (hbs[i])
                return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
        if (hbs[0] > 1)
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
        c->acre = hbs[0];
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
    if (fid == EMU_FEAT_KATO) {
        *dw0 = sel == 0 ? atomic_load_explicit(&c->kato, memory_order_relaxed) : 0;
        return EMU_ST_OK;
    }
    if (fid == EMU_FEAT_HBS) {
        uint8_t hbs[EMU_HBS_SIZE] = {0};
        hbs[0] = sel == 0 ? c->acre : 0;
        return copy_out(c, cmd, hbs, sizeof(hbs), 0, sizeof(hbs));
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
    if ((cmd->cdw11 & NVME_CREATE_CQ_IEN) && (cmd->cdw11 >> NVME_CREATE_CQ_IV_SHIFT) >= c->nvec)
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_VECTOR);
    if (!cmd->prp1 || !emu_dma_ok(c->dma, cmd->prp1, (uint64_t)size * NVME_CQE_SIZE))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if (cmd->prp1 & (EMU_PAGE_SIZE - 1))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
    struct emu_cq *cq = emu_cq_new(c, (uint16_t)qid, cmd->prp1, size);
    if (!cq)
        return EMU_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
    cq->ien = (cmd->cdw11 & NVME_CREATE_CQ_IEN) != 0;
    cq->iv = cq->ien ? (uint16_t)(cmd->cdw11 >> NVME_CREATE_CQ_IV_SHIFT) : 0;
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
    /* CQID 0 (the admin CQ) or beyond the CQs allocated (Number of Queues): Invalid Queue Identifier, as the
     * CQID field's description asks; a CQID in range whose CQ was not created: Completion Queue Invalid */
    if (cqid == 0 || cqid > c->ncq_alloc)
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    if (!c->cqs[cqid])
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_CQ_INVALID);
    if (!(cmd->cdw11 & NVME_CREATE_Q_PC) || nvme_cc_iosqes(c->cc) != NVME_SQES_LOG2)
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if (!cmd->prp1 || !emu_dma_ok(c->dma, cmd->prp1, (uint64_t)size * NVME_SQE_SIZE))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    if (cmd->prp1 & (EMU_PAGE_SIZE - 1))
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
    struct emu_sq *sq = emu_sq_new(c, (uint16_t)qid, cmd->prp1, size, c->cqs[cqid]);
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
    emu_sq_delete(c, (uint16_t)qid, true);
    return EMU_ST_OK;
}

static uint16_t admin_delete_cq(struct emu_ctrl *c, const struct nvme_sqe *cmd)
{
    uint32_t qid = cmd->cdw10 & EMU_QID_MASK;
    if (qid == 0 || qid > c->cfg.nioq || !c->cqs[qid])
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    if (c->cqs[qid]->nsq)
        return EMU_ST_DNR(NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_QUEUE_DELETION);
    emu_cq_free(c->cqs[qid]);
    c->cqs[qid] = NULL;
    return EMU_ST_OK;
}

bool emu_keep_alive_expired(struct emu_ctrl *c)
{
    uint32_t kato = atomic_load_explicit(&c->kato, memory_order_relaxed);
    if (!kato || !c->enabled || atomic_load_explicit(&c->cfs, memory_order_relaxed))
        return false;
    return emu_now_ns(c->set) - atomic_load_explicit(&c->ka_last, memory_order_relaxed) >
           (uint64_t)kato * EMU_NS_PER_MS;
}

void emu_admin_exec(struct emu_ctrl *c, struct emu_sq *sq, const struct nvme_sqe *cmd, uint16_t *status, uint32_t *dw0,
                    bool *hold)
{
    if (cmd->flags & (NVME_SQE_FUSE_MASK | NVME_SQE_PSDT_MASK)) {
        *status = EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
        return;
    }
    switch (cmd->opc) {
    case NVME_ADM_IDENTIFY:
        *status = admin_identify(c, cmd);
        break;
    case NVME_ADM_GET_LOG_PAGE:
        *status = admin_get_log(c, cmd);
        break;
    case NVME_ADM_SET_FEATURES:
        *status = admin_set_features(c, cmd, dw0);
        break;
    case NVME_ADM_GET_FEATURES:
        *status = admin_get_features(c, cmd, dw0);
        break;
    case NVME_ADM_CREATE_CQ:
        *status = admin_create_cq(c, cmd);
        break;
    case NVME_ADM_CREATE_SQ:
        *status = admin_create_sq(c, cmd);
        break;
    case NVME_ADM_DELETE_SQ:
        *status = admin_delete_sq(c, cmd);
        break;
    case NVME_ADM_DELETE_CQ:
        *status = admin_delete_cq(c, cmd);
        break;
    case NVME_ADM_KEEP_ALIVE: /* restarts the Keep Alive Timer */
        atomic_store_explicit(&c->ka_last, emu_now_ns(c->set), memory_order_relaxed);
        *status = EMU_ST_OK;
        break;
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
