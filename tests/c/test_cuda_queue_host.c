/* test_cuda_queue_host.c — the device-side queue logic (src/nvme/cuda/nvme_gpuq.h) compiled for the host:
 * SQE building, PRPs from a lookup table, CID generation/index, matching out-of-order completions by CID
 * over many lock-step rounds with a ring that wraps every round (phase tag flips), rejection of stale,
 * foreign and duplicate completions, wrap-safe deadlines, the per-thread LCG, sequential coverage and the
 * verification stamp. A small controller model in this file plays the device. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/cuda/nvme_gpuq.h"
#include "test_driver.h"

#define QD        37u   /* not a power of two: slots and phases rotate every round */
#define ENTRIES   (QD + 1u)
#define ROUNDS    200u
#define SQID      3u
#define PAGE      NVME_GPUQ_PAGE_SIZE

static void test_sqe(void)
{
    struct nvme_sqe s;
    memset(&s, 0xa5, sizeof(s));
    nvme_gpuq_sqe_rw(&s, NVME_CMD_READ, 0x1234, 1, 0x123456789aull, 8, 0x1000, 0x2000);
    T_EQ(s.opc, NVME_CMD_READ);
    T_EQ(s.flags, 0);
    T_EQ(s.cid, 0x1234);
    T_EQ(s.nsid, 1);
    T_EQ(s.cdw10, 0x3456789au);
    T_EQ(s.cdw11, 0x12);
    T_EQ(s.cdw12, 7); /* 0-based */
    T_EQ(s.prp1, 0x1000);
    T_EQ(s.prp2, 0x2000);
    T_EQ(s.mptr, 0);
    T_EQ(s.cdw13 | s.cdw14 | s.cdw15 | s.cdw2 | s.cdw3, 0);
}

static void test_prp(void)
{
    uint64_t lut[8], list[NVME_GPUQ_PRP_PER_PAGE], p1, p2;
    for (int i = 0; i < 8; i++)
        lut[i] = 0x100000ull * (uint64_t)(i + 1); /* scattered pages */
    /* within one page */
    T_EQ(nvme_gpuq_prp(lut, 8, 512, 512, list, 0xdead000, &p1, &p2), 0);
    T_EQ(p1, lut[0] + 512);
    T_EQ(p2, 0);
    /* two pages: PRP2 is the second page */
    T_EQ(nvme_gpuq_prp(lut, 8, PAGE - 512, 1024, list, 0xdead000, &p1, &p2), 0);
    T_EQ(p1, lut[0] + PAGE - 512);
    T_EQ(p2, lut[1]);
    /* four pages from page 2: PRP2 is the list */
    memset(list, 0, sizeof(list));
    T_EQ(nvme_gpuq_prp(lut, 8, 2 * PAGE, 4 * PAGE, list, 0xdead000, &p1, &p2), 0);
    T_EQ(p1, lut[2]);
    T_EQ(p2, 0xdead000);
    T_EQ(list[0], lut[3]);
    T_EQ(list[2], lut[5]);
    /* refusals: outside the table, misaligned, empty, no list page */
    T_EQ(nvme_gpuq_prp(lut, 8, 7 * PAGE, 2 * PAGE, list, 0, &p1, &p2), -1);
    T_EQ(nvme_gpuq_prp(lut, 8, 2, 512, list, 0, &p1, &p2), -1);
    T_EQ(nvme_gpuq_prp(lut, 8, 0, 0, list, 0, &p1, &p2), -1);
    T_EQ(nvme_gpuq_prp(lut, 8, 0, 3 * PAGE, NULL, 0, &p1, &p2), -1);
}

static void test_cid(void)
{
    for (uint32_t gen = 0; gen < 200; gen += 7)
        for (uint32_t idx = 0; idx < NVME_GPUQ_MAX_QDEPTH; idx += 101) {
            uint16_t cid = nvme_gpuq_cid_make(gen, idx);
            T_EQ(nvme_gpuq_cid_idx(cid), idx);
            T_EQ(nvme_gpuq_cid_gen(cid), gen & NVME_GPUQ_GEN_MASK);
        }
    uint8_t seen[QD] = {0};
    uint16_t cid = nvme_gpuq_cid_make(5, 3);
    T_EQ(nvme_gpuq_cqe_match(cid, SQID, SQID, 5, QD, seen), 3);
    T_EQ(nvme_gpuq_cqe_match(cid, SQID, SQID, 5, QD, seen), -NVME_GPUQ_BAD_CID);            /* duplicate */
    T_EQ(nvme_gpuq_cqe_match(nvme_gpuq_cid_make(4, 4), SQID, SQID, 5, QD, seen), -NVME_GPUQ_BAD_CID); /* stale */
    T_EQ(nvme_gpuq_cqe_match(nvme_gpuq_cid_make(5, QD), SQID, SQID, 5, QD, seen), -NVME_GPUQ_BAD_CID); /* idx */
    T_EQ(nvme_gpuq_cqe_match(nvme_gpuq_cid_make(5, 4), SQID + 1, SQID, 5, QD, seen), -NVME_GPUQ_BAD_SQID);
    /* generations wrap within the CID field: round 2^GEN_BITS matches generation 0 */
    T_EQ(nvme_gpuq_cid_check(nvme_gpuq_cid_make(0, 1), SQID, SQID, 1u << NVME_GPUQ_GEN_BITS, QD), 1);
}

/* ---- a controller model: fetches a round, completes it in a shuffled order ---- */
struct model {
    struct nvme_sqe sq[ENTRIES];
    struct nvme_cqe cq[ENTRIES];
    uint64_t sq_head, cq_tail;
    uint64_t rng;
};

static uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void model_serve(struct model *m, uint32_t sq_db)
{
    struct nvme_sqe got[ENTRIES];
    uint32_t n = 0;
    while (nvme_gpuq_db(m->sq_head, ENTRIES) != sq_db)
        got[n++] = m->sq[nvme_gpuq_cq_slot(m->sq_head++, ENTRIES)];
    for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates: complete out of order */
        uint32_t j = (uint32_t)(xs(&m->rng) % i);
        struct nvme_sqe t = got[i - 1];
        got[i - 1] = got[j];
        got[j] = t;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t pos = m->cq_tail++;
        struct nvme_cqe *c = &m->cq[nvme_gpuq_cq_slot(pos, ENTRIES)];
        c->cdw0 = got[i].cdw10; /* echo the LBA so the test can check the pairing */
        c->sqhd = (uint16_t)nvme_gpuq_db(m->sq_head, ENTRIES);
        c->sqid = SQID;
        c->cid = got[i].cid;
        uint8_t sc = (got[i].cdw10 % 17u == 0) ? NVME_SC_LBA_RANGE : NVME_SC_SUCCESS; /* some fail */
        c->status = NVME_CQE_STATUS(NVME_SCT_GENERIC, sc, sc != 0, nvme_gpuq_cq_phase(pos, ENTRIES));
    }
}

static void test_rounds(void)
{
    static struct model m;
    memset(&m, 0, sizeof(m));
    m.rng = 0x1234567;
    uint64_t sq_pos = 0, cq_pos = 0, errors = 0, lcg[QD], slba[QD];
    for (uint32_t i = 0; i < QD; i++)
        lcg[i] = nvme_gpuq_lcg_seed(42, i);
    for (uint32_t round = 0; round < ROUNDS; round++) {
        /* submission half: thread i owns slot tail+i */
        for (uint32_t i = 0; i < QD; i++) {
            slba[i] = nvme_gpuq_slba(1, &lcg[i], round, i, QD, 1000, 0, 1);
            nvme_gpuq_sqe_rw(&m.sq[nvme_gpuq_cq_slot(sq_pos + i, ENTRIES)], NVME_CMD_READ,
                             nvme_gpuq_cid_make(round, i), 1, slba[i], 1, 0x1000, 0);
        }
        sq_pos += QD;
        model_serve(&m, nvme_gpuq_db(sq_pos, ENTRIES));
        /* completion half: thread i takes slot head+i, then hands it over by CID */
        uint8_t seen[QD] = {0};
        uint16_t st[QD];
        uint32_t lba_of[QD];
        for (uint32_t i = 0; i < QD; i++) {
            const struct nvme_cqe *c = &m.cq[nvme_gpuq_cq_slot(cq_pos + i, ENTRIES)];
            T_CHECK(nvme_gpuq_cqe_new(c->status, cq_pos + i, ENTRIES));
            int idx = nvme_gpuq_cqe_match(c->cid, c->sqid, SQID, round, QD, seen);
            T_CHECK(idx >= 0);
            st[idx] = c->status & (uint16_t)~NVME_CQE_P;
            lba_of[idx] = c->cdw0;
        }
        /* the next slot is not new yet (its phase is the previous pass's) */
        T_CHECK(!nvme_gpuq_cqe_new(m.cq[nvme_gpuq_cq_slot(cq_pos + QD, ENTRIES)].status, cq_pos + QD, ENTRIES));
        cq_pos += QD;
        for (uint32_t i = 0; i < QD; i++) {
            T_EQ(lba_of[i], (uint32_t)slba[i]); /* every thread got its own command's completion */
            uint8_t want = slba[i] % 17u == 0 ? NVME_SC_LBA_RANGE : 0;
            T_EQ(nvme_cqe_sc(st[i]), want);
            errors += want != 0;
        }
    }
    T_CHECK(errors > 0);
    /* the ring wrapped many times, so both phases were used */
    T_CHECK(cq_pos / ENTRIES > 100);
}

static void test_deadline(void)
{
    uint64_t now = UINT64_MAX - 100;
    uint64_t d = nvme_gpuq_deadline(now, 1000); /* wraps */
    T_CHECK(!nvme_gpuq_expired(now, d));
    T_CHECK(!nvme_gpuq_expired(now + 999, d));
    T_CHECK(nvme_gpuq_expired(now + 1000, d));
    T_CHECK(nvme_gpuq_expired(now + 5000, d));
}

static void test_patterns(void)
{
    /* sequential: 4 queues x 8 threads of a device sweep 64 slots in order, no gaps, no repeats */
    const uint64_t threads = 32, nslots = 64;
    uint8_t hit[64] = {0};
    for (uint64_t k = 0; k < 2; k++)
        for (uint64_t t = 0; t < threads; t++) {
            uint64_t lba = nvme_gpuq_slba(0, NULL, k, t, threads, nslots, 8, 4);
            T_EQ((lba - 8) % 4, 0);
            hit[(lba - 8) / 4]++;
        }
    for (int i = 0; i < 64; i++)
        T_EQ(hit[i], 1);
    /* random: deterministic per seed and thread, in range, spread */
    uint64_t a = nvme_gpuq_lcg_seed(7, 3), b = nvme_gpuq_lcg_seed(7, 3), c = nvme_gpuq_lcg_seed(7, 4);
    uint32_t cover[16] = {0};
    int differ = 0;
    for (int i = 0; i < 4000; i++) {
        uint64_t x = nvme_gpuq_slba(1, &a, 0, 0, 1, 16, 0, 1), y = nvme_gpuq_slba(1, &b, 0, 0, 1, 16, 0, 1);
        uint64_t z = nvme_gpuq_slba(1, &c, 0, 0, 1, 16, 0, 1);
        T_EQ(x, y);
        T_CHECK(x < 16);
        differ += x != z;
        cover[x]++;
    }
    T_CHECK(differ > 3000);
    for (int i = 0; i < 16; i++)
        T_CHECK(cover[i] > 150 && cover[i] < 350);
    /* stamps: fixed values (tests/test_cuda.py checks the NumPy port against the same two) */
    T_CHECK(nvme_gpuq_stamp(3, 1000, 5) == 14819571440484406469ull);
    T_CHECK(nvme_gpuq_stamp(0, 0, 0) == 654009164567993689ull);
    /* stamps: never zero, depend on device, LBA and word */
    T_CHECK(nvme_gpuq_stamp(0, 0, 0) != 0);
    T_CHECK(nvme_gpuq_stamp(0, 1, 0) != nvme_gpuq_stamp(0, 0, 0));
    T_CHECK(nvme_gpuq_stamp(1, 0, 0) != nvme_gpuq_stamp(0, 0, 0));
    T_CHECK(nvme_gpuq_stamp(0, 0, 1) != nvme_gpuq_stamp(0, 0, 0));
}

int main(void)
{
    test_sqe();
    test_prp();
    test_cid();
    test_rounds();
    test_deadline();
    test_patterns();
    printf("test_cuda_queue_host: ok\n");
    return 0;
}
