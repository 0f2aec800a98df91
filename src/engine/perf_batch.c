/* SPDX-License-Identifier: BSD-3-Clause */
/* perf_batch.c — the perf engine's batch path on targets with PERF_TGT_FREEL (the NVMe driver): commands are
 * drawn a batch at a time and handed to submit_many, successful completions land on the free list without a
 * call into the engine (the backend pushes them) and are counted once per reap; only timed commands (one in
 * perf_lat_sample_every(qdepth)) and failures come back through done(). See perf.h. */
#include <errno.h>

#include "engine/perf_internal.h"

/* The fast path's failed command (PERF_TGT_FREEL): counted here, its slot freed; perf_batch_reap does the rest. */
static void eng_done_err(struct eng_chan *c, struct worker *w, uint32_t slot, int status)
{
    struct eng_slot *s = &c->slots[slot];
    c->freel[c->nfree++] = slot;
    c->nerr++;
    if (!w->errors)
        w->first_err = status;
    w->errors++;
    s->write = 0;
    if (s->t_sub) {
        s->t_sub = 0;
        c->lat_pending--;
    }
}

/* A timed command of the batch path completed: its latency; perf_batch_reap counts it. */
static void eng_done_sampled(struct eng_chan *c, struct worker *w, uint32_t slot)
{
    struct eng_slot *s = &c->slots[slot];
    c->freel[c->nfree++] = slot;
    if (w->measuring) {
        if (!w->now_valid) {
            w->now_cache = now_ns();
            w->now_valid = 1;
        }
        stats_hist_add(w->hist, w->now_cache - s->t_sub);
    }
    s->t_sub = 0;
    c->lat_pending--;
}

void perf_batch_done(struct eng_chan *c, struct worker *w, uint32_t slot, int status)
{
    if (status)
        eng_done_err(c, w, slot, status);
    else
        eng_done_sampled(c, w, slot);
}

/* After a reap on the fast path: the slots freel[nf0 ..] completed (successes pushed by the backend, sampled
 * commands and failures by eng_done); count them per reap. */
void perf_batch_reap(struct worker *w, struct eng_chan *c, uint32_t nf0)
{
    const uint32_t n = c->nfree - nf0, ok = n - c->nerr;
    c->nerr = 0;
    c->outstanding -= n;
    if (!w->measuring)
        return;
    w->ios += ok;
    w->dev_ios[c->dev] += ok;
    const enum perf_pattern pat = w->e->cfg.pattern; /* one direction: a mix never takes the fast path */
    if (pat == PERF_PAT_WRITE || pat == PERF_PAT_RANDWRITE)
        w->writes += ok; /* failures were counted as errors, not writes */
}

/* Queue new commands into the free slots of one channel: the fast path (PERF_TGT_FREEL, submit_many, no
 * verify, no fill) hands the backend whole batches. */
/* Draw n commands into c->subs, taking their slots off the free list. pat and lat are constants in each
 * inlined copy, so the loop carries no pattern switch. */
static inline __attribute__((always_inline)) void draw_subs(struct worker *w, struct eng_chan *c, const struct range *r,
                                                            const enum perf_pattern pat, const int lat, uint32_t n)
{
    const uint64_t nblocks = r->nblocks, lba0 = r->lba0, align = r->align_lbas;
    uint32_t *const freel = c->freel;
    struct eng_slot *const slots = c->slots;
    perf_sub *const sub = c->subs;
    void *const *const bufp = c->bufp;
    void *const *const cookie = c->ch->cookie;
    const uint32_t qdepth = c->qdepth, every = perf_lat_sample_every(qdepth);
    uint64_t rng = w->rng;
    uint32_t nfree = c->nfree, lat_left = c->lat_left;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t pos;
        if (pat == PERF_PAT_READ || pat == PERF_PAT_WRITE) {
            pos = c->seq_next++;
            if (c->seq_next >= nblocks)
                c->seq_next = 0;
        } else {
            pos = rng_below(&rng, nblocks);
        }
        const uint32_t slot = freel[--nfree];
        uint32_t ci = slot;
        if (lat && __builtin_expect(--lat_left == 0, 0)) {
            lat_left = lat_gap(&rng, every);
            slots[slot].t_sub = now_ns();
            c->lat_pending++;
            ci += qdepth; /* its completion comes through done(), which takes the latency */
        }
        sub[k].slba = lba0 + pos * align;
        sub[k].buf = bufp[slot];
        sub[k].arg = cookie[ci];
    }
    c->nfree = nfree;
    c->lat_left = lat_left;
    w->rng = rng;
}

#define DRAW_SUBS_LAT(w, c, r, pat, lat, n)                                                                            \
    do {                                                                                                               \
        if (lat)                                                                                                       \
            draw_subs(w, c, r, pat, 1, n);                                                                             \
        else                                                                                                           \
            draw_subs(w, c, r, pat, 0, n);                                                                             \
    } while (0)

/* subs[q..n) were not queued: their slots, taken last off the free list (their entries of freel are still
 * there: nothing pushes during a submit), go back on it, untimed. */
static __attribute__((noinline)) void unqueue(struct eng_chan *c, uint32_t q, uint32_t n)
{
    for (uint32_t i = 0; i < n - q; i++) {
        struct eng_slot *s = &c->slots[c->freel[c->nfree + i]];
        if (s->t_sub) {
            s->t_sub = 0;
            c->lat_pending--;
        }
    }
    c->nfree += n - q;
}

int perf_batch_refill(struct worker *w, struct eng_chan *c)
{
    struct engine *e = w->e;
    const struct perf_backend_ops *ops = e->t->ops;
    const struct range *r = &e->rg[c->dev];
    const uint32_t batch = e->cfg.batch ? e->cfg.batch : (e->t->default_batch ? e->t->default_batch : c->qdepth);
    const enum perf_pattern pat = e->cfg.pattern;
    const int lat = w->lat;
    while (c->nfree) {
        const uint32_t n = c->nfree < batch ? c->nfree : batch;
        perf_sub *const sub = c->subs;
        switch (pat) {
        case PERF_PAT_READ:
            DRAW_SUBS_LAT(w, c, r, PERF_PAT_READ, lat, n);
            break;
        case PERF_PAT_WRITE:
            DRAW_SUBS_LAT(w, c, r, PERF_PAT_WRITE, lat, n);
            break;
        case PERF_PAT_RANDREAD:
            DRAW_SUBS_LAT(w, c, r, PERF_PAT_RANDREAD, lat, n);
            break;
        case PERF_PAT_RANDWRITE:
            DRAW_SUBS_LAT(w, c, r, PERF_PAT_RANDWRITE, lat, n);
            break;
        default: /* PERF_PAT_RANDWRITE (a mix never takes the fast path) */
            DRAW_SUBS_LAT(w, c, r, PERF_PAT_RANDWRITE, lat, n);
            break;
        }
        int q = ops->submit_many(c->ch, sub, n, r->nlb, pat == PERF_PAT_WRITE || pat == PERF_PAT_RANDWRITE);
        if (q < 0)
            return q;
        c->outstanding += (uint32_t)q;
        if ((uint32_t)q < n) /* not queued (queue full): back to the free list, untimed */
            unqueue(c, (uint32_t)q, n);
        int rc = ops->kick(c->ch, 0);
        if (rc)
            return rc;
        if ((uint32_t)q < n)
            break;
    }
    return 0;
}
