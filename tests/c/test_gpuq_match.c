/* SPDX-License-Identifier: BSD-3-Clause */
/* test_gpuq_match.c — the three completion-matching modes (src/nvme/nvme_gpuq_match.h) on CQs built here:
 * in order all three hand every command its own status; out of order positional hands commands the statuses
 * of others while cid and scan do not; scan reads more CQ bytes per completion than cid; an old-phase CQE
 * carrying the wanted CID after the ring wrapped (a stale CQE) is taken by neither cid nor scan. Also the
 * emulators' fault-model rules and keys (emu/cmd_rules.h, emu/model_keys.h: err_every, err_status, ooo_win),
 * the status-name parser, and the missing-fence model of the CPU stand-in's round (nvme/gpuq_ctrl.h) on
 * emu://: SQE stores that land after the doorbell are caught by the read-back. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/model_keys.h"
#include "nvme/gpuq_ctrl.h"
#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"
#include "test_driver.h"

#define QD      24u /* commands per round */
#define ENTRIES 64u /* ring slots: several rounds per pass, so rounds start mid-ring and wrap */
#define SQID    5u

/* Post the completion of command `idx` of round `round` at queue position pos, with status st. */
static void post(struct nvme_cqe *cq, uint64_t pos, uint32_t round, uint32_t idx, uint16_t st)
{
    struct nvme_cqe *e = &cq[nvme_gpuq_cq_slot(pos, ENTRIES)];
    e->cdw0 = 0;
    e->cdw1 = 0;
    e->sqhd = 0;
    e->sqid = SQID;
    e->cid = nvme_gpuq_cid_make(round, idx);
    e->status = (uint16_t)(st | nvme_gpuq_cq_phase(pos, ENTRIES));
}

/* The status command i is due: every third command fails. */
static uint16_t want_status(uint32_t i)
{
    return i % 3u ? 0 : NVME_CR_ST(NVME_SCT_MEDIA, NVME_SC_UNRECOVERED_READ);
}

/* One round through a mode, looks repeated until every waiter has its completion (all are posted). */
static int reap(int mode, const struct nvme_cqe *cq, uint64_t pos0, uint32_t round, uint16_t *st,
                struct nvme_gpuq_match_ctr *ctr)
{
    uint32_t seen[QD] = {0};
    for (uint32_t k = 0; k < QD; k++) {
        uint32_t idx = 0;
        uint16_t s = 0;
        int r = nvme_gpuq_match_look(mode, cq, ENTRIES, pos0, k, SQID, round, QD, NVME_GPUQ_SCOPE_SYSTEM, seen, &idx,
                                     &s, ctr);
        if (r != NVME_GPUQ_POLL_NEW)
            return r < 0 ? r : -1;
        st[idx] = s;
    }
    return 0;
}

static uint32_t misattributed(const uint16_t *st)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < QD; i++)
        n += st[i] != want_status(i);
    return n;
}

/* Rounds over a wrapping ring, completions in order or reversed; per mode the misattributed count. */
static void run_rounds(int reversed, uint32_t *bad, struct nvme_gpuq_match_ctr *ctr)
{
    static struct nvme_cqe cq[ENTRIES];
    memset(cq, 0, sizeof(cq));
    for (int mode = 0; mode < (int)NVME_GPUQ_MATCH_MODES; mode++) {
        bad[mode] = 0;
        memset(&ctr[mode], 0, sizeof(ctr[mode]));
    }
    uint64_t pos = 0;
    for (uint32_t round = 0; round < 20u; round++, pos += QD) {
        for (uint32_t j = 0; j < QD; j++) {
            const uint32_t idx = reversed ? QD - 1u - j : j;
            post(cq, pos + j, round, idx, want_status(idx));
        }
        for (int mode = 0; mode < (int)NVME_GPUQ_MATCH_MODES; mode++) {
            uint16_t st[QD];
            memset(st, 0xff, sizeof(st));
            T_EQ(reap(mode, cq, pos, round, st, &ctr[mode]), 0);
            bad[mode] += misattributed(st);
        }
    }
}

static void test_in_order_all_modes_correct(void)
{
    uint32_t bad[NVME_GPUQ_MATCH_MODES];
    struct nvme_gpuq_match_ctr ctr[NVME_GPUQ_MATCH_MODES];
    run_rounds(0, bad, ctr);
    for (int m = 0; m < (int)NVME_GPUQ_MATCH_MODES; m++) {
        T_EQ(bad[m], 0u);
        T_EQ(ctr[m].stale, 0u);
    }
    T_EQ(ctr[NVME_GPUQ_MATCH_CID].foreign, 0u);
    T_EQ(ctr[NVME_GPUQ_MATCH_POSITIONAL].foreign, 0u);
    /* one look per completion for the slot-watching modes; scan reads the round's CQEs before its own */
    T_EQ(ctr[NVME_GPUQ_MATCH_CID].looks, 20u * QD);
    T_EQ(ctr[NVME_GPUQ_MATCH_CID].cq_bytes, 20u * QD * (NVME_GPUQ_CQE_W3_BYTES + NVME_GPUQ_CQE_W2_BYTES));
    T_EQ(ctr[NVME_GPUQ_MATCH_POSITIONAL].cq_bytes, 20u * QD * NVME_GPUQ_CQE_W3_BYTES);
    T_CHECK(ctr[NVME_GPUQ_MATCH_SCAN].cq_bytes > 4u * ctr[NVME_GPUQ_MATCH_CID].cq_bytes);
}

static void test_out_of_order_positional_misattributes(void)
{
    uint32_t bad[NVME_GPUQ_MATCH_MODES];
    struct nvme_gpuq_match_ctr ctr[NVME_GPUQ_MATCH_MODES];
    run_rounds(1, bad, ctr);
    T_EQ(bad[NVME_GPUQ_MATCH_CID], 0u);
    T_EQ(bad[NVME_GPUQ_MATCH_SCAN], 0u);
    T_CHECK(bad[NVME_GPUQ_MATCH_POSITIONAL] > 0u); /* detected: the statuses are per command */
    T_CHECK(ctr[NVME_GPUQ_MATCH_POSITIONAL].foreign > 0u);
    T_CHECK(ctr[NVME_GPUQ_MATCH_CID].foreign > 0u); /* met out of order, handed on by CID */
}

/* After the ring wrapped, a slot still holds last pass's CQE with the CID the waiter wants: its phase says old.
 * cid and scan must not take it (EMPTY, counted stale); the new CQE, when it lands, is taken. */
static void test_stale_cqe_after_wrap(void)
{
    static struct nvme_cqe cq[ENTRIES];
    memset(cq, 0, sizeof(cq));
    const uint32_t round = 7;
    const uint64_t pos0 = ENTRIES + 10u; /* second pass: new CQEs carry phase 0 */
    T_EQ(nvme_gpuq_cq_phase(pos0, ENTRIES), 0);
    /* last pass's entry in the slot of position pos0 + 3 (phase 1) names command 3 of this round */
    post(cq, pos0 + 3u - ENTRIES, round, 3, NVME_CR_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL));
    for (int mode = 0; mode < (int)NVME_GPUQ_MATCH_MODES; mode += 2) { /* cid, scan */
        uint32_t seen[QD] = {0}, idx = 0;
        uint16_t s = 0;
        struct nvme_gpuq_match_ctr ctr = {0};
        T_EQ(nvme_gpuq_match_look(mode, cq, ENTRIES, pos0, 3, SQID, round, QD, 0, seen, &idx, &s, &ctr),
             NVME_GPUQ_POLL_EMPTY);
        T_EQ(ctr.stale, 1u);
        T_EQ(seen[3], 0u);
    }
    post(cq, pos0 + 3u, round, 3, 0); /* the real one */
    for (int mode = 0; mode < (int)NVME_GPUQ_MATCH_MODES; mode += 2) {
        uint32_t seen[QD] = {0}, idx = 99;
        uint16_t s = 0xffff;
        struct nvme_gpuq_match_ctr ctr = {0};
        T_EQ(nvme_gpuq_match_look(mode, cq, ENTRIES, pos0, 3, SQID, round, QD, 0, seen, &idx, &s, &ctr),
             NVME_GPUQ_POLL_NEW);
        T_EQ(idx, 3u);
        T_EQ(s, 0);
    }
}

static void test_refusals(void)
{
    static struct nvme_cqe cq[ENTRIES];
    memset(cq, 0, sizeof(cq));
    uint32_t seen[QD] = {0}, idx;
    uint16_t s;
    struct nvme_gpuq_match_ctr ctr = {0};
    post(cq, 0, 1, 2, 0);
    post(cq, 1, 1, 2, 0); /* a second completion for command 2 */
    T_EQ(nvme_gpuq_match_cid(cq, ENTRIES, 0, 0, SQID, 1, QD, 0, seen, &idx, &s, &ctr), NVME_GPUQ_POLL_NEW);
    T_EQ(nvme_gpuq_match_cid(cq, ENTRIES, 0, 1, SQID, 1, QD, 0, seen, &idx, &s, &ctr), -NVME_GPUQ_BAD_CID);
    post(cq, 2, 0, 4, 0); /* another round's generation */
    T_EQ(nvme_gpuq_match_cid(cq, ENTRIES, 0, 2, SQID, 1, QD, 0, seen, &idx, &s, &ctr), -NVME_GPUQ_BAD_CID);
    cq[3] = cq[0];
    cq[3].sqid = SQID + 1u; /* another SQ */
    cq[3].cid = nvme_gpuq_cid_make(1, 3);
    T_EQ(nvme_gpuq_match_scan(cq, ENTRIES, 0, 3, SQID, 1, QD, 0, seen, &idx, &s, &ctr), -NVME_GPUQ_BAD_SQID);
    T_EQ(nvme_gpuq_match_parse("positional"), NVME_GPUQ_MATCH_POSITIONAL);
    T_EQ(nvme_gpuq_match_parse("bam"), -1);
    T_CHECK(!strcmp(nvme_gpuq_match_name(NVME_GPUQ_MATCH_SCAN), "scan"));
}

static void test_fault_model_rules_and_keys(void)
{
    struct nvme_cr_inj j;
    nvme_emu_inj_defaults(&j);
    T_EQ(nvme_cr_lba_err(&j, 0, 8), 0); /* off */
    char err[256] = "";
    T_EQ(nvme_emu_inj_parse("emu: ", "err_every", "16", &j, err, sizeof(err)), 1);
    T_EQ(nvme_emu_inj_parse("emu: ", "err_status", "LBA_Out_of_Range", &j, err, sizeof(err)), 1);
    T_EQ(nvme_emu_inj_parse("emu: ", "lat", "5us", &j, err, sizeof(err)), 0); /* not ours */
    T_EQ(nvme_emu_inj_parse("emu: ", "err_status", "no_such_status", &j, err, sizeof(err)), -EINVAL);
    T_CHECK(strstr(err, "'err_status'") && strstr(err, "no_such_status"));
    T_EQ(nvme_emu_inj_parse("emu: ", "ooo_win", "70000", &j, err, sizeof(err)), -EINVAL);
    const uint16_t range = NVME_CR_ST(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
    T_EQ(nvme_cr_lba_err(&j, 16, 1), range);
    T_EQ(nvme_cr_lba_err(&j, 17, 15), 0);
    T_EQ(nvme_cr_lba_err(&j, 17, 16), range); /* 17..32 holds 32 */
    T_EQ(nvme_cr_lba_err(&j, 1, 14), 0);
    uint8_t sct, sc;
    T_EQ(nvme_status_parse("unrecovered read error", &sct, &sc), 0);
    T_EQ(sct, NVME_SCT_MEDIA);
    T_EQ(sc, NVME_SC_UNRECOVERED_READ);
    T_EQ(nvme_status_parse("successful_completion", &sct, &sc), -EINVAL); /* not an error */
    /* GPU form: a permutation within each window, in order for win <= 1 */
    for (uint32_t k = 1; k <= 32u; k++)
        for (uint32_t win = 0; win <= 9u; win++) {
            uint32_t hit = 0;
            for (uint32_t l = 0; l < k; l++) {
                uint32_t s = nvme_cr_ooo_src(l, k, win);
                T_CHECK(s < k && (win < 2u ? s == l : s / win == l / win));
                hit |= 1u << s;
            }
            T_EQ(hit, k == 32u ? 0xffffffffu : (1u << k) - 1u);
        }
    /* CPU form: keys of later windows always sort after earlier ones */
    T_CHECK(nvme_cr_ooo_key(7, 8, 0xffffffffu) < nvme_cr_ooo_key(8, 8, 0));
    T_EQ(nvme_cr_ooo_key(5, 1, 123), 5u);
}

/* The CPU stand-in's round on emu:// with the missing-fence model: the last SQE stores land after the
 * doorbell; the fence orders them (clean round), without it the read-back catches it and nothing is rung. */
static void test_missing_fence_caught_by_readback(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=8MiB&err_every=4");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    char err[256] = "";
    enum { SQD = 16 };
    struct nvme_gpuq_pair *p;
    T_EQ(nvme_gpuq_pair_create(c, SQD + 1, &p, err, sizeof(err)), 0);
    struct nvme_dma *buf;
    T_EQ(nvme_dma_alloc(t, (size_t)SQD * NVME_GPUQ_PAGE_SIZE, &buf), 0);
    uint64_t lut[SQD], slba[SQD], p1[SQD], p2[SQD];
    uint16_t st[SQD];
    T_EQ(nvme_gpuq_lut(buf, lut, SQD), 0);
    for (uint32_t i = 0; i < SQD; i++) {
        slba[i] = i; /* LBAs 0, 4, 8, 12 fail with Unrecovered Read Error (err_every=4) */
        T_EQ(nvme_gpuq_prp(lut, SQD, (uint64_t)i * NVME_GPUQ_PAGE_SIZE, 512, NULL, 0, &p1[i], &p2[i]), 0);
    }
    struct nvme_gpuq_round_opt o = {.match = NVME_GPUQ_MATCH_CID, .unordered = 3};
    struct nvme_gpuq_match_ctr ctr = {0};
    T_EQ(nvme_gpuq_cpu_round_opt(p, NVME_CMD_READ, nvme_ns_id(ns), slba, 1, p1, p2, SQD, 1000000000ull, &o, &ctr, st,
                                 err, sizeof(err)),
         0);
    for (uint32_t i = 0; i < SQD; i++)
        T_EQ(st[i], i % 4u ? 0 : NVME_CR_ST(NVME_SCT_MEDIA, NVME_SC_UNRECOVERED_READ));
    T_EQ(ctr.looks, SQD);
    o.no_fence = true;
    T_EQ(nvme_gpuq_cpu_round_opt(p, NVME_CMD_READ, nvme_ns_id(ns), slba, 1, p1, p2, SQD, 1000000000ull, &o, &ctr, st,
                                 err, sizeof(err)),
         -EIO);
    T_CHECK(strstr(err, "read back") != NULL);
    /* nothing was rung: the pair goes on with the fence back */
    o.no_fence = false;
    T_EQ(nvme_gpuq_cpu_round_opt(p, NVME_CMD_READ, nvme_ns_id(ns), slba, 1, p1, p2, SQD, 1000000000ull, &o, &ctr, st,
                                 err, sizeof(err)),
         0);
    o.match = 7;
    T_EQ(nvme_gpuq_cpu_round_opt(p, NVME_CMD_READ, nvme_ns_id(ns), slba, 1, p1, p2, SQD, 1000000000ull, &o, &ctr, st,
                                 err, sizeof(err)),
         -EINVAL);
    T_EQ(nvme_gpuq_pair_destroy(p, false), 0);
    nvme_dma_free(buf);
    nvme_target_close(t);
}

int main(void)
{
    RUN_CASE(test_in_order_all_modes_correct);
    RUN_CASE(test_out_of_order_positional_misattributes);
    RUN_CASE(test_stale_cqe_after_wrap);
    RUN_CASE(test_refusals);
    RUN_CASE(test_fault_model_rules_and_keys);
    RUN_CASE(test_missing_fence_caught_by_readback);
    return CHECK_DONE("test_gpuq_match");
}
