/* SPDX-License-Identifier: BSD-3-Clause */
/* perf.c — closed-loop engine (see perf.h). */
#include "engine/perf.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/kio.h"
#include "engine/perf_internal.h"

/* CPU time of every thread of the process, kernel workers of the thread group included. */
static double process_cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
        return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru))
        return 0.0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

static uint32_t fold_seed(uint64_t seed)
{
    return PERF_STAMP_MAGIC ^ (uint32_t)seed ^ (uint32_t)(seed >> 32);
}

/* ------------------------------------------------------------------ hot path */

static void stamp_write(struct engine *e, uint8_t *buf, uint32_t dev, uint64_t slba, uint32_t nlb, uint32_t lba_size)
{
    for (uint32_t i = 0; i < nlb; i++) {
        struct perf_stamp st = {.lba = slba + i, .dev = dev, .seed32 = e->seed32};
        memcpy(buf + (size_t)i * lba_size, &st, sizeof(st));
    }
}

static void stamp_check(struct worker *w, const uint8_t *buf, uint32_t dev, uint64_t slba, uint32_t nlb,
                        uint32_t lba_size)
{
    for (uint32_t i = 0; i < nlb; i++) {
        struct perf_stamp want = {.lba = slba + i, .dev = dev, .seed32 = w->e->seed32};
        if (memcmp(buf + (size_t)i * lba_size, &want, sizeof(want))) {
            if (!w->verify_errors) {
                w->first_bad_dev = dev;
                w->first_bad_lba = slba + i;
            }
            w->verify_errors++;
        }
    }
}

/* The rare parts of a completion: an error, a verified read, a latency sample. */
static __attribute__((noinline)) void eng_done_slow(struct eng_chan *c, struct worker *w, uint32_t slot, int status)
{
    struct eng_slot *s = &c->slots[slot];
    if (status) {
        if (!w->errors)
            w->first_err = status;
        w->errors++;
        if (s->t_sub) { /* a failed timed command is no sample, and its slot must not keep its stamps */
            s->t_sub = 0;
            bd_ended(c, s);
            c->lat_pending--;
        }
        return;
    }
    if (c->verify && !s->write)
        stamp_check(w, w->e->t->ops->chan_buf(c->ch, slot), c->dev, s->slba, s->nlb, w->e->rg[c->dev].lba_size);
    if (s->t_sub) {
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
    if (!w->measuring)
        return;
    w->ios++;
    w->writes += s->write;
    w->dev_ios[c->dev]++;
}

static void eng_done(struct perf_chan *ch, uint32_t slot, int status)
{
    struct eng_chan *c = ch->eng;
    struct worker *w = c->w;
    c->outstanding--;
    c->freel[c->nfree++] = slot;
    if (__builtin_expect(status != 0 || c->slow_done, 0)) {
        eng_done_slow(c, w, slot, status);
        return;
    }
    if (!w->measuring)
        return;
    w->ios++;
    w->writes += c->slots[slot].write;
    w->dev_ios[c->dev]++;
}

/* Queue new commands into the free slots of one channel. */
static int refill(struct worker *w, struct eng_chan *c)
{
    struct engine *e = w->e;
    const struct perf_backend_ops *ops = e->t->ops;
    const struct range *r = &e->rg[c->dev];
    uint32_t batch = e->cfg.batch ? e->cfg.batch : (e->t->default_batch ? e->t->default_batch : c->qdepth);
    uint32_t queued = 0;
    enum perf_pattern pat = e->fill ? PERF_PAT_WRITE : e->cfg.pattern;
    while (c->nfree) {
        uint32_t write;
        uint64_t pos;
        switch (pat) {
        case PERF_PAT_READ:
        case PERF_PAT_WRITE:
            if (e->fill && c->seq_next >= c->seq_end) {
                c->exhausted = 1;
                return 0;
            }
            pos = c->seq_next++;
            if (c->seq_next >= r->nblocks && !e->fill)
                c->seq_next = 0;
            write = pat == PERF_PAT_WRITE;
            break;
        case PERF_PAT_RANDREAD:
            pos = rng_below(&w->rng, r->nblocks);
            write = 0;
            break;
        case PERF_PAT_RANDWRITE:
            pos = rng_below(&w->rng, r->nblocks);
            write = 1;
            break;
        default: /* PERF_PAT_RANDRW */
            write = rng_below(&w->rng, PERF_PERCENT) >= e->cfg.rwmix;
            pos = rng_below(&w->rng, r->nblocks);
            break;
        }
        uint32_t slot = c->freel[--c->nfree];
        struct eng_slot *s = &c->slots[slot];
        s->slba = r->lba0 + pos * r->align_lbas;
        s->nlb = r->nlb;
        s->write = write;
        if (w->lat && --c->lat_left == 0) {
            c->lat_left = lat_gap(&w->rng, perf_lat_sample_every(c->qdepth));
            s->t_sub = now_ns();
            c->lat_pending++;
            bd_timed(c, slot);
        }
        if (write && e->cfg.verify)
            stamp_write(e, ops->chan_buf(c->ch, slot), c->dev, s->slba, s->nlb, r->lba_size);
        int rc = ops->submit(c->ch, slot, (int)write, s->slba, s->nlb);
        if (rc) {
            c->nfree++;
            if (s->t_sub) {
                s->t_sub = 0;
                c->lat_pending--;
                bd_unqueued(c, slot);
            }
            if (e->fill && (pat == PERF_PAT_WRITE))
                c->seq_next--; /* retry this position */
            if (rc == -EBUSY)
                break;
            return rc;
        }
        c->outstanding++;
        if (s->t_sub)
            bd_stamp_submitted(c);
        if (++queued == batch) {
            rc = ops->kick(c->ch, 0);
            if (rc)
                return rc;
            bd_stamp_kicked(c);
            queued = 0;
        }
    }
    return 0;
}

static void fmt_affinity(char *out, size_t outlen)
{
    cpu_set_t set;
    out[0] = 0;
    if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set))
        return;
    size_t used = 0;
    for (int i = 0; i < CPU_SETSIZE; i++) {
        if (!CPU_ISSET(i, &set))
            continue;
        int j = i;
        while (j + 1 < CPU_SETSIZE && CPU_ISSET(j + 1, &set))
            j++;
        int n = j > i ? snprintf(out + used, outlen - used, "%s%d-%d", used ? "," : "", i, j)
                      : snprintf(out + used, outlen - used, "%s%d", used ? "," : "", i);
        if (n < 0 || (size_t)n >= outlen - used) {
            out[outlen - 1] = 0;
            return;
        }
        used += (size_t)n;
        i = j;
    }
}

static int worker_setup(struct worker *w)
{
    struct engine *e = w->e;
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
        if (rc) {
            snprintf(w->err, sizeof(w->err), "cpus: cannot pin thread %u to CPU %d: %s", w->idx, w->cpu, strerror(rc));
            return -rc;
        }
    }
    uint32_t max_qdepth = 0;
    for (uint32_t i = 0; i < w->nchans; i++)
        max_qdepth = w->chans[i].qdepth > max_qdepth ? w->chans[i].qdepth : max_qdepth;
    for (uint32_t i = 0; i < w->nchans; i++) {
        struct eng_chan *c = &w->chans[i];
        c->slots = calloc(c->qdepth, sizeof(*c->slots));
        c->freel = calloc(c->qdepth, sizeof(*c->freel));
        c->await = calloc((size_t)c->qdepth + 1u, sizeof(*c->await)); /* + a command whose submit failed */
        if (!c->slots || !c->freel || !c->await) {
            snprintf(w->err, sizeof(w->err), "out of memory for %u slots", c->qdepth);
            return -ENOMEM;
        }
        for (uint32_t s = 0; s < c->qdepth; s++)
            c->freel[s] = c->qdepth - 1 - s;
        c->nfree = c->qdepth;
        int rc = e->t->ops->chan_open(e->t->ctx, c->dev, c->qdepth, e->cfg.iosize, &c->ch, w->err, sizeof(w->err));
        if (rc) {
            if (!w->err[0])
                snprintf(w->err, sizeof(w->err), "device %u: cannot open a channel: %s", c->dev, strerror(-rc));
            c->ch = NULL;
            return rc;
        }
        c->ch->done = eng_done;
        c->ch->eng = c;
        c->verify = w->e->cfg.verify;
        c->slow_done = c->verify || w->lat;
        c->lat_left = 1; /* the first command is sampled, then one in perf_lat_sample_every(qdepth) on average */
        c->bd_left = 1;  /* and stamped for the breakdown, then every perf_bd_of_timed(qdepth)-th timed one */
        c->bd_of_timed = w->lat && w->e->cfg.bd ? perf_bd_of_timed(c->qdepth) : 0u;
        /* the batch path: a backend that takes batches, one direction per run (a mix goes command by command) */
        c->fast = (e->t->flags & PERF_TGT_FREEL) && e->t->ops->submit_many && c->ch->cookie && !c->verify && !e->fill &&
                  e->cfg.pattern != PERF_PAT_RANDRW;
        if (c->fast) {
            if (!w->subs)
                w->subs = calloc(max_qdepth, sizeof(*w->subs)); /* a batch is at most one channel's qdepth */
            c->subs = w->subs;
            c->bufp = calloc(c->qdepth, sizeof(*c->bufp));
            if (!c->subs || !c->bufp) {
                snprintf(w->err, sizeof(w->err), "out of memory for %u slots", c->qdepth);
                return -ENOMEM;
            }
            for (uint32_t s = 0; s < c->qdepth; s++)
                c->bufp[s] = e->t->ops->chan_buf(c->ch, s);
            c->ch->freel = c->freel;
            c->ch->nfree = &c->nfree;
            c->ch->done = perf_batch_done; /* timed commands and failures only */
            /* QD 1, where every command is timed: the one-slot pass (perf_internal.h) */
            c->one = c->qdepth == 1 && perf_lat_sample_every(1) == 1u && e->t->ops->submit1 && e->t->ops->reap1;
        }
        c->reap = c->one ? e->t->ops->reap1 : e->t->ops->reap;
        c->refill = c->one ? perf_one_refill : c->fast ? perf_batch_refill : refill;
    }
    return 0;
}

static void worker_teardown(struct worker *w)
{
    for (uint32_t i = 0; i < w->nchans; i++) {
        struct eng_chan *c = &w->chans[i];
        if (c->ch)
            w->e->t->ops->chan_close(c->ch);
        c->ch = NULL;
        free(c->slots);
        free(c->freel);
        free(c->await);
        c->await = NULL;
        free(c->bufp);
        c->bufp = NULL;
        c->slots = NULL;
        c->freel = NULL;
        c->subs = NULL;
    }
    free(w->subs);
    w->subs = NULL;
}

static void begin_window(struct worker *w, uint64_t now)
{
    w->ios = w->reads = w->writes = w->bytes = 0;
    memset(w->dev_ios, 0, sizeof(w->dev_ios));
    stats_hist_reset(w->hist);
    for (uint32_t p = 0; p < PERF_BD_NPHASES; p++)
        stats_hist_reset(&w->bd[p]);
    w->polls = w->empty_polls = 0;
    w->cpu_start = thread_cpu_s();
    if (w->idx == 0)
        w->proc_start = process_cpu_s();
    w->t_start = now;
    w->measuring = 1;
}

static void end_window(struct worker *w, uint64_t now)
{
    if (w->measuring) {
        w->t_stop = now;
        w->cpu_stop = thread_cpu_s();
        if (w->idx == 0)
            w->proc_stop = process_cpu_s();
    }
    w->measuring = 0;
}

/* The run window's clock in the worker loop: read every `every`-th iteration (a countdown), `every` kept so that the
 * reads are about PERF_CLOCK_SPAN_NS apart (perf_clock_every). Only where every channel takes the batch path (the
 * NVMe driver: an iteration is a non-blocking poll and a refill, its time bounded by the commands it handles);
 * the kernel paths, whose iterations make system calls and may wait, read it every time. The window's ends are
 * clock reads, so ios / window stays exact; the run only starts and ends up to about a span late, and a stop
 * request is seen within about a span. */
struct loop_clock {
    uint64_t now, t_read;
    uint32_t every, tick, every_max;
};

static __attribute__((noinline)) void loop_clock_read(struct worker *w, struct loop_clock *k, int *stopping)
{
    struct engine *e = w->e;
    const uint64_t now = k->now = now_ns();
    if (k->tick == 0) {
        k->every = perf_clock_every(k->every, k->every_max, now - k->t_read);
        k->tick = k->every;
        k->t_read = now;
    }
    if (*stopping)
        return;
    if (!e->fill) {
        if (!w->measuring && now >= e->t_meas)
            begin_window(w, now);
        if (now >= e->t_end) {
            end_window(w, now);
            *stopping = 1;
            return;
        }
    }
    if (e->cfg.stop && __atomic_load_n(e->cfg.stop, __ATOMIC_RELAXED)) {
        end_window(w, now);
        *stopping = 1;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct engine *e = w->e;
    const struct perf_backend_ops *ops = e->t->ops;
    w->rc = worker_setup(w);
    fmt_affinity(w->affinity, sizeof(w->affinity));
    if (w->rc)
        atomic_store(&e->setup_failed, 1);
    pthread_mutex_lock(&e->mu);
    e->ready++;
    pthread_cond_broadcast(&e->cv);
    while (!e->go)
        pthread_cond_wait(&e->cv, &e->mu);
    int go = e->go;
    pthread_mutex_unlock(&e->mu);
    if (go < 0)
        goto out;

    const int blocking = (e->t->flags & PERF_TGT_BLOCKING) && w->nchans == 1;
    int stopping = 0;
    const uint64_t t_end = e->t_end;
    if (e->fill)
        begin_window(w, now_ns());
    /* The run window's clock (struct loop_clock): read and checked every k.every-th iteration (loop_clock_read);
     * read alone when the first channel has a breakdown-stamped command in flight (that reap's t3). */
    int all_fast = !blocking;
    for (uint32_t i = 0; i < w->nchans; i++)
        all_fast &= w->chans[i].fast;
    struct loop_clock k = {.every = 1, .tick = 1, .every_max = all_fast ? PERF_CLOCK_EVERY_MAX : 1u};
    const struct eng_chan *const c0 = &w->chans[0];
    for (;;) {
        if (--k.tick == 0)
            loop_clock_read(w, &k, &stopping);
        else if (c0->bd_pending) /* t3 of the first channel's reap (the window waits for the countdown) */
            k.now = now_ns();
        const uint64_t now = k.now;
        for (uint32_t i = 0; i < w->nchans; i++) {
            struct eng_chan *c = &w->chans[i];
            w->now_valid = 0;
            const uint32_t nf0 = c->nfree;
            if (c->bd_pending) /* breakdown: t3 of what this reap sees (the loop's fresh clock read for the first) */
                c->t_poll = i == 0 ? now : now_ns();
            int n = c->reap(c->ch, c->qdepth);
            c->t_poll_prev = c->t_poll;
            if (c->fast && n > 0)
                perf_batch_reap(w, c, nf0);
            if (n < 0) {
                snprintf(w->err, sizeof(w->err), "device %u: completion error: %s", c->dev, strerror(-n));
                w->rc = n;
                goto drain_fail;
            }
            w->polls++;
            w->empty_polls += n == 0;
            if (!stopping && !c->exhausted) {
                int rc = c->refill(w, c);
                if (rc) {
                    snprintf(w->err, sizeof(w->err), "device %u: submit failed: %s", c->dev, strerror(-rc));
                    w->rc = rc;
                    goto drain_fail;
                }
            }
            int rc = 0;
            if (c->nawait) { /* timed commands not yet visible: their doorbell (t2), before any wait */
                rc = ops->kick(c->ch, 0);
                bd_stamp_kicked(c);
            }
            /* the batch path kicks after every submit_many (and its targets never block): nothing left here */
            if (!rc && !c->fast)
                rc = ops->kick(c->ch, blocking && c->outstanding ? 1u : 0u);
            if (rc) {
                snprintf(w->err, sizeof(w->err), "device %u: kick failed: %s", c->dev, strerror(-rc));
                w->rc = rc;
                goto drain_fail;
            }
        }
        if (!stopping && !e->fill)
            continue; /* the run goes on: nothing to count */
        uint32_t outstanding = 0, live = 0;
        for (uint32_t i = 0; i < w->nchans; i++) {
            outstanding += w->chans[i].outstanding;
            live += !w->chans[i].exhausted;
        }
        if (e->fill && !live && !outstanding) {
            end_window(w, now_ns());
            break;
        }
        if (stopping && !outstanding)
            break;
        if (stopping && now > t_end + PERF_DRAIN_TIMEOUT_NS && now > w->t_stop + PERF_DRAIN_TIMEOUT_NS) {
            snprintf(w->err, sizeof(w->err), "%u commands still outstanding %llu s after the end of the run",
                     outstanding, (unsigned long long)(PERF_DRAIN_TIMEOUT_NS / NS_PER_S));
            w->rc = -ETIMEDOUT;
            break;
        }
    }
    goto out;
drain_fail:
    end_window(w, now_ns());
    /* give outstanding commands a bounded chance to finish before the channels close */
    {
        uint64_t until = now_ns() + PERF_DRAIN_TIMEOUT_NS;
        uint32_t left;
        do {
            left = 0;
            for (uint32_t i = 0; i < w->nchans; i++) {
                struct eng_chan *c = &w->chans[i];
                const uint32_t nf0 = c->nfree;
                if (ops->reap(c->ch, c->qdepth) > 0 && c->fast)
                    perf_batch_reap(w, c, nf0);
                ops->kick(c->ch, 0);
                left += c->outstanding;
            }
        } while (left && now_ns() < until);
    }
out:
    w->cpu_last = sched_getcpu();
    worker_teardown(w);
    return NULL;
}

/* ------------------------------------------------------------------ run */

/* Phase 1: each device's LBA range as the run reads it (start, LBAs per I/O, alignment, blocks). */
static void engine_plan_ranges(struct engine *e)
{
    const struct perf_config *cfg = &e->cfg;
    for (uint32_t d = 0; d < e->ndevs; d++) {
        const struct perf_dev_info *di = &e->t->dev[d];
        struct range *r = &e->rg[d];
        uint32_t align = cfg->align ? cfg->align : cfg->iosize;
        uint64_t count = cfg->lba_count ? cfg->lba_count : di->nlbas - cfg->lba_start;
        r->lba0 = cfg->lba_start;
        r->lba_size = di->lba_size;
        r->nlb = cfg->iosize / di->lba_size;
        r->align_lbas = align / di->lba_size;
        r->nblocks = (count * di->lba_size - cfg->iosize) / align + 1;
    }
}

/* Phase 2: the workers and their channels: devices round-robin over threads (alldevs: every device to every
 * thread), nqueues channels per device; then each channel's share of its device's sequential blocks.
 * 0, or -ENOMEM (what was allocated is freed by engine_free). */
static int engine_assign(struct engine *e, uint32_t nthr)
{
    const struct perf_config *cfg = &e->cfg;
    for (uint32_t i = 0; i < nthr; i++) {
        struct worker *w = &e->w[i];
        w->idx = i;
        w->e = e;
        w->cpu = cfg->cpus ? cfg->cpus[i] : -1;
        w->lat = cfg->lat && !e->fill;
        w->rng = (cfg->seed ^ 0x9E3779B97F4A7C15ull * (i + 1)) | 1u;
        w->hist = malloc(sizeof(*w->hist));
        w->bd = calloc(PERF_BD_NPHASES, sizeof(*w->bd));
        uint32_t ndev_w = 0;
        uint32_t devs[PERF_MAX_DEVS];
        if (cfg->alldevs) {
            for (uint32_t d = 0; d < e->ndevs; d++)
                devs[ndev_w++] = d;
        } else if (e->ndevs >= nthr) {
            for (uint32_t d = i; d < e->ndevs; d += nthr)
                devs[ndev_w++] = d;
        } else {
            devs[ndev_w++] = i % e->ndevs;
        }
        w->nchans = ndev_w * cfg->nqueues;
        w->chans = calloc(w->nchans, sizeof(*w->chans));
        if (!w->hist || !w->bd || !w->chans)
            return -ENOMEM;
        stats_hist_reset(w->hist);
        for (uint32_t p = 0; p < PERF_BD_NPHASES; p++)
            stats_hist_reset(&w->bd[p]);
        for (uint32_t j = 0; j < w->nchans; j++) {
            struct eng_chan *c = &w->chans[j];
            c->w = w;
            c->dev = devs[j / cfg->nqueues];
            c->qdepth = cfg->qdepth;
            c->k = e->rg[c->dev].nchans++;
        }
    }
    for (uint32_t i = 0; i < nthr; i++)
        for (uint32_t j = 0; j < e->w[i].nchans; j++) {
            struct eng_chan *c = &e->w[i].chans[j];
            const struct range *r = &e->rg[c->dev];
            c->seq_begin = r->nblocks * c->k / r->nchans;
            c->seq_end = r->nblocks * (c->k + 1) / r->nchans;
            c->seq_next = c->seq_begin;
        }
    return 0;
}

/* Phase 3: start the workers (none when rc != 0 already), wait until every started one is set up, release them
 * together (go = 1; -1 when a start or a setup failed: each unwinds) and join them. Returns rc, or the
 * pthread_create failure (-errno, named in err). */
static int engine_start_join(struct engine *e, uint32_t nthr, int rc, char *err, size_t errlen)
{
    uint32_t started = 0;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    for (; !rc && started < nthr; started++) {
        int prc = pthread_create(&e->w[started].th, NULL, worker_main, &e->w[started]);
        if (prc) {
            snprintf(err, errlen, "cannot start worker thread %u: %s", started, strerror(prc));
            rc = -prc;
            break;
        }
    }
    pthread_mutex_lock(&e->mu);
    while (e->ready < started)
        pthread_cond_wait(&e->cv, &e->mu);
    e->t0 = now_ns();
    e->t_meas = e->t0 + e->cfg.warmup_ns;
    e->t_end = e->t_meas + e->cfg.runtime_ns;
    e->go = (rc || atomic_load(&e->setup_failed)) ? -1 : 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(e->w[i].th, NULL);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    return rc;
}

/* Phase 4: the workers' counts merged into res (the first worker error, named in err, is the run's). */
static int engine_collect(struct engine *e, uint32_t nthr, struct perf_result *res, char *err, size_t errlen)
{
    const struct perf_config *cfg = &e->cfg;
    int rc = 0;
    memset(res, 0, sizeof(*res));
    stats_hist_reset(&res->lat);
    for (uint32_t p = 0; p < PERF_BD_NPHASES; p++)
        stats_hist_reset(&res->bd[p]);
    res->ndevs = e->ndevs;
    res->nthreads = nthr;
    double wsum = 0;
    for (uint32_t i = 0; i < nthr; i++) {
        struct worker *w = &e->w[i];
        if (w->rc && !rc) {
            rc = w->rc;
            snprintf(err, errlen, "thread %u: %s", i, w->err[0] ? w->err : strerror(-w->rc));
        }
        struct perf_thread_result *tr = &res->thr[i];
        tr->cpu = w->cpu;
        tr->cpu_last = w->cpu_last;
        memcpy(tr->affinity, w->affinity, sizeof(tr->affinity));
        tr->nchans = w->nchans;
        tr->ios = w->ios;
        tr->bytes = w->ios * cfg->iosize;
        tr->errors = w->errors;
        tr->polls = w->polls;
        tr->empty_polls = w->empty_polls;
        tr->window_s = w->t_stop > w->t_start ? (double)(w->t_stop - w->t_start) / 1e9 : 0.0;
        tr->cpu_s = w->cpu_stop - w->cpu_start;
        res->ios += w->ios;
        res->writes += w->writes;
        res->errors += w->errors;
        if (w->verify_errors && !res->verify_errors) {
            res->first_bad_dev = w->first_bad_dev;
            res->first_bad_lba = w->first_bad_lba;
        }
        res->verify_errors += w->verify_errors;
        if (w->errors && !res->first_err)
            res->first_err = w->first_err;
        for (uint32_t d = 0; d < e->ndevs; d++)
            res->dev_ios[d] += w->dev_ios[d];
        if (tr->window_s > 0)
            res->iops += (double)w->ios / tr->window_s;
        wsum += tr->window_s;
        res->cpu_s += tr->cpu_s;
        stats_hist_merge(&res->lat, w->hist);
        for (uint32_t p = 0; p < PERF_BD_NPHASES; p++)
            stats_hist_merge(&res->bd[p], &w->bd[p]);
    }
    for (uint32_t p = 0; p < PERF_BD_NPHASES; p++)
        stats_hist_settle(&res->bd[p]); /* recorded with stats_hist_add_bucket */
    res->reads = res->ios - res->writes;
    res->bytes = res->ios * cfg->iosize;
    res->bytes_per_s = res->iops * cfg->iosize;
    res->window_s = wsum / nthr;
    res->proc_cpu_s = e->w[0].proc_stop - e->w[0].proc_start;
    res->lat_sample_every = cfg->lat && !e->fill ? perf_lat_sample_every(cfg->qdepth) : 0;
    res->bd_sample_every = cfg->bd ? res->lat_sample_every * perf_bd_of_timed(cfg->qdepth) : 0u;
    if (!rc && cfg->stop && __atomic_load_n(cfg->stop, __ATOMIC_ACQUIRE)) {
        res->interrupted = 1;
        rc = -EINTR;
        snprintf(err, errlen, "interrupted");
    }
    return rc;
}

/* Teardown of what engine_run and engine_assign allocated (workers partly set up included). */
static void engine_free(struct engine *e, uint32_t nthr)
{
    for (uint32_t i = 0; i < nthr; i++) {
        free(e->w[i].hist);
        free(e->w[i].bd);
        free(e->w[i].chans);
    }
    free(e->w);
    free(e);
}

/* One run (fill: the stamp pass over the range): check, plan, assign, start/join, collect, free. */
static int engine_run(struct perf_target *t, const struct perf_config *cfg, int fill, struct perf_result *res,
                      char *err, size_t errlen)
{
    int rc = perf_config_check(t, cfg, err, errlen);
    if (rc)
        return rc;
    if (!fill && cfg->runtime_ns == 0) {
        snprintf(err, errlen, "runtime: must be > 0");
        return -EINVAL;
    }
    struct engine *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->t = t;
    e->cfg = *cfg;
    e->fill = fill;
    if (fill) {
        e->cfg.verify = 1;
        e->cfg.align = cfg->iosize;
        e->cfg.pattern = PERF_PAT_WRITE;
    }
    e->ndevs = cfg->ndevs ? cfg->ndevs : t->ndevs;
    e->seed32 = fold_seed(cfg->seed);
    const uint32_t nthr = cfg->nthreads;
    engine_plan_ranges(e);
    e->w = calloc(nthr, sizeof(*e->w));
    if (!e->w) {
        free(e);
        return -ENOMEM;
    }
    rc = engine_assign(e, nthr);
    rc = engine_start_join(e, nthr, rc, err, errlen);
    if (!rc)
        rc = engine_collect(e, nthr, res, err, errlen);
    else if (!err[0])
        snprintf(err, errlen, "setup failed: %s", strerror(-rc));
    engine_free(e, nthr);
    return rc;
}

int perf_run(struct perf_target *t, const struct perf_config *cfg, struct perf_result *res, char *err, size_t errlen)
{
    return engine_run(t, cfg, 0, res, err, errlen);
}

int perf_fill(struct perf_target *t, const struct perf_config *cfg, struct perf_result *res, char *err, size_t errlen)
{
    return engine_run(t, cfg, 1, res, err, errlen);
}
