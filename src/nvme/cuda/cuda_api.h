/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_api.h — the plain C interface of device-initiated I/O (libnvme_cuda) for the bindings and C
 * callers: CUDA device discovery, the cuda-run engine, and the GPU-resident emulated controller behind
 * `gpu-emu://` URIs. No CUDA include here: callers never see a cudaError_t.
 *
 * Key functions:
 *   nvme_cuda_device_count()  number of usable CUDA devices, 0 with a reason when there is none
 *   nvme_cuda_device_info()   name, compute capability, SMs, driver and runtime versions
 *   nvme_cuda_run()           one cuda-run measurement: grid = devices x queues, one thread per command
 *   nvme_cuda_rw_parse()      "randread" -> enum
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

enum nvme_cuda_rw {
    NVME_CUDA_READ = 0, /* sequential */
    NVME_CUDA_RANDREAD = 1,
    NVME_CUDA_WRITE = 2, /* sequential */
    NVME_CUDA_RANDWRITE = 3,
};
/* 0 and *out, or -EINVAL for an unknown name. */
int nvme_cuda_rw_parse(const char *name, enum nvme_cuda_rw *out);

struct nvme_cuda_run_params {
    const char *target; /* gpu-emu://... */
    enum nvme_cuda_rw rw;
    uint32_t iosize;     /* bytes, multiple of the LBA size, <= NVME_GPUQ_MAX_IO */
    uint32_t qdepth;     /* commands in flight per queue = CUDA threads per block, 1..1024 */
    uint32_t nqueues;    /* queues per device */
    uint32_t ndevs;      /* devices used (first N of the target); 0 = all */
    double runtime_s;    /* measured window; ignored when rounds > 0 */
    double warmup_s;     /* run before the window opens */
    uint64_t rounds;     /* > 0: every queue does exactly this many rounds (tests), no timing window */
    uint64_t seed;       /* per-thread LCGs are seeded from this */
    uint64_t lba_count;  /* LBAs of the range on every device (0: the whole namespace) */
    uint64_t timeout_ns; /* per-completion deadline (0: NVME_CUDA_DEFAULT_TIMEOUT_NS) */
    bool verify;         /* writes carry stamps; reads check them */
    bool readback;       /* write patterns with rounds > 0: then read the same LBAs back (verify) */
    int gpu;             /* CUDA device ordinal */
    void *buf;           /* optional caller-owned GPU buffer for the I/O (e.g. a cupy array); NULL: the
                            engine allocates. At least nvme_cuda_buf_size() bytes; thread t's data is at
                            result.buf_offset + t * result.buf_stride (t = block * qdepth + thread). */
    size_t buf_len;
    const char *payload; /* pci:// and emu://: "host" (default, pinned host memory mapped into the GPU)
                            or "gpu" (refused: no importer of GPU memory's DMA addresses, see cuda_pci.cu) */
};
#define NVME_CUDA_DEFAULT_TIMEOUT_NS 2000000000ull /* 2 s */

/* First failed command of a run (NVMe status kept apart from errno). */
struct nvme_cuda_cmd_error {
    bool valid;
    uint32_t dev, queue; /* 0-based device and queue of the device */
    uint32_t state;      /* enum nvme_gpuq_state */
    uint8_t sct, sc;
    bool dnr;
    uint64_t lba; /* verify / NVMe errors: the command's first LBA */
};

/* The GPU-resident emulator's own counters over the whole kernel: a run whose completions were posted
 * late (late_ns_mean well above 0 on a timed profile) or with CQ-full holds was limited by the emulator,
 * not by the device model. */
struct nvme_cuda_emu_stats {
    bool valid; /* gpu-emu:// runs only */
    uint64_t fetched, completed, errors, dropped, cq_full_held, idle_sweeps;
    double late_ns_mean; /* posted after the due time, mean over completions (0 on profile=null) */
    uint64_t late_ns_max;
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
