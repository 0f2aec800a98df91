/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvme_gpuq.h — the queue logic of device-initiated I/O, in plain C that compiles for the host and (under
 * nvcc) for the GPU: SQE building, PRPs from a DMA-address lookup table, command identifiers (CIDs) with a
 * generation, matching completions by CID, completion-queue phase bookkeeping, poll deadlines, the
 * per-thread LCG of the random pattern and the data stamp used to verify read-after-write.
 *
 * Key functions: nvme_gpuq_sqe_rw(), nvme_gpuq_prp(), nvme_gpuq_cid_make()/_idx()/_gen(),
 * nvme_gpuq_cqe_match(), nvme_gpuq_cq_slot()/nvme_gpuq_cq_phase(), nvme_gpuq_deadline()/nvme_gpuq_expired(),
 * nvme_gpuq_lcg_next(), nvme_gpuq_slba(), nvme_gpuq_stamp(), nvme_gpuq_poll_step() (one look at a CQE with
 * the deadline), nvme_gpuq_backoff_ns() (the poll discipline), nvme_gpuq_poller_idx()/_count() (the poller
 * warp's CQ positions), nvme_gpuq_last_sqe_pos()/nvme_gpuq_sqe_readback_ok() (SQs in host memory),
 * nvme_gpuq_idle_queue() (the progress check), nvme_gpuq_sampled()/nvme_gpuq_phase_ns() (the per-I/O time
 * breakdown).
 *
 * The lock-step round (nvme_cuda.cuh) built on these: one CUDA block per queue; thread i owns SQ slot
 * tail+i and CID (gen, i); thread 0 fences (with SQs in host memory: every thread fences at system scope
 * and thread 0 reads the last SQE back) and rings the SQ doorbell; one poller warp then watches the round's
 * CQ slots, 32 neighbouring slots at a time, and hands each CQE to the command its CID names (any order
 * is fine), so a controller that completes out of order is handled; every wait has a deadline and a
 * miss becomes a status word.
 *
 * Caveats: pure functions over caller-owned memory, no clock (the caller passes `now`), no atomics, no
 * CUDA includes; NVME_HD (spec.h) marks them __host__ __device__ under nvcc. Lock-step means a queue holds
 * at most one round (qdepth commands) at a time, so the SQ is empty at the start of every round.
 */
#ifndef NVME_NVME_GPUQ_H
#define NVME_NVME_GPUQ_H

#include <stdint.h>

#include "nvme/bd_sample.h"
#include "nvme/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- sizes and limits ---- */
#define NVME_GPUQ_PAGE_SHIFT   12u /* NVMe memory page (CC.MPS = 0) */
#define NVME_GPUQ_PAGE_SIZE    (1u << NVME_GPUQ_PAGE_SHIFT)
#define NVME_GPUQ_PRP_PER_PAGE (NVME_GPUQ_PAGE_SIZE / NVME_PRP_ENTRY_SIZE) /* 512 entries per PRP list */
/* One PRP list page (no chaining): PRP1 covers the first page, the list the remaining pages. */
#define NVME_GPUQ_MAX_IO     (NVME_GPUQ_PAGE_SIZE * NVME_GPUQ_PRP_PER_PAGE) /* 2 MiB */
#define NVME_GPUQ_MAX_QDEPTH 1024u /* one CUDA thread per command, one block per queue */
#define NVME_GPUQ_IDX_BITS   10u   /* CID bits naming the thread: log2(NVME_GPUQ_MAX_QDEPTH) */
#define NVME_GPUQ_IDX_MASK   ((1u << NVME_GPUQ_IDX_BITS) - 1u)
#define NVME_GPUQ_GEN_BITS   (16u - NVME_GPUQ_IDX_BITS) /* the rest of the 16-bit CID: round generation */
#define NVME_GPUQ_GEN_MASK   ((1u << NVME_GPUQ_GEN_BITS) - 1u)
/* Generations in use: 0..GEN_COUNT-1. The all-ones generation is never used, so no CID reaches 0xFFFF,
 * which the spec reserves (NVME_CID_RESERVED), whatever the depth (idx 1023 with gen 63 would make it). */
#define NVME_GPUQ_GEN_COUNT    NVME_GPUQ_GEN_MASK
#define NVME_GPUQ_CID_RESERVED 0xffffu
#define NVME_GPUQ_LBA_SIZE_MIN 512u
#define NVME_GPUQ_STAMP_WORD   8u /* verification stamps are 64-bit words */

NVME_STATIC_ASSERT(NVME_GPUQ_MAX_QDEPTH == (1u << NVME_GPUQ_IDX_BITS), "CID index bits cover the max depth");
NVME_STATIC_ASSERT(NVME_GPUQ_IDX_BITS + NVME_GPUQ_GEN_BITS == 16u, "a CID is 16 bits");
NVME_STATIC_ASSERT(((NVME_GPUQ_GEN_COUNT - 1u) << NVME_GPUQ_IDX_BITS | NVME_GPUQ_IDX_MASK) < NVME_GPUQ_CID_RESERVED,
                   "the largest CID in use is below the reserved 0xFFFF");

/* ---- per-queue status word: what stopped a queue (0 = running/clean) ---- */
enum nvme_gpuq_state {
    NVME_GPUQ_OK = 0,
    NVME_GPUQ_TIMEOUT = 1,     /* a completion did not arrive before its deadline */
    NVME_GPUQ_BAD_CID = 2,     /* a CQE named a CID that is not outstanding (wrong generation/index, duplicate) */
    NVME_GPUQ_BAD_SQID = 3,    /* a CQE named another submission queue */
    NVME_GPUQ_NVME_ERROR = 4,  /* a command completed with a non-zero NVMe status (kept in the queue record) */
    NVME_GPUQ_VERIFY = 5,      /* read data did not carry the stamp written there */
    NVME_GPUQ_SQ_READBACK = 6, /* the last SQE read back from host memory did not hold the CID just written */
};

/* ---- SQE ---- */
static inline NVME_HD void nvme_gpuq_sqe_rw(struct nvme_sqe *s, uint8_t opc, uint16_t cid, uint32_t nsid, uint64_t slba,
                                            uint32_t nlb, uint64_t prp1, uint64_t prp2)
{
    s->opc = opc;
    s->flags = 0; /* no fusing, PRPs */
    s->cid = cid;
    s->nsid = nsid;
    s->cdw2 = 0;
    s->cdw3 = 0;
    s->mptr = 0;
    s->prp1 = prp1;
    s->prp2 = prp2;
    s->cdw10 = (uint32_t)slba;
    s->cdw11 = (uint32_t)(slba >> 32);
    s->cdw12 = (nlb - 1u) & NVME_RW_NLB_MASK; /* 0-based */
    s->cdw13 = 0;
    s->cdw14 = 0;
    s->cdw15 = 0;
}

/* PRP entries of a transfer of `len` bytes starting at byte `off` of a DMA region whose NVMe pages have
 * the DMA addresses lut[0..npages). `list` is a page of the same kind (virtual pointer, DMA address
 * list_dma) for transfers spanning more than two pages. Returns 0, or -1 when the transfer leaves the
 * region, is not dword aligned, or needs more than one list page. */
static inline NVME_HD int nvme_gpuq_prp(const uint64_t *lut, uint64_t npages, uint64_t off, uint64_t len,
                                        uint64_t *list, uint64_t list_dma, uint64_t *prp1, uint64_t *prp2)
{
    const uint64_t pmask = NVME_GPUQ_PAGE_SIZE - 1u;
    if (!len || (off & (NVME_PRP_ALIGN - 1u)) || off + len < off ||
        ((off + len + pmask) >> NVME_GPUQ_PAGE_SHIFT) > npages)
        return -1;
    uint64_t first = off >> NVME_GPUQ_PAGE_SHIFT, last = (off + len - 1u) >> NVME_GPUQ_PAGE_SHIFT;
    uint64_t pages = last - first + 1u;
    *prp1 = lut[first] + (off & pmask);
    *prp2 = 0;
    if (pages == 2u) {
        *prp2 = lut[first + 1u];
    } else if (pages > 2u) {
        if (pages - 1u > NVME_GPUQ_PRP_PER_PAGE || !list)
            return -1;
        for (uint64_t i = 1; i < pages; i++)
            list[i - 1u] = lut[first + i];
        *prp2 = list_dma;
    }
    return 0;
}

/* ---- CIDs: (generation, thread index) ----
 * `round` is a running round count; its generation is round % NVME_GPUQ_GEN_COUNT (never all ones). */
static inline NVME_HD uint32_t nvme_gpuq_gen(uint32_t round)
{
    return round % NVME_GPUQ_GEN_COUNT;
}
static inline NVME_HD uint16_t nvme_gpuq_cid_make(uint32_t round, uint32_t idx)
{
    return (uint16_t)((nvme_gpuq_gen(round) << NVME_GPUQ_IDX_BITS) | (idx & NVME_GPUQ_IDX_MASK));
}
static inline NVME_HD uint32_t nvme_gpuq_cid_idx(uint16_t cid)
{
    return cid & NVME_GPUQ_IDX_MASK;
}
static inline NVME_HD uint32_t nvme_gpuq_cid_gen(uint16_t cid)
{
    return (uint32_t)cid >> NVME_GPUQ_IDX_BITS;
}

/* The checks of a CQE that need no state: the SQ it names and the CID's generation and index.
 * Returns the index, or -NVME_GPUQ_BAD_SQID / -NVME_GPUQ_BAD_CID. */
static inline NVME_HD int nvme_gpuq_cid_check(uint16_t cid, uint16_t sqid, uint16_t want_sqid, uint32_t gen,
                                              uint32_t qdepth)
{
    if (sqid != want_sqid)
        return -NVME_GPUQ_BAD_SQID;
    uint32_t idx = nvme_gpuq_cid_idx(cid);
    if (nvme_gpuq_cid_gen(cid) != nvme_gpuq_gen(gen) || idx >= qdepth)
        return -NVME_GPUQ_BAD_CID;
    return (int)idx;
}

/* Match one CQE of round `gen` (qdepth commands, CIDs (gen, 0..qdepth-1)) to its command.
 * `seen` has one byte per index, zeroed at the start of the round. Returns the index of the command, or
 * -NVME_GPUQ_BAD_CID / -NVME_GPUQ_BAD_SQID. The slot the CQE was found in plays no part. */
static inline NVME_HD int nvme_gpuq_cqe_match(uint16_t cid, uint16_t sqid, uint16_t want_sqid, uint32_t gen,
                                              uint32_t qdepth, uint8_t *seen)
{
    int idx = nvme_gpuq_cid_check(cid, sqid, want_sqid, gen, qdepth);
    if (idx < 0)
        return idx;
    if (seen[idx])
        return -NVME_GPUQ_BAD_CID; /* a second completion for one command */
    seen[idx] = 1;
    return idx;
}

/* ---- ring arithmetic and the phase tag ----
 * A queue position is a running count `pos` (never wrapped); slot = pos % entries, and the phase a CQE in
 * that slot carries when new is 1 on the first pass, 0 on the second, and so on. */
static inline NVME_HD uint32_t nvme_gpuq_cq_slot(uint64_t pos, uint32_t entries)
{
    return (uint32_t)(pos % entries);
}
static inline NVME_HD uint16_t nvme_gpuq_cq_phase(uint64_t pos, uint32_t entries)
{
    return (uint16_t)(((pos / entries) & 1u) ^ 1u);
}
/* True when `status` (CQE status word) is a new entry for position pos. */
static inline NVME_HD int nvme_gpuq_cqe_new(uint16_t status, uint64_t pos, uint32_t entries)
{
    return nvme_cqe_phase(status) == nvme_gpuq_cq_phase(pos, entries);
}
/* One look at the CQE for position pos: NEW (phase is this pass's), or, when not new, EXPIRED once
 * `now` passes `deadline`, else EMPTY. The device-side wait (nvme_cuda.cuh) and the CPU stand-in
 * (nvme/gpuq_ctrl.c) both poll through this, so the watchdog path is the same code on both. */
enum nvme_gpuq_poll { NVME_GPUQ_POLL_EMPTY = 0, NVME_GPUQ_POLL_NEW = 1, NVME_GPUQ_POLL_EXPIRED = 2 };
static inline NVME_HD int nvme_gpuq_poll_step(uint16_t status, uint64_t pos, uint32_t entries, uint64_t now,
                                              uint64_t deadline);
/* The doorbell value (a slot index) after `pos` entries. */
static inline NVME_HD uint32_t nvme_gpuq_db(uint64_t pos, uint32_t entries)
{
    return (uint32_t)(pos % entries);
}

/* ---- deadlines (ns of a free-running clock; wrap-safe) ---- */
static inline NVME_HD uint64_t nvme_gpuq_deadline(uint64_t now, uint64_t timeout_ns)
{
    return now + timeout_ns;
}
static inline NVME_HD int nvme_gpuq_expired(uint64_t now, uint64_t deadline)
{
    return (int64_t)(now - deadline) >= 0;
}

static inline NVME_HD int nvme_gpuq_poll_step(uint16_t status, uint64_t pos, uint32_t entries, uint64_t now,
                                              uint64_t deadline)
{
    if (nvme_gpuq_cqe_new(status, pos, entries))
        return NVME_GPUQ_POLL_NEW;
    return nvme_gpuq_expired(now, deadline) ? NVME_GPUQ_POLL_EXPIRED : NVME_GPUQ_POLL_EMPTY;
}

/* Poll discipline (a run parameter, engine/crun_params.h `poll`): the wait after the n-th empty look (ns),
 * doubling from MIN up to max_ns, so an idle queue does not hammer PCIe or L2 while the deadline is still
 * checked after every wait; max_ns = 0 is `spin` (no sleep at all). */
#define NVME_GPUQ_BACKOFF_MIN_NS    32u
#define NVME_GPUQ_BACKOFF_SHIFT_MAX 16u
static inline NVME_HD uint32_t nvme_gpuq_backoff_ns(uint32_t n_empty, uint32_t max_ns)
{
    if (!max_ns)
        return 0;
    uint32_t shift = n_empty < NVME_GPUQ_BACKOFF_SHIFT_MAX ? n_empty : NVME_GPUQ_BACKOFF_SHIFT_MAX;
    uint64_t ns = (uint64_t)NVME_GPUQ_BACKOFF_MIN_NS << shift;
    return ns < max_ns ? (uint32_t)ns : max_ns;
}

/* ---- the poller warp ----
 * One warp per queue watches the CQ for the whole block: in a round of qdepth commands, lane l looks at
 * positions l, l + 32, l + 64, ... of the round, so the 32 lanes load 32 neighbouring CQEs at once (one
 * coalesced request over PCIe for a CQ in host memory) instead of qdepth threads each polling its own
 * slot. The k-th position of lane l, and how many positions the lane owns: */
#define NVME_GPUQ_POLLER_LANES 32u
static inline NVME_HD uint32_t nvme_gpuq_poller_idx(uint32_t lane, uint32_t k)
{
    return lane + k * NVME_GPUQ_POLLER_LANES;
}
static inline NVME_HD uint32_t nvme_gpuq_poller_count(uint32_t lane, uint32_t qdepth)
{
    return lane < qdepth ? (qdepth - lane + NVME_GPUQ_POLLER_LANES - 1u) / NVME_GPUQ_POLLER_LANES : 0u;
}

/* ---- SQs in host memory ----
 * PCIe orders posted writes per destination, not across destinations: a doorbell (to the controller's BAR)
 * can overtake SQEs still on their way to host memory. Each thread fences at system scope after its SQE
 * store, and before the doorbell one thread reads the round's last SQE back: a read is not passed by the
 * posted writes before it, so when it returns the CID just written, the SQEs are in host memory.
 * The position of that SQE, and the check of what was read: */
static inline NVME_HD uint64_t nvme_gpuq_last_sqe_pos(uint64_t sq_pos_after)
{
    return sq_pos_after - 1u;
}
static inline NVME_HD int nvme_gpuq_sqe_readback_ok(uint16_t cid_read, uint32_t round, uint32_t qdepth)
{
    return cid_read == nvme_gpuq_cid_make(round, qdepth - 1u);
}

/* Progress check of a run: the first queue (index into rounds[0..n)) that completed no round, or -1.
 * A block that never became resident leaves its queue at zero rounds: that is an error of the run. */
static inline NVME_HD int nvme_gpuq_idle_queue(const uint64_t *rounds, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!rounds[i])
            return (int)i;
    return -1;
}

/* ---- the per-I/O time breakdown (issue 24; record field `breakdown`) ----
 * A sampled command carries six stamps (ns of one clock: %globaltimer on the GPU, CLOCK_MONOTONIC on the
 * CPU): T0 the thread starts to submit, T1 its SQE is stored, T2 the doorbell that covers it is written,
 * T3P the start of the last poll that did not see its CQE (T2 when the first poll saw it), T3 the poll
 * that saw it, T4 the thread is released (status delivered, CQ head doorbell written). The five phases are
 * their differences: submit T1-T0, doorbell T2-T1, device T3P-T2, poll T3-T3P, release T4-T3.
 * One command in `every` is sampled, by its running command number (0: none; nvme/bd_sample.h holds the rule
 * and its default, NVME_BD_SAMPLE_EVERY). */
enum nvme_gpuq_stamp_idx {
    NVME_GPUQ_T0,
    NVME_GPUQ_T1,
    NVME_GPUQ_T2,
    NVME_GPUQ_T3P,
    NVME_GPUQ_T3,
    NVME_GPUQ_T4,
    NVME_GPUQ_NSTAMPS
};
enum nvme_gpuq_phase {
    NVME_GPUQ_PH_SUBMIT,
    NVME_GPUQ_PH_DOORBELL,
    NVME_GPUQ_PH_DEVICE,
    NVME_GPUQ_PH_POLL,
    NVME_GPUQ_PH_RELEASE,
    NVME_GPUQ_NPHASES
};
static inline NVME_HD int nvme_gpuq_sampled(uint64_t cmd, uint32_t every)
{
    return nvme_bd_sampled(cmd, every); /* the rule shared with the perf engine (nvme/bd_sample.h) */
}
/* Phase `ph` of one command's stamps, in ns (0 where a later stamp is not after an earlier one, which a
 * clock of coarse resolution can give: never a wrapped huge value). */
static inline NVME_HD uint32_t nvme_gpuq_phase_ns(const uint64_t *t, uint32_t ph)
{
    const uint64_t a = t[ph], b = t[ph + 1u];
    return b > a ? (b - a > 0xffffffffull ? 0xffffffffu : (uint32_t)(b - a)) : 0u;
}

/* ---- access patterns ---- */
#define NVME_GPUQ_LCG_MUL 6364136223846793005ull /* Knuth MMIX */
#define NVME_GPUQ_LCG_ADD 1442695040888963407ull
static inline NVME_HD uint64_t nvme_gpuq_lcg_seed(uint64_t seed, uint64_t thread)
{
    uint64_t s = seed ^ (thread * 0x9e3779b97f4a7c15ull);
    return s * NVME_GPUQ_LCG_MUL + NVME_GPUQ_LCG_ADD;
}
static inline NVME_HD uint64_t nvme_gpuq_lcg_next(uint64_t *s)
{
    *s = *s * NVME_GPUQ_LCG_MUL + NVME_GPUQ_LCG_ADD;
    return *s >> 16; /* the low bits of an LCG are weak */
}

/* First LBA of command `k` (running count of this thread's commands) in a range of `nslots` I/O-sized
 * slots of `nlb` LBAs starting at lba0. Sequential: the queues of a device interleave so that together
 * they sweep the range in order: slot = (k * threads_per_dev + thread_in_dev) % nslots.
 * Random: uniform slot from the thread's LCG. */
static inline NVME_HD uint64_t nvme_gpuq_slba(int random, uint64_t *lcg, uint64_t k, uint64_t thread_in_dev,
                                              uint64_t threads_per_dev, uint64_t nslots, uint64_t lba0, uint32_t nlb)
{
    uint64_t slot = random ? nvme_gpuq_lcg_next(lcg) % nslots : (k * threads_per_dev + thread_in_dev) % nslots;
    return lba0 + slot * nlb;
}

/* The 64-bit word written at word `w` of LBA `lba` of device `dev` in verified runs. */
static inline NVME_HD uint64_t nvme_gpuq_stamp(uint32_t dev, uint64_t lba, uint32_t w)
{
    uint64_t x = ((uint64_t)dev << 56) ^ (lba << 8) ^ (uint64_t)w ^ 0x6e766d656c616221ull;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x | 1u; /* never zero, so an unwritten (zeroed) LBA never verifies */
}

#ifdef __cplusplus
}
#endif

#endif /* NVME_NVME_GPUQ_H */
