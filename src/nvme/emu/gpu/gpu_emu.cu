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

#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/gpu/gemu_copy.cuh"
#include "nvme/emu/gpu/gemu_plan.h"
#include "nvme/emu/gpu/gpu_emu.h"
#include "nvme/emu/profiles.h"
#include "nvme/nvme_cuda.cuh"
#include "nvme/nvme_gpuq.h"
#include "nvme/uri.h"

#define GEMU_FULL_MASK           0xffffffffu
#define GEMU_NSID                1u // one namespace per emulated controller
#define GEMU_NSID_ALL            0xffffffffu
#define GEMU_CQE_W3_OFF          12u
#define GEMU_IDLE_BACKOFF_MAX_NS 256u // an idle emulator warp sleeps at most this long between sweeps

#define GEMU_CHECK(call, what)                                                                                         \
    do {                                                                                                               \
        cudaError_t ce_ = (call);                                                                                      \
        if (ce_ != cudaSuccess)                                                                                        \
            return gemu_cuda_errno((int)ce_, what, err, errlen);                                                       \
    } while (0)

// ------------------------------------------------------------------------------------------ device code
// The IOMMU rule (cmd_rules.h): an address the controller touches lies in a window the host registered.
static __device__ __forceinline__ bool gemu_in_window(const gemu_shared *g, uint64_t addr, uint64_t len)
{
    return nvme_cr_in_windows(g->win, g->nwin, addr, len);
}

// The PRP rules of cmd_rules.h (shared with the CPU emulator), minus chained lists (Invalid Field). A list's
// entries are not read here: *list_ents says how many the caller must check (gemu_list_check, the whole
// warp, coalesced) before any payload moves.
static __device__ uint16_t gemu_prp_check(const gemu_shared *g, uint64_t prp1, uint64_t prp2, uint64_t len,
                                          uint32_t *list_ents)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;
    uint16_t st;
    *list_ents = 0;
    if ((st = nvme_cr_prp1_offset(prp1)))
        return st;
    const uint64_t n = nvme_cr_prp_first(prp1, len, page);
    if ((st = nvme_cr_addr(prp1, gemu_in_window(g, prp1, n))))
        return st;
    const uint64_t rem = len - n;
    if (!rem)
        return NVME_CR_OK;
    if (rem <= page) {
        if ((st = nvme_cr_prp_page(prp2, page)))
            return st;
        return nvme_cr_addr(prp2, gemu_in_window(g, prp2, rem));
    }
    if ((st = nvme_cr_prp_list(prp2)))
        return st;
    const uint64_t nent = (rem + page - 1u) / page;
    if (nent > nvme_cr_prp_list_room(prp2, page))
        return NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD); // would need a chained list
    if ((st = nvme_cr_addr(prp2, gemu_in_window(g, prp2, nent * NVME_PRP_ENTRY_SIZE))))
        return st;
    *list_ents = (uint32_t)nent;
    return NVME_CR_OK;
}

// The entries of a PRP list, checked by the whole warp: each lane loads every 32nd entry (coalesced),
// page alignment and the IOMMU rule per entry (cmd_rules.h); the first failure in list order wins.
static __device__ uint16_t gemu_list_check(const gemu_shared *g, uint64_t prp1, uint64_t prp2, uint64_t len,
                                           uint32_t nent, unsigned lane)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;
    const uint64_t rem0 = len - nvme_cr_prp_first(prp1, len, page);
    const uint64_t *list = reinterpret_cast<const uint64_t *>(prp2);
    for (uint32_t base = 0; base < nent; base += GEMU_WARP) {
        const uint32_t i = base + lane;
        uint16_t st = NVME_CR_OK;
        if (i < nent) {
            const uint64_t e = gemu_ld64(list + i), left = rem0 - (uint64_t)i * page;
            st = nvme_cr_prp_page(e, page);
            if (!st)
                st = nvme_cr_addr(e, gemu_in_window(g, e, left < page ? left : page));
        }
        const unsigned bad = __ballot_sync(GEMU_FULL_MASK, st != NVME_CR_OK);
        if (bad)
            return (uint16_t)__shfl_sync(GEMU_FULL_MASK, (uint32_t)st, __ffs(bad) - 1);
    }
    return NVME_CR_OK;
}

// Validate one NVM command (cmd_rules.h); on success *len is the payload, *off its namespace byte offset
// and *list_ents the PRP list entries still to check.
static __device__ uint16_t gemu_check(const gemu_shared *g, const gemu_dev *d, const nvme_sqe &c, uint64_t *len,
                                      uint64_t *off, uint32_t *list_ents)
{
    *len = 0;
    *off = 0;
    *list_ents = 0;
    uint16_t st = nvme_cr_flags(c.flags);
    if (st)
        return st;
    switch (c.opc) {
    case NVME_CMD_READ:
    case NVME_CMD_WRITE: {
        if (c.nsid != GEMU_NSID)
            return NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        uint64_t slba, nlb;
        nvme_cr_rw(c.cdw10, c.cdw11, c.cdw12, &slba, &nlb);
        if ((st = nvme_cr_range(slba, nlb, d->nlb)))
            return st;
        const uint64_t l = nlb << d->lba_shift;
        if ((st = nvme_cr_mdts(l, g->mdts_bytes)))
            return st;
        if ((st = gemu_prp_check(g, c.prp1, c.prp2, l, list_ents)))
            return st;
        *len = l;
        *off = slba << d->lba_shift;
        return NVME_CR_OK;
    }
    case NVME_CMD_FLUSH:
        if (c.nsid != GEMU_NSID && c.nsid != GEMU_NSID_ALL)
            return NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        return NVME_CR_OK;
    default:
        return NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
    }
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
    if (avail && lane == 0) { // fetch lag: SQEs the doorbell showed, and those left for a later sweep
        q->fetch_looks++;
        q->sq_wait_sum += avail;
        q->sq_left_sum += avail - n;
        if (avail > q->sq_wait_max)
            q->sq_wait_max = avail;
        // the SQ backlog in time, beyond the model's own pacing: this sweep's SQEs could not have started
        // before the look that first found them, nor (timed models) before the queue's, the device's and the
        // link's buckets let them; what the fetch comes later than that is the emulator's delay, which the due
        // times computed at the fetch below then carry into every completion
        const uint64_t t = nvme_cuda_now_ns() - epoch;
        if (!q->backlog_t)
            q->backlog_t = t + 1u;
        uint64_t ready = q->backlog_t - 1u;
        if (m.timed) // every bucket the model paces a command by: queue, device IOPS, device bytes, the link
            ready = gemu_max(ready, gemu_max(gemu_max(q->q_tat, d->iops_tat), gemu_max(d->bw_tat, g->link_tat)) >>
                                        GEMU_FP_SHIFT);
        q->fetch_late_ns_sum += (uint64_t)n * (t > ready ? t - ready : 0u);
        if (avail == n)
            q->backlog_t = 0;
    }
    if (n) {
        __threadfence();        // the SQEs were published before the doorbell
        alignas(16) nvme_sqe c; // moved as four 16-byte vectors
        uint16_t status = 0;
        uint64_t len = 0, off = 0;
        uint32_t list_ents = 0;
        bool act = lane < n, drop = false;
        if (act) {
            const uint4 *src = reinterpret_cast<const uint4 *>(q->sq + (hslot + lane) % entries);
            uint4 *dst = reinterpret_cast<uint4 *>(&c);
            for (unsigned v = 0; v < NVME_CUDA_SQE_VEC; v++)
                dst[v] = __ldcv(src + v);
            status = gemu_check(g, d, c, &len, &off, &list_ents);
            if (!status && g->inj.every && (c.opc == NVME_CMD_READ || c.opc == NVME_CMD_WRITE)) {
                uint64_t slba, nlb; // err_every: per-LBA injected error (cmd_rules.h, as the CPU emulator)
                nvme_cr_rw(c.cdw10, c.cdw11, c.cdw12, &slba, &nlb);
                status = nvme_cr_lba_err(&g->inj, slba, nlb);
            }
            drop = g->drop_nth && q->fetched + lane + 1u == g->drop_nth;
        } else {
            memset(&c, 0, sizeof(c));
        }
        // PRP list entries, checked by the whole warp before any payload moves (the IOMMU rule)
        for (unsigned lists = __ballot_sync(GEMU_FULL_MASK, act && !status && list_ents); lists; lists &= lists - 1u) {
            const int j = __ffs(lists) - 1;
            const uint16_t st =
                gemu_list_check(g, __shfl_sync(GEMU_FULL_MASK, c.prp1, j), __shfl_sync(GEMU_FULL_MASK, c.prp2, j),
                                __shfl_sync(GEMU_FULL_MASK, len, j), __shfl_sync(GEMU_FULL_MASK, list_ents, j), lane);
            if ((int)lane == j)
                status = st;
        }
        // device model: batch GCRA, in lane order. Every bucket sees the fetch time (lane 0's clock, so the
        // lanes agree) and a command starts when the last of them lets it, as in the CPU emulator's
        // emu_model_due: a shared bucket must not see the queue bucket's start, which is in the future by
        // that queue's backlog and would make every other queue on the device or link wait behind it.
        uint64_t due = 0;
        if (m.timed) {
            const uint64_t now = __shfl_sync(GEMU_FULL_MASK, (nvme_cuda_now_ns() - epoch) << GEMU_FP_SHIFT, 0);
            uint64_t t = now;
            if (m.queue_gap_fp) {
                uint64_t s = gemu_max(now, q->q_tat);
                t = s + lane * m.queue_gap_fp;
                if (lane == 0)
                    q->q_tat = s + n * m.queue_gap_fp;
            }
            if (m.dev_gap_fp) {
                uint64_t s = 0;
                if (lane == 0)
                    s = gemu_gcra(&d->iops_tat, now, n * m.dev_gap_fp);
                s = __shfl_sync(GEMU_FULL_MASK, s, 0);
                t = gemu_max(t, s + lane * m.dev_gap_fp);
            }
            uint64_t bytes = act && !status ? len : 0, total = 0;
            uint64_t excl = gemu_excl_scan(bytes, lane, &total);
            if (m.dev_byte_fp && total) {
                uint64_t s = 0;
                if (lane == 0)
                    s = gemu_gcra(&d->bw_tat, now, total * m.dev_byte_fp);
                s = __shfl_sync(GEMU_FULL_MASK, s, 0);
                t = gemu_max(t, s + excl * m.dev_byte_fp);
            }
            if (m.link_byte_fp && total) {
                uint64_t s = 0;
                if (lane == 0)
                    s = gemu_gcra(&g->link_tat, now, total * m.link_byte_fp);
                s = __shfl_sync(GEMU_FULL_MASK, s, 0);
                t = gemu_max(t, s + excl * m.link_byte_fp);
            }
            due = ((t + (1u << GEMU_FP_SHIFT) - 1u) >> GEMU_FP_SHIFT) + m.lat_ns;
        }
        // payloads: a lane per small command (up to 32 in flight), then the warp per large command
        if (g->data) {
            const bool mine = act && !status && len && !drop;
            const bool rd = c.opc == NVME_CMD_READ;
            const bool small = mine && len <= GEMU_LANE_XFER_MAX;
            if (small)
                gemu_xfer_lane(rd, d->ns + off, c.prp1, c.prp2, len);
            for (unsigned big = __ballot_sync(GEMU_FULL_MASK, mine && !small); big; big &= big - 1u) {
                const int j = __ffs(big) - 1;
                const bool rdj = __shfl_sync(GEMU_FULL_MASK, (int)rd, j) != 0;
                gemu_xfer_warp(rdj, d->ns + __shfl_sync(GEMU_FULL_MASK, off, j), __shfl_sync(GEMU_FULL_MASK, c.prp1, j),
                               __shfl_sync(GEMU_FULL_MASK, c.prp2, j), __shfl_sync(GEMU_FULL_MASK, len, j), lane);
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
    uint32_t src = g->ooo ? k - 1u - (lane < k ? lane : 0u) : nvme_cr_ooo_src(lane, k, g->inj.ooo_win);
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
    // busy fraction of this warp: SM cycles spent in sweeps that moved anything / all cycles
    const long long c_start = clock64();
    unsigned long long busy = 0, sweeps = 0, busy_sweeps = 0;
    for (uint32_t iter = 0;; iter++) {
        if (iter % GEMU_STOP_CHECK_ITERS == 0) {
            int s = lane == 0 ? *g->stop : 0;
            if (__shfl_sync(GEMU_FULL_MASK, s, 0))
                break;
        }
        bool work = false;
        const long long c0 = clock64();
        for (uint32_t qi = first; qi < g->nqueues; qi += stride)
            work |= gemu_serve(g, &g->queues[qi], lane, epoch);
        sweeps++;
        if (work) {
            busy += (unsigned long long)(clock64() - c0);
            busy_sweeps++;
            idle = 0;
        } else { // back off (short: the emulator's latency is what it adds to every command)
            __nanosleep(nvme_gpuq_backoff_ns(idle++, GEMU_IDLE_BACKOFF_MAX_NS));
            if (lane == 0)
                g->queues[first].idle_sweeps++;
        }
    }
    if (lane == 0 && g->wstat) {
        gemu_warp_stat &w = g->wstat[blockIdx.x * warps + wib];
        w.busy_cycles = busy;
        w.total_cycles = (unsigned long long)(clock64() - c_start);
        w.sweeps = sweeps;
        w.busy_sweeps = busy_sweeps;
        w.serving = 1;
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
    // the IOMMU rule (cmd_rules.h) for queue bases: what Create I/O SQ/CQ would refuse with Data Transfer Error
    const bool sq_ok = nvme_cr_in_windows(e->h.win, e->h.nwin, (uint64_t)(uintptr_t)sq, entries * sizeof(nvme_sqe));
    const bool cq_ok = nvme_cr_in_windows(e->h.win, e->h.nwin, (uint64_t)(uintptr_t)cq, entries * sizeof(nvme_cqe));
    if (!sq_ok || !cq_ok) {
        snprintf(err, errlen,
                 "gpu-emu: queue %u on device %u: its %s at %p lies outside every registered DMA window (%u "
                 "registered): Data Transfer Error, the queue is not created",
                 qid, dev, sq_ok ? "CQ" : "SQ", sq_ok ? (const void *)cq : (const void *)sq, e->h.nwin);
        return -EFAULT;
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
    if (e->started || !lo || !len || e->h.nwin >= GEMU_MAX_WINDOWS)
        return -EINVAL;
    const uint64_t a = (uint64_t)(uintptr_t)lo;
    if (a + len < a)
        return -EINVAL;
    e->h.win[e->h.nwin].lo = a;
    e->h.win[e->h.nwin].hi = a + len;
    e->h.nwin++;
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
    const size_t wbytes = (size_t)e->blocks * e->warps * sizeof(gemu_warp_stat);
    GEMU_CHECK(cudaMalloc((void **)&e->h.wstat, wbytes), "gpu-emu: allocating warp counters");
    GEMU_CHECK(cudaMemset(e->h.wstat, 0, wbytes), "gpu-emu: clearing warp counters");
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
        out->fetch_looks += q.fetch_looks;
        out->sq_wait_sum += q.sq_wait_sum;
        out->sq_left_sum += q.sq_left_sum;
        out->fetch_late_ns_sum += q.fetch_late_ns_sum;
        if (q.sq_wait_max > out->sq_wait_max)
            out->sq_wait_max = q.sq_wait_max;
    }
    if (e->h.wstat) {
        std::vector<gemu_warp_stat> ws((size_t)e->blocks * e->warps);
        GEMU_CHECK(cudaMemcpy(ws.data(), e->h.wstat, ws.size() * sizeof(gemu_warp_stat), cudaMemcpyDeviceToHost),
                   "gpu-emu: reading warp counters");
        double sum = 0;
        for (const gemu_warp_stat &w : ws) {
            if (!w.serving || !w.total_cycles)
                continue;
            const double f = (double)w.busy_cycles / (double)w.total_cycles;
            out->warps_serving++;
            sum += f;
            if (f > out->busy_max)
                out->busy_max = f;
        }
        out->busy_mean = out->warps_serving ? sum / out->warps_serving : 0;
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
    if (e->h.wstat)
        cudaFree(e->h.wstat);
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
