/* SPDX-License-Identifier: BSD-3-Clause */
/* dma.c — DMA memory objects with identity, hugepage+pagemap, VFIO IOVA and vfio-user (memfd + IOVA)
 * translation (see dma.h). */
#include "nvme/dma.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nvme/ctrl_internal.h"
#include "nvme/target.h"

#define PAGEMAP_PATH       "/proc/self/pagemap"
#define PAGEMAP_ENTRY_SIZE 8u
#define PAGEMAP_PFN_MASK   ((UINT64_C(1) << 55) - 1) /* bits 54:0 */
#define PAGEMAP_PRESENT    (UINT64_C(1) << 63)

static size_t round_up(size_t v, size_t align)
{
    return (v + align - 1) & ~(align - 1);
}

int nvme_dma_domain_init(struct nvme_dma_domain *dom, struct nvme_target *t, enum nvme_dma_kind kind,
                         int vfio_container_fd)
{
    memset(dom, 0, sizeof(*dom));
    dom->kind = kind;
    dom->vfio_container_fd = vfio_container_fd;
    dom->next_iova = kind == NVME_DMA_VFIO_USER ? NVME_VFU_IOVA_BASE : NVME_VFIO_IOVA_BASE;
    dom->target = t;
    return -pthread_mutex_init(&dom->lock, NULL);
}

static void dma_release(struct nvme_dma *d)
{
    struct nvme_dma_domain *dom = d->dom;
    /* unmap first: once it returns the controller can no longer reach the memory */
    if (dom->iommu_unmap && dom->iommu_unmap(dom->iommu_ctx, d->vaddr, d->size) != 0)
        nvme_log(NVME_LOG_WARN, "emulator IOMMU: no window at %p (%zu bytes) to unmap", (void *)d->vaddr, d->size);
    if (dom->kind == NVME_DMA_VFIO) {
        struct vfio_iommu_type1_dma_unmap unmap = {
            .argsz = sizeof(unmap),
            .flags = 0,
            .iova = d->iova,
            .size = d->size,
        };
        if (ioctl(dom->vfio_container_fd, VFIO_IOMMU_UNMAP_DMA, &unmap) != 0)
            nvme_log(NVME_LOG_WARN, "VFIO unmap of iova 0x%llx (%zu bytes) failed: %s", (unsigned long long)d->iova,
                     d->size, strerror(errno));
    }
    if (dom->kind == NVME_DMA_VFIO_USER && dom->fd_unmap) {
        int rc = dom->fd_unmap(dom->fd_ctx, d->iova, d->size);
        if (rc)
            nvme_log(NVME_LOG_WARN, "vfio-user DMA_UNMAP of iova 0x%llx (%zu bytes) failed: %s",
                     (unsigned long long)d->iova, d->size, strerror(-rc));
    }
    if (dom->kind == NVME_DMA_PAGEMAP)
        munlock(d->vaddr, d->size);
    munmap(d->vaddr, d->size);
    free(d->pages);
    free(d);
}

void nvme_dma_domain_fini(struct nvme_dma_domain *dom)
{
    unsigned leaked = 0;
    while (dom->head) {
        struct nvme_dma *d = dom->head;
        dom->head = d->next;
        dma_release(d);
        leaked++;
    }
    if (leaked)
        nvme_log(NVME_LOG_WARN, "target closed with %u DMA buffers still allocated; freed them", leaked);
    pthread_mutex_destroy(&dom->lock);
}

/* Physical address of each hugepage of [vaddr, vaddr + size) from /proc/self/pagemap. */
static int pagemap_lookup(struct nvme_dma *d)
{
    size_t n = d->size >> NVME_HUGEPAGE_SHIFT;
    d->pages = calloc(n, sizeof(uint64_t));
    if (!d->pages)
        return -ENOMEM;
    int fd = open(PAGEMAP_PATH, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    long host_page = sysconf(_SC_PAGESIZE);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t va = (uintptr_t)d->vaddr + (i << NVME_HUGEPAGE_SHIFT);
        uint64_t entry = 0;
        off_t off = (off_t)(va / (uintptr_t)host_page) * PAGEMAP_ENTRY_SIZE;
        if (pread(fd, &entry, sizeof(entry), off) != (ssize_t)sizeof(entry)) {
            rc = -EIO;
            break;
        }
        uint64_t pfn = entry & PAGEMAP_PFN_MASK;
        if (!(entry & PAGEMAP_PRESENT) || pfn == 0) {
            /* PFNs read as 0 without CAP_SYS_ADMIN */
            nvme_log(NVME_LOG_ERROR,
                     "pagemap gives no physical address for hugepage %zu (needs root / "
                     "CAP_SYS_ADMIN)",
                     i);
            rc = -EPERM;
            break;
        }
        d->pages[i] = pfn * (uint64_t)host_page;
    }
    close(fd);
    return rc;
}

int nvme_dma_alloc_in(struct nvme_dma_domain *dom, size_t size, struct nvme_dma **out)
{
    *out = NULL;
    if (size == 0)
        return -EINVAL;
    struct nvme_dma *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->dom = dom;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (dom->kind == NVME_DMA_PAGEMAP) {
        d->size = round_up(size, NVME_HUGEPAGE_SIZE);
        d->page_shift = NVME_HUGEPAGE_SHIFT;
        flags |= MAP_HUGETLB | MAP_POPULATE | MAP_LOCKED;
    } else {
        d->size = round_up(size, NVME_HOST_PAGE_SIZE);
        d->page_shift = NVME_HOST_PAGE_SHIFT;
        if (dom->kind == NVME_DMA_VFIO)
            flags |= MAP_POPULATE;
    }
    if (d->size < size) { /* overflow */
        free(d);
        return -ENOMEM;
    }
    int memfd = -1;
    if (dom->kind == NVME_DMA_VFIO_USER) {
        /* shared memory the server can map: one memfd per object, closed once mapped on both sides */
        memfd = memfd_create("nvmelab-dma", MFD_CLOEXEC);
        if (memfd < 0 || ftruncate(memfd, (off_t)d->size) != 0) {
            int e = errno;
            if (memfd >= 0)
                close(memfd);
            free(d);
            return e == ENOMEM ? -ENOMEM : -e;
        }
        flags = MAP_SHARED | MAP_POPULATE;
    }
    void *p = mmap(NULL, d->size, PROT_READ | PROT_WRITE, flags, memfd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        if (memfd >= 0)
            close(memfd);
        if (dom->kind == NVME_DMA_PAGEMAP)
            nvme_log(NVME_LOG_ERROR,
                     "no free 2 MiB hugepages for %zu bytes of DMA memory (%s); reserve some "
                     "with `nvmelab hugepages N`",
                     d->size, strerror(e));
        free(d);
        return e == ENOMEM || e == EAGAIN ? -ENOMEM : -e;
    }
    d->vaddr = p;
    int rc = 0;
    switch (dom->kind) {
    case NVME_DMA_IDENTITY:
        d->iova = (uint64_t)(uintptr_t)p;
        if (dom->iommu_map)
            rc = dom->iommu_map(dom->iommu_ctx, p, d->size);
        break;
    case NVME_DMA_PAGEMAP:
        if (mlock(p, d->size) != 0)
            rc = -errno;
        else
            rc = pagemap_lookup(d);
        break;
    case NVME_DMA_VFIO: {
        pthread_mutex_lock(&dom->lock);
        d->iova = dom->next_iova;
        dom->next_iova += d->size;
        pthread_mutex_unlock(&dom->lock);
        struct vfio_iommu_type1_dma_map map = {
            .argsz = sizeof(map),
            .flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
            .vaddr = (uint64_t)(uintptr_t)p,
            .iova = d->iova,
            .size = d->size,
        };
        if (ioctl(dom->vfio_container_fd, VFIO_IOMMU_MAP_DMA, &map) != 0) {
            rc = -errno;
            nvme_log(NVME_LOG_ERROR, "VFIO map of %zu bytes at iova 0x%llx failed: %s", d->size,
                     (unsigned long long)d->iova, strerror(errno));
        }
        break;
    }
    case NVME_DMA_VFIO_USER:
        pthread_mutex_lock(&dom->lock);
        d->iova = dom->next_iova;
        dom->next_iova += d->size;
        pthread_mutex_unlock(&dom->lock);
        rc = dom->fd_map ? dom->fd_map(dom->fd_ctx, memfd, d->iova, d->size) : -ENODEV;
        close(memfd); /* the mapping and the server's copy keep the memory */
        break;
    }
    if (rc) {
        if (dom->kind == NVME_DMA_PAGEMAP)
            munlock(p, d->size);
        munmap(p, d->size);
        free(d->pages);
        free(d);
        return rc;
    }
    pthread_mutex_lock(&dom->lock);
    d->next = dom->head;
    if (dom->head)
        dom->head->prev = d;
    dom->head = d;
    pthread_mutex_unlock(&dom->lock);
    *out = d;
    return 0;
}

struct nvme_dma *nvme_dma_find(struct nvme_dma_domain *dom, const void *p, size_t len)
{
    pthread_mutex_lock(&dom->lock);
    struct nvme_dma *d = dom->head;
    while (d && !nvme_dma_contains(d, p, len))
        d = d->next;
    pthread_mutex_unlock(&dom->lock);
    return d;
}

/* ---- public API ---- */

int nvme_dma_alloc(struct nvme_target *t, size_t size, struct nvme_dma **out)
{
    if (!t || !out)
        return -EINVAL;
    int rc = nvme_dma_alloc_in(&t->dma, size, out);
    if (rc == 0)
        (*out)->data = true;
    return rc;
}

void nvme_dma_mark_internal(struct nvme_dma *d)
{
    if (d)
        d->data = false;
}

/* [bus, bus + len) inside [base, base + size), without overflow */
static bool bus_inside(uint64_t bus, uint64_t len, uint64_t base, uint64_t size)
{
    return bus >= base && bus - base < size && len <= size - (bus - base);
}

struct nvme_dma *nvme_dma_find_bus_locked(struct nvme_dma_domain *dom, uint64_t bus, uint64_t len, size_t *off)
{
    for (struct nvme_dma *d = dom->head; d; d = d->next) {
        if (!d->pages) {
            if (bus_inside(bus, len, d->iova, d->size)) {
                *off = (size_t)(bus - d->iova);
                return d;
            }
            continue;
        }
        const uint64_t page = (uint64_t)1 << d->page_shift;
        for (size_t i = 0; i < d->size >> d->page_shift; i++)
            if (bus_inside(bus, len, d->pages[i], page)) {
                *off = (i << d->page_shift) + (size_t)(bus - d->pages[i]);
                return d;
            }
    }
    return NULL;
}

/* Qpairs cache the last DMA object a buffer was found in; a freed object must not stay cached. */
static void forget_cached(struct nvme_dma *d)
{
    struct nvme_target *t = d->dom->target;
    if (!t || !t->ctrls)
        return;
    for (unsigned i = 0; i < t->nctrl; i++) {
        struct nvme_ctrl *c = t->ctrls[i];
        if (!c)
            continue;
        pthread_mutex_lock(&c->q_lock);
        for (struct nvme_qpair *q = c->qpairs; q; q = q->next)
            if (q->dma_cache == d)
                q->dma_cache = NULL;
        if (c->admin.dma_cache == d)
            c->admin.dma_cache = NULL;
        pthread_mutex_unlock(&c->q_lock);
    }
}

void nvme_dma_free(struct nvme_dma *d)
{
    if (!d)
        return;
    forget_cached(d);
    struct nvme_dma_domain *dom = d->dom;
    pthread_mutex_lock(&dom->lock);
    if (d->prev)
        d->prev->next = d->next;
    else
        dom->head = d->next;
    if (d->next)
        d->next->prev = d->prev;
    pthread_mutex_unlock(&dom->lock);
    dma_release(d);
}

void *nvme_dma_vaddr(const struct nvme_dma *d)
{
    return d->vaddr;
}

size_t nvme_dma_size(const struct nvme_dma *d)
{
    return d->size;
}

uint64_t nvme_dma_iova(const struct nvme_dma *d, const void *vaddr)
{
    if (!nvme_dma_contains(d, vaddr, 0) || (const uint8_t *)vaddr == d->vaddr + d->size)
        return UINT64_MAX;
    return nvme_dma_iova_at(d, (size_t)((const uint8_t *)vaddr - d->vaddr));
}
