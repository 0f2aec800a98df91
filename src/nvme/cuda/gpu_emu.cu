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
#include <new>

#include <cuda_runtime.h>

#include "nvme/cuda/gpu_emu.h"
#include "nvme/cuda/nvme_cuda.cuh"
#include "nvme/cuda/nvme_gpuq.h"
#include "nvme/emu/profiles.h"
#include "nvme/uri.h"

#define GEMU_ST(sct, sc)     ((uint16_t)(((sct) << NVME_CQE_SCT_SHIFT) | ((sc) << NVME_CQE_SC_SHIFT)))
#define GEMU_ST_DNR(sct, sc) ((uint16_t)(GEMU_ST(sct, sc) | NVME_CQE_DNR))
#define GEMU_FULL_MASK       0xffffffffu
#define GEMU_NSID            1u            // one namespace per emulated controller
#define GEMU_NSID_ALL        0xffffffffu
#define GEMU_VEC             16u           // bytes per vector copy
#define GEMU_WORD            4u            // bytes per scalar copy (PRPs are dword aligned)
#define GEMU_NS_PER_S        1e9
#define GEMU_CQE_W3_OFF      12u

int gemu_cuda_errno(int cuda_err, const char *what, char *err, size_t errlen)
{
    cudaError_t e = (cudaError_t)cuda_err;
    if (err && errlen)
        snprintf(err, errlen, "%s: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
    switch (e) {
    case cudaSuccess:
        return 0;
    case cudaErrorMemoryAllocation:
        return -ENOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
        return -ENODEV;
    default:
        return -EIO;
    }
}

#define GEMU_CHECK(call, what)                                                   \
    do {                                                                         \
        cudaError_t ce_ = (call);                                                \
        if (ce_ != cudaSuccess)                                                  \
            return gemu_cuda_errno((int)ce_, what, err, errlen);                 \
    } while (0)

// ------------------------------------------------------------------------------------------ device code
static __device__ __forceinline__ bool gemu_in_window(const gemu_shared *g, uint64_t addr, uint64_t len)
{
    return addr >= g->dma_lo && addr + len >= addr && addr + len <= g->dma_hi;
}

static __device__ __forceinline__ uint64_t gemu_ld64(const uint64_t *p) { return __ldcv(reinterpret_cast<const unsigned long long *>(p)); }

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
        gemu_warp_copy_t(reinterpret_cast<uint32_t *>(dst), reinterpret_cast<const uint32_t *>(src), n / GEMU_WORD, lane);
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

static __device__ __forceinline__ uint64_t gemu_max(uint64_t a, uint64_t b) { return a > b ? a : b; }

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

static __device__ void gemu_serve(gemu_shared *g, gemu_queue *q, unsigned lane, uint64_t epoch)
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
        __threadfence(); // the SQEs were published before the doorbell
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
    uint64_t pcount = q->pend_tail - q->pend_head;
    if (!pcount)
        return;
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
        return;
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
            return;
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
    __syncwarp();
    if (lane == 0) {
        q->cq_tail += k;
        q->pend_head += k;
        q->completed += k;
        q->errors += nerr;
    }
    __syncwarp();
}

__global__ void gemu_kernel(gemu_shared *g)
{
    const unsigned lane = threadIdx.x % GEMU_WARP;
    const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / GEMU_WARP;
    const unsigned nwarps = gridDim.x * blockDim.x / GEMU_WARP;
    if (warp >= g->nqueues)
        return; // nothing to serve: leave the SM to the engine
    uint64_t epoch = 0;
    if (lane == 0) {
        unsigned long long now = nvme_cuda_now_ns();
        unsigned long long prev = atomicCAS(&g->epoch, 0ull, now);
        epoch = prev ? prev : now;
    }
    epoch = __shfl_sync(GEMU_FULL_MASK, epoch, 0);
    for (uint32_t iter = 0;; iter++) {
        if (iter % GEMU_STOP_CHECK_ITERS == 0) {
            int s = lane == 0 ? *g->stop : 0;
            if (__shfl_sync(GEMU_FULL_MASK, s, 0))
                break;
        }
        for (uint32_t qi = warp; qi < g->nqueues; qi += nwarps)
            gemu_serve(g, &g->queues[qi], lane, epoch);
    }
}

// ------------------------------------------------------------------------------------------ host code
static const char *const gemu_keys[] = {"ndev", "profile", "scale", "blocks", "warps", "ns", "lba",
                                        "data", "ooo", "drop", "mdts", "fill", "lat", "iops", "bw", "qiops",
                                        "link", NULL};

#define GEMU_FILL_THREADS 256u

// fill=stamp: every word of every LBA carries its stamp (nvme_gpuq_stamp).
__global__ void gemu_fill_kernel(uint64_t *ns, uint64_t words, uint32_t dev, uint32_t lba_shift)
{
    const uint64_t per_lba = (1ull << lba_shift) / NVME_GPUQ_STAMP_WORD;
    for (uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; w < words; w += (uint64_t)gridDim.x * blockDim.x)
        ns[w] = nvme_gpuq_stamp(dev, w / per_lba, (uint32_t)(w % per_lba));
}

static uint64_t gemu_gap_fp(double rate) // fixed-point ns between commands at `rate` per second
{
    return rate > 0 ? (uint64_t)llround(GEMU_NS_PER_S * (double)(1u << GEMU_FP_SHIFT) / rate) : 0;
}

enum gemu_unit { GEMU_UNIT_TIME, GEMU_UNIT_RATE, GEMU_UNIT_BYTES_PER_S };

// A device-model override (the CPU emulator's keys lat/iops/bw/qiops/link): absent -> *out = nominal.
// time: number with ns|us|ms|s (ns when bare); rate: commands/s; bytes/s: a size (KiB/MiB/GiB, KB/MB/GB)
// with an optional "/s". Values are nominal, before scale.
static int gemu_model_key(const nvme_uri *u, const char *key, gemu_unit unit, double nominal, double *out, char *err,
                          size_t errlen)
{
    *out = nominal;
    const char *v = nvme_uri_get(u, key);
    if (!v)
        return 0;
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", v);
    size_t n = strlen(buf);
    double x = -1;
    if (unit == GEMU_UNIT_BYTES_PER_S) {
        if (n > 2 && !strcmp(buf + n - 2, "/s"))
            buf[n - 2] = 0;
        uint64_t b;
        if (!nvme_parse_size(buf, &b))
            x = (double)b;
    } else {
        char *end = NULL;
        x = strtod(buf, &end);
        double mul = 1;
        if (unit == GEMU_UNIT_TIME && end && *end) {
            mul = !strcmp(end, "ns") ? 1 : !strcmp(end, "us") ? 1e3 : !strcmp(end, "ms") ? 1e6 : !strcmp(end, "s") ? 1e9 : -1;
            end += strlen(end);
        }
        if (!end || *end || mul < 0 || !std::isfinite(x))
            x = -1;
        else
            x *= mul;
    }
    if (!(x >= 0)) {
        snprintf(err, errlen, "parameter '%s': bad value '%s'", key, v);
        return -EINVAL;
    }
    *out = x;
    return 0;
}

static int gemu_parse(gemu *e, const nvme_uri *u, uint32_t ndev_default, char *err, size_t errlen)
{
    int rc = nvme_uri_check_keys(u, gemu_keys, err, errlen);
    if (rc)
        return rc;
    uint64_t v;
    if ((rc = nvme_uri_get_u64(u, "ndev", ndev_default, &v, err, errlen)))
        return rc;
    if (v < 1 || v > GEMU_MAX_DEVS) {
        snprintf(err, errlen, "parameter 'ndev': %llu is out of range 1..%u", (unsigned long long)v, GEMU_MAX_DEVS);
        return -EINVAL;
    }
    e->ndev = (uint32_t)v;
    const char *prof = nvme_uri_get(u, "profile");
    if (!prof)
        prof = "null";
    const nvme_emu_profile *p = nvme_emu_profile_find(prof);
    if (!p) {
        size_t o = (size_t)snprintf(err, errlen, "parameter 'profile': unknown profile '%s' (known:", prof);
        for (unsigned i = 0; nvme_emu_profile_at(i) && o < errlen; i++)
            o += (size_t)snprintf(err + o, errlen - o, " %s", nvme_emu_profile_at(i)->name);
        if (o < errlen)
            snprintf(err + o, errlen - o, ")");
        return -EINVAL;
    }
    if (p->lat_sigma > 0) {
        snprintf(err, errlen, "parameter 'profile': '%s' has a lognormal latency, which gpu-emu does not model", prof);
        return -EINVAL;
    }
    snprintf(e->profile, sizeof(e->profile), "%s", p->name);
    e->scale = 1.0; // gpu-emu runs profiles unscaled unless asked
    if (const char *s = nvme_uri_get(u, "scale")) {
        char *end = NULL;
        double d = strtod(s, &end);
        if (!end || *end || !std::isfinite(d) || d <= 0) {
            snprintf(err, errlen, "parameter 'scale': '%s' is not a number > 0", s);
            return -EINVAL;
        }
        e->scale = d;
    }
    if ((rc = nvme_uri_get_u64(u, "blocks", GEMU_DEFAULT_BLOCKS, &v, err, errlen)))
        return rc;
    if (v < 1 || v > 1024) {
        snprintf(err, errlen, "parameter 'blocks': %llu is out of range 1..1024", (unsigned long long)v);
        return -EINVAL;
    }
    e->blocks = (uint32_t)v;
    if ((rc = nvme_uri_get_u64(u, "warps", GEMU_DEFAULT_WARPS, &v, err, errlen)))
        return rc;
    if (v < 1 || v > GEMU_MAX_WARPS_BLOCK) {
        snprintf(err, errlen, "parameter 'warps': %llu is out of range 1..%u", (unsigned long long)v, GEMU_MAX_WARPS_BLOCK);
        return -EINVAL;
    }
    e->warps = (uint32_t)v;
    if ((rc = nvme_uri_get_size(u, "ns", (uint64_t)GEMU_DEFAULT_NS_MIB * GEMU_MIB, &v, err, errlen)))
        return rc;
    if (v < GEMU_MIB || v % GEMU_MIB) {
        snprintf(err, errlen, "parameter 'ns': %llu bytes is not a whole number of MiB >= 1 MiB", (unsigned long long)v);
        return -EINVAL;
    }
    e->ns_mib = (uint32_t)(v / GEMU_MIB);
    if ((rc = nvme_uri_get_u64(u, "lba", NVME_GPUQ_LBA_SIZE_MIN, &v, err, errlen)))
        return rc;
    if (v != 512 && v != 4096) {
        snprintf(err, errlen, "parameter 'lba': %llu is not 512 or 4096", (unsigned long long)v);
        return -EINVAL;
    }
    e->lba_size = (uint32_t)v;
    const char *data = nvme_uri_get(u, "data");
    if (!data || !strcmp(data, "ram"))
        e->data = 1;
    else if (!strcmp(data, "none"))
        e->data = 0;
    else {
        snprintf(err, errlen, "parameter 'data': '%s' is not ram or none", data);
        return -EINVAL;
    }
    const char *fill = nvme_uri_get(u, "fill");
    if (!fill || !strcmp(fill, "zero"))
        e->fill_stamp = 0;
    else if (!strcmp(fill, "stamp"))
        e->fill_stamp = 1;
    else {
        snprintf(err, errlen, "parameter 'fill': '%s' is not zero or stamp", fill);
        return -EINVAL;
    }
    if (e->fill_stamp && !e->data) {
        snprintf(err, errlen, "parameter 'fill': stamp needs data=ram");
        return -EINVAL;
    }
    bool b;
    if ((rc = nvme_uri_get_bool(u, "ooo", false, &b, err, errlen)))
        return rc;
    e->ooo = b;
    if ((rc = nvme_uri_get_u64(u, "drop", 0, &v, err, errlen)))
        return rc;
    if (v > UINT32_MAX) {
        snprintf(err, errlen, "parameter 'drop': %llu is too large", (unsigned long long)v);
        return -EINVAL;
    }
    e->drop_nth = (uint32_t)v;
    if ((rc = nvme_uri_get_size(u, "mdts", NVME_GPUQ_MAX_IO, &v, err, errlen)))
        return rc;
    if (v < e->lba_size || v > NVME_GPUQ_MAX_IO) {
        snprintf(err, errlen, "parameter 'mdts': %llu is out of range %u..%u bytes", (unsigned long long)v,
                 e->lba_size, NVME_GPUQ_MAX_IO);
        return -EINVAL;
    }
    double lat, iops, bw, qiops, link;
    if ((rc = gemu_model_key(u, "lat", GEMU_UNIT_TIME, p->lat_ns, &lat, err, errlen)) ||
        (rc = gemu_model_key(u, "iops", GEMU_UNIT_RATE, p->dev_iops, &iops, err, errlen)) ||
        (rc = gemu_model_key(u, "bw", GEMU_UNIT_BYTES_PER_S, p->dev_bw, &bw, err, errlen)) ||
        (rc = gemu_model_key(u, "qiops", GEMU_UNIT_RATE, p->queue_iops, &qiops, err, errlen)) ||
        (rc = gemu_model_key(u, "link", GEMU_UNIT_BYTES_PER_S, p->link_bw, &link, err, errlen)))
        return rc;
    gemu_model &m = e->h.model;
    const double s = e->scale;
    m.lat_ns = (uint64_t)llround(lat * s);
    m.queue_gap_fp = gemu_gap_fp(qiops / s);
    m.dev_gap_fp = gemu_gap_fp(iops / s);
    m.dev_byte_fp = gemu_gap_fp(bw / s);
    m.link_byte_fp = gemu_gap_fp(link / s);
    e->lat_ns = lat;
    e->iops = iops;
    e->bw = bw;
    e->qiops = qiops;
    e->link = link;
    m.timed = m.lat_ns || m.queue_gap_fp || m.dev_gap_fp || m.dev_byte_fp || m.link_byte_fp;
    e->h.mdts_bytes = v;
    e->h.drop_nth = e->drop_nth;
    e->h.ooo = e->ooo;
    e->h.data = e->data;
    e->h.ndev = e->ndev;
    return 0;
}

int gemu_parse_uri(const char *uri, uint32_t ndev_default, gemu *e, char *err, size_t errlen)
{
    nvme_uri *u = NULL;
    int rc = nvme_uri_parse(uri, &u, err, errlen);
    if (rc)
        return rc;
    if (strcmp(u->scheme, "gpu-emu") != 0 || u->authority[0] || u->path[0]) {
        snprintf(err, errlen, "target '%s': expected gpu-emu://?key=value&... (no host or path)", uri);
        nvme_uri_free(u);
        return -EINVAL;
    }
    rc = gemu_parse(e, u, ndev_default, err, errlen);
    nvme_uri_free(u);
    return rc;
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
                gemu_fill_kernel<<<grid, GEMU_FILL_THREADS>>>((uint64_t *)e->hdev[i].ns, words, i, e->hdev[i].lba_shift);
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

int gemu_occupancy(const gemu *e, int *blocks_per_sm)
{
    cudaError_t ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, gemu_kernel,
                                                                   (int)(e->warps * GEMU_WARP), 0);
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
    *(volatile int *)e->stop_host = 0;
    gemu_kernel<<<e->blocks, e->warps * GEMU_WARP, 0, (cudaStream_t)stream>>>(e->d);
    GEMU_CHECK(cudaGetLastError(), "gpu-emu: launching the persistent kernel");
    e->started = true;
    return 0;
}

int gemu_stop(gemu *e, void *stream, char *err, size_t errlen)
{
    if (!e->started)
        return 0;
    *(volatile int *)e->stop_host = 1;
    e->started = false;
    GEMU_CHECK(cudaStreamSynchronize((cudaStream_t)stream), "gpu-emu: waiting for the persistent kernel");
    return 0;
}

int gemu_counters(gemu *e, uint64_t *fetched, uint64_t *completed, uint64_t *errors, uint64_t *dropped)
{
    *fetched = *completed = *errors = *dropped = 0;
    if (!e->h.queues)
        return 0;
    cudaError_t ce = cudaMemcpy(e->hq, e->h.queues, e->nq * sizeof(gemu_queue), cudaMemcpyDeviceToHost);
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "gpu-emu: reading counters", NULL, 0);
    for (uint32_t i = 0; i < e->nq; i++) {
        *fetched += e->hq[i].fetched;
        *completed += e->hq[i].completed;
        *errors += e->hq[i].errors;
        *dropped += e->hq[i].dropped;
    }
    return 0;
}

void gemu_close(gemu *e)
{
    if (!e)
        return;
    if (e->started)
        *(volatile int *)e->stop_host = 1; // the caller should have stopped it; at least let it end
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

int gemu_describe(const gemu *e, char *buf, size_t len)
{
    return snprintf(buf, len,
                    "profile=%s scale=%g ndev=%u blocks=%u warps=%u ns=%uMiB lba=%u data=%s fill=%s ooo=%d drop=%u "
                    "lat=%gns iops=%g bw=%g qiops=%g link=%g",
                    e->profile, e->scale, e->ndev, e->blocks, e->warps, e->ns_mib, e->lba_size,
                    e->data ? "ram" : "none", e->fill_stamp ? "stamp" : "zero", e->ooo, e->drop_nth, e->lat_ns,
                    e->iops, e->bw, e->qiops, e->link);
}
