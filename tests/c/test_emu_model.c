/* SPDX-License-Identifier: BSD-3-Clause */
/* test_emu_model.c — device model (Little's law, caps, shared caps at fetch time), out-of-order completion, faults,
 * mode=thread. */
#include <pthread.h>
#include <time.h>

#include "emu_testhost.h"
#include "nvme/emu/emu_internal.h" /* emu_model_due(): the shared caps without a clock */

#define RUN_S     0.25
#define TOLERANCE 0.15

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct loop_result {
    double rate;     /* completions per second */
    double min_lat;  /* shortest submit-to-completion time seen, s */
    double cpu_frac; /* CPU time of this thread / wall time: < 1 when the host was starved */
    double off_frac; /* share of the run spent in gaps between two polls longer than GAP_S: descheduled */
};

/* A gap between two polls this long means the poller was off the CPU (a poll takes well under 1 us). */
#define GAP_S 50e-6

/* Closed loop on queue 1: qd commands in flight for RUN_S seconds. */
static struct loop_result closed_loop(struct th *t, unsigned qd, uint32_t nlb, void *buf)
{
    double sub[256];
    struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, 0, nlb, buf, 0);
    double c0 = cpu_s(), t0 = now_s();
    for (unsigned i = 0; i < qd; i++) {
        c.cid = (uint16_t)i;
        sub[i] = t0;
        th_queue(t, 1, &c);
    }
    th_ring(t, 1);
    uint64_t done = 0;
    double end = t0 + RUN_S, t1, min_lat = 1e9, prev = t0, off = 0;
    struct nvme_cqe e = {0};
    while ((t1 = now_s()) < end) {
        if (t1 - prev > GAP_S)
            off += t1 - prev;
        prev = t1;
        if (!th_poll1(t, 1, &e, true))
            continue;
        CHECK_EQ(th_status(&e), 0);
        done++;
        if (t1 - sub[e.cid] < min_lat)
            min_lat = t1 - sub[e.cid];
        c.cid = e.cid;
        sub[e.cid] = prev = now_s();
        th_submit(t, 1, &c);
    }
    struct loop_result r = {(double)done / (t1 - t0), min_lat, (cpu_s() - c0) / (t1 - t0), off / (t1 - t0)};
    for (unsigned i = 0; i < qd; i++) /* drain */
        CHECK(th_poll(t, 1, &e));
    return r;
}

/* The model may never beat its latency or caps (strict upper bound); it must reach them when the
 * host thread had the CPU (lower bound checked only then: a loaded 2-core box starves the poller, and
 * a poller descheduled for a few ms sees each completion that much late, the rate falling with it). */
static void expect_rate(const char *what, struct loop_result r, double want, double lat_s)
{
    bool fed = r.cpu_frac > 0.8 && r.off_frac < 0.02;
    printf("  %-32s %9.0f /s (model %.0f) min latency %.3f ms, cpu %.0f%%, off-CPU gaps %.1f%%%s\n", what, r.rate, want,
           r.min_lat * 1e3, r.cpu_frac * 100, r.off_frac * 100, fed ? "" : " (starved: lower bound not checked)");
    if (r.rate > want * (1 + TOLERANCE) || (fed && r.rate < want * (1 - TOLERANCE))) {
        fprintf(stderr, "%s: %.0f/s is not within %.0f%% of %.0f/s\n", what, r.rate, TOLERANCE * 100, want);
        abort();
    }
    if (r.min_lat < lat_s) {
        fprintf(stderr, "%s: a command completed after %.6f s, before the model latency %.6f s\n", what, r.min_lat,
                lat_s);
        abort();
    }
}

static void run_case(const char *uri, unsigned qd, uint32_t nlb, const char *what, double want, double lat_s)
{
    struct th t;
    th_open(&t, uri);
    CHECK(th_enable(&t, 8));
    th_create_ioq(&t, 1, 256);
    void *buf = th_alloc(64 * 1024);
    struct loop_result r = closed_loop(&t, qd, nlb, buf);
    char label[128];
    snprintf(label, sizeof(label), "%s qd=%u", what, qd);
    expect_rate(label, r, want, lat_s);
    th_free(buf);
    th_close(&t);
}

static void test_littles_law_and_caps(void)
{
    /* latency 2 ms: IOPS = QD / 2 ms while no cap binds */
    run_case("emu://?lat=2ms", 1, 1, "lat=2ms", 500, 2e-3);
    run_case("emu://?lat=2ms", 8, 1, "lat=2ms", 4000, 2e-3);
    run_case("emu://?lat=2ms", 32, 1, "lat=2ms", 16000, 2e-3);
    /* device IOPS cap 5000/s binds once QD / L > cap */
    run_case("emu://?lat=2ms&iops=5000", 4, 1, "lat=2ms iops=5000", 2000, 2e-3);
    run_case("emu://?lat=2ms&iops=5000", 64, 1, "lat=2ms iops=5000", 5000, 2e-3);
    /* bandwidth cap: 8 MiB/s with 4 KiB commands = 2048/s */
    run_case("emu://?lat=100us&bw=8MiB", 32, 8, "bw=8MiB 4KiB", 2048, 100e-6);
    /* per-queue cap */
    run_case("emu://?lat=100us&qiops=3000", 32, 1, "qiops=3000", 3000, 100e-6);
    /* scale: lat 20us x 100 = 2 ms */
    run_case("emu://?lat=20us&scale=100", 8, 1, "lat=20us scale=100", 4000, 2e-3);
}

static void test_ooo(void)
{
    struct th t;
    th_open(&t, "emu://?ooo=1&seed=7");
    CHECK(th_enable(&t, 8));
    th_create_ioq(&t, 1, 64);
    void *buf = th_alloc(TH_PAGE);
    unsigned shuffled = 0;
    for (int round = 0; round < 4; round++) {
        for (unsigned i = 0; i < 32; i++) {
            struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, i, 1, buf, 0);
            c.cid = (uint16_t)i;
            th_queue(&t, 1, &c);
        }
        th_ring(&t, 1);
        uint32_t seen = 0;
        unsigned prev = 0, inversions = 0;
        for (unsigned i = 0; i < 32; i++) {
            struct nvme_cqe e = {0};
            CHECK(th_poll(&t, 1, &e));
            CHECK(e.cid < 32 && !(seen & (1u << e.cid)));
            seen |= 1u << e.cid;
            inversions += i && e.cid < prev;
            prev = e.cid;
        }
        CHECK_EQ(seen, 0xffffffffu);
        shuffled += inversions > 0;
    }
    CHECK_EQ(shuffled, 4);
    th_free(buf);
    th_close(&t);
}

static bool poll_for(struct th *t, uint16_t qid, struct nvme_cqe *e, double seconds)
{
    double end = now_s() + seconds;
    while (now_s() < end)
        if (th_poll1(t, qid, e, true))
            return true;
    return false;
}

static void test_faults(void)
{
    struct th t;
    th_open(&t, "emu://?nioq=2");
    CHECK(th_enable(&t, 8));
    th_create_ioq(&t, 1, 16);
    void *buf = th_alloc(TH_PAGE);
    struct nvme_cqe e = {0};

    /* the 3rd command on queue 1 completes with Internal Error, DNR */
    struct nvme_emu_fault f = {.kind = NVME_EMU_FAULT_STATUS,
                               .qid = 1,
                               .nth = 3,
                               .sct = NVME_SCT_GENERIC,
                               .sc = NVME_SC_INTERNAL,
                               .dnr = true};
    CHECK_EQ(nvme_emu_inject(t.set, 0, &f), 0);
    for (int i = 1; i <= 5; i++) {
        e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 1, buf, 0));
        if (i == 3) {
            CHECK_EQ(th_sc(&e), TH_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL));
            CHECK(nvme_cqe_dnr(e.status));
        } else {
            CHECK_EQ(th_status(&e), 0);
        }
    }
    /* delay: the next command completes 30 ms later */
    f = (struct nvme_emu_fault){
        .kind = NVME_EMU_FAULT_DELAY, .qid = NVME_EMU_FAULT_ANY_QUEUE, .nth = 1, .delay_ms = 30};
    CHECK_EQ(nvme_emu_inject(t.set, 0, &f), 0);
    struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, 0, 1, buf, 0);
    c.cid = 900;
    double t0 = now_s();
    th_submit(&t, 1, &c);
    CHECK(!poll_for(&t, 1, &e, 0.010));
    CHECK(poll_for(&t, 1, &e, 1.0));
    CHECK(now_s() - t0 >= 0.030);
    CHECK_EQ(e.cid, 900);
    /* drop: the completion never comes; a controller reset recovers */
    f = (struct nvme_emu_fault){.kind = NVME_EMU_FAULT_DROP, .qid = 1, .nth = 1};
    CHECK_EQ(nvme_emu_inject(t.set, 0, &f), 0);
    c.cid = 901;
    th_submit(&t, 1, &c);
    CHECK(!poll_for(&t, 1, &e, 0.05));
    CHECK_EQ(nvme_emu_inflight(t.set, 0), 1);
    struct nvme_emu_qstats qs;
    nvme_emu_queue_stats(t.set, 0, 1, &qs);
    CHECK_EQ(qs.dropped, 1);
    th_w32(&t, NVME_REG_CC, 0);
    CHECK(th_wait_rdy(&t, false));
    CHECK_EQ(nvme_emu_inflight(t.set, 0), 0);
    CHECK(th_enable(&t, 8));
    th_create_ioq(&t, 1, 16);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 1, buf, 0));
    CHECK_EQ(th_status(&e), 0);
    /* CFS: fatal status, nothing is processed until reset */
    f = (struct nvme_emu_fault){.kind = NVME_EMU_FAULT_CFS};
    CHECK_EQ(nvme_emu_inject(t.set, 0, &f), 0);
    CHECK(nvme_csts_cfs(th_r32(&t, NVME_REG_CSTS)));
    c.cid = 902;
    th_submit(&t, 1, &c);
    CHECK(!poll_for(&t, 1, &e, 0.02));
    th_w32(&t, NVME_REG_CC, 0);
    CHECK(!nvme_csts_cfs(th_r32(&t, NVME_REG_CSTS)));
    CHECK(th_enable(&t, 8));
    /* bad injections */
    f = (struct nvme_emu_fault){.kind = NVME_EMU_FAULT_STATUS, .qid = 1, .nth = 0};
    CHECK_EQ(nvme_emu_inject(t.set, 0, &f), -EINVAL);
    f.nth = 1, f.qid = 99;
    CHECK_EQ(nvme_emu_inject(t.set, 0, &f), -EINVAL);
    CHECK_EQ(nvme_emu_inject(t.set, 5, &f), -EINVAL);
    th_free(buf);
    th_close(&t);
}

/* mode=thread: a service thread serves two host threads on two qpairs of one controller. */
struct worker {
    struct th *t;
    uint16_t qid;
    unsigned ok;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct th *t = w->t;
    uint8_t *buf = th_alloc(TH_PAGE), *rd = th_alloc(TH_PAGE);
    for (unsigned i = 0; i < 2000; i++) {
        uint64_t lba = w->qid * 100000u + (i % 500) * 8;
        memset(buf, (int)(i + w->qid), TH_PAGE);
        struct nvme_sqe c = th_rw(NVME_CMD_WRITE, 1, lba, 8, buf, 0);
        c.cid = (uint16_t)i;
        th_submit(t, w->qid, &c);
        struct nvme_cqe e = {0};
        CHECK(th_poll(t, w->qid, &e));
        CHECK_EQ(th_status(&e), 0);
        c = th_rw(NVME_CMD_READ, 1, lba, 8, rd, 0);
        c.cid = (uint16_t)(i + 30000);
        th_submit(t, w->qid, &c);
        CHECK(th_poll(t, w->qid, &e));
        CHECK_EQ(e.cid, i + 30000);
        CHECK(memcmp(rd, buf, TH_PAGE) == 0);
        w->ok++;
    }
    th_free(buf), th_free(rd);
    return NULL;
}

/* two host threads, one qpair each, on one controller opened from uri */
static void two_workers(const char *uri)
{
    struct th t;
    th_open(&t, uri);
    CHECK(th_enable(&t, 16));
    th_create_ioq(&t, 1, 32);
    th_create_ioq(&t, 2, 32);
    struct worker w[2] = {{&t, 1, 0}, {&t, 2, 0}};
    pthread_t tid[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&tid[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(tid[i], NULL);
    CHECK_EQ(w[0].ok + w[1].ok, 4000);
    th_close(&t);
}

static void test_thread_mode(void)
{
    two_workers("emu://?mode=thread&nioq=4&nsze=256MiB");
}

/* inline mode: two host threads on two qpairs of one controller (no service thread) */
static void test_inline_two_threads(void)
{
    two_workers("emu://?nioq=4&nsze=256MiB&lat=50us&iops=200000");
}

/* A shared cap (the link) sees the fetch time, not a queue bucket's future start: a backlogged queue on one
 * device must not make a fresh queue on another device wait behind its reservations (no clock involved). */
static void test_shared_cap_sees_fetch_time(void)
{
    enum { BACKLOG = 100, BYTES = 512, NOW = 1000 };
    const uint64_t queue_gap = 10000, link_ns = 100; /* per command: queue cap 100x slower than the link */
    struct nvme_emu_set *set = aligned_alloc(64, (sizeof(*set) + 63) / 64 * 64);
    struct emu_ctrl *dev = aligned_alloc(64, (2 * sizeof(*dev) + 63) / 64 * 64);
    CHECK(set && dev);
    memset(set, 0, sizeof(*set));
    memset(dev, 0, 2 * sizeof(*dev));
    set->cfg.model.timed = true;
    set->cfg.model.queue_iops_fp = queue_gap << EMU_FP_SHIFT;
    set->cfg.model.link_bw_fp = (double)(link_ns << EMU_FP_SHIFT) / BYTES;
    dev[0].set = dev[1].set = set;
    struct emu_sq busy = {0}, fresh = {0};
    uint64_t due = 0;
    for (unsigned i = 0; i < BACKLOG; i++) /* one fetch of BACKLOG commands: the queue cap spaces them */
        due = emu_model_due(&dev[0], &busy, NOW, BYTES);
    CHECK_EQ(due, NOW + (BACKLOG - 1) * queue_gap);
    /* the other device's first command: its queue is idle and the link has room right after the backlog's share */
    due = emu_model_due(&dev[1], &fresh, NOW, BYTES);
    CHECK(due <= NOW + (BACKLOG + 1) * link_ns);
    free(dev);
    free(set);
}

int main(void)
{
    RUN_CASE(test_shared_cap_sees_fetch_time);
    RUN_CASE(test_littles_law_and_caps);
    RUN_CASE(test_ooo);
    RUN_CASE(test_faults);
    RUN_CASE(test_thread_mode);
    RUN_CASE(test_inline_two_threads);
    return CHECK_DONE("test_emu_model");
}
