/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_rules.h — NVMe command and PRP rules shared by the CPU emulator (emu/io.c) and the GPU
 * emulator (emu/gpu/gpu_emu.cu).
 *
 * Purpose: one statement of what an emulated controller refuses, and with which status, so the two
 * emulators cannot drift apart. Every function is a small inline usable from C11 and from CUDA
 * (NVME_HD, from spec.h, is __host__ __device__ under nvcc, empty otherwise); none touches memory it is not given:
 * the caller reads PRP list entries and decides whether an address lies in its DMA windows, and
 * passes the answer in.
 *
 * Key functions:
 *   nvme_cr_flags()        FUSE and PSDT must be 0 (no fused commands, PRPs only): Invalid Field
 *   nvme_cr_rw()           SLBA and NLB of Read/Write/Write Zeroes (NLB is 0's based in CDW12)
 *   nvme_cr_range()        the LBA range inside the namespace: LBA Out of Range
 *   nvme_cr_mdts()         the transfer within MDTS (0 = no limit): Invalid Field
 *   nvme_cr_prp1_offset()  PRP1 dword aligned: PRP Offset Invalid
 *   nvme_cr_prp_first()    bytes PRP1 covers (to the end of its memory page)
 *   nvme_cr_prp_page()     PRP2 of a two-page transfer, and every PRP list entry, page aligned
 *   nvme_cr_prp_list()     a PRP list pointer qword aligned: PRP Offset Invalid
 *   nvme_cr_prp_list_room() entries from a list pointer to the end of its page
 *   nvme_cr_addr()         a null address, or one outside the DMA windows: Data Transfer Error
 *   nvme_cr_in_windows()   the IOMMU rule: [addr, addr+len) inside one registered window; no window -> no DMA
 *   nvme_cr_lba_err()      per-LBA error injection (URI keys err_every/err_status): a Read/Write whose range
 *                          holds a multiple of `every` completes with the chosen status (DNR clear). The
 *                          checker of the cuda_match study calls it too, to know each command's expected status
 *   nvme_cr_ooo_key()      out-of-order completion (URI key ooo_win=W), CPU emulator: the order key of the n-th
 *                          completion of a queue, shuffled at random within windows of W completions
 *   nvme_cr_ooo_src()      the same on the GPU emulator: a warp batch reversed within windows of W entries
 *
 * Statuses are SCT/SC shifted into CQE DW3 bits 31:17 without the phase tag (NVME_CR_ST), with DNR
 * set for every refusal here: retrying the same command cannot succeed.
 *
 * Caveats: the memory page size is the caller's (CC.MPS); chained PRP lists are walked by the
 * caller (the GPU emulator refuses them with Invalid Field, see gpu_emu.cu).
 */
#ifndef NVME_EMU_CMD_RULES_H
#define NVME_EMU_CMD_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "nvme/spec.h"

/* NVME_HD (spec.h): __host__ __device__ under nvcc, empty in C. */

#define NVME_CR_ST(sct, sc)                                                                                            \
    ((uint16_t)(((unsigned)(sct) << NVME_CQE_SCT_SHIFT) | ((unsigned)(sc) << NVME_CQE_SC_SHIFT)))
#define NVME_CR_ST_DNR(sct, sc) ((uint16_t)(NVME_CR_ST(sct, sc) | NVME_CQE_DNR))
#define NVME_CR_OK              ((uint16_t)0)

static inline NVME_HD uint16_t nvme_cr_flags(uint8_t flags)
{
    return (flags & (NVME_SQE_FUSE_MASK | NVME_SQE_PSDT_MASK)) ? NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD)
                                                               : NVME_CR_OK;
}

static inline NVME_HD void nvme_cr_rw(uint32_t cdw10, uint32_t cdw11, uint32_t cdw12, uint64_t *slba, uint64_t *nlb)
{
    *slba = cdw10 | ((uint64_t)cdw11 << 32);
    *nlb = (uint64_t)(cdw12 & NVME_RW_NLB_MASK) + 1u;
}

static inline NVME_HD uint16_t nvme_cr_range(uint64_t slba, uint64_t nlb, uint64_t ns_nlb)
{
    return slba < ns_nlb && nlb <= ns_nlb - slba ? NVME_CR_OK : NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
}

static inline NVME_HD uint16_t nvme_cr_mdts(uint64_t len, uint64_t mdts_bytes)
{
    return mdts_bytes && len > mdts_bytes ? NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) : NVME_CR_OK;
}

static inline NVME_HD uint16_t nvme_cr_prp1_offset(uint64_t prp1)
{
    return (prp1 & (NVME_PRP_ALIGN - 1u)) ? NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET) : NVME_CR_OK;
}

static inline NVME_HD uint64_t nvme_cr_prp_first(uint64_t prp1, uint64_t len, uint64_t page)
{
    uint64_t n = page - (prp1 & (page - 1u));
    return n < len ? n : len;
}

static inline NVME_HD uint16_t nvme_cr_prp_page(uint64_t addr, uint64_t page)
{
    return (addr & (page - 1u)) ? NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET) : NVME_CR_OK;
}

static inline NVME_HD uint16_t nvme_cr_prp_list(uint64_t list)
{
    return (list & (NVME_PRP_ENTRY_SIZE - 1u)) ? NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET)
                                               : NVME_CR_OK;
}

static inline NVME_HD uint64_t nvme_cr_prp_list_room(uint64_t list, uint64_t page)
{
    return (page - (list & (page - 1u))) / NVME_PRP_ENTRY_SIZE;
}

static inline NVME_HD uint16_t nvme_cr_addr(uint64_t addr, bool in_window)
{
    return !addr || !in_window ? NVME_CR_ST_DNR(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR) : NVME_CR_OK;
}

/* A DMA window the host side registered ([lo, hi), bytes of the controller's address space), as vfio's
 * IOMMU maps them. An emulated controller checks every address it touches (PRP entries, PRP lists, queue
 * bases) against its windows before it touches memory; with no window registered it accepts no DMA. */
struct nvme_cr_win {
    uint64_t lo, hi;
};

static inline NVME_HD bool nvme_cr_in_windows(const struct nvme_cr_win *w, uint32_t n, uint64_t addr, uint64_t len)
{
    if (!len || addr + len < addr)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (addr >= w[i].lo && addr + len <= w[i].hi)
            return true;
    return false;
}

/* Per-LBA error injection: every LBA that is a multiple of `every` (0 = off) fails with `status` (CQE DW3
 * bits 31:17, no phase). Parsed from the URI once (model_keys.c nvme_emu_inj_parse). */
struct nvme_cr_inj {
    uint64_t every;   /* 0 = no error injection */
    uint16_t status;  /* NVME_CR_ST(sct, sc) */
    uint32_t ooo_win; /* completions shuffled within windows of this many (0/1 = in order) */
};

static inline NVME_HD uint16_t nvme_cr_lba_err(const struct nvme_cr_inj *j, uint64_t slba, uint64_t nlb)
{
    if (!j->every || !nlb)
        return NVME_CR_OK;
    const uint64_t first = (slba + j->every - 1u) / j->every * j->every; /* first multiple >= slba */
    return first - slba < nlb ? j->status : NVME_CR_OK;
}

/* Order key of the n-th completion of a queue: windows of `win` completions stay in order among themselves,
 * inside a window the order follows `rnd` (any per-completion random number). win <= 1: n itself. */
static inline NVME_HD uint64_t nvme_cr_ooo_key(uint64_t n, uint32_t win, uint32_t rnd)
{
    return win > 1u ? ((n / win) << 32) | rnd : n;
}

/* The GPU emulator's form of the same rule: it posts a warp batch of k due completions at once, lane l
 * writing the completion of batch entry src; within each window of `win` entries the order is reversed. */
static inline NVME_HD uint32_t nvme_cr_ooo_src(uint32_t lane, uint32_t k, uint32_t win)
{
    if (win < 2u || lane >= k)
        return lane;
    const uint32_t base = lane / win * win, len = k - base < win ? k - base : win;
    return base + len - 1u - (lane - base);
}

#endif /* NVME_EMU_CMD_RULES_H */
