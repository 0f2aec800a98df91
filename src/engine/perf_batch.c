/* SPDX-License-Identifier: BSD-3-Clause */
/* perf_batch.c — the perf engine's batch path on targets with PERF_TGT_FREEL (the NVMe driver): commands are
 * drawn a batch at a time and handed to submit_many, successful completions land on the free list without a
 * call into the engine (the backend pushes them) and are counted once per reap; only timed commands (one in
 * perf_lat_sample_every(qdepth)) and failures come back through done(). See perf.h. */
#include <errno.h>

#include "engine/perf_internal.h"

/* Phases of a timed command (perf.h): t3 is the start of the reap that saw it (c->t_poll), t3p the start of
 * the reap before it, or t2 when that one started before the command was made visible. The stamps are
 * read in program order from one monotonic clock (t0 <= t1 <= t2 <= t3p <= t3 <= t4), so no phase is
 * negative. A command stamped only in part (t1 or t2 missing) counts in the latency, not in the breakdown. */
void perf_bd_record(struct worker *w, const struct eng_chan *c, const struct eng_slot *s, uint64_t t4)
{
    if (!s->t2 || !s->t1)
        return;
    const uint64_t t3 = c->t_poll, t3p = c->t_poll_prev > s->t2 ? c->t_poll_prev : s->t2;
    stats_hist_add_bucket(&w->bd[PERF_BD_SUBMIT], s->t1 - s->t_sub);
    stats_hist_add_bucket(&w->bd[PERF_BD_DOORBELL], s->t2 - s->t1);
    stats_hist_add_bucket(&w->bd[PERF_BD_DEVICE], t3p - s->t2);
    stats_hist_add_bucket(&w->bd[PERF_BD_POLL], t3 - t3p);
    stats_hist_add_bucket(&w->bd[PERF_BD_RELEASE], t4 - t3);
}

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
        bd_ended(c, s);
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
    if (s->t2 && w->measuring) /* stamped for the breakdown */
        perf_bd_record(w, c, s, w->now_cache);
    bd_ended(c, s);
    s->t_sub = 0;
    c->lat_pending--;
}

void perf_batch_done(struct perf_chan *ch, uint32_t slot, int status)
{
    struct eng_chan *c = ch->eng;
    struct worker *w = c->w;
    if (status)
        eng_done_err(c, w, slot, status);
    else
        eng_done_sampled(c, w, slot);
}

/* Queue new commands into the free slots of one channel: the fast path (PERF_TGT_FREEL, submit_many, no
 * verify, no fill) hands the backend whole batches. */
/* What drawing a batch reads, in locals (stores into the batch cannot alias them). */
struct draw {
    uint32_t *freel;
    perf_sub *sub;
    void *const *bufp;
    void *const *cookie;
    uint64_t nblocks, lba0, align;
};

/* The next position of a pattern, in blocks of the channel's range: sequential patterns walk it and wrap,
 * random ones draw from the worker's generator. */
static inline __attribute__((always_inline)) uint64_t draw_pos(struct eng_chan *c, const enum perf_pattern pat,
                                                               uint64_t *rng, uint64_t nblocks)
{
    if (pat == PERF_PAT_READ || pat == PERF_PAT_WRITE) {
        const uint64_t pos = c->seq_next++;
        if (c->seq_next >= nblocks)
            c->seq_next = 0;
        return pos;
    }
    return rng_below(rng, nblocks);
}

/* One command into sub[k]: its position, its slot off the free list, the cookie of slot + timed (0 here;
 * mark_timed gives a timed command the cookie of qdepth + slot). Returns the slot. */
static inline __attribute__((always_inline)) uint32_t draw_one(struct eng_chan *c, const struct draw *d,
                                                               const enum perf_pattern pat, uint64_t *rng,
                                                               uint32_t *nfree, uint32_t k, uint32_t timed)
{
    const uint64_t pos = draw_pos(c, pat, rng, d->nblocks);
    const uint32_t slot = d->freel[--*nfree];
    d->sub[k].slba = d->lba0 + pos * d->align;
    d->sub[k].buf = d->bufp[slot];
    d->sub[k].arg = d->cookie[slot + timed];
    return slot;
}

/* The timed commands of a batch just drawn (lat_left counts down to the next one: 1 = the first of the
 * batch): their cookies become the ones whose completion comes through done(), which takes the latency
 * and the breakdown; t0 is t_batch, read before the batch was drawn. A slot drawn as sub[k] is
 * freel[nfree0 - 1 - k] (popping leaves the entries in place). bd is a constant in each inlined copy: with
 * the breakdown on, its countdown (every perf_bd_of_timed-th timed command is stamped) lives in a register. */
static inline __attribute__((always_inline)) void mark_timed_(struct eng_chan *c, uint64_t *rng, uint32_t nfree0,
                                                              uint32_t n, uint64_t t_batch, const int bd)
{
    const uint32_t qdepth = c->qdepth, every = perf_lat_sample_every(qdepth);
    void *const *const cookie = c->ch->cookie;
    uint32_t k = c->lat_left - 1u, bd_left = bd ? c->bd_left : 0u;
    for (; k < n; k += lat_gap(rng, every)) {
        const uint32_t slot = c->freel[nfree0 - 1u - k];
        c->subs[k].arg = cookie[slot + qdepth];
        c->slots[slot].t_sub = t_batch;
        c->lat_pending++;
        if (bd && __builtin_expect(--bd_left == 0, 0)) {
            bd_left = c->bd_of_timed;
            bd_queued(c, slot);
        }
    }
    if (bd)
        c->bd_left = bd_left;
    c->lat_left = k - n + 1u;
}

static __attribute__((noinline)) void mark_timed(struct eng_chan *c, uint64_t *rng, uint32_t nfree0, uint32_t n,
                                                 uint64_t t_batch)
{
    if (c->bd_of_timed)
        mark_timed_(c, rng, nfree0, n, t_batch, 1);
    else
        mark_timed_(c, rng, nfree0, n, t_batch, 0);
}

/* Draw n commands into c->subs, taking their slots off the free list. pat is a constant in each inlined
 * copy, so the loop carries no pattern switch and no latency test: the batch's timed commands (if any: with
 * lat, lat_left <= n) are marked after it is drawn (mark_timed). */
static inline __attribute__((always_inline)) void draw_subs(struct worker *w, struct eng_chan *c, const struct range *r,
                                                            const enum perf_pattern pat, const int lat, uint32_t n)
{
    const struct draw d = {c->freel, c->subs, c->bufp, c->ch->cookie, r->nblocks, r->lba0, r->align_lbas};
    const uint32_t nfree0 = c->nfree;
    const int timed = lat && c->lat_left <= n;
    const uint64_t t_batch = timed ? now_ns() : 0;
    uint64_t rng = w->rng;
    uint32_t nfree = nfree0;
    for (uint32_t k = 0; k < n; k++)
        (void)draw_one(c, &d, pat, &rng, &nfree, k, 0);
    c->nfree = nfree;
    if (timed)
        mark_timed(c, &rng, nfree0, n, t_batch);
    else if (lat)
        c->lat_left -= n;
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
    for (uint32_t i = 0; i < n - q; i++) { /* freel[nfree] is subs[n - 1]: last drawn first, as await is popped */
        const uint32_t slot = c->freel[c->nfree + i];
        struct eng_slot *s = &c->slots[slot];
        if (s->t_sub) {
            s->t_sub = 0;
            c->lat_pending--;
            bd_unqueued(c, slot);
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
        /* the backend kicks after queueing unless a command stamped for the breakdown waits for its t1 (stamped
         * between the two calls) */
        const int stamp = c->nawait != 0;
        int q = ops->submit_many(c->ch, sub, n, r->nlb, pat == PERF_PAT_WRITE || pat == PERF_PAT_RANDWRITE, !stamp);
        if (q < 0)
            return q;
        c->outstanding += (uint32_t)q;
        if ((uint32_t)q < n) /* not queued (queue full): back to the free list, untimed */
            unqueue(c, (uint32_t)q, n);
        if (stamp) {
            bd_stamp_submitted(c);
            int rc = ops->kick(c->ch, 0);
            if (rc)
                return rc;
            bd_stamp_kicked(c);
        }
        if ((uint32_t)q < n)
            break;
    }
    return 0;
}

int perf_one_refill(struct worker *w, struct eng_chan *c)
{
    if (!c->nfree)
        return 0;
    struct eng_slot *const s = &c->slots[0];
    if (s->t_sub) { /* the timed command in the slot completed (a failure's done() zeroed t_sub) */
        if (w->measuring) {
            const uint64_t t4 = now_ns();
            stats_hist_add(w->hist, t4 - s->t_sub);
            if (s->t2) /* stamped for the breakdown */
                perf_bd_record(w, c, s, t4);
        }
        bd_ended(c, s);
        s->t_sub = 0;
        c->lat_pending--;
    }
    const struct engine *e = w->e;
    const struct range *r = &e->rg[c->dev];
    const enum perf_pattern pat = e->cfg.pattern;
    const uint64_t pos = draw_pos(c, pat, &w->rng, r->nblocks);
    const perf_sub sub = {.slba = r->lba0 + pos * r->align_lbas, .buf = c->bufp[0], .arg = c->ch->cookie[0]};
    c->nfree = 0;
    if (w->lat) { /* every command (one in perf_lat_sample_every(1) == 1) */
        s->t_sub = now_ns();
        c->lat_pending++;
        bd_timed(c, 0);
    }
    const int write = pat == PERF_PAT_WRITE || pat == PERF_PAT_RANDWRITE;
    const int stamp = c->nawait != 0;
    int rc;
    if (__builtin_expect(!stamp, 1)) {
        rc = e->t->ops->submit1(c->ch, &sub, r->nlb, write); /* with its doorbell */
    } else { /* stamped for the breakdown: queued without the kick, t1 between the two (as perf_batch_refill) */
        const int q = e->t->ops->submit_many(c->ch, &sub, 1, r->nlb, write, 0);
        rc = q == 1 ? 0 : q == 0 ? -EBUSY : q;
    }
    if (rc) {
        if (rc != -EBUSY)
            return rc;
        unqueue(c, 0, 1); /* not queued (queue full): back to the free list, untimed */
        return 0;
    }
    c->outstanding++;
    if (stamp) {
        bd_stamp_submitted(c);
        if ((rc = e->t->ops->kick(c->ch, 0)))
            return rc;
        bd_stamp_kicked(c);
    }
    return 0;
}
