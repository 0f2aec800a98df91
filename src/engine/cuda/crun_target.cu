/* SPDX-License-Identifier: BSD-3-Clause */
// crun_target.cu — what differs between the targets of the one cuda-run host driver (cuda_run.cu), behind
// one interface (crun.h, struct crun_target) and one ops table per kind (struct crun_target_ops, chosen once
// from the URI's row in nvme/scheme.h: tgt_table at the end):
//   gpu-emu://   the GPU-resident emulator (nvme/emu/gpu): rings and payload in GPU memory, registered as
//                the emulator's DMA windows (its IOMMU rule) before the queues; a GPU page's DMA address is
//                its device pointer; the emulator's persistent kernel starts before the engine's.
//   pci://, emu://?mode=thread   controllers the driver opens (nvme/gpuq_ctrl.h): queues created with
//                interrupts off, rings in host DMA memory registered Mapped, doorbells through
//                cudaHostRegisterIoMemory (emu://'s register window is ordinary memory: Mapped only), payload
//                in one pinned DMA object whose bus addresses fill the PRP lookup table. payload=gpu is
//                refused (below). CQs are written from outside the GPU (system-scope acquires), SQs live in
//                host memory (per-thread system fence + read-back of the last SQE before the doorbell).
// Teardown: the controller stops first (queues deleted, or the controller reset), then CUDA mappings,
// then memory; a kernel that may still run (hung) gets nothing freed under it.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <new>

#include "engine/cuda/crun.h"
#include "nvme/bar.h"
#include "nvme/gpuq_ctrl.h"
#include "nvme/nvme.h"
#include "nvme/nvme_cuda.cuh"
#include "nvme/nvme_gpuq.h"
#include "nvme/scheme.h"

#define CRUN_NSID_FIRST 0u // the first active namespace of each controller

static const char CRUN_GPU_PAYLOAD_MSG[] =
    "payload=gpu: the controller would need the bus (IOVA) addresses of GPU memory for its PRPs. Two ways "
    "exist and neither is reachable from this user-space driver: (1) export the allocation as a dma-buf "
    "(cuMemGetHandleForAddressRange, CUDA 11.7+ with the open GPU kernel module) and import it for the NVMe "
    "function's IOMMU domain -- VFIO type1 maps only page-backed process memory and this tree has no iommufd "
    "dma-buf importer; (2) nvidia-p2p (nvidia_p2p_get_pages), a kernel-only API that needs a kernel module. "
    "Use payload=host (pinned host memory mapped into the GPU), which works on vfio-pci and uio_pci_generic";

static int tgt_register(crun_target *T, void *p, size_t len, void **dev, const char *what, char *err, size_t errlen)
{
    cudaError_t ce = cudaHostRegister(p, len, cudaHostRegisterMapped);
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, what, err, errlen);
    T->registered.push_back(p);
    ce = cudaHostGetDevicePointer(dev, p, 0);
    return ce == cudaSuccess ? 0 : gemu_cuda_errno((int)ce, what, err, errlen);
}

// ---------------------------------------------------------------------------------------------- open
static int tgt_open_emu(crun_target *T, const nvme_cuda_run_params *p, char *err, size_t errlen)
{
    int rc = gemu_open(p->target, p->ndevs ? p->ndevs : CRUN_DEFAULT_NDEVS, &T->emu, err, errlen);
    if (rc)
        return rc;
    gemu *e = T->emu;
    T->ndevs = p->ndevs ? p->ndevs : e->ndev;
    if (T->ndevs > e->ndev) {
        snprintf(err, errlen, "ndevs=%u: the target has %u device(s) (ndev=%u in the URI)", T->ndevs, e->ndev, e->ndev);
        return -EINVAL;
    }
    if (p->iosize % e->lba_size) {
        snprintf(err, errlen, "iosize=%u: not a multiple of the LBA size %u", p->iosize, e->lba_size);
        return -EINVAL;
    }
    if (p->verify && !e->data) {
        snprintf(err, errlen, "verify: the target stores no data (data=none)");
        return -EINVAL;
    }
    T->lba_size = e->lba_size;
    T->ns_lbas = (uint64_t)e->ns_mib * GEMU_MIB / e->lba_size;
    T->scope = NVME_CUDA_SCOPE_GPU; // the emulator writes CQEs from this GPU (nvme_cuda.cuh)
    T->sq_host = false;
    return 0;
}

static int tgt_open_ctrl(crun_target *T, const nvme_cuda_run_params *p, char *err, size_t errlen)
{
    T->payload = p->payload && *p->payload ? p->payload : "host";
    int rc = nvme_target_open(p->target, &T->t, err, errlen);
    if (rc)
        return rc;
    const uint32_t nctrl = nvme_target_nctrl(T->t);
    T->ndevs = p->ndevs ? p->ndevs : nctrl;
    if (T->ndevs > nctrl) {
        snprintf(err, errlen, "ndevs=%u: the target has %u controller(s)", T->ndevs, nctrl);
        return -EINVAL;
    }
    T->ns_lbas = UINT64_MAX;
    for (uint32_t d = 0; d < T->ndevs; d++) { // every controller: one namespace, one LBA size for the run
        nvme_ctrl *c = nvme_target_ctrl(T->t, d);
        nvme_ns *ns = nvme_ctrl_ns_at(c, CRUN_NSID_FIRST);
        if (!ns || (T->lba_size && nvme_ns_lba_size(ns) != T->lba_size) || p->iosize % nvme_ns_lba_size(ns) ||
            p->iosize > nvme_ctrl_max_xfer(c)) {
            snprintf(err, errlen, "controller %u: %s", d,
                     !ns                                                    ? "has no active namespace"
                     : (T->lba_size && nvme_ns_lba_size(ns) != T->lba_size) ? "its LBA size differs from the others'"
                     : p->iosize % nvme_ns_lba_size(ns) ? "iosize is not a multiple of its LBA size"
                                                        : "iosize is above its largest transfer (MDTS)");
            return -EINVAL;
        }
        T->lba_size = nvme_ns_lba_size(ns);
        if (nvme_ns_nsze(ns) < T->ns_lbas)
            T->ns_lbas = nvme_ns_nsze(ns);
        if (p->qdepth + 1u > nvme_ctrl_max_depth(c) || p->nqueues > nvme_ctrl_max_qpairs(c)) {
            snprintf(err, errlen,
                     "controller %u: qdepth=%u needs %u entries and nqueues=%u queue pairs; it offers "
                     "%u entries and %u pairs",
                     d, p->qdepth, p->qdepth + 1u, p->nqueues, nvme_ctrl_max_depth(c), nvme_ctrl_max_qpairs(c));
            return -EINVAL;
        }
    }
    T->scope = NVME_CUDA_SCOPE_SYSTEM; // the controller writes CQEs over PCIe (nvme_cuda.cuh)
    T->sq_host = true;
    return 0;
}

static int tgt_precheck_emu(const nvme_cuda_run_params *p, crun_target_kind, char *err, size_t errlen)
{
    return nvme_cuda_target_check(p->target, p->ndevs ? p->ndevs : CRUN_DEFAULT_NDEVS, NULL, 0, err, errlen);
}

static int tgt_precheck_ctrl(const nvme_cuda_run_params *p, crun_target_kind kind, char *err, size_t errlen)
{
    const char *payload = p->payload && *p->payload ? p->payload : "host";
    if (!strcmp(payload, "gpu")) {
        snprintf(err, errlen, "%s", CRUN_GPU_PAYLOAD_MSG);
        return -ENOTSUP;
    }
    if (strcmp(payload, "host")) {
        snprintf(err, errlen, "payload='%s': must be host (pinned host memory) or gpu", payload);
        return -EINVAL;
    }
    if (kind == CRUN_TGT_CPU_EMU && !strstr(p->target, "mode=thread")) {
        snprintf(err, errlen,
                 "target=%s: GPU threads ring doorbells the inline emulator never sees; use "
                 "emu://?mode=thread&... (a service thread polls the doorbells) or gpu-emu://",
                 p->target);
        return -EINVAL;
    }
    return 0;
}

// The emulator's persistent grid, which must be resident beside the engine's (controllers: none).
static int tgt_grid_emu(crun_target *T, uint32_t *blocks, int *per_sm, char *err, size_t errlen)
{
    int rc = gemu_preload(T->emu, err, errlen); // loads its module now (lazy loading)
    if (!rc)
        rc = gemu_occupancy(T->emu, per_sm);
    *blocks = T->emu->blocks;
    return rc;
}

// --------------------------------------------------------------------------------------------- memory
// lut is sized (total / page entries) by crun_target_payload.
static int tgt_payload_emu(crun_target *T, const nvme_cuda_run_params *p, uint64_t total, uint8_t **buf,
                           std::vector<uint64_t> &lut, nvme_cuda_run_result *r, char *err, size_t errlen)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;
    if (p->buf) {
        if (p->buf_len < total + page) {
            snprintf(err, errlen, "buf: %zu bytes given, this run needs %llu (nvme_cuda_buf_size)", p->buf_len,
                     (unsigned long long)(total + page));
            return -EINVAL;
        }
    } else {
        cudaError_t ce = cudaMalloc((void **)&T->raw, total + page);
        if (ce == cudaSuccess)
            ce = cudaMemset(T->raw, 0, total + page);
        if (ce != cudaSuccess)
            return gemu_cuda_errno((int)ce, "allocating I/O buffers", err, errlen);
    }
    // the DMA address of a GPU page is its device pointer (identity lookup table)
    uint8_t *start = p->buf ? (uint8_t *)p->buf : T->raw;
    uint8_t *base = (uint8_t *)(((uintptr_t)start + page - 1u) & ~(uintptr_t)(page - 1u));
    r->buf_offset = (uint64_t)(base - start);
    for (size_t k = 0; k < lut.size(); k++)
        lut[k] = (uint64_t)(uintptr_t)(base + k * page);
    *buf = base;
    return gemu_dma_allow(T->emu, base, total); // the I/O buffers: a DMA window of the emulator
}

static int tgt_payload_ctrl(crun_target *T, const nvme_cuda_run_params *, uint64_t total, uint8_t **buf,
                            std::vector<uint64_t> &lut, nvme_cuda_run_result *r, char *err, size_t errlen)
{
    int rc = nvme_dma_alloc(T->t, total, &T->dma);
    if (rc) {
        snprintf(err, errlen, "allocating %llu bytes of DMA memory for the payload: %s", (unsigned long long)total,
                 strerror(-rc));
        return rc;
    }
    if ((rc = nvme_gpuq_lut(T->dma, lut.data(), lut.size()))) {
        snprintf(err, errlen, "payload: no bus address for some page");
        return rc;
    }
    r->buf_offset = 0;
    return tgt_register(T, nvme_dma_vaddr(T->dma), total, (void **)buf, "mapping the payload into the GPU", err,
                        errlen);
}

static int tgt_queues_emu(crun_target *T, const nvme_cuda_run_params *p, std::vector<crun_queue> &hq, char *err,
                          size_t errlen)
{
    const uint32_t nblk = (uint32_t)hq.size(), entries = p->qdepth + 1u; // lock-step: one round in flight
    const size_t sqb = (size_t)nblk * entries * sizeof(nvme_sqe), cqb = (size_t)nblk * entries * sizeof(nvme_cqe);
    cudaError_t ce = cudaMalloc((void **)&T->sq, sqb);
    if (ce == cudaSuccess)
        ce = cudaMemset(T->sq, 0, sqb);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&T->cq, cqb);
    if (ce == cudaSuccess)
        ce = cudaMemset(T->cq, 0, cqb); // phase 0: not new
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "allocating the rings", err, errlen);
    int rc = gemu_dma_allow(T->emu, T->sq, sqb); // the rings: DMA windows of the emulator
    if (!rc)
        rc = gemu_dma_allow(T->emu, T->cq, cqb);
    if (rc) {
        snprintf(err, errlen, "gpu-emu: registering the rings as DMA windows failed");
        return rc;
    }
    for (uint32_t b = 0; b < nblk; b++) {
        crun_queue &q = hq[b];
        q.sq = T->sq + (size_t)b * entries;
        q.cq = T->cq + (size_t)b * entries;
        q.entries = entries;
        q.dev = b / p->nqueues;
        q.qidx = b % p->nqueues;
        q.qid = (uint16_t)(q.qidx + 1u);
        volatile uint32_t *sdb, *cdb;
        if ((rc = gemu_add_queue(T->emu, q.dev, q.qid, q.sq, (nvme_cqe *)q.cq, entries, &sdb, &cdb, err, errlen)))
            return rc;
        q.sq_db = sdb;
        q.cq_db = cdb;
    }
    return 0;
}

static int tgt_queues_ctrl(crun_target *T, const nvme_cuda_run_params *p, std::vector<crun_queue> &hq, char *err,
                           size_t errlen)
{
    std::vector<uint8_t *> dev_bar(T->ndevs);
    int rc = 0;
    for (uint32_t d = 0; d < T->ndevs; d++) { // doorbells: one BAR per controller
        const nvme_bar *bar = nvme_ctrl_bar(nvme_target_ctrl(T->t, d));
        void *dp = nullptr;
        if (T->kind == CRUN_TGT_CPU_EMU) {
            rc = tgt_register(T, (void *)bar->base, bar->size, &dp, "registering the emulated BAR", err, errlen);
        } else {
            volatile void *vdp = nullptr;
            rc = nvme_cuda_map_bar((void *)bar->base, bar->size, &vdp, err, errlen);
            if (!rc)
                T->bars.push_back((void *)bar->base);
            dp = (void *)vdp;
        }
        if (rc)
            return rc;
        dev_bar[d] = (uint8_t *)dp;
    }
    for (uint32_t b = 0; b < hq.size(); b++) { // queue pairs (interrupts off), rings mapped into the GPU
        const uint32_t d = b / p->nqueues;
        nvme_gpuq_pair *qp = nullptr;
        if ((rc = nvme_gpuq_pair_create(nvme_target_ctrl(T->t, d), p->qdepth + 1u, &qp, err, errlen)))
            return rc;
        T->pairs.push_back(qp);
        void *rings = nullptr;
        if ((rc = tgt_register(T, qp->sq, qp->mem_len, &rings, "mapping queue rings into the GPU", err, errlen)))
            return rc;
        crun_queue &q = hq[b];
        q.sq = (nvme_sqe *)rings;
        q.cq = (const nvme_cqe *)((uint8_t *)rings + ((uint8_t *)qp->cq - (uint8_t *)qp->sq));
        q.sq_db = (volatile uint32_t *)(dev_bar[d] + qp->sq_db_off);
        q.cq_db = (volatile uint32_t *)(dev_bar[d] + qp->cq_db_off);
        q.entries = qp->entries;
        q.dev = d;
        q.qidx = b % p->nqueues;
        q.qid = qp->qid;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------- run and stop
static int tgt_start_emu(crun_target *T, char *err, size_t errlen)
{
    cudaStream_t st = NULL;
    cudaError_t ce = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    T->s_emu = st;
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "creating the emulator stream", err, errlen);
    int rc = gemu_start(T->emu, T->s_emu, err, errlen);
    T->emu_running = rc == 0;
    return rc;
}

int crun_target_stop(crun_target *T, char *err, size_t errlen)
{
    if (!T->emu_running)
        return 0;
    int rc = gemu_stop(T->emu, T->s_emu, gemu_steady_ns() + CRUN_STOP_GRACE_NS, err, errlen);
    if (rc == -ETIMEDOUT)
        T->hung = true;
    else
        T->emu_running = false;
    return rc;
}

// What the record says about the target, and the emulator's verdict on itself.
static int tgt_result_ctrl(crun_target *T, const nvme_cuda_run_params *p, nvme_cuda_run_result *r, char *, size_t)
{
    snprintf(r->profile, sizeof(r->profile), "%s", T->kind == CRUN_TGT_CPU_EMU ? "emu-thread" : "hardware");
    r->scale = 1.0;
    snprintf(r->payload, sizeof(r->payload), "%s", T->payload);
    snprintf(r->target_desc, sizeof(r->target_desc), "target=%s payload=%s queues=host-memory", p->target, T->payload);
    return 0;
}

static int tgt_result_emu(crun_target *T, const nvme_cuda_run_params *, nvme_cuda_run_result *r, char *err,
                          size_t errlen)
{
    const gemu *e = T->emu;
    snprintf(r->payload, sizeof(r->payload), "gpu");
    r->emu_blocks = e->blocks;
    r->emu_warps = e->warps;
    snprintf(r->profile, sizeof(r->profile), "%s", e->profile);
    r->scale = e->scale;
    r->ooo = e->ooo;
    gemu_describe(e, r->target_desc, sizeof(r->target_desc));
    gemu_stats es;
    int rc = gemu_counters(T->emu, &es, err, errlen);
    if (rc)
        return rc;
    nvme_cuda_emu_stats &s = r->emu;
    s.valid = true;
    s.fetched = es.fetched;
    s.completed = es.completed;
    s.errors = es.errors;
    s.dropped = es.dropped;
    s.cq_full_held = es.cq_full_held;
    s.idle_sweeps = es.idle_sweeps;
    s.late_ns_mean = es.completed ? (double)es.late_ns_sum / (double)es.completed : 0;
    s.late_ns_max = es.late_ns_max;
    s.sq_wait_mean = es.fetch_looks ? (double)es.sq_wait_sum / (double)es.fetch_looks : 0;
    s.sq_wait_max = es.sq_wait_max;
    s.sq_left_frac = es.sq_wait_sum ? (double)es.sq_left_sum / (double)es.sq_wait_sum : 0;
    s.warps_serving = es.warps_serving;
    s.busy_max = es.busy_max;
    s.busy_mean = es.busy_mean;
    s.headroom = es.busy_max > 0 ? 1.0 / es.busy_max : 0;
    const double lat = e->lat_ns * e->scale;
    s.fetch_late_ns_mean = es.fetched ? (double)es.fetch_late_ns_sum / (double)es.fetched : 0;
    s.timed = e->h.model.timed && lat > 0;
    s.limited = false; // decided by the engine against the round time (nvme_cuda_run, after crun_collect)
    return 0;
}

// ------------------------------------------------------------------------------------------- teardown
static int tgt_close_emu(crun_target *T, bool, char *, size_t)
{
    if (T->emu_running && !T->hung) {
        char tmp[NVME_CUDA_DESC_LEN];
        crun_target_stop(T, tmp, sizeof(tmp));
    }
    if (T->hung) { // a kernel may still run: free nothing it may touch; the context takes it at exit
        if (T->emu)
            T->emu->hung = true;
        gemu_close(T->emu);
        return -ETIMEDOUT;
    }
    if (T->s_emu)
        cudaStreamDestroy((cudaStream_t)T->s_emu);
    if (T->raw)
        cudaFree(T->raw);
    if (T->cq)
        cudaFree(T->cq);
    if (T->sq)
        cudaFree(T->sq);
    gemu_close(T->emu);
    return 0;
}

static int tgt_close_ctrl(crun_target *T, bool timed_out, char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = T->pairs.size(); i-- > 0;) { // 1. the controller stops: queues deleted or controller reset
        int q = nvme_gpuq_pair_quiesce(T->pairs[i], timed_out || T->hung);
        if (q && !rc) {
            rc = q;
            snprintf(err, errlen, "deleting GPU queue %zu failed (%s); %s", i, strerror(-q),
                     q == -EIO ? "the reset failed too: its memory was left allocated" : "the controller was reset");
        }
    }
    if (T->hung || rc == -EIO) // 2'. the GPU or the controller may still touch the memory: leave everything
        return rc ? rc : -ETIMEDOUT;
    for (size_t i = T->registered.size(); i-- > 0;) // 2. the GPU lets go of the host memory
        cudaHostUnregister(T->registered[i]);
    for (size_t i = T->bars.size(); i-- > 0;) {
        char tmp[NVME_CUDA_DESC_LEN];
        nvme_cuda_unmap_bar(T->bars[i], tmp, sizeof(tmp));
    }
    for (size_t i = T->pairs.size(); i-- > 0;) // 3. memory
        nvme_gpuq_pair_destroy(T->pairs[i], timed_out);
    T->pairs.clear();
    nvme_dma_free(T->dma);
    nvme_target_close(T->t);
    return rc;
}

// ---------------------------------------------------------------------------- the ops tables, by scheme
// NULL grid, start: nothing to do (a controller has no persistent grid and starts with its queues).
static const crun_target_ops tgt_emu_ops = {tgt_precheck_emu, tgt_open_emu,  tgt_grid_emu,   tgt_payload_emu,
                                            tgt_queues_emu,   tgt_start_emu, tgt_result_emu, tgt_close_emu};
static const crun_target_ops tgt_ctrl_ops = {tgt_precheck_ctrl, tgt_open_ctrl, nullptr,         tgt_payload_ctrl,
                                             tgt_queues_ctrl,   nullptr,       tgt_result_ctrl, tgt_close_ctrl};

// cuda-run's targets: the rows of nvme/scheme.h with NVME_SCHEME_CUDA_RUN, each with its kind and ops.
static const struct {
    nvme_scheme_kind scheme;
    crun_target_kind kind;
    const crun_target_ops *ops;
} tgt_table[] = {
    {NVME_SCHEME_GPU_EMU, CRUN_TGT_GPU_EMU, &tgt_emu_ops},
    {NVME_SCHEME_PCI, CRUN_TGT_PCI, &tgt_ctrl_ops},
    {NVME_SCHEME_EMU, CRUN_TGT_CPU_EMU, &tgt_ctrl_ops},
};

static int tgt_kind(const char *target, crun_target_kind *kind, const crun_target_ops **ops, char *err, size_t errlen)
{
    const nvme_scheme *row = nvme_scheme_of_uri(target);
    for (const auto &e : tgt_table) {
        if (row && (row->flags & NVME_SCHEME_CUDA_RUN) && row->kind == e.scheme) {
            *kind = e.kind;
            *ops = e.ops;
            return 0;
        }
    }
    char list[NVME_SCHEME_LIST_LEN];
    snprintf(err, errlen, "target '%s': cuda-run drives %s (emu:// with mode=thread)", target,
             nvme_scheme_list(NVME_SCHEME_CUDA_RUN, 0, list, sizeof(list)));
    return -EINVAL;
}

// ------------------------------------------------------------------------ crun.h: one call, one ops entry
int crun_target_precheck(const nvme_cuda_run_params *p, char *err, size_t errlen)
{
    crun_target_kind kind;
    const crun_target_ops *ops = nullptr;
    int rc = tgt_kind(p->target, &kind, &ops, err, errlen);
    return rc ? rc : ops->precheck(p, kind, err, errlen);
}

int crun_target_open(crun_target *T, const nvme_cuda_run_params *p, char *err, size_t errlen)
{
    int rc = crun_target_precheck(p, err, errlen);
    if (!rc)
        rc = tgt_kind(p->target, &T->kind, &T->ops, err, errlen);
    if (rc)
        return rc;
    return T->ops->open(T, p, err, errlen);
}

int crun_target_grid(crun_target *T, uint32_t *blocks, int *per_sm, char *err, size_t errlen)
{
    *blocks = 0;
    *per_sm = 0;
    return T->ops->grid ? T->ops->grid(T, blocks, per_sm, err, errlen) : 0;
}

int crun_target_payload(crun_target *T, const nvme_cuda_run_params *p, uint64_t total, uint8_t **buf,
                        std::vector<uint64_t> &lut, nvme_cuda_run_result *r, char *err, size_t errlen)
{
    lut.resize(total / NVME_GPUQ_PAGE_SIZE);
    return T->ops->payload(T, p, total, buf, lut, r, err, errlen);
}

int crun_target_queues(crun_target *T, const nvme_cuda_run_params *p, std::vector<crun_queue> &hq, char *err,
                       size_t errlen)
{
    return T->ops->queues(T, p, hq, err, errlen);
}

int crun_target_start(crun_target *T, char *err, size_t errlen)
{
    return T->ops->start ? T->ops->start(T, err, errlen) : 0;
}

int crun_target_result(crun_target *T, const nvme_cuda_run_params *p, nvme_cuda_run_result *r, char *err, size_t errlen)
{
    r->ndevs = T->ndevs;
    return T->ops->result(T, p, r, err, errlen);
}

// Teardown in the only safe order (each ops' close); a target never opened holds nothing.
int crun_target_close(crun_target *T, bool timed_out, char *err, size_t errlen)
{
    if (!T->ops)
        return T->hung ? -ETIMEDOUT : 0;
    return T->ops->close(T, timed_out, err, errlen);
}
