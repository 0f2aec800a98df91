/* SPDX-License-Identifier: BSD-3-Clause */
/* engine_loop.c — one perf-engine run (perf_run, one worker thread) on an emu:// target, for callgrind.
 *
 * Usage: engine_loop URI QDEPTH RUNTIME_MS LAT [BD]
 * Runs the closed-loop engine the way `nvmelab perf run` does (512-byte randread, one thread, every
 * device of the target, latency sampling LAT=0/1, the per-I/O breakdown BD=0/1 (default 1: perf_config.bd),
 * no warm-up) and prints "ios=N ... iops=X ..." and the breakdown's sample count and phase medians (bd_*);
 * bench_instructions.py and bench_breakdown_cost.py
 * runs it under callgrind twice with different runtimes and divides the difference in instructions
 * (by the engine, the driver and the emulator: see callgrind_engine_split in _native_bench.py) by the
 * difference in I/Os, so the setup and teardown of the run cancel out. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/backend.h"
#include "engine/perf.h"
#include "engine/perf_params.h"

#define IOSIZE    512u
#define NS_PER_MS 1000000ull

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s URI QDEPTH RUNTIME_MS LAT [BD]\n", argv[0]);
        return 2;
    }
    char err[PERF_ERRLEN] = "";
    struct perf_target *t;
    if (perf_target_open(argv[1], NULL, &t, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct perf_config cfg;
    perf_params_defaults(&cfg);
    cfg.pattern = PERF_PAT_RANDREAD;
    cfg.iosize = IOSIZE;
    cfg.qdepth = (uint32_t)strtoul(argv[2], NULL, 0);
    cfg.nthreads = 1;
    cfg.nqueues = 1;
    cfg.runtime_ns = strtoull(argv[3], NULL, 0) * NS_PER_MS;
    cfg.warmup_ns = 0;
    cfg.lat = atoi(argv[4]) != 0;
    cfg.bd = argc == 6 ? atoi(argv[5]) != 0 : 1;
    struct perf_result *res = calloc(1, sizeof(*res));
    if (!res || perf_run(t, &cfg, res, err, sizeof(err))) {
        fprintf(stderr, "perf_run: %s\n", err);
        return 1;
    }
    printf("ios=%llu lat_samples=%llu iops=%.0f cpu_s=%.6f window_s=%.6f", (unsigned long long)res->ios,
           (unsigned long long)res->lat.count, res->iops, res->cpu_s, res->window_s);
    static const char *const phase[PERF_BD_NPHASES] = {"submit", "doorbell", "device", "poll", "release"};
    printf(" bd_samples=%llu bd_every=%u", (unsigned long long)res->bd[PERF_BD_SUBMIT].count, res->bd_sample_every);
    for (int p = 0; p < PERF_BD_NPHASES; p++) /* the per-I/O breakdown's medians (perf.h) */
        printf(" bd_%s_p50=%llu", phase[p], (unsigned long long)stats_hist_percentile(&res->bd[p], 50.0));
    printf("\n");
    free(res);
    perf_target_close(t);
    return 0;
}
