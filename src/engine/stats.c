/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.c — log-linear latency histogram (see stats.h). */
#include "engine/stats.h"

#include <string.h>

void stats_hist_reset(struct stats_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min_ns = UINT64_MAX;
}

void stats_hist_merge(struct stats_hist *dst, const struct stats_hist *src)
{
    for (uint32_t i = 0; i < STATS_NBUCKETS; i++)
        dst->bucket[i] += src->bucket[i];
    dst->count += src->count;
    dst->sum_ns += src->sum_ns;
    if (src->max_ns > dst->max_ns)
        dst->max_ns = src->max_ns;
    if (src->min_ns < dst->min_ns)
        dst->min_ns = src->min_ns;
}

void stats_hist_settle(struct stats_hist *h)
{
    h->count = 0;
    h->min_ns = UINT64_MAX;
    h->max_ns = 0;
    for (uint32_t i = 0; i < STATS_NBUCKETS; i++) {
        if (!h->bucket[i])
            continue;
        if (!h->count)
            h->min_ns = stats_bucket_low(i);
        h->count += h->bucket[i];
        h->max_ns = stats_bucket_high(i);
    }
}

uint64_t stats_bucket_low(uint32_t i)
{
    if (i < STATS_SUB_COUNT)
        return i;
    uint32_t k = i - STATS_SUB_COUNT;
    uint32_t e = STATS_SUB_BITS + k / STATS_HALF_COUNT;
    uint32_t sub = k % STATS_HALF_COUNT;
    uint32_t shift = e - (STATS_SUB_BITS - 1u);
    return (uint64_t)(STATS_HALF_COUNT + sub) << shift;
}

uint64_t stats_bucket_high(uint32_t i)
{
    if (i < STATS_SUB_COUNT)
        return i;
    if (i == STATS_NBUCKETS - 1u)
        return UINT64_MAX;
    return stats_bucket_low(i + 1u) - 1u;
}

uint64_t stats_hist_percentile(const struct stats_hist *h, double p)
{
    if (h->count == 0)
        return 0;
    if (p >= 100.0)
        return h->max_ns;
    /* rank of the sample: ceil(p/100 * count), at least 1 */
    double r = p / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)r;
    if ((double)rank < r)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < STATS_NBUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= rank) {
            uint64_t v = stats_bucket_high(i);
            if (v > h->max_ns)
                v = h->max_ns;
            if (v < h->min_ns)
                v = h->min_ns;
            return v;
        }
    }
    return h->max_ns;
}
