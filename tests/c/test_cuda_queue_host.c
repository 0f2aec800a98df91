/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cuda_queue_host.c — the device-side queue logic (src/nvme/nvme_gpuq.h) compiled for the host:
 * SQE building, PRPs from a lookup table, CID generation/index, matching out-of-order completions by CID
 * over many lock-step rounds with a ring that wraps every round (phase tag flips), rejection of stale,
 * foreign and duplicate completions, wrap-safe deadlines, the per-thread LCG, sequential coverage and the
 * verification stamp. A small controller model in this file plays the device. Also (issue 17): no CID reaches
 * the reserved 0xFFFF at qd=1024, the emulator's queue placement and warps limit (gemu_plan.h), the progress
 * check, poll backoff against the deadline (issue 23: the poll discipline as a run parameter, the poller
 * warp's CQ positions, the read-back rule of host-memory SQs), and the real-controller path (nvme/gpuq_ctrl.h) driven
 * by the CPU stand-in on emu://, including the watchdog after a dropped completion. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/crun_params.h"
#include "engine/gpuq_standin.h"
#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/emu.h"
#include "nvme/emu/gpu/gemu_plan.h"
#include "nvme/gpuq_ctrl.h"
#include "nvme/nvme_gpuq.h"
#include "test_driver.h"

#define QD      37u /* not a power of two: slots and phases rotate every round */
#define ENTRIES (QD + 1u)
#define ROUNDS  200u
#define SQID    3u
#define PAGE    NVME_GPUQ_PAGE_SIZE

static void test_sqe(void)
{
    struct nvme_sqe s;
    memset(&s, 0xa5, sizeof(s));
    nvme_gpuq_sqe_rw(&s, NVME_CMD_READ, 0x1234, 1, 0x123456789aull, 8, 0x1000, 0x2000);
    T_EQ(s.opc, NVME_CMD_READ);
    T_EQ(s.flags, 0);
    T_EQ(s.cid, 0x1234);
    T_EQ(s.nsid, 1);
    T_EQ(s.cdw10, 0x3456789au);
    T_EQ(s.cdw11, 0x12);
    T_EQ(s.cdw12, 7); /* 0-based */
    T_EQ(s.prp1, 0x1000);
    T_EQ(s.prp2, 0x2000);
    T_EQ(s.mptr, 0);
    T_EQ(s.cdw13 | s.cdw14 | s.cdw15 | s.cdw2 | s.cdw3, 0);
}

static void test_prp(void)
{
    uint64_t lut[8], list[NVME_GPUQ_PRP_PER_PAGE], p1, p2;
    for (int i = 0; i < 8; i++)
        lut[i] = 0x100000ull * (uint64_t)(i + 1); /* scattered pages */
    /* within one page */
    T_EQ(nvme_gpuq_prp(lut, 8, 512, 512, list, 0xdead000, &p1, &p2), 0);
    T_EQ(p1, lut[0] + 512);
    T_EQ(p2, 0);
    /* two pages: PRP2 is the second page */
    T_EQ(nvme_gpuq_prp(lut, 8, PAGE - 512, 1024, list, 0xdead000, &p1, &p2), 0);
    T_EQ(p1, lut[0] + PAGE - 512);
    T_EQ(p2, lut[1]);
    /* four pages from page 2: PRP2 is the list */
    memset(list, 0, sizeof(list));
    T_EQ(nvme_gpuq_prp(lut, 8, 2 * PAGE, 4 * PAGE, list, 0xdead000, &p1, &p2), 0);
    T_EQ(p1, lut[2]);
    T_EQ(p2, 0xdead000);
    T_EQ(list[0], lut[3]);
    T_EQ(list[2], lut[5]);
    /* refusals: outside the table, misaligned, empty, no list page */
    T_EQ(nvme_gpuq_prp(lut, 8, 7 * PAGE, 2 * PAGE, list, 0, &p1, &p2), -1);
    T_EQ(nvme_gpuq_prp(lut, 8, 2, 512, list, 0, &p1, &p2), -1);
    T_EQ(nvme_gpuq_prp(lut, 8, 0, 0, list, 0, &p1, &p2), -1);
    T_EQ(nvme_gpuq_prp(lut, 8, 0, 3 * PAGE, NULL, 0, &p1, &p2), -1);
}

static void test_cid(void)
{
    for (uint32_t gen = 0; gen < 200; gen += 7)
        for (uint32_t idx = 0; idx < NVME_GPUQ_MAX_QDEPTH; idx += 101) {
            uint16_t cid = nvme_gpuq_cid_make(gen, idx);
            T_EQ(nvme_gpuq_cid_idx(cid), idx);
            T_EQ(nvme_gpuq_cid_gen(cid), nvme_gpuq_gen(gen));
        }
    uint8_t seen[QD] = {0};
    uint16_t cid = nvme_gpuq_cid_make(5, 3);
    T_EQ(nvme_gpuq_cqe_match(cid, SQID, SQID, 5, QD, seen), 3);
    T_EQ(nvme_gpuq_cqe_match(cid, SQID, SQID, 5, QD, seen), -NVME_GPUQ_BAD_CID);                       /* duplicate */
    T_EQ(nvme_gpuq_cqe_match(nvme_gpuq_cid_make(4, 4), SQID, SQID, 5, QD, seen), -NVME_GPUQ_BAD_CID);  /* stale */
    T_EQ(nvme_gpuq_cqe_match(nvme_gpuq_cid_make(5, QD), SQID, SQID, 5, QD, seen), -NVME_GPUQ_BAD_CID); /* idx */
    T_EQ(nvme_gpuq_cqe_match(nvme_gpuq_cid_make(5, 4), SQID + 1, SQID, 5, QD, seen), -NVME_GPUQ_BAD_SQID);
    /* generations wrap within the CID field: round GEN_COUNT matches generation 0 */
    T_EQ(nvme_gpuq_cid_check(nvme_gpuq_cid_make(0, 1), SQID, SQID, NVME_GPUQ_GEN_COUNT, QD), 1);
    /* consecutive rounds never share a generation (a stale CQE of the last round is caught) */
    for (uint32_t r = 0; r < 4u * NVME_GPUQ_GEN_COUNT; r++)
        T_CHECK(nvme_gpuq_gen(r) != nvme_gpuq_gen(r + 1u));
}

/* CID 0xFFFF is reserved by the spec: no (round, thread) may build it at the largest depth, over several
 * generation cycles (with 6 generation bits, round 63 thread 1023 used to). */
static void test_cid_never_reserved_qd1024(void)
{
    const uint32_t qd = NVME_GPUQ_MAX_QDEPTH; /* 1024 */
    static uint8_t used[65536];
    memset(used, 0, sizeof(used));
    for (uint32_t round = 0; round < 3u * (1u << NVME_GPUQ_GEN_BITS) + 5u; round++)
        for (uint32_t i = 0; i < qd; i++) {
            uint16_t cid = nvme_gpuq_cid_make(round, i);
            T_CHECK(cid != NVME_GPUQ_CID_RESERVED);
            T_EQ(nvme_gpuq_cid_check(cid, SQID, SQID, round, qd), (int)i);
            used[cid] = 1;
        }
    T_EQ(used[0xffff], 0);
    T_EQ(used[0xfbff], 1); /* the largest CID in use: generation 62, thread 1023 */
}

/* The emulator's queue placement: consecutive queues go to different blocks. */
static void test_emu_placement(void)
{
    const uint32_t blocks = 8, warps = 8, nq = 16;
    uint32_t served_by_block[8] = {0}, served[16] = {0};
    for (uint32_t b = 0; b < blocks; b++)
        for (uint32_t w = 0; w < warps; w++)
            for (uint32_t q = gemu_plan_first_queue(b, w, blocks); q < nq; q += gemu_plan_queue_stride(blocks, warps)) {
                served[q]++;
                served_by_block[b]++;
                T_EQ(gemu_plan_block_of(q, blocks), b);
            }
    for (uint32_t q = 0; q < nq; q++)
        T_EQ(served[q], 1); /* every queue has exactly one warp */
    for (uint32_t b = 0; b < blocks; b++)
        T_EQ(served_by_block[b], nq / blocks); /* 2 each, not 8 + 8 on blocks 0 and 1 */
    /* more queues than warps: each still served once, round robin */
    uint32_t many[200] = {0};
    for (uint32_t b = 0; b < 3; b++)
        for (uint32_t w = 0; w < 5; w++)
            for (uint32_t q = gemu_plan_first_queue(b, w, 3); q < 200; q += gemu_plan_queue_stride(3, 5))
                many[q]++;
    for (uint32_t q = 0; q < 200; q++)
        T_EQ(many[q], 1);
}

/* warps beyond what the kernel can launch with: a refusal naming the parameter and its limit. */
static void test_emu_warps_limit(void)
{
    char err[256] = "";
    T_EQ(gemu_plan_warps_check(17, 17 * 32, 120, err, sizeof(err)), 0);
    T_EQ(gemu_plan_warps_check(18, 17 * 32, 120, err, sizeof(err)), -E2BIG);
    T_CHECK(strstr(err, "'warps'") && strstr(err, "18") && strstr(err, "17 warps") && strstr(err, "120 registers"));
    T_EQ(gemu_plan_warps_check(1, 0, 0, err, sizeof(err)), -E2BIG); /* no attributes: nothing fits */
}

static void test_progress_and_backoff(void)
{
    uint64_t all[4] = {3, 9, 1, 7}, one_idle[4] = {3, 9, 0, 7};
    T_EQ(nvme_gpuq_idle_queue(all, 4), -1);
    T_EQ(nvme_gpuq_idle_queue(one_idle, 4), 2);
    T_EQ(nvme_gpuq_idle_queue(one_idle, 2), -1);
    /* backoff doubles, is capped at the run's poll=backoff:MAX_NS, and the poll step still sees the deadline
     * after any wait; poll=spin (max 0) never sleeps */
    const uint32_t max_ns = CRUN_POLL_DEFAULT_NS;
    T_EQ(nvme_gpuq_backoff_ns(0, max_ns), NVME_GPUQ_BACKOFF_MIN_NS);
    T_EQ(nvme_gpuq_backoff_ns(1, max_ns), 2 * NVME_GPUQ_BACKOFF_MIN_NS);
    T_EQ(nvme_gpuq_backoff_ns(1000, max_ns), max_ns);
    T_EQ(nvme_gpuq_backoff_ns(3, 100), 100);
    T_EQ(nvme_gpuq_backoff_ns(0, 0), 0);
    T_EQ(nvme_gpuq_backoff_ns(1000, 0), 0);
    uint64_t now = 1000, deadline = nvme_gpuq_deadline(now, 5000);
    int polls = 0, r;
    for (uint32_t n = 0; (r = nvme_gpuq_poll_step(0, 0, 8, now, deadline)) == NVME_GPUQ_POLL_EMPTY; n++, polls++)
        now += nvme_gpuq_backoff_ns(n, max_ns);
    T_EQ(r, NVME_GPUQ_POLL_EXPIRED);
    T_CHECK(now - deadline < max_ns); /* expiry seen within one backoff step */
    T_EQ(nvme_gpuq_poll_step(NVME_CQE_P, 0, 8, now, deadline), NVME_GPUQ_POLL_NEW); /* new beats expired */
}

/* The IOMMU rule both emulators share (cmd_rules.h, issue 21): inside one window, or refused; no window,
 * no DMA; a range that straddles two adjacent windows or wraps the address space is refused. */
static void test_iommu_rule(void)
{
    const struct nvme_cr_win w[2] = {{0x10000, 0x20000}, {0x20000, 0x30000}};
    T_CHECK(nvme_cr_in_windows(w, 2, 0x10000, 0x10000));
    T_CHECK(nvme_cr_in_windows(w, 2, 0x2f000, 0x1000));
    T_CHECK(!nvme_cr_in_windows(w, 0, 0x10000, 8));           /* no window: no DMA */
    T_CHECK(!nvme_cr_in_windows(w, 2, 0x1f000, 0x2000));      /* straddles two windows */
    T_CHECK(!nvme_cr_in_windows(w, 2, 0xf000, 0x1001));       /* starts below */
    T_CHECK(!nvme_cr_in_windows(w, 2, 0x2ffff, 2));           /* ends above */
    T_CHECK(!nvme_cr_in_windows(w, 2, 0x10000, 0));           /* empty */
    T_CHECK(!nvme_cr_in_windows(w, 2, UINT64_MAX - 4, 0x10)); /* wraps */
    T_EQ(nvme_cr_addr(0x10000, nvme_cr_in_windows(w, 2, 0x10000, 512)), NVME_CR_OK);
    T_EQ(nvme_cr_addr(0xdead0000, nvme_cr_in_windows(w, 2, 0xdead0000, 512)),
         NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR));
}

/* The occupancy margin (issue 23): computed in integers, a run at exactly the resident capacity (the paper
 * corner, 1.0) is refused at the default 95 %, one at 95 % of it passes, and two kernels add up. */
static void test_occupancy_rule(void)
{
    uint32_t pm = 0;
    /* 132 SMs x 2 blocks per SM = 264 resident blocks of the engine alone */
    T_CHECK(!crun_occupancy_ok(264, 2, 0, 0, 132, CRUN_OCCUPANCY_PCT, &pm));
    T_EQ(pm, 1000);
    T_CHECK(crun_occupancy_ok(264, 2, 0, 0, 132, 100, &pm));
    T_CHECK(crun_occupancy_ok(250, 2, 0, 0, 132, CRUN_OCCUPANCY_PCT, &pm)); /* 250/264 = 94.7 % */
    T_EQ(pm, 947);
    T_CHECK(!crun_occupancy_ok(251, 2, 0, 0, 132, CRUN_OCCUPANCY_PCT, &pm)); /* 95.08 % */
    /* engine 128 blocks at 1 per SM plus the emulator's 8 at 2 per SM on 132 SMs: (128*2 + 8*1) / (2*132) */
    T_CHECK(!crun_occupancy_ok(128, 1, 8, 2, 132, 95, &pm));
    T_EQ(pm, 1000);
    T_CHECK(crun_occupancy_ok(120, 1, 8, 2, 132, 95, &pm));
    T_CHECK(!crun_occupancy_ok(1, 0, 0, 0, 132, 95, &pm)); /* a kernel that cannot be resident at all */
    char buf[CRUN_POLL_TEXT_LEN];
    uint32_t ns = 7;
    T_EQ(crun_poll_parse("spin", &ns), 0);
    T_EQ(ns, 0);
    crun_poll_format(ns, buf, sizeof(buf));
    T_CHECK(!strcmp(buf, "spin"));
    T_EQ(crun_poll_parse("backoff:4096", &ns), 0);
    crun_poll_format(ns, buf, sizeof(buf));
    T_CHECK(!strcmp(buf, "backoff:4096"));
    T_EQ(crun_poll_parse("backoff:-1", &ns), -EINVAL);
    T_EQ(crun_poll_parse("backoff:0x10", &ns), -EINVAL);
}

/* The poller warp's positions cover a round exactly once at every depth, neighbouring lanes on neighbouring
 * slots (one coalesced load per step), and the read-back rule of host-memory SQs. */
static void test_poller_and_readback(void)
{
    static uint8_t hit[NVME_GPUQ_MAX_QDEPTH];
    for (uint32_t qd = 1; qd <= NVME_GPUQ_MAX_QDEPTH; qd++) {
        memset(hit, 0, sizeof(hit));
        uint32_t total = 0;
        for (uint32_t lane = 0; lane < NVME_GPUQ_POLLER_LANES; lane++)
            for (uint32_t k = 0; k < nvme_gpuq_poller_count(lane, qd); k++) {
                uint32_t idx = nvme_gpuq_poller_idx(lane, k);
                T_CHECK(idx < qd);
                if (idx < qd)
                    hit[idx]++;
                total++;
            }
        T_EQ(total, qd);
        for (uint32_t i = 0; i < qd; i++)
            T_EQ(hit[i], 1);
        /* step k: lanes 0..31 look at 32 consecutive positions */
        T_EQ(nvme_gpuq_poller_idx(1, 3) - nvme_gpuq_poller_idx(0, 3), 1);
    }
    T_EQ(nvme_gpuq_last_sqe_pos(128), 127);
    T_CHECK(nvme_gpuq_sqe_readback_ok(nvme_gpuq_cid_make(7, 63), 7, 64));
    T_CHECK(!nvme_gpuq_sqe_readback_ok(nvme_gpuq_cid_make(6, 63), 7, 64)); /* the previous round's SQE */
    T_CHECK(!nvme_gpuq_sqe_readback_ok(nvme_gpuq_cid_make(7, 62), 7, 64));
}

/* The real-controller path without a GPU: queues created on a controller (emu:// here, QEMU's NVMe in the
 * QEMU legs) with host-memory rings, driven by the CPU stand-in through the same round and CID logic;
 * write, read back, verify; then one dropped completion must end in the watchdog's -ETIMEDOUT and a
 * teardown that deletes the queue before freeing its memory. */
static void test_standin_on_controller(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=8MiB&ooo=1");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    char err[256] = "";
    enum { SQD = 64, NLB = 8 };
    struct nvme_gpuq_pair *p;
    T_EQ(nvme_gpuq_pair_create(c, SQD + 1, &p, err, sizeof(err)), 0);
    struct nvme_dma *buf;
    T_EQ(nvme_dma_alloc(t, (size_t)SQD * PAGE, &buf), 0);
    uint64_t lut[SQD], slba[SQD], p1[SQD], p2[SQD];
    uint16_t st[SQD];
    T_EQ(nvme_gpuq_lut(buf, lut, SQD), 0);
    uint8_t *mem = nvme_dma_vaddr(buf);
    for (int pass = 0; pass < 6; pass++) { /* write, read, write, read, ...: the ring wraps */
        const int wr = pass % 2 == 0;
        for (uint32_t i = 0; i < SQD; i++) {
            slba[i] = (uint64_t)((pass / 2) * SQD + i) * NLB;
            T_EQ(nvme_gpuq_prp(lut, SQD, (uint64_t)i * PAGE, NLB * 512u, NULL, 0, &p1[i], &p2[i]), 0);
            uint64_t *w = (uint64_t *)(mem + (size_t)i * PAGE);
            for (uint32_t x = 0; x < NLB * 512u / 8u; x++)
                w[x] = wr ? nvme_gpuq_stamp(0, slba[i] + x / 64u, x % 64u) : 0; /* reads: poisoned (zero) first */
        }
        T_EQ(nvme_gpuq_cpu_round(p, wr ? NVME_CMD_WRITE : NVME_CMD_READ, nvme_ns_id(ns), slba, NLB, p1, p2, SQD,
                                 1000000000ull, st, err, sizeof(err)),
             0);
        for (uint32_t i = 0; i < SQD; i++) {
            T_EQ(st[i], 0);
            const uint64_t *w = (const uint64_t *)(mem + (size_t)i * PAGE);
            for (uint32_t x = 0; !wr && x < NLB * 512u / 8u; x++)
                T_CHECK(w[x] == nvme_gpuq_stamp(0, slba[i] + x / 64u, x % 64u));
        }
    }
    /* a bad qdepth is refused before anything is written */
    T_EQ(nvme_gpuq_cpu_round(p, NVME_CMD_READ, 1, slba, NLB, p1, p2, SQD + 1, 1000, st, err, sizeof(err)), -EINVAL);
    /* the watchdog: the controller drops the 5th completion of the next round */
    struct nvme_emu_fault f = {.kind = NVME_EMU_FAULT_DROP, .qid = p->qid, .nth = 5, .count = 1};
    T_EQ(nvme_emu_inject(nvme_target_backend(t), 0, &f), 0);
    T_EQ(nvme_gpuq_cpu_round(p, NVME_CMD_READ, nvme_ns_id(ns), slba, NLB, p1, p2, SQD, 50000000ull, st, err,
                             sizeof(err)),
         -ETIMEDOUT);
    T_CHECK(strstr(err, "did not arrive within") != NULL);
    T_EQ(nvme_gpuq_pair_destroy(p, true), 0); /* Delete SQ aborts the dropped command; then memory is freed */
    /* the controller is still usable: a fresh pair works */
    T_EQ(nvme_gpuq_pair_create(c, SQD + 1, &p, err, sizeof(err)), 0);
    T_EQ(nvme_gpuq_cpu_round(p, NVME_CMD_READ, nvme_ns_id(ns), slba, NLB, p1, p2, SQD, 1000000000ull, st, err,
                             sizeof(err)),
         0);
    T_EQ(nvme_gpuq_pair_destroy(p, false), 0);
    /* refusals: too many entries */
    T_EQ(nvme_gpuq_pair_create(c, nvme_ctrl_max_depth(c) + 1, &p, err, sizeof(err)), -EINVAL);
    T_CHECK(strstr(err, "entries=") != NULL);
    nvme_dma_free(buf);
    nvme_target_close(t);
}

/* The stand-in engine's self-check counts and breakdown (issue 24), and the anchors' failures through it: a
 * "block" (queue pair) that never runs leaves its heartbeat at zero; a dropped completion ends in the
 * watchdog's -ETIMEDOUT naming it, with no result counted. */
static void test_standin_engine_checks(void)
{
    enum { NQ = 2, SCAP = 4096 };
    static uint32_t samples[SCAP * NVME_GPUQ_NPHASES];
    uint64_t beats[NQ];
    char err[256] = "";
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=8MiB");
    struct gpuq_standin_cfg c = {.nqueues = NQ, .qdepth = 8, .iosize = 4096, .runtime_s = 0.05, .seed = 1};
    c.sample_every = 2;
    c.sample_cap = SCAP;
    c.samples = samples;
    c.beats = beats;
    struct gpuq_standin_result r;
    memset(beats, 0, sizeof(beats));
    T_EQ(gpuq_standin_run(t, &c, &r, err, sizeof(err)), 0);
    T_CHECK(r.submitted > 0 && r.completed == r.submitted && r.ios == r.submitted);
    T_CHECK(beats[0] > 0 && beats[1] > 0 && r.npairs == NQ);
    T_CHECK(r.sampled == r.submitted / 2 && r.nsamples == (r.sampled < SCAP ? r.sampled : SCAP));
    uint64_t after_doorbell = 0;
    for (uint32_t k = 0; k < r.nsamples; k++)
        after_doorbell +=
            samples[k * NVME_GPUQ_NPHASES + NVME_GPUQ_PH_DEVICE] + samples[k * NVME_GPUQ_NPHASES + NVME_GPUQ_PH_POLL];
    T_CHECK(after_doorbell > 0);
    /* a block that never ran */
    memset(beats, 0, sizeof(beats));
    c.idle_pair = 1;
    T_EQ(gpuq_standin_run(t, &c, &r, err, sizeof(err)), 0);
    T_CHECK(beats[0] == 0 && beats[1] > 0);
    c.idle_pair = 0;
    /* a lost completion: the controller drops the 3rd command fetched on any I/O queue */
    struct nvme_emu_fault f = {.kind = NVME_EMU_FAULT_DROP, .qid = NVME_EMU_FAULT_ANY_QUEUE, .nth = 3, .count = 1};
    T_EQ(nvme_emu_inject(nvme_target_backend(t), 0, &f), 0);
    c.timeout_ns = 50000000ull;
    T_EQ(gpuq_standin_run(t, &c, &r, err, sizeof(err)), -ETIMEDOUT);
    T_CHECK(strstr(err, "did not arrive within") != NULL);
    nvme_target_close(t);
}

/* ---- a controller model: fetches a round, completes it in a shuffled order ---- */
struct model {
    struct nvme_sqe sq[ENTRIES];
    struct nvme_cqe cq[ENTRIES];
    uint64_t sq_head, cq_tail;
    uint64_t rng;
};

static uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void model_serve(struct model *m, uint32_t sq_db)
{
    struct nvme_sqe got[ENTRIES];
    uint32_t n = 0;
    while (nvme_gpuq_db(m->sq_head, ENTRIES) != sq_db)
        got[n++] = m->sq[nvme_gpuq_cq_slot(m->sq_head++, ENTRIES)];
    for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates: complete out of order */
        uint32_t j = (uint32_t)(xs(&m->rng) % i);
        struct nvme_sqe t = got[i - 1];
        got[i - 1] = got[j];
        got[j] = t;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t pos = m->cq_tail++;
        struct nvme_cqe *c = &m->cq[nvme_gpuq_cq_slot(pos, ENTRIES)];
        c->cdw0 = got[i].cdw10; /* echo the LBA so the test can check the pairing */
        c->sqhd = (uint16_t)nvme_gpuq_db(m->sq_head, ENTRIES);
        c->sqid = SQID;
        c->cid = got[i].cid;
        uint8_t sc = (got[i].cdw10 % 17u == 0) ? NVME_SC_LBA_RANGE : NVME_SC_SUCCESS; /* some fail */
        c->status = NVME_CQE_STATUS(NVME_SCT_GENERIC, sc, sc != 0, nvme_gpuq_cq_phase(pos, ENTRIES));
    }
}

static void test_rounds(void)
{
    static struct model m;
    memset(&m, 0, sizeof(m));
    m.rng = 0x1234567;
    uint64_t sq_pos = 0, cq_pos = 0, errors = 0, lcg[QD], slba[QD];
    for (uint32_t i = 0; i < QD; i++)
        lcg[i] = nvme_gpuq_lcg_seed(42, i);
    for (uint32_t round = 0; round < ROUNDS; round++) {
        /* submission half: thread i owns slot tail+i */
        for (uint32_t i = 0; i < QD; i++) {
            slba[i] = nvme_gpuq_slba(1, &lcg[i], round, i, QD, 1000, 0, 1);
            nvme_gpuq_sqe_rw(&m.sq[nvme_gpuq_cq_slot(sq_pos + i, ENTRIES)], NVME_CMD_READ, nvme_gpuq_cid_make(round, i),
                             1, slba[i], 1, 0x1000, 0);
        }
        sq_pos += QD;
        model_serve(&m, nvme_gpuq_db(sq_pos, ENTRIES));
        /* completion half: thread i takes slot head+i, then hands it over by CID */
        uint8_t seen[QD] = {0};
        uint16_t st[QD];
        uint32_t lba_of[QD];
        for (uint32_t i = 0; i < QD; i++) {
            const struct nvme_cqe *c = &m.cq[nvme_gpuq_cq_slot(cq_pos + i, ENTRIES)];
            T_CHECK(nvme_gpuq_cqe_new(c->status, cq_pos + i, ENTRIES));
            int idx = nvme_gpuq_cqe_match(c->cid, c->sqid, SQID, round, QD, seen);
            T_CHECK(idx >= 0);
            st[idx] = c->status & (uint16_t)~NVME_CQE_P;
            lba_of[idx] = c->cdw0;
        }
        /* the next slot is not new yet (its phase is the previous pass's) */
        T_CHECK(!nvme_gpuq_cqe_new(m.cq[nvme_gpuq_cq_slot(cq_pos + QD, ENTRIES)].status, cq_pos + QD, ENTRIES));
        cq_pos += QD;
        for (uint32_t i = 0; i < QD; i++) {
            T_EQ(lba_of[i], (uint32_t)slba[i]); /* every thread got its own command's completion */
            uint8_t want = slba[i] % 17u == 0 ? NVME_SC_LBA_RANGE : 0;
            T_EQ(nvme_cqe_sc(st[i]), want);
            errors += want != 0;
        }
    }
    T_CHECK(errors > 0);
    /* the ring wrapped many times, so both phases were used */
    T_CHECK(cq_pos / ENTRIES > 100);
}

static void test_deadline(void)
{
    uint64_t now = UINT64_MAX - 100;
    uint64_t d = nvme_gpuq_deadline(now, 1000); /* wraps */
    T_CHECK(!nvme_gpuq_expired(now, d));
    T_CHECK(!nvme_gpuq_expired(now + 999, d));
    T_CHECK(nvme_gpuq_expired(now + 1000, d));
    T_CHECK(nvme_gpuq_expired(now + 5000, d));
}

static void test_patterns(void)
{
    /* sequential: 4 queues x 8 threads of a device sweep 64 slots in order, no gaps, no repeats */
    const uint64_t threads = 32, nslots = 64;
    uint8_t hit[64] = {0};
    for (uint64_t k = 0; k < 2; k++)
        for (uint64_t t = 0; t < threads; t++) {
            uint64_t lba = nvme_gpuq_slba(0, NULL, k, t, threads, nslots, 8, 4);
            T_EQ((lba - 8) % 4, 0);
            hit[(lba - 8) / 4]++;
        }
    for (int i = 0; i < 64; i++)
        T_EQ(hit[i], 1);
    /* random: deterministic per seed and thread, in range, spread */
    uint64_t a = nvme_gpuq_lcg_seed(7, 3), b = nvme_gpuq_lcg_seed(7, 3), c = nvme_gpuq_lcg_seed(7, 4);
    uint32_t cover[16] = {0};
    int differ = 0;
    for (int i = 0; i < 4000; i++) {
        uint64_t x = nvme_gpuq_slba(1, &a, 0, 0, 1, 16, 0, 1), y = nvme_gpuq_slba(1, &b, 0, 0, 1, 16, 0, 1);
        uint64_t z = nvme_gpuq_slba(1, &c, 0, 0, 1, 16, 0, 1);
        T_EQ(x, y);
        T_CHECK(x < 16);
        differ += x != z;
        cover[x]++;
    }
    T_CHECK(differ > 3000);
    for (int i = 0; i < 16; i++)
        T_CHECK(cover[i] > 150 && cover[i] < 350);
    /* stamps: fixed values (tests/test_cuda.py checks the NumPy port against the same two) */
    T_CHECK(nvme_gpuq_stamp(3, 1000, 5) == 14819571440484406469ull);
    T_CHECK(nvme_gpuq_stamp(0, 0, 0) == 654009164567993689ull);
    /* stamps: never zero, depend on device, LBA and word */
    T_CHECK(nvme_gpuq_stamp(0, 0, 0) != 0);
    T_CHECK(nvme_gpuq_stamp(0, 1, 0) != nvme_gpuq_stamp(0, 0, 0));
    T_CHECK(nvme_gpuq_stamp(1, 0, 0) != nvme_gpuq_stamp(0, 0, 0));
    T_CHECK(nvme_gpuq_stamp(0, 0, 1) != nvme_gpuq_stamp(0, 0, 0));
}

int main(void)
{
    RUN_CASE(test_sqe);
    RUN_CASE(test_prp);
    RUN_CASE(test_cid);
    RUN_CASE(test_cid_never_reserved_qd1024);
    RUN_CASE(test_emu_placement);
    RUN_CASE(test_emu_warps_limit);
    RUN_CASE(test_progress_and_backoff);
    RUN_CASE(test_poller_and_readback);
    RUN_CASE(test_occupancy_rule);
    RUN_CASE(test_iommu_rule);
    RUN_CASE(test_standin_on_controller);
    RUN_CASE(test_standin_engine_checks);
    RUN_CASE(test_rounds);
    RUN_CASE(test_deadline);
    RUN_CASE(test_patterns);
    return CHECK_DONE("test_cuda_queue_host");
}
