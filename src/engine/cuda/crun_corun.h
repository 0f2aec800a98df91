/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * crun_corun.h — the co-running compute kernel of the cuda-run engine (run parameter corun=, blocks per
 * SM): what polling costs the GPU, measured as the throughput a compute kernel keeps beside the I/O
 * kernels, without a profiler.
 *
 * Method: an FMA kernel (CRUN_CORUN_CHAINS independent chains per thread, registers only, one store per
 * thread) of corun x SMs blocks of CRUN_CORUN_THREADS threads. crun_corun_alone(), before any persistent
 * kernel is on the GPU: sizes one launch to about CRUN_CORUN_LAUNCH_S, then times `launches` launches
 * (together CRUN_CORUN_SHARE of warmup + runtime). crun_corun_loaded(), after the engine's launch: waits
 * until every engine block has completed a round (its blocks are resident and polling), then queues the
 * same launches on a stream of their own. crun_corun_finish(), after the engine's kernel ended: the
 * loaded time, and whether every launch ended before the engine did (`overlap`). The record's ratio is
 * loaded rate / alone rate (nvmelab.engines.gpu_corun).
 *
 * Key functions: crun_corun_alone(), crun_corun_loaded(), crun_corun_finish(), crun_corun_free().
 * Caveats: C++/CUDA, internal to libnvmelab-cuda. On gpu-emu:// the I/O load includes the emulator's
 * persistent kernel (a real controller needs none); the co-runner's blocks take what the persistent
 * kernels leave. GPU clocks may differ between the two phases (power, boost); the record says so.
 * Every wait has a deadline (gemu_wait_event); a co-runner that does not end is left allocated.
 */
#ifndef NVME_CUDA_CRUN_CORUN_H
#define NVME_CUDA_CRUN_CORUN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/cuda/cuda_api.h"

#define CRUN_CORUN_CHAINS       8u    /* independent FMA chains per thread */
#define CRUN_CORUN_LAUNCH_S     0.002 /* target time of one launch alone */
#define CRUN_CORUN_ITERS0       1024u /* iterations of the first (sizing) launch */
#define CRUN_CORUN_ITERS_MIN    64u
#define CRUN_CORUN_ITERS_MAX    (1u << 24)
#define CRUN_CORUN_MIN_LAUNCHES 4u
#define CRUN_CORUN_MAX_LAUNCHES 100000u
#define CRUN_CORUN_SLOW_MAX     64.0          /* the loaded phase may take this many times the alone one */
#define CRUN_CORUN_GRACE_NS     5000000000ull /* added to every co-runner deadline */

struct crun_corun {
    void *stream;                     /* cudaStream_t */
    void *a0, *a1, *l0, *l1;          /* cudaEvent_t: alone and loaded phases */
    float *out;                       /* one float per thread (keeps the chains live) */
    uint32_t blocks, iters, launches; /* blocks = corun x SMs */
    bool queued;                      /* loaded launches queued */
};

/* Size and time the co-runner alone (p->corun > 0, sms of the GPU); fills r except loaded_s/overlap. */
int crun_corun_alone(struct crun_corun *C, const struct nvme_cuda_run_params *p, int sms,
                     struct nvme_cuda_corun_result *r, char *err, size_t errlen);
/* Wait (at most timeout_ns) until every one of nblk round counters is non-zero, then queue the launches. */
int crun_corun_loaded(struct crun_corun *C, const volatile unsigned long long *rounds_host, uint32_t nblk,
                      uint64_t timeout_ns, struct nvme_cuda_corun_result *r, char *err, size_t errlen);
/* After the engine's kernel ended (io_start, io_end: the cudaEvent_t around it): loaded_s and overlap. */
int crun_corun_finish(struct crun_corun *C, void *io_start, void *io_end, struct nvme_cuda_corun_result *r, char *err,
                      size_t errlen);
/* Release everything (waits, with a deadline, for queued launches; leaves them allocated on timeout). */
void crun_corun_free(struct crun_corun *C, const struct nvme_cuda_corun_result *r);

#endif /* NVME_CUDA_CRUN_CORUN_H */
