/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpair_raw.c — the driver's IOMMU for a user's raw command (nvme_qpair_submit_raw, and nvme_ctrl_admin without a
 * buffer; the rules are in nvme.h).
 *
 * Purpose: a raw SQE carries its own PRPs. The controller follows them into any memory it can reach (on emu://
 * the emulator's IOMMU maps every DMA object of the target, as vfio does), the driver's own queue rings and
 * PRP-list pages included: a Read aimed there overwrites SQEs or CQEs and can leave the queue refusing every
 * later command. Here every address the command's transfer can reach (PRP1, PRP2, each PRP-list entry, the
 * list pages themselves, MPTR) is checked against the target's data buffers before the command takes a CID;
 * a PRP list is copied into the command's own list page, so the controller never reads the user's copy.
 *
 * Key function: nvme_qpair_raw_prps (called by nvme_qpair_submit_raw_err, qpair.c).
 *
 * Caveats: an opcode whose transfer the driver cannot size (an I/O opcode other than Read/Write/Compare/DSM, an
 * unknown namespace, an admin opcode outside admin_xfer's table) is taken to move the largest transfer, so without a
 * buffer its PRPs must cover that much. The registry walk is linear in the target's DMA objects and runs under the
 * domain lock: raw commands are not the hot path (nvme_qpair_submit is, and is not touched). SGLs (PSDT != 0) are
 * refused for commands that move data.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "nvme/ctrl_internal.h"
#include "nvme/errbuf.h"
#include "nvme/qpair.h"
#include "nvme/target.h"

#define XFER_UNKNOWN   UINT64_MAX
#define FLBAS_EXTENDED 0x10u /* Identify Namespace FLBAS bit 4: metadata at the end of each LBA */
#define DSM_NR_MASK    0xffu /* CDW10 bits 7:0: ranges, 0's based */

struct raw_ck {
    struct nvme_qpair *q;
    struct nvme_dma_domain *dom;
    char *err;
    size_t errlen;
};

/* What a raw command moves, read from its SQE: data bytes through PRP1/PRP2 (XFER_UNKNOWN: the driver cannot
 * tell), metadata bytes through MPTR, and how its PRPs address them. */
enum xfer_shape {
    XFER_PRPS,  /* PRP1, then PRP2 as the second page or a PRP list */
    XFER_QUEUE, /* Create I/O CQ/SQ with PC=1: one contiguous queue at PRP1 */
    XFER_PAGES, /* Doorbell Buffer Config: PRP1 and PRP2 each one page */
};
struct xfer {
    uint64_t data, meta;
    enum xfer_shape shape;
    const char *refuse; /* non-NULL: refused as is (-EINVAL), the reason */
};

static struct xfer io_xfer(const struct nvme_qpair *q, const struct nvme_sqe *sqe)
{
    struct xfer x = {0, 0, XFER_PRPS, NULL};
    switch (sqe->opc) {
    case NVME_CMD_READ:
    case NVME_CMD_WRITE:
    case NVME_CMD_COMPARE: {
        const struct nvme_ns *ns = nvme_ctrl_ns(q->ctrl, sqe->nsid);
        if (!ns) {
            x.data = XFER_UNKNOWN;
            break;
        }
        const uint64_t nlb = (uint64_t)(sqe->cdw12 & NVME_RW_NLB_MASK) + 1u;
        const uint64_t ms = ns->id.lbaf[ns->id.flbas & NVME_FLBAS_INDEX_MASK].ms;
        const bool extended = ns->id.flbas & FLBAS_EXTENDED;
        x.data = nlb * (ns->lba_size + (extended ? ms : 0));
        x.meta = extended ? 0 : nlb * ms;
        break;
    }
    case NVME_CMD_DSM:
        x.data = ((uint64_t)(sqe->cdw10 & DSM_NR_MASK) + 1u) * sizeof(struct nvme_dsm_range);
        break;
    default:
        /* opcode bits 1:0 give the data direction: 00 moves nothing */
        x.data = (sqe->opc & 3u) ? XFER_UNKNOWN : 0;
    }
    return x;
}

/* Get/Set Features: the features whose value is a data structure, by FID (others move nothing). */
static uint64_t feature_bytes(uint8_t fid)
{
    switch (fid) {
    case 0x03: /* LBA Range Type */
    case 0x0d: /* Host Memory Buffer */
        return NVME_IDENTIFY_SIZE;
    case 0x0c: /* Autonomous Power State Transition */
        return 256;
    case 0x0e: /* Timestamp */
        return 8;
    case 0x81: /* Host Identifier (up to 128 bits) */
        return 16;
    default:
        return fid >= 0xc0 ? XFER_UNKNOWN : 0; /* vendor specific: unknown */
    }
}

static struct xfer admin_xfer(const struct nvme_sqe *sqe)
{
    struct xfer x = {0, 0, XFER_PRPS, NULL};
    const uint64_t qentries = (uint64_t)(sqe->cdw10 >> 16) + 1u; /* Create I/O CQ/SQ: QSIZE, 0's based */
    switch (sqe->opc) {
    case NVME_ADM_IDENTIFY:
    case NVME_ADM_NS_ATTACH:
        x.data = NVME_IDENTIFY_SIZE;
        break;
    case NVME_ADM_NS_MGMT: /* SEL 0 (create) moves a namespace structure, 1 (delete) nothing */
        x.data = (sqe->cdw10 & 0xfu) == 0 ? NVME_IDENTIFY_SIZE : 0;
        break;
    case NVME_ADM_GET_LOG_PAGE: /* NUMDL (CDW10 31:16) | NUMDU (CDW11 15:0) << 16, dwords, 0's based */
        x.data = (((uint64_t)(sqe->cdw10 >> 16) | ((uint64_t)(sqe->cdw11 & 0xffffu) << 16)) + 1u) * 4u;
        break;
    case NVME_ADM_FW_DOWNLOAD: /* NUMD, dwords, 0's based */
        x.data = ((uint64_t)sqe->cdw10 + 1u) * 4u;
        break;
    case NVME_ADM_GET_FEATURES:
    case NVME_ADM_SET_FEATURES:
        x.data = feature_bytes((uint8_t)sqe->cdw10);
        break;
    case NVME_ADM_CREATE_CQ:
    case NVME_ADM_CREATE_SQ:
        x.shape = XFER_QUEUE;
        x.data = qentries * (sqe->opc == NVME_ADM_CREATE_CQ ? NVME_CQE_SIZE : NVME_SQE_SIZE);
        if (!(sqe->cdw11 & 1u))
            x.refuse = "PC=0 (a queue scattered through a PRP list) is not taken; create it contiguous (PC=1)";
        break;
    case NVME_ADM_DBBUF_CONFIG:
        x.shape = XFER_PAGES;
        x.data = 1;
        break;
    default:
        x.data = (sqe->opc & 3u) ? XFER_UNKNOWN : 0;
    }
    return x;
}

/* What driver-internal memory d (at offset off) is, for the message. */
static void where(const struct nvme_qpair *q, const struct nvme_dma *d, size_t off, char *out, size_t n)
{
    const uint8_t *p = d->vaddr + off;
    const struct nvme_ctrl *c = q->ctrl;
    if (d == q->mem) {
        const uint8_t *sq = (const uint8_t *)q->sq, *cq = (const uint8_t *)q->cq;
        const uint8_t *lists = (const uint8_t *)q->trk[0].prp_list;
        if (p >= sq && p < (const uint8_t *)q->sq_end)
            snprintf(out, n, "the SQ ring of queue %u (entry %zu)", q->qid, (size_t)(p - sq) / NVME_SQE_SIZE);
        else if (p >= cq && p < cq + (size_t)(q->cq_depth + NVME_CQ_SENTINELS) * NVME_CQE_SIZE)
            snprintf(out, n, "the CQ ring of queue %u", q->qid);
        else if (q->ntrk && p >= lists && p < lists + (size_t)q->ntrk * q->page_size)
            snprintf(out, n, "the PRP-list page of CID %zu of queue %u", (size_t)(p - lists) / q->page_size, q->qid);
        else
            snprintf(out, n, "queue %u's own memory", q->qid);
    } else if (d == c->admin.mem) {
        snprintf(out, n, "the admin queue's memory");
    } else if (d == c->admin_buf || d == c->sync_buf) {
        snprintf(out, n, "the driver's %s buffer", d == c->admin_buf ? "admin" : "bounce");
    } else {
        snprintf(out, n, "the driver's own memory (another queue's rings or an internal buffer)");
    }
}

/* [bus, bus + len) inside one data buffer: 0 (the buffer in *out, bus's offset in it in *off, when asked);
 * -EFAULT naming `what` otherwise. Caller holds the domain lock. */
static int admit(struct raw_ck *k, const char *what, uint64_t bus, uint64_t len, struct nvme_dma **out, size_t *off)
{
    size_t o = 0;
    struct nvme_dma *d = nvme_dma_find_bus_locked(k->dom, bus, len, &o);
    if (d && d->data) {
        if (out) {
            *out = d;
            *off = o;
        }
        return 0;
    }
    if (!d)
        d = nvme_dma_find_bus_locked(k->dom, bus, 1, &o); /* where the range starts */
    if (!d)
        return nvme_errf(k->err, k->errlen, -EFAULT, "%s 0x%" PRIx64 " (%" PRIu64 " bytes) is in no DMA buffer", what,
                         bus, len);
    if (!d->data) {
        char w[96];
        where(k->q, d, o, w, sizeof w);
        return nvme_errf(k->err, k->errlen, -EFAULT, "%s 0x%" PRIx64 " (%" PRIu64 " bytes) points into %s", what, bus,
                         len, w);
    }
    uint64_t left = d->pages ? ((uint64_t)1 << d->page_shift) - (o & (((size_t)1 << d->page_shift) - 1)) : d->size - o;
    return nvme_errf(k->err, k->errlen, -EFAULT,
                     "%s 0x%" PRIx64 " (%" PRIu64 " bytes) runs past the end of its buffer (%" PRIu64 " bytes left)",
                     what, bus, len, left);
}

/* A transfer's bytes after PRP1's (rem of them, more than one page) through the PRP list at list: every list
 * segment and entry admitted, the entries copied into t's list page. Caller holds the domain lock. */
static int admit_list(struct raw_ck *k, struct nvme_tracker *t, uint64_t list, uint64_t rem)
{
    const struct nvme_qpair *q = k->q;
    const uint64_t psz = q->page_size, pmask = q->page_mask;
    const uint64_t n = (rem + pmask) >> q->page_shift;
    if (n > psz / NVME_PRP_ENTRY_SIZE)
        return nvme_errf(k->err, k->errlen, -E2BIG,
                         "the transfer needs %" PRIu64 " PRP-list entries (at most %" PRIu64 ")", n,
                         psz / NVME_PRP_ENTRY_SIZE);
    char what[64];
    uint64_t i = 0;
    for (unsigned seg = 0; i < n; seg++) {
        if (list & (NVME_PRP_ENTRY_SIZE - 1u))
            return nvme_errf(k->err, k->errlen, -EINVAL, "%s 0x%" PRIx64 " is not 8-byte aligned",
                             seg ? "a chained PRP-list pointer" : "PRP2 (a PRP-list pointer)", list);
        const uint64_t room = (psz - (list & pmask)) / NVME_PRP_ENTRY_SIZE;
        const bool chain = n - i > room; /* the page's last entry points to the next list page */
        const uint64_t take = chain ? room - 1u : n - i;
        if (chain && take == 0)
            return nvme_errf(k->err, k->errlen, -EINVAL,
                             "the PRP list at 0x%" PRIx64 " holds nothing but a chain pointer", list);
        struct nvme_dma *d;
        size_t off;
        snprintf(what, sizeof what, "the PRP list (segment %u) at", seg);
        int rc = admit(k, what, list, (take + chain) * NVME_PRP_ENTRY_SIZE, &d, &off);
        if (rc)
            return rc;
        const volatile uint64_t *src = (const volatile uint64_t *)(d->vaddr + off);
        for (uint64_t j = 0; j < take; j++, i++) {
            const uint64_t e = src[j]; /* read once: the copy is what the controller will see */
            const uint64_t chunk = rem < psz ? rem : psz;
            snprintf(what, sizeof what, "PRP-list entry %" PRIu64, i);
            /* from the page base: a controller may ignore a non-zero offset (it should refuse it) */
            rc = admit(k, what, e & ~pmask, (e & pmask) + chunk, NULL, NULL);
            if (rc)
                return rc;
            t->prp_list[i] = e;
            rem -= chunk;
        }
        if (chain)
            list = src[take];
    }
    return 0;
}

/* PRPs the user wrote in the SQE for a transfer of len bytes (and MPTR for meta): admitted or refused. */
static int admit_user_prps(struct raw_ck *k, struct nvme_tracker *t, const struct nvme_sqe *sqe, uint64_t len,
                           uint64_t *prp2)
{
    const struct nvme_qpair *q = k->q;
    const uint64_t prp1 = sqe->prp1, first = q->page_size - (prp1 & q->page_mask);
    int rc = admit(k, "PRP1", prp1, first < len ? first : len, NULL, NULL);
    if (rc || len <= first)
        return rc;
    const uint64_t rem = len - first;
    if (rem <= q->page_size) /* PRP2 is the second data page */
        return admit(k, "PRP2", sqe->prp2 & ~q->page_mask, (sqe->prp2 & q->page_mask) + rem, NULL, NULL);
    rc = admit_list(k, t, sqe->prp2, rem);
    if (rc == 0)
        *prp2 = t->prp_iova;
    return rc;
}

int nvme_qpair_raw_prps(struct nvme_qpair *q, struct nvme_tracker *t, const struct nvme_sqe *sqe, const void *buf,
                        size_t len, uint64_t *prp1, uint64_t *prp2, char *err, size_t errlen)
{
    struct raw_ck k = {q, &q->ctrl->target->dma, err, errlen};
    const bool admin = q->qid == NVME_ADMIN_QID;
    struct xfer x = admin ? admin_xfer(sqe) : io_xfer(q, sqe);
    const char *op = nvme_opc_name(admin, sqe->opc);
    if (x.refuse)
        return nvme_errf(err, errlen, -EINVAL, "%s: %s", op, x.refuse);
    if ((x.data || x.meta) && (sqe->flags & NVME_SQE_PSDT_MASK))
        return nvme_errf(err, errlen, -EINVAL, "%s: PSDT %u (SGLs): raw commands that move data use PRPs", op,
                         (sqe->flags & NVME_SQE_PSDT_MASK) >> NVME_SQE_PSDT_SHIFT);
    *prp1 = sqe->prp1;
    *prp2 = sqe->prp2;
    int rc = 0;
    pthread_mutex_lock(&k.dom->lock);
    if (x.meta)
        rc = admit(&k, "MPTR", sqe->mptr, x.meta, NULL, NULL);
    pthread_mutex_unlock(&k.dom->lock);
    if (rc)
        return rc;
    if (len) {
        struct nvme_dma *d = nvme_dma_find(k.dom, buf, len);
        if (!d)
            return nvme_errf(err, errlen, -EFAULT, "buf %p (%zu bytes) is not DMA memory of this target", buf, len);
        if (!d->data) {
            char w[96];
            where(q, d, (size_t)((const uint8_t *)buf - d->vaddr), w, sizeof w);
            return nvme_errf(err, errlen, -EFAULT, "buf %p is %s, not a data buffer", buf, w);
        }
        if (x.shape != XFER_PRPS || (x.data != XFER_UNKNOWN && x.data > len))
            return nvme_errf(err, errlen, -EINVAL, "%s moves %" PRIu64 " bytes but buf gives %zu", op, x.data, len);
        if ((uintptr_t)buf & (NVME_PRP_ALIGN - 1u))
            return nvme_errf(err, errlen, -EINVAL, "buf %p is not dword aligned", buf);
        return 0; /* the caller builds the PRPs for buf (qpair.c data_ptr) */
    }
    if (x.data == 0)
        return 0; /* moves nothing: the controller reads neither PRP */
    if (x.data == XFER_UNKNOWN)
        x.data = q->max_xfer; /* the most it could move */
    else if (x.shape == XFER_PRPS && x.data > q->max_xfer)
        return nvme_errf(err, errlen, -E2BIG, "%s moves %" PRIu64 " bytes, more than the largest transfer (%u bytes)",
                         op, x.data, q->max_xfer);
    pthread_mutex_lock(&k.dom->lock);
    if (x.shape == XFER_QUEUE)
        rc = admit(&k, "PRP1 (the queue)", sqe->prp1, x.data, NULL, NULL);
    else if (x.shape == XFER_PAGES) {
        rc = admit(&k, "PRP1 (the shadow doorbells)", sqe->prp1 & ~q->page_mask, q->page_size, NULL, NULL);
        if (rc == 0)
            rc = admit(&k, "PRP2 (the EventIdx page)", sqe->prp2 & ~q->page_mask, q->page_size, NULL, NULL);
    } else
        rc = admit_user_prps(&k, t, sqe, x.data, prp2);
    pthread_mutex_unlock(&k.dom->lock);
    return rc;
}

void nvme_qpair_mem_info(const struct nvme_qpair *q, struct nvme_qpair_mem *out)
{
    const uint8_t *base = q->mem->vaddr;
    out->sq = nvme_dma_iova_at(q->mem, (size_t)((const uint8_t *)q->sq - base));
    out->sq_bytes = (uint64_t)q->depth * NVME_SQE_SIZE;
    out->cq = nvme_dma_iova_at(q->mem, (size_t)((const volatile uint8_t *)q->cq - base));
    out->cq_bytes = (uint64_t)(q->cq_depth + NVME_CQ_SENTINELS) * NVME_CQE_SIZE;
    out->prp_lists = q->ntrk ? q->trk[0].prp_iova : 0;
    out->prp_lists_bytes = q->ntrk * q->page_size;
}
