/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_api.h — the plain C interface of device-initiated I/O (libnvmelab-cuda) for the bindings and C
 * callers: CUDA device discovery, the cuda-run engine, and the GPU-resident emulated controller behind
 * `gpu-emu://` URIs. No CUDA include here: callers never see a cudaError_t.
 *
 * Key functions:
 *   nvme_cuda_device_count()  number of usable CUDA devices, 0 with a reason when there is none
 *   nvme_cuda_device_info()   name, compute capability, SMs, driver and runtime versions
 *   nvme_cuda_run()           one cuda-run measurement: grid = devices x queues, one thread per command
 *   (parameters: engine/crun_params.h, the one table of cuda-run's run parameters)
 *
 * Errors: functions return 0 (or a count) or a negative errno. A CUDA runtime error becomes an errno
 * (-ENODEV no device/driver, -ENOMEM out of GPU memory, -EIO anything else) and its CUDA name and text
 * are copied into the caller's message buffer. NVMe status of a failed command is reported apart
 * (struct nvme_cuda_cmd_error: SCT/SC/DNR), never as an errno. A completion that misses its deadline
 * makes the run return -ETIMEDOUT, naming the device and queue; the GPU never hangs on a lost CQE.
 *
 * Targets: gpu-emu://?ndev=N&profile=null|pm1753|pm1753-p2p&scale=S&... (src/README.md,
 * "Device-initiated I/O", lists every key); pci://ADDR[,...]?driver=vfio-pci|uio_pci_generic (real
 * controllers: queues created with interrupts off, rings and payload in pinned host memory mapped into the
 * GPU, doorbells through cudaHostRegisterIoMemory; nvme/gpuq_ctrl.h) and emu://?mode=thread&... (the same
 * path against the CPU emulator). A GPU-memory payload on pci:// is refused (-ENOTSUP) with the reason.
 */
#ifndef NVME_CUDA_CUDA_API_H
#define NVME_CUDA_CUDA_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/crun_params.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NVME_CUDA_NAME_LEN    256u /* cudaDeviceProp::name */
#define NVME_CUDA_DESC_LEN    512u
#define NVME_CUDA_PROFILE_LEN 32u

/* Number of CUDA devices the runtime can use; 0 (and `why` says why) when there is none, the driver is
 * missing or too old. Never negative: "no GPU" is an answer, not an error. */
int nvme_cuda_device_count(char *why, size_t whylen);

struct nvme_cuda_devinfo {
    char name[NVME_CUDA_NAME_LEN];
    int cc_major, cc_minor;
    int sms;
    int max_threads_per_sm;
    uint64_t mem_bytes;
    int driver_version;  /* cudaDriverGetVersion, e.g. 12040 */
    int runtime_version; /* cudaRuntimeGetVersion */
    int pci_bus, pci_device, pci_domain;
};
int nvme_cuda_device_info(int dev, struct nvme_cuda_devinfo *out, char *err, size_t errlen);

/* The run parameters (struct nvme_cuda_run_params, enum nvme_cuda_rw) are the engine table of
 * engine/crun_params.h: defaults, bounds and the one check come from there. */
#define NVME_CUDA_DEFAULT_TIMEOUT_NS 2000000000ull /* 2 s: the table's default of `timeout` */

/* First failed command of a run (NVMe status kept apart from errno). */
struct nvme_cuda_cmd_error {
    bool valid;
    uint32_t dev, queue; /* 0-based device and queue of the device */
    uint32_t state;      /* enum nvme_gpuq_state */
    uint8_t sct, sc;
    bool dnr;
    uint64_t lba; /* verify / NVMe errors: the command's first LBA */
};

/* The GPU-resident emulator's own counters over the whole kernel, and its verdict on itself.
 *   busy_max/busy_mean  fraction of its SM cycles each serving warp spent in sweeps that moved anything
 *   headroom            1 / busy_max: how many times the present rate the busiest warp could serve
 *   fetch lag           SQEs found behind a doorbell per look (sq_wait_mean, sq_wait_max) and the share
 *                       of them left for a later sweep (sq_left_frac)
 *   fetch_late_ns_mean  SQ backlog in time: per fetched SQE, how much later its sweep fetched it than the model
 *                       allowed (after the look that first found it and the queue's and device's buckets)
 *   limited             the emulator, not the model, set the rate (timed models only: with profile=null the
 *                       emulator is the only rate there is): the delay it added to a command on average
 *                       (completion lateness late_ns_mean + fetch_late_ns_mean) is more than
 *                       NVME_CUDA_EMU_LATE_SHARE of the mean round, so of the rate. Decided by the engine once
 *                       the round time is known (cuda_run.cu). busy_max is kept as a counter, not a verdict: a
 *                       warp counts a whole sweep busy when any one of its queues moved, so it reads high at
 *                       loads the emulator serves on time. Records carry the verdict as `emulator_limited`;
 *                       chapters draw such runs marked. */
#define NVME_CUDA_EMU_LATE_SHARE 0.1
struct nvme_cuda_emu_stats {
    bool valid; /* gpu-emu:// runs only */
    uint64_t fetched, completed, errors, dropped, cq_full_held, idle_sweeps;
    double late_ns_mean; /* posted after the due time, mean over completions (0 on profile=null) */
    uint64_t late_ns_max;
    double sq_wait_mean, sq_left_frac, fetch_late_ns_mean;
    uint64_t sq_wait_max;
    uint32_t warps_serving;
    double busy_max, busy_mean, headroom;
    bool timed; /* the profile has a device model (due times); profile=null has none */
    bool limited;
};

/* The co-running compute kernel (corun > 0; engine/cuda/crun_corun.h): the same `launches` launches of an
 * FMA kernel timed alone (before any I/O kernel is on the GPU) and under the I/O load (launched once every
 * engine block completed a round). rate = flop / seconds; ratio = loaded rate / alone rate. overlap: the
 * loaded launches ended before the engine's kernel did, so all of them ran under the I/O load (else the
 * ratio understates the cost and the record is marked). */
struct nvme_cuda_corun_result {
    bool valid;
    uint32_t blocks, threads_per_block, launches;
    uint64_t iters;           /* FMA iterations per chain and thread */
    double flop_per_launch;   /* 2 x chains x iters x threads */
    double alone_s, loaded_s; /* cudaEvent time of the launches */
    bool resident;            /* every engine block had completed a round before the loaded launches */
    bool overlap;
};

struct nvme_cuda_run_result {
    double window_s;          /* host wall clock of the measured window */
    double kernel_s;          /* cudaEvent time of the whole cuda-run kernel (warm-up included) */
    uint64_t ios;             /* commands completed in the window */
    uint64_t ios_total;       /* commands completed by the kernel */
    double iops, bytes_per_s; /* over the window */
    uint64_t errors;          /* commands with a non-zero NVMe status */
    uint64_t verify_errors;   /* words that did not carry their stamp */
    double round_ns_mean;     /* mean time of one lock-step round (submit to all completions) */
    uint64_t round_ns_max;
    uint32_t threads;               /* CUDA threads of the engine = qdepth x nqueues x ndevs */
    uint32_t emu_blocks, emu_warps; /* the emulator's persistent grid */
    uint32_t ndevs;                 /* devices used */
    char profile[NVME_CUDA_PROFILE_LEN];
    double scale;
    bool ooo;                             /* the emulator completed out of order */
    char target_desc[NVME_CUDA_DESC_LEN]; /* "profile=pm1753 scale=1 ndev=16 blocks=8 ..." */
    struct nvme_cuda_devinfo gpu;
    struct nvme_cuda_cmd_error first_error;
    uint64_t buf_offset; /* bytes from the buffer's start to thread 0's data (page alignment) */
    uint64_t buf_stride; /* bytes between two threads' data */
    struct nvme_cuda_emu_stats emu;
    char payload[NVME_CUDA_PROFILE_LEN]; /* pci://: "host" (pinned host memory); gpu-emu: "gpu" */
    char poll[CRUN_POLL_TEXT_LEN];       /* the poll discipline in use: "spin" or "backoff:MAX_NS" */
    uint32_t occupancy_pct;              /* the limit the run was checked against */
    uint32_t occupancy_permille;         /* the share of the resident capacity the run's blocks needed */
    bool sq_readback;                    /* SQs in host memory: per-thread system fence + read-back of the
                                            last SQE before each doorbell */
    char fence[CRUN_FENCE_TEXT_LEN];     /* scope of the fences before each doorbell: "gpu" (rings and
                                            doorbells in GPU memory) or "sys" (host memory or a BAR) */
    uint64_t round_publish_ns;           /* the mapped round counters are written at most this often */
    uint64_t window_t0_ns, window_t1_ns; /* the measured window on the host's steady clock (CLOCK_MONOTONIC,
                                            within one host poll), for samplers outside the engine (NVML) */
    struct nvme_cuda_corun_result corun;
    uint64_t submitted, completed; /* self-check: commands submitted, completions matched (whole kernel) */
    uint64_t sampled;              /* commands stamped for the breakdown (whole kernel) */
    uint32_t nsamples;             /* of them, phases copied into params.samples */
    /* completion matching (the run's `match`, nvme/nvme_gpuq_match.h), summed over queues and threads */
    uint64_t match_looks, match_cq_bytes, match_stale, match_foreign;
    uint64_t misattributed; /* commands given a status other than the target's per-LBA rule predicts */
};

/* Bytes a caller-provided buffer needs for a run of this shape (page-alignment slack included), and the
 * stride between two threads' data (iosize rounded up to pages, plus a PRP list page above two pages). */
size_t nvme_cuda_buf_size(uint32_t iosize, uint32_t qdepth, uint32_t nqueues, uint32_t ndevs, uint64_t *stride);

/* Doorbells of a real controller for GPU threads: register the mmap()ed BAR0 of an NVMe function
 * (bar, len bytes, page aligned) with cudaHostRegister(cudaHostRegisterIoMemory | cudaHostRegisterMapped)
 * and return its device-side address in *dev_bar (doorbell y is dev_bar + nvme_db_sq_off(y, dstrd)).
 * Undo with nvme_cuda_unmap_bar(). Needs a driver that allows I/O memory registration (-ENOTSUP with the
 * CUDA text otherwise). The data path of pci:// also needs GPU DMA addresses (see nvme_cuda_run). */
int nvme_cuda_map_bar(void *bar, size_t len, volatile void **dev_bar, char *err, size_t errlen);
int nvme_cuda_unmap_bar(void *bar, char *err, size_t errlen);

/* Parse and check a gpu-emu:// target without a GPU (-EINVAL and a message naming the key); desc gets
 * "profile=... scale=... ndev=..." (see gemu_describe). */
int nvme_cuda_target_check(const char *target, uint32_t ndev_default, char *desc, size_t desclen, char *err,
                           size_t errlen);

/* One run. queue_rounds (may be NULL) receives the round count of each queue over the whole kernel,
 * device-major (dev * nqueues + q), nqueue_rounds entries at most. Every parameter is checked before any
 * GPU work (-EINVAL, message naming it). A run that cannot fit on the GPU with its emulator (the grid of
 * both kernels must be resident at once) is refused with -E2BIG. Ctrl-C: the caller sets *stop (may be
 * NULL) to end the run early; the result then covers what ran and the function returns -EINTR. */
int nvme_cuda_run(const struct nvme_cuda_run_params *p, struct nvme_cuda_run_result *r, uint64_t *queue_rounds,
                  size_t nqueue_rounds, volatile int *stop, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NVME_CUDA_CUDA_API_H */
