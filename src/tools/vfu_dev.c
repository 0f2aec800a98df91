/* SPDX-License-Identifier: BSD-3-Clause */
/* vfu_dev.c — one served controller: every vfio-user command a client may send, checked and answered
 * (vfu_server.h), and the receive/handle/reply loop on one connection. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvme/bar.h"
#include "nvme/emu/emu.h"
#include "nvme/spec.h"
#include "tools/vfu_server.h"

#define VFU_REG_END     NVME_REG_DBS /* registers below, doorbells from here on */
#define VFU_PAGE_MASK   ((uint64_t)VFU_PAGE_SIZE - 1)
#define VFU_JSON_REPLY  "{\"capabilities\":{\"max_msg_fds\":%u,\"max_data_xfer_size\":%u,\"pgsizes\":%u}}"
#define VFU_BAR0_CAPLEN (sizeof(struct vfu_cap_sparse) + sizeof(struct vfu_sparse_area))
#define VFU_MSIX_VCTRL  12u /* Vector Control's offset in a table entry */

/* A DMA region of the client: mapped at VA == IOVA when possible (an identity window), else wherever mmap put it
 * (a translated window, iova -> va; the IOVA rule in vfu_server.h), registered in the controller's own IOMMU
 * domain (nvme_emu_ctrl_dma_private: each client has its own IOVA space, as each vfio container has). */
struct vfu_dma {
    uint64_t iova, size;
    void *va; /* where it is mapped here ((void *)iova: identity window); NULL: no fd, not mapped, no window */
};

struct vfu_dev {
    struct nvme_emu_set *set;
    unsigned ctrl;
    const struct nvme_bar *bar;
    int bar_fd;                        /* the emulator's BAR memfd, owned by the set; -1: no mmap area */
    uint64_t bar_size;                 /* region 0: the emulator's BAR and the MSI-X table and PBA, a power of two */
    uint64_t msix_off;                 /* BAR0 offset of the MSI-X table (the emulator's BAR rounded up to a page) */
    uint8_t msix[VFU_MSIX_TABLE_SIZE]; /* MSI-X table as the client wrote it (not consulted: vfu_irqs masks) */
    struct vfu_irqs irqs;              /* eventfds of INTx and the MSI-X vectors (vfu_irq.c) */
    bool negotiated;
    struct vfu_caps caps;
    struct vfu_pci_cfg cfg;
    struct vfu_dma *dma[VFU_MAX_DMA_MAPS]; /* the regions this client holds */
    unsigned ndma;
    uint8_t *rbuf; /* reply, VFU_MAX_MSG */
    uint8_t *ibuf; /* received message (vfu_dev_serve), VFU_MAX_MSG */
    int reply_fds[1];
};

static uint64_t pow2_ceil(uint64_t v)
{
    uint64_t p = VFU_PAGE_SIZE;
    while (p < v)
        p <<= 1;
    return p;
}

/* MSI-X table at reset: addresses and data 0, every vector masked (Vector Control bit 0) */
static void msix_reset(struct vfu_dev *d)
{
    memset(d->msix, 0, sizeof(d->msix));
    for (uint32_t v = 0; v < VFU_MSIX_VECTORS; v++)
        d->msix[v * VFU_MSIX_ENTRY + VFU_MSIX_VCTRL] = 1;
}

/* The emulator's interrupt hook (its service thread): completions were posted to a CQ of vector iv. */
static void dev_irq_hook(void *ctx, unsigned ctrl, uint16_t iv)
{
    (void)ctrl;
    vfu_irqs_raise(&((struct vfu_dev *)ctx)->irqs, iv);
}

int vfu_dev_open(struct nvme_emu_set *set, unsigned ctrl, struct vfu_dev **out)
{
    const struct nvme_bar *bar = nvme_emu_set_bar(set, ctrl);
    if (!bar || !out)
        return -EINVAL;
    struct vfu_dev *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->rbuf = malloc(VFU_MAX_MSG);
    d->ibuf = malloc(VFU_MAX_MSG);
    if (!d->rbuf || !d->ibuf) {
        free(d->rbuf);
        free(d->ibuf);
        free(d);
        return -ENOMEM;
    }
    d->set = set;
    d->ctrl = ctrl;
    d->bar = bar;
    d->bar_fd = nvme_emu_set_bar_fd(set, ctrl);
    d->msix_off = (bar->size + VFU_PAGE_MASK) & ~VFU_PAGE_MASK;
    d->bar_size = pow2_ceil(d->msix_off + VFU_MSIX_TABLE_SIZE + VFU_MSIX_PBA_SIZE);
    int r = nvme_emu_ctrl_set_vectors(set, ctrl, VFU_MSIX_VECTORS);
    if (!r) /* the client's IOVA space is its own (the IOVA rule) */
        r = nvme_emu_ctrl_dma_private(set, ctrl);
    if (r) {
        free(d->rbuf);
        free(d->ibuf);
        free(d);
        return r;
    }
    msix_reset(d);
    vfu_irqs_init(&d->irqs);
    vfu_pci_cfg_init(&d->cfg, d->bar_size, d->msix_off, NVME_EMU_VID, NVME_EMU_VID);
    nvme_emu_set_irq_hook(set, ctrl, dev_irq_hook, d);
    *out = d;
    return 0;
}

static void dma_drop(struct vfu_dev *d, unsigned i)
{
    struct vfu_dma *m = d->dma[i];
    d->dma[i] = d->dma[--d->ndma];
    /* the emulator's unmap waits until no command can see the window; only then is the memory let go. A window
     * the emulator would not remove stays mapped: the controller may still reach it. */
    if (m->va && nvme_emu_ctrl_dma_unmap_at(d->set, d->ctrl, m->iova, m->size) == 0)
        munmap(m->va, m->size);
    free(m);
}

void vfu_dev_disconnect(struct vfu_dev *d)
{
    nvme_emu_ctrl_reset(d->set, d->ctrl); /* no queue left: nothing of this client is reached any more */
    vfu_irqs_reset(&d->irqs);             /* its eventfds closed: nothing is signalled to a client gone */
    while (d->ndma)
        dma_drop(d, d->ndma - 1);
    d->negotiated = false;
    msix_reset(d);
    vfu_pci_cfg_init(&d->cfg, d->bar_size, d->msix_off, NVME_EMU_VID, NVME_EMU_VID);
}

void vfu_dev_close(struct vfu_dev *d)
{
    if (!d)
        return;
    vfu_dev_disconnect(d);
    nvme_emu_set_irq_hook(d->set, d->ctrl, NULL, NULL); /* once it returns, no call of the hook is running */
    vfu_irqs_destroy(&d->irqs);
    free(d->rbuf);
    free(d->ibuf);
    free(d);
}

unsigned vfu_dev_dma_count(const struct vfu_dev *d)
{
    return d ? d->ndma : 0;
}

/* ---------------------------------------------------------------- commands
 * Each returns 0 (reply payload of *rlen bytes written at p) or a positive errno for the error reply. */

static int cmd_version(struct vfu_dev *d, const uint8_t *pl, size_t plen, uint8_t *p, size_t *rlen)
{
    struct vfu_version v;
    if (plen < sizeof(v) || d->negotiated)
        return EINVAL;
    memcpy(&v, pl, sizeof(v));
    if (v.major != VFU_VERSION_MAJOR)
        return ENOTSUP;
    struct vfu_caps caps;
    if (vfu_json_caps((const char *)pl + sizeof(v), plen - sizeof(v), &caps))
        return EINVAL;
    d->caps = caps;
    d->negotiated = true;
    v.major = VFU_VERSION_MAJOR;
    v.minor = v.minor < VFU_VERSION_MINOR ? v.minor : VFU_VERSION_MINOR;
    memcpy(p, &v, sizeof(v));
    int n =
        snprintf((char *)p + sizeof(v), VFU_MAX_JSON, VFU_JSON_REPLY, VFU_MAX_FDS, VFU_MAX_DATA_XFER, VFU_PAGE_SIZE);
    *rlen = sizeof(v) + (size_t)n + 1; /* with its NUL */
    return 0;
}

/* Map the region: at VA == IOVA when that placement is possible, else anywhere (the IOVA rule, vfu_server.h).
 * MAP_FAILED with *err set when it cannot be mapped at all. */
static void *dma_place(const struct vfu_dma_map *m, int fd, int *err)
{
    const int prot = PROT_READ | PROT_WRITE;
    void *want = (void *)(uintptr_t)m->addr;
    if (m->addr >= VFU_MIN_IOVA) {
        void *va = mmap(want, m->size, prot, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, (off_t)m->offset);
        if (va == want)
            return va;
        if (va != MAP_FAILED) /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
            munmap(va, m->size);
        else if (errno == EACCES || errno == ENODEV) { /* the file cannot be mapped so, anywhere */
            *err = errno == EACCES ? EACCES : EINVAL;
            return MAP_FAILED;
        }
        /* EEXIST (taken here), ENOMEM (beyond the address space), EPERM (below mmap_min_addr): elsewhere */
    }
    void *va = mmap(NULL, m->size, prot, MAP_SHARED, fd, (off_t)m->offset);
    if (va == MAP_FAILED)
        *err = errno == EACCES ? EACCES : errno == ENOMEM ? ENOMEM : EINVAL;
    return va;
}

/* DMA_MAP of a region with its fd, after its checks: mapped here and registered. 0 or a positive errno. */
static int dma_map_fd(struct vfu_dev *d, const struct vfu_dma_map *m, int fd)
{
    for (unsigned i = 0; i < d->ndma; i++) /* a region without window overlapping is refused here */
        if (d->dma[i]->iova < m->addr + m->size && m->addr < d->dma[i]->iova + d->dma[i]->size)
            return EEXIST;
    struct vfu_dma *e = calloc(1, sizeof(*e));
    if (!e)
        return ENOMEM;
    int err = 0;
    void *va = dma_place(m, fd, &err);
    if (va == MAP_FAILED) {
        free(e);
        return err;
    }
    int r = nvme_emu_ctrl_dma_map_at(d->set, d->ctrl, m->addr, va, m->size); /* identity when va == iova */
    if (r) {
        munmap(va, m->size);
        free(e);
        return -r;
    }
    *e = (struct vfu_dma){.iova = m->addr, .size = m->size, .va = va};
    d->dma[d->ndma++] = e;
    return 0;
}

/* A region without fd: the controller would reach it only through DMA_READ/DMA_WRITE, which this server never
 * sends, so it gets no emulator window (a PRP into it: Data Transfer Error); kept so that its DMA_UNMAP succeeds. */
static int dma_map_unreachable(struct vfu_dev *d, const struct vfu_dma_map *m)
{
    for (unsigned i = 0; i < d->ndma; i++)
        if (d->dma[i]->iova < m->addr + m->size && m->addr < d->dma[i]->iova + d->dma[i]->size)
            return EEXIST;
    struct vfu_dma *e = calloc(1, sizeof(*e));
    if (!e)
        return ENOMEM;
    *e = (struct vfu_dma){.iova = m->addr, .size = m->size, .va = NULL};
    d->dma[d->ndma++] = e;
    return 0;
}

static int cmd_dma_map(struct vfu_dev *d, const uint8_t *pl, size_t plen, const int *fds, unsigned nfds)
{
    struct vfu_dma_map m;
    if (plen < sizeof(m))
        return EINVAL;
    memcpy(&m, pl, sizeof(m));
    if (m.argsz < sizeof(m) || m.argsz > plen || (m.flags & ~(VFU_DMA_F_READ | VFU_DMA_F_WRITE)))
        return EINVAL;
    if (nfds > 1)
        return EINVAL;
    if (!m.size || ((m.addr | m.size | m.offset) & VFU_PAGE_MASK) || m.addr + m.size < m.addr ||
        m.offset + m.size < m.offset || m.offset > (uint64_t)INT64_MAX - m.size)
        return EINVAL;
    if (d->ndma >= VFU_MAX_DMA_MAPS)
        return ENOSPC;
    if (!nfds) /* QEMU's memory that is no shared file (ROMs): accepted, never reachable (vfu_dma.va) */
        return dma_map_unreachable(d, &m);
    struct stat st;
    if (fstat(fds[0], &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < m.offset + m.size)
        return EINVAL; /* beyond the end of the file a touch would be SIGBUS */
    return dma_map_fd(d, &m, fds[0]);
}

static int cmd_dma_unmap(struct vfu_dev *d, const uint8_t *pl, size_t plen, uint8_t *p, size_t *rlen)
{
    struct vfu_dma_unmap u;
    if (plen < sizeof(u))
        return EINVAL;
    memcpy(&u, pl, sizeof(u));
    if (u.argsz < sizeof(u) || u.argsz > plen || (u.flags & ~(VFU_DMA_UNMAP_F_ALL | VFU_DMA_UNMAP_F_DIRTY_BITMAP)))
        return EINVAL;
    if (u.flags & VFU_DMA_UNMAP_F_DIRTY_BITMAP)
        return ENOTSUP;
    if (u.flags & VFU_DMA_UNMAP_F_ALL) {
        if (u.addr || u.size)
            return EINVAL;
        while (d->ndma)
            dma_drop(d, d->ndma - 1);
    } else {
        /* VFIO's rule: every region inside [addr, addr+size) goes; a region cut by an edge refuses it all */
        uint64_t end = u.addr + u.size;
        if (!u.size || end < u.addr)
            return EINVAL;
        unsigned inside = 0;
        for (unsigned i = 0; i < d->ndma; i++) {
            uint64_t b = d->dma[i]->iova, e = b + d->dma[i]->size;
            if (b >= u.addr && e <= end)
                inside++;
            else if (b < end && e > u.addr)
                return EINVAL;
        }
        if (!inside)
            return ENOENT;
        for (unsigned i = d->ndma; i-- > 0;)
            if (d->dma[i]->iova >= u.addr && d->dma[i]->iova + d->dma[i]->size <= end)
                dma_drop(d, i);
    }
    u.argsz = sizeof(u);
    memcpy(p, &u, sizeof(u));
    *rlen = sizeof(u);
    return 0;
}

static int cmd_device_info(const uint8_t *pl, size_t plen, uint8_t *p, size_t *rlen)
{
    struct vfu_device_info i;
    if (plen < sizeof(i))
        return EINVAL;
    memcpy(&i, pl, sizeof(i));
    if (i.argsz < sizeof(i))
        return EINVAL;
    i = (struct vfu_device_info){.argsz = sizeof(i),
                                 .flags = VFU_DEV_F_PCI | VFU_DEV_F_RESET,
                                 .num_regions = VFU_PCI_NUM_REGIONS,
                                 .num_irqs = VFU_PCI_NUM_IRQS};
    memcpy(p, &i, sizeof(i));
    *rlen = sizeof(i);
    return 0;
}

static int cmd_region_info(struct vfu_dev *d, const uint8_t *pl, size_t plen, uint8_t *p, size_t *rlen, unsigned *nfds)
{
    struct vfu_region_info ri;
    if (plen < sizeof(ri))
        return EINVAL;
    memcpy(&ri, pl, sizeof(ri));
    if (ri.argsz < sizeof(ri) || ri.index >= VFU_PCI_NUM_REGIONS)
        return EINVAL;
    uint32_t room = ri.argsz;
    struct vfu_region_info r = {.argsz = sizeof(r), .index = ri.index};
    *rlen = sizeof(r);
    if (ri.index == VFU_PCI_BAR0_REGION) {
        r.size = d->bar_size;
        r.flags = VFU_REGION_F_READ | VFU_REGION_F_WRITE;
        if (d->bar_fd >= 0) {
            r.flags |= VFU_REGION_F_MMAP | VFU_REGION_F_CAPS;
            r.argsz = (uint32_t)(sizeof(r) + VFU_BAR0_CAPLEN);
            r.cap_offset = sizeof(r); /* also when the caps do not fit: QEMU refuses CAPS with a smaller offset */
            if (room >= r.argsz) {
                /* one sparse area: the doorbells, at the same offset in the BAR memfd (region offset 0) */
                struct vfu_cap_sparse cap = {
                    .hdr = {.id = VFU_CAP_SPARSE_MMAP, .version = VFU_CAP_SPARSE_MMAP_VERSION, .next = 0},
                    .nr_areas = 1};
                struct vfu_sparse_area a = {.offset = VFU_REG_END, .size = d->bar->size - VFU_REG_END};
                memcpy(p + sizeof(r), &cap, sizeof(cap));
                memcpy(p + sizeof(r) + sizeof(cap), &a, sizeof(a));
                *rlen = r.argsz;
                d->reply_fds[0] = d->bar_fd;
                *nfds = 1;
            }
        }
    } else if (ri.index == VFU_PCI_CONFIG_REGION) {
        r.size = VFU_CFG_SIZE;
        r.flags = VFU_REGION_F_READ | VFU_REGION_F_WRITE;
    }
    memcpy(p, &r, sizeof(r));
    return 0;
}

/* Vectors per IRQ index: INTx 1, MSI-X the table's, no MSI capability, and one error (AER) vector, so that QEMU
 * turns its error recovery on (the emulated function never reports an error: its eventfd is never signalled) */
static uint32_t irq_count(uint32_t index)
{
    return index == VFU_PCI_INTX_IRQ || index == VFU_PCI_ERR_IRQ ? 1u
           : index == VFU_PCI_MSIX_IRQ                           ? VFU_MSIX_VECTORS
                                                                 : 0u;
}

static int cmd_irq_info(const uint8_t *pl, size_t plen, uint8_t *p, size_t *rlen)
{
    struct vfu_irq_info i;
    if (plen < sizeof(i))
        return EINVAL;
    memcpy(&i, pl, sizeof(i));
    if (i.argsz < sizeof(i) || i.index >= VFU_PCI_NUM_IRQS)
        return EINVAL;
    i.argsz = sizeof(i);
    i.count = irq_count(i.index);
    /* MSI-X is resizable: QEMU then sets one vector's eventfd at a time instead of turning the index off and on
     * (which would drop the interrupts of the moment between) */
    i.flags = VFU_IRQ_INFO_F_EVENTFD | VFU_IRQ_INFO_F_MASKABLE |
              (i.index == VFU_PCI_INTX_IRQ ? VFU_IRQ_INFO_F_AUTOMASKED : 0u);
    memcpy(p, &i, sizeof(i));
    *rlen = sizeof(i);
    return 0;
}

static int cmd_set_irqs(struct vfu_dev *d, const uint8_t *pl, size_t plen, int *fds, unsigned nfds)
{
    struct vfu_irq_set s;
    if (plen < sizeof(s))
        return EINVAL;
    memcpy(&s, pl, sizeof(s));
    uint32_t data = s.flags & VFU_IRQ_SET_DATA_TYPE_MASK, action = s.flags & VFU_IRQ_SET_ACTION_TYPE_MASK;
    if (s.argsz < sizeof(s) || s.argsz > plen || s.index >= VFU_PCI_NUM_IRQS ||
        (s.flags & ~(VFU_IRQ_SET_DATA_TYPE_MASK | VFU_IRQ_SET_ACTION_TYPE_MASK)) || __builtin_popcount(data) != 1 ||
        __builtin_popcount(action) != 1)
        return EINVAL;
    if (s.count == 0) { /* VFIO: DATA_NONE | ACTION_TRIGGER with count 0 turns the index off */
        if (data != VFU_IRQ_SET_DATA_NONE || action != VFU_IRQ_SET_ACTION_TRIGGER || nfds)
            return EINVAL;
        return s.index == VFU_PCI_INTX_IRQ || s.index == VFU_PCI_MSIX_IRQ ? vfu_irqs_set(&d->irqs, &s, NULL, fds, 0)
                                                                          : 0;
    }
    uint32_t n = irq_count(s.index);
    if (s.start >= n || s.count > n - s.start)
        return EINVAL;
    /* DATA_EVENTFD: one fd per vector, or none at all (QEMU sends unset vectors, its -1s, without fds) */
    if ((data != VFU_IRQ_SET_DATA_EVENTFD && nfds) || (nfds && nfds != s.count))
        return EINVAL;
    if (data == VFU_IRQ_SET_DATA_BOOL && s.argsz - sizeof(s) < s.count)
        return EINVAL;
    if (s.index == VFU_PCI_ERR_IRQ) /* accepted, never signalled: its eventfd is closed with the message */
        return 0;
    return vfu_irqs_set(&d->irqs, &s, pl + sizeof(s), fds, nfds);
}

/* A BAR0 access of width 4 or 8 at an aligned offset (checked by the caller). */
static uint64_t bar_load(struct vfu_dev *d, uint64_t off, uint32_t width)
{
    if (off >= d->msix_off && off + width <= d->msix_off + VFU_MSIX_TABLE_SIZE) {
        uint64_t v = 0;
        memcpy(&v, d->msix + (off - d->msix_off), width);
        return v;
    }
    const uint64_t pba = d->msix_off + VFU_MSIX_TABLE_SIZE;
    if (off >= pba && off + width <= pba + VFU_MSIX_PBA_SIZE) { /* the pending bits of vfu_irq.c */
        uint64_t bits = vfu_irqs_pba(&d->irqs, (uint32_t)((off - pba) * 8u));
        return width == sizeof(uint64_t) ? bits : (uint32_t)bits;
    }
    if (off + width > d->bar->size) /* inside the power-of-two region, beyond the emulator's BAR */
        return 0;
    volatile uint8_t *b = d->bar->base + off;
    if (width == sizeof(uint64_t))
        return __atomic_load_n((volatile uint64_t *)(void *)b, __ATOMIC_ACQUIRE);
    return __atomic_load_n((volatile uint32_t *)(void *)b, __ATOMIC_ACQUIRE);
}

static void bar_store(struct vfu_dev *d, uint64_t off, uint64_t val, uint32_t width)
{
    if (off >= d->msix_off && off + width <= d->msix_off + VFU_MSIX_TABLE_SIZE) {
        memcpy(d->msix + (off - d->msix_off), &val, width);
        return;
    }
    if (off + width > d->bar->size)
        return;
    volatile uint8_t *b = d->bar->base + off;
    /* as the driver does in-process (mmio.h): dword stores, low first, then one ops->write */
    __atomic_store_n((volatile uint32_t *)(void *)b, (uint32_t)val, __ATOMIC_RELEASE);
    if (width == sizeof(uint64_t))
        __atomic_store_n((volatile uint32_t *)(void *)(b + sizeof(uint32_t)), (uint32_t)(val >> 32), __ATOMIC_RELEASE);
    if (d->bar->ops && d->bar->ops->write)
        d->bar->ops->write(d->bar->ctx, (uint32_t)off, val, width);
}

static int cmd_region_rw(struct vfu_dev *d, bool write, const uint8_t *pl, size_t plen, uint8_t *p, size_t *rlen)
{
    struct vfu_region_access a;
    if (plen < sizeof(a))
        return EINVAL;
    memcpy(&a, pl, sizeof(a));
    if (a.count > VFU_MAX_DATA_XFER)
        return EINVAL;
    if (write ? plen - sizeof(a) != a.count : plen != sizeof(a))
        return EINVAL;
    const uint8_t *data = pl + sizeof(a);
    uint8_t *out = p + sizeof(a);
    if (a.region == VFU_PCI_CONFIG_REGION) {
        if (a.offset > VFU_CFG_SIZE || a.count > VFU_CFG_SIZE - a.offset)
            return EINVAL;
        if (write)
            vfu_pci_cfg_write(&d->cfg, (uint32_t)a.offset, data, a.count);
        else
            vfu_pci_cfg_read(&d->cfg, (uint32_t)a.offset, out, a.count);
    } else if (a.region == VFU_PCI_BAR0_REGION) {
        if (a.offset > d->bar_size || a.count > d->bar_size - a.offset ||
            (a.count != sizeof(uint32_t) && a.count != sizeof(uint64_t)) || (a.offset & (a.count - 1)))
            return EINVAL;
        if (write) {
            uint64_t v = 0;
            memcpy(&v, data, a.count);
            bar_store(d, a.offset, v, a.count);
        } else {
            uint64_t v = bar_load(d, a.offset, a.count);
            memcpy(out, &v, a.count);
        }
    } else {
        return EINVAL;
    }
    memcpy(p, &a, sizeof(a));
    *rlen = sizeof(a) + (write ? 0 : a.count);
    return 0;
}

/* ---------------------------------------------------------------- one message */
int vfu_dev_handle(struct vfu_dev *d, const void *msg, size_t len, int *fds, unsigned nfds, struct vfu_reply *out)
{
    memset(out, 0, sizeof(*out));
    int rc = 0;
    struct vfu_hdr h;
    if (!msg || len < VFU_HDR_SIZE || len > VFU_MAX_MSG) {
        rc = -EPROTO;
        goto done;
    }
    memcpy(&h, msg, sizeof(h));
    if (h.size != len || (h.flags & VFU_F_TYPE_MASK) != VFU_F_TYPE_COMMAND) {
        rc = -EPROTO; /* the stream is not what it claims: the specification lets the server close it */
        goto done;
    }
    const uint8_t *pl = (const uint8_t *)msg + VFU_HDR_SIZE;
    size_t plen = len - VFU_HDR_SIZE, rlen = 0;
    uint8_t *p = d->rbuf + VFU_HDR_SIZE;
    unsigned rfds = 0;
    int err;
    if (!d->negotiated && h.cmd != VFU_CMD_VERSION) {
        err = EINVAL; /* VERSION comes first */
    } else {
        switch (h.cmd) {
        case VFU_CMD_VERSION:
            err = cmd_version(d, pl, plen, p, &rlen);
            break;
        case VFU_CMD_DMA_MAP:
            err = cmd_dma_map(d, pl, plen, fds, nfds);
            break;
        case VFU_CMD_DMA_UNMAP:
            err = cmd_dma_unmap(d, pl, plen, p, &rlen);
            break;
        case VFU_CMD_DEVICE_GET_INFO:
            err = cmd_device_info(pl, plen, p, &rlen);
            break;
        case VFU_CMD_DEVICE_GET_REGION_INFO:
            err = cmd_region_info(d, pl, plen, p, &rlen, &rfds);
            break;
        case VFU_CMD_DEVICE_GET_IRQ_INFO:
            err = cmd_irq_info(pl, plen, p, &rlen);
            break;
        case VFU_CMD_DEVICE_SET_IRQS:
            err = cmd_set_irqs(d, pl, plen, fds, nfds);
            break;
        case VFU_CMD_REGION_READ:
            err = cmd_region_rw(d, false, pl, plen, p, &rlen);
            break;
        case VFU_CMD_REGION_WRITE:
            err = cmd_region_rw(d, true, pl, plen, p, &rlen);
            break;
        case VFU_CMD_DEVICE_RESET:
            err = plen ? EINVAL : -nvme_emu_ctrl_reset(d->set, d->ctrl); /* DMA maps are kept */
            if (!err)
                vfu_irqs_reset(&d->irqs); /* eventfds closed (QEMU turns interrupts off before, on after) */
            break;
        default:
            err = ENOTSUP;
            break; /* unknown, or a command this server does not implement */
        }
    }
    if (h.flags & VFU_F_NO_REPLY)
        goto done;
    if (err) {
        rlen = 0;
        rfds = 0;
    }
    vfu_hdr_init((struct vfu_hdr *)(void *)d->rbuf, h.msg_id, h.cmd, (uint32_t)(VFU_HDR_SIZE + rlen),
                 VFU_F_TYPE_REPLY | (err ? VFU_F_ERROR : 0u), (uint32_t)err);
    out->msg = d->rbuf;
    out->len = VFU_HDR_SIZE + rlen;
    out->fds = d->reply_fds;
    out->nfds = rfds;
done:
    if (fds)
        vfu_close_fds(fds, nfds);
    return rc;
}

/* ---------------------------------------------------------------- one connection */
int vfu_dev_serve(struct vfu_dev *d, int conn, int timeout_ms, const atomic_bool *stop)
{
    int rc = 0;
    while (!(stop && atomic_load(stop))) {
        struct pollfd pf = {.fd = conn, .events = POLLIN};
        int n = poll(&pf, 1, VFU_POLL_MS);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (n == 0)
            continue;
        size_t len = 0;
        int fds[VFU_MAX_FDS];
        unsigned nfds = VFU_MAX_FDS;
        int r = vfu_msg_recv(conn, d->ibuf, VFU_MAX_MSG, &len, fds, &nfds, timeout_ms);
        if (r) {
            rc = r == -ECONNRESET ? 0 : r;
            break;
        }
        struct vfu_reply rep;
        r = vfu_dev_handle(d, d->ibuf, len, fds, nfds, &rep);
        if (!r && rep.len)
            r = vfu_msg_send(conn, rep.msg, rep.len, rep.fds, rep.nfds, timeout_ms);
        if (r) {
            rc = r == -ECONNRESET ? 0 : r;
            break;
        }
    }
    vfu_dev_disconnect(d);
    return rc;
}
