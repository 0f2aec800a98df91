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
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "nvme/cuda/cuda_api.h"
#include "nvme/cuda/gpu_emu.h"
#include "nvme/cuda/nvme_cuda.cuh"
#include "nvme/cuda/nvme_gpuq.h"

#define CRUN_STOP_CHECK_NS  100000ull  // thread 0 reads the mapped stop flag at most every 100 us
#define CRUN_HOST_POLL      std::chrono::milliseconds(1)
#define CRUN_MAX_NDEVS      GEMU_MAX_DEVS
#define CRUN_MAX_NQUEUES    GEMU_MAX_QUEUES_DEV
#define CRUN_DEFAULT_NDEVS  16u        // the published server's device count
#define CRUN_SHARED_PER_CMD (sizeof(uint16_t) + sizeof(uint32_t)) // status + seen flag per command

struct crun_queue {
    nvme_sqe *sq;
    const nvme_cqe *cq;
    volatile uint32_t *sq_db, *cq_db;
    uint32_t entries;
    uint32_t dev, qidx;        // device, queue index within the device
    uint16_t qid;
    uint16_t pad;
    int state;                 // enum nvme_gpuq_state, first failure wins (atomicCAS)
    int err_valid;
    uint32_t err_state;
    uint16_t err_status;       // CQE status without phase
    uint16_t pad2;
    uint64_t err_lba;
    unsigned long long errors, verify_errors;
    unsigned long long round_ns_sum, round_ns_max, rounds;
};

struct crun_params {
    crun_queue *queues;
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
};

static __device__ void crun_fail(crun_queue *q, uint32_t state, uint16_t status, uint64_t lba)
{
    if (atomicCAS(&q->err_valid, 0, 1) == 0) {
        q->err_state = state;
        q->err_status = status;
        q->err_lba = lba;
    }
}

__global__ void __launch_bounds__(NVME_GPUQ_MAX_QDEPTH) crun_kernel(crun_params P)
{
    extern __shared__ uint8_t smem[];
    uint32_t *seen = reinterpret_cast<uint32_t *>(smem);
    uint16_t *st = reinterpret_cast<uint16_t *>(smem + P.qdepth * sizeof(uint32_t));
    __shared__ int s_stop;
    __shared__ volatile int s_fail;
    __shared__ uint64_t s_next_check, s_t0;

    const uint32_t b = blockIdx.x, i = threadIdx.x, qd = P.qdepth;
    crun_queue *q = &P.queues[b];
    const uint32_t entries = q->entries;
    const uint64_t thread_in_dev = (uint64_t)q->qidx * qd + i, threads_per_dev = (uint64_t)P.nqueues * qd;
    const uint64_t off = ((uint64_t)b * qd + i) * P.stride;
    uint8_t *buf = P.buf + off;
    uint64_t prp1 = 0, prp2 = 0;
    uint64_t *list = reinterpret_cast<uint64_t *>(buf + P.span);
    const uint64_t list_dma = P.span < P.stride ? P.lut[(off + P.span) >> NVME_GPUQ_PAGE_SHIFT] : 0;
    int prp_bad = nvme_gpuq_prp(P.lut, P.lut_pages, off, P.iosize, P.span < P.stride ? list : nullptr, list_dma,
                                &prp1, &prp2);
    if (i == 0) {
        s_fail = 0;
        s_next_check = 0;
    }
    __syncthreads();
    if (prp_bad) {
        if (atomicCAS(&q->state, NVME_GPUQ_OK, NVME_GPUQ_NVME_ERROR) == NVME_GPUQ_OK)
            crun_fail(q, NVME_GPUQ_NVME_ERROR, 0, 0);
        s_fail = 1;
    }
    __threadfence(); // PRP lists before the first doorbell
    const uint64_t words = P.iosize / NVME_GPUQ_STAMP_WORD, words_per_lba = P.lba_size / NVME_GPUQ_STAMP_WORD;
    const int npass = P.write && P.readback ? 2 : 1;
    uint64_t sq_pos = 0, cq_pos = 0, round = 0; // round: running count over both passes (CID generation)
    for (int pass = 0; pass < npass; pass++) {
        __syncthreads(); // every thread has read s_stop of the previous pass
        const bool wr = P.write && pass == 0;
        const uint8_t opc = wr ? NVME_CMD_WRITE : NVME_CMD_READ;
        uint64_t lcg = nvme_gpuq_lcg_seed(P.seed, (uint64_t)b * qd + i); // a readback pass replays the LBAs
        for (uint64_t k = 0;; k++, round++) {
            if (i == 0) {
                int stop = s_fail || (P.max_rounds && k >= P.max_rounds);
                if (!stop) { // also in rounds mode: Ctrl-C must end it
                    uint64_t now = nvme_cuda_now_ns();
                    if (now >= s_next_check) {
                        stop = *P.stop;
                        s_next_check = now + CRUN_STOP_CHECK_NS;
                    }
                }
                s_stop = stop;
            }
            __syncthreads();
            if (s_stop)
                break;
            const uint64_t slba = nvme_gpuq_slba(P.random, &lcg, k, thread_in_dev, threads_per_dev, P.nslots, P.lba0, P.nlb);
            if (wr && P.verify) {
                uint64_t *w = reinterpret_cast<uint64_t *>(buf);
                for (uint64_t x = 0; x < words; x++)
                    w[x] = nvme_gpuq_stamp(q->dev, slba + x / words_per_lba, (uint32_t)(x % words_per_lba));
            }
            alignas(16) nvme_sqe s; // stored as four 16-byte vectors
            nvme_gpuq_sqe_rw(&s, opc, nvme_gpuq_cid_make((uint32_t)round, i), 1u, slba, P.nlb, prp1, prp2);
            nvme_cuda_sqe_store(q->sq + nvme_gpuq_cq_slot(sq_pos + i, entries), &s);
            seen[i] = 0;
            if (i == 0)
                s_t0 = nvme_cuda_now_ns();
            sq_pos += qd;
            nvme_cuda_round_submit(q->sq_db, sq_pos, entries);

            nvme_cuda_cqe_seen c;
            int rc = nvme_cuda_cqe_wait(q->cq, entries, cq_pos + i, P.timeout_ns, &s_fail, &c);
            if (rc == NVME_GPUQ_OK) {
                int idx = nvme_gpuq_cid_check(c.cid, c.sqid, q->qid, (uint32_t)round, qd);
                if (idx >= 0 && atomicExch(&seen[idx], 1u) != 0)
                    idx = -NVME_GPUQ_BAD_CID; // a second completion for one command
                if (idx >= 0) {
                    st[idx] = (uint16_t)(c.status & ~NVME_CQE_P);
                } else {
                    if (atomicCAS(&q->state, NVME_GPUQ_OK, -idx) == NVME_GPUQ_OK)
                        crun_fail(q, (uint32_t)-idx, c.cid, slba);
                    s_fail = 1;
                }
            } else if (!s_fail) {
                if (atomicCAS(&q->state, NVME_GPUQ_OK, NVME_GPUQ_TIMEOUT) == NVME_GPUQ_OK)
                    crun_fail(q, NVME_GPUQ_TIMEOUT, 0, slba);
                s_fail = 1;
            }
            __syncthreads();
            if (s_fail)
                break; // leave the CQ as it is: the queue is not consistent any more
            cq_pos += qd;
            if (i == 0) {
                __threadfence_system();
                nvme_cuda_db_write(q->cq_db, nvme_gpuq_db(cq_pos, entries));
                uint64_t dt = nvme_cuda_now_ns() - s_t0;
                q->round_ns_sum += dt;
                if (dt > q->round_ns_max)
                    q->round_ns_max = dt;
                P.rounds[b] = round + 1u;
            }
            const uint16_t my = st[i];
            if (my) {
                atomicAdd(&q->errors, 1ull);
                crun_fail(q, NVME_GPUQ_NVME_ERROR, my, slba);
            } else if (!wr && P.verify) {
                const volatile uint64_t *w = reinterpret_cast<const volatile uint64_t *>(buf);
                unsigned long long bad = 0;
                for (uint64_t x = 0; x < words; x++)
                    if (w[x] != nvme_gpuq_stamp(q->dev, slba + x / words_per_lba, (uint32_t)(x % words_per_lba)))
                        bad++;
                if (bad) {
                    atomicAdd(&q->verify_errors, bad);
                    crun_fail(q, NVME_GPUQ_VERIFY, 0, slba);
                }
            }
        }
    }
    if (i == 0)
        q->rounds = round;
}

// ------------------------------------------------------------------------------------------ host side
#define CRUN_CHECK(call, what)                                                      \
    do {                                                                            \
        cudaError_t ce_ = (call);                                                   \
        if (ce_ != cudaSuccess) {                                                   \
            rc = gemu_cuda_errno((int)ce_, what, err, errlen);                      \
            goto out;                                                               \
        }                                                                           \
    } while (0)

extern "C" int nvme_cuda_device_count(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t ce = cudaGetDeviceCount(&n);
    if (ce != cudaSuccess) {
        if (why && whylen)
            snprintf(why, whylen, "no CUDA device (%s: %s)", cudaGetErrorName(ce), cudaGetErrorString(ce));
        cudaGetLastError(); // clear the sticky-free error so later calls start clean
        return 0;
    }
    if (n <= 0 && why && whylen)
        snprintf(why, whylen, "no CUDA device");
    else if (why && whylen)
        why[0] = 0;
    return n;
}

extern "C" int nvme_cuda_device_info(int dev, nvme_cuda_devinfo *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    cudaDeviceProp p;
    cudaError_t ce = cudaGetDeviceProperties(&p, dev);
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "cudaGetDeviceProperties", err, errlen);
    snprintf(out->name, sizeof(out->name), "%s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sms = p.multiProcessorCount;
    out->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    out->mem_bytes = p.totalGlobalMem;
    out->pci_bus = p.pciBusID;
    out->pci_device = p.pciDeviceID;
    out->pci_domain = p.pciDomainID;
    cudaDriverGetVersion(&out->driver_version);
    cudaRuntimeGetVersion(&out->runtime_version);
    return 0;
}

extern "C" int nvme_cuda_rw_parse(const char *name, nvme_cuda_rw *out)
{
    static const struct {
        const char *name;
        nvme_cuda_rw rw;
    } t[] = {{"read", NVME_CUDA_READ}, {"randread", NVME_CUDA_RANDREAD}, {"write", NVME_CUDA_WRITE},
             {"randwrite", NVME_CUDA_RANDWRITE}};
    for (const auto &e : t)
        if (name && !strcmp(name, e.name)) {
            *out = e.rw;
            return 0;
        }
    return -EINVAL;
}

static int crun_check(const nvme_cuda_run_params *p, char *err, size_t errlen)
{
#define BAD(...) return snprintf(err, errlen, __VA_ARGS__), -EINVAL
    if (!p->target)
        BAD("target: missing");
    if (p->rw < NVME_CUDA_READ || p->rw > NVME_CUDA_RANDWRITE)
        BAD("rw=%d: must be read, randread, write or randwrite", (int)p->rw);
    if (p->iosize < NVME_GPUQ_LBA_SIZE_MIN || p->iosize % NVME_GPUQ_LBA_SIZE_MIN || p->iosize > NVME_GPUQ_MAX_IO)
        BAD("iosize=%u: must be a multiple of %u bytes, at most %u", p->iosize, NVME_GPUQ_LBA_SIZE_MIN, NVME_GPUQ_MAX_IO);
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

extern "C" size_t nvme_cuda_buf_size(uint32_t iosize, uint32_t qdepth, uint32_t nqueues, uint32_t ndevs, uint64_t *stride)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;
    const uint64_t span = ((uint64_t)iosize + page - 1u) / page * page;
    const uint64_t st = span + ((uint64_t)iosize > 2u * page ? page : 0u); // + a PRP list page when needed
    if (stride)
        *stride = st;
    return (size_t)((uint64_t)ndevs * nqueues * qdepth * st + page);
}

extern "C" int nvme_cuda_target_check(const char *target, uint32_t ndev_default, char *desc, size_t desclen,
                                      char *err, size_t errlen)
{
    gemu e{};
    int rc = gemu_parse_uri(target, ndev_default, &e, err, errlen);
    if (!rc && desc && desclen)
        gemu_describe(&e, desc, desclen);
    return rc;
}

extern "C" int nvme_cuda_map_bar(void *bar, size_t len, volatile void **dev_bar, char *err, size_t errlen)
{
    *dev_bar = NULL;
    if (!bar || !len || ((uintptr_t)bar % NVME_GPUQ_PAGE_SIZE)) {
        snprintf(err, errlen, "BAR mapping: %p (%zu bytes) is not a page-aligned region", bar, len);
        return -EINVAL;
    }
    cudaError_t ce = cudaHostRegister(bar, len, cudaHostRegisterIoMemory | cudaHostRegisterMapped);
    if (ce == cudaErrorNotSupported || ce == cudaErrorInvalidValue) {
        gemu_cuda_errno((int)ce, "cudaHostRegister(BAR0, IoMemory)", err, errlen);
        return -ENOTSUP;
    }
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "cudaHostRegister(BAR0, IoMemory)", err, errlen);
    void *d = NULL;
    ce = cudaHostGetDevicePointer(&d, bar, 0);
    if (ce != cudaSuccess) {
        int rc = gemu_cuda_errno((int)ce, "cudaHostGetDevicePointer(BAR0)", err, errlen);
        cudaHostUnregister(bar); // undo the registration made above
        return rc;
    }
    *dev_bar = d;
    return 0;
}

extern "C" int nvme_cuda_unmap_bar(void *bar, char *err, size_t errlen)
{
    cudaError_t ce = cudaHostUnregister(bar);
    return ce == cudaSuccess ? 0 : gemu_cuda_errno((int)ce, "cudaHostUnregister(BAR0)", err, errlen);
}

static const char CRUN_PCI_MSG[] =
    "target '%s': device-initiated I/O on real controllers needs the DMA (bus) addresses of GPU memory for "
    "PRPs: export the buffers with dma-buf (cuMemGetHandleForAddressRange) and map them through a kernel "
    "importer bound to the NVMe function; no importer is available on this host (see src/README.md, "
    "'Device-initiated I/O'). Use gpu-emu:// to run on the GPU-resident emulator.";

static void crun_sleep_until(std::chrono::steady_clock::time_point t, volatile int *stop, cudaEvent_t done)
{
    while (std::chrono::steady_clock::now() < t) {
        if ((stop && *stop) || cudaEventQuery(done) != cudaErrorNotReady)
            return;
        std::this_thread::sleep_for(CRUN_HOST_POLL);
    }
}

static uint64_t crun_sum_rounds(const volatile unsigned long long *r, uint32_t n)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += r[i];
    return s;
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
    if (!strncmp(p->target, "pci://", 6)) {
        snprintf(err, errlen, CRUN_PCI_MSG, p->target);
        return -ENOTSUP;
    }
    if (strncmp(p->target, "gpu-emu://", 10) != 0) {
        snprintf(err, errlen, "target '%s': cuda-run drives gpu-emu:// (or pci:// with a DMA importer)", p->target);
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
    bool emu_running = false, run_launched = false;
    uint32_t ndevs = 0, nblk = 0, entries = 0, nlb = 0;
    uint64_t stride = 0, span = 0, total = 0, nslots = 0, lba_count = 0;
    size_t smem = 0;
    int bps_run = 0, bps_emu = 0;
    double frac = 0;
    crun_params P;
    memset(&P, 0, sizeof(P));
    std::chrono::steady_clock::time_point t_start, t_w0, t_w1;
    uint64_t r0 = 0, r1 = 0;
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
        snprintf(err, errlen, "ndevs=%u: the target has %u device(s) (ndev=%u in the URI)", ndevs, emu->ndev, emu->ndev);
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
    smem = (size_t)p->qdepth * CRUN_SHARED_PER_CMD;

    // both kernels must be resident at once: the engine waits on the emulator
    CRUN_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps_run, crun_kernel, (int)p->qdepth, smem),
               "occupancy of the cuda-run kernel");
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
    CRUN_CHECK(cudaMemcpy(dq, hq.data(), nblk * sizeof(crun_queue), cudaMemcpyHostToDevice), "uploading the queue table");
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
    crun_kernel<<<nblk, p->qdepth, smem, s_run>>>(P);
    CRUN_CHECK(cudaGetLastError(), "launching the cuda-run kernel");
    run_launched = true;
    CRUN_CHECK(cudaEventRecord(e1, s_run), "recording the end event");
    t_start = std::chrono::steady_clock::now();
    if (p->rounds) {
        crun_sleep_until(std::chrono::steady_clock::time_point::max(), stop, e1);
    } else {
        crun_sleep_until(t_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(p->warmup_s)), stop, e1);
        r0 = crun_sum_rounds(rounds_host, nblk);
        t_w0 = std::chrono::steady_clock::now();
        crun_sleep_until(t_w0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(p->runtime_s)), stop, e1);
        r1 = crun_sum_rounds(rounds_host, nblk);
        t_w1 = std::chrono::steady_clock::now();
    }
    *(volatile int *)stop_host = 1;
    CRUN_CHECK(cudaEventSynchronize(e1), "waiting for the cuda-run kernel");
    emu_running = false;
    rc = gemu_stop(emu, s_emu, err, errlen);
    if (rc)
        goto out;
    CRUN_CHECK(cudaGetLastError(), "after the kernels");

    // results
    {
        float ms = 0;
        CRUN_CHECK(cudaEventElapsedTime(&ms, e0, e1), "reading the kernel time");
        r->kernel_s = ms / 1e3;
        CRUN_CHECK(cudaMemcpy(hq.data(), dq, nblk * sizeof(crun_queue), cudaMemcpyDeviceToHost), "reading queue results");
        uint64_t rounds_all = 0, round_ns = 0;
        for (uint32_t b = 0; b < nblk; b++) {
            const crun_queue &q = hq[b];
            rounds_all += q.rounds;
            round_ns += q.round_ns_sum;
            if (q.round_ns_max > r->round_ns_max)
                r->round_ns_max = q.round_ns_max;
            r->errors += q.errors;
            r->verify_errors += q.verify_errors;
            if (b < nqueue_rounds && queue_rounds)
                queue_rounds[b] = q.rounds;
            if (q.err_valid && (!r->first_error.valid || (q.state && !r->first_error.state))) {
                nvme_cuda_cmd_error &fe = r->first_error;
                fe.valid = true;
                fe.dev = q.dev;
                fe.queue = q.qidx;
                fe.state = q.state ? (uint32_t)q.state : q.err_state;
                const bool nvme_st = fe.state == NVME_GPUQ_NVME_ERROR; // else err_status holds a CID or nothing
                fe.sct = nvme_st ? nvme_cqe_sct(q.err_status) : 0;
                fe.sc = nvme_st ? nvme_cqe_sc(q.err_status) : 0;
                fe.dnr = nvme_st && nvme_cqe_dnr(q.err_status);
                fe.lba = q.err_lba;
            }
        }
        r->ios_total = rounds_all * p->qdepth;
        r->round_ns_mean = rounds_all ? (double)round_ns / (double)rounds_all : 0;
        if (p->rounds) {
            r->window_s = r->kernel_s;
            r->ios = r->ios_total;
        } else {
            r->window_s = std::chrono::duration<double>(t_w1 - t_w0).count();
            r->ios = (r1 - r0) * p->qdepth;
        }
        r->iops = r->window_s > 0 ? (double)r->ios / r->window_s : 0;
        r->bytes_per_s = r->iops * p->iosize;
        r->threads = nblk * p->qdepth;
        r->emu_blocks = emu->blocks;
        r->emu_warps = emu->warps;
        r->ndevs = ndevs;
        snprintf(r->profile, sizeof(r->profile), "%s", emu->profile);
        r->scale = emu->scale;
        r->ooo = emu->ooo;
        gemu_describe(emu, r->target_desc, sizeof(r->target_desc));
        // a queue that stopped on its own (not by the stop flag) is an error of the run
        for (uint32_t b = 0; b < nblk; b++) {
            const crun_queue &q = hq[b];
            if (q.state == NVME_GPUQ_TIMEOUT) {
                snprintf(err, errlen, "device %u queue %u (qid %u): a completion did not arrive within %.3f s "
                         "(round %llu); the queue was stopped", q.dev, q.qidx, q.qid, P.timeout_ns / 1e9,
                         (unsigned long long)q.rounds);
                rc = -ETIMEDOUT;
                break;
            }
            if (q.state == NVME_GPUQ_BAD_CID || q.state == NVME_GPUQ_BAD_SQID) {
                snprintf(err, errlen, "device %u queue %u (qid %u): a completion named %s (CID 0x%04x) "
                         "(round %llu); the queue was stopped", q.dev, q.qidx, q.qid,
                         q.state == NVME_GPUQ_BAD_CID ? "a command that is not outstanding" : "another SQ",
                         q.err_status, (unsigned long long)q.rounds);
                rc = -EPROTO;
                break;
            }
            if (q.state == NVME_GPUQ_NVME_ERROR && q.err_status == 0) {
                snprintf(err, errlen, "device %u queue %u: the I/O buffer does not fit the PRP lookup table",
                         q.dev, q.qidx);
                rc = -EFAULT;
                break;
            }
        }
        if (!rc && stop && *stop) {
            snprintf(err, errlen, "interrupted");
            rc = -EINTR;
        }
    }

out:
    if (stop_host)
        *(volatile int *)stop_host = 1;
    if (run_launched && e1)
        cudaEventSynchronize(e1);
    if (emu_running) {
        char tmp[NVME_CUDA_DESC_LEN];
        gemu_stop(emu, s_emu, tmp, sizeof(tmp));
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
