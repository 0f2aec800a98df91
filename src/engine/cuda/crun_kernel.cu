/* SPDX-License-Identifier: BSD-3-Clause */
// crun_kernel.cu — the cuda-run kernel (device code), its module preload and its launch (crun.h); what the host
// does while it runs and after (drive the window, collect per-queue state) is crun_drive.cu.
//
// Grid = devices x queues per device, one block per queue pair, one thread per in-flight command
// (blockDim = qdepth). Each round is lock-step: every thread builds its SQE in slot tail+i, thread 0
// fences (SQs in host memory: every thread fences at system scope and thread 0 reads the last SQE back;
// the doorbell fence is system scope for a controller outside the GPU, GPU scope on gpu-emu://) and rings the
// SQ doorbell; one poller warp waits (with a deadline and the run's poll discipline) for
// the round's CQEs, 32 neighbouring slots at a time, and hands each to the command whose CID it names;
// thread 0 rings the CQ head doorbell and counts the round (published to the host's mapped counter at the
// stop-check cadence, CRUN_STOP_CHECK_NS, not every round: a mapped store crosses PCIe). How completions reach commands
// is the run's `match` mode (cid by default; positional and scan as the other designs do it, nvme_gpuq_match.h).
// Verified reads poison their buffer first. The acquire scope of the CQE polls is the writer's (P.scope, see
// nvme_cuda.cuh). Self-checks (issue 24): each block writes its heartbeat at entry and exit, thread 0 counts the
// commands it rang, the poller lanes the completions they matched. Breakdown: one command in P.sample_every carries the
// six %globaltimer stamps of nvme_gpuq.h (T0/T1 its own thread, T2 thread 0 after the doorbell, T3P/T3 the
// look that matched it, T4 its thread at release) and stores its five phases (crun_sample).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "engine/cuda/crun.h"
#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/gpu/gpu_emu.h"
#include "nvme/nvme_cuda.cuh"
#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"

static __device__ void crun_fail(crun_queue *q, uint32_t state, uint16_t status, uint64_t lba)
{
    if (atomicCAS(&q->err_valid, 0, 1) == 0) {
        q->err_state = state;
        q->err_status = status;
        q->err_lba = lba;
    }
}

// The phases of one sampled command into its block's store (first P.sample_cap of the block kept).
static __device__ void crun_sample(const crun_params &P, crun_queue *q, uint32_t b, const uint64_t *t)
{
    const unsigned long long k = atomicAdd(&q->sampled, 1ull);
    if (k >= P.sample_cap)
        return;
    uint32_t *row = P.samples + ((uint64_t)b * P.sample_cap + k) * NVME_GPUQ_NPHASES;
    for (uint32_t ph = 0; ph < NVME_GPUQ_NPHASES; ph++)
        row[ph] = nvme_gpuq_phase_ns(t, ph);
}

static __device__ __forceinline__ uint32_t crun_since(uint64_t t, uint64_t base)
{
    return t > base ? (t - base > 0xffffffffull ? 0xffffffffu : (uint32_t)(t - base)) : 0u;
}

__global__ void __launch_bounds__(NVME_GPUQ_MAX_QDEPTH) crun_kernel(crun_params P)
{
    extern __shared__ uint8_t smem[];
    uint32_t *seen = reinterpret_cast<uint32_t *>(smem);
    uint32_t *t3p = seen + P.qdepth, *t3 = t3p + P.qdepth; // breakdown: ns after s_t0, set by the poller
    uint16_t *st = reinterpret_cast<uint16_t *>(t3 + P.qdepth);
    __shared__ int s_stop;
    __shared__ volatile int s_fail;
    __shared__ uint64_t s_next_check, s_t0, s_t2, s_k0;
    __shared__ int s_smp; // this round samples (sample_every, and past the warm-up)

    const uint32_t b = blockIdx.x, i = threadIdx.x, qd = P.qdepth;
    crun_queue *q = &P.queues[b];
    if (i == 0) {
        q->beat = CRUN_BEAT_ENTERED; // heartbeat: this block ran (the host zeroed it)
        s_k0 = nvme_cuda_now_ns();
    }
    unsigned long long matched = 0; // poller lanes: completions matched to their command
    const uint32_t entries = q->entries;
    const uint64_t thread_in_dev = (uint64_t)q->qidx * qd + i, threads_per_dev = (uint64_t)P.nqueues * qd;
    const uint64_t off = ((uint64_t)b * qd + i) * P.stride;
    uint8_t *buf = P.buf + off;
    uint64_t prp1 = 0, prp2 = 0;
    uint64_t *list = reinterpret_cast<uint64_t *>(buf + P.span);
    const uint64_t list_dma = P.span < P.stride ? P.lut[(off + P.span) >> NVME_GPUQ_PAGE_SHIFT] : 0;
    int prp_bad =
        nvme_gpuq_prp(P.lut, P.lut_pages, off, P.iosize, P.span < P.stride ? list : nullptr, list_dma, &prp1, &prp2);
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
    nvme_gpuq_match_ctr mctr = {0, 0, 0, 0};    // this thread's looks at the CQ (summed into the queue at the end)
    unsigned long long misattributed = 0;       // commands of this thread given a status not theirs
    for (int pass = 0; pass < npass; pass++) {
        __syncthreads(); // every thread has read s_stop of the previous pass
        const bool wr = P.write && pass == 0;
        const uint8_t opc = wr ? NVME_CMD_WRITE : NVME_CMD_READ;
        uint64_t lcg = nvme_gpuq_lcg_seed(P.seed, (uint64_t)b * qd + i); // a readback pass replays the LBAs
        for (uint64_t k = 0;; k++, round++) {
            if (i == 0) {
                int stop = s_fail || (P.max_rounds && k >= P.max_rounds);
                const uint64_t now = nvme_cuda_now_ns();
                if (!stop && now >= s_next_check) { // also in rounds mode: Ctrl-C must end it
                    stop = *P.stop;
                    s_next_check = now + CRUN_STOP_CHECK_NS;
                    P.rounds[b] = round; // the host's window edges: mapped memory, at this cadence only
                }
                s_stop = stop;
                s_smp = P.sample_every && now - s_k0 >= P.sample_from_ns;
            }
            __syncthreads();
            if (s_stop)
                break;
            const uint64_t slba =
                nvme_gpuq_slba(P.random, &lcg, k, thread_in_dev, threads_per_dev, P.nslots, P.lba0, P.nlb);
            if (!wr && P.verify) { // poison: a read that moves no data must not verify (stamps are never 0)
                uint64_t *w = reinterpret_cast<uint64_t *>(buf);
                for (uint64_t x = 0; x < words; x++)
                    w[x] = 0;
            }
            if (wr && P.verify) {
                uint64_t *w = reinterpret_cast<uint64_t *>(buf);
                for (uint64_t x = 0; x < words; x++)
                    w[x] = nvme_gpuq_stamp(q->dev, slba + x / words_per_lba, (uint32_t)(x % words_per_lba));
            }
            const bool smp = s_smp && nvme_gpuq_sampled(round * qd + i, P.sample_every);
            uint64_t ts[NVME_GPUQ_NSTAMPS];
            if (smp)
                ts[NVME_GPUQ_T0] = nvme_cuda_now_ns();
            alignas(16) nvme_sqe s; // stored as four 16-byte vectors
            nvme_gpuq_sqe_rw(&s, opc, nvme_gpuq_cid_make((uint32_t)round, i), 1u, slba, P.nlb, prp1, prp2);
            nvme_cuda_sqe_store(q->sq + nvme_gpuq_cq_slot(sq_pos + i, entries), &s);
            if (smp)
                ts[NVME_GPUQ_T1] = nvme_cuda_now_ns();
            seen[i] = 0;
            if (i == 0)
                s_t0 = nvme_cuda_now_ns();
            sq_pos += qd;
            if (nvme_cuda_sq_publish(q->sq, q->sq_db, sq_pos, entries, (uint32_t)round, qd, P.sq_host, P.fence_sys) !=
                NVME_GPUQ_OK) { // thread 0 only: the SQEs are not in host memory, nothing was rung
                if (atomicCAS(&q->state, NVME_GPUQ_OK, NVME_GPUQ_SQ_READBACK) == NVME_GPUQ_OK)
                    crun_fail(q, NVME_GPUQ_SQ_READBACK, 0, slba);
                s_fail = 1;
            } else if (i == 0) {
                q->submitted += qd;
                if (P.sample_every)
                    s_t2 = nvme_cuda_now_ns();
            }

            // completions, by the run's matching mode (nvme_gpuq_match.h): cid and positional: one poller warp
            // (threads 0..31) watches the round's CQ slots, lane l the positions l, l + 32, ... (neighbouring
            // lanes load neighbouring CQEs: one coalesced request); cid hands each CQE to the command its CID
            // names, positional to the command of its slot; the other warps wait at the barrier, off the bus.
            // scan: every thread scans the round's slots for its own CID (as BaM)
            const bool scan = P.match == NVME_GPUQ_MATCH_SCAN;
            if (scan || i < NVME_GPUQ_POLLER_LANES) {
                const uint32_t nk = scan ? 1u : nvme_gpuq_poller_count(i, qd);
                for (uint32_t k = 0; k < nk && !s_fail; k++) {
                    uint32_t idx = 0;
                    uint16_t cst = 0;
                    uint64_t t_seen = 0, t_miss = 0;
                    int rc = nvme_cuda_match_wait((int)P.match, q->cq, entries, cq_pos,
                                                  scan ? i : nvme_gpuq_poller_idx(i, k), q->qid, (uint32_t)round, qd,
                                                  P.scope, P.timeout_ns, P.poll_max_ns, &s_fail, seen, &idx, &cst,
                                                  &mctr, &t_seen, &t_miss);
                    if (rc == NVME_GPUQ_TIMEOUT) {
                        if (!s_fail && atomicCAS(&q->state, NVME_GPUQ_OK, NVME_GPUQ_TIMEOUT) == NVME_GPUQ_OK)
                            crun_fail(q, NVME_GPUQ_TIMEOUT, 0, 0);
                        s_fail = 1;
                        break;
                    }
                    if (rc < 0) {
                        if (atomicCAS(&q->state, NVME_GPUQ_OK, -rc) == NVME_GPUQ_OK)
                            crun_fail(q, (uint32_t)-rc, cst, 0); // cst: the CID refused
                        s_fail = 1;
                        break;
                    }
                    st[idx] = cst;
                    matched++;
                    if (P.sample_every && nvme_gpuq_sampled(round * qd + idx, P.sample_every)) { // as smp
                        t3p[idx] = crun_since(t_miss, s_t0);
                        t3[idx] = crun_since(t_seen, s_t0);
                    }
                }
            }
            __syncthreads();
            if (s_fail)
                break; // leave the CQ as it is: the queue is not consistent any more
            cq_pos += qd;
            if (i == 0) {
                nvme_cuda_db_fence(P.fence_sys);
                nvme_cuda_db_write(q->cq_db, nvme_gpuq_db(cq_pos, entries));
                uint64_t dt = nvme_cuda_now_ns() - s_t0;
                q->round_ns_sum += dt;
                if (dt > q->round_ns_max)
                    q->round_ns_max = dt;
            }
            const uint16_t my = st[i];
            if (smp) { // released: the breakdown's last stamp
                ts[NVME_GPUQ_T4] = nvme_cuda_now_ns();
                ts[NVME_GPUQ_T2] = s_t2;
                ts[NVME_GPUQ_T3] = s_t0 + t3[i];
                ts[NVME_GPUQ_T3P] = t3p[i] ? s_t0 + t3p[i] : 0;
                if (ts[NVME_GPUQ_T3P] < ts[NVME_GPUQ_T2]) // the first look saw it
                    ts[NVME_GPUQ_T3P] = ts[NVME_GPUQ_T2];
                crun_sample(P, q, b, ts);
            }
            misattributed += my != nvme_cr_lba_err(&P.inj, slba, P.nlb); // the target's per-LBA error rule
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
    if (matched)
        atomicAdd(&q->completed, matched);
    if (mctr.looks) {
        atomicAdd(&q->looks, (unsigned long long)mctr.looks);
        atomicAdd(&q->cq_bytes, (unsigned long long)mctr.cq_bytes);
        atomicAdd(&q->stale, (unsigned long long)mctr.stale);
        atomicAdd(&q->foreign, (unsigned long long)mctr.foreign);
    }
    if (misattributed)
        atomicAdd(&q->misattributed, misattributed);
    __syncthreads(); // every lane's count is in before the block says it left
    if (i == 0) {
        q->rounds = round;
        P.rounds[b] = round; // the last count, whatever the cadence left unwritten
        q->beat = CRUN_BEAT_LEFT;
    }
}

int crun_preload(uint32_t qdepth, int *blocks_per_sm, char *err, size_t errlen)
{
    cudaFuncAttributes a;
    cudaError_t ce = cudaFuncGetAttributes(&a, crun_kernel); // loads the module now (lazy loading)
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "loading the cuda-run kernel", err, errlen);
    if ((int)qdepth > a.maxThreadsPerBlock) {
        snprintf(err, errlen,
                 "qdepth=%u: the cuda-run kernel runs at most %d threads per block on this GPU "
                 "(cudaFuncGetAttributes, %d registers per thread)",
                 qdepth, a.maxThreadsPerBlock, a.numRegs);
        return -E2BIG;
    }
    ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, crun_kernel, (int)qdepth,
                                                       (size_t)qdepth * CRUN_SHARED_PER_CMD);
    return ce == cudaSuccess ? 0 : gemu_cuda_errno((int)ce, "occupancy of the cuda-run kernel", err, errlen);
}

int crun_launch(const crun_params *P, uint32_t nblk, void *stream, char *err, size_t errlen)
{
    crun_kernel<<<nblk, P->qdepth, (size_t)P->qdepth * CRUN_SHARED_PER_CMD, (cudaStream_t)stream>>>(*P);
    cudaError_t ce = cudaGetLastError();
    return ce == cudaSuccess ? 0 : gemu_cuda_errno((int)ce, "launching the cuda-run kernel", err, errlen);
}

int crun_launch_blocking_refused(char *err, size_t errlen)
{
    const char *v = getenv("CUDA_LAUNCH_BLOCKING");
    if (!v || !*v || !strcmp(v, "0"))
        return 0;
    snprintf(err, errlen,
             "CUDA_LAUNCH_BLOCKING=%s is set: every kernel launch would then wait for the kernel to end, "
             "and the persistent emulator and the engine end only when the host tells them to, so the run would "
             "hang; unset CUDA_LAUNCH_BLOCKING (or set it to 0) for device-initiated I/O",
             v);
    return -ENOTSUP;
}
