/* SPDX-License-Identifier: BSD-3-Clause */
/* test_perf_params.c — the run parameter table: defaults, one range check naming the parameter, lookup. */
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

int main(void)
{
    struct perf_config c;
    perf_params_defaults(&c);
    CHECK(c.pattern == PERF_PAT_RANDREAD && c.qdepth == 128 && c.iosize == 512 && c.nqueues == 1 && c.lat == 1);
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
