// SPDX-License-Identifier: BSD-3-Clause
// crun_drive.cu — the host side of a cuda-run kernel while it runs and after (crun.h), for both of its hosts
// (gpu-emu://, and pci:// / emu://?mode=thread through the driver): crun_drive() waits out the warm-up and the
// measured window on the kernel's mapped round counters (sleeping CRUN_HOST_POLL between looks, ending early on
// Ctrl-C or when the kernel ends), crun_window_result() turns the window into rates, crun_collect() reads each
// queue's state back into the result (rounds, errors, the first failure named), crun_samples() gathers the
// breakdown's sampled phases and the blocks' heartbeats. The kernel itself, its preload and launch:
// crun_kernel.cu.
//
// Caveats: host code only (no __device__ functions); every wait is bounded by the run's window and the
// kernel's end event.

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

#include "engine/cuda/crun.h"
#include "nvme/emu/gpu/gpu_emu.h"
#include "nvme/nvme_gpuq.h"

#define CRUN_HOST_POLL std::chrono::milliseconds(1)

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
