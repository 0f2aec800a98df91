/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * crun_params.h — every run parameter of the cuda-run engine (device-initiated I/O), declared once, like
 * the perf engine's table (perf_params.h).
 *
 * Purpose: one X-macro table (name, type, field, bounds, default, doc) from which the C defaults
 * (crun_params_defaults), the one range check (crun_params_check, called by nvme_cuda_run before any GPU
 * work), the pybind11 keyword parsing of cuda_run, the list Python sees (nvmelab._native.CRUN_PARAMS,
 * nvmelab.engines.gpu.params()) and the `nvmelab perf cuda-run` options are derived. Plain C, no CUDA:
 * built in every configuration, so parameters are checked (and documented) on hosts without a GPU.
 *
 * X(name, type, field, lo, hi, def, doc)
 *   type   U32 | U64 | BOOL | SECONDS (given in seconds, stored as ns) | PATTERN (nvme_cuda_rw_parse names)
 *          | POLL ("spin" or "backoff:MAX_NS", stored as the largest backoff in ns, 0 = spin)
 *          | MATCH ("cid", "positional" or "scan": enum nvme_gpuq_match_mode, nvme/nvme_gpuq_match.h)
 *
 * Key functions: crun_params_defaults(), crun_params_check(), crun_param_info(i) / CRUN_NPARAMS,
 * nvme_cuda_rw_parse()/nvme_cuda_rw_name(), crun_poll_parse()/crun_poll_format(), crun_occupancy_ok().
 * Caveats: what needs a target (its LBA size, ndev, queue limits) or a GPU (resident blocks) is checked
 * by the engine after it opened them; the target URI, the payload place and a caller's buffer are not
 * table rows.
 */
#ifndef NVMELAB_ENGINE_CRUN_PARAMS_H
#define NVMELAB_ENGINE_CRUN_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUN_MAX_QDEPTH      1024u                /* one CUDA thread per command, one block per queue */
#define CRUN_MAX_NQUEUES     64u                  /* queues per device */
#define CRUN_MAX_NDEVS       64u                  /* devices per run */
#define CRUN_DEFAULT_NDEVS   16u                  /* gpu-emu:// without ndev: the published server's device count */
#define CRUN_MAX_IOSIZE      (2u * 1024u * 1024u) /* PRP1 + one PRP list page of 4 KiB pages */
#define CRUN_LBA_MIN         512u
#define CRUN_MAX_SECONDS     86400.0
#define CRUN_MAX_TIMEOUT_S   3600.0
#define CRUN_MIN_TIMEOUT_S   0.000001
#define CRUN_POLL_MAX_NS     1000000u /* backoff:MAX_NS at most 1 ms */
#define CRUN_POLL_DEFAULT_NS 2048u    /* backoff:2048, the former compile-time constant */
#define CRUN_OCCUPANCY_PCT   95u      /* refuse a run above this share of the resident capacity */
#define CRUN_POLL_TEXT_LEN   32u
#define CRUN_FENCE_TEXT_LEN  8u /* "gpu" or "sys": the scope of the doorbell fences */

/* the co-running compute kernel (corun=, engine/cuda/crun_corun.h) */
#define CRUN_CORUN_MAX_PER_SM 32u  /* blocks per SM at most */
#define CRUN_CORUN_THREADS    256u /* threads per block */
#define CRUN_CORUN_SHARE      0.4  /* its work: this share of warmup + runtime when run alone */
/* the per-I/O time breakdown (issue 24) */
#define CRUN_MAX_SAMPLE_EVERY     (1u << 24)           /* one command in at most 16 Mi */
#define CRUN_SAMPLE_EVERY_DEFAULT NVME_BD_SAMPLE_EVERY /* the rule the perf engine shares (nvme/bd_sample.h) */
#define CRUN_SAMPLE_CAP           (1u << 16)           /* sampled commands kept, all blocks together */

enum nvme_cuda_rw {
    NVME_CUDA_READ = 0, /* sequential */
    NVME_CUDA_RANDREAD = 1,
    NVME_CUDA_WRITE = 2, /* sequential */
    NVME_CUDA_RANDWRITE = 3,
};

#define CRUN_PARAMS(X)                                                                                                 \
    X(rw, PATTERN, rw, 0, 0, NVME_CUDA_RANDREAD, "access pattern: read, randread, write, randwrite")                   \
    X(iosize, U32, iosize, CRUN_LBA_MIN, CRUN_MAX_IOSIZE, 512, "bytes per I/O, a multiple of 512")                     \
    X(qdepth, U32, qdepth, 1, CRUN_MAX_QDEPTH, 128, "commands in flight per queue = CUDA threads per block")           \
    X(nqueues, U32, nqueues, 1, CRUN_MAX_NQUEUES, 1, "queues per device")                                              \
    X(ndevs, U32, ndevs, 0, CRUN_MAX_NDEVS, 0, "devices used (0: the target's, for gpu-emu:// its ndev or 16)")        \
    X(runtime, SECONDS, runtime_ns, 0.001, CRUN_MAX_SECONDS, 5, "measured seconds (ignored with rounds)")              \
    X(warmup, SECONDS, warmup_ns, 0, CRUN_MAX_SECONDS, 1, "seconds run before measuring (not counted)")                \
    X(rounds, U64, rounds, 0, UINT64_MAX, 0, "instead of a timed run: exactly this many rounds per queue")             \
    X(seed, U64, seed, 0, UINT64_MAX, 1, "random seed of the per-thread LCGs")                                         \
    X(lba_count, U64, lba_count, 0, UINT64_MAX, 0, "LBAs of the range on every device (0: the namespace)")             \
    X(timeout, SECONDS, timeout_ns, CRUN_MIN_TIMEOUT_S, CRUN_MAX_TIMEOUT_S, 2, "seconds a completion may take")        \
    X(verify, BOOL, verify, 0, 1, 0, "writes carry stamps; reads check them")                                          \
    X(readback, BOOL, readback, 0, 1, 0, "write patterns with rounds and verify: read the LBAs back")                  \
    X(gpu, U32, gpu, 0, 1023, 0, "CUDA device ordinal")                                                                \
    X(poll, POLL, poll_max_ns, 0, CRUN_POLL_MAX_NS, CRUN_POLL_DEFAULT_NS,                                              \
      "completion polls: spin (no sleep) or backoff:MAX_NS (sleep 32 ns doubling up to MAX_NS)")                       \
    X(occupancy, U32, occupancy_pct, 1, 100, CRUN_OCCUPANCY_PCT,                                                       \
      "refuse a run whose blocks need more than this % of the GPU's resident capacity")                                \
    X(corun, U32, corun, 0, CRUN_CORUN_MAX_PER_SM, 0,                                                                  \
      "co-running compute kernel, blocks per SM (0: none): its FMA rate alone and under the I/O load is recorded")     \
    X(sample_every, U32, sample_every, 0, CRUN_MAX_SAMPLE_EVERY, CRUN_SAMPLE_EVERY_DEFAULT,                            \
      "per-I/O time breakdown: %globaltimer stamps on one command in N (0: off; default nvme/bd_sample.h's rule)")     \
    X(match, MATCH, match, 0, NVME_GPUQ_MATCH_MODES - 1u, NVME_GPUQ_MATCH_CID,                                         \
      "completion matching: cid (by CID and generation), positional (by slot, as cuda-run), scan (per thread, as "     \
      "BaM)")

enum crun_param_type {
    CRUN_PT_U32,
    CRUN_PT_U64,
    CRUN_PT_BOOL,
    CRUN_PT_SECONDS,
    CRUN_PT_PATTERN,
    CRUN_PT_POLL,
    CRUN_PT_MATCH
};

struct crun_param_info {
    const char *name;
    enum crun_param_type type;
    double lo, hi, def;
    const char *doc;
};

#define CRUN_PARAM_COUNT_(name, type, field, lo, hi, def, doc) +1
#define CRUN_NPARAMS                                           (0 CRUN_PARAMS(CRUN_PARAM_COUNT_))

struct nvme_cuda_run_params {
    const char *target; /* gpu-emu://..., pci://..., emu://?mode=thread&... (not a table row) */
    /* table rows (CRUN_PARAMS) */
    enum nvme_cuda_rw rw;
    uint32_t iosize, qdepth, nqueues, ndevs;
    uint64_t runtime_ns, warmup_ns, rounds, seed, lba_count, timeout_ns;
    bool verify, readback;
    uint32_t gpu;
    uint32_t poll_max_ns;   /* 0 = spin */
    uint32_t occupancy_pct; /* 1..100 */
    uint32_t corun;         /* co-runner blocks per SM, 0 = none (engine/cuda/crun_corun.h) */
    uint32_t sample_every;  /* 0 = no breakdown */
    uint32_t match;         /* enum nvme_gpuq_match_mode */
    /* not table rows */
    void *buf; /* optional caller-owned GPU buffer for the I/O (e.g. a cupy array); NULL: the engine
                  allocates. At least nvme_cuda_buf_size() bytes; thread t's data is at
                  result.buf_offset + t * result.buf_stride (t = block * qdepth + thread). */
    size_t buf_len;
    const char *payload; /* pci:// and emu://: "host" (default, pinned host memory mapped into the GPU)
                            or "gpu" (refused: no importer of GPU memory's DMA addresses) */
    /* self-checks and breakdown (optional, caller-owned host memory): beats[b] the heartbeat of block b
     * (entries as queue_rounds; 0 = it never ran), samples the phases (NVME_GPUQ_NPHASES per sampled
     * command, nvme_gpuq.h) of up to sample_cap sampled commands */
    uint64_t *beats;
    uint32_t *samples;
    uint32_t sample_cap;
};

const struct crun_param_info *crun_param_info(size_t i);
int crun_param_find(const char *name);
/* Every table default (target, buf, payload: NULL). */
void crun_params_defaults(struct nvme_cuda_run_params *p);
/* Every value within its bounds and the rules between them (iosize a multiple of 512, readback needs a
 * write pattern, rounds and verify, corun needs a timed run): 0, or -EINVAL with "name=value: ..." in err. */
int crun_params_check(const struct nvme_cuda_run_params *p, char *err, size_t errlen);

/* "randread" -> enum: 0, or -EINVAL. */
int nvme_cuda_rw_parse(const char *name, enum nvme_cuda_rw *out);
const char *nvme_cuda_rw_name(enum nvme_cuda_rw rw);
/* "spin" -> 0; "backoff:N" -> N (1..CRUN_POLL_MAX_NS): 0 and *max_ns, or -EINVAL. */
int crun_poll_parse(const char *s, uint32_t *max_ns);
/* The inverse: "spin" or "backoff:N". */
void crun_poll_format(uint32_t max_ns, char *buf, size_t len);
/* The occupancy rule in integers: blocks `need_a` of a kernel with `per_sm_a` resident per SM plus `need_b`
 * of one with `per_sm_b` (need_b = 0: one kernel) on `sms` SMs fit when
 *   (need_a * per_sm_b + need_b * per_sm_a) * 100 <= pct * per_sm_a * per_sm_b * sms.
 * *used_permille receives the share of the capacity the run needs (x 1000, rounded up). */
bool crun_occupancy_ok(uint64_t need_a, uint64_t per_sm_a, uint64_t need_b, uint64_t per_sm_b, uint64_t sms,
                       uint32_t pct, uint32_t *used_permille);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_CRUN_PARAMS_H */
