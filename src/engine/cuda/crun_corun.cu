/* SPDX-License-Identifier: BSD-3-Clause */
// crun_corun.cu — the co-running compute kernel of cuda-run (corun=): an FMA kernel timed alone and under
// the I/O load (engine/cuda/crun_corun.h explains the method).
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <thread>

#include "engine/crun_params.h"
#include "engine/cuda/crun_corun.h"
#include "nvme/emu/gpu/gpu_emu.h"

#define CORUN_MUL  0.9999999f // the chains converge, never overflow
#define CORUN_ADD  1e-7f
#define CORUN_POLL std::chrono::microseconds(100)
#define NS_PER_S   1e9
#define MS_PER_S   1e3

__global__ void crun_corun_kernel(float *out, uint32_t iters)
{
    float a[CRUN_CORUN_CHAINS];
#pragma unroll
    for (uint32_t c = 0; c < CRUN_CORUN_CHAINS; c++)
        a[c] = (float)(threadIdx.x + c) * CORUN_ADD;
    for (uint32_t i = 0; i < iters; i++) {
#pragma unroll
        for (uint32_t c = 0; c < CRUN_CORUN_CHAINS; c++)
            a[c] = fmaf(a[c], CORUN_MUL, CORUN_ADD);
    }
    float s = 0;
#pragma unroll
    for (uint32_t c = 0; c < CRUN_CORUN_CHAINS; c++)
        s += a[c];
    out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = s;
}

static int corun_cuda(cudaError_t ce, const char *what, char *err, size_t errlen)
{
    return ce == cudaSuccess ? 0 : gemu_cuda_errno((int)ce, what, err, errlen);
}

// `n` launches between events e0 and e1 on the co-runner's stream.
static int corun_launches(crun_corun *C, uint32_t iters, uint32_t n, void *e0, void *e1, char *err, size_t errlen)
{
    cudaStream_t s = (cudaStream_t)C->stream;
    int rc = corun_cuda(cudaEventRecord((cudaEvent_t)e0, s), "recording a co-runner event", err, errlen);
    for (uint32_t i = 0; !rc && i < n; i++) {
        crun_corun_kernel<<<C->blocks, CRUN_CORUN_THREADS, 0, s>>>(C->out, iters);
        rc = corun_cuda(cudaGetLastError(), "launching the co-runner", err, errlen);
    }
    if (!rc)
        rc = corun_cuda(cudaEventRecord((cudaEvent_t)e1, s), "recording a co-runner event", err, errlen);
    return rc;
}

static int corun_elapsed(void *e0, void *e1, double budget_s, double *secs, char *err, size_t errlen)
{
    const uint64_t deadline = gemu_steady_ns() + (uint64_t)(budget_s * NS_PER_S) + CRUN_CORUN_GRACE_NS;
    int rc = gemu_wait_event(e1, deadline, "the co-running compute kernel", err, errlen);
    float ms = 0;
    if (!rc)
        rc = corun_cuda(cudaEventElapsedTime(&ms, (cudaEvent_t)e0, (cudaEvent_t)e1), "timing the co-runner", err,
                        errlen);
    *secs = ms / MS_PER_S;
    return rc;
}

int crun_corun_alone(crun_corun *C, const nvme_cuda_run_params *p, int sms, nvme_cuda_corun_result *r, char *err,
                     size_t errlen)
{
    memset(C, 0, sizeof(*C));
    memset(r, 0, sizeof(*r));
    C->blocks = p->corun * (uint32_t)sms;
    cudaStream_t s = NULL;
    int rc =
        corun_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating the co-runner stream", err, errlen);
    C->stream = s;
    void **ev[] = {&C->a0, &C->a1, &C->l0, &C->l1};
    for (void **e : ev)
        if (!rc)
            rc = corun_cuda(cudaEventCreate((cudaEvent_t *)e), "creating co-runner events", err, errlen);
    if (!rc)
        rc = corun_cuda(cudaMalloc((void **)&C->out, (size_t)C->blocks * CRUN_CORUN_THREADS * sizeof(float)),
                        "allocating the co-runner's output", err, errlen);
    // size one launch: a first launch (module load, clocks up), then one of CRUN_CORUN_ITERS0 timed
    double t = 0;
    if (!rc)
        rc = corun_launches(C, CRUN_CORUN_ITERS0, 1, C->a0, C->a1, err, errlen);
    if (!rc)
        rc = corun_launches(C, CRUN_CORUN_ITERS0, 1, C->a0, C->a1, err, errlen);
    if (!rc)
        rc = corun_elapsed(C->a0, C->a1, CRUN_CORUN_SLOW_MAX, &t, err, errlen);
    if (rc)
        return rc;
    double iters = t > 0 ? CRUN_CORUN_ITERS0 * CRUN_CORUN_LAUNCH_S / t : CRUN_CORUN_ITERS_MAX;
    C->iters = (uint32_t)fmin(fmax(iters, CRUN_CORUN_ITERS_MIN), CRUN_CORUN_ITERS_MAX);
    const double target_s = CRUN_CORUN_SHARE * (double)(p->warmup_ns + p->runtime_ns) / NS_PER_S;
    double per = t * C->iters / CRUN_CORUN_ITERS0; // predicted seconds per launch
    double n = per > 0 ? ceil(target_s / per) : CRUN_CORUN_MIN_LAUNCHES;
    C->launches = (uint32_t)fmin(fmax(n, CRUN_CORUN_MIN_LAUNCHES), CRUN_CORUN_MAX_LAUNCHES);
    if ((rc = corun_launches(C, C->iters, C->launches, C->a0, C->a1, err, errlen)) ||
        (rc = corun_elapsed(C->a0, C->a1, CRUN_CORUN_SLOW_MAX * target_s, &r->alone_s, err, errlen)))
        return rc;
    r->valid = true;
    r->blocks = C->blocks;
    r->threads_per_block = CRUN_CORUN_THREADS;
    r->launches = C->launches;
    r->iters = C->iters;
    r->flop_per_launch = 2.0 * CRUN_CORUN_CHAINS * (double)C->iters * C->blocks * CRUN_CORUN_THREADS;
    return 0;
}

int crun_corun_loaded(crun_corun *C, const volatile unsigned long long *rounds_host, uint32_t nblk, uint64_t timeout_ns,
                      nvme_cuda_corun_result *r, char *err, size_t errlen)
{
    const uint64_t deadline = gemu_steady_ns() + timeout_ns;
    uint32_t ready = 0;
    while (ready < nblk && gemu_steady_ns() < deadline) {
        for (ready = 0; ready < nblk && rounds_host[ready]; ready++)
            ;
        if (ready < nblk)
            std::this_thread::sleep_for(CORUN_POLL);
    }
    r->resident = ready == nblk; // else the engine reports its stalled queue; the record is marked
    int rc = corun_launches(C, C->iters, C->launches, C->l0, C->l1, err, errlen);
    C->queued = rc == 0;
    return rc;
}

int crun_corun_finish(crun_corun *C, void *io_start, void *io_end, nvme_cuda_corun_result *r, char *err, size_t errlen)
{
    int rc = corun_elapsed(C->l0, C->l1, CRUN_CORUN_SLOW_MAX * r->alone_s, &r->loaded_s, err, errlen);
    C->queued = rc == -ETIMEDOUT;
    float co_end = 0, io_end_ms = 0; // both from the engine's start event
    if (!rc)
        rc = corun_cuda(cudaEventElapsedTime(&co_end, (cudaEvent_t)io_start, (cudaEvent_t)C->l1),
                        "ordering the co-runner's end", err, errlen);
    if (!rc)
        rc = corun_cuda(cudaEventElapsedTime(&io_end_ms, (cudaEvent_t)io_start, (cudaEvent_t)io_end),
                        "ordering the co-runner's end", err, errlen);
    r->overlap = !rc && co_end <= io_end_ms;
    return rc;
}

void crun_corun_free(crun_corun *C, const nvme_cuda_corun_result *r)
{
    if (C->queued) { // the loaded launches never waited for (an error path): bounded wait
        char tmp[NVME_CUDA_DESC_LEN];
        if (gemu_wait_event(
                C->l1, gemu_steady_ns() + (uint64_t)(CRUN_CORUN_SLOW_MAX * r->alone_s * NS_PER_S) + CRUN_CORUN_GRACE_NS,
                "the co-running compute kernel", tmp, sizeof(tmp)))
            return; // still running: the process's CUDA context takes its memory back
    }
    if (C->out)
        cudaFree(C->out);
    void *ev[] = {C->l1, C->l0, C->a1, C->a0};
    for (void *e : ev)
        if (e)
            cudaEventDestroy((cudaEvent_t)e);
    if (C->stream)
        cudaStreamDestroy((cudaStream_t)C->stream);
    memset(C, 0, sizeof(*C));
}
