/* SPDX-License-Identifier: BSD-3-Clause */
/* test_perf_stats.c — the log-linear histogram: bucket edges, percentiles, merge. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "engine/stats.h"

#define REL_ERR 0.016 /* 2^-(STATS_SUB_BITS-1) */

int main(void)
{
    /* every value falls in a bucket whose edges contain it */
    for (uint64_t v = 0; v < (1ull << 41); v = v < 1000 ? v + 1 : v + v / 7 + 3) {
        uint32_t b = stats_bucket_of(v);
        CHECK(b < STATS_NBUCKETS);
        CHECK(stats_bucket_low(b) <= v);
        if (b != STATS_NBUCKETS - 1) {
            CHECK(v <= stats_bucket_high(b));
            CHECK((double)(stats_bucket_high(b) - stats_bucket_low(b)) <= REL_ERR * (double)stats_bucket_low(b) + 1.0);
        }
    }
    /* buckets are contiguous */
    for (uint32_t b = 0; b + 2 < STATS_NBUCKETS; b++)
        CHECK(stats_bucket_high(b) + 1 == stats_bucket_low(b + 1));

    static struct stats_hist h, h2;
    stats_hist_reset(&h);
    CHECK(stats_hist_percentile(&h, 50) == 0);
    for (uint64_t v = 1; v <= 100000; v++)
        stats_hist_add(&h, v * 10); /* 10 ns .. 1 ms uniform */
    double p50 = (double)stats_hist_percentile(&h, 50), p99 = (double)stats_hist_percentile(&h, 99);
    CHECK(p50 >= 500000 && p50 <= 500000 * (1 + REL_ERR));
    CHECK(p99 >= 990000 && p99 <= 990000 * (1 + REL_ERR));
    CHECK(stats_hist_percentile(&h, 100) == 1000000);
    CHECK(h.min_ns == 10 && h.max_ns == 1000000 && h.count == 100000);

    stats_hist_reset(&h2);
    stats_hist_add(&h2, 5000000000ull);
    stats_hist_merge(&h, &h2);
    CHECK(h.count == 100001 && h.max_ns == 5000000000ull);
    CHECK(stats_hist_percentile(&h, 100) == 5000000000ull);
    CHECK(stats_hist_percentile(&h, 99.9999) <= 5000000000ull);
    /* clamp above 2^40 keeps the exact max */
    stats_hist_add(&h, 1ull << 50);
    CHECK(h.max_ns == (1ull << 50) && stats_hist_percentile(&h, 100) == (1ull << 50));
    printf("test_perf_stats: ok (%u buckets)\n", (unsigned)STATS_NBUCKETS);
    return CHECK_DONE("test_perf_stats");
}
