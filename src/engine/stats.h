/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats.h — latency histogram and per-thread counters of the perf engine.
 *
 * Purpose: record one latency sample per completed I/O cheaply (no locks, no
 * allocation, a handful of instructions) and report percentiles after the run.
 *
 * The histogram is log-linear (HDR style): values below 2^STATS_SUB_BITS ns land
 * in exact buckets; above that every power-of-two range [2^e, 2^(e+1)) is split
 * into 2^(STATS_SUB_BITS-1) equal buckets, so the relative error of a reported
 * percentile is at most 2^-(STATS_SUB_BITS-1) (1.6 % with 7 bits). Values at or
 * above 2^STATS_MAX_EXP ns (about 18 minutes) are clamped into the last bucket;
 * the exact maximum is kept separately.
 *
 * Key functions: stats_hist_add(), stats_hist_add_bucket() + stats_hist_settle() (percentiles only),
 * stats_hist_merge(), stats_hist_percentile().
 * Caveats: a histogram belongs to one thread while recording; merge after join.
 */
#ifndef NVMELAB_ENGINE_STATS_H
#define NVMELAB_ENGINE_STATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STATS_SUB_BITS   7                      /* exact buckets below 2^7 ns */
#define STATS_SUB_COUNT  (1u << STATS_SUB_BITS) /* 128 */
#define STATS_HALF_COUNT (STATS_SUB_COUNT / 2u) /* buckets per power of two above */
#define STATS_MAX_EXP    40                     /* 2^40 ns = 1099 s: clamp above */
#define STATS_NBUCKETS   (STATS_SUB_COUNT + (STATS_MAX_EXP - STATS_SUB_BITS) * STATS_HALF_COUNT)

struct stats_hist {
    uint64_t count;  /* samples recorded */
    uint64_t sum_ns; /* for the mean */
    uint64_t min_ns; /* UINT64_MAX when empty */
    uint64_t max_ns;
    uint64_t bucket[STATS_NBUCKETS];
};

/* Bucket index of a value in ns (clamped to the last bucket). */
static inline uint32_t stats_bucket_of(uint64_t v)
{
    if (v < STATS_SUB_COUNT)
        return (uint32_t)v;
    uint32_t e = 63u - (uint32_t)__builtin_clzll(v); /* 2^e <= v */
    if (e >= STATS_MAX_EXP)
        return STATS_NBUCKETS - 1u;
    uint32_t shift = e - (STATS_SUB_BITS - 1u);               /* keep the top bits */
    uint32_t sub = (uint32_t)(v >> shift) - STATS_HALF_COUNT; /* 0 .. HALF-1 */
    return STATS_SUB_COUNT + (e - STATS_SUB_BITS) * STATS_HALF_COUNT + sub;
}

/* Record one sample; the hot-path call. */
static inline void stats_hist_add(struct stats_hist *h, uint64_t v)
{
    h->bucket[stats_bucket_of(v)]++;
    h->count++;
    h->sum_ns += v;
    if (v > h->max_ns)
        h->max_ns = v;
    if (v < h->min_ns)
        h->min_ns = v;
}

/* Record one sample in its bucket only (count, sum, min and max untouched: stats_hist_settle derives count
 * and bounds them later); for histograms read only through percentiles, half the instructions of _add. */
static inline void stats_hist_add_bucket(struct stats_hist *h, uint64_t v)
{
    h->bucket[stats_bucket_of(v)]++;
}

void stats_hist_reset(struct stats_hist *h);
/* After stats_hist_add_bucket: count = the buckets' total, min/max = the edges of the first and last
 * non-empty bucket (sum_ns stays 0: no mean). */
void stats_hist_settle(struct stats_hist *h);
/* dst += src */
void stats_hist_merge(struct stats_hist *dst, const struct stats_hist *src);
/* Lowest value of bucket i and the highest value it holds. */
uint64_t stats_bucket_low(uint32_t i);
uint64_t stats_bucket_high(uint32_t i);
/* Value at percentile p (0 < p <= 100): the upper edge of the bucket holding it,
 * capped at the exact maximum; 0 when empty. */
uint64_t stats_hist_percentile(const struct stats_hist *h, double p);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_STATS_H */
