/* SPDX-License-Identifier: BSD-3-Clause */
/* test_vfio_user_server.c — the vfio-user server (src/tools/vfu_server.h) driven by a raw client over its
 * real UNIX socket: version negotiation, device/region/IRQ info, config space, registers and CC.EN
 * bring-up through REGION_WRITE/READ, an Identify rung through the mmapped doorbell page with the queues
 * in a DMA-mapped memfd, DMA map/unmap errors, malformed messages, and a client that goes away mid-way
 * followed by a second one. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#define T_DMA_SIZE   (64u << 10) /* admin SQ, admin CQ, Identify buffer, spare */
#define T_ASQ_OFF    0x0000u
#define T_ACQ_OFF    0x1000u
#define T_BUF_OFF    0x2000u
#define T_QENTRIES   16u
#define T_BIG        (VFU_MAX_MSG + 1u)

static struct vfu_server *g_srv;
static char g_dir[64];

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int connect_to(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* One command and its reply. Returns the reply's errno (0 = success) or a negative transport error. The
 * reply payload goes to rep (rep_cap bytes), its length to *rlen, fds to rfds (room *rnfds). */
static uint16_t g_id;
static int xact(int fd, uint16_t cmd, const void *pl, size_t plen, const int *fds, unsigned nfds, void *rep,
                size_t rep_cap, size_t *rlen, int *rfds, unsigned *rnfds)
{
    static uint8_t msg[VFU_HDR_SIZE + 8192], in[VFU_HDR_SIZE + 8192];
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
    int tmp[VFU_MAX_FDS];
    unsigned tn = VFU_MAX_FDS;
    r = vfu_msg_recv(fd, in, sizeof(in), &len, rfds ? rfds : tmp, rfds ? rnfds : &tn, T_TIMEOUT_MS);
    if (r)
        return r;
    if (!rfds)
        vfu_close_fds(tmp, tn);
    memcpy(&h, in, sizeof(h));
    if (h.msg_id != id || h.cmd != cmd || (h.flags & VFU_F_TYPE_MASK) != VFU_F_TYPE_REPLY)
        return -EPROTO;
    size_t n = len - VFU_HDR_SIZE;
    if (rlen)
        *rlen = n;
    if (rep)
        memcpy(rep, in + VFU_HDR_SIZE, n < rep_cap ? n : rep_cap);
    return (h.flags & VFU_F_ERROR) ? (int)h.error : 0;
}

static int simple(int fd, uint16_t cmd, const void *pl, size_t plen)
{
    return xact(fd, cmd, pl, plen, NULL, 0, NULL, 0, NULL, NULL, NULL);
}

static int version(int fd, uint16_t major, const char *json)
{
    uint8_t b[256];
    struct vfu_version v = {.major = major, .minor = VFU_VERSION_MINOR};
    memcpy(b, &v, sizeof(v));
    size_t n = json ? strlen(json) + 1 : 0;
    if (json)
        memcpy(b + sizeof(v), json, n);
    return simple(fd, VFU_CMD_VERSION, b, sizeof(v) + n);
}

static int connect_ready_to(unsigned ctrl)
{
    int fd = connect_to(vfu_server_path(g_srv, ctrl));
    if (fd >= 0 && version(fd, VFU_VERSION_MAJOR, "{\"capabilities\":{\"max_msg_fds\":8}}") != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int connect_ready(void)
{
    return connect_ready_to(0);
}

static int reg_rw(int fd, bool write, uint32_t region, uint64_t off, uint64_t *val, uint32_t width)
{
    uint8_t b[sizeof(struct vfu_region_access) + 8], rep[sizeof(b)];
    struct vfu_region_access a = {.offset = off, .region = region, .count = width};
    memcpy(b, &a, sizeof(a));
    if (write)
        memcpy(b + sizeof(a), val, width);
    size_t rlen = 0;
    int r = xact(fd, write ? VFU_CMD_REGION_WRITE : VFU_CMD_REGION_READ, b, sizeof(a) + (write ? width : 0), NULL, 0,
                 rep, sizeof(rep), &rlen, NULL, NULL);
    if (!r && !write) {
        *val = 0;
        memcpy(val, rep + sizeof(a), width);
    }
    return r;
}

static uint64_t rd(int fd, uint32_t region, uint64_t off, uint32_t width)
{
    uint64_t v = ~0ull;
    return reg_rw(fd, false, region, off, &v, width) ? ~0ull : v;
}

static int wr(int fd, uint32_t region, uint64_t off, uint64_t v, uint32_t width)
{
    return reg_rw(fd, true, region, off, &v, width);
}

static int dma_map(int fd, int memfd, uint64_t iova, uint64_t size, uint64_t offset, unsigned nfds)
{
    struct vfu_dma_map m = {
        .argsz = sizeof(m), .flags = VFU_DMA_F_READ | VFU_DMA_F_WRITE, .offset = offset, .addr = iova, .size = size};
    int fds[2] = {memfd, memfd};
    return xact(fd, VFU_CMD_DMA_MAP, &m, sizeof(m), fds, nfds, NULL, 0, NULL, NULL, NULL);
}

static int dma_unmap(int fd, uint64_t iova, uint64_t size, uint32_t flags)
{
    struct vfu_dma_unmap u = {.argsz = sizeof(u), .flags = flags, .addr = iova, .size = size};
    return simple(fd, VFU_CMD_DMA_UNMAP, &u, sizeof(u));
}

/* BAR0's region info with room for the capability; *fd the doorbell fd (or -1). */
static int bar0_info(int fd, uint32_t argsz, uint8_t *rep, size_t cap, size_t *rlen, int *bfd)
{
    struct vfu_region_info ri = {.argsz = argsz, .index = VFU_PCI_BAR0_REGION};
    int rfds[VFU_MAX_FDS];
    unsigned n = VFU_MAX_FDS;
    int r = xact(fd, VFU_CMD_DEVICE_GET_REGION_INFO, &ri, sizeof(ri), NULL, 0, rep, cap, rlen, rfds, &n);
    *bfd = n ? rfds[0] : -1;
    for (unsigned i = 1; i < n; i++)
        close(rfds[i]);
    return r;
}

/* ---------------------------------------------------------------- cases */
static void version_negotiation(void)
{
    int fd = connect_to(vfu_server_path(g_srv, 0));
    REQUIRE(fd >= 0);
    uint8_t dinfo[sizeof(struct vfu_device_info)] = {sizeof(struct vfu_device_info)};
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_GET_INFO, dinfo, sizeof(dinfo)), EINVAL); /* VERSION first */
    CHECK_EQ(version(fd, 1, NULL), ENOTSUP);
    CHECK_EQ(version(fd, 0, "{\"capabilities\":{\"max_msg_fds\":-1}}"), EINVAL);
    CHECK_EQ(version(fd, 0, "{\"capabilities\":"), EINVAL);
    uint8_t b[256], rep[512];
    struct vfu_version v = {.major = 0, .minor = 1};
    const char *json = "{\"capabilities\":{\"max_msg_fds\":4,\"migration\":{\"pgsize\":4096},\"x\":[1,2.5e3,null]}}";
    memcpy(b, &v, sizeof(v));
    memcpy(b + sizeof(v), json, strlen(json) + 1);
    size_t rlen = 0;
    CHECK_EQ(
        xact(fd, VFU_CMD_VERSION, b, sizeof(v) + strlen(json) + 1, NULL, 0, rep, sizeof(rep) - 1, &rlen, NULL, NULL),
        0);
    REQUIRE(rlen > sizeof(v));
    memcpy(&v, rep, sizeof(v));
    CHECK_EQ(v.major, 0);
    CHECK_EQ(v.minor, 1);
    rep[rlen < sizeof(rep) ? rlen : sizeof(rep) - 1] = 0;
    CHECK_CONTAINS((const char *)rep + sizeof(v), "\"max_msg_fds\":8");
    CHECK_CONTAINS((const char *)rep + sizeof(v), "\"pgsizes\":4096");
    CHECK_EQ(version(fd, 0, NULL), EINVAL); /* negotiated once per connection */
    close(fd);
    /* a client that sends no JSON at all (SPDK's), on the socket DIR/ctrl0/cntrl */
    char path[96];
    snprintf(path, sizeof(path), "%s/ctrl0/cntrl", g_dir);
    CHECK_STREQ(vfu_server_path(g_srv, 0), path);
    sleep_ms(2 * VFU_POLL_MS);
    fd = connect_to(path);
    REQUIRE(fd >= 0);
    CHECK_EQ(version(fd, 0, NULL), 0);
    close(fd);
}

static void device_and_region_info(void)
{
    int fd = connect_ready();
    REQUIRE(fd >= 0);
    struct vfu_device_info di = {.argsz = sizeof(di)};
    CHECK_EQ(xact(fd, VFU_CMD_DEVICE_GET_INFO, &di, sizeof(di), NULL, 0, &di, sizeof(di), NULL, NULL, NULL), 0);
    CHECK_EQ(di.num_regions, VFU_PCI_NUM_REGIONS);
    CHECK_EQ(di.num_irqs, VFU_PCI_NUM_IRQS);
    CHECK(di.flags & VFU_DEV_F_PCI);
    CHECK(di.flags & VFU_DEV_F_RESET);

    uint8_t rep[256];
    size_t rlen = 0;
    int bfd = -1;
    CHECK_EQ(bar0_info(fd, sizeof(rep), rep, sizeof(rep), &rlen, &bfd), 0);
    struct vfu_region_info ri;
    memcpy(&ri, rep, sizeof(ri));
    CHECK_EQ(ri.argsz, sizeof(ri) + sizeof(struct vfu_cap_sparse) + sizeof(struct vfu_sparse_area));
    CHECK_EQ(rlen, ri.argsz);
    CHECK(ri.size >= NVME_BAR0_MIN_SIZE && (ri.size & (ri.size - 1)) == 0);
    CHECK_EQ(ri.flags, VFU_REGION_F_READ | VFU_REGION_F_WRITE | VFU_REGION_F_MMAP | VFU_REGION_F_CAPS);
    CHECK_EQ(ri.cap_offset, sizeof(ri));
    struct vfu_cap_sparse cap;
    struct vfu_sparse_area area;
    memcpy(&cap, rep + ri.cap_offset, sizeof(cap));
    memcpy(&area, rep + ri.cap_offset + sizeof(cap), sizeof(area));
    CHECK_EQ(cap.hdr.id, VFU_CAP_SPARSE_MMAP);
    CHECK_EQ(cap.nr_areas, 1);
    CHECK_EQ(area.offset, NVME_REG_DBS);
    REQUIRE(bfd >= 0);
    /* the doorbell page is shared: a store through the mapping reads back through REGION_READ */
    volatile uint32_t *db = mmap(NULL, area.size, PROT_READ | PROT_WRITE, MAP_SHARED, bfd, (off_t)area.offset);
    REQUIRE(db != MAP_FAILED);
    close(bfd);
    db[0] = 0; /* controller disabled: the value is stored, nothing happens */
    CHECK_EQ(rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_DBS, 4), 0);
    munmap((void *)db, area.size);

    /* argsz too small for the capability: the size needed, no capability, no fd (cap_offset where it would be) */
    CHECK_EQ(bar0_info(fd, sizeof(ri), rep, sizeof(rep), &rlen, &bfd), 0);
    memcpy(&ri, rep, sizeof(ri));
    CHECK_EQ(rlen, sizeof(ri));
    CHECK_EQ(ri.argsz, sizeof(ri) + sizeof(struct vfu_cap_sparse) + sizeof(struct vfu_sparse_area));
    CHECK_EQ(ri.cap_offset, sizeof(ri));
    CHECK_EQ(bfd, -1);

    struct vfu_region_info q = {.argsz = sizeof(q), .index = VFU_PCI_CONFIG_REGION};
    CHECK_EQ(xact(fd, VFU_CMD_DEVICE_GET_REGION_INFO, &q, sizeof(q), NULL, 0, &ri, sizeof(ri), NULL, NULL, NULL), 0);
    CHECK_EQ(ri.size, VFU_CFG_SIZE);
    q.index = VFU_PCI_BAR2_REGION;
    CHECK_EQ(xact(fd, VFU_CMD_DEVICE_GET_REGION_INFO, &q, sizeof(q), NULL, 0, &ri, sizeof(ri), NULL, NULL, NULL), 0);
    CHECK_EQ(ri.size, 0);
    q.index = VFU_PCI_NUM_REGIONS;
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_GET_REGION_INFO, &q, sizeof(q)), EINVAL);

    struct vfu_irq_info ii = {.argsz = sizeof(ii), .index = VFU_PCI_INTX_IRQ};
    CHECK_EQ(xact(fd, VFU_CMD_DEVICE_GET_IRQ_INFO, &ii, sizeof(ii), NULL, 0, &ii, sizeof(ii), NULL, NULL, NULL), 0);
    CHECK_EQ(ii.count, 1);
    ii.index = VFU_PCI_ERR_IRQ; /* one error vector: QEMU turns its error recovery on */
    CHECK_EQ(xact(fd, VFU_CMD_DEVICE_GET_IRQ_INFO, &ii, sizeof(ii), NULL, 0, &ii, sizeof(ii), NULL, NULL, NULL), 0);
    CHECK_EQ(ii.count, 1);
    ii.index = VFU_PCI_NUM_IRQS;
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_GET_IRQ_INFO, &ii, sizeof(ii)), EINVAL);
    struct vfu_irq_set is = {
        .argsz = sizeof(is), .flags = VFU_IRQ_SET_DATA_NONE | VFU_IRQ_SET_ACTION_TRIGGER, .index = VFU_PCI_MSIX_IRQ};
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_SET_IRQS, &is, sizeof(is)), 0); /* count 0: off */
    is.count = 1;
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_SET_IRQS, &is, sizeof(is)), 0); /* MSI-X vector 0: a loopback trigger */
    is.start = VFU_MSIX_VECTORS - 1;
    is.count = 2;
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_SET_IRQS, &is, sizeof(is)), EINVAL); /* past the table */
    is.start = 0;
    is.count = 1;
    ii.index = VFU_PCI_MSIX_IRQ;
    CHECK_EQ(xact(fd, VFU_CMD_DEVICE_GET_IRQ_INFO, &ii, sizeof(ii), NULL, 0, &ii, sizeof(ii), NULL, NULL, NULL), 0);
    CHECK_EQ(ii.count, VFU_MSIX_VECTORS);
    is.index = VFU_PCI_INTX_IRQ;
    is.flags = VFU_IRQ_SET_DATA_EVENTFD | VFU_IRQ_SET_ACTION_TRIGGER;
    int efd = memfd_create("t-eventfd-stand-in", MFD_CLOEXEC);
    CHECK_EQ(xact(fd, VFU_CMD_DEVICE_SET_IRQS, &is, sizeof(is), &efd, 1, NULL, 0, NULL, NULL, NULL), 0);
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_SET_IRQS, &is, sizeof(is)), 0); /* no fd: the vector's eventfd unset */
    close(efd);
    close(fd);
}

static void config_space(void)
{
    int fd = connect_ready();
    REQUIRE(fd >= 0);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 0, 2), NVME_EMU_VID);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 2, 2), VFU_PCI_DEVICE_ID);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 8, 4) >> 8, VFU_NVME_CLASS);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 0x2c, 2), NVME_EMU_VID);
    uint8_t rep[64];
    size_t rlen;
    int bfd;
    REQUIRE(bar0_info(fd, sizeof(rep), rep, sizeof(rep), &rlen, &bfd) == 0);
    if (bfd >= 0)
        close(bfd);
    struct vfu_region_info ri;
    memcpy(&ri, rep, sizeof(ri));
    /* BAR sizing: all-ones reads back the size mask, flags kept (64-bit memory BAR) */
    CHECK_EQ(wr(fd, VFU_PCI_CONFIG_REGION, 0x10, 0xffffffffu, 4), 0);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 0x10, 4), (uint32_t)~(ri.size - 1) | 0x4u);
    CHECK_EQ(wr(fd, VFU_PCI_CONFIG_REGION, 0x10, 0xfe000000u, 4), 0);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 0x10, 4), 0xfe000004u);
    CHECK_EQ(wr(fd, VFU_PCI_CONFIG_REGION, 0x00, 0xffffffffu, 4), 0); /* read-only ids */
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 0, 2), NVME_EMU_VID);
    CHECK_EQ(wr(fd, VFU_PCI_CONFIG_REGION, 4, 0x6, 2), 0); /* memory space + bus master */
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 4, 2), 0x6);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 6, 2) & 0x10, 0x10); /* capability list */
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, VFU_CFG_SIZE - 4, 4), 0);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, VFU_CFG_SIZE - 2, 4), ~0ull); /* beyond the end: EINVAL */
    close(fd);
}

/* Bring the controller up through REGION_WRITE with its admin queues in a DMA-mapped memfd, then an
 * Identify rung through the mmapped doorbell page. Leaves fd connected; *mem the local view of the memfd. */
static int bring_up(int fd, int memfd, uint8_t *mem, volatile uint32_t **db_out, size_t *db_len)
{
    if (dma_map(fd, memfd, VFU_CLIENT_IOVA_BASE, T_DMA_SIZE, 0, 1))
        return -1;
    uint64_t cap = rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_CAP, 8);
    if (cap == ~0ull || rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_VS, 4) != NVME_VS(1, 4, 0))
        return -2;
    uint32_t aqa = (T_QENTRIES - 1) | ((T_QENTRIES - 1) << 16);
    if (wr(fd, VFU_PCI_BAR0_REGION, NVME_REG_AQA, aqa, 4) ||
        wr(fd, VFU_PCI_BAR0_REGION, NVME_REG_ASQ, VFU_CLIENT_IOVA_BASE + T_ASQ_OFF, 8) ||
        wr(fd, VFU_PCI_BAR0_REGION, NVME_REG_ACQ, VFU_CLIENT_IOVA_BASE + T_ACQ_OFF, 8))
        return -3;
    uint32_t cc = NVME_CC_EN | (NVME_SQES_LOG2 << NVME_CC_IOSQES_SHIFT) | (NVME_CQES_LOG2 << NVME_CC_IOCQES_SHIFT);
    if (wr(fd, VFU_PCI_BAR0_REGION, NVME_REG_CC, cc, 4))
        return -4;
    long long end = now_ms() + T_TIMEOUT_MS;
    while (!(rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_CSTS, 4) & NVME_CSTS_RDY))
        if (now_ms() > end)
            return -5;
    uint8_t rep[64];
    size_t rlen;
    int bfd;
    if (bar0_info(fd, sizeof(rep), rep, sizeof(rep), &rlen, &bfd) || bfd < 0)
        return -6;
    struct vfu_sparse_area area;
    memcpy(&area, rep + sizeof(struct vfu_region_info) + sizeof(struct vfu_cap_sparse), sizeof(area));
    volatile uint32_t *db = mmap(NULL, area.size, PROT_READ | PROT_WRITE, MAP_SHARED, bfd, (off_t)area.offset);
    close(bfd);
    if (db == MAP_FAILED)
        return -7;
    *db_out = db;
    *db_len = area.size;
    (void)mem;
    return 0;
}

/* Identify Controller as command `n` (0-based) of the admin queue; 0 when it completed with success and
 * the data names the emulator. */
static int identify(uint8_t *mem, volatile uint32_t *db, unsigned n)
{
    struct nvme_sqe *sq = (struct nvme_sqe *)(void *)(mem + T_ASQ_OFF);
    volatile struct nvme_cqe *cq = (volatile struct nvme_cqe *)(void *)(mem + T_ACQ_OFF);
    unsigned slot = n % T_QENTRIES;
    memset(&sq[slot], 0, sizeof(sq[slot]));
    sq[slot].opc = NVME_ADM_IDENTIFY;
    sq[slot].cid = (uint16_t)(100 + n);
    sq[slot].prp1 = VFU_CLIENT_IOVA_BASE + T_BUF_OFF;
    sq[slot].cdw10 = NVME_CNS_CTRL;
    memset(mem + T_BUF_OFF, 0, 4096);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    db[0] = (slot + 1) % T_QENTRIES; /* SQ 0 tail */
    uint8_t phase = (uint8_t)(((n / T_QENTRIES) + 1) & 1);
    long long end = now_ms() + T_TIMEOUT_MS;
    while (nvme_cqe_phase(cq[slot].status) != phase)
        if (now_ms() > end)
            return -1;
    db[1] = (slot + 1) % T_QENTRIES; /* CQ 0 head */
    if (cq[slot].cid != 100 + n || nvme_cqe_sc(cq[slot].status) || nvme_cqe_sct(cq[slot].status))
        return -2;
    struct nvme_id_ctrl *id = (struct nvme_id_ctrl *)(void *)(mem + T_BUF_OFF);
    return id->vid == NVME_EMU_VID ? 0 : -3;
}

static void bringup_and_identify(void)
{
    int fd = connect_ready();
    REQUIRE(fd >= 0);
    int memfd = memfd_create("t-dma", MFD_CLOEXEC);
    REQUIRE(memfd >= 0 && ftruncate(memfd, T_DMA_SIZE) == 0);
    uint8_t *mem = mmap(NULL, T_DMA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    REQUIRE(mem != MAP_FAILED);
    volatile uint32_t *db = NULL;
    size_t dblen = 0;
    REQUIRE_EQ(bring_up(fd, memfd, mem, &db, &dblen), 0);
    CHECK_EQ(nvme_emu_dma_count(vfu_server_set(g_srv)), 1);
    for (unsigned i = 0; i < 3; i++)
        CHECK_EQ(identify(mem, db, i), 0);
    /* a doorbell through REGION_WRITE is accepted too (stored into the shared page) */
    CHECK_EQ(wr(fd, VFU_PCI_BAR0_REGION, NVME_REG_DBS + 4, 3, 4), 0);
    CHECK_EQ(db[1], 3);
    /* DEVICE_RESET: the controller is reset, the DMA map stays */
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_RESET, NULL, 0), 0);
    CHECK_EQ(rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_CSTS, 4) & NVME_CSTS_RDY, 0);
    CHECK_EQ(rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_CC, 4), 0);
    CHECK_EQ(nvme_emu_dma_count(vfu_server_set(g_srv)), 1);
    /* register access rules */
    CHECK_EQ(wr(fd, VFU_PCI_BAR0_REGION, NVME_REG_CC + 1, 0, 4), EINVAL); /* unaligned */
    CHECK_EQ(wr(fd, VFU_PCI_BAR0_REGION, NVME_REG_CC, 0, 2), EINVAL);     /* width */
    CHECK_EQ(rd(fd, VFU_PCI_BAR2_REGION, 0, 4), ~0ull);                   /* no such region */
    close(fd);
    munmap((void *)db, dblen);
    munmap(mem, T_DMA_SIZE);
    close(memfd);
    long long end = now_ms() + T_TIMEOUT_MS;
    while (nvme_emu_dma_count(vfu_server_set(g_srv)) && now_ms() < end)
        sleep_ms(10);
    CHECK_EQ(nvme_emu_dma_count(vfu_server_set(g_srv)), 0); /* the client went: its windows went */
}

/* Admin command `n` (0-based) of the admin queue: its status (SCT << 8 | SC), or -1 on no completion. */
static int admin_cmd(uint8_t *mem, volatile uint32_t *db, unsigned n, struct nvme_sqe c)
{
    struct nvme_sqe *sq = (struct nvme_sqe *)(void *)(mem + T_ASQ_OFF);
    volatile struct nvme_cqe *cq = (volatile struct nvme_cqe *)(void *)(mem + T_ACQ_OFF);
    unsigned slot = n % T_QENTRIES;
    c.cid = (uint16_t)(100 + n);
    sq[slot] = c;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    db[0] = (slot + 1) % T_QENTRIES;
    uint8_t phase = (uint8_t)(((n / T_QENTRIES) + 1) & 1);
    long long end = now_ms() + T_TIMEOUT_MS;
    while (nvme_cqe_phase(cq[slot].status) != phase)
        if (now_ms() > end)
            return -1;
    db[1] = (slot + 1) % T_QENTRIES;
    return (int)((nvme_cqe_sct(cq[slot].status) << 8) | nvme_cqe_sc(cq[slot].status));
}

/* MSI-X: the capability (VFU_MSIX_VECTORS vectors, table and PBA in BAR0), the table kept as written, and
 * Create I/O CQ taking any vector of the table (the NVMe rule: IV within the MSI-X table; none signalled). */
static void msix_vectors(void)
{
    int fd = connect_ready();
    REQUIRE(fd >= 0);
    unsigned cap = (unsigned)rd(fd, VFU_PCI_CONFIG_REGION, 0x34, 1), hops = 0;
    while (cap && rd(fd, VFU_PCI_CONFIG_REGION, cap, 1) != 0x11 && hops++ < 8)
        cap = (unsigned)rd(fd, VFU_PCI_CONFIG_REGION, cap + 1, 1);
    REQUIRE(cap != 0 && hops < 8);
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, cap + 2, 2), VFU_MSIX_VECTORS - 1); /* Table Size, disabled */
    uint32_t tbl = (uint32_t)rd(fd, VFU_PCI_CONFIG_REGION, cap + 4, 4);
    uint32_t pba = (uint32_t)rd(fd, VFU_PCI_CONFIG_REGION, cap + 8, 4);
    CHECK_EQ(tbl & 7, 0); /* BIR 0 */
    CHECK_EQ(pba & 7, 0);
    CHECK_EQ(pba, tbl + VFU_MSIX_TABLE_SIZE);
    CHECK(tbl >= NVME_REG_DBS + 8);                                 /* past the registers and doorbells */
    CHECK_EQ(wr(fd, VFU_PCI_CONFIG_REGION, cap + 2, 0xffff, 2), 0); /* Enable and Function Mask only */
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, cap + 2, 2), 0xc000u | (VFU_MSIX_VECTORS - 1));
    CHECK_EQ(rd(fd, VFU_PCI_BAR0_REGION, tbl + 5 * 16 + 12, 4), 1); /* masked at reset */
    CHECK_EQ(wr(fd, VFU_PCI_BAR0_REGION, tbl + 5 * 16, 0xfee00000u, 8), 0);
    CHECK_EQ(rd(fd, VFU_PCI_BAR0_REGION, tbl + 5 * 16, 8), 0xfee00000u);
    CHECK_EQ(rd(fd, VFU_PCI_BAR0_REGION, pba, 8), 0); /* nothing pending */

    int memfd = memfd_create("t-dma", MFD_CLOEXEC);
    REQUIRE(memfd >= 0 && ftruncate(memfd, T_DMA_SIZE) == 0);
    uint8_t *mem = mmap(NULL, T_DMA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    REQUIRE(mem != MAP_FAILED);
    volatile uint32_t *db = NULL;
    size_t dblen = 0;
    REQUIRE_EQ(bring_up(fd, memfd, mem, &db, &dblen), 0);
    struct nvme_sqe c = {.opc = NVME_ADM_CREATE_CQ,
                         .prp1 = VFU_CLIENT_IOVA_BASE + T_BUF_OFF,
                         .cdw10 = NVME_CREATE_Q_CDW10(1, T_QENTRIES),
                         .cdw11 =
                             NVME_CREATE_Q_PC | NVME_CREATE_CQ_IEN | (VFU_MSIX_VECTORS << NVME_CREATE_CQ_IV_SHIFT)};
    CHECK_EQ(admin_cmd(mem, db, 0, c), (NVME_SCT_CMD_SPECIFIC << 8) | NVME_SC_INVALID_VECTOR);
    c.cdw11 = NVME_CREATE_Q_PC | NVME_CREATE_CQ_IEN | ((VFU_MSIX_VECTORS - 1) << NVME_CREATE_CQ_IV_SHIFT);
    CHECK_EQ(admin_cmd(mem, db, 1, c), 0);
    c = (struct nvme_sqe){.opc = NVME_ADM_DELETE_CQ, .cdw10 = 1};
    CHECK_EQ(admin_cmd(mem, db, 2, c), 0);
    close(fd);
    munmap((void *)db, dblen);
    munmap(mem, T_DMA_SIZE);
    close(memfd);
    long long end = now_ms() + T_TIMEOUT_MS;
    while (nvme_emu_dma_count(vfu_server_set(g_srv)) && now_ms() < end)
        sleep_ms(10);
}

static void dma_errors(void)
{
    int fd = connect_ready();
    REQUIRE(fd >= 0);
    int memfd = memfd_create("t-dma", MFD_CLOEXEC);
    REQUIRE(memfd >= 0 && ftruncate(memfd, T_DMA_SIZE) == 0);
    const uint64_t base = VFU_CLIENT_IOVA_BASE;
    CHECK_EQ(dma_map(fd, memfd, base, 0x4000, 0, 1), 0);
    CHECK_EQ(dma_map(fd, memfd, base, 0x4000, 0, 1), EEXIST);                   /* the same range */
    CHECK_EQ(dma_map(fd, memfd, base + 0x2000, 0x4000, 0, 1), EEXIST);          /* overlapping */
    CHECK_EQ(dma_map(fd, memfd, base + 0x10001, 0x1000, 0, 1), EINVAL);         /* unaligned address */
    CHECK_EQ(dma_map(fd, memfd, base + 0x10000, 0x1001, 0, 1), EINVAL);         /* unaligned size */
    CHECK_EQ(dma_map(fd, memfd, base + 0x10000, 0x1000, 0x10, 1), EINVAL);      /* unaligned offset */
    CHECK_EQ(dma_map(fd, memfd, base + 0x30000, 0x1000, 0, 0), 0);              /* no fd: kept, unreachable */
    CHECK_EQ(dma_map(fd, memfd, base + 0x10000, 0x1000, 0, 2), EINVAL);         /* two fds */
    CHECK_EQ(dma_map(fd, memfd, base + 0x10000, 2 * T_DMA_SIZE, 0, 1), EINVAL); /* beyond the file */
    CHECK_EQ(dma_map(fd, memfd, 0, 0x1000, 0, 1), 0);                           /* IOVA 0: a translated window */
    CHECK_EQ(dma_map(fd, memfd, UINT64_MAX & ~0xfffull, 0x1000, 0, 1), EINVAL); /* wraps */
    CHECK_EQ(dma_map(fd, memfd, base + 0x10000, 0x1000, 0x1000, 1), 0);
    CHECK_EQ(dma_unmap(fd, base + 0x20000, 0x1000, 0), ENOENT); /* nothing there */
    CHECK_EQ(dma_unmap(fd, base + 0x1000, 0x1000, 0), EINVAL);  /* cuts a region */
    CHECK_EQ(dma_unmap(fd, base, 0x1000, VFU_DMA_UNMAP_F_ALL), EINVAL);
    CHECK_EQ(dma_unmap(fd, 0, 0, VFU_DMA_UNMAP_F_DIRTY_BITMAP), ENOTSUP);
    CHECK_EQ(dma_unmap(fd, base, 0x4000, 0), 0);
    CHECK_EQ(dma_unmap(fd, base + 0x30000, 0x1000, 0), 0); /* the region without fd */
    CHECK_EQ(nvme_emu_dma_count(vfu_server_set(g_srv)), 2);
    CHECK_EQ(dma_unmap(fd, 0, 0, VFU_DMA_UNMAP_F_ALL), 0);
    CHECK_EQ(nvme_emu_dma_count(vfu_server_set(g_srv)), 0);
    struct vfu_dma_map m = {.argsz = 8};
    CHECK_EQ(xact(fd, VFU_CMD_DMA_MAP, &m, sizeof(m), &memfd, 1, NULL, 0, NULL, NULL, NULL), EINVAL); /* argsz */
    CHECK_EQ(xact(fd, VFU_CMD_DMA_MAP, &m, 8, &memfd, 1, NULL, 0, NULL, NULL, NULL), EINVAL);         /* short */
    close(memfd);
    close(fd);
}

/* Send raw bytes (a header that lies) and report whether the server closed the connection. */
static bool closes_on(const void *msg, size_t len)
{
    int fd = connect_ready();
    if (fd < 0)
        return false;
    bool closed = false;
    if (send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len) {
        uint8_t b[64];
        struct timeval tv = {.tv_sec = 2};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        closed = recv(fd, b, sizeof(b), 0) == 0;
    }
    close(fd);
    return closed;
}

static void malformed_messages(void)
{
    int fd = connect_ready();
    REQUIRE(fd >= 0);
    CHECK_EQ(simple(fd, 99, NULL, 0), ENOTSUP);
    CHECK_EQ(simple(fd, VFU_CMD_DMA_READ, NULL, 0), ENOTSUP);
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_GET_REGION_IO_FDS, NULL, 0), ENOTSUP);
    struct vfu_region_access a = {.offset = 0, .region = VFU_PCI_CONFIG_REGION, .count = 4};
    CHECK_EQ(simple(fd, VFU_CMD_REGION_READ, &a, 8), EINVAL);          /* truncated */
    CHECK_EQ(simple(fd, VFU_CMD_REGION_WRITE, &a, sizeof(a)), EINVAL); /* data missing */
    a.count = VFU_MAX_DATA_XFER + 1;
    CHECK_EQ(simple(fd, VFU_CMD_REGION_READ, &a, sizeof(a)), EINVAL); /* too much */
    CHECK_EQ(simple(fd, VFU_CMD_DEVICE_RESET, &a, 4), EINVAL);        /* payload where none is */
    /* still served after all that */
    CHECK_EQ(rd(fd, VFU_PCI_CONFIG_REGION, 0, 2), NVME_EMU_VID);
    close(fd);
    /* a header that lies closes the connection */
    struct vfu_hdr h;
    vfu_hdr_init(&h, 1, VFU_CMD_DEVICE_GET_INFO, 8, VFU_F_TYPE_COMMAND, 0); /* below the header */
    CHECK(closes_on(&h, sizeof(h)));
    vfu_hdr_init(&h, 1, VFU_CMD_DEVICE_GET_INFO, T_BIG, VFU_F_TYPE_COMMAND, 0); /* beyond the maximum */
    CHECK(closes_on(&h, sizeof(h)));
    vfu_hdr_init(&h, 1, VFU_CMD_DEVICE_GET_INFO, sizeof(h), VFU_F_TYPE_REPLY, 0); /* a reply from the client */
    CHECK(closes_on(&h, sizeof(h)));
    /* and the next client is served */
    sleep_ms(2 * VFU_POLL_MS);
    fd = connect_ready();
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

static void disconnect_then_next_client(void)
{
    int memfd = memfd_create("t-dma", MFD_CLOEXEC);
    REQUIRE(memfd >= 0 && ftruncate(memfd, T_DMA_SIZE) == 0);
    uint8_t *mem = mmap(NULL, T_DMA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    REQUIRE(mem != MAP_FAILED);
    for (unsigned round = 0; round < 2; round++) {
        memset(mem, 0, T_DMA_SIZE);
        int fd = -1;
        long long end = now_ms() + T_TIMEOUT_MS;
        while ((fd = connect_ready()) < 0 && now_ms() < end)
            sleep_ms(10);
        REQUIRE(fd >= 0);
        CHECK_EQ(rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_CSTS, 4) & NVME_CSTS_RDY, 0); /* a fresh controller */
        volatile uint32_t *db = NULL;
        size_t dblen = 0;
        REQUIRE_EQ(bring_up(fd, memfd, mem, &db, &dblen), 0);
        CHECK_EQ(identify(mem, db, 0), 0);
        /* the next Identify is rung, and the client goes away without waiting for it */
        struct nvme_sqe *sq = (struct nvme_sqe *)(void *)(mem + T_ASQ_OFF);
        sq[1] = sq[0];
        db[0] = 2;
        close(fd);
        munmap((void *)db, dblen);
        end = now_ms() + T_TIMEOUT_MS;
        while (nvme_emu_dma_count(vfu_server_set(g_srv)) && now_ms() < end)
            sleep_ms(10);
        CHECK_EQ(nvme_emu_dma_count(vfu_server_set(g_srv)), 0);
    }
    munmap(mem, T_DMA_SIZE);
    close(memfd);
}

/* DMA_UNMAP of the region that holds the admin queues while a command is held by the device model: the
 * unmap returns once no command can see the window, nothing is written into the client's memory after
 * it, and the queue fails with CSTS.CFS at its next doorbell (the emulator's rule); the server lives on. */
static void unmap_with_command_in_flight(void)
{
    int memfd = memfd_create("t-dma", MFD_CLOEXEC);
    REQUIRE(memfd >= 0 && ftruncate(memfd, T_DMA_SIZE) == 0);
    uint8_t *mem = mmap(NULL, T_DMA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    REQUIRE(mem != MAP_FAILED);
    int fd = connect_ready();
    REQUIRE(fd >= 0);
    volatile uint32_t *db = NULL;
    size_t dblen = 0;
    REQUIRE_EQ(bring_up(fd, memfd, mem, &db, &dblen), 0);
    CHECK_EQ(identify(mem, db, 0), 0);
    struct nvme_emu_fault f = {.kind = NVME_EMU_FAULT_DELAY, .qid = 0, .nth = 1, .count = 1, .delay_ms = 300};
    CHECK_EQ(nvme_emu_inject(vfu_server_set(g_srv), 0, &f), 0);
    struct nvme_sqe *sq = (struct nvme_sqe *)(void *)(mem + T_ASQ_OFF);
    volatile struct nvme_cqe *cq = (volatile struct nvme_cqe *)(void *)(mem + T_ACQ_OFF);
    sq[1] = sq[0];
    sq[1].cid = 201;
    db[0] = 2;
    sleep_ms(50); /* fetched, its completion held for 300 ms */
    CHECK_EQ(dma_unmap(fd, VFU_CLIENT_IOVA_BASE, T_DMA_SIZE, 0), 0);
    CHECK_EQ(nvme_emu_dma_count(vfu_server_set(g_srv)), 0);
    sleep_ms(400);
    CHECK(cq[1].cid != 201); /* never posted into memory the server no longer maps */
    sq[2] = sq[0];
    db[0] = 3;
    long long end = now_ms() + T_TIMEOUT_MS;
    uint64_t csts = 0;
    while (!((csts = rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_CSTS, 4)) & NVME_CSTS_CFS) && now_ms() < end)
        sleep_ms(10);
    CHECK(csts & NVME_CSTS_CFS);
    close(fd);
    munmap((void *)db, dblen);
    munmap(mem, T_DMA_SIZE);
    close(memfd);
    nvme_emu_inject(vfu_server_set(g_srv), 0, &(struct nvme_emu_fault){.kind = NVME_EMU_FAULT_CLEAR});
    sleep_ms(2 * VFU_POLL_MS);
    fd = connect_ready(); /* the next client finds a fresh controller */
    REQUIRE(fd >= 0);
    CHECK_EQ(rd(fd, VFU_PCI_BAR0_REGION, NVME_REG_CSTS, 4) & (NVME_CSTS_CFS | NVME_CSTS_RDY), 0);
    close(fd);
}

/* One client process on two controllers maps the same buffer on both connections: they share the
 * window, which outlives the first connection and goes with the last. */
static void own_iova_space_per_client(void)
{
    int memfd = memfd_create("t-dma", MFD_CLOEXEC), other = memfd_create("t-other", MFD_CLOEXEC);
    REQUIRE(memfd >= 0 && ftruncate(memfd, T_DMA_SIZE) == 0 && other >= 0 && ftruncate(other, T_DMA_SIZE) == 0);
    uint8_t *mem = mmap(NULL, T_DMA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    REQUIRE(mem != MAP_FAILED);
    memset(mem, 0, T_DMA_SIZE);
    int a = connect_ready_to(0), b = connect_ready_to(1);
    REQUIRE(a >= 0 && b >= 0);
    struct nvme_emu_set *set = vfu_server_set(g_srv);
    CHECK_EQ(dma_map(a, memfd, VFU_CLIENT_IOVA_BASE, T_DMA_SIZE, 0, 1), 0);
    /* the same IOVAs on another connection: its own IOVA space (VA == IOVA is taken: a translated window) */
    CHECK_EQ(dma_map(b, other, VFU_CLIENT_IOVA_BASE, T_DMA_SIZE, 0, 1), 0);
    CHECK_EQ(dma_map(b, memfd, VFU_CLIENT_IOVA_BASE, T_DMA_SIZE / 2, 0, 1), EEXIST); /* overlaps its own */
    CHECK_EQ(nvme_emu_dma_count(set), 2);
    close(a);
    sleep_ms(3 * VFU_POLL_MS); /* controller 0's client is gone, with its window; controller 1's stays */
    CHECK_EQ(nvme_emu_dma_count(set), 1);
    volatile uint32_t *db = NULL;
    size_t dblen = 0;
    CHECK_EQ(dma_unmap(b, VFU_CLIENT_IOVA_BASE, T_DMA_SIZE, 0), 0); /* and back: bring_up maps memfd there */
    CHECK_EQ(nvme_emu_dma_count(set), 0);
    REQUIRE_EQ(bring_up(b, memfd, mem, &db, &dblen), 0);
    CHECK_EQ(identify(mem, db, 0), 0);
    close(b);
    munmap((void *)db, dblen);
    long long end = now_ms() + T_TIMEOUT_MS;
    while (nvme_emu_dma_count(set) && now_ms() < end)
        sleep_ms(10);
    CHECK_EQ(nvme_emu_dma_count(set), 0);
    munmap(mem, T_DMA_SIZE);
    close(memfd);
    close(other);
}

static void second_controller_independent(void)
{
    /* controller 1 answers while controller 0 has a client */
    int a = connect_ready();
    int b = connect_to(vfu_server_path(g_srv, 1));
    REQUIRE(a >= 0 && b >= 0);
    CHECK_EQ(version(b, 0, NULL), 0);
    CHECK_EQ(rd(b, VFU_PCI_BAR0_REGION, NVME_REG_VS, 4), NVME_VS(1, 4, 0));
    CHECK_EQ(rd(a, VFU_PCI_BAR0_REGION, NVME_REG_VS, 4), NVME_VS(1, 4, 0));
    close(a);
    close(b);
}

static void server_arguments(void)
{
    struct vfu_server *s = NULL;
    char err[512] = "";
    char sock[96];
    snprintf(sock, sizeof(sock), "%s/one.sock", g_dir);
    CHECK_EQ(vfu_server_open("emu://?mode=inline", NULL, sock, 1000, &s, err, sizeof(err)), -EINVAL);
    CHECK_CONTAINS(err, "mode=thread");
    CHECK_EQ(vfu_server_open("emu://?ndev=2", NULL, sock, 1000, &s, err, sizeof(err)), -EINVAL);
    CHECK_CONTAINS(err, "--dir");
    CHECK_EQ(vfu_server_open("pci://0000:01:00.0", NULL, sock, 1000, &s, err, sizeof(err)), -EINVAL);
    CHECK_EQ(vfu_server_open("emu://?nope=1", NULL, sock, 1000, &s, err, sizeof(err)), -EINVAL);
    CHECK_CONTAINS(err, "nope");
    REQUIRE_EQ(vfu_server_open("emu://", NULL, sock, T_TIMEOUT_MS, &s, err, sizeof(err)), 0);
    CHECK_STREQ(vfu_server_path(s, 0), sock);
    CHECK(access(sock, F_OK) == 0);
    REQUIRE_EQ(vfu_server_start(s, err, sizeof(err)), 0);
    /* a client stopped halfway through a message does not hold up the server's close */
    int fd = connect_to(sock);
    REQUIRE(fd >= 0);
    CHECK_EQ(version(fd, 0, NULL), 0);
    struct vfu_hdr h;
    vfu_hdr_init(&h, 9, VFU_CMD_REGION_READ, VFU_HDR_SIZE + sizeof(struct vfu_region_access), VFU_F_TYPE_COMMAND, 0);
    CHECK(send(fd, &h, sizeof(h), MSG_NOSIGNAL) == (ssize_t)sizeof(h));
    sleep_ms(2 * VFU_POLL_MS);
    long long t0 = now_ms();
    vfu_server_close(s);
    CHECK(now_ms() - t0 < T_TIMEOUT_MS / 2);
    CHECK(access(sock, F_OK) != 0); /* unlinked */
    close(fd);
}

int main(void)
{
    snprintf(g_dir, sizeof(g_dir), "/tmp/nvmelab-vfu-test-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    char err[512];
    int r = vfu_server_open("emu://?ndev=2&nsze=16M&nioq=4", g_dir, NULL, T_TIMEOUT_MS, &g_srv, err, sizeof(err));
    if (!r)
        r = vfu_server_start(g_srv, err, sizeof(err));
    if (r) {
        fprintf(stderr, "server: %s\n", err);
        return 1;
    }
    RUN_CASE(version_negotiation);
    RUN_CASE(device_and_region_info);
    RUN_CASE(config_space);
    RUN_CASE(bringup_and_identify);
    RUN_CASE(msix_vectors);
    RUN_CASE(dma_errors);
    RUN_CASE(malformed_messages);
    RUN_CASE(disconnect_then_next_client);
    RUN_CASE(unmap_with_command_in_flight);
    RUN_CASE(own_iova_space_per_client);
    RUN_CASE(second_controller_independent);
    vfu_server_close(g_srv);
    RUN_CASE(server_arguments);
    CHECK(rmdir(g_dir) == 0); /* sockets, links and the ctrl<i> directories are gone */
    return CHECK_DONE("test_vfio_user_server");
}
