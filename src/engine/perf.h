/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf.h — the closed-loop performance engine (CPU-initiated I/O on any target).
 *
 * Purpose: drive a target with N worker threads, each pinned to a logical CPU and
 * owning its channels (one channel = one NVMe qpair, one io_uring ring, or one
 * synchronous file descriptor slot), keep qdepth commands in flight per channel,
 * and report IOPS, bytes, a latency histogram, CPU time and per-device counts.
 *
 * Key functions:
 *   perf_run()          one timed run (warm-up not counted) on an open target
 *   perf_fill()         write the verify stamp over a range once (untimed)
 *   perf_config_check() the configuration against a target, before any I/O
 * Targets (perf_target_open/close) and the backend ops table are in backend.h.
 *
 * The engine calls the backend ops from the worker thread that owns the channel
 * (a channel never changes threads). The hot
 * path takes no locks and allocates nothing; on emu:// and pci:// it makes no
 * system calls; the clock (CLOCK_MONOTONIC, vDSO, ~20 ns) is read for sampled
 * commands only, never for every command.
 *
 * Latency is sampled: one command in N on average, N = perf_lat_sample_every(qdepth)
 * (qdepth / PERF_LAT_SAMPLE_QD within 1 .. PERF_LAT_SAMPLE_EVERY: a shallow queue,
 * whose rate is low, times every command: a timed command's latency holds its own two
 * clock reads and its completion through done(), about 150-200 ns, which on a fast
 * target at QD 1 (~300 ns an I/O) would make the timed commands a third slower than the
 * untimed ones; timing all of them keeps latency and IOPS consistent, as Little's law in
 * the record's self-checks requires, src/README.md); the first command of a channel, then gaps
 * drawn uniformly from 1 .. 2N-1 by the thread's generator, so the sample is
 * independent of latency and of the queue's period. perf_result.lat_sample_every
 * says N.
 * Latency of a sampled command = (first clock read in the reap pass that saw its
 * completion) - (clock read when it was queued; on the batch path, before the batch
 * holding it was drawn). Set perf_config.lat = 0 to skip
 * latency sampling entirely. On targets with PERF_TGT_FREEL (the NVMe driver) the
 * engine submits whole batches (submit_many) and accounts for completions per reap.
 *
 * Per-I/O time breakdown (issue 24; perf_result.bd; perf_config.bd = 0 switches it off, latency sampling
 * stays): every perf_bd_of_timed(qdepth)-th latency-sampled command (about one in nvme_bd_sample_every(qdepth),
 * nvme/bd_sample.h: the rule the cuda-run kernel and its stand-in share) also carries the stamps t0 (queued: the
 * latency's start), t1 (the backend's submit returned: SQE written / io_uring SQE filled), t2 (the kick that made it
 * visible returned: doorbell / io_uring_enter), t3p (start of the last reap of its channel that did not see it; t2 when
 * the first one did), t3 (start of the reap that saw it) and t4 (its completion delivered: the latency's end), all
 * CLOCK_MONOTONIC; per phase (submit t1-t0, doorbell t2-t1, device t3p-t2, poll t3-t3p, release t4-t3) one histogram.
 * Stamps shared by a batch take one clock read per batch (t1, t2) or per reap (t3). On an inline emulator (emu://,
 * mode=inline) the device runs inside the doorbell write, so its time lands in "doorbell", not in "device".
 *
 * Verify: every LBA written carries a 16-byte stamp (struct perf_stamp) at its
 * start; reads check it. A read of an LBA never written fails the check, so fill
 * the range first (perf_fill) before a verified read run.
 *
 * Errors: functions return 0 or a negative errno and put a one-line message in
 * the caller's buffer. Command errors are counted; the first one is kept with its
 * kind: a negative errno (kernel paths) or an NVMe status (SCT/SC, DNR) — never
 * mixed.
 */
#ifndef NVMELAB_ENGINE_PERF_H
#define NVMELAB_ENGINE_PERF_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/stats.h"
#include "nvme/bd_sample.h"

#ifdef __cplusplus
extern "C" {
#define PERF_STATIC_ASSERT static_assert
#else
#define PERF_STATIC_ASSERT _Static_assert
#endif

#define PERF_MAX_THREADS      256
#define PERF_MAX_QDEPTH       65536
#define PERF_STAMP_BYTES      16u
#define PERF_STAMP_MAGIC      0x6e766d65u /* "nvme" */
#define PERF_PERCENT          100u        /* rwmix is a percentage of reads */
#define PERF_LAT_SAMPLE_EVERY 16u         /* latency: at most one command in this many is timed, on average */
#define PERF_LAT_SAMPLE_QD    8u          /* ... and one in qdepth / this many, so shallow queues time every one */

/* The phases of the per-I/O breakdown (see above), in the order of perf_result.bd. */
enum perf_bd_phase {
    PERF_BD_SUBMIT = 0, /* t1 - t0 */
    PERF_BD_DOORBELL,   /* t2 - t1 */
    PERF_BD_DEVICE,     /* t3p - t2 */
    PERF_BD_POLL,       /* t3 - t3p */
    PERF_BD_RELEASE,    /* t4 - t3 */
    PERF_BD_NPHASES,
};

enum perf_pattern {
    PERF_PAT_READ = 0,
    PERF_PAT_RANDREAD,
    PERF_PAT_WRITE,
    PERF_PAT_RANDWRITE,
    PERF_PAT_RANDRW,
};

/* Per-LBA verify stamp, written at the start of every LBA. */
struct perf_stamp {
    uint64_t lba;
    uint32_t dev;
    uint32_t seed32; /* PERF_STAMP_MAGIC ^ folded seed */
};
PERF_STATIC_ASSERT(sizeof(struct perf_stamp) == PERF_STAMP_BYTES, "perf_stamp is 16 bytes");

struct perf_config {
    enum perf_pattern pattern;
    uint32_t rwmix;    /* randrw: percent reads (0..100) */
    uint32_t iosize;   /* bytes, a multiple of the LBA size */
    uint32_t qdepth;   /* commands in flight per channel */
    uint32_t nqueues;  /* channels per device per thread */
    int alldevs;       /* every thread drives every device (else: devices round-robin over threads) */
    uint32_t nthreads; /* worker threads */
    const int *cpus;   /* nthreads logical CPU ids to pin to (NULL: no pinning; -1: that one unpinned) */
    uint32_t ndevs;    /* devices to use, the first ndevs of the target (0: all) */
    uint64_t runtime_ns;
    uint64_t warmup_ns;
    uint64_t lba_start; /* first LBA of the range on every device */
    uint64_t lba_count; /* LBAs in the range (0: to the end of the device) */
    uint32_t align;     /* offset alignment in bytes (0: iosize) */
    uint32_t batch;     /* submissions per kick (0: the target's default_batch, else qdepth) */
    uint64_t seed;
    int verify; /* stamp writes, check reads */
    int lat;    /* sample latency */
    int bd;     /* the per-I/O breakdown on a share of the timed commands (needs lat) */
    int *stop;  /* set non-zero (__atomic_store_n) to end the run early (Ctrl-C); may be NULL */
};

struct perf_thread_result {
    int cpu;           /* requested CPU, -1 if unpinned */
    int cpu_last;      /* sched_getcpu() at the end of the run */
    char affinity[64]; /* the thread's affinity list as read back, e.g. "0" or "0-3" */
    uint32_t nchans;
    uint64_t ios, bytes, errors;
    uint64_t polls, empty_polls;
    double window_s; /* measured window of this thread */
    double cpu_s;    /* user+system CPU time in the window (getrusage RUSAGE_THREAD) */
};

struct perf_result {
    uint64_t ios, reads, writes, bytes, errors;
    double iops; /* sum over threads of ios / window */
    double bytes_per_s;
    double window_s; /* mean measured window */
    double cpu_s;    /* sum of thread CPU time in the windows */
    /* CPU time of the whole process over thread 0's window (CLOCK_PROCESS_CPUTIME_ID): the engine
     * threads plus the kernel workers the process owns (io_uring's io-wq threads, which do the
     * I/O a kernel backend cannot finish inline) and an in-process emulator's threads. */
    double proc_cpu_s;
    uint64_t dev_ios[PERF_MAX_DEVS];
    uint32_t ndevs, nthreads;
    struct perf_thread_result thr[PERF_MAX_THREADS];
    struct stats_hist lat;
    uint64_t verify_errors;
    uint32_t first_bad_dev;
    uint64_t first_bad_lba;
    int first_err;             /* first command error: <0 errno, >0 NVMe status, 0 none */
    int interrupted;           /* the stop flag ended the run */
    uint32_t lat_sample_every; /* latency: one command in this many was timed, on average (0: not sampled) */
    uint32_t bd_sample_every;  /* breakdown: one command in this many was stamped, on average (0: off) */
    struct stats_hist bd[PERF_BD_NPHASES]; /* per-I/O breakdown of the stamped commands, ns per phase */
};

/* Latency sampling period at a queue depth (see above). */
static inline uint32_t perf_lat_sample_every(uint32_t qdepth)
{
    uint32_t n = qdepth / PERF_LAT_SAMPLE_QD;
    return n < 1u ? 1u : n > PERF_LAT_SAMPLE_EVERY ? PERF_LAT_SAMPLE_EVERY : n;
}

/* Breakdown: every this many-th timed command is stamped (so one command in perf_lat_sample_every(qdepth)
 * times this many, about nvme_bd_sample_every(qdepth), the rule shared with cuda-run: nvme/bd_sample.h). */
static inline uint32_t perf_bd_of_timed(uint32_t qdepth)
{
    uint32_t n = nvme_bd_sample_every(qdepth) / perf_lat_sample_every(qdepth);
    return n < 1u ? 1u : n;
}

const char *perf_pattern_name(enum perf_pattern p);
int perf_pattern_parse(const char *name, enum perf_pattern *out);

/* Check a configuration against a target without doing I/O. */
int perf_config_check(const struct perf_target *t, const struct perf_config *cfg, char *err, size_t errlen);

/* One run; the result is written into *res (caller-allocated; large). Returns 0,
 * -EINTR when the stop flag ended it (res->interrupted set, figures partial), or
 * another negative errno with a message. */
int perf_run(struct perf_target *t, const struct perf_config *cfg, struct perf_result *res, char *err, size_t errlen);

/* Write the verify stamp over [lba_start, lba_start+lba_count) of the used devices
 * once, with the threads/queues/qdepth of cfg (pattern and times are ignored). */
int perf_fill(struct perf_target *t, const struct perf_config *cfg, struct perf_result *res, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_PERF_H */
