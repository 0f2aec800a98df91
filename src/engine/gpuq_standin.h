/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpuq_standin.h — the CPU stand-in of the cuda-run engine, for a host without a GPU: the GPU's lock-step
 * rounds (nvme/gpuq_ctrl.h nvme_gpuq_cpu_round: the SQE, PRP and CID code the CUDA kernel compiles, from
 * nvme/nvme_gpuq.h) driven by one CPU thread over `nqueues` queue pairs of every controller of a
 * target, random LBAs, for a fixed time. It lets the GPU lease plan be rehearsed where there is no GPU
 * (make rehearse-gpu-host): same study points, same records, same isolation; NOT a measurement of a GPU.
 *
 * Key function: gpuq_standin_run() — warm-up, then `runtime_s` of rounds; fills the result: counts for
 * the self-checks (commands submitted and completions matched, a heartbeat per pair: rounds done from the
 * start, warm-up included) and, with sample_every, the phases of the per-I/O time breakdown (nvme_gpuq.h).
 * With `rounds`, exactly that many rounds per queue pair instead of a timed window.
 *
 * Matching (the cuda_match study): `match` picks how completions reach commands (nvme/nvme_gpuq_match.h);
 * the result sums the match counters and counts `misattributed` commands: those whose delivered status is
 * not the one the target's per-LBA error rule (cfg.inj, the URI's err_every/err_status, cmd_rules.h
 * nvme_cr_lba_err) gives their LBAs. `unordered`, `no_fence`, `no_readback` are the missing-fence model of
 * nvme_gpuq_cpu_round_opt (gpuq_ctrl.h).
 *
 * Caveats: one thread drives every queue in turn and a round ends before the next one starts, so the
 * rate is this CPU's, never the device model's. Reads only (writes are refused: the stand-in has no use
 * for them), into one shared host buffer of qdepth x iosize (GPUQ_STANDIN_MAX_BUF_BYTES at most); PRP
 * lists for commands of more than two pages live in a second DMA buffer, one page per command.
 * Errors: negative errno with err set (-EINVAL a bad parameter or a queue deeper than the controller
 * allows, -ENOMEM, -ETIMEDOUT/-EPROTO from a round: the pair is then destroyed with timed_out set).
 */
#ifndef NVMELAB_ENGINE_GPUQ_STANDIN_H
#define NVMELAB_ENGINE_GPUQ_STANDIN_H

#include <stddef.h>
#include <stdint.h>

#include "nvme/emu/cmd_rules.h"
#include "nvme/nvme.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPUQ_STANDIN_MAX_QUEUES    64u                    /* queue pairs per controller */
#define GPUQ_STANDIN_MAX_QDEPTH    1024u                  /* commands per round (as cuda-run) */
#define GPUQ_STANDIN_MAX_BUF_BYTES (64ull << 20)          /* qdepth x iosize */
#define GPUQ_STANDIN_TIMEOUT_NS    (2ull * 1000000000ull) /* deadline of every completion */
#define GPUQ_STANDIN_SAMPLE_CAP    (1u << 16)             /* sampled commands kept for the breakdown */

struct gpuq_standin_cfg {
    uint32_t nqueues;         /* pairs per controller, 1..GPUQ_STANDIN_MAX_QUEUES */
    uint32_t qdepth;          /* commands per round, 1..GPUQ_STANDIN_MAX_QDEPTH */
    uint32_t iosize;          /* bytes per command, a multiple of the LBA size */
    double runtime_s;         /* measured window */
    double warmup_s;          /* rounds before the window, not counted */
    uint64_t seed;            /* LBA generator */
    const volatile int *stop; /* optional: set non-zero to end early (Ctrl-C) */
    uint64_t timeout_ns;      /* deadline of every completion; 0 = GPUQ_STANDIN_TIMEOUT_NS */
    /* the per-I/O time breakdown: stamp one command in sample_every (0: off); the phases of up to
     * sample_cap sampled commands of the window go to samples (NVME_GPUQ_NPHASES per command) */
    uint32_t sample_every;
    uint32_t sample_cap;
    uint32_t *samples;
    uint64_t *beats; /* optional, one per pair (nctrl x nqueues, row-major): the pair's heartbeat */
    /* fault injection (the "kernel that never ran" test): pair idle_pair - 1 is never driven; 0 = none */
    uint32_t idle_pair;
    uint64_t rounds;    /* 0: timed; else exactly this many rounds per pair (warm-up ignored) */
    int match;          /* enum nvme_gpuq_match_mode */
    uint32_t unordered; /* the missing-fence model (gpuq_ctrl.h nvme_gpuq_round_opt) */
    int no_fence, no_readback;
    struct nvme_cr_inj inj; /* the target's per-LBA error rule: each command's expected status */
};

struct gpuq_standin_result {
    uint64_t ios;          /* commands completed in the window */
    uint64_t rounds;       /* rounds in the window */
    uint64_t errors;       /* commands with a non-zero NVMe status in the window */
    uint16_t first_status; /* the first such status (SCT/SC without phase), 0 when none */
    double window_s;       /* length of the window */
    uint64_t submitted;    /* commands submitted in the window (self-check: == completed) */
    uint64_t completed;    /* CQEs matched to their command in the window, counted where they are matched */
    uint32_t npairs;       /* queue pairs driven (entries of cfg->beats) */
    uint32_t nsamples;     /* sampled commands whose phases are in cfg->samples */
    uint64_t sampled;      /* sampled commands in the window (nsamples <= sampled: the store is capped) */
    uint64_t round_ns_sum; /* time of the pairs' turns in the window, each a round and its host work (Little's
                              law: qdepth commands in flight during a turn) */
    /* matching (counted in the window, summed over pairs; nvme_gpuq_match_ctr) */
    uint64_t looks, cq_bytes, stale, foreign;
    uint64_t misattributed;   /* commands given a status other than their expected one */
    uint64_t expected_errors; /* commands whose LBAs the error rule fails */
};

int gpuq_standin_run(struct nvme_target *t, const struct gpuq_standin_cfg *cfg, struct gpuq_standin_result *res,
                     char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_GPUQ_STANDIN_H */
