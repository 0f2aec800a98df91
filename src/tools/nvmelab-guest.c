/* SPDX-License-Identifier: BSD-3-Clause */
/* nvmelab-guest — self-test and short perf run of the user-space driver on real (or QEMU) controllers.
 *
 * Built statically by env/qemu/run.sh against the driver sources and run inside the QEMU guest, which has
 * no Python. Commands:
 *   selftest URI [--queues N] [--rounds N]   bring-up, identify, multi-queue read-after-write with verify,
 *                                            PRP edge cases, queue wraparound, on every controller of URI
 *   perf URI [--seconds S] [--qd N] [--queues N] [--iosize B]
 *                                            closed-loop random reads, one qpair per thread
 *   open URI                                 open and close URI; prints the driver's error when it refuses
 *   provoke URI                              one command the controller must reject (LBA out of range),
 *                                            so that the test proves QEMU's error trace is really read
 *   devices | check | bind | unbind | hugepages   device management (devmgmt.h; same rules as
 *                                            `nvmelab devices|bind|unbind|hugepages`)
 * Every check prints one line "NVMELAB-TEST <name> PASS|FAIL <detail>"; the exit status is 1 when any
 * failed. Apart from `provoke`, nothing here sends a command the controller must reject: limits are tested
 * on the driver side (it must refuse before the controller sees anything), so QEMU's pci_nvme_err_* trace
 * stays empty.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devmgmt.h"
#include "nvme/nvme.h"
#include "tools/gpuq_guest.h"

#define GUEST_MAX_QUEUES    8u            /* worker threads (one qpair each) in the multi-queue test */
#define GUEST_RAW_DEPTH     32u           /* queue entries of the read-after-write qpairs */
#define GUEST_RAW_SLOTS     8u            /* commands in flight per thread in the read-after-write test */
#define GUEST_RAW_MAX_IO    (64u * 1024u) /* largest transfer used there (capped by the controller) */
#define GUEST_WRAP_CMDS     200u          /* commands pushed through each small queue */
#define GUEST_GUARD_BYTE    0xA5u         /* fill around read destinations to catch DMA overruns */
#define GUEST_PERF_DEPTH    32u           /* default perf queue depth */
#define GUEST_PERF_IOSIZE   4096u
#define GUEST_POLL_SPIN_MAX 100000000ull /* polls before a synchronous wait gives up */
#define NS_PER_S            1000000000.0

static int g_pass, g_fail;

static void result(int ok, const char *name, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("NVMELAB-TEST %s %s %s\n", name, ok ? "PASS" : "FAIL", detail);
    fflush(stdout);
    if (ok)
        g_pass++;
    else
        g_fail++;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_S;
}

/* Deterministic content of one LBA: depends on controller, namespace, LBA and a generation number. */
static void pattern(void *buf, size_t len, unsigned ctrl, uint32_t nsid, uint64_t lba, uint32_t lba_size, uint32_t gen)
{
    uint64_t *w = buf;
    for (size_t i = 0; i < len / sizeof *w; i++) {
        uint64_t l = lba + (i * sizeof *w) / lba_size;
        uint64_t x = (l << 20) ^ ((uint64_t)ctrl << 56) ^ ((uint64_t)nsid << 48) ^ ((uint64_t)gen << 32) ^ i;
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ull; /* splitmix64 finaliser: cheap, position dependent */
        x ^= x >> 32;
        w[i] = x;
    }
}

/* ---- a tiny completion tracker for synchronous use of a qpair ---- */
struct waiter {
    int done;
    struct nvme_cpl cpl;
};

static void on_cpl(void *arg, const struct nvme_cpl *cpl)
{
    struct waiter *w = arg;
    w->cpl = *cpl;
    w->done = 1;
}

/* Submit one command and poll until it completes; returns the submit error or 0 (cpl in *out). */
static int io_wait(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t opc, uint64_t slba, uint32_t nlb, void *buf,
                   size_t len, struct nvme_cpl *out)
{
    struct waiter w = {0};
    int rc = nvme_qpair_submit(q, ns, opc, slba, nlb, buf, len, on_cpl, &w);
    if (rc < 0)
        return rc;
    nvme_qpair_ring(q);
    for (unsigned long long i = 0; !w.done && i < GUEST_POLL_SPIN_MAX; i++) {
        rc = nvme_qpair_poll(q, 0);
        if (rc < 0 && !w.done)
            return rc;
    }
    if (!w.done)
        return -ETIMEDOUT;
    *out = w.cpl;
    return 0;
}

static const char *cpl_str(const struct nvme_cpl *c, char *buf, size_t len)
{
    return nvme_cpl_str(c, buf, len);
}

/* ---- identify ---- */
static void trim(char *dst, const char *src, size_t n)
{
    memcpy(dst, src, n);
    dst[n] = '\0';
    for (size_t i = n; i > 0 && (dst[i - 1] == ' ' || dst[i - 1] == '\0'); i--)
        dst[i - 1] = '\0';
}

static void test_identify(struct nvme_ctrl *c, unsigned ci)
{
    const struct nvme_id_ctrl *id = nvme_ctrl_id(c);
    char sn[NVME_SN_LEN + 1], mn[NVME_MN_LEN + 1], name[64];
    trim(sn, id->sn, NVME_SN_LEN);
    trim(mn, id->mn, NVME_MN_LEN);
    uint32_t vs = nvme_ctrl_vs(c);
    printf("ctrl %u sn=%s mn=%s vs=%u.%u mdts_bytes=%u max_xfer=%u page=%u qpairs=%u mqes=%u nns=%u\n", ci, sn, mn,
           vs >> 16, (vs >> 8) & 0xff, nvme_ctrl_mdts_bytes(c), nvme_ctrl_max_xfer(c), nvme_ctrl_page_size(c),
           nvme_ctrl_max_qpairs(c), nvme_ctrl_max_depth(c), nvme_ctrl_nns(c));
    int ok = sn[0] && nvme_ctrl_nns(c) >= 1 && nvme_ctrl_max_qpairs(c) >= 1 && nvme_ctrl_max_depth(c) >= 2 &&
             nvme_ctrl_max_xfer(c) >= nvme_ctrl_page_size(c);
    for (uint32_t i = 0; i < nvme_ctrl_nns(c); i++) {
        struct nvme_ns *ns = nvme_ctrl_ns_at(c, i);
        uint32_t lba = nvme_ns_lba_size(ns);
        printf("ctrl %u ns %u lba=%u nsze=%llu\n", ci, nvme_ns_id(ns), lba, (unsigned long long)nvme_ns_nsze(ns));
        ok =
            ok && lba >= 512 && (lba & (lba - 1)) == 0 && nvme_ns_nsze(ns) > 0 && nvme_ctrl_ns(c, nvme_ns_id(ns)) == ns;
    }
    snprintf(name, sizeof name, "ctrl%u.identify", ci);
    result(ok, name, "sn=%s nns=%u", sn, nvme_ctrl_nns(c));
}

/* ---- multi-queue read-after-write ---- */
struct raw_job {
    struct nvme_ctrl *c;
    struct nvme_ns *ns;
    unsigned ci, tid, rounds;
    uint64_t first_lba, nlbas; /* this thread's private range */
    int err;                   /* first failure, -errno or 1 for a status / mismatch */
    char msg[256];
    uint64_t ios, bytes;
};

struct slot {
    struct waiter w;
    uint64_t lba;
    uint32_t nlb;
};

static void *raw_thread(void *arg)
{
    struct raw_job *j = arg;
    struct nvme_qpair *q = NULL;
    struct nvme_dma *wd = NULL, *rd = NULL;
    uint32_t lba = nvme_ns_lba_size(j->ns);
    uint32_t max_io = nvme_ctrl_max_xfer(j->c) < GUEST_RAW_MAX_IO ? nvme_ctrl_max_xfer(j->c) : GUEST_RAW_MAX_IO;
    uint32_t max_nlb = max_io / lba;
    struct nvme_qpair_opts o = {.depth = GUEST_RAW_DEPTH};
    int rc;
    char cs[128];
    if (max_nlb == 0 || j->nlbas < (uint64_t)GUEST_RAW_SLOTS * max_nlb) {
        j->err = -EINVAL;
        snprintf(j->msg, sizeof j->msg, "namespace too small for the test");
        return NULL;
    }
    if ((rc = nvme_qpair_create(j->c, &o, &q)) < 0 ||
        (rc = nvme_dma_alloc(nvme_ctrl_target(j->c), (size_t)GUEST_RAW_SLOTS * max_io, &wd)) < 0 ||
        (rc = nvme_dma_alloc(nvme_ctrl_target(j->c), (size_t)GUEST_RAW_SLOTS * max_io, &rd)) < 0) {
        j->err = rc;
        snprintf(j->msg, sizeof j->msg, "setup: %s", strerror(-rc));
        goto out;
    }
    uint8_t *wb = nvme_dma_vaddr(wd), *rb = nvme_dma_vaddr(rd);
    unsigned seed = 0x9e3779b9u * (j->tid + 1) + j->ci;
    for (unsigned r = 0; r < j->rounds && !j->err; r++) {
        struct slot s[GUEST_RAW_SLOTS];
        /* one batch: GUEST_RAW_SLOTS writes of varying length at distinct places, then the reads */
        for (int phase = 0; phase < 2 && !j->err; phase++) {
            for (unsigned k = 0; k < GUEST_RAW_SLOTS; k++) {
                if (phase == 0) {
                    seed = seed * 1103515245u + 12345u;
                    s[k].nlb = 1 + (seed >> 8) % max_nlb;
                    uint64_t span = j->nlbas / GUEST_RAW_SLOTS; /* slot k owns its own sub-range */
                    s[k].lba = j->first_lba + k * span + ((seed >> 4) % (span - s[k].nlb + 1));
                    pattern(wb + (size_t)k * max_io, (size_t)s[k].nlb * lba, j->ci, nvme_ns_id(j->ns), s[k].lba, lba,
                            r);
                } else {
                    memset(rb + (size_t)k * max_io, 0, (size_t)s[k].nlb * lba);
                }
                s[k].w.done = 0;
                uint8_t *b = (phase == 0 ? wb : rb) + (size_t)k * max_io;
                rc = nvme_qpair_submit(q, j->ns, phase == 0 ? NVME_CMD_WRITE : NVME_CMD_READ, s[k].lba, s[k].nlb, b,
                                       (size_t)s[k].nlb * lba, on_cpl, &s[k].w);
                if (rc < 0) {
                    j->err = rc;
                    snprintf(j->msg, sizeof j->msg, "submit: %s", strerror(-rc));
                    break;
                }
            }
            nvme_qpair_ring(q);
            for (unsigned long long spin = 0; nvme_qpair_outstanding(q) && spin < GUEST_POLL_SPIN_MAX; spin++)
                if ((rc = nvme_qpair_poll(q, 0)) < 0) {
                    j->err = rc;
                    snprintf(j->msg, sizeof j->msg, "poll: %s", strerror(-rc));
                    break;
                }
            for (unsigned k = 0; k < GUEST_RAW_SLOTS && !j->err; k++) {
                if (!s[k].w.done || !nvme_cpl_ok(&s[k].w.cpl)) {
                    j->err = 1;
                    snprintf(j->msg, sizeof j->msg, "%s lba %llu nlb %u: %s", phase ? "read" : "write",
                             (unsigned long long)s[k].lba, s[k].nlb,
                             s[k].w.done ? cpl_str(&s[k].w.cpl, cs, sizeof cs) : "no completion");
                }
                j->ios++;
                j->bytes += (uint64_t)s[k].nlb * lba;
            }
        }
        for (unsigned k = 0; k < GUEST_RAW_SLOTS && !j->err; k++)
            if (memcmp(wb + (size_t)k * max_io, rb + (size_t)k * max_io, (size_t)s[k].nlb * lba)) {
                j->err = 1;
                snprintf(j->msg, sizeof j->msg, "data mismatch at lba %llu nlb %u round %u",
                         (unsigned long long)s[k].lba, s[k].nlb, r);
            }
    }
out:
    nvme_dma_free(rd);
    nvme_dma_free(wd);
    if (q)
        nvme_qpair_destroy(q);
    return NULL;
}

static void test_raw(struct nvme_ctrl *c, unsigned ci, struct nvme_ns *ns, unsigned nq, unsigned rounds)
{
    char name[64];
    unsigned maxq = nvme_ctrl_max_qpairs(c);
    if (nq > maxq)
        nq = maxq;
    if (nq > GUEST_MAX_QUEUES)
        nq = GUEST_MAX_QUEUES;
    struct raw_job jobs[GUEST_MAX_QUEUES];
    pthread_t th[GUEST_MAX_QUEUES];
    uint64_t per = nvme_ns_nsze(ns) / nq;
    double t0 = now_s();
    for (unsigned t = 0; t < nq; t++) {
        jobs[t] = (struct raw_job){
            .c = c, .ns = ns, .ci = ci, .tid = t, .rounds = rounds, .first_lba = t * per, .nlbas = per};
        pthread_create(&th[t], NULL, raw_thread, &jobs[t]);
    }
    int ok = 1;
    uint64_t ios = 0, bytes = 0;
    const char *why = "";
    for (unsigned t = 0; t < nq; t++) {
        pthread_join(th[t], NULL);
        ios += jobs[t].ios;
        bytes += jobs[t].bytes;
        if (jobs[t].err && ok) {
            ok = 0;
            why = jobs[t].msg;
        }
    }
    snprintf(name, sizeof name, "ctrl%u.ns%u.multiqueue-raw", ci, nvme_ns_id(ns));
    result(ok, name, "%u qpairs, %llu commands, %.1f MiB verified in %.2f s%s%s", nq, (unsigned long long)ios,
           (double)bytes / (1024.0 * 1024.0), now_s() - t0, ok ? "" : ": ", why);
}

/* ---- PRP edge cases ---- */
static void test_prp(struct nvme_ctrl *c, unsigned ci, struct nvme_ns *ns)
{
    uint32_t page = nvme_ctrl_page_size(c), lba = nvme_ns_lba_size(ns), mx = nvme_ctrl_max_xfer(c);
    size_t span = (size_t)mx + 2u * page; /* room for the largest transfer at any offset */
    struct nvme_qpair *q = NULL;
    struct nvme_dma *d = NULL;
    char name[96], cs[128];
    struct nvme_qpair_opts o = {.depth = GUEST_RAW_DEPTH};
    int rc = nvme_qpair_create(c, &o, &q);
    if (rc == 0)
        rc = nvme_dma_alloc(nvme_ctrl_target(c), 2 * span, &d);
    snprintf(name, sizeof name, "ctrl%u.ns%u.prp-setup", ci, nvme_ns_id(ns));
    if (rc < 0) {
        result(0, name, "%s", strerror(-rc));
        goto out;
    }
    uint8_t *wbuf = nvme_dma_vaddr(d), *rbuf = wbuf + span;
    /* (offset into the source buffer, bytes, offset into the destination buffer) */
    struct {
        const char *what;
        size_t off;
        size_t len;
        size_t roff;
    } cases[] = {
        {"one-lba", 0, lba, 0},
        {"lba-crossing-page", page - lba / 2 - (lba / 2) % 4, lba, page - 4}, /* PRP1 + PRP2 (2nd page) */
        {"one-page", 0, page, 0},
        {"two-pages", 0, 2u * page, 0},           /* PRP2 is a page pointer */
        {"two-pages-offset", 64, 2u * page, 128}, /* three pages: PRP list */
        {"three-pages", 0, 3u * page, 0},         /* PRP list */
        {"max-transfer", 0, mx, 0},               /* the longest PRP list */
        {"max-transfer-offset", 512, mx, 4},      /* the longest list, one more page */
        {"max-transfer-end-of-page", page - 4, mx, page - 8},
    };
    uint64_t nsze = nvme_ns_nsze(ns);
    uint64_t slba = nsze / 2; /* middle of the namespace, away from the multi-queue ranges' starts */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = cases[i].len - cases[i].len % lba;
        if (len == 0)
            len = lba;
        uint32_t nlb = (uint32_t)(len / lba);
        struct nvme_cpl cw = {0}, cr = {0};
        memset(rbuf, GUEST_GUARD_BYTE, span);
        pattern(wbuf + cases[i].off, len, ci, nvme_ns_id(ns), slba, lba, (uint32_t)i + 1000u);
        int rw = io_wait(q, ns, NVME_CMD_WRITE, slba, nlb, wbuf + cases[i].off, len, &cw);
        int rr = rw ? rw : io_wait(q, ns, NVME_CMD_READ, slba, nlb, rbuf + cases[i].roff, len, &cr);
        int ok = rw == 0 && rr == 0 && nvme_cpl_ok(&cw) && nvme_cpl_ok(&cr);
        const char *why = "";
        char buf[160];
        if (!ok) {
            snprintf(buf, sizeof buf, "write %s / read %s", rw ? strerror(-rw) : cpl_str(&cw, cs, sizeof cs),
                     rr ? strerror(-rr) : "");
            why = buf;
        } else if (memcmp(wbuf + cases[i].off, rbuf + cases[i].roff, len)) {
            ok = 0;
            why = "data mismatch";
        } else {
            for (size_t b = 0; b < span && ok; b++)
                if ((b < cases[i].roff || b >= cases[i].roff + len) && rbuf[b] != GUEST_GUARD_BYTE) {
                    ok = 0;
                    snprintf(buf, sizeof buf, "DMA wrote outside the buffer at byte %zd",
                             (ssize_t)b - (ssize_t)cases[i].roff);
                    why = buf;
                }
        }
        snprintf(name, sizeof name, "ctrl%u.ns%u.prp.%s", ci, nvme_ns_id(ns), cases[i].what);
        result(ok, name, "%zu B at +%zu -> +%zu%s%s", len, cases[i].off, cases[i].roff, ok ? "" : ": ", why);
    }
    /* limits the driver must enforce before the controller sees the command */
    struct nvme_cpl cpl;
    rc = io_wait(q, ns, NVME_CMD_READ, 0, mx / lba + 1, rbuf, (size_t)mx + lba, &cpl);
    snprintf(name, sizeof name, "ctrl%u.ns%u.refuse-over-mdts", ci, nvme_ns_id(ns));
    result(rc == -E2BIG, name, "%u B > max transfer %u B -> %s", mx + lba, mx, rc ? strerror(-rc) : "submitted!");
    rc = io_wait(q, ns, NVME_CMD_READ, nsze - 1, 2, rbuf, 2u * lba, &cpl);
    snprintf(name, sizeof name, "ctrl%u.ns%u.refuse-beyond-end", ci, nvme_ns_id(ns));
    result(rc == -ERANGE, name, "lba %llu + 2 > nsze %llu -> %s", (unsigned long long)(nsze - 1),
           (unsigned long long)nsze, rc ? strerror(-rc) : "submitted!");
    rc = io_wait(q, ns, NVME_CMD_READ, 0, 1, rbuf + 1, lba, &cpl);
    snprintf(name, sizeof name, "ctrl%u.ns%u.refuse-unaligned-buffer", ci, nvme_ns_id(ns));
    result(rc == -EINVAL, name, "buffer at +1 -> %s", rc ? strerror(-rc) : "submitted!");
    /* last LBA of the namespace: the boundary itself is legal */
    struct nvme_cpl cw = {0}, cr = {0};
    pattern(wbuf, lba, ci, nvme_ns_id(ns), nsze - 1, lba, 7);
    int rw = io_wait(q, ns, NVME_CMD_WRITE, nsze - 1, 1, wbuf, lba, &cw);
    int rr = rw ? rw : io_wait(q, ns, NVME_CMD_READ, nsze - 1, 1, rbuf, lba, &cr);
    snprintf(name, sizeof name, "ctrl%u.ns%u.last-lba", ci, nvme_ns_id(ns));
    result(!rw && !rr && nvme_cpl_ok(&cw) && nvme_cpl_ok(&cr) && !memcmp(wbuf, rbuf, lba), name, "lba %llu",
           (unsigned long long)(nsze - 1));
out:
    nvme_dma_free(d);
    if (q)
        nvme_qpair_destroy(q);
}

/* ---- queue wraparound: small queues kept full for many times their depth ---- */
struct wrap_ctx {
    unsigned completed, bad;
    struct nvme_cpl first_bad;
};

static void wrap_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct wrap_ctx *w = arg;
    w->completed++;
    if (!nvme_cpl_ok(cpl) && w->bad++ == 0)
        w->first_bad = *cpl;
}

static void test_wrap(struct nvme_ctrl *c, unsigned ci, struct nvme_ns *ns)
{
    static const uint32_t depths[] = {2, 3, 8};
    uint32_t lba = nvme_ns_lba_size(ns);
    char name[64], cs[128];
    for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
        struct nvme_qpair *q = NULL;
        struct nvme_dma *d = NULL;
        struct nvme_qpair_opts o = {.depth = depths[di]};
        struct wrap_ctx w = {0};
        unsigned submitted = 0;
        int rc = nvme_qpair_create(c, &o, &q);
        if (rc == 0)
            rc = nvme_dma_alloc(nvme_ctrl_target(c), (size_t)depths[di] * lba, &d);
        snprintf(name, sizeof name, "ctrl%u.ns%u.wrap-depth%u", ci, nvme_ns_id(ns), depths[di]);
        if (rc < 0) {
            result(0, name, "setup: %s", strerror(-rc));
            goto next;
        }
        uint8_t *b = nvme_dma_vaddr(d);
        unsigned full = 0;
        while (w.completed < GUEST_WRAP_CMDS && rc >= 0) {
            while (submitted < GUEST_WRAP_CMDS) {
                unsigned slot = submitted % depths[di];
                uint8_t opc = (submitted / depths[di]) % 2 ? NVME_CMD_READ : NVME_CMD_WRITE;
                rc = nvme_qpair_submit(q, ns, opc, slot, 1, b + (size_t)slot * lba, lba, wrap_cb, &w);
                if (rc == -EBUSY) {
                    full++;
                    rc = 0;
                    break;
                }
                if (rc < 0)
                    break;
                submitted++;
            }
            if (rc >= 0)
                rc = nvme_qpair_poll(q, 0);
        }
        int ok = rc >= 0 && w.completed == GUEST_WRAP_CMDS && w.bad == 0 && full > 0 && nvme_qpair_outstanding(q) == 0;
        result(ok, name, "%u commands through %u entries (%u x full, %u wraps)%s%s", w.completed, depths[di], full,
               w.completed / depths[di], w.bad ? ": " : (rc < 0 ? ": " : ""),
               w.bad ? cpl_str(&w.first_bad, cs, sizeof cs) : (rc < 0 ? strerror(-rc) : ""));
    next:
        nvme_dma_free(d);
        if (q)
            nvme_qpair_destroy(q);
    }
}

/* ---- perf: closed loop, random reads, one qpair per thread ---- */
struct perf_job {
    struct nvme_ctrl *c;
    struct nvme_ns *ns;
    uint32_t qd, iosize;
    double seconds;
    uint64_t ios, errors;
    int err;
};

struct pslot {
    struct perf_job *j;
    unsigned inflight;
};

static void perf_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct pslot *s = arg;
    s->j->ios++;
    if (!nvme_cpl_ok(cpl))
        s->j->errors++;
    s->inflight--;
}

static void *perf_thread(void *arg)
{
    struct perf_job *j = arg;
    struct nvme_qpair *q = NULL;
    struct nvme_dma *d = NULL;
    struct nvme_qpair_opts o = {.depth = j->qd + 1};
    uint32_t lba = nvme_ns_lba_size(j->ns), nlb = j->iosize / lba;
    uint64_t range = nvme_ns_nsze(j->ns) / nlb;
    int rc = nvme_qpair_create(j->c, &o, &q);
    if (rc == 0)
        rc = nvme_dma_alloc(nvme_ctrl_target(j->c), (size_t)j->qd * j->iosize, &d);
    if (rc < 0) {
        j->err = rc;
        goto out;
    }
    struct pslot s = {.j = j};
    uint64_t x = 88172645463325252ull ^ (uintptr_t)j;
    uint8_t *b = nvme_dma_vaddr(d);
    double end = now_s() + j->seconds;
    unsigned k = 0;
    while (now_s() < end) {
        while (s.inflight < j->qd) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17; /* xorshift64 */
            rc = nvme_qpair_submit(q, j->ns, NVME_CMD_READ, (x % range) * nlb, nlb,
                                   b + (size_t)(k++ % j->qd) * j->iosize, j->iosize, perf_cb, &s);
            if (rc < 0)
                break;
            s.inflight++;
        }
        nvme_qpair_ring(q);
        if ((rc = nvme_qpair_poll(q, 0)) < 0) {
            j->err = rc;
            break;
        }
    }
    for (unsigned long long spin = 0; s.inflight && spin < GUEST_POLL_SPIN_MAX; spin++)
        nvme_qpair_poll(q, 0);
out:
    nvme_dma_free(d);
    if (q)
        nvme_qpair_destroy(q);
    return NULL;
}

static int cmd_perf(struct nvme_target *t, double seconds, uint32_t qd, unsigned nq, uint32_t iosize)
{
    for (unsigned ci = 0; ci < nvme_target_nctrl(t); ci++) {
        struct nvme_ctrl *c = nvme_target_ctrl(t, ci);
        struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
        unsigned n = nq < nvme_ctrl_max_qpairs(c) ? nq : nvme_ctrl_max_qpairs(c);
        if (n > GUEST_MAX_QUEUES)
            n = GUEST_MAX_QUEUES;
        uint32_t io = iosize < nvme_ns_lba_size(ns) ? nvme_ns_lba_size(ns) : iosize;
        struct perf_job jobs[GUEST_MAX_QUEUES];
        pthread_t th[GUEST_MAX_QUEUES];
        double t0 = now_s();
        for (unsigned i = 0; i < n; i++) {
            jobs[i] = (struct perf_job){.c = c, .ns = ns, .qd = qd, .iosize = io, .seconds = seconds};
            pthread_create(&th[i], NULL, perf_thread, &jobs[i]);
        }
        uint64_t ios = 0, errors = 0;
        int err = 0;
        for (unsigned i = 0; i < n; i++) {
            pthread_join(th[i], NULL);
            ios += jobs[i].ios;
            errors += jobs[i].errors;
            if (jobs[i].err && !err)
                err = jobs[i].err;
        }
        double el = now_s() - t0;
        char name[64];
        snprintf(name, sizeof name, "ctrl%u.perf", ci);
        printf("NVMELAB-PERF ctrl=%u ns=%u pattern=randread iosize=%u qd=%u nqueues=%u seconds=%.2f ios=%llu "
               "iops=%.0f mibs=%.2f errors=%llu\n",
               ci, nvme_ns_id(ns), io, qd, n, el, (unsigned long long)ios, (double)ios / el,
               (double)ios * io / el / (1024.0 * 1024.0), (unsigned long long)errors);
        result(err == 0 && errors == 0 && ios > 0, name, "%.0f IOPS (%s)", (double)ios / el,
               err ? strerror(-err) : "no errors");
    }
    return g_fail ? 1 : 0;
}

/* ---- provoke: one command QEMU must flag, to prove the trace-event check can fail ---- */
/* A Read one LBA past the end of namespace 1 of controller 0, built raw so that the driver's own range
 * check is bypassed. The controller must answer LBA Out of Range; QEMU logs pci_nvme_err_invalid_lba_range
 * and pci_nvme_err_req_status, which run.sh then expects exactly once each (and no other event). */
#define GUEST_PROVOKED_EVENT  "pci_nvme_err_invalid_lba_range"
#define GUEST_PROVOKED_STATUS "pci_nvme_err_req_status"
static int cmd_provoke(struct nvme_target *t)
{
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair *q = NULL;
    struct nvme_dma *d = NULL;
    struct nvme_qpair_opts o = {.depth = GUEST_RAW_DEPTH};
    struct waiter w = {0};
    char cs[128];
    int rc = nvme_qpair_create(c, &o, &q);
    if (rc == 0)
        rc = nvme_dma_alloc(t, nvme_ns_lba_size(ns), &d);
    if (rc == 0) {
        uint64_t slba = nvme_ns_nsze(ns);
        struct nvme_sqe sqe = {.opc = NVME_CMD_READ,
                               .nsid = nvme_ns_id(ns),
                               .cdw10 = (uint32_t)slba,
                               .cdw11 = (uint32_t)(slba >> 32),
                               .cdw12 = 0 /* one LBA (0's based) */};
        rc = nvme_qpair_submit_raw(q, &sqe, nvme_dma_vaddr(d), nvme_ns_lba_size(ns), on_cpl, &w);
        nvme_qpair_ring(q);
        for (unsigned long long i = 0; rc == 0 && !w.done && i < GUEST_POLL_SPIN_MAX; i++)
            if (nvme_qpair_poll(q, 0) < 0)
                break;
    }
    int ok = rc == 0 && w.done && w.cpl.err == 0 && w.cpl.sct == NVME_SCT_GENERIC && w.cpl.sc == NVME_SC_LBA_RANGE;
    result(ok, "provoke-lba-out-of-range", "read past the end -> %s",
           rc       ? strerror(-rc)
           : w.done ? cpl_str(&w.cpl, cs, sizeof cs)
                    : "no completion");
    if (ok) /* the range check, and the error status of the completion */
        printf("NVMELAB-PROVOKED %s 1\nNVMELAB-PROVOKED %s 1\n", GUEST_PROVOKED_EVENT, GUEST_PROVOKED_STATUS);
    nvme_dma_free(d);
    if (q)
        nvme_qpair_destroy(q);
    return ok ? 0 : 1;
}

static int open_target(const char *uri, struct nvme_target **t)
{
    char err[NVME_ERRLEN];
    int rc = nvme_target_open(uri, t, err, sizeof err);
    if (rc < 0) {
        printf("open %s: error: %s\n", uri, err);
        return rc;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: nvmelab-guest selftest URI [--queues N] [--rounds N]\n"
                    "       nvmelab-guest perf URI [--seconds S] [--qd N] [--queues N] [--iosize B]\n"
                    "       nvmelab-guest open URI | provoke URI | gpuq URI [--rounds N]\n"
                    "       nvmelab-guest devices | check ADDR | bind ADDR --driver D | unbind ADDR | hugepages [N]\n");
    return 2;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    if (!strcmp(cmd, "devices") || !strcmp(cmd, "check") || !strcmp(cmd, "bind") || !strcmp(cmd, "unbind") ||
        !strcmp(cmd, "hugepages"))
        return dm_main(argc, argv);
    if (argc < 3)
        return usage();
    const char *uri = argv[2];
    unsigned nq = 4, rounds = 8;
    uint32_t qd = GUEST_PERF_DEPTH, iosize = GUEST_PERF_IOSIZE;
    double seconds = 2.0;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--queues"))
            nq = (unsigned)strtoul(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = (unsigned)strtoul(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--qd"))
            qd = (uint32_t)strtoul(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--iosize"))
            iosize = (uint32_t)strtoul(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = strtod(argv[i + 1], NULL);
        else
            return usage();
    }
    if (nq == 0 || qd == 0 || iosize == 0 || !(seconds > 0))
        return usage();
    struct nvme_target *t = NULL;
    if (!strcmp(cmd, "open")) {
        if (open_target(uri, &t) < 0)
            return 1;
        printf("open %s: ok, %u controllers\n", uri, nvme_target_nctrl(t));
        nvme_target_close(t);
        return 0;
    }
    if (strcmp(cmd, "selftest") && strcmp(cmd, "perf") && strcmp(cmd, "provoke") && strcmp(cmd, "gpuq"))
        return usage();
    double t0 = now_s();
    int rc = open_target(uri, &t);
    result(rc == 0, "bring-up", "%s: %u controllers in %.2f s", uri, rc == 0 ? nvme_target_nctrl(t) : 0, now_s() - t0);
    if (rc < 0)
        return 1;
    if (!strcmp(cmd, "perf")) {
        rc = cmd_perf(t, seconds, qd, nq, iosize);
    } else if (!strcmp(cmd, "provoke")) {
        rc = cmd_provoke(t);
    } else if (!strcmp(cmd, "gpuq")) {
        rc = gpuq_guest_run(t, rounds); /* the GPU-queue path with the CPU stand-in (gpuq_guest.c) */
    } else {
        for (unsigned ci = 0; ci < nvme_target_nctrl(t); ci++) {
            struct nvme_ctrl *c = nvme_target_ctrl(t, ci);
            test_identify(c, ci);
            for (uint32_t i = 0; i < nvme_ctrl_nns(c); i++) {
                struct nvme_ns *ns = nvme_ctrl_ns_at(c, i);
                test_raw(c, ci, ns, i == 0 ? nq : 1, rounds);
                test_prp(c, ci, ns);
                if (i == 0)
                    test_wrap(c, ci, ns);
            }
        }
        rc = g_fail ? 1 : 0;
    }
    t0 = now_s();
    nvme_target_close(t);
    printf("close: %.2f s; %d passed, %d failed\n", now_s() - t0, g_pass, g_fail);
    return rc;
}
