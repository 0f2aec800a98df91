/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ns.c — namespaces of the emulated controller: sparse RAM or a sparse file.
 *
 * RAM: a table of EMU_CHUNK_SIZE pieces, each mmap'ed on its first write
 * (published with a CAS so concurrent writers of one namespace agree), so a
 * 64 GiB namespace costs its chunk table until data is written; unwritten
 * chunks read as zeros.  `ncap` limits how many chunks may be allocated
 * (thin provisioning): a write past it fails with Capacity Exceeded, as does
 * a failed allocation.  A chunk that Deallocate (DSM) or Write Zeroes covers
 * whole gives its memory back (MADV_DONTNEED) and its capacity (NUSE drops);
 * the mapping itself stays until the namespace goes, tagged CHUNK_DEALLOC, so
 * a command running concurrently on another queue never touches freed memory.
 * File: pread/pwrite at the byte offset; zeroing punches holes when the file
 * system can, else writes zeros.
 */
#include "nvme/emu/ns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nvme/emu/emu_internal.h"

#define EMU_ZERO_BUF  65536u
#define CHUNK_DEALLOC EMU_CHUNK_DEALLOC /* pointer tag: mapped, memory given back, not counted in used_chunks */

static inline uint8_t *chunk_mem(uint8_t *p)
{
    return (uint8_t *)((uintptr_t)p & ~CHUNK_DEALLOC);
}

static inline bool chunk_deallocated(const uint8_t *p)
{
    return ((uintptr_t)p & CHUNK_DEALLOC) != 0;
}

int emu_ns_init(struct emu_ns *ns, uint32_t nsid, const struct emu_ctrl_cfg *cc, int fd)
{
    memset(ns, 0, sizeof(*ns));
    ns->nsid = nsid;
    ns->lba_shift = cc->lbads == 4096 ? 12 : 9;
    ns->bytes = cc->nsze;
    ns->nlb = cc->nsze >> ns->lba_shift;
    ns->fd = fd;
    if (fd >= 0)
        return 0;
    ns->nchunks = (cc->nsze + EMU_CHUNK_SIZE - 1) >> EMU_CHUNK_SHIFT;
    ns->cap_chunks = (cc->ncap + EMU_CHUNK_SIZE - 1) >> EMU_CHUNK_SHIFT;
    ns->chunks = calloc(ns->nchunks, sizeof(*ns->chunks));
    return ns->chunks ? 0 : -ENOMEM;
}

void emu_ns_fini(struct emu_ns *ns)
{
    if (ns->chunks) {
        for (uint64_t i = 0; i < ns->nchunks; i++) {
            uint8_t *p = atomic_load_explicit(&ns->chunks[i], memory_order_relaxed);
            if (p)
                munmap(chunk_mem(p), EMU_CHUNK_SIZE);
        }
        free(ns->chunks);
    }
    if (ns->fd >= 0)
        close(ns->fd);
    memset(ns, 0, sizeof(*ns));
    ns->fd = -1;
}

uint64_t emu_ns_used_lbas(const struct emu_ns *ns)
{
    if (ns->fd >= 0)
        return ns->nlb;
    uint64_t b = atomic_load_explicit(&((struct emu_ns *)ns)->used_chunks, memory_order_relaxed) << EMU_CHUNK_SHIFT;
    return (b > ns->bytes ? ns->bytes : b) >> ns->lba_shift;
}

/* The memory of chunk i: NULL when it reads as zeros (never written, or deallocated) and !alloc;
 * with alloc, a live chunk (counted against ncap), or NULL when capacity or memory ran out. */
static uint8_t *chunk_get(struct emu_ns *ns, uint64_t i, bool alloc)
{
    for (;;) {
        uint8_t *p = atomic_load_explicit(&ns->chunks[i], memory_order_acquire);
        if (p && !chunk_deallocated(p))
            return p;
        if (!alloc)
            return NULL;
        uint64_t used = atomic_fetch_add_explicit(&ns->used_chunks, 1, memory_order_relaxed);
        if (used >= ns->cap_chunks) {
            atomic_fetch_sub_explicit(&ns->used_chunks, 1, memory_order_relaxed);
            return NULL;
        }
        uint8_t *fresh = p ? chunk_mem(p) : NULL;
        if (!fresh) {
            void *m =
                mmap(NULL, EMU_CHUNK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            fresh = m == MAP_FAILED ? NULL : m;
        }
        if (!fresh) {
            atomic_fetch_sub_explicit(&ns->used_chunks, 1, memory_order_relaxed);
            return NULL;
        }
        uint8_t *expect = p;
        if (atomic_compare_exchange_strong_explicit(&ns->chunks[i], &expect, fresh, memory_order_acq_rel,
                                                    memory_order_acquire))
            return fresh;
        /* another writer (or a deallocation) got there first: undo and look again */
        atomic_fetch_sub_explicit(&ns->used_chunks, 1, memory_order_relaxed);
        if (!p)
            munmap(fresh, EMU_CHUNK_SIZE);
    }
}

/* Chunk i is deallocated whole: its memory goes back to the system, its capacity to ncap. */
static void chunk_release(struct emu_ns *ns, uint64_t i)
{
    uint8_t *p = atomic_load_explicit(&ns->chunks[i], memory_order_acquire);
    if (!p || chunk_deallocated(p))
        return;
    uint8_t *tagged = (uint8_t *)((uintptr_t)p | CHUNK_DEALLOC);
    if (!atomic_compare_exchange_strong_explicit(&ns->chunks[i], &p, tagged, memory_order_acq_rel,
                                                 memory_order_acquire))
        return; /* changed under us: a concurrent overlapping command, no order to keep */
    madvise(p, EMU_CHUNK_SIZE, MADV_DONTNEED); /* private anonymous: reads as zeros again */
    atomic_fetch_sub_explicit(&ns->used_chunks, 1, memory_order_relaxed);
}

int emu_ns_read_any(struct emu_ns *ns, uint64_t off, void *dst, size_t len)
{
    uint8_t *d = dst;
    if (ns->fd >= 0) {
        while (len) {
            ssize_t r = pread(ns->fd, d, len, (off_t)off);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return -EIO;
            if (r == 0) { /* past the end of a shorter file: zeros */
                memset(d, 0, len);
                return 0;
            }
            d += r, off += (uint64_t)r, len -= (size_t)r;
        }
        return 0;
    }
    while (len) {
        uint64_t ci = off >> EMU_CHUNK_SHIFT, co = off & (EMU_CHUNK_SIZE - 1);
        size_t n = EMU_CHUNK_SIZE - co < len ? (size_t)(EMU_CHUNK_SIZE - co) : len;
        uint8_t *p = chunk_get(ns, ci, false);
        if (p)
            memcpy(d, p + co, n);
        else
            memset(d, 0, n);
        d += n, off += n, len -= n;
    }
    return 0;
}

/* RAM, inside one chunk: the common case, without the general loop's frame */
static inline bool ns_one_chunk(const struct emu_ns *ns, uint64_t off, size_t len)
{
    return ns->fd < 0 && len && ((off ^ (off + len - 1)) >> EMU_CHUNK_SHIFT) == 0;
}

static __attribute__((noinline)) int ns_write_any(struct emu_ns *ns, uint64_t off, const void *src, size_t len)
{
    const uint8_t *s = src;
    if (ns->fd >= 0) {
        while (len) {
            ssize_t r = pwrite(ns->fd, s, len, (off_t)off);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return errno == ENOSPC || errno == EDQUOT || errno == EFBIG ? -ENOSPC : -EIO;
            s += r, off += (uint64_t)r, len -= (size_t)r;
        }
        return 0;
    }
    while (len) {
        uint64_t ci = off >> EMU_CHUNK_SHIFT, co = off & (EMU_CHUNK_SIZE - 1);
        size_t n = EMU_CHUNK_SIZE - co < len ? (size_t)(EMU_CHUNK_SIZE - co) : len;
        uint8_t *p = chunk_get(ns, ci, true);
        if (!p)
            return -ENOSPC;
        memcpy(p + co, s, n);
        s += n, off += n, len -= n;
    }
    return 0;
}

int emu_ns_write(struct emu_ns *ns, uint64_t off, const void *src, size_t len)
{
    if (!ns_one_chunk(ns, off, len))
        return ns_write_any(ns, off, src, len);
    uint8_t *p = chunk_get(ns, off >> EMU_CHUNK_SHIFT, true); /* allocated on the first write */
    if (!p)
        return -ENOSPC;
    memcpy(p + (off & (EMU_CHUNK_SIZE - 1)), src, len);
    return 0;
}

int emu_ns_zero(struct emu_ns *ns, uint64_t off, uint64_t len)
{
    if (ns->fd >= 0) {
        if (fallocate(ns->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
            return 0;
        static const uint8_t zeros[EMU_ZERO_BUF];
        while (len) {
            size_t n = len < EMU_ZERO_BUF ? (size_t)len : EMU_ZERO_BUF;
            int r = emu_ns_write(ns, off, zeros, n);
            if (r)
                return r;
            off += n, len -= n;
        }
        return 0;
    }
    while (len) {
        uint64_t ci = off >> EMU_CHUNK_SHIFT, co = off & (EMU_CHUNK_SIZE - 1);
        uint64_t n = EMU_CHUNK_SIZE - co < len ? EMU_CHUNK_SIZE - co : len;
        if (n == EMU_CHUNK_SIZE) {
            chunk_release(ns, ci);
        } else {
            uint8_t *p = chunk_get(ns, ci, false); /* unwritten chunks already read as zeros */
            if (p)
                memset(p + co, 0, (size_t)n);
        }
        off += n, len -= n;
    }
    return 0;
}
