/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuq_guest.c — `nvmelab-guest gpuq URI`: the real-controller path of device-initiated I/O without a GPU.
 * On every controller of URI: I/O queue pairs created for GPU threads (interrupts off, host-memory rings;
 * nvme/gpuq_ctrl.h), driven by the CPU stand-in round (the GPU kernel's SQE/CID/phase logic from
 * nvme/nvme_gpuq.h, with its read-back of the last SQE before the doorbell and the poller warp's order of
 * CQ reads) at several depths so the rings wrap; write then poisoned read-back with stamps on
 * two pairs at once; the three completion-matching modes, each command stamped for the per-I/O time
 * breakdown; then a command withheld from the doorbell (its completion never comes), and the teardown after a
 * timeout (queues deleted before the memory is freed), after which a fresh pair must work. Prints NVMELAB-TEST lines
 * like the rest of nvmelab-guest. */
#include "tools/gpuq_guest.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nvme/gpuq_ctrl.h"
#include "nvme/nvme.h"
#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"

#define GQ_PAIRS      2u
#define GQ_MAX_QD     64u
#define GQ_TIMEOUT_NS 2000000000ull /* 2 s per completion under TCG */
#define GQ_WORD       8u

static int g_ok, g_bad;

static void gq_result(int ok, const char *name, unsigned ci, const char *detail)
{
    printf("NVMELAB-TEST gpuq.ctrl%u.%s %s %s\n", ci, name, ok ? "PASS" : "FAIL", detail);
    fflush(stdout);
    ok ? g_ok++ : g_bad++;
}

/* One round of qd commands on pair p: command i covers LBAs lba0 + i * nlb.., buffer page i of buf. */
static const struct nvme_gpuq_round_opt gq_cid = {.match = NVME_GPUQ_MATCH_CID};

static int gq_round_opt(struct nvme_gpuq_pair *p, struct nvme_ns *ns, struct nvme_dma *buf, const uint64_t *lut,
                        size_t npages, int wr, uint64_t lba0, uint32_t qd, uint32_t dev, uint64_t timeout_ns,
                        const struct nvme_gpuq_round_opt *o, struct nvme_gpuq_match_ctr *ctr, char *err, size_t errlen,
                        uint64_t *bad_words)
{
    uint64_t slba[GQ_MAX_QD], p1[GQ_MAX_QD], p2[GQ_MAX_QD];
    uint16_t st[GQ_MAX_QD];
    const uint32_t lbas = nvme_ns_lba_size(ns), nlb = NVME_GPUQ_PAGE_SIZE / lbas, per = lbas / GQ_WORD;
    uint8_t *mem = nvme_dma_vaddr(buf);
    for (uint32_t i = 0; i < qd; i++) {
        slba[i] = lba0 + (uint64_t)i * nlb;
        if (nvme_gpuq_prp(lut, npages, (uint64_t)i * NVME_GPUQ_PAGE_SIZE, NVME_GPUQ_PAGE_SIZE, NULL, 0, &p1[i], &p2[i]))
            return snprintf(err, errlen, "PRP build failed"), -EINVAL;
        uint64_t *w = (uint64_t *)(mem + (size_t)i * NVME_GPUQ_PAGE_SIZE);
        for (uint32_t x = 0; x < NVME_GPUQ_PAGE_SIZE / GQ_WORD; x++) /* reads: poisoned (stamps are never 0) */
            w[x] = wr ? nvme_gpuq_stamp(dev, slba[i] + x / per, x % per) : 0;
    }
    int rc = nvme_gpuq_cpu_round_opt(p, wr ? NVME_CMD_WRITE : NVME_CMD_READ, nvme_ns_id(ns), slba, nlb, p1, p2, qd,
                                     timeout_ns, o, ctr, st, err, errlen);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < qd; i++) {
        if (st[i])
            return snprintf(err, errlen, "command %u: status sct=%u sc=0x%02x", i, nvme_cqe_sct(st[i]),
                            nvme_cqe_sc(st[i])),
                   -EIO;
        const uint64_t *w = (const uint64_t *)(mem + (size_t)i * NVME_GPUQ_PAGE_SIZE);
        for (uint32_t x = 0; !wr && x < NVME_GPUQ_PAGE_SIZE / GQ_WORD; x++)
            *bad_words += w[x] != nvme_gpuq_stamp(dev, slba[i] + x / per, x % per);
    }
    return 0;
}

static int gq_round(struct nvme_gpuq_pair *p, struct nvme_ns *ns, struct nvme_dma *buf, const uint64_t *lut,
                    size_t npages, int wr, uint64_t lba0, uint32_t qd, uint32_t dev, uint64_t timeout_ns, char *err,
                    size_t errlen, uint64_t *bad_words)
{
    return gq_round_opt(p, ns, buf, lut, npages, wr, lba0, qd, dev, timeout_ns, &gq_cid, NULL, err, errlen, bad_words);
}

/* The three completion-matching modes (nvme/nvme_gpuq_match.h) on a real controller: per mode a verified
 * write + read round on pair p with every command stamped for the per-I/O time breakdown; the stamps of each
 * command must be in order (T0 <= T1 <= T2 <= T3P <= T3 <= T4), and scan must load more CQ bytes than cid. */
static int gq_match_modes(struct nvme_gpuq_pair *p, struct nvme_ns *ns, struct nvme_dma *buf, const uint64_t *lut,
                          uint32_t qd, unsigned ci, char *err, size_t errlen)
{
    static uint64_t rows[GQ_MAX_QD][NVME_GPUQ_NSTAMPS];
    uint8_t sampled[GQ_MAX_QD];
    struct nvme_gpuq_stamps stamps = {.every = 1, .cmds = 0, .t = rows, .sampled = sampled};
    uint64_t cq_bytes[NVME_GPUQ_MATCH_MODES] = {0};
    char name[32], detail[640];
    int rc = 0;
    p->stamps = &stamps;
    for (int m = 0; m < (int)NVME_GPUQ_MATCH_MODES && !rc; m++) {
        const struct nvme_gpuq_round_opt o = {.match = m};
        struct nvme_gpuq_match_ctr ctr = {0};
        uint64_t bad = 0, disorder = 0, unsampled = 0;
        const uint64_t lba0 = (uint64_t)(m + 1) * GQ_MAX_QD * (NVME_GPUQ_PAGE_SIZE / nvme_ns_lba_size(ns));
        rc = gq_round_opt(p, ns, buf, lut, qd, 1, lba0, qd, ci, GQ_TIMEOUT_NS, &o, &ctr, err, errlen, &bad);
        if (!rc)
            rc = gq_round_opt(p, ns, buf, lut, qd, 0, lba0, qd, ci, GQ_TIMEOUT_NS, &o, &ctr, err, errlen, &bad);
        for (uint32_t i = 0; !rc && i < qd; i++) { /* the read round's stamps */
            unsampled += !sampled[i];
            for (unsigned k = 1; k < NVME_GPUQ_NSTAMPS; k++)
                disorder += rows[i][k] < rows[i][k - 1];
        }
        cq_bytes[m] = ctr.cq_bytes;
        snprintf(name, sizeof(name), "match-%s", nvme_gpuq_match_name(m));
        snprintf(detail, sizeof(detail),
                 "%u commands x2, %llu words differ, %llu CQ bytes in %llu looks, %llu stamps out of order, %llu "
                 "unsampled%s%s",
                 qd, (unsigned long long)bad, (unsigned long long)ctr.cq_bytes, (unsigned long long)ctr.looks,
                 (unsigned long long)disorder, (unsigned long long)unsampled, rc ? ": " : "", rc ? err : "");
        gq_result(!rc && !bad && !disorder && !unsampled && ctr.looks, name, ci, detail);
    }
    p->stamps = NULL;
    if (!rc) {
        snprintf(detail, sizeof(detail), "CQ bytes: cid %llu, positional %llu, scan %llu",
                 (unsigned long long)cq_bytes[NVME_GPUQ_MATCH_CID],
                 (unsigned long long)cq_bytes[NVME_GPUQ_MATCH_POSITIONAL],
                 (unsigned long long)cq_bytes[NVME_GPUQ_MATCH_SCAN]);
        gq_result(qd < 2 || cq_bytes[NVME_GPUQ_MATCH_SCAN] > cq_bytes[NVME_GPUQ_MATCH_CID], "match-scan-cost", ci,
                  detail);
    }
    return rc;
}

static void gq_ctrl(struct nvme_target *t, unsigned ci, unsigned rounds)
{
    struct nvme_ctrl *c = nvme_target_ctrl(t, ci);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    char err[512] = "", detail[640];
    struct nvme_gpuq_pair *p[GQ_PAIRS] = {0};
    struct nvme_dma *buf[GQ_PAIRS] = {0};
    uint64_t lut[GQ_PAIRS][GQ_MAX_QD];
    uint32_t qd = nvme_ctrl_max_depth(c) - 1u < GQ_MAX_QD ? nvme_ctrl_max_depth(c) - 1u : GQ_MAX_QD;
    int rc = 0;
    for (unsigned k = 0; k < GQ_PAIRS && !rc; k++) {
        rc = nvme_gpuq_pair_create(c, qd + 1u, &p[k], err, sizeof(err));
        if (!rc)
            rc = nvme_dma_alloc(t, (size_t)qd * NVME_GPUQ_PAGE_SIZE, &buf[k]);
        if (!rc)
            rc = nvme_gpuq_lut(buf[k], lut[k], qd);
    }
    snprintf(detail, sizeof(detail), "%u pairs of %u entries, IEN=0, host-memory rings%s%s", GQ_PAIRS, qd + 1u,
             rc ? ": " : "", rc ? err : "");
    gq_result(!rc, "create", ci, detail);
    /* depths 1, 3, qd/2, qd on both pairs: write then read back, ring positions wrap over the rounds */
    const uint32_t depths[] = {1u, 3u, qd / 2u ? qd / 2u : 1u, qd};
    uint64_t bad = 0, cmds = 0;
    for (unsigned r = 0; r < rounds && !rc; r++)
        for (unsigned di = 0; di < sizeof(depths) / sizeof(depths[0]) && !rc; di++)
            for (unsigned k = 0; k < GQ_PAIRS && !rc; k++) {
                uint64_t lba0 =
                    ((uint64_t)(r * 4u + di) * GQ_PAIRS + k) * GQ_MAX_QD * (NVME_GPUQ_PAGE_SIZE / nvme_ns_lba_size(ns));
                lba0 %= nvme_ns_nsze(ns) - (uint64_t)GQ_MAX_QD * (NVME_GPUQ_PAGE_SIZE / nvme_ns_lba_size(ns));
                rc = gq_round(p[k], ns, buf[k], lut[k], qd, 1, lba0, depths[di], ci, GQ_TIMEOUT_NS, err, sizeof(err),
                              &bad);
                if (!rc)
                    rc = gq_round(p[k], ns, buf[k], lut[k], qd, 0, lba0, depths[di], ci, GQ_TIMEOUT_NS, err,
                                  sizeof(err), &bad);
                cmds += 2u * depths[di];
            }
    snprintf(detail, sizeof(detail), "%llu commands, %llu words differ%s%s", (unsigned long long)cmds,
             (unsigned long long)bad, rc ? ": " : "", rc ? err : "");
    gq_result(!rc && !bad && cmds, "rounds-verify", ci, detail);
    if (!rc && p[1])
        rc = gq_match_modes(p[1], ns, buf[1], lut[1], qd, ci, err, sizeof(err));
    /* the watchdog: the doorbell is rung one entry short, so one command is never fetched and its completion
     * never comes (any controller; QEMU completes on the doorbell write, so a short deadline alone would
     * not miss); then the queue is deleted (or the controller reset) before its memory is freed */
    uint64_t dummy = 0;
    if (p[0])
        p[0]->db_short = 1;
    int trc = p[0] ? gq_round(p[0], ns, buf[0], lut[0], qd, 0, 0, qd, ci, GQ_TIMEOUT_NS / 20u, err, sizeof(err), &dummy)
                   : -EINVAL;
    snprintf(detail, sizeof(detail), "rc=%d: %s", trc, err);
    gq_result(trc == -ETIMEDOUT && strstr(err, "did not arrive"), "timeout", ci, detail);
    int drc = nvme_gpuq_pair_destroy(p[0], true);
    p[0] = NULL;
    snprintf(detail, sizeof(detail), "destroy after timeout: %d", drc);
    gq_result(drc == 0, "teardown-after-timeout", ci, detail);
    /* the controller still works: a fresh pair, one verified round */
    bad = 0;
    rc = nvme_gpuq_pair_create(c, qd + 1u, &p[0], err, sizeof(err));
    if (!rc)
        rc = gq_round(p[0], ns, buf[0], lut[0], qd, 1, 0, qd, ci, GQ_TIMEOUT_NS, err, sizeof(err), &bad);
    if (!rc)
        rc = gq_round(p[0], ns, buf[0], lut[0], qd, 0, 0, qd, ci, GQ_TIMEOUT_NS, err, sizeof(err), &bad);
    snprintf(detail, sizeof(detail), "fresh pair after the timeout: rc=%d, %llu words differ %s", rc,
             (unsigned long long)bad, rc ? err : "");
    gq_result(!rc && !bad, "after-timeout", ci, detail);
    for (unsigned k = 0; k < GQ_PAIRS; k++) {
        int r = nvme_gpuq_pair_destroy(p[k], false);
        if (r)
            gq_result(0, "destroy", ci, "Delete I/O SQ/CQ failed");
        nvme_dma_free(buf[k]);
    }
}

int gpuq_guest_run(struct nvme_target *t, unsigned rounds)
{
    for (unsigned ci = 0; ci < nvme_target_nctrl(t); ci++)
        gq_ctrl(t, ci, rounds ? rounds : 1u);
    printf("gpuq: %d passed, %d failed\n", g_ok, g_bad);
    return g_bad ? 1 : 0;
}
