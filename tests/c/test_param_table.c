/* SPDX-License-Identifier: BSD-3-Clause */
/* test_param_table.c — the engines' one parameter checker (engine/param_table.h) and the cuda-run table
 * through it: a value out of bounds is refused with the wording the perf table's test (test_perf_params.c)
 * checks for that table, naming the parameter. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "engine/crun_params.h"
#include "engine/param_table.h"

#define ERRLEN 256

static void crun_refused(struct nvme_cuda_run_params p, const char *needle)
{
    char err[ERRLEN] = "";
    CHECK(crun_params_check(&p, err, sizeof(err)) == -EINVAL);
    printf("cuda-run refused as expected: %s\n", err);
    CHECK(strstr(err, needle) != NULL);
}

int main(void)
{
    char err[ERRLEN] = "";
    CHECK(param_bound("x", 3, 1, 3, PARAM_INTEGRAL, err, sizeof(err)) == 0 && err[0] == '\0');
    CHECK(param_bound("x", 4, 1, 3, PARAM_INTEGRAL, err, sizeof(err)) == -EINVAL);
    CHECK(!strcmp(err, "x=4: must be 1..3"));
    CHECK(param_bound("t", 0.5, 1, 2, PARAM_SECONDS, err, sizeof(err)) == -EINVAL);
    CHECK(!strcmp(err, "t=0.5: must be 1..2 seconds"));
    CHECK(param_pattern("rw", 3, 3, err, sizeof(err)) == 0);
    CHECK(param_pattern("rw", 7, 3, err, sizeof(err)) == -EINVAL && !strcmp(err, "rw: unknown pattern 7"));

    /* the cuda-run table through it */
    struct nvme_cuda_run_params p;
    crun_params_defaults(&p);
    CHECK(p.qdepth == 128 && p.iosize == 512 && p.runtime_ns == 5000000000ull && p.poll_max_ns == CRUN_POLL_DEFAULT_NS);
    CHECK(!p.verify && p.occupancy_pct == CRUN_OCCUPANCY_PCT && p.rw == NVME_CUDA_RANDREAD);
    CHECK(crun_params_check(&p, err, sizeof(err)) == 0);
    struct nvme_cuda_run_params b = p;
    b.qdepth = CRUN_MAX_QDEPTH + 1;
    crun_refused(b, "qdepth=1025: must be 1..1024");
    b = p;
    b.timeout_ns = 0;
    crun_refused(b, "timeout=0: must be 1e-06..3600 seconds");
    b = p;
    b.rw = (enum nvme_cuda_rw)9;
    crun_refused(b, "rw: unknown pattern 9");
    b = p;
    b.poll_max_ns = CRUN_POLL_MAX_NS + 1;
    crun_refused(b, "poll (backoff ns)=1000001: must be 0..1000000");
    b = p;
    b.runtime_ns = 0; /* runtime does not count when rounds are given */
    crun_refused(b, "runtime=0: must be 0.001..86400 seconds");
    b.rounds = 3;
    CHECK(crun_params_check(&b, err, sizeof(err)) == 0);

    return CHECK_DONE("test_param_table");
}
