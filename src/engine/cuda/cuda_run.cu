/* SPDX-License-Identifier: BSD-3-Clause */
// cuda_run.cu — the one host driver of the cuda-run engine (device-initiated I/O from CUDA threads), for
// every target: gpu-emu:// (the GPU-resident emulator), pci:// and emu://?mode=thread (controllers the
// driver opens). What differs between them is behind struct crun_target (crun_target.cu); everything else
// is here, once: the parameter check (the engine table, engine/crun_params.h), the GPU, the occupancy rule,
// buffers and the PRP lookup table, the queue table, mapped round counters and stop flag, the launch, the
// measured window with its watchdog (crun_drive), the results, and teardown in reverse.
//
// Grid = devices x queues per device, one block per queue pair, one thread per in-flight command
// (blockDim = qdepth); the kernel is crun_kernel.cu. The host opens and closes the measured window from
// per-queue round counters in mapped host memory while the kernel runs; cudaEvents time the whole kernel.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <vector>

#include "engine/crun_params.h"
#include "engine/cuda/crun.h"
#include "engine/cuda/crun_corun.h"
#include "engine/cuda/cuda_api.h"
#include "nvme/emu/gpu/gpu_emu.h"
#include "nvme/emu/model_keys.h"
#include "nvme/nvme_cuda.cuh"
#include "nvme/nvme_gpuq.h"
#include "nvme/uri.h"

static_assert(CRUN_MAX_NDEVS == GEMU_MAX_DEVS, "the table's ndevs bound is the emulator's device count");
static_assert(CRUN_MAX_NQUEUES == GEMU_MAX_QUEUES_DEV, "the table's nqueues bound is the emulator's queue count");

#define CRUN_CHECK(call, what)                                                                                         \
    do {                                                                                                               \
        cudaError_t ce_ = (call);                                                                                      \
        if (ce_ != cudaSuccess) {                                                                                      \
            rc = gemu_cuda_errno((int)ce_, what, err, errlen);                                                         \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)

// The GPU: present, the ordinal valid, selected, described.
// The target's per-LBA error rule (err_every/err_status, parsed by the emulators' one parser, model_keys.h):
// what each command's status should be, so the kernel can count statuses handed to the wrong command.
// Targets without those keys (pci://) expect success everywhere.
static int crun_expected_inj(const char *target, nvme_cr_inj *inj, char *err, size_t errlen)
{
    nvme_emu_inj_defaults(inj);
    nvme_uri *u = nullptr;
    if (!target || nvme_uri_parse(target, &u, err, errlen) < 0)
        return 0; // the target itself was checked (and opened) before: nothing to expect
    int rc = nvme_emu_inj_from_uri("", u, inj, err, errlen);
    nvme_uri_free(u);
    return rc;
}

static int crun_gpu(const nvme_cuda_run_params *p, nvme_cuda_run_result *r, char *err, size_t errlen)
{
    char why[NVME_CUDA_DESC_LEN];
    int ngpu = nvme_cuda_device_count(why, sizeof(why));
    if (ngpu <= 0) {
        snprintf(err, errlen, "%s", why);
        return -ENODEV;
    }
    if ((int)p->gpu >= ngpu) {
        snprintf(err, errlen, "gpu=%u: this host has %d CUDA device(s)", p->gpu, ngpu);
        return -EINVAL;
    }
    cudaError_t ce = cudaSetDevice((int)p->gpu);
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "cudaSetDevice", err, errlen);
    return nvme_cuda_device_info((int)p->gpu, &r->gpu, err, errlen);
}

// Both kernels (the engine's and, for gpu-emu, the emulator's) must be resident at once: refuse a run whose
// blocks need more than occupancy_pct of the GPU's resident capacity (integers, crun_occupancy_ok).
static int crun_fit(crun_target *T, const nvme_cuda_run_params *p, uint32_t nblk, nvme_cuda_run_result *r, char *err,
                    size_t errlen)
{
    int bps_run = 0, bps_emu = 0;
    uint32_t eblk = 0;
    // cudaFuncGetAttributes on both kernels loads their modules now, before the persistent emulator runs
    // (lazy loading would otherwise load the engine's module while the emulator occupies the GPU)
    int rc = crun_preload(p->qdepth, &bps_run, err, errlen);
    if (!rc)
        rc = crun_target_grid(T, &eblk, &bps_emu, err, errlen);
    if (rc)
        return rc;
    r->occupancy_pct = p->occupancy_pct;
    if (crun_occupancy_ok(nblk, (uint64_t)bps_run, eblk, (uint64_t)bps_emu, (uint64_t)r->gpu.sms, p->occupancy_pct,
                          &r->occupancy_permille))
        return 0;
    char emu[NVME_CUDA_DESC_LEN] = "";
    if (eblk)
        snprintf(emu, sizeof(emu), " plus the emulator's %u blocks of %u threads (%d per SM)", eblk,
                 T->emu ? T->emu->warps * GEMU_WARP : 0u, bps_emu);
    snprintf(err, errlen,
             "the run needs %u blocks of %u threads (%d per SM)%s resident at once on %s (%d SMs): %u.%u%% of its "
             "resident capacity, above occupancy=%u%%. Lower qdepth, nqueues or ndevs%s",
             nblk, p->qdepth, bps_run, emu, r->gpu.name, r->gpu.sms, r->occupancy_permille / 10u,
             r->occupancy_permille % 10u, p->occupancy_pct, eblk ? ", or the emulator's blocks=" : "");
    return -E2BIG;
}

extern "C" int nvme_cuda_run(const nvme_cuda_run_params *p, nvme_cuda_run_result *r, uint64_t *queue_rounds,
                             size_t nqueue_rounds, volatile int *stop, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    if (err && errlen)
        err[0] = 0;
    if (!p->target) {
        snprintf(err, errlen, "target: missing");
        return -EINVAL;
    }
    int rc = crun_params_check(p, err, errlen); // the one check of the table (engine/crun_params.h)
    if (rc)
        return rc;
    if ((rc = crun_launch_blocking_refused(err, errlen)) || (rc = crun_target_precheck(p, err, errlen)))
        return rc;
    crun_poll_format(p->poll_max_ns, r->poll, sizeof(r->poll));

    // everything below is released at `out`, in reverse
    crun_target T;
    cudaStream_t s_run = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    uint64_t *lut = NULL;
    crun_queue *dq = NULL;
    uint32_t *samples_dev = NULL;
    std::vector<uint32_t> samples_host;
    unsigned long long *rounds_host = NULL, *rounds_dev = NULL;
    int *stop_host = NULL, *stop_dev = NULL;
    std::vector<crun_queue> hq;
    std::vector<uint64_t> hlut;
    bool launched = false, hung = false, timed_out = false;
    uint32_t nblk = 0, nlb = 0;
    uint64_t stride = 0, total = 0, lba_count = 0;
    uint8_t *buf = NULL;
    crun_params P;
    memset(&P, 0, sizeof(P));
    crun_window win{};
    crun_corun C{};
    uint64_t t_drive = 0;
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;

    if ((rc = crun_gpu(p, r, err, errlen)) || (rc = crun_target_open(&T, p, err, errlen)))
        goto out;
    nlb = p->iosize / T.lba_size;
    lba_count = p->lba_count ? p->lba_count : T.ns_lbas;
    if (lba_count > T.ns_lbas || lba_count < nlb) {
        snprintf(err, errlen, "lba_count=%llu: must hold one I/O (%u LBAs) and fit the namespace (%llu LBAs)",
                 (unsigned long long)lba_count, nlb, (unsigned long long)T.ns_lbas);
        rc = -EINVAL;
        goto out;
    }
    nblk = T.ndevs * p->nqueues;
    if ((rc = crun_fit(&T, p, nblk, r, err, errlen)))
        goto out;
    // the co-runner alone, before any persistent kernel is on the GPU (crun_corun.h)
    if (p->corun && (rc = crun_corun_alone(&C, p, r->gpu.sms, &r->corun, err, errlen)))
        goto out;

    // I/O buffers (before the queues: for gpu-emu every DMA window is registered before a queue is added)
    total = nvme_cuda_buf_size(p->iosize, p->qdepth, p->nqueues, T.ndevs, &stride) - page;
    r->buf_stride = stride;
    if ((rc = crun_target_payload(&T, p, total, &buf, hlut, r, err, errlen)))
        goto out;
    hq.assign(nblk, crun_queue{});
    if ((rc = crun_target_queues(&T, p, hq, err, errlen)))
        goto out;
    r->sq_readback = T.sq_host;

    CRUN_CHECK(cudaMalloc((void **)&lut, hlut.size() * sizeof(uint64_t)), "allocating the PRP lookup table");
    CRUN_CHECK(cudaMemcpy(lut, hlut.data(), hlut.size() * sizeof(uint64_t), cudaMemcpyHostToDevice),
               "uploading the PRP lookup table");
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
    if (p->sample_every && p->samples && p->sample_cap) { // the breakdown's store: an equal share per block
        P.sample_every = p->sample_every;
        P.sample_cap = p->sample_cap / nblk ? p->sample_cap / nblk : 1u;
        P.sample_from_ns = p->rounds ? 0 : p->warmup_ns; // timed runs: the window's commands, not the warm-up's
        samples_host.resize((size_t)nblk * P.sample_cap * NVME_GPUQ_NPHASES);
        CRUN_CHECK(cudaMalloc((void **)&samples_dev, samples_host.size() * sizeof(uint32_t)),
                   "allocating the breakdown's samples");
        P.samples = samples_dev;
    }
    CRUN_CHECK(cudaStreamCreateWithFlags(&s_run, cudaStreamNonBlocking), "creating the engine stream");
    CRUN_CHECK(cudaEventCreate(&e0), "creating events");
    CRUN_CHECK(cudaEventCreate(&e1), "creating events");

    P.queues = dq;
    P.rounds = rounds_dev;
    P.stop = stop_dev;
    P.buf = buf;
    P.stride = stride;
    P.span = ((uint64_t)p->iosize + page - 1u) / page * page;
    P.lut = lut;
    P.lut_pages = hlut.size();
    P.qdepth = p->qdepth;
    P.nqueues = p->nqueues;
    P.iosize = p->iosize;
    P.nlb = nlb;
    P.lba_size = T.lba_size;
    P.random = p->rw == NVME_CUDA_RANDREAD || p->rw == NVME_CUDA_RANDWRITE;
    P.write = p->rw == NVME_CUDA_WRITE || p->rw == NVME_CUDA_RANDWRITE;
    P.verify = p->verify;
    P.readback = p->readback;
    P.seed = p->seed;
    P.nslots = lba_count / nlb;
    P.lba0 = 0;
    P.max_rounds = p->rounds;
    P.timeout_ns = p->timeout_ns ? p->timeout_ns : NVME_CUDA_DEFAULT_TIMEOUT_NS;
    P.scope = T.scope;
    P.sq_host = T.sq_host;
    // the doorbell fences' scope: GPU scope only where the controller is a kernel on this GPU and every ring
    // and doorbell is in its memory (gpu-emu://); a controller outside the GPU needs system scope
    P.fence_sys = T.kind != CRUN_TGT_GPU_EMU || T.sq_host || T.scope == NVME_CUDA_SCOPE_SYSTEM;
    snprintf(r->fence, sizeof(r->fence), "%s", P.fence_sys ? "sys" : "gpu");
    r->round_publish_ns = CRUN_STOP_CHECK_NS;
    P.poll_max_ns = p->poll_max_ns;
    P.match = p->match;
    if ((rc = crun_expected_inj(p->target, &P.inj, err, errlen))) // err_every/err_status of the target URI
        goto out;

    // launch: the emulator first (gpu-emu), so its blocks are resident before the engine's
    if ((rc = crun_target_start(&T, err, errlen)))
        goto out;
    CRUN_CHECK(cudaEventRecord(e0, s_run), "recording the start event");
    if ((rc = crun_launch(&P, nblk, s_run, err, errlen)))
        goto out;
    launched = true;
    CRUN_CHECK(cudaEventRecord(e1, s_run), "recording the end event");
    if (p->corun && (rc = crun_corun_loaded(&C, rounds_host, nblk, P.timeout_ns, &r->corun, err, errlen)))
        goto out;
    t_drive = gemu_steady_ns();
    rc = crun_drive(&P, p, nblk, rounds_host, stop_host, stop, e1, &win, err, errlen);
    if (rc) {
        hung = rc == -ETIMEDOUT;
        goto out;
    }
    launched = false;
    if ((rc = crun_target_stop(&T, err, errlen))) {
        hung = rc == -ETIMEDOUT;
        goto out;
    }
    CRUN_CHECK(cudaGetLastError(), "after the kernels");
    {
        float ms = 0;
        CRUN_CHECK(cudaEventElapsedTime(&ms, e0, e1), "reading the kernel time");
        r->kernel_s = ms / 1e3;
        CRUN_CHECK(cudaMemcpy(hq.data(), dq, nblk * sizeof(crun_queue), cudaMemcpyDeviceToHost),
                   "reading queue results");
        if ((rc = crun_target_result(&T, p, r, err, errlen)))
            goto out;
        if (samples_dev)
            CRUN_CHECK(cudaMemcpy(samples_host.data(), samples_dev, samples_host.size() * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost),
                       "reading the breakdown's samples");
        crun_samples(&P, hq.data(), nblk, samples_host.data(), p, r);
        rc = crun_collect(&P, hq.data(), nblk, p, r, queue_rounds, nqueue_rounds, stop && *stop, err, errlen);
        timed_out = rc == -ETIMEDOUT || rc == -EPROTO;
        crun_window_result(&win, p, r);
        if (r->emu.valid) // the emulator's verdict on itself: the delay it added, as a share of the mean round
            r->emu.limited =
                r->emu.timed && r->round_ns_mean > 0 &&
                r->emu.late_ns_mean + r->emu.fetch_late_ns_mean > NVME_CUDA_EMU_LATE_SHARE * r->round_ns_mean;
        if (!p->rounds) { // the window's edges: crun_drive sleeps warmup_ns, then measures window_s
            r->window_t0_ns = t_drive + p->warmup_ns;
            r->window_t1_ns = r->window_t0_ns + (uint64_t)(r->window_s * 1e9);
        }
        if (p->corun) {
            int crc = crun_corun_finish(&C, e0, e1, &r->corun, err, errlen);
            rc = rc ? rc : crc;
        }
    }

out:
    if (stop_host)
        *(volatile int *)stop_host = 1;
    if (launched && e1 && !hung) {
        char tmp[NVME_CUDA_DESC_LEN];
        hung = gemu_wait_event(e1, gemu_steady_ns() + P.timeout_ns + CRUN_STOP_GRACE_NS, "the cuda-run kernel", tmp,
                               sizeof(tmp)) == -ETIMEDOUT;
    }
    T.hung = T.hung || hung;
    {
        char tmp[NVME_CUDA_DESC_LEN] = "";
        int trc = crun_target_close(&T, timed_out || rc == -ETIMEDOUT, tmp, sizeof(tmp));
        if (trc && !rc) {
            rc = trc;
            snprintf(err, errlen, "%s", tmp);
        }
    }
    crun_corun_free(&C, &r->corun);
    if (T.hung) // a kernel is still running: its memory stays, the process's CUDA context takes it back
        return rc ? rc : -ETIMEDOUT;
    if (e1)
        cudaEventDestroy(e1);
    if (e0)
        cudaEventDestroy(e0);
    if (s_run)
        cudaStreamDestroy(s_run);
    if (stop_host)
        cudaFreeHost(stop_host);
    if (rounds_host)
        cudaFreeHost(rounds_host);
    if (samples_dev)
        cudaFree(samples_dev);
    if (dq)
        cudaFree(dq);
    if (lut)
        cudaFree(lut);
    return rc;
}
