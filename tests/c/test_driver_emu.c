/* SPDX-License-Identifier: BSD-3-Clause */
/* test_driver_emu.c — the driver against the emulated controller: bring-up and identify, read after write,
 * PRP edge cases, phase wrap, queue full, validation statuses, fault injection -> timeout -> reset,
 * Write Zeroes / DSM / Flush, several threads on several qpairs, sync I/O. */
#include <pthread.h>

#include "nvme/emu/emu.h"
#include "test_driver.h"

#define MIB  (1024u * 1024u)
#define KIB  1024u
#define PAGE 4096u

static void test_bringup(void)
{
    struct nvme_target *t = t_open("emu://?ndev=2&nns=2&nsze=16MiB&lbads=512,4096&mdts=128KiB");
    T_EQ(nvme_target_nctrl(t), 2);
    T_STREQ(nvme_target_scheme(t), "emu");
    T_CHECK(nvme_target_ctrl(t, 2) == NULL);
    for (unsigned i = 0; i < 2; i++) {
        struct nvme_ctrl *c = nvme_target_ctrl(t, i);
        const struct nvme_id_ctrl *id = nvme_ctrl_id(c);
        T_CHECK(id->sn[0] != '\0' && id->sn[0] != ' ');
        T_CHECK(id->mn[0] != '\0');
        T_EQ(nvme_ctrl_nn(c) >= 2, 1);
        T_EQ(nvme_ctrl_nns(c), 2);
        T_EQ(nvme_ctrl_mdts_bytes(c), 128 * KIB);
        T_EQ(nvme_ctrl_max_xfer(c), 128 * KIB);
        T_CHECK(nvme_ctrl_max_qpairs(c) >= 1);
        T_EQ(nvme_ctrl_page_size(c), PAGE);
        T_EQ(nvme_csts_rdy(nvme_ctrl_csts(c)), 1);
        T_CHECK(nvme_ctrl_ns(c, 0) == NULL);
        T_CHECK(nvme_ctrl_ns(c, 3) == NULL);
        struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
        T_CHECK(ns != NULL);
        T_EQ(nvme_ns_id(ns), 1);
        T_EQ(nvme_ns_lba_size(ns), i == 0 ? 512 : 4096);
        T_EQ(nvme_ns_nsze(ns) * nvme_ns_lba_size(ns), 16 * MIB);
        T_EQ(nvme_ctrl_ns_at(c, 1), nvme_ctrl_ns(c, 2));
        T_CHECK(nvme_ns_ctrl(ns) == c);
    }
    nvme_target_close(t);
}

/* A controller whose CAP.MQES is below the driver's preferred admin depth: the admin ring is clamped and
 * AQA must advertise the clamped size (it once advertised the unclamped one and the controller faulted). */
static void test_small_mqes(void)
{
    struct nvme_target *t = t_open("emu://?nsze=1MiB&mqes=7");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    T_EQ(nvme_csts_rdy(nvme_ctrl_csts(c)), 1);
    T_EQ(nvme_ctrl_max_depth(c), 7);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    uint8_t buf[512];
    struct nvme_cpl cpl = {0};
    memset(buf, 0x5a, sizeof buf);
    T_EQ(nvme_ns_io_sync(c, ns, NVME_CMD_WRITE, 3, 1, buf, sizeof buf, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    nvme_target_close(t);
}

static void test_bad_uris(void)
{
    static const struct {
        const char *uri;
        int rc;
        const char *msg;
    } cases[] = {
        {"", -EINVAL, "empty"},
        {"emu", -EINVAL, "no scheme"},
        {"nvme://x", -EINVAL, "unsupported scheme 'nvme://'"},
        {"file:///tmp/x", -EINVAL, "kernel I/O path"},
        {"emu://?nsze=12Q", -EINVAL, "nsze"},
        {"emu://?bogus=1", -EINVAL, "bogus"},
        {"emu://?ndev=1&ndev=2", -EINVAL, "twice"},
        {"pci://not-an-address", -EINVAL, "not a PCI address"},
        {"pci://0000:00:00.0?driver=nvme", -EINVAL, "driver"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct nvme_target *t = (struct nvme_target *)1;
        char err[NVME_ERRLEN] = "";
        int rc = nvme_target_open(cases[i].uri, &t, err, sizeof(err));
        if (rc != cases[i].rc || !strstr(err, cases[i].msg)) {
            fprintf(stderr, "uri '%s': rc %d err '%s' (want %d, '%s')\n", cases[i].uri, rc, err, cases[i].rc,
                    cases[i].msg);
            abort();
        }
        T_CHECK(t == NULL);
    }
}

/* Write a pattern through (buf + woff), read it back into (buf2 + roff), compare. */
static void rw_check(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t *wbuf, uint8_t *rbuf, size_t woff, size_t roff,
                     uint64_t slba, size_t len, uint64_t seed)
{
    struct nvme_cpl cpl = {0};
    uint32_t nlb = (uint32_t)(len / nvme_ns_lba_size(ns));
    t_fill(wbuf + woff, len, seed);
    T_EQ(t_io(q, ns, NVME_CMD_WRITE, slba, nlb, wbuf + woff, len, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    memset(rbuf + roff, 0xa5, len);
    T_EQ(t_io(q, ns, NVME_CMD_READ, slba, nlb, rbuf + roff, len, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    if (memcmp(wbuf + woff, rbuf + roff, len) != 0) {
        fprintf(stderr, "data mismatch: slba %llu len %zu woff %zu roff %zu\n", (unsigned long long)slba, len, woff,
                roff);
        abort();
    }
}

static void test_rw_and_prp(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=32MiB&lbads=512&mdts=256KiB");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *dw, *dr;
    T_EQ(nvme_dma_alloc(t, 2 * MIB, &dw), 0);
    T_EQ(nvme_dma_alloc(t, 2 * MIB, &dr), 0);
    T_EQ(nvme_dma_size(dw), 2 * MIB);
    uint8_t *w = nvme_dma_vaddr(dw), *r = nvme_dma_vaddr(dr);
    T_EQ(nvme_dma_iova(dw, w + 100), (uint64_t)(uintptr_t)(w + 100)); /* identity on emu */
    T_EQ(nvme_dma_iova(dw, w + 2 * MIB), UINT64_MAX);
    struct nvme_qpair *q;
    struct nvme_qpair_opts o = {.depth = 16, .timeout_ms = 2000, .batch = 1};
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    T_EQ(nvme_qpair_depth(q), 16);
    T_CHECK(nvme_qpair_qid(q) >= 1);

    /* every offset class within a page (start, dword, mid, last dword) x 1 LBA / 1 page / 2 pages /
     * page+LBA (crosses into a 2nd page) / 3 pages (PRP list) / many pages / exactly MDTS */
    const size_t offs[] = {0, 4, 512, 2048, PAGE - 512, PAGE - 4};
    const size_t lens[] = {512, PAGE, 2 * PAGE, PAGE + 512, 3 * PAGE, 17 * PAGE + 1024, 256 * KIB};
    uint64_t seed = 1, slba = 0;
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
        for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
            size_t roff = offs[(i + j) % (sizeof(offs) / sizeof(offs[0]))];
            rw_check(q, ns, w, r, offs[i], roff, slba, lens[j], seed++);
            slba += lens[j] / 512 + 7;
        }
    /* MDTS + one LBA: refused before it reaches the controller */
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, 0, (256 * KIB + 512) / 512, w, 256 * KIB + 512, NULL, NULL), -E2BIG);
    /* non-dword-aligned buffer, buffer outside DMA memory, wrong length, beyond the namespace */
    uint8_t stack[1024];
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, 0, 1, w + 2, 512, NULL, NULL), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, 0, 1, stack, 512, NULL, NULL), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, 0, 2, w, 512, NULL, NULL), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, 0, 0, w, 0, NULL, NULL), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, nvme_ns_nsze(ns), 1, w, 512, NULL, NULL), -ERANGE);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, nvme_ns_nsze(ns) - 1, 2, w, 1024, NULL, NULL), -ERANGE);
    T_EQ(nvme_qpair_submit(q, ns, 0x7f, 0, 1, w, 512, NULL, NULL), -EINVAL);
    T_EQ(nvme_qpair_submit(q, NULL, NVME_CMD_READ, 0, 1, w, 512, NULL, NULL), -EINVAL);
    T_EQ(nvme_qpair_outstanding(q), 0);
    /* a freed buffer is forgotten by the qpair's cache; a new one at the same address works */
    nvme_dma_free(dw);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, 0, 1, w, 512, NULL, NULL), -EINVAL);
    T_EQ(nvme_dma_alloc(t, 2 * MIB, &dw), 0);
    w = nvme_dma_vaddr(dw);
    /* last LBA works */
    rw_check(q, ns, w, r, 0, 0, nvme_ns_nsze(ns) - 1, 512, 99);

    T_EQ(nvme_qpair_destroy(q), 0);
    nvme_dma_free(dw);
    nvme_dma_free(dr);
    nvme_target_close(t);
}

struct wrap_ctx {
    uint32_t done;
    uint32_t bad;
};

static void wrap_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct wrap_ctx *w = arg;
    w->done++;
    if (!nvme_cpl_ok(cpl))
        w->bad++;
}

/* >= 20x depth commands per queue so the phase tag flips many times; queue-full behaviour; batching. */
static void test_wrap_full(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=8MiB&lbads=4096&mqes=64");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 64 * PAGE, &d), 0);
    uint8_t *b = nvme_dma_vaddr(d);
    struct nvme_qpair_opts bad = {.depth = 65};
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, &bad, &q), -EINVAL);
    bad.depth = 1;
    T_EQ(nvme_qpair_create(c, &bad, &q), -EINVAL);

    for (uint32_t batch = 1; batch <= 4; batch += 3) {
        const uint32_t depth = 8;
        struct nvme_qpair_opts o = {.depth = depth, .timeout_ms = 5000, .batch = batch};
        T_EQ(nvme_qpair_create(c, &o, &q), 0);
        /* full: N-1 accepted, the Nth refused */
        struct wrap_ctx w = {0};
        for (uint32_t i = 0; i < depth - 1; i++)
            T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, i, 1, b + i * PAGE, PAGE, wrap_cb, &w), 0);
        T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, 0, 1, b, PAGE, wrap_cb, &w), -EBUSY);
        T_EQ(nvme_qpair_outstanding(q), depth - 1);
        while (w.done < depth - 1)
            T_CHECK(nvme_qpair_poll(q, 0) >= 0);
        T_EQ(nvme_qpair_outstanding(q), 0);
        /* 40x depth commands, keeping the queue full */
        const uint32_t total = 40 * depth;
        uint32_t sent = 0;
        memset(&w, 0, sizeof(w));
        while (w.done < total) {
            while (sent < total) {
                uint32_t lba = sent % 64;
                t_fill(b + lba * PAGE, 8, lba);
                int rc = nvme_qpair_submit(q, ns, sent % 3 ? NVME_CMD_WRITE : NVME_CMD_READ, lba, 1, b + lba * PAGE,
                                           PAGE, wrap_cb, &w);
                if (rc == -EBUSY)
                    break;
                T_EQ(rc, 0);
                sent++;
            }
            nvme_qpair_ring(q);
            T_CHECK(nvme_qpair_poll(q, 3) >= 0); /* bounded reaping */
        }
        T_EQ(w.bad, 0);
        T_EQ(nvme_qpair_outstanding(q), 0);
        T_EQ(nvme_qpair_destroy(q), 0);
    }
    nvme_dma_free(d);
    nvme_target_close(t);
}

static void expect_status(const struct nvme_cpl *cpl, uint8_t sct, uint8_t sc)
{
    if (cpl->err || cpl->sct != sct || cpl->sc != sc) {
        char s[128];
        fprintf(stderr, "got %s, want %s\n", nvme_cpl_str(cpl, s, sizeof(s)), nvme_status_name(sct, sc));
        abort();
    }
}

static void test_statuses(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=16MiB&ncap=1MiB&lbads=512&mdts=64KiB&mqes=256&nioq=4");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 256 * KIB, &d), 0);
    uint8_t *b = nvme_dma_vaddr(d);
    struct nvme_qpair *q;
    struct nvme_qpair_opts o = {.depth = 8, .timeout_ms = 2000};
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    struct nvme_cpl cpl = {0};
    struct nvme_sqe s;

    memset(&s, 0, sizeof(s));
    s.opc = 0x7e;
    s.nsid = 1;
    T_EQ(t_raw(q, &s, b, 512, &cpl), 0); /* an opcode that may move data: given a buffer (test_driver_iommu.c) */
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
    T_CHECK(cpl.dnr);

    memset(&s, 0, sizeof(s));
    s.opc = NVME_CMD_READ;
    s.nsid = 1;
    s.flags = 1u << NVME_SQE_PSDT_SHIFT; /* SGL: refused by the driver, whose IOMMU checks PRPs only */
    T_EQ(t_raw(q, &s, b, 512, &cpl), -EINVAL);
    s.flags = 1u; /* FUSE: the controller's Invalid Field */
    T_EQ(t_raw(q, &s, b, 512, &cpl), 0);
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);

    s.flags = 0;
    s.nsid = 9;
    T_EQ(t_raw(q, &s, b, 512, &cpl), 0);
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_INVALID_NS);

    s.nsid = 1;
    s.cdw10 = (uint32_t)nvme_ns_nsze(ns);
    T_EQ(t_raw(q, &s, b, 512, &cpl), 0);
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);

    /* PRP1 not dword aligned (bypassing the driver's own PRP building: len 0 keeps the caller's PRPs) */
    s.cdw10 = 0;
    s.prp1 = (uint64_t)(uintptr_t)(b + 2);
    T_EQ(t_raw(q, &s, NULL, 0, &cpl), 0);
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
    /* PRP2 with an offset for a two-page transfer */
    s.prp1 = (uint64_t)(uintptr_t)b;
    s.prp2 = (uint64_t)(uintptr_t)(b + PAGE + 8);
    s.cdw12 = 2 * PAGE / 512 - 1;
    T_EQ(t_raw(q, &s, NULL, 0, &cpl), 0);
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET);
    /* null PRP: in no DMA buffer, refused by the driver's IOMMU before it reaches the controller */
    s.prp1 = 0;
    s.prp2 = 0;
    s.cdw12 = 0;
    T_EQ(t_raw(q, &s, NULL, 0, &cpl), -EFAULT);
    T_EQ(nvme_qpair_outstanding(q), 0);

    /* Capacity Exceeded: ncap = 1 MiB of allocated space; the second distinct MiB cannot be written */
    T_EQ(t_io(q, ns, NVME_CMD_WRITE, 0, 1, b, 512, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_EQ(t_io(q, ns, NVME_CMD_WRITE, 8 * MIB / 512, 1, b, 512, &cpl), 0);
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_CAP_EXCEEDED);

    /* admin: queue creation/deletion checks */
    struct nvme_dma *qm;
    T_EQ(nvme_dma_alloc(t, 64 * KIB, &qm), 0);
    uint64_t qaddr = (uint64_t)(uintptr_t)nvme_dma_vaddr(qm);
    struct nvme_sqe a = {
        .opc = NVME_ADM_CREATE_CQ, .prp1 = qaddr, .cdw10 = NVME_CREATE_Q_CDW10(0, 8), .cdw11 = NVME_CREATE_Q_PC};
    T_EQ(nvme_ctrl_admin(c, &a, NULL, 0, &cpl, 1000), 0);
    expect_status(&cpl, NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    a.cdw10 = NVME_CREATE_Q_CDW10(60000, 8);
    T_EQ(nvme_ctrl_admin(c, &a, NULL, 0, &cpl, 1000), 0);
    expect_status(&cpl, NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    int qid = nvme_ctrl_qid_alloc(c);
    T_CHECK(qid > 0);
    a.cdw10 = NVME_CREATE_Q_CDW10(qid, 4096);
    T_EQ(nvme_ctrl_admin(c, &a, NULL, 0, &cpl, 1000), 0);
    expect_status(&cpl, NVME_SCT_CMD_SPECIFIC, NVME_SC_QUEUE_SIZE);
    a.cdw10 = NVME_CREATE_Q_CDW10(qid, 8);
    a.cdw11 = NVME_CREATE_Q_PC | NVME_CREATE_CQ_IEN | (5u << NVME_CREATE_CQ_IV_SHIFT);
    T_EQ(nvme_ctrl_admin(c, &a, NULL, 0, &cpl, 1000), 0);
    expect_status(&cpl, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_VECTOR);
    /* SQ on a CQ that does not exist */
    struct nvme_sqe sq = {.opc = NVME_ADM_CREATE_SQ,
                          .prp1 = qaddr,
                          .cdw10 = NVME_CREATE_Q_CDW10(qid, 8),
                          .cdw11 = NVME_CREATE_Q_PC | ((uint32_t)qid << NVME_CREATE_SQ_CQID_SHIFT)};
    T_EQ(nvme_ctrl_admin(c, &sq, NULL, 0, &cpl, 1000), 0);
    expect_status(&cpl, NVME_SCT_CMD_SPECIFIC, NVME_SC_CQ_INVALID);
    /* deleting the CQ of a live qpair while its SQ exists */
    struct nvme_sqe del = {.opc = NVME_ADM_DELETE_CQ, .cdw10 = nvme_qpair_qid(q)};
    T_EQ(nvme_ctrl_admin(c, &del, NULL, 0, &cpl, 1000), 0);
    expect_status(&cpl, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_QUEUE_DELETION);
    nvme_ctrl_qid_free(c, (uint16_t)qid);
    /* Get Log Page with an unknown log identifier */
    uint8_t logbuf[512];
    struct nvme_sqe lp = {
        .opc = NVME_ADM_GET_LOG_PAGE, .nsid = UINT32_MAX, .cdw10 = 0x70u | ((uint32_t)(sizeof(logbuf) / 4 - 1) << 16)};
    T_EQ(nvme_ctrl_admin(c, &lp, logbuf, sizeof(logbuf), &cpl, 1000), 0);
    expect_status(&cpl, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_LOG_PAGE);
    /* and a good one: SMART log through the bounce buffer (not DMA memory) */
    lp.cdw10 = NVME_LOGPAGE_SMART | ((uint32_t)(sizeof(logbuf) / 4 - 1) << 16);
    T_EQ(nvme_ctrl_admin(c, &lp, logbuf, sizeof(logbuf), &cpl, 1000), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_EQ(nvme_ctrl_admin(c, &lp, logbuf, NVME_ADMIN_BUF_SIZE + 1, &cpl, 1000), -E2BIG);

    /* the queue still works after all that */
    rw_check(q, ns, b, b + 128 * KIB, 0, 0, 3, 4 * KIB, 5);
    T_STREQ(nvme_status_name(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE), "LBA Out of Range");
    nvme_dma_free(qm);
    T_EQ(nvme_qpair_destroy(q), 0);
    nvme_dma_free(d);
    nvme_target_close(t);
}

static void test_commands(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=4MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 64 * KIB, &d), 0);
    uint8_t *b = nvme_dma_vaddr(d);
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, NULL, &q), 0);
    T_EQ(nvme_qpair_depth(q), NVME_QPAIR_DEFAULT_DEPTH);
    struct nvme_cpl cpl = {0};
    uint8_t zero[8 * 512] = {0};

    rw_check(q, ns, b, b + 32 * KIB, 0, 0, 100, 8 * 512, 11);
    T_EQ(t_io(q, ns, NVME_CMD_WRITE_ZEROES, 102, 2, NULL, 0, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_EQ(t_io(q, ns, NVME_CMD_READ, 100, 8, b + 32 * KIB, 8 * 512, &cpl), 0);
    T_CHECK(memcmp(b + 32 * KIB + 2 * 512, zero, 2 * 512) == 0);
    T_CHECK(memcmp(b + 32 * KIB, b, 2 * 512) == 0);
    T_CHECK(memcmp(b + 32 * KIB + 4 * 512, b + 4 * 512, 4 * 512) == 0);

    struct nvme_dsm_range *r = (struct nvme_dsm_range *)(b + 16 * KIB);
    memset(r, 0, 2 * sizeof(*r));
    r[0].slba = 104;
    r[0].nlb = 2;
    r[1].slba = 106;
    r[1].nlb = 1;
    T_EQ(t_io(q, ns, NVME_CMD_DSM, 0, 2, r, 2 * sizeof(*r), &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_EQ(t_io(q, ns, NVME_CMD_READ, 100, 8, b + 32 * KIB, 8 * 512, &cpl), 0);
    T_CHECK(memcmp(b + 32 * KIB + 4 * 512, zero, 3 * 512) == 0); /* deallocated blocks read as zeros here */
    T_CHECK(memcmp(b + 32 * KIB + 7 * 512, b + 7 * 512, 512) == 0);
    T_EQ(t_io(q, ns, NVME_CMD_FLUSH, 0, 0, NULL, 0, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_DSM, 0, 0, r, 0, NULL, NULL), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_DSM, 0, 257, r, 257 * 16, NULL, NULL), -EINVAL);

    /* sync helper with a non-DMA buffer (bounced) */
    uint8_t wbuf[2048], rbuf[2048];
    t_fill(wbuf, sizeof(wbuf), 77);
    T_EQ(nvme_ns_io_sync(c, ns, NVME_CMD_WRITE, 500, 4, wbuf, sizeof(wbuf), &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_EQ(nvme_ns_io_sync(c, ns, NVME_CMD_READ, 500, 4, rbuf, sizeof(rbuf), &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_CHECK(memcmp(wbuf, rbuf, sizeof(rbuf)) == 0);
    T_EQ(nvme_ns_io_sync(c, ns, NVME_CMD_READ, nvme_ns_nsze(ns), 1, rbuf, 512, &cpl), -ERANGE);
    T_EQ(nvme_qpair_destroy(q), 0);
    nvme_dma_free(d);
    nvme_target_close(t);
}

static void test_timeout_reset(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=4MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_emu_set *set = nvme_target_backend(t);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 64 * KIB, &d), 0);
    uint8_t *b = nvme_dma_vaddr(d);
    struct nvme_qpair *q;
    struct nvme_qpair_opts o = {.depth = 8, .timeout_ms = 100};
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    struct nvme_cpl cpl = {0};

    /* a dropped completion times out */
    struct nvme_emu_fault f = {.kind = NVME_EMU_FAULT_DROP, .qid = nvme_qpair_qid(q), .nth = 1, .count = 1};
    T_EQ(nvme_emu_inject(set, 0, &f), 0);
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, b, 512, &cpl), 0);
    T_EQ(cpl.err, -ETIMEDOUT);
    T_EQ(nvme_qpair_outstanding(q), 0);
    /* ... also while other commands keep completing: polls that deliver read the expiry clock too (once in
     * NVME_POLL_CLOCK_EVERY), so the dropped one expires though no poll comes back empty */
    struct t_wait lost = {0};
    T_EQ(nvme_emu_inject(set, 0, &f), 0);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 1, b, 512, t_cb, &lost), 0);
    uint64_t polls = 0;
    const uint64_t poll_max = 20000000ull; /* far beyond 100 ms of polls; the loop ends at the expiry */
    while (!lost.done && polls < poll_max) {
        struct t_wait ok = {0};
        if (nvme_qpair_submit(q, ns, NVME_CMD_READ, 8, 1, b + 4096, 512, t_cb, &ok))
            break;
        int got = nvme_qpair_poll(q, 0);
        polls++;
        if (got <= 0 || !ok.done) /* every poll delivers the command just submitted */
            break;
    }
    printf("a dropped command expired after %llu polls that each delivered another\n", (unsigned long long)polls);
    T_CHECK(polls > 1);
    T_EQ(lost.done, 1);
    T_EQ(lost.cpl.err, -ETIMEDOUT);
    T_EQ(nvme_qpair_outstanding(q), 0);
    /* an injected status comes back as that status */
    f.kind = NVME_EMU_FAULT_STATUS;
    f.sct = NVME_SCT_MEDIA;
    f.sc = NVME_SC_UNRECOVERED_READ;
    f.dnr = true;
    T_EQ(nvme_emu_inject(set, 0, &f), 0);
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, b, 512, &cpl), 0);
    expect_status(&cpl, NVME_SCT_MEDIA, NVME_SC_UNRECOVERED_READ);
    T_CHECK(cpl.dnr);
    /* a delayed completion inside the timeout arrives */
    f.kind = NVME_EMU_FAULT_DELAY;
    f.delay_ms = 20;
    T_EQ(nvme_emu_inject(set, 0, &f), 0);
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, b, 512, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));

    /* controller fatal: commands time out, admin reports it, reset brings it back */
    f.kind = NVME_EMU_FAULT_CFS;
    T_EQ(nvme_emu_inject(set, 0, &f), 0);
    T_CHECK(nvme_csts_cfs(nvme_ctrl_csts(c)));
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, b, 512, &cpl), 0);
    T_EQ(cpl.err, -ETIMEDOUT);
    struct nvme_sqe id = {.opc = NVME_ADM_IDENTIFY, .cdw10 = NVME_CNS_CTRL};
    uint8_t idbuf[NVME_IDENTIFY_SIZE];
    int rc = nvme_ctrl_admin(c, &id, idbuf, sizeof(idbuf), &cpl, 200);
    T_CHECK(rc == -EIO || rc == -ETIMEDOUT);

    /* keep one command in flight across the reset: it must come back as -ENXIO */
    struct t_wait w = {0};
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 1, b, 512, t_cb, &w), 0);
    T_EQ(nvme_ctrl_reset(c), 0);
    T_EQ(nvme_csts_cfs(nvme_ctrl_csts(c)), 0);
    T_EQ(nvme_qpair_poll(q, 0), -ENXIO);
    T_EQ(w.done, 1);
    T_EQ(w.cpl.err, -ENXIO);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 1, b, 512, NULL, NULL), -ENXIO);
    T_EQ(nvme_qpair_destroy(q), 0);
    /* the same namespace handle works on a new qpair */
    T_CHECK(nvme_ctrl_ns(c, 1) == ns);
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    rw_check(q, ns, b, b + 32 * KIB, 0, 0, 7, 4096, 3);
    T_EQ(nvme_qpair_destroy(q), 0);
    T_EQ(nvme_ctrl_admin(c, &id, idbuf, sizeof(idbuf), &cpl, 1000), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    uint8_t buf[512];
    T_EQ(nvme_ns_io_sync(c, ns, NVME_CMD_READ, 0, 1, buf, sizeof(buf), &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    nvme_dma_free(d);
    nvme_target_close(t);
}

/* Out-of-order completions: CID matching, not position, decides which callback runs. */
struct ooo_ctx {
    uint32_t expect_tag[64];
    uint32_t done;
    uint32_t bad;
};
struct ooo_arg {
    struct ooo_ctx *ctx;
    uint32_t tag;
    uint8_t *buf;
};

static void ooo_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct ooo_arg *a = arg;
    a->ctx->done++;
    uint32_t got;
    memcpy(&got, a->buf, sizeof(got));
    if (!nvme_cpl_ok(cpl) || got != a->tag)
        a->ctx->bad++;
}

static void test_ooo(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=4MiB&lbads=4096&ooo=1");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 64 * PAGE, &d), 0);
    uint8_t *b = nvme_dma_vaddr(d);
    struct nvme_cpl cpl = {0};
    struct nvme_qpair *q;
    struct nvme_qpair_opts o = {.depth = 32, .batch = 16};
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    for (uint32_t i = 0; i < 31; i++) { /* LBA i holds tag i */
        uint32_t tag = 1000 + i;
        memcpy(b, &tag, sizeof(tag));
        T_EQ(t_io(q, ns, NVME_CMD_WRITE, i, 1, b, PAGE, &cpl), 0);
        T_CHECK(nvme_cpl_ok(&cpl));
    }
    struct ooo_ctx ctx = {0};
    struct ooo_arg args[31];
    for (int round = 0; round < 10; round++) {
        ctx.done = 0;
        for (uint32_t i = 0; i < 31; i++) {
            args[i] = (struct ooo_arg){&ctx, 1000 + i, b + (i + 1) * PAGE};
            T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, i, 1, args[i].buf, PAGE, ooo_cb, &args[i]), 0);
        }
        while (ctx.done < 31)
            T_CHECK(nvme_qpair_poll(q, 0) >= 0);
    }
    T_EQ(ctx.bad, 0);
    T_EQ(nvme_qpair_destroy(q), 0);
    nvme_dma_free(d);
    nvme_target_close(t);
}

/* Several threads, each with its own qpair on the same controllers, read-after-write at random LBAs. */
struct thr_arg {
    struct nvme_target *t;
    unsigned id;
    int fails;
};

static void *thr_main(void *p)
{
    struct thr_arg *a = p;
    struct nvme_ctrl *c = nvme_target_ctrl(a->t, a->id % nvme_target_nctrl(a->t));
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *d;
    if (nvme_dma_alloc(a->t, 64 * KIB, &d)) {
        a->fails++;
        return NULL;
    }
    uint8_t *w = nvme_dma_vaddr(d), *r = w + 32 * KIB;
    struct nvme_qpair *q;
    struct nvme_qpair_opts o = {.depth = 16};
    if (nvme_qpair_create(c, &o, &q)) {
        a->fails++;
        nvme_dma_free(d);
        return NULL;
    }
    uint64_t x = 0x1234567 + a->id;
    uint64_t region = nvme_ns_nsze(ns) / 4; /* thread-private LBA range: id-th quarter */
    for (int i = 0; i < 200; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t nlb = 1 + (uint32_t)((x >> 33) % 16);
        uint64_t slba = (a->id / nvme_target_nctrl(a->t)) * region + (x >> 40) % (region - nlb);
        size_t len = (size_t)nlb * nvme_ns_lba_size(ns);
        struct nvme_cpl cpl = {0};
        t_fill(w, len, x);
        if (t_io(q, ns, NVME_CMD_WRITE, slba, nlb, w, len, &cpl) || !nvme_cpl_ok(&cpl) ||
            t_io(q, ns, NVME_CMD_READ, slba, nlb, r, len, &cpl) || !nvme_cpl_ok(&cpl) || memcmp(w, r, len))
            a->fails++;
    }
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    return NULL;
}

static void test_threads(void)
{
    struct nvme_target *t = t_open("emu://?ndev=2&nsze=8MiB&lbads=512");
    enum { NTHR = 4 };
    pthread_t th[NTHR];
    struct thr_arg args[NTHR];
    for (unsigned i = 0; i < NTHR; i++) {
        args[i] = (struct thr_arg){t, i, 0};
        T_EQ(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
    }
    for (unsigned i = 0; i < NTHR; i++) {
        pthread_join(th[i], NULL);
        T_EQ(args[i].fails, 0);
    }
    nvme_target_close(t);
}

/* Leaks on purpose: close must clean up qpairs and DMA buffers the caller forgot. */
static void test_close_cleans_up(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=1MiB");
    struct nvme_qpair *q;
    struct nvme_dma *d;
    T_EQ(nvme_qpair_create(nvme_target_ctrl(t, 0), NULL, &q), 0);
    T_EQ(nvme_dma_alloc(t, 4096, &d), 0);
    nvme_target_close(t);
}

int main(void)
{
    RUN_CASE(test_bringup);
    RUN_CASE(test_small_mqes);
    RUN_CASE(test_bad_uris);
    RUN_CASE(test_rw_and_prp);
    RUN_CASE(test_wrap_full);
    RUN_CASE(test_statuses);
    RUN_CASE(test_commands);
    RUN_CASE(test_timeout_reset);
    RUN_CASE(test_ooo);
    RUN_CASE(test_threads);
    RUN_CASE(test_close_cleans_up);
    return CHECK_DONE("test_driver_emu");
}
