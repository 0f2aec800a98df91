/* SPDX-License-Identifier: BSD-3-Clause */
// cuda_pci.cu — cuda-run on controllers the driver opens (pci:// on vfio-pci or uio_pci_generic; also
// emu://?mode=thread, the CPU emulator with its own service thread, as a stand-in controller for GPU
// tests without NVMe hardware). The plain C part (nvme/gpuq_ctrl.h) creates the I/O queue pairs with
// interrupts off and host-memory rings; this file maps what the GPU threads touch:
//   rings:    the pair's DMA block, cudaHostRegister(cudaHostRegisterMapped) -> device pointers
//   doorbells: BAR0, cudaHostRegister(cudaHostRegisterIoMemory | Mapped) (nvme_cuda_map_bar); emu://'s
//             register window is ordinary memory and is registered Mapped only
//   payload:  one DMA object of the target in pinned host memory, registered Mapped; its PRP lookup table
//             holds the bus address of every page (nvme_gpuq_lut). payload=gpu is refused (see below).
// The CQs are written from outside the GPU, so the kernel polls them with system-scope acquires.
// Teardown: the kernel is stopped (watchdog), then every queue is deleted (or the controller reset, after
// a timeout) BEFORE any memory is unregistered or freed; if the kernel does not end, nothing it may touch
// is freed at all. CUDA errors become errno at this boundary (gemu_cuda_errno, with the CUDA name).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <string>
#include <vector>

#include "nvme/bar.h"
#include "nvme/cuda/crun.h"
#include "nvme/cuda/cuda_api.h"
#include "nvme/cuda/gpu_emu.h"
#include "nvme/cuda/nvme_cuda.cuh"
#include "nvme/cuda/nvme_gpuq.h"
#include "nvme/gpuq_ctrl.h"
#include "nvme/nvme.h"

#define CPCI_NSID_FIRST 0u /* the first active namespace of each controller */

static const char CPCI_GPU_PAYLOAD_MSG[] =
    "payload=gpu: the controller would need the bus (IOVA) addresses of GPU memory for its PRPs. Two ways "
    "exist and neither is reachable from this user-space driver: (1) export the allocation as a dma-buf "
    "(cuMemGetHandleForAddressRange, CUDA 11.7+ with the open GPU kernel module) and import it for the NVMe "
    "function's IOMMU domain -- VFIO type1 maps only page-backed process memory and this tree has no iommufd "
    "dma-buf importer; (2) nvidia-p2p (nvidia_p2p_get_pages), a kernel-only API that needs a kernel module. "
    "Use payload=host (pinned host memory mapped into the GPU), which works on vfio-pci and uio_pci_generic";

struct cpci_state {
    nvme_target *t = nullptr;
    std::vector<nvme_gpuq_pair *> pairs; // one per block, device-major
    std::vector<void *> registered;      // host ranges registered with CUDA (unregistered in reverse)
    std::vector<void *> bars;            // BARs mapped for the GPU
    nvme_dma *payload = nullptr;
};

static int cpci_register(cpci_state &S, void *p, size_t len, void **dev, const char *what, char *err, size_t errlen)
{
    cudaError_t ce = cudaHostRegister(p, len, cudaHostRegisterMapped);
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, what, err, errlen);
    S.registered.push_back(p);
    ce = cudaHostGetDevicePointer(dev, p, 0);
    return ce == cudaSuccess ? 0 : gemu_cuda_errno((int)ce, what, err, errlen);
}

// Teardown in the only safe order: queues deleted (or the controller reset) first, then CUDA mappings,
// then memory. hung: a kernel may still be running -> delete/reset, but unmap and free nothing.
static int cpci_teardown(cpci_state &S, bool timed_out, bool hung, char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = S.pairs.size(); i-- > 0;) { // 1. the controller stops: queues deleted or controller reset
        int r = nvme_gpuq_pair_quiesce(S.pairs[i], timed_out || hung);
        if (r && !rc) {
            rc = r;
            snprintf(err, errlen, "deleting GPU queue %zu failed (%s); %s", i, strerror(-r),
                     r == -EIO ? "the reset failed too: its memory was left allocated" : "the controller was reset");
        }
    }
    if (hung || rc == -EIO) // 2'. the GPU or the controller may still touch the memory: leave everything
        return rc ? rc : -ETIMEDOUT;
    for (size_t i = S.registered.size(); i-- > 0;) // 2. the GPU lets go of the host memory
        cudaHostUnregister(S.registered[i]);
    for (size_t i = S.bars.size(); i-- > 0;) {
        char tmp[NVME_CUDA_DESC_LEN];
        nvme_cuda_unmap_bar(S.bars[i], tmp, sizeof(tmp));
    }
    for (size_t i = S.pairs.size(); i-- > 0;) // 3. memory
        nvme_gpuq_pair_destroy(S.pairs[i], timed_out);
    S.pairs.clear();
    nvme_dma_free(S.payload);
    nvme_target_close(S.t);
    return rc;
}

int nvme_cuda_run_pci(const nvme_cuda_run_params *p, nvme_cuda_run_result *r, uint64_t *queue_rounds,
                      size_t nqueue_rounds, volatile int *stop, char *err, size_t errlen)
{
    const bool emu = !strncmp(p->target, "emu://", 6);
    const char *payload = p->payload && *p->payload ? p->payload : "host";
    if (!strcmp(payload, "gpu")) {
        snprintf(err, errlen, "%s", CPCI_GPU_PAYLOAD_MSG);
        return -ENOTSUP;
    }
    if (strcmp(payload, "host")) {
        snprintf(err, errlen, "payload='%s': must be host (pinned host memory) or gpu", payload);
        return -EINVAL;
    }
    if (emu && !strstr(p->target, "mode=thread")) {
        snprintf(err, errlen,
                 "target=%s: GPU threads ring doorbells the inline emulator never sees; use "
                 "emu://?mode=thread&... (a service thread polls the doorbells) or gpu-emu://",
                 p->target);
        return -EINVAL;
    }
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
    cudaError_t ce = cudaSetDevice(p->gpu);
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "cudaSetDevice", err, errlen);
    int rc = nvme_cuda_device_info(p->gpu, &r->gpu, err, errlen);
    if (rc)
        return rc;

    cpci_state S;
    rc = nvme_target_open(p->target, &S.t, err, errlen);
    if (rc)
        return rc;
    const uint32_t nctrl = nvme_target_nctrl(S.t);
    const uint32_t ndevs = p->ndevs ? p->ndevs : nctrl, nblk = ndevs * p->nqueues;
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;
    std::vector<crun_queue> hq(nblk);
    std::vector<uint64_t> hlut;
    crun_queue *dq = nullptr;
    uint64_t *lut = nullptr;
    unsigned long long *rounds_host = nullptr, *rounds_dev = nullptr;
    int *stop_host = nullptr, *stop_dev = nullptr;
    cudaStream_t s_run = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    bool launched = false, hung = false, timed_out = false;
    crun_params P;
    memset(&P, 0, sizeof(P));
    crun_window win{};
    uint64_t stride = 0, total = 0, lba_count = UINT64_MAX;
    uint32_t lba_size = 0;
    void *buf_dev = nullptr;
    int bps = 0;
#define CPCI_CUDA(call, what)                                                                                          \
    do {                                                                                                               \
        cudaError_t ce_ = (call);                                                                                      \
        if (ce_ != cudaSuccess) {                                                                                      \
            rc = gemu_cuda_errno((int)ce_, what, err, errlen);                                                         \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)

    if (ndevs > nctrl) {
        snprintf(err, errlen, "ndevs=%u: the target has %u controller(s)", ndevs, nctrl);
        rc = -EINVAL;
        goto out;
    }
    for (uint32_t d = 0; d < ndevs; d++) { // every controller: one namespace, one LBA size for the run
        nvme_ctrl *c = nvme_target_ctrl(S.t, d);
        nvme_ns *ns = nvme_ctrl_ns_at(c, CPCI_NSID_FIRST);
        if (!ns || (lba_size && nvme_ns_lba_size(ns) != lba_size) || p->iosize % nvme_ns_lba_size(ns) ||
            p->iosize > nvme_ctrl_max_xfer(c)) {
            snprintf(err, errlen, "controller %u: %s", d,
                     !ns                                              ? "has no active namespace"
                     : (lba_size && nvme_ns_lba_size(ns) != lba_size) ? "its LBA size differs from the others'"
                     : p->iosize % nvme_ns_lba_size(ns)               ? "iosize is not a multiple of its LBA size"
                                                                      : "iosize is above its largest transfer (MDTS)");
            rc = -EINVAL;
            goto out;
        }
        lba_size = nvme_ns_lba_size(ns);
        if (nvme_ns_nsze(ns) < lba_count)
            lba_count = nvme_ns_nsze(ns);
        if (p->qdepth + 1u > nvme_ctrl_max_depth(c) || p->nqueues > nvme_ctrl_max_qpairs(c)) {
            snprintf(err, errlen,
                     "controller %u: qdepth=%u needs %u entries and nqueues=%u queue pairs; it offers "
                     "%u entries and %u pairs",
                     d, p->qdepth, p->qdepth + 1u, p->nqueues, nvme_ctrl_max_depth(c), nvme_ctrl_max_qpairs(c));
            rc = -EINVAL;
            goto out;
        }
    }
    if (p->lba_count && p->lba_count <= lba_count)
        lba_count = p->lba_count;
    if (lba_count < p->iosize / lba_size) {
        snprintf(err, errlen, "lba_count=%llu: must hold one I/O", (unsigned long long)lba_count);
        rc = -EINVAL;
        goto out;
    }
    rc = crun_preload(p->qdepth, &bps, err, errlen);
    if (rc)
        goto out;
    if ((double)nblk > (double)bps * r->gpu.sms) {
        snprintf(err, errlen,
                 "the run needs %u blocks of %u threads resident at once; %s holds %d per SM on %d SMs. "
                 "Lower qdepth, nqueues or ndevs",
                 nblk, p->qdepth, r->gpu.name, bps, r->gpu.sms);
        rc = -E2BIG;
        goto out;
    }

    // doorbells: one BAR per controller
    {
        std::vector<uint8_t *> dev_bar(ndevs);
        for (uint32_t d = 0; d < ndevs; d++) {
            const nvme_bar *bar = nvme_ctrl_bar(nvme_target_ctrl(S.t, d));
            void *dp = nullptr;
            if (emu) {
                rc = cpci_register(S, (void *)bar->base, bar->size, &dp, "registering the emulated BAR", err, errlen);
            } else {
                volatile void *vdp = nullptr;
                rc = nvme_cuda_map_bar((void *)bar->base, bar->size, &vdp, err, errlen);
                if (!rc)
                    S.bars.push_back((void *)bar->base);
                dp = (void *)vdp;
            }
            if (rc)
                goto out;
            dev_bar[d] = (uint8_t *)dp;
        }
        // queue pairs (interrupts off) with their rings mapped into the GPU
        for (uint32_t b = 0; b < nblk; b++) {
            const uint32_t d = b / p->nqueues;
            nvme_gpuq_pair *qp = nullptr;
            rc = nvme_gpuq_pair_create(nvme_target_ctrl(S.t, d), p->qdepth + 1u, &qp, err, errlen);
            if (rc)
                goto out;
            S.pairs.push_back(qp);
            void *rings = nullptr;
            rc = cpci_register(S, qp->sq, qp->mem_len, &rings, "mapping queue rings into the GPU", err, errlen);
            if (rc)
                goto out;
            crun_queue &q = hq[b];
            memset(&q, 0, sizeof(q));
            q.sq = (nvme_sqe *)rings;
            q.cq = (const nvme_cqe *)((uint8_t *)rings + ((uint8_t *)qp->cq - (uint8_t *)qp->sq));
            q.sq_db = (volatile uint32_t *)(dev_bar[d] + qp->sq_db_off);
            q.cq_db = (volatile uint32_t *)(dev_bar[d] + qp->cq_db_off);
            q.entries = qp->entries;
            q.dev = d;
            q.qidx = b % p->nqueues;
            q.qid = qp->qid;
        }
    }
    // payload in pinned host memory, its bus addresses in the PRP lookup table
    total = nvme_cuda_buf_size(p->iosize, p->qdepth, p->nqueues, ndevs, &stride) - page;
    rc = nvme_dma_alloc(S.t, total, &S.payload);
    if (rc) {
        snprintf(err, errlen, "allocating %llu bytes of DMA memory for the payload: %s", (unsigned long long)total,
                 strerror(-rc));
        goto out;
    }
    hlut.resize(total / page);
    rc = nvme_gpuq_lut(S.payload, hlut.data(), hlut.size());
    if (rc) {
        snprintf(err, errlen, "payload: no bus address for some page");
        goto out;
    }
    rc = cpci_register(S, nvme_dma_vaddr(S.payload), total, &buf_dev, "mapping the payload into the GPU", err, errlen);
    if (rc)
        goto out;
    r->buf_offset = 0;
    r->buf_stride = stride;
    CPCI_CUDA(cudaMalloc((void **)&lut, hlut.size() * sizeof(uint64_t)), "allocating the PRP lookup table");
    CPCI_CUDA(cudaMemcpy(lut, hlut.data(), hlut.size() * sizeof(uint64_t), cudaMemcpyHostToDevice),
              "uploading the PRP lookup table");
    CPCI_CUDA(cudaMalloc((void **)&dq, nblk * sizeof(crun_queue)), "allocating the queue table");
    CPCI_CUDA(cudaMemcpy(dq, hq.data(), nblk * sizeof(crun_queue), cudaMemcpyHostToDevice),
              "uploading the queue table");
    CPCI_CUDA(cudaHostAlloc((void **)&rounds_host, nblk * sizeof(unsigned long long), cudaHostAllocMapped),
              "allocating mapped round counters");
    memset(rounds_host, 0, nblk * sizeof(unsigned long long));
    CPCI_CUDA(cudaHostGetDevicePointer((void **)&rounds_dev, rounds_host, 0), "mapping round counters");
    CPCI_CUDA(cudaHostAlloc((void **)&stop_host, sizeof(int), cudaHostAllocMapped), "allocating the stop flag");
    *stop_host = 0;
    CPCI_CUDA(cudaHostGetDevicePointer((void **)&stop_dev, stop_host, 0), "mapping the stop flag");
    CPCI_CUDA(cudaStreamCreateWithFlags(&s_run, cudaStreamNonBlocking), "creating the engine stream");
    CPCI_CUDA(cudaEventCreate(&e0), "creating events");
    CPCI_CUDA(cudaEventCreate(&e1), "creating events");

    P.queues = dq;
    P.rounds = rounds_dev;
    P.stop = stop_dev;
    P.buf = (uint8_t *)buf_dev;
    P.stride = stride;
    P.span = (p->iosize + page - 1u) / page * page;
    P.lut = lut;
    P.lut_pages = hlut.size();
    P.qdepth = p->qdepth;
    P.nqueues = p->nqueues;
    P.iosize = p->iosize;
    P.nlb = p->iosize / lba_size;
    P.lba_size = lba_size;
    P.random = p->rw == NVME_CUDA_RANDREAD || p->rw == NVME_CUDA_RANDWRITE;
    P.write = p->rw == NVME_CUDA_WRITE || p->rw == NVME_CUDA_RANDWRITE;
    P.verify = p->verify;
    P.readback = p->readback;
    P.seed = p->seed;
    P.nslots = lba_count / P.nlb;
    P.max_rounds = p->rounds;
    P.timeout_ns = p->timeout_ns ? p->timeout_ns : NVME_CUDA_DEFAULT_TIMEOUT_NS;
    P.scope = NVME_CUDA_SCOPE_SYSTEM; // the controller writes CQEs over PCIe (nvme_cuda.cuh)

    CPCI_CUDA(cudaEventRecord(e0, s_run), "recording the start event");
    rc = crun_launch(&P, nblk, s_run, err, errlen);
    if (rc)
        goto out;
    launched = true;
    CPCI_CUDA(cudaEventRecord(e1, s_run), "recording the end event");
    rc = crun_drive(&P, p, nblk, rounds_host, stop_host, stop, e1, &win, err, errlen);
    if (rc) {
        hung = rc == -ETIMEDOUT;
        goto out;
    }
    launched = false;
    {
        float ms = 0;
        CPCI_CUDA(cudaEventElapsedTime(&ms, e0, e1), "reading the kernel time");
        r->kernel_s = ms / 1e3;
        CPCI_CUDA(cudaMemcpy(hq.data(), dq, nblk * sizeof(crun_queue), cudaMemcpyDeviceToHost),
                  "reading queue results");
        r->ndevs = ndevs;
        snprintf(r->profile, sizeof(r->profile), "%s", emu ? "emu-thread" : "hardware");
        r->scale = 1.0;
        snprintf(r->payload, sizeof(r->payload), "%s", payload);
        snprintf(r->target_desc, sizeof(r->target_desc), "target=%s payload=%s queues=host-memory", p->target, payload);
        rc = crun_collect(&P, hq.data(), nblk, p, r, queue_rounds, nqueue_rounds, stop && *stop, err, errlen);
        timed_out = rc == -ETIMEDOUT || rc == -EPROTO;
        crun_window_result(&win, p, r);
    }

out:
    if (launched && !hung && stop_host) {
        *(volatile int *)stop_host = 1;
        char tmp[NVME_CUDA_DESC_LEN];
        hung = gemu_wait_event(e1, gemu_steady_ns() + P.timeout_ns + CRUN_STOP_GRACE_NS, "the cuda-run kernel", tmp,
                               sizeof(tmp)) == -ETIMEDOUT;
    }
    {
        char tmp[NVME_CUDA_DESC_LEN] = "";
        int trc = cpci_teardown(S, timed_out || rc == -ETIMEDOUT, hung, tmp, sizeof(tmp));
        if (trc && !rc) {
            rc = trc;
            snprintf(err, errlen, "%s", tmp);
        }
    }
    if (hung)
        return rc ? rc : -ETIMEDOUT; // the kernel's own memory stays too
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
    if (dq)
        cudaFree(dq);
    if (lut)
        cudaFree(lut);
    return rc;
#undef CPCI_CUDA
}
