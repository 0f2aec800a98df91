/* SPDX-License-Identifier: BSD-3-Clause */
/* test_perf_params.c — the run parameter table: defaults, one range check naming the parameter, lookup; the
 * breakdown's sampling rule (nvme/bd_sample.h) and the perf engine's share of it (perf_bd_of_timed). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/perf_params.h"

static void refused(struct perf_config c, const char *needle)
{
    char err[PERF_ERRLEN] = "";
    CHECK(perf_params_check(&c, err, sizeof(err)) == -EINVAL);
    printf("refused as expected: %s\n", err);
    CHECK(strstr(err, needle) != NULL);
}

/* The breakdown's sampling rule: one command in `every` by running number, the same answer on the mask path
 * (a power of two) and the remainder path; the perf engine stamps every perf_bd_of_timed-th timed command, so
 * one in about nvme_bd_sample_every(qdepth) of all. */
static void test_bd_sampling_rule(void)
{
    CHECK(!nvme_bd_sampled(0, 0) && !nvme_bd_sampled(64, 0)); /* 0: off */
    const uint32_t every[] = {1, 3, 10, 16, 64, 100};
    for (size_t e = 0; e < sizeof(every) / sizeof(every[0]); e++) {
        uint64_t n = 0;
        for (uint64_t cmd = 0; cmd < 6400; cmd++) {
            CHECK(nvme_bd_sampled(cmd, every[e]) == (cmd % every[e] == 0));
            n += (uint64_t)nvme_bd_sampled(cmd, every[e]);
        }
        CHECK(n == (6400 + every[e] - 1) / every[e]);
    }
    CHECK(nvme_bd_sampled(UINT64_MAX - 63, 64) && !nvme_bd_sampled(UINT64_MAX, 64));
    const uint32_t qds[] = {1, 2, 8, 16, 32, 128, 1024, PERF_MAX_QDEPTH};
    for (size_t q = 0; q < sizeof(qds) / sizeof(qds[0]); q++) {
        const uint32_t qd = qds[q], rule = nvme_bd_sample_every(qd);
        CHECK(rule >= 1 && (rule & (rule - 1u)) == 0); /* a power of two: the mask path */
        const uint32_t of_timed = perf_bd_of_timed(qd), lat = perf_lat_sample_every(qd);
        /* about the rule (at most it, more than half of it); every timed one where timing is rarer still; exactly
         * the rule where the latency period divides it */
        if (lat <= rule)
            CHECK(of_timed * lat <= rule && 2u * of_timed * lat > rule);
        else
            CHECK(of_timed == 1);
        if (rule % lat == 0)
            CHECK(of_timed * lat == rule);
    }
}

int main(void)
{
    test_bd_sampling_rule();
    struct perf_config c;
    perf_params_defaults(&c);
    CHECK(c.pattern == PERF_PAT_RANDREAD && c.qdepth == 128 && c.iosize == 512 && c.nqueues == 1 && c.lat == 1);
    CHECK(c.bd == 1); /* the per-I/O breakdown is on by default (0 switches it off, latency sampling stays) */
    CHECK(c.runtime_ns == 5000000000ull && c.warmup_ns == 1000000000ull && c.seed == 1 && !c.verify);
    char err[PERF_ERRLEN];
    CHECK(perf_params_check(&c, err, sizeof(err)) == 0);
    CHECK(PERF_NPARAMS >= 16 && perf_param_find("qdepth") >= 0 && perf_param_find("nosuch") == -1);
    CHECK(perf_param_info(PERF_NPARAMS) == NULL);
    for (size_t i = 0; i < PERF_NPARAMS; i++)
        CHECK(perf_param_info(i)->name && perf_param_info(i)->doc && perf_param_info(i)->lo <= perf_param_info(i)->hi);
    struct perf_config b = c;
    b.qdepth = 0;
    refused(b, "qdepth=0: must be 1..65536");
    b = c;
    b.rwmix = 101;
    refused(b, "rwmix=101");
    b = c;
    b.nqueues = PERF_MAX_QUEUES + 1;
    refused(b, "nqueues=1025");
    b = c;
    b.runtime_ns = 0;
    refused(b, "runtime=0");
    b = c;
    b.pattern = (enum perf_pattern)99;
    refused(b, "rw: unknown pattern 99");
    return CHECK_DONE("test_perf_params");
}
