/* SPDX-License-Identifier: BSD-3-Clause */
/* test_emu_fuzz.c — random 64-byte SQEs into the admin and I/O queues of emu://: no crash, every
 * command completes (except held Async Event Requests) with a status from the spec's lists.
 * DMA windows are registered so that wild PRPs are refused instead of dereferenced.
 * NVMELAB_FUZZ_N overrides the number of I/O commands (default 300000). */
#include "emu_testhost.h"

#define FUZZ_IO_DEFAULT 300000u
#define FUZZ_ADMIN      30000u
#define FUZZ_BUF_PAGES  64u
#define FUZZ_NSZE_LBAS  (16u << 20) / 512u

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static uint8_t *window;

static uint64_t rnd_ptr(void)
{
    switch (rnd() % 6) {
    case 0:
        return 0;
    case 1:
        return rnd(); /* wild */
    case 2:
        return (uintptr_t)window + (rnd() % FUZZ_BUF_PAGES) * TH_PAGE + (rnd() % TH_PAGE); /* any offset */
    case 3:
        return (uintptr_t)window + (rnd() % FUZZ_BUF_PAGES) * TH_PAGE + (rnd() % 8) * 4;
    default:
        return (uintptr_t)window + (rnd() % FUZZ_BUF_PAGES) * TH_PAGE; /* page aligned */
    }
}

static void random_sqe(struct nvme_sqe *c, bool admin)
{
    uint64_t *w = (uint64_t *)c;
    for (unsigned i = 0; i < NVME_SQE_SIZE / 8; i++)
        w[i] = rnd();
    static const uint8_t io_ops[] = {NVME_CMD_READ, NVME_CMD_WRITE, NVME_CMD_FLUSH, NVME_CMD_WRITE_ZEROES,
                                     NVME_CMD_DSM};
    static const uint8_t adm_ops[] = {NVME_ADM_IDENTIFY,     NVME_ADM_GET_LOG_PAGE, NVME_ADM_GET_FEATURES,
                                      NVME_ADM_SET_FEATURES, NVME_ADM_CREATE_CQ,    NVME_ADM_DELETE_SQ,
                                      NVME_ADM_DELETE_CQ,    NVME_ADM_ABORT,        NVME_ADM_KEEP_ALIVE};
    if (rnd() % 8) { /* mostly plausible opcodes and fields, sometimes fully random */
        c->opc = admin ? adm_ops[rnd() % sizeof(adm_ops)] : io_ops[rnd() % sizeof(io_ops)];
        c->flags = rnd() % 16 ? 0 : c->flags;
        c->nsid = (uint32_t)(rnd() % 4);
        c->prp1 = rnd_ptr();
        c->prp2 = rnd_ptr();
        if (!admin) {
            uint64_t slba = rnd() % 8 ? rnd() % FUZZ_NSZE_LBAS : rnd();
            c->cdw10 = (uint32_t)slba;
            c->cdw11 = rnd() % 2 ? (uint32_t)(slba >> 32) : (uint32_t)(rnd() % 8);
            c->cdw12 = (uint32_t)(rnd() % 4 ? rnd() % 64 : rnd() % 65536);
        } else {
            c->cdw10 = (uint32_t)(rnd() % 4 ? rnd() % 16 | ((rnd() % 256) << 16) : rnd());
            c->cdw11 = (uint32_t)(rnd() % 4 ? rnd() % 8 : rnd());
        }
    }
    if (admin && c->opc == NVME_ADM_CREATE_SQ)
        c->opc = NVME_ADM_KEEP_ALIVE; /* would hand the emulator a random ring to fetch from */
    if (admin && (c->opc == NVME_ADM_DELETE_SQ || c->opc == NVME_ADM_DELETE_CQ) && (c->cdw10 & 0xffff) == 1)
        c->cdw10 = 2; /* keep the I/O queue under test */
}

static bool status_valid(uint16_t st)
{
    uint8_t sct = nvme_cqe_sct(st), sc = nvme_cqe_sc(st);
    if (sct == NVME_SCT_GENERIC)
        return sc <= NVME_SC_TRANSIENT_TRANSPORT || (sc >= NVME_SC_LBA_RANGE && sc <= NVME_SC_FORMAT_IN_PROGRESS);
    if (sct == NVME_SCT_CMD_SPECIFIC)
        return sc <= NVME_SC_CTRL_LIST_INVALID || (sc >= 0x80 && sc <= 0x82);
    return false;
}

int main(void)
{
    unsigned nio = FUZZ_IO_DEFAULT;
    const char *env = getenv("NVMELAB_FUZZ_N");
    if (env)
        nio = (unsigned)strtoul(env, NULL, 0);
    struct th t;
    th_open(&t, "emu://?nsze=16MiB&nns=2&nioq=4&mdts=64KiB");
    CHECK(th_enable(&t, 64));
    th_create_ioq(&t, 1, 64);
    window = th_alloc(FUZZ_BUF_PAGES * TH_PAGE);
    for (unsigned i = 0; i < FUZZ_BUF_PAGES * TH_PAGE; i++)
        window[i] = (uint8_t)rnd();
    /* from now on only the window and our own rings are DMA-able */
    CHECK_EQ(nvme_emu_dma_allow(t.set, window, FUZZ_BUF_PAGES * TH_PAGE), 0);
    CHECK_EQ(nvme_emu_dma_allow(t.set, t.q[0].sq, 64 * NVME_SQE_SIZE), 0);
    CHECK_EQ(nvme_emu_dma_allow(t.set, t.q[0].cq, 64 * NVME_CQE_SIZE), 0);
    CHECK_EQ(nvme_emu_dma_allow(t.set, t.q[1].sq, 64 * NVME_SQE_SIZE), 0);
    CHECK_EQ(nvme_emu_dma_allow(t.set, t.q[1].cq, 64 * NVME_CQE_SIZE), 0);

    unsigned ok = 0, failed = 0, held = 0;
    for (unsigned i = 0; i < FUZZ_ADMIN; i++) {
        struct nvme_sqe c;
        random_sqe(&c, true);
        c.cid = (uint16_t)i;
        th_submit(&t, 0, &c);
        struct nvme_cqe e;
        bool got = false;
        for (int spin = 0; spin < 4 && !got; spin++)
            got = th_poll1(&t, 0, &e, true);
        if (!got) {
            CHECK_EQ(c.opc, NVME_ADM_ASYNC_EVENT); /* the only command allowed to stay outstanding */
            held++;
            continue;
        }
        if (e.cid != c.cid || !status_valid(th_status(&e))) {
            fprintf(stderr, "admin fuzz %u: opc %#x cid %u -> cid %u status %#x\n", i, c.opc, c.cid, e.cid,
                    th_status(&e));
            abort();
        }
        th_status(&e) ? failed++ : ok++;
    }
    printf("admin: %u ok, %u refused, %u held (AER)\n", ok, failed, held);
    CHECK(ok > 0 && failed > 0);

    ok = failed = 0;
    unsigned hist[8][256];
    memset(hist, 0, sizeof(hist));
    for (unsigned i = 0; i < nio; i++) {
        struct nvme_sqe c;
        random_sqe(&c, false);
        c.cid = (uint16_t)i;
        th_submit(&t, 1, &c);
        struct nvme_cqe e;
        CHECK(th_poll1(&t, 1, &e, true)); /* null profile: completes inline, at once */
        uint16_t st = th_status(&e);
        if (e.cid != c.cid || !status_valid(st)) {
            fprintf(stderr, "io fuzz %u: opc %#x -> cid %u status %#x\n", i, c.opc, e.cid, st);
            abort();
        }
        hist[nvme_cqe_sct(st)][nvme_cqe_sc(st)]++;
        st ? failed++ : ok++;
    }
    printf("io: %u commands, %u ok, %u refused; statuses:", nio, ok, failed);
    for (unsigned a = 0; a < 8; a++)
        for (unsigned b = 0; b < 256; b++)
            if (hist[a][b])
                printf(" %s=%u", nvme_status_name((uint8_t)a, (uint8_t)b), hist[a][b]);
    printf("\n");
    CHECK(ok > nio / 50);
    CHECK(hist[0][NVME_SC_INVALID_PRP_OFFSET] && hist[0][NVME_SC_DATA_XFER_ERROR] && hist[0][NVME_SC_LBA_RANGE] &&
          hist[0][NVME_SC_INVALID_NS] && hist[0][NVME_SC_INVALID_OPCODE]);
    free(window);
    th_close(&t);
    printf("test_emu_fuzz: ok\n");
    return 0;
}
