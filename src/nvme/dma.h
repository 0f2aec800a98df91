/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dma.h — DMA memory internals: one nvme_dma object type with pluggable address translation, and the
 * per-target DMA domain that owns every object (public calls are in nvme.h).
 *
 *   NVME_DMA_IDENTITY  emu://: anonymous mmap, iova == process virtual address; each object is mapped
 *                      into the emulator's IOMMU (the domain's iommu hooks, set by target.c) and
 *                      unmapped before its memory is released.
 *   NVME_DMA_PAGEMAP   pci:// on uio_pci_generic: 2 MiB hugepages (MAP_HUGETLB), mlock'ed, physical
 *                      address of each hugepage looked up in /proc/self/pagemap (needs CAP_SYS_ADMIN).
 *   NVME_DMA_VFIO      pci:// on vfio-pci: anonymous memory mapped into the VFIO type1 container at an
 *                      IOVA the domain hands out (bump allocator), unmapped on free.
 *   NVME_DMA_VFIO_USER vfio-user://: one memfd per object, mapped shared here and handed to the server
 *                      (the domain's fd_map hook: DMA_MAP with the fd) at an IOVA the domain hands out
 *                      from NVME_VFU_IOVA_BASE up (bump allocator); fd_unmap (DMA_UNMAP) before the
 *                      memory is released. The server maps the fd at virtual address == IOVA.
 *
 * Key functions: nvme_dma_domain_init/fini, nvme_dma_find (slow, locked registry lookup),
 * nvme_dma_iova_at (hot path: offset -> bus address, no locks, no division).
 *
 * Caveats: translation granularity is d->page_shift (12 for identity/vfio where it is contiguous anyway,
 * 21 for hugepages); PRP building asks for one address per controller page, which never straddles a
 * translation page because controller pages (4 KiB) divide 2 MiB. fini frees objects the user leaked.
 */
#ifndef NVME_DMA_H
#define NVME_DMA_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/nvme.h"

#define NVME_HUGEPAGE_SHIFT  21u /* 2 MiB hugepages */
#define NVME_HUGEPAGE_SIZE   ((size_t)1 << NVME_HUGEPAGE_SHIFT)
#define NVME_HOST_PAGE_SHIFT 12u /* 4 KiB host pages */
#define NVME_HOST_PAGE_SIZE  ((size_t)1 << NVME_HOST_PAGE_SHIFT)
#define NVME_VFIO_IOVA_BASE  ((uint64_t)1 << 32) /* first IOVA handed out (keeps 0 unused) */
/* vfio-user: first IOVA handed out (32 TiB), above where a server process keeps its own mappings, so the
 * server can place each window at virtual address == IOVA; and above AddressSanitizer's x86-64 shadow
 * (which ends at 0x10007fff7fff), so a sanitized server (make test-sanitize serves in process) can too.
 * The same as VFU_CLIENT_IOVA_BASE (vfio_user.h), which this header does not include. */
#define NVME_VFU_IOVA_BASE ((uint64_t)1 << 45)

enum nvme_dma_kind { NVME_DMA_IDENTITY, NVME_DMA_PAGEMAP, NVME_DMA_VFIO, NVME_DMA_VFIO_USER };

struct nvme_dma_domain {
    enum nvme_dma_kind kind;
    int vfio_container_fd; /* NVME_DMA_VFIO: the type1 container; -1 otherwise */
    uint64_t next_iova;    /* NVME_DMA_VFIO: bump allocator */
    pthread_mutex_t lock;  /* protects the registry and next_iova */
    struct nvme_dma *head; /* registry of live objects */
    struct nvme_target *target;
    /* NVME_DMA_IDENTITY on emu://: the emulator's DMA windows (emu.h nvme_emu_dma_map/unmap); NULL: none */
    int (*iommu_map)(void *ctx, const void *vaddr, size_t len);
    int (*iommu_unmap)(void *ctx, const void *vaddr, size_t len);
    void *iommu_ctx;
    /* NVME_DMA_VFIO_USER: hand the object's fd to the server at iova (DMA_MAP), take it back (DMA_UNMAP);
     * set by target.c with fd_ctx; 0 or a negative errno */
    int (*fd_map)(void *ctx, int fd, uint64_t iova, size_t len);
    int (*fd_unmap)(void *ctx, uint64_t iova, size_t len);
    void *fd_ctx;
};

struct nvme_dma {
    uint8_t *vaddr;
    size_t size;         /* usable bytes (rounded to the translation page) */
    uint64_t iova;       /* contiguous kinds: bus address of vaddr */
    uint64_t *pages;     /* NVME_DMA_PAGEMAP: bus address of each hugepage; NULL otherwise */
    unsigned page_shift; /* translation granularity */
    bool data;           /* a data buffer (nvme_dma_alloc): raw commands' PRPs may point into it */
    struct nvme_dma_domain *dom;
    struct nvme_dma *prev, *next; /* registry links */
};

int nvme_dma_domain_init(struct nvme_dma_domain *dom, struct nvme_target *t, enum nvme_dma_kind kind,
                         int vfio_container_fd);
/* Frees leaked objects (with a warning); does not close the VFIO container (pci.c owns it). */
void nvme_dma_domain_fini(struct nvme_dma_domain *dom);
int nvme_dma_alloc_in(struct nvme_dma_domain *dom, size_t size, struct nvme_dma **out);
/* The object holding the bus addresses [bus, bus + len) (within one translation page for PAGEMAP), with
 * the offset of bus in it in *off; NULL when none does. Caller holds dom->lock. Overflow-safe. */
struct nvme_dma *nvme_dma_find_bus_locked(struct nvme_dma_domain *dom, uint64_t bus, uint64_t len, size_t *off);
/* The object holding [p, p + len), or NULL. Takes the domain lock. */
struct nvme_dma *nvme_dma_find(struct nvme_dma_domain *dom, const void *p, size_t len);

static inline bool nvme_dma_contains(const struct nvme_dma *d, const void *p, size_t len)
{
    const uint8_t *b = (const uint8_t *)p;
    return d && b >= d->vaddr && len <= d->size && (size_t)(b - d->vaddr) <= d->size - len;
}

/* Bus address of byte `off` of d (off < d->size). */
static inline uint64_t nvme_dma_iova_at(const struct nvme_dma *d, size_t off)
{
    if (!d->pages)
        return d->iova + off;
    return d->pages[off >> d->page_shift] + (off & (((size_t)1 << d->page_shift) - 1));
}

#endif /* NVME_DMA_H */
