/* SPDX-License-Identifier: BSD-3-Clause */
/* test_perf_kio.c — the engine on file:// with psync and io_uring: every pattern,
 * fill + verify, a corrupted block found with its LBA, bad parameters refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "engine/kio.h"
#include "engine/perf.h"

#define FILE_BYTES (8u << 20)
#define IOSIZE     4096u
#define MS         1000000ull

static char path[] = "/var/tmp/nvmelab-test-perf-kio-XXXXXX";
static char uri[128];

static struct perf_result res;

static void run_ok(const char *backend, enum perf_pattern pat, uint32_t qd, uint32_t nthreads, int verify)
{
    struct perf_target *t = NULL;
    char err[PERF_ERRLEN] = "";
    struct perf_target_opts o = {.backend = backend, .need_write = 1};
    int rc = perf_target_open(uri, &o, &t, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "open: %s\n", err);
        exit(1);
    }
    struct perf_config c = {.pattern = pat,
                            .rwmix = 70,
                            .iosize = IOSIZE,
                            .qdepth = qd,
                            .nqueues = 1,
                            .nthreads = nthreads,
                            .runtime_ns = 150 * MS,
                            .warmup_ns = 20 * MS,
                            .seed = 7,
                            .verify = verify,
                            .lat = 1};
    rc = perf_run(t, &c, &res, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "%s %s qd%u: %s\n", backend, perf_pattern_name(pat), qd, err);
        exit(1);
    }
    printf("%-8s %-9s qd%-3u thr%u: %8.0f IOPS p50 %llu ns, errors %llu, verify errors %llu\n", backend,
           perf_pattern_name(pat), qd, nthreads, res.iops, (unsigned long long)stats_hist_percentile(&res.lat, 50),
           (unsigned long long)res.errors, (unsigned long long)res.verify_errors);
    CHECK(res.ios > 0 && res.iops > 0);
    CHECK(res.errors == 0);
    /* latency is sampled: one command in N on average (a random gap of 1 .. 2N-1), N from the queue depth */
    const uint32_t every = perf_lat_sample_every(qd);
    CHECK(res.lat_sample_every == every);
    CHECK(res.lat.count >= 1 && res.lat.count <= res.ios);
    if (every == 1)
        CHECK(res.lat.count == res.ios);
    else if (res.ios >= 100u * every)
        CHECK(res.lat.count * every * 2 >= res.ios && res.lat.count <= res.ios * 2 / every);
    CHECK(res.bytes == res.ios * IOSIZE);
    if (pat == PERF_PAT_READ || pat == PERF_PAT_RANDREAD)
        CHECK(res.writes == 0);
    if (pat == PERF_PAT_WRITE || pat == PERF_PAT_RANDWRITE)
        CHECK(res.reads == 0);
    if (pat == PERF_PAT_RANDRW)
        CHECK(res.reads > 0 && res.writes > 0);
    if (verify)
        CHECK(res.verify_errors == 0);
    perf_target_close(t);
}

static void expect_err(const char *u, const char *backend, struct perf_config c, const char *needle)
{
    struct perf_target *t = NULL;
    char err[PERF_ERRLEN] = "";
    struct perf_target_opts o = {.backend = backend};
    int rc = perf_target_open(u, &o, &t, err, sizeof(err));
    if (!rc) {
        rc = perf_run(t, &c, &res, err, sizeof(err));
        perf_target_close(t);
    }
    printf("refused as expected: %s\n", err);
    CHECK(rc < 0);
    CHECK(strstr(err, needle) != NULL);
}

int main(void)
{
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    char *blk = malloc(1 << 20);
    for (unsigned i = 0; i < (1u << 20); i++)
        blk[i] = (char)(i * 7 + 1);
    for (unsigned i = 0; i < FILE_BYTES / (1u << 20); i++)
        CHECK(write(fd, blk, 1 << 20) == 1 << 20);
    fsync(fd);
    snprintf(uri, sizeof(uri), "file://%s", path);

    enum perf_pattern pats[] = {PERF_PAT_READ, PERF_PAT_RANDREAD, PERF_PAT_WRITE, PERF_PAT_RANDWRITE, PERF_PAT_RANDRW};
    for (unsigned i = 0; i < 5; i++)
        run_ok("psync", pats[i], 1, 1, 0);
    if (kio_io_uring_available()) {
        for (unsigned i = 0; i < 5; i++)
            run_ok("io_uring", pats[i], 16, 2, 0);
    } else {
        printf("io_uring unavailable on this kernel/build: skipped\n");
    }

    /* fill, then verified reads pass; corrupt one LBA, the verify run names it */
    const char *vb = kio_io_uring_available() ? "io_uring" : "psync";
    uint32_t vqd = kio_io_uring_available() ? 8 : 1;
    {
        struct perf_target *t = NULL;
        char err[PERF_ERRLEN] = "";
        struct perf_target_opts o = {.backend = vb, .need_write = 1};
        CHECK(perf_target_open(uri, &o, &t, err, sizeof(err)) == 0);
        struct perf_config c = {.pattern = PERF_PAT_READ,
                                .iosize = IOSIZE,
                                .qdepth = vqd,
                                .nqueues = 1,
                                .nthreads = 1,
                                .runtime_ns = 200 * MS,
                                .seed = 7,
                                .verify = 1,
                                .lat = 1};
        CHECK(perf_fill(t, &c, &res, err, sizeof(err)) == 0);
        CHECK(res.ios == FILE_BYTES / IOSIZE);
        CHECK(perf_run(t, &c, &res, err, sizeof(err)) == 0);
        CHECK(res.ios > 0 && res.verify_errors == 0);
        perf_target_close(t);
        run_ok(vb, PERF_PAT_RANDRW, vqd, 2, 1); /* mixed verified: writes the same stamps */
        /* corrupt LBA 777 */
        const uint64_t bad = 777;
        char junk[16] = "corrupted-block";
        CHECK(pwrite(fd, junk, sizeof(junk), (off_t)(bad * KIO_FILE_LBA_SIZE)) == sizeof(junk));
        fsync(fd);
        CHECK(perf_target_open(uri, &o, &t, err, sizeof(err)) == 0);
        c.seed = 7;
        CHECK(perf_run(t, &c, &res, err, sizeof(err)) == 0);
        printf("verify: %llu bad, first dev %u lba %llu\n", (unsigned long long)res.verify_errors, res.first_bad_dev,
               (unsigned long long)res.first_bad_lba);
        CHECK(res.verify_errors >= 1 && res.first_bad_lba == bad && res.first_bad_dev == 0);
        /* a different seed: every block mismatches */
        c.seed = 8;
        c.runtime_ns = 20 * MS;
        CHECK(perf_run(t, &c, &res, err, sizeof(err)) == 0);
        CHECK(res.verify_errors > 0);
        perf_target_close(t);
    }

    /* bad parameters */
    struct perf_config good = {.pattern = PERF_PAT_RANDREAD,
                               .iosize = IOSIZE,
                               .qdepth = 1,
                               .nqueues = 1,
                               .nthreads = 1,
                               .runtime_ns = 10 * MS,
                               .lat = 1};
    struct perf_config c = good;
    c.qdepth = 4;
    expect_err(uri, "psync", c, "qdepth=4");
    c = good;
    c.iosize = 1000;
    expect_err(uri, "psync", c, "iosize=1000");
    c = good;
    c.lba_start = FILE_BYTES;
    expect_err(uri, "psync", c, "lba_start");
    c = good;
    c.rwmix = 101;
    expect_err(uri, "psync", c, "rwmix");
    c = good;
    c.runtime_ns = 0;
    expect_err(uri, "psync", c, "runtime");
    expect_err("file:///nonexistent/nvmelab.bin", "psync", good, "no such file");
    expect_err(uri, "aio", good, "unknown backend");
    expect_err("nfs://x", NULL, good, "unknown target scheme");
    expect_err("blk:///dev/vda", "psync", good, "refused");
    expect_err("blk:///etc/passwd", "psync", good, "not a block device");
    /* one URI grammar (nvme/uri.c): its messages, this scheme's keys */
    expect_err("file://tmp/x.bin", "psync", good, "host part");
    expect_err("file:///tmp/a%00b", "psync", good, "encoded NUL character) in the path");
    expect_err("file:///tmp/x.bin?bogus=1", "psync", good, "unknown parameter 'bogus' for file://");
    expect_err("file:///tmp/x.bin?allow_write=maybe", "psync", good, "parameter 'allow_write': bad boolean");
    expect_err("file:///tmp/x.bin?backend=psync&backend=psync", "psync", good, "given twice");

    /* stop flag: the run ends early and says so */
    {
        struct perf_target *t = NULL;
        char err[PERF_ERRLEN] = "";
        struct perf_target_opts o = {.backend = "psync"};
        CHECK(perf_target_open(uri, &o, &t, err, sizeof(err)) == 0);
        int stop = 1;
        c = good;
        c.runtime_ns = 60ull * 1000 * MS;
        c.stop = &stop;
        CHECK(perf_run(t, &c, &res, err, sizeof(err)) == -EINTR);
        CHECK(res.interrupted == 1);
        perf_target_close(t);
    }
    close(fd);
    unlink(path);
    free(blk);
    return CHECK_DONE("test_perf_kio");
}
