/* SPDX-License-Identifier: BSD-3-Clause */
// gpu_emu.cu — the GPU-resident emulated NVMe controller (gpu-emu://): a persistent kernel in which each
// warp serves queue pairs: it reads the SQ tail doorbell word, fetches up to 32 SQEs at once (one per
// lane), validates them with the CPU emulator's status codes, applies the device model as batch GCRA
// reservations, copies payloads warp-cooperatively between the namespace and the PRP-addressed buffers,
// and posts due completions (in order, or reversed per batch with ooo=1) with the right phase tag.
// Host side: URI parsing, allocation, launch, stop, teardown in reverse. See gpu_emu.h.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <new>
#include <vector>

#include "nvme/cuda/gemu_plan.h"
#include "nvme/cuda/gpu_emu.h"
#include "nvme/cuda/nvme_cuda.cuh"
#include "nvme/cuda/nvme_gpuq.h"
#include "nvme/emu/profiles.h"
#include "nvme/uri.h"

#define GEMU_ST(sct, sc)         ((uint16_t)(((sct) << NVME_CQE_SCT_SHIFT) | ((sc) << NVME_CQE_SC_SHIFT)))
#define GEMU_ST_DNR(sct, sc)     ((uint16_t)(GEMU_ST(sct, sc) | NVME_CQE_DNR))
#define GEMU_FULL_MASK           0xffffffffu
#define GEMU_NSID                1u // one namespace per emulated controller
#define GEMU_NSID_ALL            0xffffffffu
#define GEMU_VEC                 16u // bytes per vector copy
#define GEMU_WORD                4u  // bytes per scalar copy (PRPs are dword aligned)
#define GEMU_CQE_W3_OFF          12u
#define GEMU_IDLE_BACKOFF_MAX_NS 256u // an idle emulator warp sleeps at most this long between sweeps

#define GEMU_CHECK(call, what)                                                                                         \
    do {                                                                                                               \
        cudaError_t ce_ = (call);                                                                                      \
        if (ce_ != cudaSuccess)                                                                                        \
            return gemu_cuda_errno((int)ce_, what, err, errlen);                                                       \
    } while (0)

// ------------------------------------------------------------------------------------------ device code
static __device__ __forceinline__ bool gemu_in_window(const gemu_shared *g, uint64_t addr, uint64_t len)
{
    return addr >= g->dma_lo && addr + len >= addr && addr + len <= g->dma_hi;
}

static __device__ __forceinline__ uint64_t gemu_ld64(const uint64_t *p)
{
    return __ldcv(reinterpret_cast<const unsigned long long *>(p));
}

// PRP rules of the CPU emulator (io.c), minus chained lists (refused with Invalid Field).
static __device__ uint16_t gemu_prp_check(const gemu_shared *g, uint64_t prp1, uint64_t prp2, uint64_t len)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE, pmask = page - 1u;
    if (prp1 & (NVME_PRP_ALIGN - 1u))
        return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
    uint64_t n = page - (prp1 & pmask);
    if (n > len)
        n = len;
    if (!prp1 || !gemu_in_window(g, prp1, n))
        return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
    uint64_t rem = len - n;
    if (!rem)
        return 0;
    if (rem <= page) {
        if (prp2 & pmask)
            return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
        if (!prp2 || !gemu_in_window(g, prp2, rem))
            return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
        return 0;
    }
    if (prp2 & (NVME_PRP_ENTRY_SIZE - 1u))
        return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
    uint64_t nent = (rem + pmask) / page, room = (page - (prp2 & pmask)) / NVME_PRP_ENTRY_SIZE;
    if (nent > room)
        return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD); // would need a chained list
    if (!prp2 || !gemu_in_window(g, prp2, nent * NVME_PRP_ENTRY_SIZE))
        return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
    const uint64_t *list = reinterpret_cast<const uint64_t *>(prp2);
    for (uint64_t i = 0; i < nent; i++) {
        uint64_t e = gemu_ld64(list + i), sz = rem < page ? rem : page;
        if (e & pmask)
            return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
        if (!e || !gemu_in_window(g, e, sz))
            return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
        rem -= sz;
    }
    return 0;
}

// Validate one NVM command; on success *len is the payload and *off its namespace byte offset.
static __device__ uint16_t gemu_check(const gemu_shared *g, const gemu_dev *d, const nvme_sqe &c, uint64_t *len,
                                      uint64_t *off)
{
    *len = 0;
    *off = 0;
    if (c.flags & (NVME_SQE_FUSE_MASK | NVME_SQE_PSDT_MASK))
        return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
    switch (c.opc) {
    case NVME_CMD_READ:
    case NVME_CMD_WRITE: {
        if (c.nsid != GEMU_NSID)
            return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        uint64_t slba = c.cdw10 | ((uint64_t)c.cdw11 << 32);
        uint64_t nlb = (c.cdw12 & NVME_RW_NLB_MASK) + 1u;
        if (!(slba < d->nlb && nlb <= d->nlb - slba))
            return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
        uint64_t l = nlb << d->lba_shift;
        if (g->mdts_bytes && l > g->mdts_bytes)
            return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
        uint16_t st = gemu_prp_check(g, c.prp1, c.prp2, l);
        if (st)
            return st;
        *len = l;
        *off = slba << d->lba_shift;
        return 0;
    }
    case NVME_CMD_FLUSH:
        if (c.nsid != GEMU_NSID && c.nsid != GEMU_NSID_ALL)
            return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        return 0;
    default:
        return GEMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
    }
}

// Segment k of a validated transfer: host address and length.
static __device__ void gemu_seg(uint64_t prp1, uint64_t prp2, uint64_t len, uint64_t k, uint64_t *addr, uint64_t *n)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE, pmask = page - 1u;
    uint64_t n0 = page - (prp1 & pmask);
    if (n0 > len)
        n0 = len;
    if (k == 0) {
        *addr = prp1;
        *n = n0;
        return;
    }
    uint64_t rem = len - n0;
    if (rem <= page) {
        *addr = prp2;
        *n = rem;
        return;
    }
    *addr = gemu_ld64(reinterpret_cast<const uint64_t *>(prp2) + (k - 1u));
    uint64_t left = rem - (k - 1u) * page;
    *n = left < page ? left : page;
}

static __device__ uint64_t gemu_nsegs(uint64_t prp1, uint64_t len)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE, pmask = page - 1u;
    uint64_t n0 = page - (prp1 & pmask);
    if (n0 >= len)
        return 1;
    return 1u + (len - n0 + pmask) / page;
}

// The warp copies n elements of T; loads bypass L1 (the other side was written by another SM). Each lane
// keeps GEMU_COPY_UNROLL loads in flight, so one warp moves GEMU_COPY_UNROLL x 32 x sizeof(T) bytes per
// memory latency instead of 32 x sizeof(T).
#define GEMU_COPY_UNROLL 8u
template <typename T>
static __device__ __forceinline__ void gemu_warp_copy_t(T *d, const T *s, uint64_t n, unsigned lane)
{
    uint64_t i = lane;
    for (; i + (GEMU_COPY_UNROLL - 1u) * GEMU_WARP < n; i += GEMU_COPY_UNROLL * GEMU_WARP) {
        T t[GEMU_COPY_UNROLL];
#pragma unroll
        for (unsigned u = 0; u < GEMU_COPY_UNROLL; u++)
            t[u] = __ldcg(s + i + u * GEMU_WARP);
#pragma unroll
        for (unsigned u = 0; u < GEMU_COPY_UNROLL; u++)
            d[i + u * GEMU_WARP] = t[u];
    }
    for (; i < n; i += GEMU_WARP)
        d[i] = __ldcg(s + i);
}

static __device__ void gemu_warp_copy(uint8_t *dst, const uint8_t *src, uint64_t n, unsigned lane)
{
    if (!((uintptr_t)dst % GEMU_VEC) && !((uintptr_t)src % GEMU_VEC) && !(n % GEMU_VEC))
        gemu_warp_copy_t(reinterpret_cast<uint4 *>(dst), reinterpret_cast<const uint4 *>(src), n / GEMU_VEC, lane);
    else
        gemu_warp_copy_t(reinterpret_cast<uint32_t *>(dst), reinterpret_cast<const uint32_t *>(src), n / GEMU_WORD,
                         lane);
}

static __device__ __forceinline__ uint64_t gemu_gcra(unsigned long long *tat, uint64_t t, uint64_t cost)
{
    unsigned long long old = *reinterpret_cast<volatile unsigned long long *>(tat);
    for (;;) {
        unsigned long long s = old > t ? old : t;
        unsigned long long prev = atomicCAS(tat, old, s + cost);
        if (prev == old)
            return s;
        old = prev;
    }
}

static __device__ __forceinline__ uint64_t gemu_max(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

// Exclusive prefix sum over the warp.
static __device__ __forceinline__ uint64_t gemu_excl_scan(uint64_t v, unsigned lane, uint64_t *total)
{
    uint64_t x = v;
    for (unsigned d = 1; d < GEMU_WARP; d <<= 1) {
        uint64_t y = __shfl_up_sync(GEMU_FULL_MASK, x, d);
        if (lane >= d)
            x += y;
    }
    *total = __shfl_sync(GEMU_FULL_MASK, x, GEMU_WARP - 1u);
    return x - v;
}

// Serve one queue once; returns true when it fetched or completed anything (the idle backoff resets).
static __device__ bool gemu_serve(gemu_shared *g, gemu_queue *q, unsigned lane, uint64_t epoch)
{
    const uint32_t entries = q->entries;
    gemu_dev *d = &g->devs[q->dev];
    const gemu_model &m = g->model;

    // ---- fetch
    uint32_t db = lane == 0 ? *q->sq_db : 0u;
    db = __shfl_sync(GEMU_FULL_MASK, db, 0);
    const uint64_t head = q->sq_head;
    const uint32_t hslot = (uint32_t)(head % entries);
    uint32_t avail = db < entries ? (db + entries - hslot) % entries : 0u; // a wild doorbell value is ignored
    uint64_t room = entries - (q->pend_tail - q->pend_head);
    uint32_t n = avail < GEMU_WARP ? avail : GEMU_WARP;
    if (n > room)
        n = (uint32_t)room;
    if (n) {
        __threadfence();        // the SQEs were published before the doorbell
        alignas(16) nvme_sqe c; // moved as four 16-byte vectors
        uint16_t status = 0;
        uint64_t len = 0, off = 0;
        bool act = lane < n, drop = false;
        if (act) {
            const uint4 *src = reinterpret_cast<const uint4 *>(q->sq + (hslot + lane) % entries);
            uint4 *dst = reinterpret_cast<uint4 *>(&c);
            for (unsigned v = 0; v < NVME_CUDA_SQE_VEC; v++)
                dst[v] = __ldcv(src + v);
            status = gemu_check(g, d, c, &len, &off);
            drop = g->drop_nth && q->fetched + lane + 1u == g->drop_nth;
        } else {
            memset(&c, 0, sizeof(c));
        }
        // device model: batch GCRA, in lane order
        uint64_t due = 0;
        if (m.timed) {
            uint64_t now = (nvme_cuda_now_ns() - epoch) << GEMU_FP_SHIFT;
            uint64_t t = now;
            if (m.queue_gap_fp) {
                uint64_t s = gemu_max(now, q->q_tat);
                t = s + lane * m.queue_gap_fp;
                if (lane == 0)
                    q->q_tat = s + n * m.queue_gap_fp;
            }
            if (m.dev_gap_fp) {
                uint64_t s = 0, t0 = __shfl_sync(GEMU_FULL_MASK, t, 0);
                if (lane == 0)
                    s = gemu_gcra(&d->iops_tat, t0, n * m.dev_gap_fp);
                s = __shfl_sync(GEMU_FULL_MASK, s, 0);
                t = gemu_max(t, s + lane * m.dev_gap_fp);
            }
            uint64_t bytes = act && !status ? len : 0, total = 0;
            uint64_t excl = gemu_excl_scan(bytes, lane, &total);
            if (m.dev_byte_fp && total) {
                uint64_t s = 0, t0 = __shfl_sync(GEMU_FULL_MASK, t, 0);
                if (lane == 0)
                    s = gemu_gcra(&d->bw_tat, t0, total * m.dev_byte_fp);
                s = __shfl_sync(GEMU_FULL_MASK, s, 0);
                t = gemu_max(t, s + excl * m.dev_byte_fp);
            }
            if (m.link_byte_fp && total) {
                uint64_t s = 0, t0 = __shfl_sync(GEMU_FULL_MASK, t, 0);
                if (lane == 0)
                    s = gemu_gcra(&g->link_tat, t0, total * m.link_byte_fp);
                s = __shfl_sync(GEMU_FULL_MASK, s, 0);
                t = gemu_max(t, s + excl * m.link_byte_fp);
            }
            due = ((t + (1u << GEMU_FP_SHIFT) - 1u) >> GEMU_FP_SHIFT) + m.lat_ns;
        }
        // payloads, one command at a time, the whole warp copying
        if (g->data) {
            for (uint32_t j = 0; j < n; j++) {
                uint32_t okj = __shfl_sync(GEMU_FULL_MASK, (uint32_t)(act && !status && len && !drop), j);
                if (!okj)
                    continue;
                uint8_t opc = (uint8_t)__shfl_sync(GEMU_FULL_MASK, (uint32_t)c.opc, j);
                uint64_t p1 = __shfl_sync(GEMU_FULL_MASK, c.prp1, j), p2 = __shfl_sync(GEMU_FULL_MASK, c.prp2, j);
                uint64_t lj = __shfl_sync(GEMU_FULL_MASK, len, j), oj = __shfl_sync(GEMU_FULL_MASK, off, j);
                uint64_t nseg = gemu_nsegs(p1, lj), done = 0;
                for (uint64_t k = 0; k < nseg; k++) {
                    uint64_t addr, sz;
                    gemu_seg(p1, p2, lj, k, &addr, &sz);
                    uint8_t *host = reinterpret_cast<uint8_t *>(addr);
                    if (opc == NVME_CMD_READ)
                        gemu_warp_copy(host, d->ns + oj + done, sz, lane);
                    else
                        gemu_warp_copy(d->ns + oj + done, host, sz, lane);
                    done += sz;
                }
            }
            __threadfence(); // payload before the CQE
        }
        // pending ring (dropped commands never complete)
        unsigned keep = __ballot_sync(GEMU_FULL_MASK, act && !drop);
        unsigned dropped = __popc(__ballot_sync(GEMU_FULL_MASK, act && drop));
        if (act && !drop) {
            unsigned pos = __popc(keep & ((1u << lane) - 1u));
            gemu_pend &p = q->pend[(q->pend_tail + pos) % entries];
            p.due = due;
            p.cid = c.cid;
            p.status = status;
        }
        __syncwarp();
        if (lane == 0) {
            q->sq_head = head + n;
            q->fetched += n;
            q->dropped += dropped;
            q->pend_tail += __popc(keep);
        }
        __syncwarp();
    }

    // ---- complete
    const bool fetched = n != 0;
    uint64_t pcount = q->pend_tail - q->pend_head;
    if (!pcount)
        return fetched;
    uint32_t mcnt = pcount < GEMU_WARP ? (uint32_t)pcount : GEMU_WARP;
    uint64_t now = nvme_cuda_now_ns() - epoch;
    gemu_pend p = {};
    bool in = lane < mcnt;
    if (in)
        p = q->pend[(q->pend_head + lane) % entries];
    unsigned due_mask = __ballot_sync(GEMU_FULL_MASK, in && (!m.timed || p.due <= now));
    uint32_t k = (uint32_t)__ffs(~due_mask) - 1u; // leading due entries (FIFO; due times rise in a queue)
    if (due_mask == GEMU_FULL_MASK)
        k = GEMU_WARP;
    if (k > mcnt)
        k = mcnt;
    if (!k)
        return fetched;
    uint32_t cqh = lane == 0 ? *q->cq_db : 0u;
    cqh = __shfl_sync(GEMU_FULL_MASK, cqh, 0);
    uint32_t tslot = (uint32_t)(q->cq_tail % entries);
    uint32_t used = cqh < entries ? (tslot + entries - cqh) % entries : entries - 1u;
    uint32_t freeslots = entries - 1u - used;
    if (k > freeslots) {
        if (lane == 0)
            q->cq_full_held++;
        k = freeslots;
        if (!k)
            return fetched;
    }
    uint32_t src = g->ooo ? k - 1u - (lane < k ? lane : 0u) : lane;
    uint32_t cid = __shfl_sync(GEMU_FULL_MASK, (uint32_t)p.cid, src);
    uint32_t st = __shfl_sync(GEMU_FULL_MASK, (uint32_t)p.status, src);
    const uint64_t sqhd = q->sq_head % entries;
    if (lane < k) {
        uint64_t pos = q->cq_tail + lane;
        nvme_cqe *e = q->cq + nvme_gpuq_cq_slot(pos, entries);
        uint32_t *w = reinterpret_cast<uint32_t *>(e);
        w[0] = 0;
        w[1] = 0;
        w[2] = (uint32_t)sqhd | ((uint32_t)q->qid << 16);
        __threadfence();
        uint32_t w3 = cid | ((uint32_t)(st | nvme_gpuq_cq_phase(pos, entries)) << 16);
        *reinterpret_cast<volatile uint32_t *>(reinterpret_cast<uint8_t *>(e) + GEMU_CQE_W3_OFF) = w3;
    }
    unsigned nerr = __popc(__ballot_sync(GEMU_FULL_MASK, lane < k && st != 0));
    // lateness: how long after its due time each completion was posted (timed models only); a run whose
    // lateness is large was limited by the emulator, not by the device model
    uint64_t late = lane < k && m.timed && now > p.due ? now - p.due : 0, late_max = late;
    for (unsigned o = GEMU_WARP / 2u; o; o >>= 1) {
        late += __shfl_down_sync(GEMU_FULL_MASK, late, o);
        uint64_t y = __shfl_down_sync(GEMU_FULL_MASK, late_max, o);
        late_max = y > late_max ? y : late_max;
    }
    __syncwarp();
    if (lane == 0) {
        q->cq_tail += k;
        q->pend_head += k;
        q->completed += k;
        q->errors += nerr;
        q->late_ns_sum += late;
        if (late_max > q->late_ns_max)
            q->late_ns_max = late_max;
    }
    __syncwarp();
    return true;
}

// __launch_bounds__: the kernel is compiled for blocks of up to GEMU_MAX_WARPS_BLOCK warps, so its register
// count fits them; gemu_open refuses more (gemu_plan_warps_check on cudaFuncGetAttributes).
__global__ void __launch_bounds__(GEMU_MAX_WARPS_BLOCK *GEMU_WARP) gemu_kernel(gemu_shared *g)
{
    const unsigned lane = threadIdx.x % GEMU_WARP;
    const unsigned wib = threadIdx.x / GEMU_WARP, warps = blockDim.x / GEMU_WARP;
    // placement: queue q is served by block q % blocks, so 16 queues spread over 8 blocks, not 2
    const uint32_t first = gemu_plan_first_queue(blockIdx.x, wib, gridDim.x);
    const uint32_t stride = gemu_plan_queue_stride(gridDim.x, warps);
    if (first >= g->nqueues)
        return; // nothing to serve: leave the SM to the engine
    uint64_t epoch = 0;
    if (lane == 0) {
        unsigned long long now = nvme_cuda_now_ns();
        unsigned long long prev = atomicCAS(&g->epoch, 0ull, now);
        epoch = prev ? prev : now;
    }
    epoch = __shfl_sync(GEMU_FULL_MASK, epoch, 0);
    uint32_t idle = 0; // sweeps in a row that found nothing
    for (uint32_t iter = 0;; iter++) {
        if (iter % GEMU_STOP_CHECK_ITERS == 0) {
            int s = lane == 0 ? *g->stop : 0;
            if (__shfl_sync(GEMU_FULL_MASK, s, 0))
                break;
        }
        bool work = false;
        for (uint32_t qi = first; qi < g->nqueues; qi += stride)
            work |= gemu_serve(g, &g->queues[qi], lane, epoch);
        if (work) {
            idle = 0;
        } else { // back off (short: the emulator's latency is what it adds to every command)
            uint32_t ns = nvme_gpuq_backoff_ns(idle++);
            __nanosleep(ns < GEMU_IDLE_BACKOFF_MAX_NS ? ns : GEMU_IDLE_BACKOFF_MAX_NS);
            if (lane == 0)
                g->queues[first].idle_sweeps++;
        }
    }
}

// ------------------------------------------------------------------------------------------ host code
#define GEMU_FILL_THREADS 256u

// fill=stamp: every word of every LBA carries its stamp (nvme_gpuq_stamp).
__global__ void gemu_fill_kernel(uint64_t *ns, uint64_t words, uint32_t dev, uint32_t lba_shift)
{
    const uint64_t per_lba = (1ull << lba_shift) / NVME_GPUQ_STAMP_WORD;
    for (uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; w < words; w += (uint64_t)gridDim.x * blockDim.x)
        ns[w] = nvme_gpuq_stamp(dev, w / per_lba, (uint32_t)(w % per_lba));
}

int gemu_open(const char *uri, uint32_t ndev_default, gemu **out, char *err, size_t errlen)
{
    *out = NULL;
    gemu *e = new (std::nothrow) gemu();
    if (!e)
        return -ENOMEM;
    int rc = gemu_parse_uri(uri, ndev_default, e, err, errlen);
    if (rc) {
        delete e;
        return rc;
    }
    // allocations, undone in reverse by gemu_close (which tolerates a partial open)
    cudaError_t ce = cudaSuccess;
    const uint64_t ns_bytes = (uint64_t)e->ns_mib * GEMU_MIB;
    e->nq_cap = e->ndev * GEMU_MAX_QUEUES_DEV;
    e->hdev = new (std::nothrow) gemu_dev[e->ndev]();
    e->hq = new (std::nothrow) gemu_queue[e->nq_cap]();
    if (!e->hdev || !e->hq) {
        gemu_close(e);
        return -ENOMEM;
    }
    do {
        if ((ce = cudaHostAlloc((void **)&e->stop_host, sizeof(int), cudaHostAllocMapped)) != cudaSuccess ||
            (ce = cudaHostGetDevicePointer((void **)&e->stop_dev, e->stop_host, 0)) != cudaSuccess)
            break;
        *e->stop_host = 0;
        const size_t dbytes = (size_t)e->nq_cap * 2u * sizeof(uint32_t);
        if ((ce = cudaMalloc((void **)&e->db, dbytes)) != cudaSuccess ||
            (ce = cudaMemset((void *)e->db, 0, dbytes)) != cudaSuccess)
            break;
        for (uint32_t i = 0; i < e->ndev && ce == cudaSuccess; i++) {
            e->hdev[i].nlb = ns_bytes / e->lba_size;
            e->hdev[i].lba_shift = e->lba_size == NVME_GPUQ_LBA_SIZE_MIN ? 9u : 12u;
            if (e->data && (ce = cudaMalloc((void **)&e->hdev[i].ns, ns_bytes)) == cudaSuccess)
                ce = cudaMemset(e->hdev[i].ns, 0, ns_bytes);
            if (ce == cudaSuccess && e->fill_stamp) {
                const uint64_t words = ns_bytes / NVME_GPUQ_STAMP_WORD;
                const unsigned grid = (unsigned)((words + GEMU_FILL_THREADS - 1u) / GEMU_FILL_THREADS);
                gemu_fill_kernel<<<grid, GEMU_FILL_THREADS>>>((uint64_t *)e->hdev[i].ns, words, i,
                                                              e->hdev[i].lba_shift);
                if ((ce = cudaGetLastError()) == cudaSuccess)
                    ce = cudaDeviceSynchronize();
            }
        }
        if (ce != cudaSuccess)
            break;
        if ((ce = cudaMalloc((void **)&e->h.devs, e->ndev * sizeof(gemu_dev))) != cudaSuccess ||
            (ce = cudaMemcpy(e->h.devs, e->hdev, e->ndev * sizeof(gemu_dev), cudaMemcpyHostToDevice)) != cudaSuccess)
            break;
        if ((ce = cudaMalloc((void **)&e->d, sizeof(gemu_shared))) != cudaSuccess)
            break;
    } while (0);
    if (ce != cudaSuccess) {
        rc = gemu_cuda_errno((int)ce, "gpu-emu: allocating controller memory", err, errlen);
        gemu_close(e);
        return rc;
    }
    e->h.stop = e->stop_dev;
    *out = e;
    return 0;
}

int gemu_add_queue(gemu *e, uint32_t dev, uint16_t qid, const nvme_sqe *sq, nvme_cqe *cq, uint32_t entries,
                   volatile uint32_t **sq_db, volatile uint32_t **cq_db, char *err, size_t errlen)
{
    if (e->started || dev >= e->ndev || qid < 1 || qid > GEMU_MAX_QUEUES_DEV || entries < NVME_QUEUE_MIN_ENTRIES ||
        e->nq >= e->nq_cap) {
        snprintf(err, errlen, "gpu-emu: cannot add queue %u on device %u (%u entries)", qid, dev, entries);
        return -EINVAL;
    }
    gemu_queue &q = e->hq[e->nq];
    q = gemu_queue();
    q.sq = sq;
    q.cq = cq;
    q.entries = entries;
    q.dev = dev;
    q.qid = qid;
    const size_t slot = (size_t)dev * GEMU_MAX_QUEUES_DEV + (qid - 1u);
    q.sq_db = e->db + 2u * slot;
    q.cq_db = e->db + 2u * slot + 1u;
    GEMU_CHECK(cudaMalloc((void **)&q.pend, (size_t)entries * sizeof(gemu_pend)), "gpu-emu: allocating a pending ring");
    e->nq++;
    *sq_db = q.sq_db;
    *cq_db = q.cq_db;
    return 0;
}

int gemu_dma_allow(gemu *e, const void *lo, size_t len)
{
    if (e->started || !lo || !len)
        return -EINVAL;
    e->h.dma_lo = (uint64_t)(uintptr_t)lo;
    e->h.dma_hi = e->h.dma_lo + len;
    return 0;
}

int gemu_preload(const gemu *e, char *err, size_t errlen)
{
    // cudaFuncGetAttributes loads the kernel's module now: with lazy loading (CUDA_MODULE_LOADING=LAZY,
    // the default since CUDA 12.2) a module loaded while the persistent kernel runs can wait for it forever
    cudaFuncAttributes a;
    GEMU_CHECK(cudaFuncGetAttributes(&a, gemu_kernel), "gpu-emu: loading the emulator kernel");
    return gemu_plan_warps_check(e->warps, a.maxThreadsPerBlock, a.numRegs, err, errlen);
}

int gemu_occupancy(const gemu *e, int *blocks_per_sm)
{
    cudaError_t ce =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, gemu_kernel, (int)(e->warps * GEMU_WARP), 0);
    return ce == cudaSuccess ? 0 : gemu_cuda_errno((int)ce, "gpu-emu: occupancy", NULL, 0);
}

int gemu_start(gemu *e, void *stream, char *err, size_t errlen)
{
    if (e->started || !e->nq) {
        snprintf(err, errlen, "gpu-emu: nothing to start (%u queues)", e->nq);
        return -EINVAL;
    }
    GEMU_CHECK(cudaMalloc((void **)&e->h.queues, e->nq * sizeof(gemu_queue)), "gpu-emu: allocating the queue table");
    GEMU_CHECK(cudaMemcpy(e->h.queues, e->hq, e->nq * sizeof(gemu_queue), cudaMemcpyHostToDevice),
               "gpu-emu: uploading the queue table");
    e->h.nqueues = e->nq;
    e->h.epoch = 0;
    e->h.link_tat = 0;
    GEMU_CHECK(cudaMemcpy(e->d, &e->h, sizeof(gemu_shared), cudaMemcpyHostToDevice), "gpu-emu: uploading its state");
    int rc = gemu_preload(e, err, errlen);
    if (rc)
        return rc;
    *(volatile int *)e->stop_host = 0;
    gemu_kernel<<<e->blocks, e->warps * GEMU_WARP, 0, (cudaStream_t)stream>>>(e->d);
    GEMU_CHECK(cudaGetLastError(), "gpu-emu: launching the persistent kernel");
    e->started = true;
    return 0;
}

int gemu_stop(gemu *e, void *stream, uint64_t deadline_ns, char *err, size_t errlen)
{
    if (!e->started)
        return 0;
    *(volatile int *)e->stop_host = 1;
    // watchdog: poll the stream, never a bare cudaStreamSynchronize
    int rc = gemu_wait_stream(stream, deadline_ns, "gpu-emu: the persistent kernel did not end after its stop flag",
                              err, errlen);
    if (rc == -ETIMEDOUT)
        e->hung = true; // gemu_close leaves its memory alone: the kernel may still touch it
    else
        e->started = false;
    return rc;
}

int gemu_counters(gemu *e, gemu_stats *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!e->h.queues || e->started)
        return 0;
    std::vector<gemu_queue> hq(e->nq);
    GEMU_CHECK(cudaMemcpy(hq.data(), e->h.queues, e->nq * sizeof(gemu_queue), cudaMemcpyDeviceToHost),
               "gpu-emu: reading counters");
    for (const gemu_queue &q : hq) {
        out->fetched += q.fetched;
        out->completed += q.completed;
        out->errors += q.errors;
        out->dropped += q.dropped;
        out->cq_full_held += q.cq_full_held;
        out->idle_sweeps += q.idle_sweeps;
        out->late_ns_sum += q.late_ns_sum;
        if (q.late_ns_max > out->late_ns_max)
            out->late_ns_max = q.late_ns_max;
    }
    return 0;
}

void gemu_close(gemu *e)
{
    if (!e)
        return;
    if (e->started)
        *(volatile int *)e->stop_host = 1; // the caller should have stopped it; at least let it end
    if (e->started || e->hung) {
        // the kernel may still be running: its memory (queues, namespaces, doorbells) is leaked on purpose
        // rather than freed under it; the process's CUDA context takes it back at exit
        return;
    }
    if (e->h.queues)
        cudaFree(e->h.queues);
    // the pending rings were allocated by gemu_add_queue; their pointers are in the host table
    for (uint32_t i = 0; e->hq && i < e->nq; i++)
        if (e->hq[i].pend)
            cudaFree(e->hq[i].pend);
    if (e->d)
        cudaFree(e->d);
    if (e->h.devs)
        cudaFree(e->h.devs);
    for (uint32_t i = 0; e->hdev && i < e->ndev; i++)
        if (e->hdev[i].ns)
            cudaFree(e->hdev[i].ns);
    if (e->db)
        cudaFree((void *)e->db);
    if (e->stop_host)
        cudaFreeHost(e->stop_host);
    delete[] e->hq;
    delete[] e->hdev;
    delete e;
}
