/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * crun.h — internals of the cuda-run engine shared by its two hosts (cuda_run.cu: gpu-emu://,
 * cuda_pci.cu: pci://): the queue table and parameters the kernel reads, the launch, the host-side wait
 * with a watchdog, and turning per-queue state into the run's result and error message.
 *
 * Key functions: crun_preload() (loads the kernel's module now and reports its occupancy), crun_launch(),
 * crun_collect() (fills nvme_cuda_run_result, checks that every queue made progress, and names the first
 * failed queue), crun_launch_blocking_refused().
 *
 * Caveats: C++/CUDA only; internal to libnvme_cuda. Pointers in the structs are device pointers (GPU
 * memory, or host memory mapped into the GPU, or a BAR registered with cudaHostRegisterIoMemory).
 */
#ifndef NVME_CUDA_CRUN_H
#define NVME_CUDA_CRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/cuda/cuda_api.h"
#include "nvme/spec.h"

#define CRUN_SHARED_PER_CMD (sizeof(uint16_t) + sizeof(uint32_t)) // status + seen flag per command
#define CRUN_STOP_GRACE_NS  5000000000ull // after the stop flag, the kernel ends within timeout + this

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
};

struct crun_params {
    struct crun_queue *queues;
    volatile unsigned long long *rounds; // mapped host memory, one per queue
    const volatile int *stop;            // mapped host memory
    uint8_t *buf;                        // per-thread buffers (+ PRP list page), GPU memory
    uint64_t stride;                     // bytes per thread
    uint64_t span;                       // data bytes per thread (iosize rounded up to pages)
    const uint64_t *lut;                 // DMA address of every NVMe page of buf
    uint64_t lut_pages;
    uint32_t qdepth, nqueues, iosize, nlb, lba_size;
    int random, write, verify, readback;
    uint64_t seed, nslots, lba0, max_rounds, timeout_ns;
    int scope; // enum nvme_cuda_scope: who writes the CQs (acquire scope)
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
/* cuda-run on pci:// controllers (cuda_pci.cu). */
int nvme_cuda_run_pci(const struct nvme_cuda_run_params *p, struct nvme_cuda_run_result *r, uint64_t *queue_rounds,
                      size_t nqueue_rounds, volatile int *stop, char *err, size_t errlen);

#endif /* NVME_CUDA_CRUN_H */
