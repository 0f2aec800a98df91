/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuq_standin.c — the CPU stand-in of the cuda-run engine (see gpuq_standin.h). */
#include "engine/gpuq_standin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvme/gpuq_ctrl.h"
#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"

#define STANDIN_NS_PER_S 1000000000ull

static uint64_t standin_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * STANDIN_NS_PER_S + (uint64_t)ts.tv_nsec;
}

struct standin_state {
    struct nvme_gpuq_pair **pairs; /* nctrl x nqueues, row-major */
    struct nvme_dma *buf, *lists;
    uint64_t *buf_lut, *list_lut;
    uint64_t *slba, *prp1, *prp2;
    uint16_t *st;
    unsigned npairs;
    struct nvme_gpuq_stamps stamps; /* shared by every pair: one round runs at a time */
};

static void standin_free(struct standin_state *s, int timed_out_pair)
{
    for (unsigned i = 0; s->pairs && i < s->npairs; i++)
        nvme_gpuq_pair_destroy(s->pairs[i], (int)i == timed_out_pair);
    nvme_dma_free(s->buf);
    nvme_dma_free(s->lists);
    free(s->pairs);
    free(s->buf_lut);
    free(s->list_lut);
    free(s->slba);
    free(s->prp1);
    free(s->prp2);
    free(s->st);
    free(s->stamps.t);
    free(s->stamps.sampled);
}

static int standin_check(struct nvme_target *t, const struct gpuq_standin_cfg *c, char *err, size_t errlen)
{
    if (!c->nqueues || c->nqueues > GPUQ_STANDIN_MAX_QUEUES)
        return snprintf(err, errlen, "nqueues=%u: must be in 1..%u", c->nqueues, GPUQ_STANDIN_MAX_QUEUES), -EINVAL;
    if (!c->qdepth || c->qdepth > GPUQ_STANDIN_MAX_QDEPTH)
        return snprintf(err, errlen, "qdepth=%u: must be in 1..%u", c->qdepth, GPUQ_STANDIN_MAX_QDEPTH), -EINVAL;
    if (!c->iosize || (uint64_t)c->qdepth * c->iosize > GPUQ_STANDIN_MAX_BUF_BYTES)
        return snprintf(err, errlen, "qdepth x iosize = %llu bytes: the stand-in's buffer holds 1..%llu",
                        (unsigned long long)c->qdepth * c->iosize, (unsigned long long)GPUQ_STANDIN_MAX_BUF_BYTES),
               -EINVAL;
    if (c->sample_every && (!c->samples || !c->sample_cap))
        return snprintf(err, errlen, "sample_every=%u: needs a sample store", c->sample_every), -EINVAL;
    if (c->match < 0 || c->match >= (int)NVME_GPUQ_MATCH_MODES)
        return snprintf(err, errlen, "match=%d: not a matching mode (cid, positional, scan)", c->match), -EINVAL;
    if (!(c->runtime_s > 0) || !(c->warmup_s >= 0))
        return snprintf(err, errlen, "runtime must be > 0 s and warmup >= 0 s"), -EINVAL;
    for (unsigned ci = 0; ci < nvme_target_nctrl(t); ci++) {
        struct nvme_ctrl *ctrl = nvme_target_ctrl(t, ci);
        struct nvme_ns *ns = nvme_ctrl_nns(ctrl) ? nvme_ctrl_ns_at(ctrl, 0) : NULL;
        if (!ns)
            return snprintf(err, errlen, "controller %u has no namespace", ci), -EINVAL;
        if (c->iosize % nvme_ns_lba_size(ns))
            return snprintf(err, errlen, "iosize=%u: not a multiple of the LBA size %u", c->iosize,
                            nvme_ns_lba_size(ns)),
                   -EINVAL;
        if (c->qdepth + 1u > nvme_ctrl_max_depth(ctrl))
            return snprintf(err, errlen, "qdepth=%u: controller %u holds at most %u entries per queue", c->qdepth, ci,
                            nvme_ctrl_max_depth(ctrl)),
                   -EINVAL;
        if (nvme_ns_nsze(ns) < (uint64_t)c->iosize / nvme_ns_lba_size(ns))
            return snprintf(err, errlen, "controller %u: namespace smaller than one I/O", ci), -EINVAL;
    }
    return 0;
}

static int standin_setup(struct nvme_target *t, const struct gpuq_standin_cfg *c, struct standin_state *s, char *err,
                         size_t errlen)
{
    const unsigned nctrl = nvme_target_nctrl(t);
    const size_t page = NVME_GPUQ_PAGE_SIZE, buf_bytes = (size_t)c->qdepth * c->iosize;
    const size_t buf_pages = (buf_bytes + page - 1) / page;
    s->npairs = nctrl * c->nqueues;
    s->pairs = calloc(s->npairs, sizeof(*s->pairs));
    s->buf_lut = calloc(buf_pages, sizeof(uint64_t));
    s->list_lut = calloc(c->qdepth, sizeof(uint64_t));
    s->slba = calloc(c->qdepth, sizeof(uint64_t));
    s->prp1 = calloc(c->qdepth, sizeof(uint64_t));
    s->prp2 = calloc(c->qdepth, sizeof(uint64_t));
    s->st = calloc(c->qdepth, sizeof(uint16_t));
    s->stamps.every = c->sample_every;
    s->stamps.t = calloc(c->qdepth, sizeof(*s->stamps.t));
    s->stamps.sampled = calloc(c->qdepth, 1);
    if (!s->pairs || !s->buf_lut || !s->list_lut || !s->slba || !s->prp1 || !s->prp2 || !s->st || !s->stamps.t ||
        !s->stamps.sampled)
        return snprintf(err, errlen, "out of memory"), -ENOMEM;
    int rc = nvme_dma_alloc(t, buf_pages * page, &s->buf);
    if (!rc)
        rc = nvme_gpuq_lut(s->buf, s->buf_lut, buf_pages);
    if (!rc)
        rc = nvme_dma_alloc(t, (size_t)c->qdepth * page, &s->lists);
    if (!rc) {
        nvme_dma_mark_internal(s->lists); /* the PRP-list pages: no raw command may point into them */
        rc = nvme_gpuq_lut(s->lists, s->list_lut, c->qdepth);
    }
    if (rc)
        return snprintf(err, errlen, "DMA buffers (%zu + %zu bytes): %s", buf_pages * page, (size_t)c->qdepth * page,
                        strerror(-rc)),
               rc;
    /* PRPs once: command i always reads into slot i of the buffer (one round in flight at a time) */
    for (uint32_t i = 0; i < c->qdepth; i++) {
        uint64_t *list = (uint64_t *)((uint8_t *)nvme_dma_vaddr(s->lists) + (size_t)i * page);
        if (nvme_gpuq_prp(s->buf_lut, buf_pages, (uint64_t)i * c->iosize, c->iosize, list, s->list_lut[i], &s->prp1[i],
                          &s->prp2[i]))
            return snprintf(err, errlen, "PRP build failed for command %u (iosize %u)", i, c->iosize), -EINVAL;
    }
    for (unsigned ci = 0; ci < nctrl; ci++)
        for (unsigned q = 0; q < c->nqueues; q++) {
            rc = nvme_gpuq_pair_create(nvme_target_ctrl(t, ci), c->qdepth + 1u, &s->pairs[ci * c->nqueues + q], err,
                                       errlen);
            if (rc)
                return rc;
            s->pairs[ci * c->nqueues + q]->stamps = &s->stamps;
        }
    return 0;
}

/* The phases of the round's sampled commands into the store (as long as it has room). */
static void standin_keep_samples(const struct gpuq_standin_cfg *c, const struct nvme_gpuq_stamps *ts,
                                 struct gpuq_standin_result *res)
{
    for (uint32_t j = 0, k = ts->first; j < ts->n; j++, k += ts->every) { /* the round's stamped commands */
        res->sampled++;
        if (res->nsamples >= c->sample_cap)
            continue;
        uint32_t *row = c->samples + (size_t)res->nsamples++ * NVME_GPUQ_NPHASES;
        for (uint32_t ph = 0; ph < NVME_GPUQ_NPHASES; ph++)
            row[ph] = nvme_gpuq_phase_ns(ts->t[k], ph);
    }
}

int gpuq_standin_run(struct nvme_target *t, const struct gpuq_standin_cfg *c, struct gpuq_standin_result *res,
                     char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    int rc = standin_check(t, c, err, errlen);
    if (rc)
        return rc;
    struct standin_state s;
    memset(&s, 0, sizeof(s));
    rc = standin_setup(t, c, &s, err, errlen);
    if (rc) {
        standin_free(&s, -1);
        return rc;
    }
    uint64_t lcg = c->seed ? c->seed : 1u;
    const uint64_t t0 = standin_now_ns();
    const uint64_t w0 = c->rounds ? t0 : t0 + (uint64_t)(c->warmup_s * (double)STANDIN_NS_PER_S);
    const uint64_t end = w0 + (uint64_t)(c->runtime_s * (double)STANDIN_NS_PER_S);
    const uint64_t timeout_ns = c->timeout_ns ? c->timeout_ns : GPUQ_STANDIN_TIMEOUT_NS;
    const struct nvme_gpuq_round_opt opt = {
        .match = c->match, .unordered = c->unordered, .no_fence = c->no_fence, .no_readback = c->no_readback};
    uint64_t win_start = 0, done = 0;
    int failed_pair = -1;
    res->npairs = s.npairs;
    while (!rc && !(c->stop && *c->stop) && (!c->rounds || done < c->rounds)) {
        const uint64_t now = standin_now_ns();
        if (!c->rounds && now >= end)
            break;
        const int counting = now >= w0;
        if (counting && !win_start)
            win_start = now;
        for (unsigned i = 0; i < s.npairs && !rc; i++) {
            struct nvme_gpuq_pair *p = s.pairs[i];
            if (c->idle_pair == i + 1u)
                continue;                         /* fault injection: this "block" never runs */
            const uint64_t r0 = standin_now_ns(); /* the pair's turn, host work included (Little's law) */
            struct nvme_ns *ns = nvme_ctrl_ns_at(p->ctrl, 0);
            const uint32_t nlb = c->iosize / nvme_ns_lba_size(ns);
            const uint64_t nslots = nvme_ns_nsze(ns) / nlb;
            for (uint32_t k = 0; k < c->qdepth; k++)
                s.slba[k] = nvme_gpuq_slba(1, &lcg, k, k, c->qdepth, nslots, 0, nlb);
            const uint64_t matched0 = p->completed;
            struct nvme_gpuq_match_ctr ctr = {0};
            rc = nvme_gpuq_cpu_round_opt(p, NVME_CMD_READ, nvme_ns_id(ns), s.slba, nlb, s.prp1, s.prp2, c->qdepth,
                                         timeout_ns, &opt, &ctr, s.st, err, errlen);
            if (rc) {
                failed_pair = (int)i;
                break;
            }
            if (c->beats)
                c->beats[i]++;
            if (!counting)
                continue;
            res->rounds++;
            res->ios += c->qdepth;
            res->submitted += c->qdepth;
            res->completed += p->completed - matched0;
            if (s.stamps.n) /* the round stamped commands */
                standin_keep_samples(c, &s.stamps, res);
            res->looks += ctr.looks;
            res->cq_bytes += ctr.cq_bytes;
            res->stale += ctr.stale;
            res->foreign += ctr.foreign;
            for (uint32_t k = 0; k < c->qdepth; k++) {
                const uint16_t want = nvme_cr_lba_err(&c->inj, s.slba[k], nlb);
                res->expected_errors += want != 0;
                res->misattributed += s.st[k] != want;
                if (s.st[k]) {
                    if (!res->errors)
                        res->first_status = s.st[k];
                    res->errors++;
                }
            }
            res->round_ns_sum += standin_now_ns() - r0;
        }
        done++;
    }
    const uint64_t stop_ns = standin_now_ns();
    res->window_s = win_start ? (double)(stop_ns - win_start) / (double)STANDIN_NS_PER_S : 0.0;
    standin_free(&s, failed_pair);
    return rc;
}
