/* SPDX-License-Identifier: BSD-3-Clause */
/* perf_nvme.c — the perf engine's backend on the nvmelab driver: emu://, pci:// and vfio-user:// targets.
 *
 * One device = the first active namespace of one controller (or namespace opts.nsid).
 * One channel = one I/O qpair (depth qdepth + 1, the N-1 rule) with one DMA buffer
 * of qdepth slots. Hot path: nvme_qpair_submit_many / nvme_qpair_poll_collect (at QD 1
 * the one-command pair submit_one / poll_one: submit1, reap1), no system calls, no locks
 * (opening and closing channels is serialised; cold path only). A slot larger than the controller's transfer limit
 * (blksum's chunks) is split into several commands and completes when all of them have; the qpair is then deep enough
 * for qdepth such slots where the controller allows it, else submit() answers -EBUSY until parts complete. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/perf.h"
#include "nvme/emu/emu.h"
#include "nvme/emu/profiles.h"
#include "nvme/nvme.h"

#define QP_EXTRA_ENTRY     1u  /* a queue of N entries holds N-1 commands */
#define PERF_NVME_CQ_BATCH 32u /* completions per CQ head doorbell, at least (see pchan_open) */
/* SQ entries, at least: a shallower ring wraps so often that its SQ events cost more than its footprint saves (QD 1:
 * a 2-entry SQ takes one per command, +30 instructions per I/O). */
#define PERF_NVME_SQ_MIN 33u
/* SQ entries beyond the commands' depth (and the N-1 rule's one): with none, the batch doorbell's N-1 limit falls on
 * the last command of every full batch, an SQ event in submit_many besides the kick's doorbell */
#define PERF_NVME_SQ_EXTRA 1u

struct nvme_pctx {
    struct nvme_target *t;
    struct nvme_ns *ns[PERF_MAX_DEVS];
    pthread_mutex_t mu; /* channel open/close (admin commands, DMA allocation) */
};

struct nvme_pchan;
struct slot_arg {
    struct nvme_pchan *c;
    uint32_t slot;
    uint32_t parts_left; /* split slots: commands still outstanding */
    int status;          /* split slots: first failure */
    uint32_t notify;     /* submit_many: the completion goes through done() even on success */
    uint32_t pad[2];     /* to SLOT_ARG_SIZE: reap turns a collected argument into its index with a shift */
};
#define SLOT_ARG_SHIFT 5u
#define SLOT_ARG_SIZE  (1u << SLOT_ARG_SHIFT)
_Static_assert(sizeof(struct slot_arg) == SLOT_ARG_SIZE, "slot_arg is SLOT_ARG_SIZE bytes");

struct nvme_pchan {
    struct perf_chan pub;
    struct nvme_qpair *qp;
    struct nvme_ns *ns;
    struct nvme_dma *dma;
    uint8_t *bufs;
    uint32_t iosize, lba_size;
    uint32_t qdepth;
    uint32_t max_xfer;     /* bytes per command (the controller's limit) */
    uint32_t max_nlb;      /* max_xfer in LBAs */
    struct slot_arg *args; /* 2 * qdepth: slot i's, then slot i's with notify set */
    void **cookies;        /* &args[i]: perf_chan.cookie */
    void **collected;      /* reap: arguments of the completions the driver collected (qdepth entries) */
    struct nvme_pctx *ctx;
};

static int cpl_status(const struct nvme_cpl *cpl);

static void pchan_cb(void *arg, const struct nvme_cpl *cpl)
{
    const struct slot_arg *a = arg;
    a->c->pub.done(&a->c->pub, a->slot, cpl_status(cpl));
}

/* submit_many's commands: a success goes straight onto the engine's free list (PERF_TGT_FREEL) unless the
 * engine asked to be told (the cookie of a timed command, notify set); anything else through done(). */
static void pchan_cb_freel(void *arg, const struct nvme_cpl *cpl)
{
    const struct slot_arg *a = arg;
    struct perf_chan *ch = &a->c->pub;
    if (__builtin_expect(!a->notify && cpl->err == 0 && nvme_cpl_ok(cpl), 1)) {
        ch->freel[(*ch->nfree)++] = a->slot;
        return;
    }
    ch->done(ch, a->slot, cpl_status(cpl));
}

static int cpl_status(const struct nvme_cpl *cpl)
{
    if (cpl->err)
        return cpl->err;
    if (!nvme_cpl_ok(cpl))
        return ((int)cpl->sct << 8 | (int)cpl->sc) | (cpl->dnr ? PERF_STATUS_DNR : 0);
    return 0;
}

/* One part of a split slot completed. */
static void pchan_cb_part(void *arg, const struct nvme_cpl *cpl)
{
    struct slot_arg *a = arg;
    int st = cpl_status(cpl);
    if (st && !a->status)
        a->status = st;
    if (--a->parts_left == 0)
        a->c->pub.done(&a->c->pub, a->slot, a->status);
}

static int pchan_open(void *vctx, uint32_t dev, uint32_t qdepth, uint32_t iosize, struct perf_chan **out, char *err,
                      size_t errlen)
{
    struct nvme_pctx *ctx = vctx;
    struct nvme_pchan *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->args = calloc(2 * (size_t)qdepth, sizeof(*c->args));
    c->cookies = calloc(2 * (size_t)qdepth, sizeof(*c->cookies));
    c->collected = calloc(qdepth, sizeof(*c->collected));
    if (!c->args || !c->cookies || !c->collected) {
        free(c->args);
        free(c->cookies);
        free(c->collected);
        free(c);
        return -ENOMEM;
    }
    c->ctx = ctx;
    c->ns = ctx->ns[dev];
    c->iosize = iosize;
    c->qdepth = qdepth;
    c->lba_size = nvme_ns_lba_size(c->ns);
    c->max_xfer = nvme_ctrl_max_xfer(nvme_ns_ctrl(c->ns));
    c->max_xfer -= c->max_xfer % c->lba_size;
    if (c->max_xfer == 0 || c->max_xfer > iosize)
        c->max_xfer = iosize;
    c->max_nlb = c->max_xfer / c->lba_size;
    uint32_t parts = (iosize + c->max_xfer - 1) / c->max_xfer;
    uint64_t want = (uint64_t)qdepth * parts + QP_EXTRA_ENTRY + PERF_NVME_SQ_EXTRA;
    uint32_t cap = nvme_ctrl_max_depth(nvme_ns_ctrl(c->ns));
    /* CQ head doorbells coalesced over cq_batch completions (at least PERF_NVME_CQ_BATCH, else one per qdepth):
     * the CQ gets that many entries more (cq_extra), so that the commands in flight never wait for the doorbell;
     * the SQ and the trackers stay at the commands' depth, at least PERF_NVME_SQ_MIN (a deeper SQ only spreads the
     * submissions over more 64-byte entries: 16 KiB instead of 8 per device at QD 128, the 16-device footprint of
     * src/README.md) */
    uint64_t cq_batch = qdepth > PERF_NVME_CQ_BATCH ? qdepth : PERF_NVME_CQ_BATCH;
    if (want < PERF_NVME_SQ_MIN)
        want = PERF_NVME_SQ_MIN;
    uint32_t depth = want < cap ? (uint32_t)want : cap;
    if (depth + cq_batch > cap)
        cq_batch = cap - depth;
    for (uint32_t i = 0; i < 2 * qdepth; i++) {
        c->args[i].c = c;
        c->args[i].slot = i % qdepth;
        c->args[i].notify = i >= qdepth;
        c->cookies[i] = &c->args[i];
    }
    c->pub.cookie = c->cookies;
    pthread_mutex_lock(&ctx->mu);
    int rc = nvme_dma_alloc(ctx->t, (size_t)qdepth * iosize, &c->dma);
    if (rc) {
        snprintf(err, errlen, "device %u: cannot allocate %zu bytes of DMA memory: %s", dev, (size_t)qdepth * iosize,
                 strerror(-rc));
        goto fail;
    }
    c->bufs = nvme_dma_vaddr(c->dma);
    struct nvme_qpair_opts o = {.depth = depth, .timeout_ms = 0, .batch = depth, .cq_extra = (uint32_t)cq_batch};
    rc = nvme_qpair_create(nvme_ns_ctrl(c->ns), &o, &c->qp);
    if (rc) {
        if (rc == -EBUSY)
            snprintf(err, errlen, "device %u: no I/O queue left (the controller grants %u); lower nqueues or ncpus",
                     dev, nvme_ctrl_max_qpairs(nvme_ns_ctrl(c->ns)));
        else
            snprintf(err, errlen, "device %u: cannot create a qpair of depth %u: %s", dev, depth, strerror(-rc));
        nvme_dma_free(c->dma);
        goto fail;
    }
    if (cq_batch > 1)
        nvme_qpair_set_cq_batch(c->qp, (uint32_t)cq_batch);
    pthread_mutex_unlock(&ctx->mu);
    *out = &c->pub;
    return 0;
fail:
    pthread_mutex_unlock(&ctx->mu);
    free(c->args);
    free(c->cookies);
    free(c->collected);
    free(c);
    return rc;
}

static void pchan_close(struct perf_chan *ch)
{
    struct nvme_pchan *c = (struct nvme_pchan *)ch;
    pthread_mutex_lock(&c->ctx->mu);
    nvme_qpair_destroy(c->qp);
    nvme_dma_free(c->dma);
    pthread_mutex_unlock(&c->ctx->mu);
    free(c->args);
    free(c->cookies);
    free(c->collected);
    free(c);
}

static void *pchan_buf(struct perf_chan *ch, uint32_t slot)
{
    struct nvme_pchan *c = (struct nvme_pchan *)ch;
    return c->bufs + (size_t)slot * c->iosize;
}

/* A slot larger than the controller's transfer limit: every part must fit now, or none is queued. */
static __attribute__((noinline)) int pchan_submit_split(struct nvme_pchan *c, uint32_t slot, uint8_t op, uint64_t slba,
                                                        uint32_t nlb)
{
    size_t len = (size_t)nlb * c->lba_size;
    uint8_t *buf = c->bufs + (size_t)slot * c->iosize;
    struct slot_arg *a = &c->args[slot];
    uint32_t parts = (uint32_t)((len + c->max_xfer - 1) / c->max_xfer);
    if (nvme_qpair_depth(c->qp) - QP_EXTRA_ENTRY - nvme_qpair_outstanding(c->qp) < parts)
        return -EBUSY;
    a->parts_left = parts;
    a->status = 0;
    for (size_t done = 0; done < len;) {
        size_t part = len - done < c->max_xfer ? len - done : c->max_xfer;
        int rc = nvme_qpair_submit(c->qp, c->ns, op, slba + done / c->lba_size, (uint32_t)(part / c->lba_size),
                                   buf + done, part, pchan_cb_part, a);
        if (rc < 0) /* cannot happen after the free-slot check; the queued parts still complete */
            return rc;
        done += part;
    }
    return 0;
}

static int pchan_submit(struct perf_chan *ch, uint32_t slot, int write, uint64_t slba, uint32_t nlb)
{
    struct nvme_pchan *c = (struct nvme_pchan *)ch;
    uint8_t op = write ? NVME_CMD_WRITE : NVME_CMD_READ;
    if (__builtin_expect(nlb > c->max_nlb, 0))
        return pchan_submit_split(c, slot, op, slba, nlb);
    return nvme_qpair_submit(c->qp, c->ns, op, slba, nlb, c->bufs + (size_t)slot * c->iosize, (size_t)nlb * c->lba_size,
                             pchan_cb, &c->args[slot]);
}

/* The engine's batch goes to the driver as it is (perf_sub is struct nvme_io; arg = cookie = &args[...]); with kick,
 * the SQ doorbell after it (pchan_kick's work). */
static int pchan_submit_many(struct perf_chan *ch, const perf_sub *subs, uint32_t n, uint32_t nlb, int write, int kick)
{
    struct nvme_pchan *c = (struct nvme_pchan *)ch;
    const uint8_t op = write ? NVME_CMD_WRITE : NVME_CMD_READ;
    if (__builtin_expect(nlb > c->max_nlb, 0)) {
        for (uint32_t i = 0; i < n; i++) {
            const struct slot_arg *a = subs[i].arg;
            int rc = pchan_submit(ch, a->slot, write, subs[i].slba, nlb);
            if (rc && rc != -EBUSY)
                return rc;
            if (rc) {
                n = i;
                break;
            }
        }
        if (kick)
            nvme_qpair_ring(c->qp);
        return (int)n;
    }
    /* without the engine's free list (not PERF_TGT_FREEL's caller) every completion goes through done() */
    const nvme_cb cb = ch->freel ? pchan_cb_freel : pchan_cb;
    uint32_t queued;
    int rc = nvme_qpair_submit_many(c->qp, c->ns, op, nlb, subs, n, cb, &queued);
    if (kick)
        nvme_qpair_ring(c->qp); /* what was queued, also before an error */
    if (__builtin_expect(rc != 0, 0) && rc != -EBUSY)
        return rc;
    return (int)queued;
}

/* QD 1: the driver's one-command call with its doorbell (a tail call); a slot split over several commands goes
 * through submit_many. */
static int pchan_submit1(struct perf_chan *ch, const perf_sub *sub, uint32_t nlb, int write)
{
    struct nvme_pchan *c = (struct nvme_pchan *)ch;
    if (__builtin_expect(nlb > c->max_nlb || !ch->freel, 0)) {
        const int q = pchan_submit_many(ch, sub, 1, nlb, write, 1);
        return q == 1 ? 0 : q == 0 ? -EBUSY : q;
    }
    return nvme_qpair_submit_one(c->qp, c->ns, write ? NVME_CMD_WRITE : NVME_CMD_READ, nlb, sub, pchan_cb_freel);
}

static int pchan_kick(struct perf_chan *ch, uint32_t wait_min)
{
    (void)wait_min;
    nvme_qpair_ring(((struct nvme_pchan *)ch)->qp);
    return 0;
}

static int pchan_reap(struct perf_chan *ch, uint32_t max)
{
    struct nvme_pchan *c = (struct nvme_pchan *)ch;
    if (!ch->freel || max == 0 || max > c->qdepth)
        return nvme_qpair_poll(c->qp, max);
    /* PERF_TGT_FREEL: the driver collects the successful completions of submit_many's commands instead of
     * calling pchan_cb_freel for each; their slots go onto the engine's free list here (a timed command's
     * through done()) */
    uint32_t k;
    int n = nvme_qpair_poll_collect(c->qp, max, pchan_cb_freel, c->collected, &k);
    uint32_t *const freel = ch->freel;
    uint32_t nfree = *ch->nfree;
    /* an argument's index in args is its slot, or qdepth + its slot for a timed command (notify): computed
     * from the pointer, so the completion's argument itself is never read */
    const uintptr_t args = (uintptr_t)c->args;
    const uint32_t qdepth = c->qdepth;
    void *const *p = c->collected, *const *const end = p + k;
    for (; p < end; p++) {
        const uint32_t idx = (uint32_t)(((uintptr_t)*p - args) >> SLOT_ARG_SHIFT);
        if (__builtin_expect(idx >= qdepth, 0)) {
            *ch->nfree = nfree;
            ch->done(ch, idx - qdepth, 0);
            nfree = *ch->nfree;
        } else {
            freel[nfree++] = idx;
        }
    }
    *ch->nfree = nfree;
    return n;
}

/* QD 1 (PERF_TGT_FREEL): the driver's one-completion poll; its collected argument as pchan_reap takes one. */
static int pchan_reap1(struct perf_chan *ch, uint32_t max)
{
    struct nvme_pchan *c = (struct nvme_pchan *)ch;
    (void)max;
    void *arg;
    uint32_t k;
    const int n = nvme_qpair_poll_one(c->qp, pchan_cb_freel, &arg, &k);
    if (k) {
        const uint32_t idx = (uint32_t)(((uintptr_t)arg - (uintptr_t)c->args) >> SLOT_ARG_SHIFT);
        if (__builtin_expect(idx >= c->qdepth, 0))
            ch->done(ch, idx - c->qdepth, 0); /* a timed command's cookie (notify) */
        else
            ch->freel[(*ch->nfree)++] = idx;
    }
    return n;
}

static void pctx_destroy(void *vctx)
{
    struct nvme_pctx *ctx = vctx;
    nvme_target_close(ctx->t);
    pthread_mutex_destroy(&ctx->mu);
    free(ctx);
}

static int pctx_write_sync(void *vctx, uint32_t dev, uint64_t slba, const void *buf, size_t len)
{
    struct nvme_pctx *ctx = vctx;
    struct nvme_ns *ns = ctx->ns[dev];
    struct nvme_cpl cpl;
    pthread_mutex_lock(&ctx->mu);
    int rc = nvme_ns_io_sync(nvme_ns_ctrl(ns), ns, NVME_CMD_WRITE, slba, (uint32_t)(len / nvme_ns_lba_size(ns)),
                             (void *)buf, len, &cpl);
    pthread_mutex_unlock(&ctx->mu);
    if (rc)
        return rc;
    if (cpl.err)
        return cpl.err;
    return nvme_cpl_ok(&cpl) ? 0 : ((int)cpl.sct << 8 | (int)cpl.sc);
}

static const struct perf_backend_ops nvme_perf_ops = {
    .chan_open = pchan_open,
    .chan_close = pchan_close,
    .chan_buf = pchan_buf,
    .submit = pchan_submit,
    .submit_many = pchan_submit_many,
    .submit1 = pchan_submit1,
    .kick = pchan_kick,
    .reap = pchan_reap,
    .reap1 = pchan_reap1,
    .destroy = pctx_destroy,
    .write_sync = pctx_write_sync,
};

int perf_nvme_target_open(const char *uri, const struct perf_target_opts *opts, struct perf_target **out, char *err,
                          size_t errlen)
{
    uint32_t nsid = opts ? opts->nsid : 0;
    struct nvme_target *nt = NULL;
    int rc = nvme_target_open(uri, &nt, err, errlen);
    if (rc)
        return rc;
    struct nvme_pctx *ctx = calloc(1, sizeof(*ctx));
    struct perf_target *t = calloc(1, sizeof(*t));
    if (!ctx || !t) {
        free(ctx);
        free(t);
        nvme_target_close(nt);
        return -ENOMEM;
    }
    ctx->t = nt;
    pthread_mutex_init(&ctx->mu, NULL);
    unsigned nctrl = nvme_target_nctrl(nt);
    if (nctrl > PERF_MAX_DEVS)
        nctrl = PERF_MAX_DEVS;
    for (unsigned i = 0; i < nctrl; i++) {
        struct nvme_ctrl *c = nvme_target_ctrl(nt, i);
        struct nvme_ns *ns = nsid ? nvme_ctrl_ns(c, nsid) : (nvme_ctrl_nns(c) ? nvme_ctrl_ns_at(c, 0) : NULL);
        if (!ns) {
            if (nsid)
                snprintf(err, errlen, "%s: namespace %u is not active on controller %u", uri, nsid, i);
            else
                snprintf(err, errlen, "%s: controller %u has no active namespace", uri, i);
            pctx_destroy(ctx);
            free(t);
            return -ENODEV;
        }
        ctx->ns[i] = ns;
        struct perf_dev_info *d = &t->dev[i];
        d->lba_size = nvme_ns_lba_size(ns);
        d->nlbas = nvme_ns_nsze(ns);
        d->nsid = nvme_ns_id(ns);
        d->max_qdepth = nvme_ctrl_max_depth(c) - QP_EXTRA_ENTRY;
        d->max_io_bytes = nvme_ctrl_max_xfer(c);
    }
    t->ops = &nvme_perf_ops;
    t->flags = PERF_TGT_FREEL;
    t->ctx = ctx;
    t->ndevs = nctrl;
    const char *scheme = nvme_target_scheme(nt);
    snprintf(t->backend, sizeof(t->backend), "nvmelab-%s", scheme);
    if (!strcmp(scheme, "emu")) {
        const struct nvme_emu_set *set = nvme_target_backend(nt);
        if (set) {
            snprintf(t->profile, sizeof(t->profile), "%s", nvme_emu_set_profile(set));
            t->scale = nvme_emu_set_scale(set);
            nvme_emu_set_describe(set, t->describe, sizeof(t->describe));
            const struct nvme_emu_profile *p = nvme_emu_profile_find(t->profile);
            if (p && t->scale > 0) {
                t->model.lat_ns = p->lat_ns * t->scale;
                t->model.dev_iops = p->dev_iops / t->scale;
                t->model.queue_iops = p->queue_iops / t->scale;
                t->model.dev_bw = p->dev_bw / t->scale;
            }
        }
    }
    *out = t;
    return 0;
}
