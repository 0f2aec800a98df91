/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf_internal.h — the perf engine's private state, shared by perf.c (threads, loop, results) and
 * perf_batch.c (the batch path on PERF_TGT_FREEL targets). Not for other layers.
 *
 * Key functions: perf_batch_refill(), perf_batch_reap(), perf_batch_done(); the inline clock and generator.
 * Caveats: everything here belongs to one worker thread while a run is on.
 */
#ifndef NVMELAB_ENGINE_PERF_INTERNAL_H
#define NVMELAB_ENGINE_PERF_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/perf.h"
#include "engine/stats.h"

#define NS_PER_S              1000000000ull
#define PERF_DRAIN_TIMEOUT_NS (10ull * NS_PER_S) /* outstanding commands after the end */

/* ------------------------------------------------------------------ engine state */

struct range {
    uint64_t lba0;       /* first LBA */
    uint64_t nblocks;    /* I/O positions in the range */
    uint32_t align_lbas; /* LBAs between positions */
    uint32_t nlb;        /* LBAs per I/O */
    uint32_t lba_size;
    uint32_t nchans; /* channels on this device over all threads */
};

struct eng_slot {
    uint64_t t_sub; /* a timed command: when it was queued (breakdown t0); 0 = not timed */
    uint64_t t1;    /* breakdown: the backend's submit returned (0: not yet) */
    uint64_t t2;    /* breakdown: the kick that covered it returned (0: not yet) */
    uint64_t slba;
    uint32_t nlb;
    uint32_t write;
};

struct worker;

struct eng_chan {
    struct perf_chan *ch;
    struct worker *w;
    uint32_t dev;
    uint32_t k; /* index among the channels of this device */
    uint32_t qdepth;
    uint32_t outstanding;
    uint32_t nfree;
    uint32_t *freel;
    struct eng_slot *slots;
    uint64_t seq_next, seq_begin, seq_end;           /* positions */
    int exhausted;                                   /* fill: slice written */
    int verify;                                      /* the run verifies reads */
    int slow_done;                                   /* verify or latency sampling: completions take eng_done_slow */
    int fast;                                        /* PERF_TGT_FREEL batch path: successes pushed to freel by reap */
    int one;                                         /* fast at QD 1: the one-slot pass (perf_one_refill) */
    int (*reap)(struct perf_chan *ch, uint32_t max); /* the backend's reap, or its reap1 (one) */
    int (*refill)(struct worker *w, struct eng_chan *c); /* perf.c's refill, perf_batch_refill or perf_one_refill */
    uint32_t nerr;                                       /* fast: completions of this reap that went through eng_done */
    uint32_t lat_left;                                   /* commands until the next latency sample */
    uint32_t lat_pending;                                /* sampled commands in flight */
    uint32_t bd_left;                                    /* timed commands until the next one the breakdown stamps */
    uint32_t bd_of_timed;         /* perf_bd_of_timed(qdepth); 0: breakdown off (perf_config.bd) */
    uint32_t *await;              /* breakdown: timed slots queued since the last kick */
    uint32_t nawait, nawait1;     /* entries in await; of them stamped t1 */
    uint32_t bd_pending;          /* breakdown: stamped commands made visible and in flight (t2 set) */
    uint64_t t_poll, t_poll_prev; /* breakdown: start of this reap, of the previous one (t3, t3p) */
    perf_sub *subs;               /* fast: one submit_many batch (the worker's w->subs) */
    void **bufp;                  /* fast: chan_buf of every slot */
};

struct engine;

struct worker {
    pthread_t th;
    uint32_t idx;
    int cpu;
    struct engine *e;
    struct eng_chan *chans;
    uint32_t nchans;
    uint64_t rng;
    int measuring;
    int lat;
    uint64_t now_cache;
    int now_valid;
    /* counted in the window */
    uint64_t ios, reads, writes, bytes;
    uint64_t dev_ios[PERF_MAX_DEVS];
    struct stats_hist *hist;
    struct stats_hist *bd; /* PERF_BD_NPHASES histograms of the breakdown */
    perf_sub *subs;        /* the batch every fast channel draws into (one at a time: a refill hands it to
                            * submit_many, which copies it into the SQ): one array, hot in L1, not one per
                            * channel (16 devices at QD 128: 3 KiB instead of 48 KiB; src/README.md) */
    /* counted always */
    uint64_t errors, verify_errors, first_bad_lba;
    uint32_t first_bad_dev;
    int first_err;
    uint64_t polls, empty_polls;
    uint64_t t_start, t_stop;
    double cpu_start, cpu_stop;
    double proc_start, proc_stop; /* thread 0 only: the whole process (perf_result.proc_cpu_s) */
    int rc;
    int cpu_last;
    char affinity[64];
    char err[PERF_ERRLEN];
};

struct engine {
    struct perf_target *t;
    struct perf_config cfg;
    int fill;
    uint32_t ndevs;
    uint32_t seed32;
    struct range rg[PERF_MAX_DEVS];
    struct worker *w;
    pthread_mutex_t mu; /* start gate (cold path only) */
    pthread_cond_t cv;
    uint32_t ready; /* workers done with setup */
    int go;         /* 1 run, -1 abort */
    atomic_int setup_failed;
    uint64_t t0, t_meas, t_end;
};

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* The worker loop reads the clock for the run window about every PERF_CLOCK_SPAN_NS, every PERF_CLOCK_EVERY_MAX-th
 * iteration at the most. perf_clock_every: the next period in iterations, from the last one's and the time it took
 * (doubled while it took under half a span, back to 1 when over one, so that iterations grown slow are not counted
 * for long; 1 .. max). */
#define PERF_CLOCK_SPAN_NS   1000000ull
#define PERF_CLOCK_EVERY_MAX 256u
static inline uint32_t perf_clock_every(uint32_t every, uint32_t max, uint64_t dt_ns)
{
    if (dt_ns > PERF_CLOCK_SPAN_NS)
        every = 1u;
    else if (dt_ns < PERF_CLOCK_SPAN_NS / 2u)
        every *= 2u;
    return every < 1u ? 1u : every > max ? max : every;
}

/* A 64-bit LCG (Knuth's MMIX constants): one multiply and one add per draw. Its low bits are weak, so draws
 * are only ever used through rng_below, which takes the high bits (the top of x * n). Good enough to spread
 * LBAs and sampling gaps, and cheap enough for the batch loop (xorshift64* cost twice as many instructions). */
#define PERF_LCG_MUL 6364136223846793005ull
#define PERF_LCG_INC 1442695040888963407ull
static inline uint64_t rng_next(uint64_t *s)
{
    return *s = *s * PERF_LCG_MUL + PERF_LCG_INC;
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

/* Latency sampling: the gap to the next sampled command is uniform in 1 .. 2 * every - 1 (mean every,
 * perf_lat_sample_every(qdepth)), drawn from the thread's generator, so which commands are sampled is independent of
 * their latency and of the queue's period. */
static inline uint32_t lat_gap(uint64_t *rng, uint32_t every)
{
    return 1u + (uint32_t)rng_below(rng, 2u * every - 1u);
}

/* Breakdown stamps (see perf.h). A timed command joins await when it is drawn (t0 = t_sub); after the
 * backend's submit returns every await entry still timed gets t1, after a kick t2 (one clock read each,
 * shared by the batch), and await empties. */
static inline void bd_queued(struct eng_chan *c, uint32_t slot)
{
    c->slots[slot].t1 = c->slots[slot].t2 = 0;
    c->await[c->nawait++] = slot;
}

/* Whatever ends a timed command ends its stamps: a slot with t2 set was counted in bd_pending, the count the
 * worker loop reads the clock for (t3) by, so that it reads it only while a stamped command is in flight and
 * not for every timed one (at QD 1 every command is timed). */
static inline void bd_ended(struct eng_chan *c, struct eng_slot *s)
{
    if (s->t2) {
        s->t2 = 0;
        c->bd_pending--;
    }
}

/* A command just timed: every perf_bd_of_timed-th joins the breakdown. A slot's t2 is non-zero only while it holds
 * a stamped command that was made visible (bd_stamp_kicked); whatever ends a timed command (completion, failure,
 * not queued) zeroes t_sub and t2 together, so the others cost nothing here. */
static inline void bd_timed(struct eng_chan *c, uint32_t slot)
{
    if (c->bd_of_timed && --c->bd_left == 0) {
        c->bd_left = c->bd_of_timed;
        bd_queued(c, slot);
    }
}

/* A timed command that was drawn into `slot` is not queued after all: it leaves the await list (it is its last
 * entry not yet stamped t1, if it was stamped at all). */
static inline void bd_unqueued(struct eng_chan *c, uint32_t slot)
{
    if (c->nawait > c->nawait1 && c->await[c->nawait - 1u] == slot)
        c->nawait--;
    bd_ended(c, &c->slots[slot]);
}

static inline void bd_stamp_submitted(struct eng_chan *c)
{
    if (__builtin_expect(c->nawait == c->nawait1, 1))
        return;
    const uint64_t t = now_ns();
    for (uint32_t i = c->nawait1; i < c->nawait; i++)
        c->slots[c->await[i]].t1 = t;
    c->nawait1 = c->nawait;
}

static inline void bd_stamp_kicked(struct eng_chan *c)
{
    if (__builtin_expect(c->nawait == 0, 1))
        return;
    const uint64_t t = now_ns();
    for (uint32_t i = 0; i < c->nawait; i++)
        if (c->slots[c->await[i]].t_sub) { /* still in flight (a backend may complete inside submit) */
            c->slots[c->await[i]].t2 = t;
            c->bd_pending++;
        }
    c->nawait = c->nawait1 = 0;
}

/* A timed command completed at t4 (w->now_cache): its phases into the breakdown (perf_batch.c, for both
 * paths). */
void perf_bd_record(struct worker *w, const struct eng_chan *c, const struct eng_slot *s, uint64_t t4);

/* The batch path (perf_batch.c). */
/* Queue commands into every free slot of c, a batch at a time. 0 or < 0. */
int perf_batch_refill(struct worker *w, struct eng_chan *c);
/* After a reap on the batch path: the slots freel[nf0 ..] completed (successes pushed by the backend, timed
 * commands and failures by done()); counted once per reap (inline: the worker loop calls it every pass). */
static inline void perf_batch_reap(struct worker *w, struct eng_chan *c, uint32_t nf0)
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
/* done() of a batch-path channel: a timed command or a failure. */
void perf_batch_done(struct perf_chan *ch, uint32_t slot, int status);

/* QD 1 (c->one: a batch-path channel of one slot, where every command is timed: perf_lat_sample_every(1) == 1).
 * The batch path's work for one command without its batch bookkeeping, the channel's refill: when the slot came back
 * from the reap (the loop reaps with the backend's reap1, its one-completion poll) a timed success takes its latency
 * (t4) here, not through done() (the command's cookie is the slot's plain one, so a success comes back on the free
 * list like an untimed one; a failure still goes through done(), which ends its timing); then the next command is
 * drawn, t0 read and handed to the backend's submit1 (one call with its doorbell). c->one needs both ops. */
int perf_one_refill(struct worker *w, struct eng_chan *c);

#endif /* NVMELAB_ENGINE_PERF_INTERNAL_H */
