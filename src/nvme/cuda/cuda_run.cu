/* SPDX-License-Identifier: BSD-3-Clause */
// cuda_run.cu — the cuda-run engine: device-initiated I/O from CUDA threads.
//
// Grid = devices x queues per device, one block per queue pair, one thread per in-flight command
// (blockDim = qdepth). Each round is lock-step: every thread builds its SQE in slot tail+i, thread 0
// fences and rings the SQ doorbell, every thread waits (with a deadline) for the CQE in slot head+i and
// hands it to the command whose CID it names; thread 0 rings the CQ head doorbell and counts the round.
// Patterns: sequential (queues of a device sweep the range together) and random (per-thread LCG seeded
// from the host). A stop flag in mapped host memory ends a timed run; per-queue round counts in mapped
// host memory let the host open and close the measured window while the kernel runs; cudaEvents time
// the whole kernel. Host side: parameter checks, the gpu-emu target, buffers, PRP lookup table, launch,
// window, teardown in reverse. Also: device count and info (cuda_api.h).
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

#include "nvme/cuda/crun.h"
#include "nvme/cuda/cuda_api.h"
#include "nvme/cuda/gpu_emu.h"
#include "nvme/cuda/nvme_cuda.cuh"
#include "nvme/cuda/nvme_gpuq.h"

#define CRUN_HOST_POLL     std::chrono::milliseconds(1)
#define CRUN_MAX_NDEVS     GEMU_MAX_DEVS
#define CRUN_MAX_NQUEUES   GEMU_MAX_QUEUES_DEV
#define CRUN_DEFAULT_NDEVS 16u // the published server's device count

// ------------------------------------------------------------------------------------------ host side
#define CRUN_CHECK(call, what)                                                                                         \
    do {                                                                                                               \
        cudaError_t ce_ = (call);                                                                                      \
        if (ce_ != cudaSuccess) {                                                                                      \
            rc = gemu_cuda_errno((int)ce_, what, err, errlen);                                                         \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)

static int crun_check(const nvme_cuda_run_params *p, char *err, size_t errlen)
{
#define BAD(...) return snprintf(err, errlen, __VA_ARGS__), -EINVAL
    if (!p->target)
        BAD("target: missing");
    if (p->rw < NVME_CUDA_READ || p->rw > NVME_CUDA_RANDWRITE)
        BAD("rw=%d: must be read, randread, write or randwrite", (int)p->rw);
    if (p->iosize < NVME_GPUQ_LBA_SIZE_MIN || p->iosize % NVME_GPUQ_LBA_SIZE_MIN || p->iosize > NVME_GPUQ_MAX_IO)
        BAD("iosize=%u: must be a multiple of %u bytes, at most %u", p->iosize, NVME_GPUQ_LBA_SIZE_MIN,
            NVME_GPUQ_MAX_IO);
    if (p->qdepth < 1 || p->qdepth > NVME_GPUQ_MAX_QDEPTH)
        BAD("qdepth=%u: must be in 1..%u (one CUDA thread per command, one block per queue)", p->qdepth,
            NVME_GPUQ_MAX_QDEPTH);
    if (p->nqueues < 1 || p->nqueues > CRUN_MAX_NQUEUES)
        BAD("nqueues=%u: must be in 1..%u", p->nqueues, CRUN_MAX_NQUEUES);
    if (p->ndevs > CRUN_MAX_NDEVS)
        BAD("ndevs=%u: must be in 1..%u", p->ndevs, CRUN_MAX_NDEVS);
    if (!p->rounds && (!std::isfinite(p->runtime_s) || p->runtime_s <= 0))
        BAD("runtime=%g: must be a number of seconds > 0", p->runtime_s);
    if (!std::isfinite(p->warmup_s) || p->warmup_s < 0)
        BAD("warmup=%g: must be a number of seconds >= 0", p->warmup_s);
    if (p->gpu < 0)
        BAD("gpu=%d: must be >= 0", p->gpu);
    if (p->readback && (!p->rounds || (p->rw != NVME_CUDA_WRITE && p->rw != NVME_CUDA_RANDWRITE)))
        BAD("readback: needs a write pattern and rounds > 0");
    if (p->readback && !p->verify)
        BAD("readback: needs verify");
#undef BAD
    return 0;
}

extern "C" int nvme_cuda_run(const nvme_cuda_run_params *p, nvme_cuda_run_result *r, uint64_t *queue_rounds,
                             size_t nqueue_rounds, volatile int *stop, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    if (err && errlen)
        err[0] = 0;
    int rc = crun_check(p, err, errlen);
    if (rc)
        return rc;
    if ((rc = crun_launch_blocking_refused(err, errlen)))
        return rc;
    if (!strncmp(p->target, "pci://", 6) || !strncmp(p->target, "emu://", 6))
        return nvme_cuda_run_pci(p, r, queue_rounds, nqueue_rounds, stop, err, errlen);
    if (strncmp(p->target, "gpu-emu://", 10) != 0) {
        snprintf(err, errlen, "target '%s': cuda-run drives gpu-emu://, pci:// or emu://?mode=thread", p->target);
        return -EINVAL;
    }
    rc = nvme_cuda_target_check(p->target, p->ndevs ? p->ndevs : CRUN_DEFAULT_NDEVS, NULL, 0, err, errlen);
    if (rc)
        return rc;
    char why[NVME_CUDA_DESC_LEN];
    int ngpu = nvme_cuda_device_count(why, sizeof(why));
    if (ngpu <= 0) {
        snprintf(err, errlen, "%s", why);
        return -ENODEV;
    }
    if (p->gpu >= ngpu) {
        snprintf(err, errlen, "gpu=%d: this host has %d CUDA device(s)", p->gpu, ngpu);
        return -EINVAL;
    }

    // everything below is released at `out`, in reverse
    gemu *emu = NULL;
    cudaStream_t s_emu = NULL, s_run = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    nvme_sqe *sq = NULL;
    nvme_cqe *cq = NULL;
    uint8_t *raw = NULL;
    uint64_t *lut = NULL;
    crun_queue *dq = NULL;
    unsigned long long *rounds_host = NULL, *rounds_dev = NULL;
    int *stop_host = NULL, *stop_dev = NULL;
    std::vector<crun_queue> hq;
    std::vector<uint64_t> hlut;
    bool emu_running = false, run_launched = false, hung = false;
    uint32_t ndevs = 0, nblk = 0, entries = 0, nlb = 0;
    uint64_t stride = 0, span = 0, total = 0, nslots = 0, lba_count = 0;
    int bps_run = 0, bps_emu = 0;
    double frac = 0;
    crun_params P;
    memset(&P, 0, sizeof(P));
    crun_window win{};
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;

    CRUN_CHECK(cudaSetDevice(p->gpu), "cudaSetDevice");
    rc = nvme_cuda_device_info(p->gpu, &r->gpu, err, errlen);
    if (rc)
        goto out;
    rc = gemu_open(p->target, p->ndevs ? p->ndevs : CRUN_DEFAULT_NDEVS, &emu, err, errlen);
    if (rc)
        goto out;
    ndevs = p->ndevs ? p->ndevs : emu->ndev;
    if (ndevs > emu->ndev) {
        snprintf(err, errlen, "ndevs=%u: the target has %u device(s) (ndev=%u in the URI)", ndevs, emu->ndev,
                 emu->ndev);
        rc = -EINVAL;
        goto out;
    }
    if (p->iosize % emu->lba_size) {
        snprintf(err, errlen, "iosize=%u: not a multiple of the LBA size %u", p->iosize, emu->lba_size);
        rc = -EINVAL;
        goto out;
    }
    nlb = p->iosize / emu->lba_size;
    lba_count = p->lba_count ? p->lba_count : (uint64_t)emu->ns_mib * GEMU_MIB / emu->lba_size;
    if (lba_count > (uint64_t)emu->ns_mib * GEMU_MIB / emu->lba_size || lba_count < nlb) {
        snprintf(err, errlen, "lba_count=%llu: must hold one I/O (%u LBAs) and fit the %u MiB namespace",
                 (unsigned long long)lba_count, nlb, emu->ns_mib);
        rc = -EINVAL;
        goto out;
    }
    nslots = lba_count / nlb;
    nblk = ndevs * p->nqueues;
    entries = p->qdepth + 1u; // lock-step: one round in flight; the tail walks round the ring every round
    span = ((uint64_t)p->iosize + page - 1u) / page * page;
    total = nvme_cuda_buf_size(p->iosize, p->qdepth, p->nqueues, ndevs, &stride) - page;

    // both kernels must be resident at once: the engine waits on the emulator
    // cudaFuncGetAttributes on both kernels loads their modules now, before the persistent emulator runs
    // (lazy loading would otherwise load the engine's module while the emulator occupies the GPU)
    rc = crun_preload(p->qdepth, &bps_run, err, errlen);
    if (rc)
        goto out;
    rc = gemu_preload(emu, err, errlen);
    if (rc)
        goto out;
    rc = gemu_occupancy(emu, &bps_emu);
    if (rc)
        goto out;
    frac = (bps_run ? (double)nblk / ((double)bps_run * r->gpu.sms) : 2.0) +
           (bps_emu ? (double)emu->blocks / ((double)bps_emu * r->gpu.sms) : 2.0);
    if (frac > 1.0) {
        snprintf(err, errlen,
                 "the run needs %u blocks of %u threads plus the emulator's %u blocks of %u threads resident at "
                 "once; %s (%d SMs) holds %d and %d per SM: %.0f%% of the GPU. Lower qdepth, nqueues or ndevs, "
                 "or the emulator's blocks=",
                 nblk, p->qdepth, emu->blocks, emu->warps * GEMU_WARP, r->gpu.name, r->gpu.sms, bps_run, bps_emu,
                 frac * 100.0);
        rc = -E2BIG;
        goto out;
    }

    CRUN_CHECK(cudaMalloc((void **)&sq, (size_t)nblk * entries * sizeof(nvme_sqe)), "allocating SQs");
    CRUN_CHECK(cudaMemset(sq, 0, (size_t)nblk * entries * sizeof(nvme_sqe)), "clearing SQs");
    CRUN_CHECK(cudaMalloc((void **)&cq, (size_t)nblk * entries * sizeof(nvme_cqe)), "allocating CQs");
    CRUN_CHECK(cudaMemset(cq, 0, (size_t)nblk * entries * sizeof(nvme_cqe)), "clearing CQs"); // phase 0: not new
    if (p->buf) {
        if (p->buf_len < total + page) {
            snprintf(err, errlen, "buf: %zu bytes given, this run needs %llu (nvme_cuda_buf_size)", p->buf_len,
                     (unsigned long long)(total + page));
            rc = -EINVAL;
            goto out;
        }
    } else {
        CRUN_CHECK(cudaMalloc((void **)&raw, total + page), "allocating I/O buffers");
        CRUN_CHECK(cudaMemset(raw, 0, total + page), "clearing I/O buffers");
    }
    {
        // gpu-emu: the DMA address of a GPU page is its device pointer (identity lookup table)
        uint8_t *start = p->buf ? (uint8_t *)p->buf : raw;
        uint8_t *base = (uint8_t *)(((uintptr_t)start + page - 1u) & ~(uintptr_t)(page - 1u));
        r->buf_offset = (uint64_t)(base - start);
        r->buf_stride = stride;
        hlut.resize(total / page);
        for (size_t k = 0; k < hlut.size(); k++)
            hlut[k] = (uint64_t)(uintptr_t)(base + k * page);
        CRUN_CHECK(cudaMalloc((void **)&lut, hlut.size() * sizeof(uint64_t)), "allocating the PRP lookup table");
        CRUN_CHECK(cudaMemcpy(lut, hlut.data(), hlut.size() * sizeof(uint64_t), cudaMemcpyHostToDevice),
                   "uploading the PRP lookup table");
        rc = gemu_dma_allow(emu, base, total);
        if (rc)
            goto out;
        P.buf = base;
    }
    hq.resize(nblk);
    for (uint32_t b = 0; b < nblk; b++) {
        crun_queue &q = hq[b];
        memset(&q, 0, sizeof(q));
        q.sq = sq + (size_t)b * entries;
        q.cq = cq + (size_t)b * entries;
        q.entries = entries;
        q.dev = b / p->nqueues;
        q.qidx = b % p->nqueues;
        q.qid = (uint16_t)(q.qidx + 1u);
        volatile uint32_t *sdb, *cdb;
        rc = gemu_add_queue(emu, q.dev, q.qid, q.sq, (nvme_cqe *)q.cq, entries, &sdb, &cdb, err, errlen);
        if (rc)
            goto out;
        q.sq_db = sdb;
        q.cq_db = cdb;
    }
    CRUN_CHECK(cudaMalloc((void **)&dq, nblk * sizeof(crun_queue)), "allocating the queue table");
    CRUN_CHECK(cudaMemcpy(dq, hq.data(), nblk * sizeof(crun_queue), cudaMemcpyHostToDevice),
               "uploading the queue table");
    CRUN_CHECK(cudaHostAlloc((void **)&rounds_host, nblk * sizeof(unsigned long long), cudaHostAllocMapped),
               "allocating mapped round counters");
    memset(rounds_host, 0, nblk * sizeof(unsigned long long));
    CRUN_CHECK(cudaHostGetDevicePointer((void **)&rounds_dev, rounds_host, 0), "mapping round counters");
    CRUN_CHECK(cudaHostAlloc((void **)&stop_host, sizeof(int), cudaHostAllocMapped), "allocating the stop flag");
    *stop_host = 0;
    CRUN_CHECK(cudaHostGetDevicePointer((void **)&stop_dev, stop_host, 0), "mapping the stop flag");
    CRUN_CHECK(cudaStreamCreateWithFlags(&s_emu, cudaStreamNonBlocking), "creating the emulator stream");
    CRUN_CHECK(cudaStreamCreateWithFlags(&s_run, cudaStreamNonBlocking), "creating the engine stream");
    CRUN_CHECK(cudaEventCreate(&e0), "creating events");
    CRUN_CHECK(cudaEventCreate(&e1), "creating events");

    P.queues = dq;
    P.rounds = rounds_dev;
    P.stop = stop_dev;
    P.stride = stride;
    P.span = span;
    P.lut = lut;
    P.lut_pages = hlut.size();
    P.qdepth = p->qdepth;
    P.nqueues = p->nqueues;
    P.iosize = p->iosize;
    P.nlb = nlb;
    P.lba_size = emu->lba_size;
    P.random = p->rw == NVME_CUDA_RANDREAD || p->rw == NVME_CUDA_RANDWRITE;
    P.write = p->rw == NVME_CUDA_WRITE || p->rw == NVME_CUDA_RANDWRITE;
    P.verify = p->verify;
    P.readback = p->readback;
    P.seed = p->seed;
    P.nslots = nslots;
    P.lba0 = 0;
    P.max_rounds = p->rounds;
    P.timeout_ns = p->timeout_ns ? p->timeout_ns : NVME_CUDA_DEFAULT_TIMEOUT_NS;
    P.scope = NVME_CUDA_SCOPE_GPU; // the emulator writes CQEs from this GPU (nvme_cuda.cuh)
    if (p->verify && !emu->data) {
        snprintf(err, errlen, "verify: the target stores no data (data=none)");
        rc = -EINVAL;
        goto out;
    }

    // launch: the emulator first, so its blocks are resident before the engine's
    rc = gemu_start(emu, s_emu, err, errlen);
    if (rc)
        goto out;
    emu_running = true;
    CRUN_CHECK(cudaEventRecord(e0, s_run), "recording the start event");
    rc = crun_launch(&P, nblk, s_run, err, errlen);
    if (rc)
        goto out;
    run_launched = true;
    CRUN_CHECK(cudaEventRecord(e1, s_run), "recording the end event");
    rc = crun_drive(&P, p, nblk, rounds_host, stop_host, stop, e1, &win, err, errlen);
    if (rc) {
        hung = rc == -ETIMEDOUT;
        goto out;
    }
    run_launched = false;
    emu_running = false;
    rc = gemu_stop(emu, s_emu, gemu_steady_ns() + CRUN_STOP_GRACE_NS, err, errlen);
    if (rc) {
        hung = rc == -ETIMEDOUT;
        goto out;
    }
    CRUN_CHECK(cudaGetLastError(), "after the kernels");

    // results
    {
        float ms = 0;
        CRUN_CHECK(cudaEventElapsedTime(&ms, e0, e1), "reading the kernel time");
        r->kernel_s = ms / 1e3;
        CRUN_CHECK(cudaMemcpy(hq.data(), dq, nblk * sizeof(crun_queue), cudaMemcpyDeviceToHost),
                   "reading queue results");
        snprintf(r->payload, sizeof(r->payload), "gpu");
        r->emu_blocks = emu->blocks;
        r->emu_warps = emu->warps;
        r->ndevs = ndevs;
        snprintf(r->profile, sizeof(r->profile), "%s", emu->profile);
        r->scale = emu->scale;
        r->ooo = emu->ooo;
        gemu_describe(emu, r->target_desc, sizeof(r->target_desc));
        gemu_stats es;
        rc = gemu_counters(emu, &es, err, errlen);
        if (rc)
            goto out;
        r->emu.valid = true;
        r->emu.fetched = es.fetched;
        r->emu.completed = es.completed;
        r->emu.errors = es.errors;
        r->emu.dropped = es.dropped;
        r->emu.cq_full_held = es.cq_full_held;
        r->emu.idle_sweeps = es.idle_sweeps;
        r->emu.late_ns_mean = es.completed ? (double)es.late_ns_sum / (double)es.completed : 0;
        r->emu.late_ns_max = es.late_ns_max;
        rc = crun_collect(&P, hq.data(), nblk, p, r, queue_rounds, nqueue_rounds, stop && *stop, err, errlen);
        crun_window_result(&win, p, r);
    }

out:
    if (stop_host)
        *(volatile int *)stop_host = 1;
    if (run_launched && e1 && !hung) {
        char tmp[NVME_CUDA_DESC_LEN];
        hung = gemu_wait_event(e1, gemu_steady_ns() + P.timeout_ns + CRUN_STOP_GRACE_NS, "the cuda-run kernel", tmp,
                               sizeof(tmp)) == -ETIMEDOUT;
    }
    if (emu_running && !hung) {
        char tmp[NVME_CUDA_DESC_LEN];
        hung = gemu_stop(emu, s_emu, gemu_steady_ns() + CRUN_STOP_GRACE_NS, tmp, sizeof(tmp)) == -ETIMEDOUT;
    }
    if (hung) {
        // a kernel is still running: free nothing it may touch (queues, buffers, flags, the emulator);
        // the memory goes back with the process's CUDA context
        if (emu)
            emu->hung = true;
        gemu_close(emu);
        return rc ? rc : -ETIMEDOUT;
    }
    if (e1)
        cudaEventDestroy(e1);
    if (e0)
        cudaEventDestroy(e0);
    if (s_run)
        cudaStreamDestroy(s_run);
    if (s_emu)
        cudaStreamDestroy(s_emu);
    if (stop_host)
        cudaFreeHost(stop_host);
    if (rounds_host)
        cudaFreeHost(rounds_host);
    if (dq)
        cudaFree(dq);
    if (lut)
        cudaFree(lut);
    if (raw)
        cudaFree(raw);
    if (cq)
        cudaFree(cq);
    if (sq)
        cudaFree(sq);
    gemu_close(emu);
    return rc;
}
