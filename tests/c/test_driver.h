/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_driver.h — small helpers shared by the driver's C tests (tests/c/test_driver_*.c): the checks of check.h
 * (T_CHECK, T_EQ, ...), an "open or die" for emu:// targets, a synchronous submit-and-wait on a
 * qpair, and a deterministic pattern generator. Header-only test code, not library code.
 */
#ifndef TEST_DRIVER_H
#define TEST_DRIVER_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nvme/nvme.h"

static inline struct nvme_target *t_open(const char *uri)
{
    struct nvme_target *t = NULL;
    char err[NVME_ERRLEN];
    int rc = nvme_target_open(uri, &t, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "open %s failed (%d): %s\n", uri, rc, err);
        abort();
    }
    return t;
}

struct t_wait {
    int done;
    struct nvme_cpl cpl;
};

static inline void t_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct t_wait *w = (struct t_wait *)arg;
    w->cpl = *cpl;
    w->done++;
}

/* Submit one command and poll until it completes; returns the submit rc (cpl in *cpl on 0). */
static inline int t_io(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t opc, uint64_t slba, uint32_t nlb, void *buf,
                       size_t len, struct nvme_cpl *cpl)
{
    struct t_wait w = {0};
    int rc = nvme_qpair_submit(q, ns, opc, slba, nlb, buf, len, t_cb, &w);
    if (rc)
        return rc;
    while (!w.done) {
        int n = nvme_qpair_poll(q, 0);
        if (n < 0 && !w.done)
            return n;
    }
    *cpl = w.cpl;
    return 0;
}

static inline int t_raw(struct nvme_qpair *q, const struct nvme_sqe *sqe, void *buf, size_t len, struct nvme_cpl *cpl)
{
    struct t_wait w = {0};
    int rc = nvme_qpair_submit_raw(q, sqe, buf, len, t_cb, &w);
    if (rc)
        return rc;
    while (!w.done) {
        int n = nvme_qpair_poll(q, 0);
        if (n < 0 && !w.done)
            return n;
    }
    *cpl = w.cpl;
    return 0;
}

/* xorshift64* pattern: the same (seed, i) gives the same byte everywhere */
static inline void t_fill(uint8_t *p, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        p[i] = (uint8_t)((x * 0x2545F4914F6CDD1Dull) >> 56);
    }
}

#endif /* TEST_DRIVER_H */
