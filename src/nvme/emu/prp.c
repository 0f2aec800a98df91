/* SPDX-License-Identifier: BSD-3-Clause */
/* prp.c — the emulator's DMA windows and PRP walk (rules in cmd_rules.h, shared with the GPU emulator). */
#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/emu_internal.h"

bool emu_dma_ok(const struct nvme_emu_set *set, uint64_t addr, uint64_t len)
{
    unsigned n = atomic_load_explicit(&((struct nvme_emu_set *)set)->ndma, memory_order_acquire);
    if (!n)
        return true;
    if (addr + len < addr)
        return false;
    for (unsigned i = 0; i < n; i++)
        if (addr >= set->dma[i].lo && addr + len <= set->dma[i].hi)
            return true;
    return false;
}

/* ---------------------------------------------------------------- PRPs */
uint16_t emu_prp_walk(const struct nvme_emu_set *set, uint64_t prp1, uint64_t prp2, uint64_t len, emu_seg_fn fn,
                      void *arg)
{
    const uint64_t page = EMU_PAGE_SIZE;
    uint16_t st;
    int r;
    if (!len)
        return EMU_ST_OK;
    if ((st = nvme_cr_prp1_offset(prp1)))
        return st;
    uint64_t n = nvme_cr_prp_first(prp1, len, page);
    if ((st = nvme_cr_addr(prp1, emu_dma_ok(set, prp1, n))))
        return st;
    if (fn && (r = fn(arg, (uint8_t *)(uintptr_t)prp1, (size_t)n, 0)))
        return (uint16_t)r;
    uint64_t done = n, rem = len - n;
    if (!rem)
        return EMU_ST_OK;
    if (rem <= page) {
        if ((st = nvme_cr_prp_page(prp2, page)) || (st = nvme_cr_addr(prp2, emu_dma_ok(set, prp2, rem))))
            return st;
        if (fn && (r = fn(arg, (uint8_t *)(uintptr_t)prp2, (size_t)rem, done)))
            return (uint16_t)r;
        return EMU_ST_OK;
    }
    /* PRP2 points at a PRP list (qword aligned, any offset in its page) */
    if ((st = nvme_cr_prp_list(prp2)))
        return st;
    uint64_t list = prp2, hops = 0, max_hops = len / page + 2;
    while (rem) {
        if (++hops > max_hops) /* a chain that loops */
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
        uint64_t nent = nvme_cr_prp_list_room(list, page);
        if ((st = nvme_cr_addr(list, emu_dma_ok(set, list, nent * NVME_PRP_ENTRY_SIZE))))
            return st;
        const volatile uint64_t *ent = (const volatile uint64_t *)(uintptr_t)list;
        uint64_t next = 0;
        for (uint64_t i = 0; i < nent && rem; i++) {
            uint64_t e = ent[i];
            if (i == nent - 1 && rem > page) { /* last slot of the page chains to the next list */
                if ((st = nvme_cr_prp_list(e)))
                    return st;
                next = e;
                break;
            }
            if ((st = nvme_cr_prp_page(e, page)))
                return st;
            n = rem < page ? rem : page;
            if ((st = nvme_cr_addr(e, emu_dma_ok(set, e, n))))
                return st;
            if (fn && (r = fn(arg, (uint8_t *)(uintptr_t)e, (size_t)n, done)))
                return (uint16_t)r;
            done += n, rem -= n;
        }
        list = next;
    }
    return EMU_ST_OK;
}
