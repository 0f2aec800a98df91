/* SPDX-License-Identifier: BSD-3-Clause */
/* test_driver_iommu.c — the driver's IOMMU per buffer (issue 33, item 5; rules at nvme_qpair_submit_raw in
 * nvme.h): a raw command's PRPs reach only data buffers. PRP1 just past a buffer, inside the SQ/CQ ring or a
 * PRP-list page, a PRP-list entry or PRP2 out of bounds, a transfer longer than the buffer given, a wrapping
 * address, a buffer that is the driver's own memory: each refused with -EFAULT/-EINVAL and a message naming the
 * PRP and its address, no CID taken (outstanding 0), and a write + read on the same qpair works after it.
 * Before, each went to the controller, whose DMA windows include the driver's queue memory. */
#include <inttypes.h>

#include "test_driver.h"

#define PAGE   4096u
#define NPAGES 4u

static struct nvme_target *t;
static struct nvme_ctrl *c;
static struct nvme_ns *ns;
static struct nvme_qpair *q;
static struct nvme_dma *d;
static uint8_t *b;
static uint64_t b_bus; /* bus address of b (identity on emu://) */
static struct nvme_qpair_mem m;

static void setup(void)
{
    t = t_open("emu://?ndev=1&nsze=4MiB&lbads=512&mdts=64KiB");
    c = nvme_target_ctrl(t, 0);
    ns = nvme_ctrl_ns(c, 1);
    REQUIRE_EQ(nvme_dma_alloc(t, NPAGES * PAGE, &d), 0);
    b = nvme_dma_vaddr(d);
    b_bus = nvme_dma_iova(d, b);
    struct nvme_qpair_opts o = {.depth = 8, .timeout_ms = 2000};
    REQUIRE_EQ(nvme_qpair_create(c, &o, &q), 0);
    nvme_qpair_mem_info(q, &m);
}

static void teardown(void)
{
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

static struct nvme_sqe rd(uint64_t prp1, uint64_t prp2, uint32_t bytes)
{
    struct nvme_sqe s = {.opc = NVME_CMD_READ, .nsid = 1, .prp1 = prp1, .prp2 = prp2, .cdw12 = bytes / 512 - 1};
    return s;
}

/* Refused with rc, the message naming `what` and addr; nothing outstanding; then the qpair still works. */
static void refused(struct nvme_sqe s, void *buf, size_t len, int rc, const char *what, uint64_t addr)
{
    char err[256] = "", hex[32];
    T_EQ(nvme_qpair_submit_raw_err(q, &s, buf, len, NULL, NULL, err, sizeof err), rc);
    T_CONTAINS(err, what);
    if (addr) {
        snprintf(hex, sizeof hex, "0x%" PRIx64, addr);
        T_CONTAINS(err, hex);
    }
    T_EQ(nvme_qpair_outstanding(q), 0);
    /* the same qpair: a write and a read through the driver's own PRPs */
    struct nvme_cpl cpl = {0};
    for (uint32_t i = 0; i < 2 * PAGE; i++)
        b[i] = (uint8_t)(i * 7 + addr);
    T_EQ(t_io(q, ns, NVME_CMD_WRITE, 8, 2 * PAGE / 512, b, 2 * PAGE, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    memset(b + 2 * PAGE, 0, 2 * PAGE);
    T_EQ(t_io(q, ns, NVME_CMD_READ, 8, 2 * PAGE / 512, b + 2 * PAGE, 2 * PAGE, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_CHECK(memcmp(b, b + 2 * PAGE, 2 * PAGE) == 0);
    T_EQ(nvme_qpair_outstanding(q), 0);
}

static void test_prp1_outside_the_buffers(void)
{
    setup();
    uint64_t end = b_bus + NPAGES * PAGE;
    refused(rd(end, 0, PAGE), NULL, 0, -EFAULT, "PRP1", end);
    refused(rd(m.sq, 0, PAGE), NULL, 0, -EFAULT, "the SQ ring", m.sq);
    refused(rd(m.sq + 5 * NVME_SQE_SIZE, 0, 512), NULL, 0, -EFAULT, "(entry 5)", m.sq + 5 * NVME_SQE_SIZE);
    refused(rd(m.cq, 0, PAGE), NULL, 0, -EFAULT, "the CQ ring", m.cq);
    refused(rd(m.prp_lists + PAGE, 0, PAGE), NULL, 0, -EFAULT, "PRP-list page of CID 1", m.prp_lists + PAGE);
    refused(rd(0, 0, 512), NULL, 0, -EFAULT, "in no DMA buffer", 0);
    teardown();
}

static void test_prp2_and_list_entries(void)
{
    setup();
    uint64_t end = b_bus + NPAGES * PAGE;
    /* two pages: PRP2 is the second data page, just past the end */
    refused(rd(b_bus + (NPAGES - 1) * PAGE, end, 2 * PAGE), NULL, 0, -EFAULT, "PRP2", end);
    /* three pages through a list in the buffer's last page: entry 1 bad */
    uint64_t *lst = (uint64_t *)(b + 3 * PAGE);
    const uint64_t bad[] = {end, m.sq, m.prp_lists, 0xDEAD0000};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lst[0] = b_bus + PAGE;
        lst[1] = bad[i];
        refused(rd(b_bus, b_bus + 3 * PAGE, 3 * PAGE), NULL, 0, -EFAULT, "PRP-list entry 1", bad[i]);
    }
    /* the list pointer itself in the driver's memory, or misaligned */
    refused(rd(b_bus, m.prp_lists, 3 * PAGE), NULL, 0, -EFAULT, "PRP list", m.prp_lists);
    refused(rd(b_bus, b_bus + 3 * PAGE + 4, 3 * PAGE), NULL, 0, -EINVAL, "not 8-byte aligned", b_bus + 3 * PAGE + 4);
    /* a page at the top of the address space: [start, start + len) must not wrap */
    refused(rd(UINT64_MAX - PAGE + 1, b_bus, 2 * PAGE), NULL, 0, -EFAULT, "PRP1", UINT64_MAX - PAGE + 1);
    teardown();
}

static void test_lengths_and_given_buffers(void)
{
    setup();
    /* a buffer given: the SQE moves 8 KiB, the buffer gives 4 KiB */
    refused(rd(0, 0, 2 * PAGE), b, PAGE, -EINVAL, "moves 8192 bytes but buf gives 4096", 0);
    /* a "buffer" that is the driver's own SQ ring (identity addresses on emu://) */
    refused(rd(0, 0, 512), (void *)(uintptr_t)m.sq, 512, -EFAULT, "the SQ ring", 0);
    /* the largest transfer is 64 KiB */
    refused(rd(b_bus, 0, 128 * 1024), NULL, 0, -E2BIG, "more than the largest transfer", 0);
    /* an opcode the driver cannot size is checked for the largest transfer */
    struct nvme_sqe s = {.opc = 0x7e, .nsid = 1, .prp1 = m.sq};
    refused(s, NULL, 0, -EFAULT, "the SQ ring", m.sq);
    teardown();
}

static void test_admitted_commands(void)
{
    setup();
    struct nvme_cpl cpl = {0};
    for (uint32_t i = 0; i < 3 * PAGE; i++)
        b[i] = (uint8_t)(i * 13 + 1);
    T_EQ(t_io(q, ns, NVME_CMD_WRITE, 64, 3 * PAGE / 512, b, 3 * PAGE, &cpl), 0);
    memset(b, 0, 3 * PAGE);
    uint64_t *lst = (uint64_t *)(b + 3 * PAGE);
    lst[0] = b_bus + PAGE;
    lst[1] = b_bus + 2 * PAGE;
    struct nvme_sqe s = rd(b_bus, b_bus + 3 * PAGE, 3 * PAGE);
    s.cdw10 = 64;
    struct t_wait w = {0};
    T_EQ(nvme_qpair_submit_raw(q, &s, NULL, 0, t_cb, &w), 0);
    lst[0] = lst[1] = 0; /* the controller reads the driver's copy */
    while (!w.done)
        T_CHECK(nvme_qpair_poll(q, 0) >= 0);
    T_CHECK(nvme_cpl_ok(&w.cpl));
    for (uint32_t i = 0; i < 3 * PAGE; i++)
        if (b[i] != (uint8_t)(i * 13 + 1)) {
            T_EQ(b[i], (uint8_t)(i * 13 + 1));
            break;
        }
    /* Flush moves nothing: its PRPs are never read, so they pass as given */
    struct nvme_sqe f = {.opc = NVME_CMD_FLUSH, .nsid = 1, .prp1 = m.sq};
    T_EQ(t_raw(q, &f, NULL, 0, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    teardown();
}

/* nvme_ctrl_admin without a buffer: the SQE's own PRPs pass the same check */
static void test_admin(void)
{
    setup();
    char err[256] = "";
    struct nvme_cpl cpl = {0};
    struct nvme_sqe id = {.opc = NVME_ADM_IDENTIFY, .cdw10 = 1, .prp1 = m.sq};
    T_EQ(nvme_ctrl_admin_err(c, &id, NULL, 0, &cpl, 2000, err, sizeof err), -EFAULT);
    T_CONTAINS(err, "PRP1");
    struct nvme_sqe cq = {.opc = NVME_ADM_CREATE_CQ, .prp1 = m.cq, .cdw10 = 7u | (15u << 16), .cdw11 = 1};
    T_EQ(nvme_ctrl_admin_err(c, &cq, NULL, 0, &cpl, 2000, err, sizeof err), -EFAULT);
    T_CONTAINS(err, "PRP1 (the queue)");
    T_EQ(nvme_ctrl_admin_err(c, &cq, b, PAGE, &cpl, 2000, err, sizeof err), -EINVAL);
    T_CONTAINS(err, "cannot be buf");
    /* in a data buffer: admitted, created, deleted */
    cq.prp1 = b_bus;
    T_EQ(nvme_ctrl_admin(c, &cq, NULL, 0, &cpl, 2000), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    struct nvme_sqe del = {.opc = NVME_ADM_DELETE_CQ, .cdw10 = 7};
    T_EQ(nvme_ctrl_admin(c, &del, NULL, 0, &cpl, 2000), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    /* Identify into the data buffer works, and the I/O qpair is untouched */
    id.prp1 = b_bus;
    T_EQ(nvme_ctrl_admin(c, &id, NULL, 0, &cpl, 2000), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    refused(rd(m.sq, 0, 512), NULL, 0, -EFAULT, "the SQ ring", m.sq);
    teardown();
}

int main(void)
{
    RUN_CASE(test_prp1_outside_the_buffers);
    RUN_CASE(test_prp2_and_list_entries);
    RUN_CASE(test_lengths_and_given_buffers);
    RUN_CASE(test_admitted_commands);
    RUN_CASE(test_admin);
    return CHECK_DONE("test_driver_iommu");
}
