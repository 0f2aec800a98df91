/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * crun.h — internals of the cuda-run engine: the queue table and parameters the kernel reads (crun_kernel.cu),
 * the launch, the host-side wait with a watchdog, turning per-queue state into the run's result and error
 * message, and (C++ only) the target interface of the one host driver (cuda_run.cu): struct crun_target with
 * its gpu-emu:// and controller (pci://, emu://?mode=thread) halves in crun_target.cu, as two
 * struct crun_target_ops.
 *
 * Key functions: crun_preload() (loads the kernel's module now and reports its occupancy), crun_launch(),
 * crun_collect() (fills nvme_cuda_run_result, checks that every queue made progress, and names the first
 * failed queue), crun_samples() (self-check counts, heartbeats, the breakdown's samples),
 * crun_launch_blocking_refused(), crun_target_open/_grid/_payload/_queues/_start/_stop/_result/_close().
 *
 * Caveats: C++/CUDA only; internal to libnvmelab-cuda. Pointers in the structs are device pointers (GPU
 * memory, or host memory mapped into the GPU, or a BAR registered with cudaHostRegisterIoMemory).
 */
#ifndef NVME_CUDA_CRUN_H
#define NVME_CUDA_CRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/cuda/cuda_api.h"
#include "nvme/emu/cmd_rules.h"
#include "nvme/spec.h"

// status + seen flag per command, and the poller's two breakdown stamps (ns after the round's start)
#define CRUN_SHARED_PER_CMD (sizeof(uint16_t) + sizeof(uint32_t) + 2u * sizeof(uint32_t))
#define CRUN_BEAT_ENTERED   1ull          // crun_queue.beat: the block started
#define CRUN_BEAT_LEFT      2ull          // and it reached its end
#define CRUN_STOP_GRACE_NS  5000000000ull // after the stop flag, the kernel ends within timeout + this
#define CRUN_STOP_CHECK_NS                                                                                             \
    100000ull // thread 0 reads the mapped stop flag (and writes its round count) at most every 100 us

struct crun_queue {
    struct nvme_sqe *sq;
    const struct nvme_cqe *cq;
    volatile uint32_t *sq_db, *cq_db;
    uint32_t entries;
    uint32_t dev, qidx; // device, queue index within the device
    uint16_t qid;
    uint16_t pad;
    int state; // enum nvme_gpuq_state, first failure wins (atomicCAS)
    int err_valid;
    uint32_t err_state;
    uint16_t err_status; // CQE status without phase
    uint16_t pad2;
    uint64_t err_lba;
    unsigned long long errors, verify_errors;
    unsigned long long round_ns_sum, round_ns_max, rounds;
    // self-checks (issue 24): commands submitted (thread 0, per doorbell) and completions matched (poller
    // lanes), the heartbeat (CRUN_BEAT_*, written by the block itself), sampled commands of the breakdown
    unsigned long long submitted, completed, beat, sampled;
    unsigned long long looks, cq_bytes, stale, foreign; // match counters (nvme_gpuq_match.h), summed per queue
    unsigned long long misattributed;                   // commands given a status other than their expected one
};

struct crun_params {
    struct crun_queue *queues;
    volatile unsigned long long *rounds; // mapped host memory, one per queue: rounds completed, written by thread 0
                                         // at the stop-check cadence (CRUN_STOP_CHECK_NS) and when the block ends
    const volatile int *stop;            // mapped host memory
    uint8_t *buf;                        // per-thread buffers (+ PRP list page), GPU memory
    uint64_t stride;                     // bytes per thread
    uint64_t span;                       // data bytes per thread (iosize rounded up to pages)
    const uint64_t *lut;                 // DMA address of every NVMe page of buf
    uint64_t lut_pages;
    uint32_t qdepth, nqueues, iosize, nlb, lba_size;
    int random, write, verify, readback;
    uint64_t seed, nslots, lba0, max_rounds, timeout_ns;
    int scope;            // enum nvme_cuda_scope: who writes the CQs (acquire scope)
    int sq_host;          // SQs in host memory: per-thread system fence, read-back of the last SQE before the doorbell
    int fence_sys;        // the doorbell fences at system scope (rings or doorbells outside GPU memory), else GPU
                          // scope (gpu-emu://: rings, doorbells and the controller all in this GPU's memory)
    uint32_t poll_max_ns; // the poll discipline: 0 = spin, else the largest backoff sleep
    // the per-I/O time breakdown: one command in sample_every (0: off); each block keeps the phases of up to
    // sample_cap of them in samples + block * sample_cap * NVME_GPUQ_NPHASES (GPU memory)
    uint32_t sample_every, sample_cap;
    uint32_t *samples;
    uint64_t sample_from_ns; // no sample before this long after the block started (the warm-up)
    uint32_t match;          // enum nvme_gpuq_match_mode
    struct nvme_cr_inj inj;  // the target's per-LBA error rule (err_every/err_status): expected statuses
};

/* cudaFuncGetAttributes on the kernel (forces its module to load under lazy loading, before any
 * persistent kernel runs) and its resident blocks per SM for qdepth threads. */
int crun_preload(uint32_t qdepth, int *blocks_per_sm, char *err, size_t errlen);
/* Launch one block per queue (nblk), qdepth threads each, on stream. */
int crun_launch(const struct crun_params *P, uint32_t nblk, void *stream, char *err, size_t errlen);
/* -ENOTSUP with a message when CUDA_LAUNCH_BLOCKING=1: a launch would block the host until the kernel
 * ends, and the kernels here end only when the host tells them to. */
int crun_launch_blocking_refused(char *err, size_t errlen);
/* After the kernel ended: per-queue rounds (and into queue_rounds), counters, first error, the progress
 * check, and the run's return code with one message naming the device and queue. */
int crun_collect(const struct crun_params *P, struct crun_queue *hq, uint32_t nblk,
                 const struct nvme_cuda_run_params *p, struct nvme_cuda_run_result *r, uint64_t *queue_rounds,
                 size_t nqueue_rounds, bool stopped_by_user, char *err, size_t errlen);

/* After the kernel ended: the self-checks' counts (submitted, completed, sampled) into r, the heartbeats into
 * p->beats (when given), and the phases of the sampled commands (samples: the blocks' stores, as the kernel
 * left them) into p->samples, at most p->sample_cap. */
void crun_samples(const struct crun_params *P, const struct crun_queue *hq, uint32_t nblk, const uint32_t *samples,
                  const struct nvme_cuda_run_params *p, struct nvme_cuda_run_result *r);

/* The measured window (timed runs): round counts at its edges and its length. */
struct crun_window {
    uint64_t r0, r1;
    double window_s;
};
/* Host side of a launched kernel: warm-up and window (or, with rounds, until the kernel ends or stalls
 * for a completion timeout), then the stop flag and a watchdog wait on end_event (a cudaEvent_t recorded
 * after the kernel). -ETIMEDOUT: the kernel is still running; free nothing it may touch. */
int crun_drive(const struct crun_params *P, const struct nvme_cuda_run_params *p, uint32_t nblk,
               const volatile unsigned long long *rounds_host, volatile int *stop_host, volatile int *stop,
               void *end_event, struct crun_window *w, char *err, size_t errlen);
/* window_s, ios, iops, bytes_per_s of the result (after crun_collect). */
void crun_window_result(const struct crun_window *w, const struct nvme_cuda_run_params *p,
                        struct nvme_cuda_run_result *r);

#ifdef __cplusplus
#include <vector>

#include "nvme/emu/gpu/gpu_emu.h"

enum crun_target_kind { CRUN_TGT_GPU_EMU, CRUN_TGT_PCI, CRUN_TGT_CPU_EMU };

struct crun_target;
/* What differs between cuda-run's targets: one table per kind (gpu-emu://; the controllers the driver opens),
 * chosen once by crun_target_open from the URI's scheme row (nvme/scheme.h). The crun_target_* functions
 * below call through it; a NULL grid or start has nothing to do. */
struct crun_target_ops {
    int (*precheck)(const struct nvme_cuda_run_params *p, enum crun_target_kind kind, char *err, size_t errlen);
    int (*open)(struct crun_target *T, const struct nvme_cuda_run_params *p, char *err, size_t errlen);
    int (*grid)(struct crun_target *T, uint32_t *blocks, int *per_sm, char *err, size_t errlen);
    int (*payload)(struct crun_target *T, const struct nvme_cuda_run_params *p, uint64_t total, uint8_t **buf,
                   std::vector<uint64_t> &lut, struct nvme_cuda_run_result *r, char *err, size_t errlen);
    int (*queues)(struct crun_target *T, const struct nvme_cuda_run_params *p, std::vector<struct crun_queue> &hq,
                  char *err, size_t errlen);
    int (*start)(struct crun_target *T, char *err, size_t errlen);
    int (*result)(struct crun_target *T, const struct nvme_cuda_run_params *p, struct nvme_cuda_run_result *r,
                  char *err, size_t errlen);
    int (*close)(struct crun_target *T, bool timed_out, char *err, size_t errlen);
};

/* One target of a run, whatever its kind; every pointer is released by crun_target_close. */
struct crun_target {
    enum crun_target_kind kind = CRUN_TGT_GPU_EMU;
    const struct crun_target_ops *ops = nullptr; // NULL until crun_target_open knows the kind
    uint32_t ndevs = 0, lba_size = 0;
    uint64_t ns_lbas = 0; // LBAs of the smallest namespace used
    int scope = 0;        // enum nvme_cuda_scope of the CQ polls
    bool sq_host = false; // SQs in host memory
    bool hung = false;    // a kernel did not end: free nothing it may touch
    // gpu-emu://
    struct gemu *emu = nullptr;
    void *s_emu = nullptr; // cudaStream_t of the persistent emulator
    bool emu_running = false;
    struct nvme_sqe *sq = nullptr;
    struct nvme_cqe *cq = nullptr;
    uint8_t *raw = nullptr; // engine-allocated I/O buffers
    // pci://, emu://?mode=thread
    const char *payload = "gpu";
    struct nvme_target *t = nullptr;
    std::vector<struct nvme_gpuq_pair *> pairs; // one per block, device-major
    std::vector<void *> registered;             // host ranges registered with CUDA (unregistered in reverse)
    std::vector<void *> bars;                   // BARs mapped for the GPU
    struct nvme_dma *dma = nullptr;             // the payload
};

/* The checks that need no GPU (the gpu-emu:// URI, the payload place, mode=thread), run before the GPU is
 * looked for, so a bad target is named on any host. */
int crun_target_precheck(const struct nvme_cuda_run_params *p, char *err, size_t errlen);
/* Open and check the target against the parameters (ndevs, LBA size, queue limits, payload place). */
int crun_target_open(crun_target *T, const struct nvme_cuda_run_params *p, char *err, size_t errlen);
/* The grid that must be resident beside the engine's (the emulator's; 0 blocks for controllers). */
int crun_target_grid(crun_target *T, uint32_t *blocks, int *per_sm, char *err, size_t errlen);
/* I/O buffers of `total` bytes (a caller's GPU buffer, or allocated), mapped for the GPU; *buf its device
 * address, lut the DMA address of each page. gpu-emu: registered as a DMA window of the emulator. */
int crun_target_payload(crun_target *T, const struct nvme_cuda_run_params *p, uint64_t total, uint8_t **buf,
                        std::vector<uint64_t> &lut, struct nvme_cuda_run_result *r, char *err, size_t errlen);
/* One queue pair per entry of hq (device-major), with rings and doorbells the GPU can reach. */
int crun_target_queues(crun_target *T, const struct nvme_cuda_run_params *p, std::vector<struct crun_queue> &hq,
                       char *err, size_t errlen);
/* Before the engine's kernel: the emulator's persistent kernel (gpu-emu). */
int crun_target_start(crun_target *T, char *err, size_t errlen);
/* After the engine's kernel ended: the emulator asked to end, with a watchdog (-ETIMEDOUT: hung). */
int crun_target_stop(crun_target *T, char *err, size_t errlen);
/* profile, scale, payload, description and (gpu-emu) the emulator's counters and verdict into r. */
int crun_target_result(crun_target *T, const struct nvme_cuda_run_params *p, struct nvme_cuda_run_result *r, char *err,
                       size_t errlen);
/* Teardown in the only safe order (see crun_target.cu); timed_out: commands may still be in flight. */
int crun_target_close(crun_target *T, bool timed_out, char *err, size_t errlen);
#endif

#endif /* NVME_CUDA_CRUN_H */
