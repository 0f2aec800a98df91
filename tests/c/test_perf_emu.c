/* SPDX-License-Identifier: BSD-3-Clause */
/* test_perf_emu.c — the engine on emu://: every pattern, several devices/queues/threads,
 * fill + verify with an injected corruption named by its LBA, target limits refused; the worker loop's
 * window clock (read every few iterations) still ends a run on time and sees a stop request, and a QD-1 queue
 * (the one-slot pass) still times every command, stamps the breakdown, counts writes and ends a failed command's
 * timing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/perf.h"
#include "engine/perf_internal.h"

#define MS       1000000ull
#define LBA_SIZE 512u

static struct perf_result res;

static struct perf_target *open_or_die(const char *uri)
{
    struct perf_target *t = NULL;
    char err[PERF_ERRLEN] = "";
    struct perf_target_opts o = {.need_write = 1};
    if (perf_target_open(uri, &o, &t, err, sizeof(err))) {
        fprintf(stderr, "open %s: %s\n", uri, err);
        exit(1);
    }
    return t;
}

int main(void)
{
    char err[PERF_ERRLEN] = "";
    struct perf_target *t = open_or_die("emu://?profile=null&ndev=2");
    CHECK(t->ndevs == 2 && !strcmp(t->backend, "nvmelab-emu") && !strcmp(t->profile, "null") && t->scale == 1.0);
    enum perf_pattern pats[] = {PERF_PAT_READ, PERF_PAT_RANDREAD, PERF_PAT_WRITE, PERF_PAT_RANDWRITE, PERF_PAT_RANDRW};
    for (unsigned i = 0; i < 5; i++) {
        struct perf_config c = {.pattern = pats[i],
                                .rwmix = 50,
                                .iosize = 4096,
                                .qdepth = 32,
                                .nqueues = 2,
                                .nthreads = 2,
                                .runtime_ns = 300 * MS, /* every device must see I/O on a loaded host too */
                                .warmup_ns = 10 * MS,
                                .seed = 1,
                                .lat = 1};
        int rc = perf_run(t, &c, &res, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        printf("emu %-9s: %10.0f IOPS, dev0 %llu dev1 %llu, p50 %llu ns\n", perf_pattern_name(pats[i]), res.iops,
               (unsigned long long)res.dev_ios[0], (unsigned long long)res.dev_ios[1],
               (unsigned long long)stats_hist_percentile(&res.lat, 50));
        CHECK(res.errors == 0 && res.ios > 0 && res.dev_ios[0] > 0 && res.dev_ios[1] > 0);
        CHECK(res.thr[0].nchans == 2 && res.thr[1].nchans == 2); /* one device each, 2 queues */
    }

    /* fill + verify, then corrupt one LBA of device 1 */
    struct perf_config v = {.pattern = PERF_PAT_READ,
                            .iosize = 4096,
                            .qdepth = 16,
                            .nqueues = 1,
                            .nthreads = 1,
                            .runtime_ns = 100 * MS,
                            .seed = 99,
                            .verify = 1,
                            .lat = 1,
                            .lba_start = 2048,
                            .lba_count = 4096};
    CHECK(perf_fill(t, &v, &res, err, sizeof(err)) == 0);
    CHECK(res.ios == 2 * (4096 * LBA_SIZE / 4096));
    CHECK(perf_run(t, &v, &res, err, sizeof(err)) == 0);
    CHECK(res.verify_errors == 0 && res.ios > 0);
    char junk[LBA_SIZE];
    memset(junk, 0xab, sizeof(junk));
    CHECK(perf_target_write_sync(t, 1, 5000, junk, sizeof(junk), err, sizeof(err)) == 0);
    /* read a narrow range around the bad LBA, so even a thread that gets little CPU on a loaded host reaches
     * it within the run (the whole range takes 512 reads per device) */
    v.lba_start = 4992;
    v.lba_count = 64;
    CHECK(perf_run(t, &v, &res, err, sizeof(err)) == 0);
    printf("verify: %llu bad, first dev %u LBA %llu\n", (unsigned long long)res.verify_errors, res.first_bad_dev,
           (unsigned long long)res.first_bad_lba);
    CHECK(res.verify_errors >= 1 && res.first_bad_dev == 1 && res.first_bad_lba == 5000);
    CHECK(perf_target_write_sync(t, 2, 0, junk, sizeof(junk), err, sizeof(err)) == -EINVAL);
    CHECK(perf_target_write_sync(t, 0, 0, junk, 100, err, sizeof(err)) == -EINVAL);

    /* limits of the target, before any I/O */
    struct perf_config bad = {.pattern = PERF_PAT_RANDREAD,
                              .iosize = 4096,
                              .qdepth = 1u << 16,
                              .nqueues = 1,
                              .nthreads = 1,
                              .runtime_ns = 10 * MS};
    CHECK(perf_run(t, &bad, &res, err, sizeof(err)) == -EINVAL && strstr(err, "qdepth"));
    bad.qdepth = 8;
    bad.ndevs = 3;
    CHECK(perf_run(t, &bad, &res, err, sizeof(err)) == -EINVAL && strstr(err, "ndevs=3"));
    bad.ndevs = 0;
    bad.iosize = 1u << 24;
    CHECK(perf_run(t, &bad, &res, err, sizeof(err)) == -EINVAL && strstr(err, "iosize"));
    perf_target_close(t);

    /* the loop's window clock: the period doubles while its reads are under half a span apart, drops to 1 when
     * over a span, within 1 .. max (1 for the kernel paths) */
    CHECK(perf_clock_every(1, PERF_CLOCK_EVERY_MAX, 0) == 2);
    CHECK(perf_clock_every(64, PERF_CLOCK_EVERY_MAX, PERF_CLOCK_SPAN_NS * 3 / 4) == 64);
    CHECK(perf_clock_every(64, PERF_CLOCK_EVERY_MAX, PERF_CLOCK_SPAN_NS + 1) == 1);
    CHECK(perf_clock_every(1, PERF_CLOCK_EVERY_MAX, 10 * PERF_CLOCK_SPAN_NS) == 1);
    CHECK(perf_clock_every(PERF_CLOCK_EVERY_MAX, PERF_CLOCK_EVERY_MAX, 0) == PERF_CLOCK_EVERY_MAX);
    CHECK(perf_clock_every(1, 1, 0) == 1);
    /* ... a QD-1 run on null (the loop's fastest iterations) still ends about on time */
    struct perf_target *t1 = open_or_die("emu://?profile=null");
    struct perf_config q1 = {.pattern = PERF_PAT_RANDREAD,
                             .iosize = 512,
                             .qdepth = 1,
                             .nqueues = 1,
                             .nthreads = 1,
                             .runtime_ns = 50 * MS,
                             .seed = 3,
                             .lat = 1,
                             .bd = 1};
    CHECK(perf_run(t1, &q1, &res, err, sizeof(err)) == 0);
    /* the window starts at the loop's first clock read (after t_meas) and ends at the first one after t_end: a
     * span is 1 ms; 0.5 s of slack for a loaded host */
    printf("QD 1 on null: window %.6f s for 0.050 s, %llu I/Os, %llu timed\n", res.window_s,
           (unsigned long long)res.ios, (unsigned long long)res.lat.count);
    CHECK(res.window_s > 0.0 && res.window_s < 0.050 + 0.5);
    CHECK(res.lat_sample_every == 1 && perf_lat_sample_every(1) == 1); /* a QD-1 queue times every command */
    CHECK(res.lat.count + 2 >= res.ios && res.lat.count <= res.ios + 1);
    /* (the one-slot pass, c->one) with the breakdown on its every perf_bd_of_timed(1)-th command */
    CHECK(res.bd_sample_every == perf_bd_of_timed(1) && res.bd[PERF_BD_SUBMIT].count >= 1 &&
          res.bd[PERF_BD_SUBMIT].count <= res.ios / res.bd_sample_every + 2);
    /* ... writes, sequential: every one counted as a write and timed */
    q1.pattern = PERF_PAT_WRITE;
    CHECK(perf_run(t1, &q1, &res, err, sizeof(err)) == 0);
    CHECK(res.ios > 0 && res.writes == res.ios && res.errors == 0);
    CHECK(res.lat.count + 2 >= res.ios && res.lat.count <= res.ios + 1);
    q1.pattern = PERF_PAT_RANDREAD;
    /* ... and failures (every 64th LBA fails: Unrecovered Read Error) end their command's timing: counted as
     * errors, neither as I/Os nor as latency samples */
    struct perf_target *te = open_or_die("emu://?profile=null&err_every=64&nsze=1MiB");
    CHECK(perf_run(te, &q1, &res, err, sizeof(err)) == 0);
    printf("QD 1 with err_every=64: %llu I/Os, %llu errors, %llu timed, first error 0x%x\n",
           (unsigned long long)res.ios, (unsigned long long)res.errors, (unsigned long long)res.lat.count,
           res.first_err);
    CHECK(res.errors > 0 && (res.first_err & 0xffff) == (NVME_SCT_MEDIA << 8 | NVME_SC_UNRECOVERED_READ));
    CHECK(res.lat.count + 2 >= res.ios && res.lat.count <= res.ios + 1);
    perf_target_close(te);
    /* ... and a stop request ends a long run at once, as interrupted */
    int stop = 1;
    q1.runtime_ns = 30000 * MS;
    q1.stop = &stop;
    CHECK(perf_run(t1, &q1, &res, err, sizeof(err)) == -EINTR && res.interrupted);
    perf_target_close(t1);

    /* a bad URI is one clear error */
    struct perf_target *t2 = NULL;
    struct perf_target_opts o = {0};
    CHECK(perf_target_open("emu://?profile=nope", &o, &t2, err, sizeof(err)) < 0);
    printf("refused as expected: %s\n", err);
    CHECK(strstr(err, "profile") != NULL);
    return CHECK_DONE("test_perf_emu");
}
