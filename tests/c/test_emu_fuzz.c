/* SPDX-License-Identifier: BSD-3-Clause */
/* test_emu_fuzz.c — random 64-byte SQEs into the admin and I/O queues of emu://: no crash, every
 * command completes (except held Async Event Requests) with a status from the spec's lists.
 * Only th_alloc buffers are DMA windows, so wild PRPs are refused instead of dereferenced.
 * A second phase sends in-range commands (valid nsid, SLBA, NLB within MDTS) whose PRPs are wild,
 * misaligned, list-crossing or straddle a window's edge, so that the emulator reaches its PRP walk
 * and the copy: a refused read writes no byte, nothing outside a window is ever written, and no
 * write takes data from outside one. NVMELAB_FUZZ_N overrides the number of I/O commands
 * (default 300000; the second phase runs a tenth of it). A third phase replaces DMA windows from another
 * thread while a queue runs (see windows_change_under_io). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

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
    if (admin && c->opc == NVME_ADM_SET_FEATURES && (c->cdw10 & 0xff) == 0x0f)
        c->cdw11 = 0; /* a Keep Alive Timer nobody feeds would stop the controller (CSTS.CFS) mid-test */
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

/* ---- phase 2: in-range commands, wild PRPs ---- */
#define P2_DATA_PAGES 16u
#define P2_CANARY     0xC5u
static uint8_t *p2_data, *p2_list, *p2_canary, *p2_edge; /* edge: a window not page aligned */
static size_t p2_edge_len;

static uint64_t p2_addr(void)
{
    switch (rnd() % 10) {
    case 0:
        return rnd() % 3 ? 0xDEAD0000ull : rnd(); /* wild */
    case 1:
        return (uintptr_t)p2_canary + (rnd() % 2) * TH_PAGE; /* mapped nowhere */
    case 2:
        return (uintptr_t)p2_edge + (rnd() % p2_edge_len) / 4 * 4; /* segment may run past the edge */
    case 3:
        return (uintptr_t)p2_data + (rnd() % P2_DATA_PAGES) * TH_PAGE + (rnd() % TH_PAGE); /* misaligned */
    case 4:
        return (uintptr_t)p2_data + P2_DATA_PAGES * TH_PAGE - TH_PAGE; /* last page of the window */
    default:
        return (uintptr_t)p2_data + (rnd() % P2_DATA_PAGES) * TH_PAGE; /* good */
    }
}

/* PRP2: a data page, or a PRP list whose entries mix good pages with wild ones (the list itself may sit
 * anywhere, including at the end of its page so that it chains). */
static uint64_t p2_prp2(void)
{
    if (rnd() % 3 == 0)
        return p2_addr();
    uint64_t *l = (uint64_t *)(void *)p2_list;
    for (unsigned i = 0; i < 2 * TH_PAGE / 8; i++)
        l[i] = rnd() % 6 ? (uintptr_t)p2_data + (rnd() % P2_DATA_PAGES) * TH_PAGE : p2_addr();
    switch (rnd() % 4) {
    case 0:
        return (uintptr_t)p2_list + TH_PAGE - 8 * (1 + rnd() % 4); /* crosses into a chained list */
    case 1:
        return rnd() % 2 ? (uintptr_t)p2_canary : 0xDEAD0000ull; /* list outside every window */
    default:
        return (uintptr_t)p2_list + (rnd() % 8) * 8;
    }
}

static bool all_canary(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != P2_CANARY)
            return false;
    return true;
}

static void fuzz_in_range(struct th *t, unsigned n)
{
    p2_data = th_alloc(P2_DATA_PAGES * TH_PAGE);
    p2_list = th_alloc(2 * TH_PAGE);
    p2_canary = th_alloc_raw(2 * TH_PAGE); /* never a window */
    uint8_t *edge_mem = th_alloc_raw(2 * TH_PAGE), *shadow = malloc(P2_DATA_PAGES * TH_PAGE);
    REQUIRE(shadow);
    p2_edge = edge_mem + 1000;
    p2_edge_len = TH_PAGE + 96; /* [1000, 5192): both ends inside a page */
    CHECK_EQ(nvme_emu_dma_map(t->set, p2_edge, p2_edge_len), 0);
    memset(p2_canary, P2_CANARY, 2 * TH_PAGE);
    unsigned reached = 0, moved = 0, dxe = 0, prp_off = 0, adm_reached = 0, adm_dxe = 0, cq_refused = 0, nsq = 0;
    for (unsigned i = 0; i < n; i++) {
        for (unsigned j = 0; j < P2_DATA_PAGES * TH_PAGE; j++)
            p2_data[j] = (uint8_t)(j * 13 + i); /* never a page of P2_CANARY */
        memcpy(shadow, p2_data, P2_DATA_PAGES * TH_PAGE);
        struct nvme_sqe c = {0};
        unsigned kind = (unsigned)(rnd() % 8);
        uint16_t qid = 1;
        if (kind < 5) { /* Read or Write, 1..128 LBAs (64 KiB = MDTS), in range */
            uint32_t nlb = (uint32_t)(1 + (rnd() % 4 ? rnd() % 16 : rnd() % 128));
            uint64_t slba = rnd() % (FUZZ_NSZE_LBAS - nlb);
            c = th_rw(kind < 3 ? NVME_CMD_READ : NVME_CMD_WRITE, 1, slba, nlb, (void *)(uintptr_t)p2_addr(), p2_prp2());
        } else if (kind == 5) { /* DSM: a range list anywhere */
            c = (struct nvme_sqe){.opc = NVME_CMD_DSM, .nsid = 1, .prp1 = p2_addr(), .prp2 = p2_prp2()};
            c.cdw10 = (uint32_t)(rnd() % 256);
            c.cdw11 = rnd() % 2 ? NVME_DSM_AD : 0;
        } else if (kind == 6) { /* Identify / Get Log Page */
            qid = 0;
            if (rnd() % 2)
                c = (struct nvme_sqe){.opc = NVME_ADM_IDENTIFY, .nsid = 1, .cdw10 = (uint32_t)(rnd() % 3)};
            else
                c = (struct nvme_sqe){.opc = NVME_ADM_GET_LOG_PAGE,
                                      .nsid = UINT32_MAX,
                                      .cdw10 = NVME_LOGPAGE_SMART | ((uint32_t)(rnd() % 128) << 16)};
            c.prp1 = p2_addr();
            c.prp2 = p2_prp2();
        } else { /* Create I/O CQ 2 or SQ 2 (on CQ 1) at a wild or good base; deleted again when created */
            qid = 0;
            bool sq = rnd() % 2;
            c = (struct nvme_sqe){.opc = sq ? NVME_ADM_CREATE_SQ : NVME_ADM_CREATE_CQ,
                                  .prp1 = p2_addr() & ~(uint64_t)(TH_PAGE - 1),
                                  .cdw10 = NVME_CREATE_Q_CDW10(2, 16),
                                  .cdw11 = NVME_CREATE_Q_PC | (sq ? 1u << NVME_CREATE_SQ_CQID_SHIFT : 0)};
        }
        struct nvme_cqe e = th_cmd(t, qid, c);
        uint16_t st = th_status(&e);
        CHECK(status_valid(st));
        CHECK(all_canary(p2_canary, 2 * TH_PAGE)); /* nothing outside a window is ever written */
        if (qid == 0 && (c.opc == NVME_ADM_CREATE_CQ || c.opc == NVME_ADM_CREATE_SQ)) {
            if (st) {
                cq_refused++;
            } else {
                nsq++;
                struct nvme_sqe d = {.opc = c.opc == NVME_ADM_CREATE_CQ ? NVME_ADM_DELETE_CQ : NVME_ADM_DELETE_SQ,
                                     .cdw10 = 2};
                struct nvme_cqe de = th_cmd(t, 0, d);
                CHECK_EQ(th_status(&de), 0);
            }
            continue;
        }
        uint16_t sc = nvme_cqe_sc(st);
        bool deref = !st || sc == NVME_SC_DATA_XFER_ERROR || sc == NVME_SC_INVALID_PRP_OFFSET;
        if (qid == 0) {
            adm_reached += deref;
            adm_dxe += sc == NVME_SC_DATA_XFER_ERROR;
        } else {
            reached += deref;
        }
        moved += !st;
        dxe += sc == NVME_SC_DATA_XFER_ERROR;
        prp_off += sc == NVME_SC_INVALID_PRP_OFFSET;
        /* a refused command moves no byte: the data window is as it was */
        if (st && memcmp(shadow, p2_data, P2_DATA_PAGES * TH_PAGE) != 0) {
            fprintf(stderr, "phase 2 command %u: opc %#x prp1 %#llx prp2 %#llx refused (%#x) but wrote memory\n", i,
                    c.opc, (unsigned long long)c.prp1, (unsigned long long)c.prp2, st);
            CHECK(!"a refused command wrote host memory");
        }
        /* a write never takes its data from outside a window: read it back, no canary block */
        if (!st && c.opc == NVME_CMD_WRITE) {
            uint32_t nlb = (c.cdw12 & 0xffffu) + 1;
            for (uint32_t b = 0; b < nlb; b++) {
                struct nvme_cqe r = th_cmd(t, 1, th_rw(NVME_CMD_READ, 1, c.cdw10 + b, 1, p2_data, 0));
                CHECK_EQ(th_status(&r), 0);
                CHECK(!all_canary(p2_data, 512));
            }
        }
    }
    printf("in-range: %u commands, %u I/O and %u admin reached the PRP walk, %u moved data, %u Data Transfer "
           "Error (%u admin), %u Invalid PRP Offset; Create I/O CQ/SQ: %u created, %u refused\n",
           n, reached, adm_reached, moved, dxe, adm_dxe, prp_off, nsq, cq_refused);
    CHECK(reached > n / 4 && adm_reached > 0 && moved > 0 && dxe > n / 20 && adm_dxe > 0 && prp_off > 0);
    CHECK(nsq > 0 && cq_refused > 0);
    CHECK_EQ(nvme_emu_dma_unmap(t->set, p2_edge, p2_edge_len), 0);
    free(shadow);
    free(edge_mem);
    free(p2_canary);
    th_free(p2_list);
    th_free(p2_data);
}

/* ---- phase 3: windows change while a queue runs ----
 * One thread reads into "the current buffer" without pause; another keeps replacing it: a new buffer is
 * mapped and published, the old one unmapped and made inaccessible at once (PROT_NONE; buffers are never
 * reused). A read that names a buffer already unmapped must fail with Data Transfer Error and never touch it:
 * nvme_emu_dma_unmap() returns only when no command that could still see the window is running. */
#define P3_SWAPS 2000u
static _Atomic(uint8_t *) p3_cur;
static atomic_bool p3_stop;
static atomic_uint p3_reads;

static uint8_t *p3_region; /* P3_SWAPS + 1 buffers of 2 pages, each used once: no address comes back */

static void *p3_swapper(void *arg)
{
    struct th *t = arg;
    for (unsigned i = 0; i < P3_SWAPS; i++) {
        while (atomic_load(&p3_reads) < i) /* at least one read per swap, racing with it */
            sched_yield();
        uint8_t *fresh = p3_region + (size_t)(i + 1) * 2 * TH_PAGE;
        REQUIRE_EQ(nvme_emu_dma_map(t->set, fresh, 2 * TH_PAGE), 0);
        uint8_t *old = atomic_exchange(&p3_cur, fresh);
        REQUIRE_EQ(nvme_emu_dma_unmap(t->set, old, 2 * TH_PAGE), 0);
        /* "freed": any access by the emulator from now on faults, in every build */
        REQUIRE_EQ(mprotect(old, 2 * TH_PAGE, PROT_NONE), 0);
    }
    atomic_store(&p3_stop, true);
    return NULL;
}

static void windows_change_under_io(struct th *t)
{
    size_t region = (size_t)(P3_SWAPS + 1) * 2 * TH_PAGE;
    void *m = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    p3_region = m;
    uint8_t *first = p3_region;
    CHECK_EQ(nvme_emu_dma_map(t->set, first, 2 * TH_PAGE), 0);
    atomic_store(&p3_cur, first);
    atomic_store(&p3_stop, false);
    pthread_t swapper;
    REQUIRE_EQ(pthread_create(&swapper, NULL, p3_swapper, t), 0);
    unsigned ok = 0, dxe = 0, other = 0, n = 0;
    uint8_t *seen = first, *stale = first;
    while (!atomic_load(&p3_stop)) {
        uint8_t *cur = atomic_load(&p3_cur);
        if (cur != seen)
            stale = seen, seen = cur;
        uint8_t *b = n++ % 2 ? stale : cur; /* every other read names a buffer replaced (and freed) since */
        struct nvme_cqe e = th_cmd(t, 1, th_rw(NVME_CMD_READ, 1, 0, 16, b, (uintptr_t)b + TH_PAGE));
        uint16_t sc = nvme_cqe_sc(th_status(&e));
        th_status(&e) == 0 ? ok++ : sc == NVME_SC_DATA_XFER_ERROR ? dxe++ : other++;
        atomic_fetch_add(&p3_reads, 1);
    }
    pthread_join(swapper, NULL);
    /* after the race, deterministically: a replaced buffer is refused, the current one works */
    struct nvme_cqe e = th_cmd(t, 1, th_rw(NVME_CMD_READ, 1, 0, 16, first, (uintptr_t)first + TH_PAGE));
    CHECK_EQ(th_sc(&e), TH_ST(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR));
    uint8_t *last = atomic_load(&p3_cur);
    e = th_cmd(t, 1, th_rw(NVME_CMD_READ, 1, 0, 16, last, (uintptr_t)last + TH_PAGE));
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(nvme_emu_dma_unmap(t->set, last, 2 * TH_PAGE), 0);
    munmap(p3_region, region);
    printf("windows changing under I/O: %u swaps, %u reads ok, %u refused (Data Transfer Error), %u other\n", P3_SWAPS,
           ok, dxe, other);
    CHECK(ok > 0); /* how many reads lose the race (refused) depends on scheduling */
    CHECK_EQ(other, 0);
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
    /* only the window and our own rings are DMA-able (th_alloc maps them) */

    unsigned ok = 0, failed = 0, held = 0;
    for (unsigned i = 0; i < FUZZ_ADMIN; i++) {
        struct nvme_sqe c;
        random_sqe(&c, true);
        c.cid = (uint16_t)i;
        th_submit(&t, 0, &c);
        struct nvme_cqe e = {0};
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
        struct nvme_cqe e = {0};
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
    fuzz_in_range(&t, nio / 10 ? nio / 10 : 1);
    windows_change_under_io(&t);
    th_free(window);
    th_close(&t);
    return CHECK_DONE("test_emu_fuzz");
}
