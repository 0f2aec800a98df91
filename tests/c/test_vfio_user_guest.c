/* SPDX-License-Identifier: BSD-3-Clause */
/* test_vfio_user_guest.c — the vfio-user server (src/tools/vfu_server.h) as QEMU's vfio-user-pci drives it for a
 * guest's kernel driver, with a raw client over the real UNIX socket: DMA regions at guest-physical IOVAs the
 * server cannot take as its own addresses (0, and a range already mapped in its process), registered as
 * translated windows, carrying the admin and I/O queues, Identify and a write/read through a PRP list with
 * the data checked; then interrupts: an eventfd per MSI-X vector signalled by the admin CQ's completions
 * (vector 0) and by an I/O CQ with IEN and IV 1, not by a CQ with IEN clear; mask/unmask and an unset vector
 * keeping the interrupt pending (the PBA shows it) until it can be delivered; INTx automasked until unmask. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "nvme/emu/emu.h"
#include "nvme/spec.h"
#include "nvme/vfio_user.h"
#include "tools/vfu_server.h"

#define T_TIMEOUT_MS 2000
#define T_QUIET_MS   50           /* how long an interrupt that must not come is waited for */
#define T_MEM_SIZE   (256u << 10) /* guest memory at IOVA 0 */
#define T_ASQ        0x1000u      /* guest-physical addresses (IOVAs) in it */
#define T_ACQ        0x2000u
#define T_ID         0x3000u
#define T_IOSQ       0x4000u
#define T_IOCQ       0x5000u
#define T_IOSQ2      0x6000u
#define T_IOCQ2      0x7000u
#define T_LIST       0x8000u  /* a PRP list */
#define T_WBUF       0x10000u /* 16 KiB written */
#define T_RBUF       0x20000u /* and read back here */
#define T_XFER       (16u << 10)
#define T_PAGE       4096u
#define T_QENTRIES   16u
#define T_LBA        512u

static struct vfu_server *g_srv;
static char g_dir[64];
static uint16_t g_id;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One command and its reply: the reply's errno (0 = success) or a negative transport error. */
static int xact(int fd, uint16_t cmd, const void *pl, size_t plen, const int *fds, unsigned nfds, void *rep,
                size_t rep_cap, int *rfd)
{
    static uint8_t msg[VFU_HDR_SIZE + 512], in[VFU_HDR_SIZE + 512];
    if (plen > sizeof(msg) - VFU_HDR_SIZE)
        return -EMSGSIZE;
    struct vfu_hdr h;
    uint16_t id = ++g_id;
    vfu_hdr_init(&h, id, cmd, (uint32_t)(VFU_HDR_SIZE + plen), VFU_F_TYPE_COMMAND, 0);
    memcpy(msg, &h, sizeof(h));
    if (plen)
        memcpy(msg + VFU_HDR_SIZE, pl, plen);
    int r = vfu_msg_send(fd, msg, VFU_HDR_SIZE + plen, fds, nfds, T_TIMEOUT_MS);
    if (r)
        return r;
    size_t len = 0;
    int got[VFU_MAX_FDS];
    unsigned ngot = VFU_MAX_FDS;
    if ((r = vfu_msg_recv(fd, in, sizeof(in), &len, got, &ngot, T_TIMEOUT_MS)))
        return r;
    if (rfd && ngot) {
        *rfd = got[0];
        got[0] = -1;
    }
    vfu_close_fds(got, ngot);
    memcpy(&h, in, sizeof(h));
    if (h.msg_id != id || h.cmd != cmd || (h.flags & VFU_F_TYPE_MASK) != VFU_F_TYPE_REPLY)
        return -EPROTO;
    if (rep)
        memcpy(rep, in + VFU_HDR_SIZE, len - VFU_HDR_SIZE < rep_cap ? len - VFU_HDR_SIZE : rep_cap);
    return (h.flags & VFU_F_ERROR) ? (int)h.error : 0;
}

static uint64_t bar_rd(int fd, uint64_t off, uint32_t width)
{
    struct vfu_region_access a = {.offset = off, .region = VFU_PCI_BAR0_REGION, .count = width};
    uint8_t rep[sizeof(a) + 8];
    uint64_t v = 0;
    if (xact(fd, VFU_CMD_REGION_READ, &a, sizeof(a), NULL, 0, rep, sizeof(rep), NULL))
        return ~0ull;
    memcpy(&v, rep + sizeof(a), width);
    return v;
}

static int bar_wr(int fd, uint64_t off, uint64_t v, uint32_t width)
{
    uint8_t b[sizeof(struct vfu_region_access) + 8];
    struct vfu_region_access a = {.offset = off, .region = VFU_PCI_BAR0_REGION, .count = width};
    memcpy(b, &a, sizeof(a));
    memcpy(b + sizeof(a), &v, width);
    return xact(fd, VFU_CMD_REGION_WRITE, b, sizeof(a) + width, NULL, 0, NULL, 0, NULL);
}

static int dma_map(int fd, int memfd, uint64_t iova, uint64_t size)
{
    struct vfu_dma_map m = {
        .argsz = sizeof(m), .flags = VFU_DMA_F_READ | VFU_DMA_F_WRITE, .offset = 0, .addr = iova, .size = size};
    return xact(fd, VFU_CMD_DMA_MAP, &m, sizeof(m), &memfd, 1, NULL, 0, NULL);
}

static int dma_unmap(int fd, uint64_t iova, uint64_t size)
{
    struct vfu_dma_unmap u = {.argsz = sizeof(u), .addr = iova, .size = size};
    return xact(fd, VFU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0, NULL, 0, NULL);
}

/* SET_IRQS: flags, index, vectors [start, start+count), fds (nfds of them) or bools (data). */
static int set_irqs(int fd, uint32_t flags, uint32_t index, uint32_t start, uint32_t count, const int *fds,
                    unsigned nfds, const uint8_t *bools)
{
    uint8_t b[sizeof(struct vfu_irq_set) + 16];
    struct vfu_irq_set s = {.argsz = sizeof(s), .flags = flags, .index = index, .start = start, .count = count};
    if (bools) {
        s.argsz += count;
        memcpy(b + sizeof(s), bools, count);
    }
    memcpy(b, &s, sizeof(s));
    return xact(fd, VFU_CMD_DEVICE_SET_IRQS, b, s.argsz, fds, nfds, NULL, 0, NULL);
}

/* 1 when efd was signalled within ms (its count read and cleared), 0 when not. */
static int fired(int efd, int ms)
{
    struct pollfd p = {.fd = efd, .events = POLLIN};
    if (poll(&p, 1, ms) != 1)
        return 0;
    uint64_t v;
    return read(efd, &v, sizeof(v)) == (ssize_t)sizeof(v) && v ? 1 : 0;
}

/* The guest: its memory (mem, at IOVA 0) and the doorbell page; counters of the commands of each queue. */
struct guest {
    int fd, memfd;
    uint8_t *mem;
    volatile uint32_t *db;
    size_t dblen;
    unsigned n[3];
};

/* Command into queue qid (SQ/CQ at IOVAs sq/cq), its completion awaited: status (SCT << 8 | SC), or -1. */
static int cmd(struct guest *g, unsigned qid, uint32_t sq, uint32_t cq, struct nvme_sqe c)
{
    unsigned n = g->n[qid]++, slot = n % T_QENTRIES;
    struct nvme_sqe *s = (struct nvme_sqe *)(void *)(g->mem + sq);
    volatile struct nvme_cqe *e = (volatile struct nvme_cqe *)(void *)(g->mem + cq);
    c.cid = (uint16_t)(100 + n);
    s[slot] = c;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    g->db[2 * qid] = (slot + 1) % T_QENTRIES;
    uint8_t phase = (uint8_t)(((n / T_QENTRIES) + 1) & 1);
    long long end = now_ms() + T_TIMEOUT_MS;
    while (nvme_cqe_phase(e[slot].status) != phase)
        if (now_ms() > end)
            return -1;
    g->db[2 * qid + 1] = (slot + 1) % T_QENTRIES;
    if (e[slot].cid != 100 + n)
        return -2;
    return (int)((nvme_cqe_sct(e[slot].status) << 8) | nvme_cqe_sc(e[slot].status));
}

static int admin(struct guest *g, struct nvme_sqe c)
{
    return cmd(g, 0, T_ASQ, T_ACQ, c);
}

/* Connect, negotiate, map guest memory at IOVA 0, enable the controller with its admin queues in it, and
 * mmap the doorbell page. 0 or the failing step. */
static int guest_up(struct guest *g)
{
    memset(g, 0, sizeof(*g));
    g->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", vfu_server_path(g_srv, 0));
    if (g->fd < 0 || connect(g->fd, (struct sockaddr *)&a, sizeof(a)))
        return -1;
    struct vfu_version v = {.major = VFU_VERSION_MAJOR, .minor = VFU_VERSION_MINOR};
    if (xact(g->fd, VFU_CMD_VERSION, &v, sizeof(v), NULL, 0, NULL, 0, NULL))
        return -2;
    g->memfd = memfd_create("t-guest-ram", MFD_CLOEXEC);
    if (g->memfd < 0 || ftruncate(g->memfd, T_MEM_SIZE))
        return -3;
    g->mem = mmap(NULL, T_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, g->memfd, 0);
    if (g->mem == MAP_FAILED || dma_map(g->fd, g->memfd, 0, T_MEM_SIZE))
        return -4;
    if (bar_wr(g->fd, NVME_REG_AQA, (T_QENTRIES - 1) | ((T_QENTRIES - 1) << 16), 4) ||
        bar_wr(g->fd, NVME_REG_ASQ, T_ASQ, 8) || bar_wr(g->fd, NVME_REG_ACQ, T_ACQ, 8) ||
        bar_wr(g->fd, NVME_REG_CC,
               NVME_CC_EN | (NVME_SQES_LOG2 << NVME_CC_IOSQES_SHIFT) | (NVME_CQES_LOG2 << NVME_CC_IOCQES_SHIFT), 4))
        return -5;
    long long end = now_ms() + T_TIMEOUT_MS;
    while (!(bar_rd(g->fd, NVME_REG_CSTS, 4) & NVME_CSTS_RDY))
        if (now_ms() > end)
            return -6;
    struct vfu_region_info ri = {.argsz = 64, .index = VFU_PCI_BAR0_REGION};
    uint8_t rep[64];
    int bfd = -1;
    if (xact(g->fd, VFU_CMD_DEVICE_GET_REGION_INFO, &ri, sizeof(ri), NULL, 0, rep, sizeof(rep), &bfd) || bfd < 0)
        return -7;
    struct vfu_sparse_area area;
    memcpy(&area, rep + sizeof(struct vfu_region_info) + sizeof(struct vfu_cap_sparse), sizeof(area));
    g->db = mmap(NULL, area.size, PROT_READ | PROT_WRITE, MAP_SHARED, bfd, (off_t)area.offset);
    close(bfd);
    if (g->db == MAP_FAILED)
        return -8;
    g->dblen = area.size;
    return 0;
}

static void guest_down(struct guest *g)
{
    close(g->fd);
    munmap((void *)g->db, g->dblen);
    munmap(g->mem, T_MEM_SIZE);
    close(g->memfd);
    long long end = now_ms() + T_TIMEOUT_MS;
    while (nvme_emu_dma_count(vfu_server_set(g_srv)) && now_ms() < end) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(nvme_emu_dma_count(vfu_server_set(g_srv)), 0); /* the client went: its windows went */
}

static struct nvme_sqe create_q(uint8_t opc, unsigned qid, uint32_t base, uint32_t cdw11)
{
    return (struct nvme_sqe){
        .opc = opc, .prp1 = base, .cdw10 = NVME_CREATE_Q_CDW10(qid, T_QENTRIES), .cdw11 = NVME_CREATE_Q_PC | cdw11};
}

/* Read or write T_XFER bytes at LBA 0 on queue 1: PRP1 the first page, PRP2 a list of the other three. */
static int rw(struct guest *g, uint8_t opc, uint32_t buf)
{
    uint64_t *list = (uint64_t *)(void *)(g->mem + T_LIST);
    for (unsigned i = 1; i < T_XFER / T_PAGE; i++)
        list[i - 1] = buf + i * T_PAGE;
    struct nvme_sqe c = {.opc = opc, .nsid = 1, .prp1 = buf, .prp2 = T_LIST, .cdw12 = T_XFER / T_LBA - 1};
    return cmd(g, 1, T_IOSQ, T_IOCQ, c);
}

/* ---------------------------------------------------------------- cases */
static void guest_physical_iovas(void)
{
    struct guest g;
    REQUIRE_EQ(guest_up(&g), 0);
    struct nvme_emu_set *set = vfu_server_set(g_srv);
    CHECK_EQ(nvme_emu_dma_count(set), 1);
    /* Identify Controller into guest memory */
    struct nvme_sqe id = {.opc = NVME_ADM_IDENTIFY, .prp1 = T_ID, .cdw10 = NVME_CNS_CTRL};
    CHECK_EQ(admin(&g, id), 0);
    CHECK_EQ(((struct nvme_id_ctrl *)(void *)(g.mem + T_ID))->vid, NVME_EMU_VID);
    /* an I/O queue pair, and 16 KiB written through a PRP list, read back elsewhere */
    CHECK_EQ(admin(&g, create_q(NVME_ADM_CREATE_CQ, 1, T_IOCQ, 0)), 0);
    CHECK_EQ(admin(&g, create_q(NVME_ADM_CREATE_SQ, 1, T_IOSQ, 1u << NVME_CREATE_SQ_CQID_SHIFT)), 0);
    for (unsigned i = 0; i < T_XFER; i++)
        g.mem[T_WBUF + i] = (uint8_t)(i * 7 + 3);
    memset(g.mem + T_RBUF, 0, T_XFER);
    CHECK_EQ(rw(&g, NVME_CMD_WRITE, T_WBUF), 0);
    CHECK_EQ(rw(&g, NVME_CMD_READ, T_RBUF), 0);
    CHECK(memcmp(g.mem + T_WBUF, g.mem + T_RBUF, T_XFER) == 0);
    /* a PRP outside every window: Data Transfer Error, nothing touched */
    struct nvme_sqe bad = {.opc = NVME_CMD_READ, .nsid = 1, .prp1 = T_MEM_SIZE, .cdw12 = 0};
    CHECK_EQ(cmd(&g, 1, T_IOSQ, T_IOCQ, bad), (NVME_SCT_GENERIC << 8) | NVME_SC_DATA_XFER_ERROR);
    /* a second region at IOVAs this process has mapped already (the guest's own view of its memory): mapped
     * elsewhere, translated; data lands in the right file */
    int memfd2 = memfd_create("t-guest-ram2", MFD_CLOEXEC);
    REQUIRE(memfd2 >= 0 && ftruncate(memfd2, T_XFER) == 0);
    uint8_t *m2 = mmap(NULL, T_XFER, PROT_READ | PROT_WRITE, MAP_SHARED, memfd2, 0);
    REQUIRE(m2 != MAP_FAILED);
    const uint64_t taken = (uintptr_t)g.mem; /* taken in the server's (this) process */
    CHECK_EQ(dma_map(g.fd, memfd2, taken, T_XFER), 0);
    CHECK_EQ(nvme_emu_dma_count(set), 2);
    struct nvme_sqe rd2 = {.opc = NVME_CMD_READ, .nsid = 1, .prp1 = taken, .cdw12 = T_PAGE / T_LBA - 1};
    CHECK_EQ(cmd(&g, 1, T_IOSQ, T_IOCQ, rd2), 0);
    CHECK(memcmp(m2, g.mem + T_WBUF, T_PAGE) == 0);
    CHECK_EQ(g.mem[T_WBUF], 3); /* the guest memory at the same address of this process untouched */
    /* the windows of the controller's IOMMU domain are disjoint in IOVAs; the set's own domain is apart */
    CHECK_EQ(nvme_emu_ctrl_dma_map_at(set, 0, T_PAGE, m2, T_PAGE), -EEXIST);
    CHECK_EQ(nvme_emu_dma_map_at(set, T_PAGE, m2, T_PAGE), 0);
    CHECK_EQ(nvme_emu_dma_count(set), 3);
    CHECK_EQ(nvme_emu_dma_unmap_at(set, T_PAGE, T_PAGE), 0);
    CHECK_EQ(dma_unmap(g.fd, taken, T_XFER), 0);
    CHECK_EQ(nvme_emu_dma_count(set), 1);
    CHECK_EQ(cmd(&g, 1, T_IOSQ, T_IOCQ, rd2), (NVME_SCT_GENERIC << 8) | NVME_SC_DATA_XFER_ERROR);
    munmap(m2, T_XFER);
    close(memfd2);
    guest_down(&g);
}

static void msix_eventfds(void)
{
    struct guest g;
    REQUIRE_EQ(guest_up(&g), 0);
    int efd[2] = {eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
    REQUIRE(efd[0] >= 0 && efd[1] >= 0);
    const uint32_t trig = VFU_IRQ_SET_ACTION_TRIGGER;
    CHECK_EQ(set_irqs(g.fd, VFU_IRQ_SET_DATA_EVENTFD | trig, VFU_PCI_MSIX_IRQ, 0, 2, efd, 2, NULL), 0);
    /* the admin CQ: vector 0 */
    struct nvme_sqe id = {.opc = NVME_ADM_IDENTIFY, .prp1 = T_ID, .cdw10 = NVME_CNS_CTRL};
    CHECK_EQ(admin(&g, id), 0);
    CHECK_EQ(fired(efd[0], T_TIMEOUT_MS), 1);
    CHECK_EQ(fired(efd[1], 0), 0);
    /* CQ 1 with IEN and IV 1; CQ 2 with IEN clear */
    CHECK_EQ(admin(&g, create_q(NVME_ADM_CREATE_CQ, 1, T_IOCQ, NVME_CREATE_CQ_IEN | (1u << NVME_CREATE_CQ_IV_SHIFT))),
             0);
    CHECK_EQ(admin(&g, create_q(NVME_ADM_CREATE_SQ, 1, T_IOSQ, 1u << NVME_CREATE_SQ_CQID_SHIFT)), 0);
    CHECK_EQ(admin(&g, create_q(NVME_ADM_CREATE_CQ, 2, T_IOCQ2, 0)), 0);
    CHECK_EQ(admin(&g, create_q(NVME_ADM_CREATE_SQ, 2, T_IOSQ2, 2u << NVME_CREATE_SQ_CQID_SHIFT)), 0);
    CHECK_EQ(fired(efd[0], T_TIMEOUT_MS), 1);
    CHECK_EQ(rw(&g, NVME_CMD_READ, T_RBUF), 0);
    CHECK_EQ(fired(efd[1], T_TIMEOUT_MS), 1);
    CHECK_EQ(fired(efd[0], T_QUIET_MS), 0);
    struct nvme_sqe flush = {.opc = NVME_CMD_FLUSH, .nsid = 1};
    CHECK_EQ(cmd(&g, 2, T_IOSQ2, T_IOCQ2, flush), 0); /* IEN clear: no interrupt */
    CHECK_EQ(fired(efd[0], T_QUIET_MS) + fired(efd[1], 0), 0);
    /* masked: kept pending (the PBA shows it), delivered at unmask */
    CHECK_EQ(set_irqs(g.fd, VFU_IRQ_SET_DATA_NONE | VFU_IRQ_SET_ACTION_MASK, VFU_PCI_MSIX_IRQ, 1, 1, NULL, 0, NULL), 0);
    CHECK_EQ(rw(&g, NVME_CMD_READ, T_RBUF), 0);
    CHECK_EQ(fired(efd[1], T_QUIET_MS), 0);
    uint32_t pba = 0; /* the PBA offset: config space, MSI-X capability (0x90) + 8 */
    struct vfu_region_access a = {.offset = 0x98, .region = VFU_PCI_CONFIG_REGION, .count = 4};
    uint8_t rep[sizeof(a) + 4];
    REQUIRE_EQ(xact(g.fd, VFU_CMD_REGION_READ, &a, sizeof(a), NULL, 0, rep, sizeof(rep), NULL), 0);
    memcpy(&pba, rep + sizeof(a), 4);
    CHECK_EQ(bar_rd(g.fd, pba & ~7u, 8), 2); /* vector 1 pending */
    const uint8_t yes = 1;
    CHECK_EQ(set_irqs(g.fd, VFU_IRQ_SET_DATA_BOOL | VFU_IRQ_SET_ACTION_UNMASK, VFU_PCI_MSIX_IRQ, 1, 1, NULL, 0, &yes),
             0);
    CHECK_EQ(fired(efd[1], T_TIMEOUT_MS), 1);
    CHECK_EQ(bar_rd(g.fd, pba & ~7u, 8), 0);
    /* a vector without eventfd (QEMU sends its -1 as no fd): pending until one comes */
    CHECK_EQ(set_irqs(g.fd, VFU_IRQ_SET_DATA_EVENTFD | trig, VFU_PCI_MSIX_IRQ, 1, 1, NULL, 0, NULL), 0);
    CHECK_EQ(rw(&g, NVME_CMD_READ, T_RBUF), 0);
    CHECK_EQ(set_irqs(g.fd, VFU_IRQ_SET_DATA_EVENTFD | trig, VFU_PCI_MSIX_IRQ, 1, 1, &efd[1], 1, NULL), 0);
    CHECK_EQ(fired(efd[1], T_TIMEOUT_MS), 1);
    /* MSI-X off, INTx on: one line, automasked once delivered until the host unmasks it */
    CHECK_EQ(set_irqs(g.fd, VFU_IRQ_SET_DATA_NONE | trig, VFU_PCI_MSIX_IRQ, 0, 0, NULL, 0, NULL), 0);
    CHECK_EQ(set_irqs(g.fd, VFU_IRQ_SET_DATA_EVENTFD | trig, VFU_PCI_INTX_IRQ, 0, 1, &efd[0], 1, NULL), 0);
    CHECK_EQ(rw(&g, NVME_CMD_READ, T_RBUF), 0);
    CHECK_EQ(fired(efd[0], T_TIMEOUT_MS), 1);
    CHECK_EQ(admin(&g, id), 0);
    CHECK_EQ(fired(efd[0], T_QUIET_MS), 0); /* masked */
    CHECK_EQ(set_irqs(g.fd, VFU_IRQ_SET_DATA_NONE | VFU_IRQ_SET_ACTION_UNMASK, VFU_PCI_INTX_IRQ, 0, 1, NULL, 0, NULL),
             0);
    CHECK_EQ(fired(efd[0], T_TIMEOUT_MS), 1);
    /* an eventfd for unmask (KVM's resampler) is not offered */
    CHECK_EQ(
        set_irqs(g.fd, VFU_IRQ_SET_DATA_EVENTFD | VFU_IRQ_SET_ACTION_UNMASK, VFU_PCI_INTX_IRQ, 0, 1, &efd[1], 1, NULL),
        ENOTSUP);
    /* DEVICE_RESET closes the eventfds: nothing signalled after it */
    CHECK_EQ(xact(g.fd, VFU_CMD_DEVICE_RESET, NULL, 0, NULL, 0, NULL, 0, NULL), 0);
    CHECK_EQ(fired(efd[0], T_QUIET_MS), 0);
    close(efd[0]);
    close(efd[1]);
    guest_down(&g);
}

int main(void)
{
    snprintf(g_dir, sizeof(g_dir), "/tmp/nvmelab-vfu-guest-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    char err[512];
    int r = vfu_server_open("emu://?nsze=16M&nioq=4", g_dir, NULL, T_TIMEOUT_MS, &g_srv, err, sizeof(err));
    if (!r)
        r = vfu_server_start(g_srv, err, sizeof(err));
    if (r) {
        fprintf(stderr, "server: %s\n", err);
        return 1;
    }
    RUN_CASE(guest_physical_iovas);
    RUN_CASE(msix_eventfds);
    vfu_server_close(g_srv);
    CHECK(rmdir(g_dir) == 0);
    return CHECK_DONE("test_vfio_user_guest");
}
