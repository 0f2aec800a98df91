/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ns.h — the emulator's namespaces (ns.c): lazily allocated RAM chunks or a sparse file (private to emu/).
 *
 * Purpose: ns.c's functions and its fast-path read, kept with their owner: emu_internal.h holds the types
 * every emulator file shares (struct emu_ns is embedded in struct emu_ctrl) and no code that calls up into
 * the files above it.
 * Key functions: emu_ns_init/fini(), emu_ns_read() (inline: one RAM chunk or a never-written namespace
 * without a call; anything else emu_ns_read_any()), emu_ns_write(), emu_ns_zero(), emu_ns_used_lbas().
 * Caveats: included by the emulator's files only (io.c, admin.c, ctrl.c, ns.c); errors are negative errno.
 */
#ifndef NVME_EMU_NS_H
#define NVME_EMU_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nvme/emu/emu_internal.h"

int emu_ns_init(struct emu_ns *ns, uint32_t nsid, const struct emu_ctrl_cfg *cc, int fd);
void emu_ns_fini(struct emu_ns *ns);
/* 0, -ENOSPC (capacity exceeded), -EIO */
int emu_ns_read_any(struct emu_ns *ns, uint64_t off, void *dst, size_t len);
/* A RAM access inside one chunk (the common case) inline, anything else through emu_ns_read_any. A RAM
 * namespace with no live chunk (used_chunks == 0: never written, or all of it deallocated) reads as zeros
 * without a look at its chunk table: the table is the emulated device's state, one random line per
 * command (16 tables overflow a 512 KiB L2; src/README.md, the 16-device footprint). used_chunks counts a
 * chunk before its pointer is published and after it is withdrawn, so 0 means none is live; a read issued
 * after a write's completion sees the count that write raised (the completion's release, the doorbell's
 * acquire). */
static inline int emu_ns_read(struct emu_ns *ns, uint64_t off, void *dst, size_t len)
{
    if (ns->fd < 0 && len && ((off ^ (off + len - 1)) >> EMU_CHUNK_SHIFT) == 0) {
        if (atomic_load_explicit(&ns->used_chunks, memory_order_relaxed) == 0) {
            memset(dst, 0, len); /* nothing written: zeros */
            return 0;
        }
        const uint8_t *p = atomic_load_explicit(&ns->chunks[off >> EMU_CHUNK_SHIFT], memory_order_acquire);
        if (p && !((uintptr_t)p & EMU_CHUNK_DEALLOC)) /* a deallocated chunk reads as zeros (not through its tag) */
            memcpy(dst, p + (off & (EMU_CHUNK_SIZE - 1)), len);
        else
            memset(dst, 0, len); /* never written: zeros */
        return 0;
    }
    return emu_ns_read_any(ns, off, dst, len);
}
int emu_ns_write(struct emu_ns *ns, uint64_t off, const void *src, size_t len);
int emu_ns_zero(struct emu_ns *ns, uint64_t off, uint64_t len);
uint64_t emu_ns_used_lbas(const struct emu_ns *ns);

#endif /* NVME_EMU_NS_H */
