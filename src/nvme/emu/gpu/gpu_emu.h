/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_emu.h — the GPU-resident emulated NVMe controller behind `gpu-emu://` (libnvmelab-gpu-emu; a public header:
 * the engines use it, NVMELAB_DRIVER_PUBLIC_HEADERS).
 *
 * Purpose: emulated controllers whose queues, doorbells, namespaces and device model all live in GPU
 * memory, served by a persistent kernel (a few blocks, one warp per queue at a time), so device-initiated
 * I/O can be exercised and measured on any CUDA GPU without NVMe hardware.
 *
 * Key functions (host side, C++ linkage, called from the cuda-run engine, engine/cuda/crun_target.cu):
 *   gemu_open()         parse + validate the URI, allocate namespaces, doorbells and queue tables
 *   gemu_add_queue()    register an I/O SQ/CQ pair living in GPU memory (instead of admin Create SQ/CQ)
 *   gemu_dma_allow()    register a DMA window (GPU memory the controller may touch: queues, buffers); the
 *                       IOMMU rule of cmd_rules.h: a PRP outside every window -> Data Transfer Error and no
 *                       memory touched, a queue outside -> refused; no window -> no DMA at all
 *   gemu_start()/gemu_stop()  launch the persistent kernel on a stream / ask it to finish and wait
 *   gemu_close()        free everything gemu_open() and gemu_add_queue() allocated, in reverse
 *
 * What is modelled: doorbell words (one 32-bit SQ tail and CQ head word per queue, device memory), SQE
 * fetch, NVM Read/Write/Flush with the CPU emulator's validation and status codes (Invalid Opcode, Invalid
 * Field for FUSE/PSDT/MDTS, Invalid Namespace, LBA Out of Range, Invalid PRP Offset, Data Transfer Error),
 * PRP lists within one page, CQEs with the phase tag, CQ-full back-pressure, and the device model of
 * profiles.c (per-queue, per-device IOPS and bandwidth caps, shared link cap, fixed latency) as GCRA
 * buckets reserved a warp batch at a time. Not modelled: the admin queue and registers (queues are
 * registered from the host), lognormal latency (lat_sigma is refused), chained PRP lists.
 * Namespaces start zeroed, or with fill=stamp holding nvme_gpuq_stamp(dev, lba, word) everywhere (so reads
 * can be verified and checksummed without a write pass).
 * Fault injection for tests: `drop=N` never completes the N-th command of every queue; `ooo=1` posts every
 * batch of due completions in reverse order; `ooo_win=W` reverses them within windows of W; `err_every=M`
 * fails every Read/Write that touches an LBA that is a multiple of M with `err_status` (a spec name; the
 * same keys and rules as emu://, model_keys.h and cmd_rules.h).
 * Errors: negative errno; URI problems also fill err with one line naming key and value.
 * Caveats: included from the .cu files here and of engine/cuda/ (plain C structs); the structs are shared by host
 * and kernel code, so they hold plain pointers into GPU (or mapped host) memory.
 */
#ifndef NVME_CUDA_GPU_EMU_H
#define NVME_CUDA_GPU_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/emu_keys.h"
#include "nvme/spec.h"

#define GEMU_MAX_DEVS       64u
#define GEMU_MAX_QUEUES_DEV 64u
#define GEMU_FP_SHIFT       16u /* fixed-point fraction bits of the model's ns */
#define GEMU_WARP           32u
#define GEMU_DEFAULT_BLOCKS 8u
#define GEMU_DEFAULT_WARPS  8u /* warps per block */
#define GEMU_MAX_WARPS_BLOCK                                                                                           \
    16u                            /* 512 threads: gemu_kernel's __launch_bounds__ (its ~120 registers                 \
                                      per thread fit 16 warps; 32 would force spills) */
#define GEMU_DEFAULT_NS_MIB   64u  /* namespace size per device */
#define GEMU_STOP_CHECK_ITERS 256u /* polls of the (PCIe-mapped) stop flag are this sparse */
#define GEMU_MIB              (1024u * 1024u)
#define GEMU_MAX_WINDOWS      8u /* DMA windows the host may register (queues, buffers) */

/* Device-model constants as the kernel uses them (fixed point ns, GEMU_FP_SHIFT bits). */
struct gemu_model {
    uint64_t lat_ns;       /* fixed latency added after the caps */
    uint64_t queue_gap_fp; /* ns between commands of one SQ (0 = no cap) */
    uint64_t dev_gap_fp;   /* ns between commands of one device */
    uint64_t dev_byte_fp;  /* ns per payload byte of one device */
    uint64_t link_byte_fp; /* ns per payload byte, shared by all devices */
    int timed;
};

/* A command fetched and not yet completed. */
struct gemu_pend {
    uint64_t due; /* ns since the emulator's epoch */
    uint16_t cid;
    uint16_t status; /* without phase */
    uint32_t pad;
};

/* One SQ/CQ pair (qid >= 1, each SQ with its own CQ). Fields after `state` belong to the serving warp. */
struct gemu_queue {
    const struct nvme_sqe *sq;
    struct nvme_cqe *cq;
    volatile uint32_t *sq_db; /* SQ tail doorbell word */
    volatile uint32_t *cq_db; /* CQ head doorbell word */
    struct gemu_pend *pend;   /* ring of `entries` */
    uint32_t entries;
    uint32_t dev;
    uint16_t qid;
    uint16_t pad0;
    uint32_t pad1;
    /* state */
    uint64_t sq_head;   /* running count of fetched SQEs */
    uint64_t cq_tail;   /* running count of posted CQEs */
    uint64_t pend_head; /* running count of retired pending entries */
    uint64_t pend_tail; /* running count of pending entries pushed */
    uint64_t q_tat;     /* per-queue GCRA */
    /* counters */
    uint64_t fetched, completed, errors, dropped, cq_full_held;
    uint64_t late_ns_sum, late_ns_max; /* completion posted after its due time (timed models) */
    uint64_t idle_sweeps;              /* sweeps of this queue's warp that found nothing (first queue) */
    /* fetch lag: at every look that found SQEs behind the doorbell, how many (sq_wait_*) and how many of
     * them had to wait for a later sweep (sq_left_sum: more than a warp's 32, or the pending ring full) */
    uint64_t fetch_looks, sq_wait_sum, sq_wait_max, sq_left_sum;
    /* SQ backlog in time: when the emulator first found the SQEs it has not fetched yet (ns after the epoch,
     * + 1 so that 0 means "no backlog"), and the sum over fetched SQEs of how much later than the model allowed
     * each sweep fetched them (after that look, and after the queue's and the device's buckets) */
    uint64_t backlog_t, fetch_late_ns_sum;
};

/* One warp of the persistent kernel, written once when it ends: SM cycles in sweeps that fetched or
 * completed anything (busy) against all its cycles. busy / total near 1: the warp is saturated and the
 * emulator, not the model, sets the rate of its queues. */
struct gemu_warp_stat {
    unsigned long long busy_cycles, total_cycles, sweeps, busy_sweeps;
    int serving; /* 0: the warp had no queue and left at once */
    int pad;
};

/* The emulator's counters summed over its queues, for the run's record. */
struct gemu_stats {
    uint64_t fetched, completed, errors, dropped, cq_full_held, idle_sweeps;
    uint64_t late_ns_sum, late_ns_max;
    uint64_t fetch_looks, sq_wait_sum, sq_wait_max, sq_left_sum;
    uint64_t fetch_late_ns_sum; /* gemu_queue.fetch_late_ns_sum, summed */
    uint32_t warps_serving;     /* warps that served at least one queue */
    double busy_max, busy_mean; /* busy fraction of the serving warps: the largest and the mean */
};

struct gemu_dev {
    uint8_t *ns;  /* namespace data in GPU memory (NULL with data=none) */
    uint64_t nlb; /* LBAs */
    uint32_t lba_shift;
    uint32_t pad;
    unsigned long long iops_tat, bw_tat; /* shared GCRA buckets (atomicCAS) */
};

/* Everything the persistent kernel reads; lives in GPU memory. */
struct gemu_shared {
    struct gemu_model model;
    struct gemu_queue *queues;
    struct gemu_dev *devs;
    uint32_t nqueues; /* registered queues in total */
    uint32_t ndev;
    struct nvme_cr_win win[GEMU_MAX_WINDOWS]; /* DMA windows (cmd_rules.h): every address must fall in one */
    uint32_t nwin;                            /* 0: no DMA at all */
    uint32_t pad_win;
    struct gemu_warp_stat *wstat; /* blocks x warps, written when each warp ends */
    uint64_t mdts_bytes;          /* largest transfer */
    uint32_t drop_nth;            /* 0 = off */
    int ooo;
    struct nvme_cr_inj inj;   /* err_every, err_status, ooo_win (cmd_rules.h, parsed by model_keys.c) */
    int data;                 /* copy payloads */
    volatile int *stop;       /* mapped host memory */
    unsigned long long epoch; /* globaltimer at first use (set by the first warp) */
    unsigned long long link_tat;
};

/* The host-side handle. */
struct gemu {
    char profile[32];
    double scale;
    uint32_t ndev, blocks, warps, ns_mib, lba_size, drop_nth;
    int ooo, data, fill_stamp;
    double lat_ns, iops, bw, qiops, link; /* the model in use, nominal (before scale) */
    struct gemu_shared h;                 /* host copy, uploaded at start */
    struct gemu_shared *d;                /* device copy */
    struct gemu_queue *hq;                /* host copies of the queue table */
    struct gemu_dev *hdev;                /* host copy of the device table (namespace pointers) */
    uint32_t nq, nq_cap;
    volatile uint32_t *db; /* doorbell words: 2 per (dev, queue slot) */
    int *stop_host;        /* mapped pinned stop flag */
    int *stop_dev;
    bool started;
    bool hung;                    /* did not stop in time: memory is not freed (the kernel may touch it) */
    char warn[NVME_EMU_WARN_LEN]; /* old spellings the URI used (emu_keys.h), "" when none: for the caller to log */
};

/* Parse and validate a gpu-emu:// URI without touching the GPU; *e receives the settings (no memory). */
int gemu_parse_uri(const char *uri, uint32_t ndev_default, struct gemu *e, char *err, size_t errlen);
/* Errors here are negative errno; CUDA failures become -ENOMEM/-EIO with the CUDA text in err. */
int gemu_open(const char *uri, uint32_t ndev_default, struct gemu **out, char *err, size_t errlen);
/* Register queue pair qid on device dev. sq/cq are GPU memory with `entries` slots; returns the doorbell
 * word pointers (device memory) in *sq_db and *cq_db. */
int gemu_add_queue(struct gemu *e, uint32_t dev, uint16_t qid, const struct nvme_sqe *sq, struct nvme_cqe *cq,
                   uint32_t entries, volatile uint32_t **sq_db, volatile uint32_t **cq_db, char *err, size_t errlen);
int gemu_dma_allow(struct gemu *e, const void *lo, size_t len);
/* Launch the persistent kernel on `stream` (a cudaStream_t). */
int gemu_start(struct gemu *e, void *stream, char *err, size_t errlen);
/* Set the stop flag and wait for the kernel (on its stream) until deadline_ns (steady clock, see
 * gemu_wait_stream); -ETIMEDOUT leaves it marked hung, and gemu_close then frees nothing. */
int gemu_stop(struct gemu *e, void *stream, uint64_t deadline_ns, char *err, size_t errlen);
/* Load the kernel's module now (lazy loading) and check `warps` against cudaFuncGetAttributes. */
int gemu_preload(const struct gemu *e, char *err, size_t errlen);
/* Sum of the counters of all queues (after gemu_stop). */
int gemu_counters(struct gemu *e, struct gemu_stats *out, char *err, size_t errlen);
/* Host watchdogs: poll a stream / an event (cudaStreamQuery / cudaEventQuery) until it is done or the
 * steady clock passes deadline_ns (gemu_steady_ns()); -ETIMEDOUT with `what` in err. Never a bare
 * synchronize: a kernel that does not end must not hang the host. */
uint64_t gemu_steady_ns(void);
int gemu_wait_stream(void *stream, uint64_t deadline_ns, const char *what, char *err, size_t errlen);
int gemu_wait_event(void *event, uint64_t deadline_ns, const char *what, char *err, size_t errlen);
void gemu_close(struct gemu *e);
/* "profile=pm1753 scale=1 ndev=16 blocks=8 warps=8 data=ram ooo=0" */
int gemu_describe(const struct gemu *e, char *buf, size_t len);
/* Threads the persistent kernel occupies (blocks x warps x 32) and its per-SM block capacity. */
int gemu_occupancy(const struct gemu *e, int *blocks_per_sm);

/* CUDA error -> errno, with "what: cudaErrorName: text" in err. Shared by the .cu files. */
int gemu_cuda_errno(int cuda_err, const char *what, char *err, size_t errlen);

#endif /* NVME_CUDA_GPU_EMU_H */
