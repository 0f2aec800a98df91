/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvme_gpuq_match.h — the three ways a device-side driver can hand completions to the commands that wait
 * for them, as one look at the CQ each, in plain C that compiles for the host (the CPU stand-in,
 * nvme/gpuq_ctrl.c) and under nvcc for the GPU (engine/cuda/crun_kernel.cu). The cuda-run parameter `match`
 * (engine/crun_params.h) picks one; the `cuda_match` study compares them.
 *
 *   cid        (ours) the poller looks at round position k; a new CQE goes to the command its CID names
 *              (generation and index checked, a second completion for one command refused), whatever the
 *              slot: correct when the controller completes out of order.
 *   positional (as xNVMe/uPCIe cuda-run) the poller looks at round position k; a new CQE goes to command k,
 *              the CID is not looked at: one load per look, but a controller that completes out of order
 *              hands command k the status of another command.
 *   scan       (as BaM) command k scans the round's CQ positions for a new CQE carrying its own CID: correct
 *              out of order, but every look reads up to qdepth CQEs.
 *
 * Key functions: nvme_gpuq_match_cid(), nvme_gpuq_match_positional(), nvme_gpuq_match_scan() (one look
 * each), nvme_gpuq_match_look() (by mode), nvme_gpuq_match_parse()/_name(), nvme_gpuq_cqe_w3_load().
 *
 * A look returns NVME_GPUQ_POLL_EMPTY (nothing for this waiter yet: the caller checks its deadline with
 * nvme_gpuq_expired and backs off), NVME_GPUQ_POLL_NEW (*idx is the command and *status its status without
 * the phase tag), or -NVME_GPUQ_BAD_CID / -NVME_GPUQ_BAD_SQID (*status then holds the CID refused). Every look adds to
 * the counters: `looks`, `cq_bytes` (4 bytes per CQE word 3 loaded, +4 for the SQID word of a new CQE the mode checks),
 * `stale` (a CQE of the previous pass carrying the CID the waiter wants: the ring wrapped, its phase says old) and
 * `foreign` (a new CQE for another command than the one the position or the scanner expects: cid hands it
 * on by its CID, positional gives it to the wrong command, scan skips it and reads on).
 *
 * Caveats: the look never waits and never reads a clock, so every poll keeps its caller's deadline. Loads of
 * word 3 are acquires (at `scope` on the GPU: NVME_GPUQ_SCOPE_GPU or _SYSTEM, see nvme_cuda.cuh); the rest
 * of a CQE is read after it. `seen` is one word per command of the round, zeroed before it (a claim is an
 * atomic exchange on the GPU). Counters are plain adds: each waiter keeps its own and the caller sums them.
 */
#ifndef NVME_NVME_GPUQ_MATCH_H
#define NVME_NVME_GPUQ_MATCH_H

#include <stdint.h>
#include <string.h>

#include "nvme/nvme_gpuq.h"
#include "nvme/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

enum nvme_gpuq_match_mode { NVME_GPUQ_MATCH_CID = 0, NVME_GPUQ_MATCH_POSITIONAL = 1, NVME_GPUQ_MATCH_SCAN = 2 };
#define NVME_GPUQ_MATCH_MODES 3u

enum nvme_gpuq_scope { NVME_GPUQ_SCOPE_GPU = 0, NVME_GPUQ_SCOPE_SYSTEM = 1 };

#define NVME_GPUQ_CQE_W3_OFF   12u /* byte offset of the CID + status word in a CQE */
#define NVME_GPUQ_CQE_W3_BYTES 4u  /* what one look loads */
#define NVME_GPUQ_CQE_W2_BYTES 4u  /* SQHD + SQID, read after a new word 3 when the mode checks the SQ */

NVME_STATIC_ASSERT(NVME_GPUQ_CQE_W3_OFF + NVME_GPUQ_CQE_W3_BYTES == sizeof(struct nvme_cqe), "word 3 ends the CQE");

struct nvme_gpuq_match_ctr {
    uint64_t looks;    /* CQ looks (one per poll iteration of a waiter) */
    uint64_t cq_bytes; /* bytes of CQ loaded */
    uint64_t stale;    /* old-phase CQEs carrying the wanted CID (a wrapped ring) */
    uint64_t foreign;  /* new CQEs that belonged to another command */
};

/* Word 3 of CQE `slot` (CID low half, status with phase high half), loaded with acquire semantics. */
static inline NVME_HD uint32_t nvme_gpuq_cqe_w3_load(const struct nvme_cqe *cq, uint32_t slot, int scope)
{
    const uint32_t *w =
        (const uint32_t *)(const void *)((const uint8_t *)(const void *)(cq + slot) + NVME_GPUQ_CQE_W3_OFF);
#ifdef __CUDA_ARCH__
    uint32_t v;
    if (scope == NVME_GPUQ_SCOPE_SYSTEM)
        asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(w) : "memory");
    else
        asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(w) : "memory");
    return v;
#else
    (void)scope;
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
#endif
}

static inline NVME_HD uint16_t nvme_gpuq_w3_cid(uint32_t w3)
{
    return (uint16_t)(w3 & 0xffffu);
}
static inline NVME_HD uint16_t nvme_gpuq_w3_status(uint32_t w3)
{
    return (uint16_t)(w3 >> 16);
}
static inline NVME_HD uint16_t nvme_gpuq_cqe_sqid_load(const struct nvme_cqe *cq, uint32_t slot)
{
    return ((const volatile struct nvme_cqe *)cq)[slot].sqid;
}

/* Claim command idx of the round: the previous value (non-zero: it was already completed). */
static inline NVME_HD uint32_t nvme_gpuq_claim(uint32_t *seen, uint32_t idx)
{
#ifdef __CUDA_ARCH__
    return atomicExch(&seen[idx], 1u);
#else
    uint32_t old = seen[idx];
    seen[idx] = 1u;
    return old;
#endif
}

/* cid: one look at round position k (queue position pos0 + k). */
static inline NVME_HD int nvme_gpuq_match_cid(const struct nvme_cqe *cq, uint32_t entries, uint64_t pos0, uint32_t k,
                                              uint16_t want_sqid, uint32_t round, uint32_t qdepth, int scope,
                                              uint32_t *seen, uint32_t *idx, uint16_t *status,
                                              struct nvme_gpuq_match_ctr *ctr)
{
    const uint64_t pos = pos0 + k;
    const uint32_t slot = nvme_gpuq_cq_slot(pos, entries);
    const uint32_t w3 = nvme_gpuq_cqe_w3_load(cq, slot, scope);
    ctr->looks++;
    ctr->cq_bytes += NVME_GPUQ_CQE_W3_BYTES;
    if (!nvme_gpuq_cqe_new(nvme_gpuq_w3_status(w3), pos, entries)) {
        ctr->stale += nvme_gpuq_w3_cid(w3) == nvme_gpuq_cid_make(round, k);
        return NVME_GPUQ_POLL_EMPTY;
    }
    ctr->cq_bytes += NVME_GPUQ_CQE_W2_BYTES;
    ctr->foreign += nvme_gpuq_w3_cid(w3) != nvme_gpuq_cid_make(round, k); /* out of order: handled */
    *status = nvme_gpuq_w3_cid(w3);                                       /* on a refusal: the CID refused */
    int r = nvme_gpuq_cid_check(nvme_gpuq_w3_cid(w3), nvme_gpuq_cqe_sqid_load(cq, slot), want_sqid, round, qdepth);
    if (r < 0)
        return r;
    if (nvme_gpuq_claim(seen, (uint32_t)r))
        return -NVME_GPUQ_BAD_CID; /* a second completion for one command */
    *idx = (uint32_t)r;
    *status = (uint16_t)(nvme_gpuq_w3_status(w3) & ~NVME_CQE_P);
    return NVME_GPUQ_POLL_NEW;
}

/* positional: one look at round position k; a new CQE completes command k, whatever its CID. `foreign`
 * counts CQEs whose CID names another command (a diagnostic only: the mode does not act on it). */
static inline NVME_HD int nvme_gpuq_match_positional(const struct nvme_cqe *cq, uint32_t entries, uint64_t pos0,
                                                     uint32_t k, uint32_t round, int scope, uint32_t *idx,
                                                     uint16_t *status, struct nvme_gpuq_match_ctr *ctr)
{
    const uint64_t pos = pos0 + k;
    const uint32_t w3 = nvme_gpuq_cqe_w3_load(cq, nvme_gpuq_cq_slot(pos, entries), scope);
    ctr->looks++;
    ctr->cq_bytes += NVME_GPUQ_CQE_W3_BYTES;
    if (!nvme_gpuq_cqe_new(nvme_gpuq_w3_status(w3), pos, entries)) {
        ctr->stale += nvme_gpuq_w3_cid(w3) == nvme_gpuq_cid_make(round, k);
        return NVME_GPUQ_POLL_EMPTY;
    }
    ctr->foreign += nvme_gpuq_w3_cid(w3) != nvme_gpuq_cid_make(round, k);
    *idx = k;
    *status = (uint16_t)(nvme_gpuq_w3_status(w3) & ~NVME_CQE_P);
    return NVME_GPUQ_POLL_NEW;
}

/* scan: command k looks at every position of the round for a new CQE with its CID (and its SQ). */
static inline NVME_HD int nvme_gpuq_match_scan(const struct nvme_cqe *cq, uint32_t entries, uint64_t pos0, uint32_t k,
                                               uint16_t want_sqid, uint32_t round, uint32_t qdepth, int scope,
                                               uint32_t *seen, uint32_t *idx, uint16_t *status,
                                               struct nvme_gpuq_match_ctr *ctr)
{
    const uint16_t want = nvme_gpuq_cid_make(round, k);
    ctr->looks++;
    for (uint32_t j = 0; j < qdepth; j++) {
        const uint64_t pos = pos0 + j;
        const uint32_t slot = nvme_gpuq_cq_slot(pos, entries);
        const uint32_t w3 = nvme_gpuq_cqe_w3_load(cq, slot, scope);
        ctr->cq_bytes += NVME_GPUQ_CQE_W3_BYTES;
        const int fresh = nvme_gpuq_cqe_new(nvme_gpuq_w3_status(w3), pos, entries);
        if (nvme_gpuq_w3_cid(w3) != want) {
            ctr->foreign += fresh;
            continue;
        }
        if (!fresh) {
            ctr->stale++;
            continue;
        }
        ctr->cq_bytes += NVME_GPUQ_CQE_W2_BYTES;
        *status = want; /* on a refusal: the CID refused */
        if (nvme_gpuq_cqe_sqid_load(cq, slot) != want_sqid)
            return -NVME_GPUQ_BAD_SQID;
        if (nvme_gpuq_claim(seen, k))
            return -NVME_GPUQ_BAD_CID;
        *idx = k;
        *status = (uint16_t)(nvme_gpuq_w3_status(w3) & ~NVME_CQE_P);
        return NVME_GPUQ_POLL_NEW;
    }
    return NVME_GPUQ_POLL_EMPTY;
}

/* One look by mode; `k` is the round position (cid, positional) or the command (scan). */
static inline NVME_HD int nvme_gpuq_match_look(int mode, const struct nvme_cqe *cq, uint32_t entries, uint64_t pos0,
                                               uint32_t k, uint16_t want_sqid, uint32_t round, uint32_t qdepth,
                                               int scope, uint32_t *seen, uint32_t *idx, uint16_t *status,
                                               struct nvme_gpuq_match_ctr *ctr)
{
    if (mode == NVME_GPUQ_MATCH_POSITIONAL)
        return nvme_gpuq_match_positional(cq, entries, pos0, k, round, scope, idx, status, ctr);
    if (mode == NVME_GPUQ_MATCH_SCAN)
        return nvme_gpuq_match_scan(cq, entries, pos0, k, want_sqid, round, qdepth, scope, seen, idx, status, ctr);
    return nvme_gpuq_match_cid(cq, entries, pos0, k, want_sqid, round, qdepth, scope, seen, idx, status, ctr);
}

/* Host only: "cid" | "positional" | "scan" -> mode, or -1; and the name of a mode. */
#ifndef __CUDA_ARCH__
static inline int nvme_gpuq_match_parse(const char *s)
{
    static const char *const names[NVME_GPUQ_MATCH_MODES] = {"cid", "positional", "scan"};
    for (int i = 0; s && i < (int)NVME_GPUQ_MATCH_MODES; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}
static inline const char *nvme_gpuq_match_name(int mode)
{
    return mode == NVME_GPUQ_MATCH_POSITIONAL ? "positional" : mode == NVME_GPUQ_MATCH_SCAN ? "scan" : "cid";
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* NVME_NVME_GPUQ_MATCH_H */
