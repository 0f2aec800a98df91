/* SPDX-License-Identifier: BSD-3-Clause */
/* standin_loop.c — one run of cuda-run's CPU stand-in (gpuq_standin_run, engine/gpuq_standin.h) on an emu://
 * target, for callgrind and for timed A/B rounds (tests/bench/bench_breakdown_cost.py).
 *
 * Usage: standin_loop URI QDEPTH RUNTIME_MS SAMPLE_EVERY
 * One queue pair per controller, 512-byte random reads, no warm-up, the per-I/O breakdown stamping one
 * command in SAMPLE_EVERY (0: off; -1: the records' rule, nvme_bd_sample_every(QDEPTH) of nvme/bd_sample.h)
 * into a store of GPUQ_STANDIN_SAMPLE_CAP; prints "ios=N rounds=R window_s=W iops=X sampled=S sample_every=E".
 * Two runs of different lengths under callgrind, differenced, give the instructions per I/O of the steady state
 * (the set-up cancels). */
#include <stdio.h>
#include <stdlib.h>

#include "engine/gpuq_standin.h"
#include "nvme/nvme.h"
#include "nvme/nvme_gpuq.h"

#define IOSIZE   512u
#define MS_PER_S 1000.0

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s URI QDEPTH RUNTIME_MS SAMPLE_EVERY\n", argv[0]);
        return 2;
    }
    char err[NVME_ERRLEN] = "";
    struct nvme_target *t;
    if (nvme_target_open(argv[1], &t, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct gpuq_standin_cfg cfg = {0};
    cfg.nqueues = 1;
    cfg.qdepth = (uint32_t)strtoul(argv[2], NULL, 0);
    cfg.iosize = IOSIZE;
    cfg.runtime_s = strtod(argv[3], NULL) / MS_PER_S;
    cfg.seed = 1;
    const long every = strtol(argv[4], NULL, 0);
    cfg.sample_every = every < 0 ? nvme_bd_sample_every(cfg.qdepth) : (uint32_t)every;
    uint32_t *samples = NULL;
    if (cfg.sample_every) {
        cfg.sample_cap = GPUQ_STANDIN_SAMPLE_CAP;
        samples = calloc((size_t)GPUQ_STANDIN_SAMPLE_CAP * NVME_GPUQ_NPHASES, sizeof(*samples));
        if (!samples) {
            fprintf(stderr, "out of memory for the samples\n");
            nvme_target_close(t);
            return 1;
        }
        cfg.samples = samples;
    }
    struct gpuq_standin_result res;
    const int rc = gpuq_standin_run(t, &cfg, &res, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "gpuq_standin_run: %s\n", err);
    else
        printf("ios=%llu rounds=%llu window_s=%.6f iops=%.0f sampled=%llu sample_every=%u\n",
               (unsigned long long)res.ios, (unsigned long long)res.rounds, res.window_s,
               res.window_s > 0 ? (double)res.ios / res.window_s : 0.0, (unsigned long long)res.sampled,
               cfg.sample_every);
    free(samples);
    nvme_target_close(t);
    return rc < 0 ? 1 : 0;
}
