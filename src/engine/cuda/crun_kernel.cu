/* SPDX-License-Identifier: BSD-3-Clause */
// crun_kernel.cu — the cuda-run kernel and what both of its hosts (gpu-emu://, pci://) share: launch,
// module preload, and the collection of per-queue state into a result (crun.h).
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
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

#include "engine/cuda/crun.h"
#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/gpu/gpu_emu.h"
#include "nvme/nvme_cuda.cuh"
#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"

#define CRUN_HOST_POLL std::chrono::milliseconds(1)

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

int crun_collect(const crun_params *P, crun_queue *hq, uint32_t nblk, const nvme_cuda_run_params *p,
                 nvme_cuda_run_result *r, uint64_t *queue_rounds, size_t nqueue_rounds, bool stopped_by_user, char *err,
                 size_t errlen)
{
    uint64_t rounds_all = 0, round_ns = 0;
    std::vector<uint64_t> per(nblk);
    for (uint32_t b = 0; b < nblk; b++) {
        const crun_queue &q = hq[b];
        per[b] = q.rounds;
        rounds_all += q.rounds;
        round_ns += q.round_ns_sum;
        if (q.round_ns_max > r->round_ns_max)
            r->round_ns_max = q.round_ns_max;
        r->errors += q.errors;
        r->verify_errors += q.verify_errors;
        r->match_looks += q.looks;
        r->match_cq_bytes += q.cq_bytes;
        r->match_stale += q.stale;
        r->match_foreign += q.foreign;
        r->misattributed += q.misattributed;
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
    r->threads = nblk * p->qdepth;
    // a queue that stopped on its own (not by the stop flag) is an error of the run
    for (uint32_t b = 0; b < nblk; b++) {
        const crun_queue &q = hq[b];
        if (q.state == NVME_GPUQ_TIMEOUT) {
            snprintf(err, errlen,
                     "device %u queue %u (qid %u): a completion did not arrive within %.3f s "
                     "(round %llu); the queue was stopped",
                     q.dev, q.qidx, q.qid, P->timeout_ns / 1e9, (unsigned long long)q.rounds);
            return -ETIMEDOUT;
        }
        if (q.state == NVME_GPUQ_BAD_CID || q.state == NVME_GPUQ_BAD_SQID) {
            snprintf(err, errlen,
                     "device %u queue %u (qid %u): a completion named %s (CID 0x%04x) "
                     "(round %llu); the queue was stopped",
                     q.dev, q.qidx, q.qid,
                     q.state == NVME_GPUQ_BAD_CID ? "a command that is not outstanding" : "another SQ", q.err_status,
                     (unsigned long long)q.rounds);
            return -EPROTO;
        }
        if (q.state == NVME_GPUQ_SQ_READBACK) {
            snprintf(err, errlen,
                     "device %u queue %u (qid %u): the last SQE read back from host memory did not hold the CID "
                     "just written (round %llu): the SQ doorbell was not rung; the queue was stopped",
                     q.dev, q.qidx, q.qid, (unsigned long long)q.rounds);
            return -EIO;
        }
        if (q.state == NVME_GPUQ_NVME_ERROR && q.err_status == 0) {
            snprintf(err, errlen, "device %u queue %u: the I/O buffer does not fit the PRP lookup table", q.dev,
                     q.qidx);
            return -EFAULT;
        }
    }
    if (stopped_by_user) {
        snprintf(err, errlen, "interrupted");
        return -EINTR;
    }
    // progress: every queue completed at least one round; a block that never became resident (or never
    // got a completion) is an error, not a zero in the sum
    int idle = nvme_gpuq_idle_queue(per.data(), nblk);
    if (idle >= 0) {
        const crun_queue &q = hq[idle];
        snprintf(err, errlen,
                 "device %u queue %u (qid %u) completed no round while others completed %llu: its "
                 "block never ran (not resident beside the others?); the run is not valid",
                 q.dev, q.qidx, q.qid, (unsigned long long)rounds_all);
        return -EAGAIN;
    }
    return 0;
}

void crun_samples(const crun_params *P, const crun_queue *hq, uint32_t nblk, const uint32_t *samples,
                  const nvme_cuda_run_params *p, nvme_cuda_run_result *r)
{
    for (uint32_t b = 0; b < nblk; b++) {
        r->submitted += hq[b].submitted;
        r->completed += hq[b].completed;
        r->sampled += hq[b].sampled;
        if (p->beats)
            p->beats[b] = hq[b].beat;
        if (!samples || !P->sample_every)
            continue;
        const uint64_t kept = hq[b].sampled < P->sample_cap ? hq[b].sampled : P->sample_cap;
        for (uint64_t k = 0; k < kept && r->nsamples < p->sample_cap; k++, r->nsamples++)
            memcpy(p->samples + (size_t)r->nsamples * NVME_GPUQ_NPHASES,
                   samples + ((size_t)b * P->sample_cap + k) * NVME_GPUQ_NPHASES, NVME_GPUQ_NPHASES * sizeof(uint32_t));
    }
}

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

int crun_drive(const crun_params *P, const nvme_cuda_run_params *p, uint32_t nblk,
               const volatile unsigned long long *rounds_host, volatile int *stop_host, volatile int *stop,
               void *end_event, crun_window *w, char *err, size_t errlen)
{
    cudaEvent_t e1 = (cudaEvent_t)end_event;
    const auto t_start = std::chrono::steady_clock::now();
    if (p->rounds) {
        // until the kernel ends, or no queue completes a round for a whole completion timeout (+ grace)
        const auto stall = std::chrono::nanoseconds(P->timeout_ns + CRUN_STOP_GRACE_NS);
        uint64_t last = crun_sum_rounds(rounds_host, nblk);
        for (;;) {
            crun_sleep_until(std::chrono::steady_clock::now() + stall, stop, e1);
            uint64_t now_rounds = crun_sum_rounds(rounds_host, nblk);
            if (cudaEventQuery(e1) != cudaErrorNotReady || (stop && *stop) || now_rounds == last)
                break;
            last = now_rounds;
        }
    } else {
        crun_sleep_until(t_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::nanoseconds(p->warmup_ns)),
                         stop, e1);
        w->r0 = crun_sum_rounds(rounds_host, nblk);
        const auto t_w0 = std::chrono::steady_clock::now();
        crun_sleep_until(t_w0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::nanoseconds(p->runtime_ns)),
                         stop, e1);
        w->r1 = crun_sum_rounds(rounds_host, nblk);
        w->window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_w0).count();
    }
    // watchdog: after the stop flag every device-side wait ends within one completion timeout
    *stop_host = 1;
    return gemu_wait_event(e1, gemu_steady_ns() + P->timeout_ns + CRUN_STOP_GRACE_NS, "the cuda-run kernel", err,
                           errlen);
}

void crun_window_result(const crun_window *w, const nvme_cuda_run_params *p, nvme_cuda_run_result *r)
{
    if (p->rounds) {
        r->window_s = r->kernel_s;
        r->ios = r->ios_total;
    } else {
        r->window_s = w->window_s;
        r->ios = (w->r1 - w->r0) * p->qdepth;
    }
    r->iops = r->window_s > 0 ? (double)r->ios / r->window_s : 0;
    r->bytes_per_s = r->iops * p->iosize;
}
