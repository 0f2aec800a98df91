/* SPDX-License-Identifier: BSD-3-Clause */
/* test_emu_cmds.c — admin and NVM command semantics of emu://: every status code, data, phases, CQ full. */
#include <time.h>

#include "emu_testhost.h"

#define GEN(sc) TH_ST(NVME_SCT_GENERIC, sc)
#define CSP(sc) TH_ST(NVME_SCT_CMD_SPECIFIC, sc)

static void test_queue_management(void)
{
    struct th t;
    th_open(&t, "emu://?nioq=4&mqes=256");
    CHECK(th_enable(&t, 16));
    /* Number of Queues: ask for 16/16, get nioq = 4 */
    struct nvme_sqe c = {.opc = NVME_ADM_SET_FEATURES, .cdw10 = NVME_FEAT_NUM_QUEUES, .cdw11 = NVME_NUM_QUEUES(16, 16)};
    struct nvme_cqe e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(nvme_num_queues_nsq(e.cdw0), 4);
    CHECK_EQ(nvme_num_queues_ncq(e.cdw0), 4);
    c.cdw11 = 0xffffffffu;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_FIELD));
    c = (struct nvme_sqe){.opc = NVME_ADM_GET_FEATURES, .cdw10 = NVME_FEAT_NUM_QUEUES};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(nvme_num_queues_nsq(e.cdw0), 4);
    c.cdw10 = 0x77; /* unknown feature */
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_FIELD));

    /* Create I/O CQ validation */
    e = th_create_cq(&t, 0, 16);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));
    e = th_create_cq(&t, 5, 16);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));
    e = th_create_cq(&t, 1, 257);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QUEUE_SIZE));
    e = th_create_cq(&t, 1, 1);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QUEUE_SIZE));
    void *mis = th_alloc(2 * TH_PAGE);
    c = (struct nvme_sqe){.opc = NVME_ADM_CREATE_CQ,
                          .prp1 = (uintptr_t)mis + 512,
                          .cdw10 = NVME_CREATE_Q_CDW10(1, 16),
                          .cdw11 = NVME_CREATE_Q_PC};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_PRP_OFFSET));
    c.prp1 = (uintptr_t)mis;
    c.cdw11 = 0; /* not physically contiguous while CAP.CQR = 1 */
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_FIELD));
    c.cdw11 = NVME_CREATE_Q_PC | NVME_CREATE_CQ_IEN | (3u << NVME_CREATE_CQ_IV_SHIFT);
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_INVALID_VECTOR));
    th_free(mis);
    e = th_create_cq(&t, 1, 16);
    CHECK_EQ(th_status(&e), 0);
    e = th_create_cq(&t, 1, 16); /* exists */
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));
    /* Set Features Number of Queues after queues exist: sequence error */
    c = (struct nvme_sqe){.opc = NVME_ADM_SET_FEATURES, .cdw10 = NVME_FEAT_NUM_QUEUES, .cdw11 = NVME_NUM_QUEUES(2, 2)};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_CMD_SEQ_ERROR));

    /* Create I/O SQ validation */
    e = th_create_sq(&t, 1, 16, 2); /* CQ 2 in range, not created */
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_CQ_INVALID));
    e = th_create_sq(&t, 1, 16, 0); /* the admin CQ: Invalid Queue Identifier (CQID field) */
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));
    e = th_create_sq(&t, 1, 16, 5); /* beyond the 4 CQs allocated */
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));
    e = th_create_sq(&t, 0, 16, 1);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));
    e = th_create_sq(&t, 1, 300, 1);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QUEUE_SIZE));
    e = th_create_sq(&t, 1, 16, 1);
    CHECK_EQ(th_status(&e), 0);
    e = th_create_sq(&t, 1, 16, 1);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));

    /* Delete: CQ with an SQ -> Invalid Queue Deletion; unknown ids -> Invalid Queue Identifier */
    c = (struct nvme_sqe){.opc = NVME_ADM_DELETE_CQ, .cdw10 = 1};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_INVALID_QUEUE_DELETION));
    c.cdw10 = 0;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));
    c = (struct nvme_sqe){.opc = NVME_ADM_DELETE_SQ, .cdw10 = 3};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_QID_INVALID));
    c.cdw10 = 1;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    c = (struct nvme_sqe){.opc = NVME_ADM_DELETE_CQ, .cdw10 = 1};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);

    /* admin odds and ends */
    c = (struct nvme_sqe){.opc = 0x7f};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_OPCODE));
    c = (struct nvme_sqe){.opc = NVME_ADM_IDENTIFY, .flags = 1, .cdw10 = NVME_CNS_CTRL};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_FIELD));
    c = (struct nvme_sqe){.opc = NVME_ADM_ABORT, .cdw10 = 0 | (5u << 16)};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(e.cdw0 & 1, 1); /* not aborted */
    c = (struct nvme_sqe){.opc = NVME_ADM_KEEP_ALIVE};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    th_close(&t);
}

/* The rules SPDK's nvme_compliance checks (issue 35), in-process, so that none can regress without SPDK:
 * Identify CNS 03h, the Firmware Slot Information log, interrupt vectors of Create I/O CQ, the Keep Alive
 * Timer and Host Behavior Support features. */
static void test_compliance_rules(void)
{
    struct th t;
    th_open(&t, "emu://?nioq=4&mqes=256");
    CHECK(th_enable(&t, 16));
    uint8_t *buf = th_alloc(TH_PAGE);

    /* Identify CNS 03h: the EUI-64 and the NGUID of Identify Namespace, as descriptors */
    struct nvme_sqe c = {.opc = NVME_ADM_IDENTIFY, .nsid = 1, .prp1 = (uintptr_t)buf, .cdw10 = NVME_CNS_NS};
    struct nvme_cqe e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    struct nvme_id_ns ns;
    memcpy(&ns, buf, sizeof(ns));
    CHECK(ns.ncap != 0);
    memset(buf, 0x5a, TH_PAGE);
    c.cdw10 = NVME_CNS_NS_DESC_LIST;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(buf[0], 1); /* NIDT EUI-64 */
    CHECK_EQ(buf[1], 8);
    CHECK(memcmp(buf + 4, ns.eui64, 8) == 0);
    CHECK_EQ(buf[12], 2); /* NIDT NGUID */
    CHECK_EQ(buf[13], 16);
    CHECK(memcmp(buf + 16, ns.nguid, 16) == 0);
    CHECK_EQ(buf[32], 0); /* end of the list */
    c.nsid = 0;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_NS));
    c.nsid = 2;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_NS));

    /* Firmware Slot Information (mandatory log page): slot 1 active, holding Identify's FR */
    c = (struct nvme_sqe){.opc = NVME_ADM_IDENTIFY, .prp1 = (uintptr_t)buf, .cdw10 = NVME_CNS_CTRL};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    struct nvme_id_ctrl ic;
    memcpy(&ic, buf, sizeof(ic));
    uint16_t kas;
    memcpy(&kas, buf + 320, sizeof(kas));
    CHECK_EQ(kas, 1); /* Keep Alive supported, 100 ms granularity */
    c = (struct nvme_sqe){
        .opc = NVME_ADM_GET_LOG_PAGE, .prp1 = (uintptr_t)buf, .cdw10 = NVME_LOGPAGE_FW_SLOT | ((512u / 4 - 1) << 16)};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(buf[0] & 7, 1);
    CHECK(memcmp(buf + 8, ic.fr, NVME_FR_LEN) == 0);
    c.cdw12 = 512 + 4; /* offset past the page */
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_FIELD));
    c.cdw12 = 4; /* inside: the rest reads as zero */
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK(memcmp(buf + 4, ic.fr, NVME_FR_LEN) == 0);

    /* interrupt vectors: IV below the host's vector count (1 in-process, the MSI-X table over vfio-user) */
    CHECK_EQ(nvme_emu_ctrl_set_vectors(t.set, 0, 0), -EINVAL);
    CHECK_EQ(nvme_emu_ctrl_set_vectors(t.set, 0, NVME_EMU_MAX_VECTORS + 1), -EINVAL);
    CHECK_EQ(nvme_emu_ctrl_set_vectors(t.set, 1, 4), -EINVAL); /* no controller 1 */
    CHECK_EQ(nvme_emu_ctrl_set_vectors(t.set, 0, 4), 0);
    void *cqm = th_alloc(TH_PAGE);
    c = (struct nvme_sqe){.opc = NVME_ADM_CREATE_CQ,
                          .prp1 = (uintptr_t)cqm,
                          .cdw10 = NVME_CREATE_Q_CDW10(1, 16),
                          .cdw11 = NVME_CREATE_Q_PC | NVME_CREATE_CQ_IEN | (4u << NVME_CREATE_CQ_IV_SHIFT)};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_INVALID_VECTOR));
    c.cdw11 = NVME_CREATE_Q_PC | NVME_CREATE_CQ_IEN | (3u << NVME_CREATE_CQ_IV_SHIFT);
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    c = (struct nvme_sqe){.opc = NVME_ADM_DELETE_CQ, .cdw10 = 1};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    th_free(cqm);

    /* Host Behavior Support: 512 bytes, ACRE (byte 0) kept, reserved bytes refused */
    memset(buf, 0x5a, TH_PAGE);
    c = (struct nvme_sqe){.opc = NVME_ADM_GET_FEATURES, .prp1 = (uintptr_t)buf, .cdw10 = 0x16};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    for (unsigned i = 0; i < 512; i++)
        CHECK_EQ(buf[i], 0);
    buf[0] = 1;
    c.opc = NVME_ADM_SET_FEATURES;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    buf[7] = 1;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_FIELD));
    memset(buf, 0, TH_PAGE);
    c.opc = NVME_ADM_GET_FEATURES;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(buf[0], 1);

    /* Keep Alive Timer: off (0) at reset, KATO rounded up to 100 ms, a Keep Alive restarts it, and without
     * one for longer than KATO the controller stops with CSTS.CFS */
    c = (struct nvme_sqe){.opc = NVME_ADM_GET_FEATURES, .cdw10 = 0x0f};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(e.cdw0, 0);
    c = (struct nvme_sqe){.opc = NVME_ADM_SET_FEATURES, .cdw10 = 0x0f, .cdw11 = 150};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    c = (struct nvme_sqe){.opc = NVME_ADM_GET_FEATURES, .cdw10 = 0x0f};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(e.cdw0, 200);
    for (int i = 0; i < 6; i++) { /* 6 x 50 ms, each followed by a Keep Alive: no timeout */
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        c = (struct nvme_sqe){.opc = NVME_ADM_KEEP_ALIVE};
        e = th_cmd(&t, 0, c);
        CHECK_EQ(th_status(&e), 0);
    }
    CHECK_EQ(th_r32(&t, NVME_REG_CSTS) & NVME_CSTS_CFS, 0);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    struct nvme_cqe none;
    CHECK(!th_poll1(&t, 0, &none, false)); /* the host polls: the timer is looked at */
    CHECK(th_r32(&t, NVME_REG_CSTS) & NVME_CSTS_CFS);
    th_w32(&t, NVME_REG_CC, 0); /* CC.EN 1 -> 0 -> 1: CFS clear, KATO back to 0 */
    CHECK(th_wait_rdy(&t, false));
    CHECK(th_enable(&t, 16));
    CHECK_EQ(th_r32(&t, NVME_REG_CSTS) & NVME_CSTS_CFS, 0);
    c = (struct nvme_sqe){.opc = NVME_ADM_GET_FEATURES, .cdw10 = 0x0f};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(e.cdw0, 0);

    th_free(buf);
    th_close(&t);
}

static void test_io_status_and_data(void)
{
    struct th t;
    th_open(&t, "emu://?nsze=8MiB&ncap=2MiB&mdts=16KiB&nioq=2");
    CHECK(th_enable(&t, 16));
    th_create_ioq(&t, 1, 64);
    uint8_t *buf = th_alloc(8 * TH_PAGE), *rd = th_alloc(8 * TH_PAGE);
    uint64_t *list = th_alloc(TH_PAGE);
    struct nvme_cqe e = {0};

    /* write 4 pages through a PRP list (buffer offset 512: 5 pages touched), read back */
    for (unsigned i = 0; i < 8 * TH_PAGE; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    uint8_t *src = buf + 512;
    list[0] = (uintptr_t)buf + TH_PAGE;
    list[1] = (uintptr_t)buf + 2 * TH_PAGE;
    list[2] = (uintptr_t)buf + 3 * TH_PAGE;
    list[3] = (uintptr_t)buf + 4 * TH_PAGE;
    e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, 100, 32, src, (uintptr_t)list));
    CHECK_EQ(th_status(&e), 0);
    uint64_t *rlist = th_alloc(TH_PAGE);
    rlist[0] = (uintptr_t)rd + TH_PAGE;
    rlist[1] = (uintptr_t)rd + 2 * TH_PAGE;
    rlist[2] = (uintptr_t)rd + 3 * TH_PAGE;
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 100, 32, rd, (uintptr_t)rlist));
    CHECK_EQ(th_status(&e), 0);
    CHECK(memcmp(rd, src, 32 * 512) == 0);
    /* two pages: PRP2 is a data pointer */
    memset(rd, 0, 8 * TH_PAGE);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 100, 8, rd + 1024, (uintptr_t)rd + 2 * TH_PAGE));
    CHECK_EQ(th_status(&e), 0);
    CHECK(memcmp(rd + 1024, src, TH_PAGE - 1024) == 0);
    CHECK(memcmp(rd + 2 * TH_PAGE, src + TH_PAGE - 1024, 1024) == 0);
    /* 3 pages at an offset with PRP2 as a data pointer: the list was needed -> refused, not misread */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 100, 16, rd + 1024, (uintptr_t)rd + 2 * TH_PAGE));
    CHECK(th_status(&e) != 0);
    /* unwritten LBAs read as zeros */
    memset(rd, 0xaa, 512);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 5000, 1, rd, 0));
    CHECK_EQ(th_status(&e), 0);
    CHECK(rd[0] == 0 && rd[511] == 0);

    /* statuses */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 2, 0, 1, rd, 0));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_NS));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 0, 0, 1, rd, 0));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_NS));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, (8u << 20) / 512 - 1, 2, rd, (uintptr_t)rd + TH_PAGE));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_LBA_RANGE));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, UINT64_MAX - 1, 4, rd, 0));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_LBA_RANGE));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 33, rd, (uintptr_t)rlist)); /* 16.5 KiB > MDTS */
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_FIELD));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 1, rd + 2, 0)); /* PRP1 not dword aligned */
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_PRP_OFFSET));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 16, rd, (uintptr_t)rd + TH_PAGE + 8)); /* PRP2 data offset */
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_PRP_OFFSET));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 24, rd, (uintptr_t)rlist + 4)); /* list not qword aligned */
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_PRP_OFFSET));
    rlist[1] = (uintptr_t)rd + 2 * TH_PAGE + 16; /* list entry with an offset */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 24, rd, (uintptr_t)rlist));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_PRP_OFFSET));
    rlist[1] = 0; /* null entry */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 24, rd, (uintptr_t)rlist));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_DATA_XFER_ERROR));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 1, NULL, 0)); /* null PRP1 */
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_DATA_XFER_ERROR));
    struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, 0, 1, rd, 0);
    c.flags = NVME_SQE_PSDT_MASK; /* SGL: not supported */
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_FIELD));
    c = th_rw(0x7e, 1, 0, 1, rd, 0);
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_OPCODE));
    CHECK(nvme_cqe_dnr(e.status));
    c = th_rw(NVME_CMD_COMPARE, 1, 0, 1, rd, 0); /* not in ONCS */
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_OPCODE));
    /* DMA windows: memory the host did not map is refused and left untouched, a window unmapped
     * later too; with no window at all nothing is reachable */
    uint8_t *raw = th_alloc_raw(2 * TH_PAGE);
    memset(raw, 0x5a, 2 * TH_PAGE);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 1, raw, 0));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_DATA_XFER_ERROR));
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 16, rd, (uintptr_t)raw)); /* PRP2 page outside */
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_DATA_XFER_ERROR));
    CHECK(raw[0] == 0x5a && raw[TH_PAGE - 1] == 0x5a);
    CHECK_EQ(nvme_emu_dma_map(t.set, raw, 2 * TH_PAGE), 0);
    CHECK_EQ(nvme_emu_dma_map(t.set, raw + TH_PAGE, TH_PAGE), -EEXIST);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 1, raw, 0));
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(nvme_emu_dma_unmap(t.set, raw, TH_PAGE), -ENOENT);
    CHECK_EQ(nvme_emu_dma_unmap(t.set, raw, 2 * TH_PAGE), 0);
    memset(raw, 0x5a, 2 * TH_PAGE);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 1, raw, 0));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_DATA_XFER_ERROR));
    CHECK(raw[0] == 0x5a);
    free(raw);

    /* Capacity Exceeded: ncap = 2 MiB = 2 chunks; a third chunk cannot be allocated */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, (2u << 20) / 512, 1, buf, 0));
    CHECK_EQ(th_status(&e), 0);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, (5u << 20) / 512, 1, buf, 0));
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_CAP_EXCEEDED));

    /* Write Zeroes, DSM deallocate, Flush */
    c = th_rw(NVME_CMD_WRITE_ZEROES, 1, 100, 8, NULL, 0);
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_status(&e), 0);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 100, 16, rd, (uintptr_t)rd + TH_PAGE));
    CHECK(rd[0] == 0 && rd[8 * 512 - 1] == 0 && memcmp(rd + 8 * 512, src + 8 * 512, 8 * 512) == 0);
    c = th_rw(NVME_CMD_WRITE_ZEROES, 1, (8u << 20) / 512, 1, NULL, 0);
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_LBA_RANGE));
    struct nvme_dsm_range *r = th_alloc(TH_PAGE);
    r[0] = (struct nvme_dsm_range){.nlb = 8, .slba = 116};
    c = (struct nvme_sqe){.opc = NVME_CMD_DSM, .nsid = 1, .prp1 = (uintptr_t)r, .cdw10 = 0, .cdw11 = NVME_DSM_AD};
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_status(&e), 0);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 116, 8, rd, 0));
    CHECK(rd[0] == 0 && rd[8 * 512 - 1] == 0);
    r[1] = (struct nvme_dsm_range){.nlb = 8, .slba = 1ull << 40};
    c.cdw10 = 1;
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_LBA_RANGE));
    c = (struct nvme_sqe){.opc = NVME_CMD_FLUSH, .nsid = 1};
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_status(&e), 0);
    c.nsid = 9;
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_INVALID_NS));

    /* SMART log counts what we did; unknown log page is refused */
    uint8_t *log = th_alloc(TH_PAGE);
    c = (struct nvme_sqe){.opc = NVME_ADM_GET_LOG_PAGE,
                          .nsid = UINT32_MAX,
                          .prp1 = (uintptr_t)log,
                          .cdw10 = NVME_LOGPAGE_SMART | ((512u / 4 - 1) << 16)};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    uint64_t hrc, hwc;
    memcpy(&hrc, log + 64, 8);
    memcpy(&hwc, log + 80, 8);
    CHECK(hrc >= 5 && hwc >= 2);
    c.cdw10 = 0x42 | (127u << 16);
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), CSP(NVME_SC_INVALID_LOG_PAGE));
    c.cdw10 = NVME_LOGPAGE_ERROR | (15u << 16);
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);

    struct nvme_emu_qstats qs;
    CHECK_EQ(nvme_emu_queue_stats(t.set, 0, 1, &qs), 0);
    CHECK(qs.fetched >= 30 && qs.completed == qs.fetched && qs.errors >= 15);
    CHECK_EQ(nvme_emu_queue_stats(t.set, 0, 99, &qs), -EINVAL);
    th_free(buf), th_free(rd), th_free(list), th_free(rlist), th_free(r), th_free(log);
    th_close(&t);
}

/* SMART's host read / write command counts (all queues). */
static void smart_rw(struct th *t, uint64_t *hrc, uint64_t *hwc)
{
    uint8_t *log = th_alloc(TH_PAGE);
    struct nvme_sqe c = {.opc = NVME_ADM_GET_LOG_PAGE,
                         .nsid = UINT32_MAX,
                         .prp1 = (uintptr_t)log,
                         .cdw10 = NVME_LOGPAGE_SMART | ((512u / 4 - 1) << 16)};
    struct nvme_cqe e = th_cmd(t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    memcpy(hrc, log + 64, 8);
    memcpy(hwc, log + 80, 8);
    th_free(log);
}

/* Ring n commands on queue 1 and take their completions; the count of failed ones. */
static unsigned run_batch(struct th *t, const struct nvme_sqe *cmds, unsigned n)
{
    unsigned failed = 0;
    for (unsigned i = 0; i < n; i++) {
        struct nvme_sqe c = cmds[i];
        c.cid = t->next_cid++;
        th_queue(t, 1, &c);
    }
    th_ring(t, 1);
    for (unsigned i = 0; i < n; i++) {
        struct nvme_cqe e = {0};
        CHECK(th_poll(t, 1, &e));
        failed += th_status(&e) != 0;
    }
    return failed;
}

/* Queue statistics and SMART counts stay exact on both accountings of the fast path: doorbells of successful
 * reads and writes only (one counter a direction), a doorbell that mixes them with a flush and a failed read, and
 * doorbells of one command each (the one-command entry: a write, a failed read; a flush goes to the service). */
static void test_stats_exact(void)
{
    struct th t;
    th_open(&t, "emu://?nioq=2");
    CHECK(th_enable(&t, 8));
    th_create_ioq(&t, 1, 8);
    uint8_t *buf = th_alloc(TH_PAGE);
    uint64_t hrc0, hwc0, hrc, hwc;
    smart_rw(&t, &hrc0, &hwc0);
    const struct nvme_sqe rd = th_rw(NVME_CMD_READ, 1, 3, 1, buf, 0), wr = th_rw(NVME_CMD_WRITE, 1, 5, 2, buf, 0);
    const struct nvme_sqe reads[3] = {rd, rd, rd}, writes[2] = {wr, wr};
    struct nvme_sqe bad = rd;
    bad.cdw10 = UINT32_MAX; /* SLBA far beyond the namespace: LBA out of range */
    bad.cdw11 = 0;
    const struct nvme_sqe mixed[4] = {rd, (struct nvme_sqe){.opc = NVME_CMD_FLUSH, .nsid = 1}, bad, wr};
    CHECK_EQ(run_batch(&t, reads, 3), 0);
    CHECK_EQ(run_batch(&t, reads, 1), 0);
    CHECK_EQ(run_batch(&t, writes, 2), 0);
    CHECK_EQ(run_batch(&t, mixed, 4), 1);
    /* doorbells of one command (emu_sq_doorbell, QD 1's entry): a write, a failed read, a flush (the service) */
    CHECK_EQ(run_batch(&t, writes, 1), 0);
    CHECK_EQ(run_batch(&t, &bad, 1), 1);
    CHECK_EQ(run_batch(&t, &mixed[1], 1), 0);
    struct nvme_emu_qstats qs;
    CHECK_EQ(nvme_emu_queue_stats(t.set, 0, 1, &qs), 0);
    CHECK_EQ(qs.fetched, 13);
    CHECK_EQ(qs.completed, 13);
    CHECK_EQ(qs.errors, 2);
    smart_rw(&t, &hrc, &hwc);
    CHECK_EQ(hrc - hrc0, 5); /* 3 + 1 + the mixed batch's good read */
    CHECK_EQ(hwc - hwc0, 4);
    th_free(buf);
    th_close(&t);
}

/* Phase wrap, SQ head in CQEs, CQ full holds completions until the host frees slots. */
static void test_phase_and_cq_full(void)
{
    struct th t;
    th_open(&t, "emu://?nioq=2");
    CHECK(th_enable(&t, 8));
    th_create_ioq(&t, 1, 8);
    uint8_t *rd = th_alloc(TH_PAGE);
    struct nvme_cqe e = {0};
    /* 20 x queue depth commands, 7 at a time (N-1 rule) */
    for (int round = 0; round < 23; round++) {
        for (int i = 0; i < 7; i++) {
            struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, (uint64_t)i, 1, rd, 0);
            c.cid = (uint16_t)(round * 7 + i);
            th_queue(&t, 1, &c);
        }
        th_ring(&t, 1);
        for (int i = 0; i < 7; i++) {
            CHECK(th_poll(&t, 1, &e));
            CHECK_EQ(e.cid, round * 7 + i);
            CHECK_EQ(th_status(&e), 0);
        }
    }
    /* CQ full: a CQ of 4 entries behind an SQ of 8; submit 7 and consume without ringing the head doorbell */
    struct nvme_cqe ce = th_create_cq(&t, 2, 4);
    CHECK_EQ(th_status(&ce), 0);
    ce = th_create_sq(&t, 2, 8, 2);
    CHECK_EQ(th_status(&ce), 0);
    for (int i = 0; i < 7; i++) {
        struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, 0, 1, rd, 0);
        c.cid = (uint16_t)(100 + i);
        th_queue(&t, 2, &c);
    }
    th_ring(&t, 2);
    int got = 0;
    for (int spin = 0; spin < 10; spin++)
        got += th_poll1(&t, 2, &e, false);
    CHECK_EQ(got, 3); /* 4 entries, one slot always empty */
    struct nvme_emu_qstats qs;
    nvme_emu_queue_stats(t.set, 0, 2, &qs);
    CHECK(qs.cq_full_held >= 1);
    CHECK_EQ(nvme_emu_inflight(t.set, 0), 4);
    /* free the slots: the held completions arrive, in order */
    th_w32(&t, nvme_db_cq_off(2, t.dstrd), t.q[2].cqh);
    for (int i = 3; i < 7; i++) {
        CHECK(th_poll(&t, 2, &e));
        CHECK_EQ(e.cid, 100 + i);
    }
    CHECK_EQ(nvme_emu_inflight(t.set, 0), 0);
    th_free(rd);
    th_close(&t);
}

/* Command ID Conflict needs two outstanding commands with one CID: use a latency profile. */
static void test_cid_conflict(void)
{
    struct th t;
    th_open(&t, "emu://?lat=20ms");
    CHECK(th_enable(&t, 8));
    th_create_ioq(&t, 1, 16);
    uint8_t *rd = th_alloc(TH_PAGE);
    struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, 0, 1, rd, 0);
    c.cid = 7;
    th_queue(&t, 1, &c);
    th_queue(&t, 1, &c);
    th_ring(&t, 1);
    struct nvme_cqe e = {0};
    CHECK(th_poll(&t, 1, &e)); /* the conflict completes at once, the first after 20 ms */
    CHECK_EQ(e.cid, 7);
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_CID_CONFLICT));
    CHECK(th_poll(&t, 1, &e));
    CHECK_EQ(e.cid, 7);
    CHECK_EQ(th_status(&e), 0);
    /* the CID is free again */
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_status(&e), 0);
    th_free(rd);
    th_close(&t);
}

/* File backing: data persists across reopen; sparse file */
static void test_file_backing(void)
{
    char path[] = "/tmp/nvmelab-emu-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char uri[256];
    snprintf(uri, sizeof(uri), "emu://?backing=file:%s&nsze=64MiB&lbads=4096", path);
    uint8_t *buf = th_alloc(TH_PAGE), *rd = th_alloc(TH_PAGE);
    for (unsigned i = 0; i < TH_PAGE; i++)
        buf[i] = (uint8_t)(i ^ 0x5a);
    for (int pass = 0; pass < 2; pass++) {
        struct th t;
        th_open(&t, uri);
        CHECK(th_enable(&t, 8));
        th_create_ioq(&t, 1, 8);
        struct nvme_cqe e = {0};
        if (pass == 0) {
            e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, 1000, 1, buf, 0));
            CHECK_EQ(th_status(&e), 0);
        }
        e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 1000, 1, rd, 0));
        CHECK_EQ(th_status(&e), 0);
        CHECK(memcmp(rd, buf, TH_PAGE) == 0);
        th_close(&t);
    }
    unlink(path);
    th_free(buf), th_free(rd);
}

static uint64_t nuse_lbas(struct th *t, struct nvme_id_ns *id)
{
    struct nvme_sqe c = {.opc = NVME_ADM_IDENTIFY, .nsid = 1, .prp1 = (uintptr_t)id, .cdw10 = NVME_CNS_NS};
    struct nvme_cqe e = th_cmd(t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    return id->nuse;
}

/* Deallocate / Write Zeroes covering a whole 1 MiB chunk give its memory and its capacity back (NUSE drops,
 * ncap admits a new chunk); a partly covered chunk stays, zeroed. */
static void test_dealloc_frees_chunks(void)
{
    struct th t;
    th_open(&t, "emu://?nsze=8MiB&ncap=2MiB&nioq=1");
    CHECK(th_enable(&t, 16));
    th_create_ioq(&t, 1, 16);
    const uint32_t chunk_lbas = (1u << 20) / 512;
    uint8_t *buf = th_alloc(TH_PAGE), *rd = th_alloc(TH_PAGE);
    struct nvme_id_ns *id = th_alloc(sizeof(*id));
    memset(buf, 0xab, TH_PAGE);
    struct nvme_cqe e = {0};
    for (uint32_t ch = 0; ch < 2; ch++) {
        e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, ch * chunk_lbas + 8, 8, buf, 0));
        CHECK_EQ(th_status(&e), 0);
    }
    CHECK_EQ(nuse_lbas(&t, id), 2 * chunk_lbas);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, 2 * chunk_lbas, 8, buf, 0)); /* a third chunk: over ncap */
    CHECK_EQ(th_sc(&e), GEN(NVME_SC_CAP_EXCEEDED));
    /* DSM deallocate of chunk 0 whole */
    struct nvme_dsm_range *r = th_alloc(TH_PAGE);
    r[0] = (struct nvme_dsm_range){.nlb = chunk_lbas, .slba = 0};
    struct nvme_sqe c = {.opc = NVME_CMD_DSM, .nsid = 1, .prp1 = (uintptr_t)r, .cdw11 = NVME_DSM_AD};
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(nuse_lbas(&t, id), chunk_lbas);
    memset(rd, 0x55, TH_PAGE);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 8, 8, rd, 0));
    CHECK(th_status(&e) == 0 && rd[0] == 0 && rd[TH_PAGE - 1] == 0);
    /* the capacity came back: a third chunk fits now */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, 2 * chunk_lbas, 8, buf, 0));
    CHECK_EQ(th_status(&e), 0);
    /* Write Zeroes over chunk 1 whole plus a part of chunk 2: chunk 1 freed, chunk 2 kept */
    c = th_rw(NVME_CMD_WRITE_ZEROES, 1, chunk_lbas, chunk_lbas + 4, NULL, 0);
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(nuse_lbas(&t, id), chunk_lbas);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 2 * chunk_lbas, 8, rd, 0));
    CHECK(th_status(&e) == 0 && rd[0] == 0 && rd[4 * 512] == 0xab);
    /* a freed chunk takes data again */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, 8, 8, buf, 0));
    CHECK_EQ(th_status(&e), 0);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 8, 8, rd, 0));
    CHECK(th_status(&e) == 0 && memcmp(rd, buf, TH_PAGE) == 0);
    CHECK_EQ(nuse_lbas(&t, id), 2 * chunk_lbas);
    th_free(buf), th_free(rd), th_free(id), th_free(r);
    th_close(&t);
}

/* Reads of a RAM namespace with no live chunk take a shortcut (emu_ns_read: used_chunks == 0, no chunk-table
 * look-up) and must still fill the whole buffer with zeros; a write ends it for the whole namespace; a
 * deallocated chunk reads as zeros up to its last LBA both while another chunk is live (through the table,
 * not through the tagged pointer) and once none is (the shortcut again). */
static void test_read_zeros_and_dealloc_tag(void)
{
    struct th t;
    th_open(&t, "emu://?nsze=8MiB&nioq=1");
    CHECK(th_enable(&t, 16));
    th_create_ioq(&t, 1, 16);
    const uint32_t chunk_lbas = (1u << 20) / 512;
    uint8_t *buf = th_alloc(TH_PAGE), *rd = th_alloc(TH_PAGE), *zero = th_alloc(TH_PAGE);
    struct nvme_id_ns *id = th_alloc(sizeof(*id));
    memset(buf, 0xab, TH_PAGE);
    memset(rd, 0x55, TH_PAGE);
    struct nvme_cqe e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 3 * chunk_lbas + 5, 8, rd, 0));
    CHECK(th_status(&e) == 0 && memcmp(rd, zero, TH_PAGE) == 0);
    CHECK_EQ(nuse_lbas(&t, id), 0);
    /* one chunk written: its data comes back, and another chunk still reads as zeros */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, chunk_lbas + 8, 8, buf, 0));
    CHECK_EQ(th_status(&e), 0);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, chunk_lbas + 8, 8, rd, 0));
    CHECK(th_status(&e) == 0 && memcmp(rd, buf, TH_PAGE) == 0);
    memset(rd, 0x55, TH_PAGE);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 8, 8, rd, 0));
    CHECK(th_status(&e) == 0 && memcmp(rd, zero, TH_PAGE) == 0);
    /* chunk 0 written then deallocated whole while chunk 1 stays live: its last LBAs read as zeros */
    e = th_cmd(&t, 1, th_rw(NVME_CMD_WRITE, 1, chunk_lbas - 8, 8, buf, 0));
    CHECK_EQ(th_status(&e), 0);
    struct nvme_dsm_range *r = th_alloc(TH_PAGE);
    r[0] = (struct nvme_dsm_range){.nlb = chunk_lbas, .slba = 0};
    struct nvme_sqe c = {.opc = NVME_CMD_DSM, .nsid = 1, .prp1 = (uintptr_t)r, .cdw11 = NVME_DSM_AD};
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_status(&e), 0);
    memset(rd, 0x55, TH_PAGE);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, chunk_lbas - 1, 1, rd, 0));
    CHECK(th_status(&e) == 0 && memcmp(rd, zero, 512) == 0);
    /* chunk 1 deallocated too: nothing live, the shortcut reads zeros again */
    r[0] = (struct nvme_dsm_range){.nlb = chunk_lbas, .slba = chunk_lbas};
    e = th_cmd(&t, 1, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(nuse_lbas(&t, id), 0);
    memset(rd, 0x55, TH_PAGE);
    e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, chunk_lbas + 8, 8, rd, 0));
    CHECK(th_status(&e) == 0 && memcmp(rd, zero, TH_PAGE) == 0);
    th_free(buf), th_free(rd), th_free(zero), th_free(id), th_free(r);
    th_close(&t);
}

/* A queue whose ring leaves the DMA windows: the controller fails (CSTS.CFS) at its next doorbell instead
 * of fetching from or posting to memory it may no longer reach; a reset brings it back. */
static void test_ring_unmapped(void)
{
    struct th t;
    th_open(&t, "emu://?nioq=1");
    REQUIRE(th_enable(&t, 16));
    th_create_ioq(&t, 1, 16);
    uint8_t *buf = th_alloc(TH_PAGE);
    struct nvme_cqe e = th_cmd(&t, 1, th_rw(NVME_CMD_READ, 1, 0, 1, buf, 0));
    CHECK_EQ(th_status(&e), 0);
    th_unmap(t.q[1].sq);
    struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, 0, 1, buf, 0);
    th_submit(&t, 1, &c);
    CHECK(nvme_csts_cfs(th_r32(&t, NVME_REG_CSTS)));
    CHECK(!th_poll1(&t, 1, &e, true));
    th_w32(&t, NVME_REG_CC, 0); /* reset: CFS clears, then the controller comes up again */
    CHECK(th_wait_rdy(&t, false));
    CHECK(th_enable(&t, 16));
    th_free(buf);
    th_close(&t);
}

/* RAM namespaces that hold data are bounded by a share of the host's memory, named in the message. */
static void test_ram_budget(void)
{
    struct th t;
    char err[512];
    CHECK_EQ(th_open_err(&t, "emu://?nsze=4TiB", 0, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "namespaces total 4 TiB") && strstr(err, "75 % of this host's") && strstr(err, "ncap"));
    CHECK_EQ(th_open_err(&t, "emu://?nsze=256GiB&ndev=4&ncap=16MiB", 0, err, sizeof(err)), 0); /* thin: fine */
    th_close(&t);
    CHECK_EQ(th_open_err(&t, "emu://?nsze=4TiB&data=none", 0, err, sizeof(err)), 0); /* holds no data */
    th_close(&t);
}

int main(void)
{
    RUN_CASE(test_queue_management);
    RUN_CASE(test_compliance_rules);
    RUN_CASE(test_io_status_and_data);
    RUN_CASE(test_phase_and_cq_full);
    RUN_CASE(test_stats_exact);
    RUN_CASE(test_cid_conflict);
    RUN_CASE(test_file_backing);
    RUN_CASE(test_dealloc_frees_chunks);
    RUN_CASE(test_read_zeros_and_dealloc_tag);
    RUN_CASE(test_ram_budget);
    RUN_CASE(test_ring_unmapped);
    return CHECK_DONE("test_emu_cmds");
}
