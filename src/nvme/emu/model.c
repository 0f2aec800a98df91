/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * model.c — the device model: when a fetched command's completion becomes due.
 *
 * Each cap is a GCRA token bucket (a virtual-time server): a bucket holds the
 * theoretical arrival time `tat`; a command that arrives at t starts at
 * s = max(t, tat) and moves tat to s + T, where T = 1/rate (or bytes/bandwidth).
 * The buckets: per queue (plain, the queue's thread owns it), per device IOPS
 * and bandwidth (lock-free CAS, shared by the device's queues) and the link
 * shared by all devices of the target (CAS). Each sees the fetch time and the
 * command starts at the latest of their starts (not chained: a chain hands a
 * shared bucket future times out of order, see emu_model_due).  The completion
 * is due at start + latency, latency fixed or lognormal (median lat, shape sigma).
 * Consequence (Little's law): with Q commands in flight and no cap binding,
 * throughput = Q / latency; once a cap binds, throughput = the cap and the
 * latency grows with the queue.  Times are ns since the set was opened, in
 * 48.16 fixed point inside the buckets.
 */
#include <math.h>
#include <time.h>

#include "nvme/emu/emu_internal.h"

uint64_t emu_now_ns(const struct nvme_emu_set *set)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * EMU_NS_PER_S + (uint64_t)ts.tv_nsec - set->epoch_ns;
}

static double pick(double override, double nominal)
{
    return override >= 0 ? override : nominal;
}

static uint64_t gap_fp(double rate) /* fixed-point ns between commands at `rate` per second */
{
    return rate > 0 ? (uint64_t)llround((double)EMU_NS_PER_S * (double)(1u << EMU_FP_SHIFT) / rate) : 0;
}

static double per_byte_fp(double bytes_per_s)
{
    return bytes_per_s > 0 ? (double)EMU_NS_PER_S * (double)(1u << EMU_FP_SHIFT) / bytes_per_s : 0;
}

void emu_model_setup(struct emu_cfg *cfg)
{
    const struct nvme_emu_profile *p = cfg->profile;
    double s = cfg->scale;
    struct emu_model_cfg *m = &cfg->model;
    m->lat_ns = (uint64_t)llround(pick(cfg->lat_ns, p->lat_ns) * s);
    m->lat_sigma = pick(cfg->lat_sigma, p->lat_sigma);
    m->dev_iops_fp = gap_fp(pick(cfg->iops, p->dev_iops) / s);
    m->dev_bw_fp = per_byte_fp(pick(cfg->bw, p->dev_bw) / s);
    m->queue_iops_fp = gap_fp(pick(cfg->qiops, p->queue_iops) / s);
    m->link_bw_fp = per_byte_fp(pick(cfg->link, p->link_bw) / s);
    m->fetch_burst = cfg->fetch >= 0 ? (uint32_t)cfg->fetch : p->fetch_burst;
    m->timed = m->lat_ns || m->dev_iops_fp || m->dev_bw_fp > 0 || m->queue_iops_fp || m->link_bw_fp > 0;
}

static uint64_t gcra_shared(_Atomic uint64_t *tat, uint64_t t, uint64_t cost)
{
    uint64_t old = atomic_load_explicit(tat, memory_order_relaxed), s;
    do {
        s = old > t ? old : t;
    } while (!atomic_compare_exchange_weak_explicit(tat, &old, s + cost, memory_order_relaxed, memory_order_relaxed));
    return s;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static double unit_open(uint64_t *rng) /* uniform in (0, 1) */
{
    return ((double)(xorshift(rng) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

uint64_t emu_model_due(struct emu_ctrl *c, struct emu_sq *sq, uint64_t now, uint64_t bytes)
{
    const struct emu_model_cfg *m = &c->set->cfg.model;
    /* Every bucket sees the fetch time; the command starts when the last of them lets it. A shared
     * bucket must not see a queue bucket's start time: that is in the future by the queue's backlog,
     * and a queue with a shorter backlog would then wait behind another queue's future reservation
     * (the shared caps idled while their queues were full: 8 % below the queue cap at 512 B with 4
     * devices on one link, and more with several queues per device). */
    const uint64_t t0 = now << EMU_FP_SHIFT;
    uint64_t t = t0;
    if (m->queue_iops_fp) {
        t = max_u64(sq->q_tat, t0);
        sq->q_tat = t + m->queue_iops_fp;
    }
    if (m->dev_iops_fp)
        t = max_u64(t, gcra_shared(&c->iops_tat, t0, m->dev_iops_fp));
    if (m->dev_bw_fp > 0 && bytes)
        t = max_u64(t, gcra_shared(&c->bw_tat, t0, (uint64_t)((double)bytes * m->dev_bw_fp)));
    if (m->link_bw_fp > 0 && bytes)
        t = max_u64(t, gcra_shared(&c->set->link_tat, t0, (uint64_t)((double)bytes * m->link_bw_fp)));
    uint64_t lat = m->lat_ns;
    if (m->lat_sigma > 0 && lat) {
        /* Box-Muller normal sample; lognormal with median lat */
        double z = sqrt(-2.0 * log(unit_open(&sq->rng))) * cos(2.0 * M_PI * unit_open(&sq->rng));
        lat = (uint64_t)((double)lat * exp(m->lat_sigma * z));
    }
    /* round the start up to whole ns so a cap never completes early */
    return ((t + (1u << EMU_FP_SHIFT) - 1) >> EMU_FP_SHIFT) + lat;
}
