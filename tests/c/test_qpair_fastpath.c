/* SPDX-License-Identifier: BSD-3-Clause */
/* test_qpair_fastpath.c — the qpair hot path (qpair.c) against the general path on emu:// targets:
 * the SQE the fast path writes equals the general path's, every argument error still gets its precise errno
 * once the fast path is primed, data written and read through it is intact, SQE words the fast path skips are
 * zeroed again after a raw command dirtied them, a qpair shared by two namespaces stays correct, and the CQ
 * sentinel / phase handling survives many ring wraps with bounded and unbounded polls; nvme_qpair_submit_many
 * writes the same SQEs as single submits, stops at a full queue with -EBUSY and at a bad command with its
 * precise error (the commands before it queued), and keeps data intact across SQ wraps and batch doorbells;
 * nvme_qpair_poll_collect hands back the arguments of one callback's completions with coalesced CQ doorbells;
 * QD 1's pair (nvme_qpair_submit_one / nvme_qpair_poll_one) writes the same SQE and rings, matches by CID, hands
 * errors, other callbacks and timeouts to the general poll, keeps data intact over wraps and reports submit errors. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "nvme/emu/emu.h"
#include "nvme/qpair.h"
#include "nvme/target.h"
#include "test_driver.h"

#define KIB       1024u
#define PAGE      4096u
#define SQE_WORDS 8u
#define CID_MASK  (0xffffull << 16)

typedef uint64_t __attribute__((may_alias)) qword;

static const qword *slot_words(const struct nvme_sqe *slot)
{
    return (const qword *)slot;
}

/* The slot the next submit writes (submit advances q->sq_next; the wrap happens in the same call). */
static const struct nvme_sqe *next_slot(const struct nvme_qpair *q)
{
    return q->sq_next;
}

static void drain(struct nvme_qpair *q)
{
    for (int spin = 0; nvme_qpair_outstanding(q) && spin < 1000000; spin++)
        T_CHECK(nvme_qpair_poll(q, 0) >= 0);
    T_EQ(nvme_qpair_outstanding(q), 0);
}

/* Fast path SQE == general path SQE; precise errors once primed; data integrity; NULL callback. */
static void test_fast_equals_slow(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=4MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair_opts o = {.depth = 16, .batch = 1};
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 64 * KIB, &d), 0);
    uint8_t *buf = nvme_dma_vaddr(d);
    const uint64_t nsze = nvme_ns_nsze(ns);
    struct nvme_cpl cpl = {0};

    /* first command: general path, which primes the fast path */
    T_CHECK(q->fast_ns == NULL);
    t_fill(buf, PAGE, 1);
    T_EQ(t_io(q, ns, NVME_CMD_WRITE, 8, 8, buf, PAGE, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_CHECK(q->fast_ns == ns);
    T_CHECK(q->fast_dma == q->dma_cache);

    /* second: fast path; compare the SQE it wrote with what the general path writes (CID aside) */
    const struct nvme_sqe *s_fast = next_slot(q);
    struct t_wait w = {0};
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 8, 8, buf + PAGE, PAGE, t_cb, &w), 0);
    qword fast[SQE_WORDS];
    memcpy(fast, slot_words(s_fast), sizeof(fast));
    drain(q);
    T_CHECK(nvme_cpl_ok(&w.cpl));
    T_EQ(memcmp(buf, buf + PAGE, PAGE), 0);
    T_EQ(fast[0] & ~CID_MASK, NVME_CMD_READ | ((uint64_t)nvme_ns_id(ns) << 32));
    T_EQ(fast[1], 0);
    T_EQ(fast[2], 0);
    T_EQ(fast[3], nvme_dma_iova(d, buf + PAGE));
    T_EQ(fast[4], 0);
    T_EQ(fast[5], 8);
    T_EQ(fast[6], 7);
    T_EQ(fast[7], 0);
    /* the same command through the general path: make the fast path miss (forget the cached DMA object) */
    const struct nvme_sqe *s_slow = next_slot(q);
    q->dma_cache = NULL;
    w.done = 0;
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 8, 8, buf + PAGE, PAGE, t_cb, &w), 0);
    qword slow[SQE_WORDS];
    memcpy(slow, slot_words(s_slow), sizeof(slow));
    drain(q);
    T_EQ(slow[0] & ~CID_MASK, fast[0] & ~CID_MASK);
    for (unsigned i = 1; i < SQE_WORDS; i++)
        T_EQ(slow[i], fast[i]);
    T_CHECK(q->fast_dma == q->dma_cache); /* re-primed */

    /* every error still has its precise errno with the fast path primed */
    int stack_buf[128];
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 0, buf, 0, t_cb, &w), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 1, buf + 2, 512, t_cb, &w), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 2, buf, 512, t_cb, &w), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 1, buf, 1024, t_cb, &w), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, nsze, 1, buf, 512, t_cb, &w), -ERANGE);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, nsze - 1, 2, buf, 1024, t_cb, &w), -ERANGE);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, UINT64_MAX, 1, buf, 512, t_cb, &w), -ERANGE);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 1, stack_buf, 512, t_cb, &w), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, 0x7f, 0, 1, buf, 512, t_cb, &w), -EINVAL);
    T_EQ(nvme_qpair_submit(q, NULL, NVME_CMD_READ, 0, 1, buf, 512, t_cb, &w), -EINVAL);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 1u << 20, buf, (size_t)512 << 20, t_cb, &w), -EINVAL);
    T_EQ(nvme_qpair_outstanding(q), 0);

    /* a buffer across a page boundary (PRP2) and a NULL callback still work */
    uint8_t *cross = buf + 3 * PAGE - 512;
    t_fill(cross, 2 * 512, 2);
    T_EQ(t_io(q, ns, NVME_CMD_WRITE, 100, 2, cross, 1024, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 100, 2, buf + 4 * PAGE, 1024, NULL, NULL), 0);
    drain(q);
    T_EQ(memcmp(cross, buf + 4 * PAGE, 1024), 0);

    /* a queue full of fast-path commands: -EBUSY at N-1, then everything completes */
    unsigned n = 0;
    w.done = 0;
    int rc;
    while ((rc = nvme_qpair_submit(q, ns, NVME_CMD_READ, n, 1, buf + (size_t)n * 512, 512, t_cb, &w)) == 0)
        n++;
    T_EQ(rc, -EBUSY);
    T_EQ(n, o.depth - 1);
    drain(q);
    T_EQ(w.done, (int)n);

    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

/* A raw command that sets CDW2-3, MPTR and CDW14-15 dirties its slot; the fast path zeroes them again. */
static void test_dirty_slots(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=1MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair_opts o = {.depth = 4, .batch = 1};
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 16 * KIB, &d), 0);
    uint8_t *buf = nvme_dma_vaddr(d);
    struct nvme_cpl cpl = {0};
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, buf, 512, &cpl), 0); /* prime */
    for (int round = 0; round < 3; round++) {
        struct nvme_sqe raw = {.opc = NVME_CMD_READ,
                               .nsid = nvme_ns_id(ns),
                               .cdw2 = 0xc0de,
                               .cdw3 = 0xc0de,
                               .cdw12 = 0,
                               .cdw14 = 0xbeef,
                               .cdw15 = 0xbeef};
        T_EQ(t_raw(q, &raw, buf, 512, &cpl), 0);
        for (uint32_t i = 0; i < 2 * o.depth; i++) {
            const struct nvme_sqe *s = next_slot(q);
            T_EQ(t_io(q, ns, NVME_CMD_READ, i, 1, buf + 512, 512, &cpl), 0);
            T_CHECK(nvme_cpl_ok(&cpl));
            const qword *wd = slot_words(s);
            T_EQ(wd[1], 0);
            T_EQ(wd[2], 0);
            T_EQ(wd[4], 0);
            T_EQ(wd[7], 0);
        }
        T_EQ(q->sq_dirty, 0);
    }
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

/* Two namespaces on one qpair, interleaved across fast_ns switches: right NSID, right data. */
static void test_two_namespaces(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nns=2&nsze=2MiB&lbads=4096");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns[2] = {nvme_ctrl_ns_at(c, 0), nvme_ctrl_ns_at(c, 1)};
    T_CHECK(ns[0] && ns[1]);
    struct nvme_qpair_opts o = {.depth = 8, .batch = 2};
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 64 * KIB, &d), 0);
    uint8_t *buf = nvme_dma_vaddr(d);
    struct nvme_cpl cpl = {0};
    const unsigned iters = 3 * NVME_FAST_NS_SWITCH;
    for (unsigned i = 0; i < iters; i++) {
        struct nvme_ns *n = ns[(i / 3) % 2];
        uint32_t lba = nvme_ns_lba_size(n);
        uint8_t *w = buf, *r = buf + 8 * KIB;
        t_fill(w, lba, i);
        const struct nvme_sqe *s = next_slot(q);
        T_EQ(t_io(q, n, NVME_CMD_WRITE, i % 64, 1, w, lba, &cpl), 0);
        T_CHECK(nvme_cpl_ok(&cpl));
        T_EQ(s->nsid, nvme_ns_id(n));
        memset(r, 0, lba);
        T_EQ(t_io(q, n, NVME_CMD_READ, i % 64, 1, r, lba, &cpl), 0);
        T_CHECK(nvme_cpl_ok(&cpl));
        T_EQ(memcmp(w, r, lba), 0);
    }
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

struct order {
    uint64_t done;
    uint32_t bad;
};

static void count_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct order *o = arg;
    if (!nvme_cpl_ok(cpl))
        o->bad++;
    o->done++;
}

/* Many wraps of a small CQ with unbounded and bounded polls: nothing lost, nothing doubled. */
static void test_cq_wraps(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=1MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    for (uint32_t depth = 2; depth <= 5; depth++) {
        struct nvme_qpair_opts o = {.depth = depth, .batch = depth};
        struct nvme_qpair *q;
        T_EQ(nvme_qpair_create(c, &o, &q), 0);
        struct nvme_dma *d;
        T_EQ(nvme_dma_alloc(t, 16 * KIB, &d), 0);
        uint8_t *buf = nvme_dma_vaddr(d);
        struct order ord = {0};
        const uint64_t total = 1000;
        uint64_t sub = 0, reaped = 0;
        for (int spin = 0; ord.done < total && spin < 1000000; spin++) {
            while (sub < total && nvme_qpair_submit(q, ns, NVME_CMD_READ, sub % 32, 1, buf + (sub % 8) * 512, 512,
                                                    count_cb, &ord) == 0)
                sub++;
            int n = nvme_qpair_poll(q, (uint32_t)(spin % 3)); /* 0 (all), 1, 2 */
            T_CHECK(n >= 0);
            if (spin % 3)
                T_CHECK((uint32_t)n <= (uint32_t)(spin % 3));
            reaped += (uint64_t)n;
        }
        T_EQ(ord.done, total);
        T_EQ(reaped, total);
        T_EQ(ord.bad, 0);
        T_EQ(nvme_qpair_outstanding(q), 0);
        nvme_qpair_destroy(q);
        nvme_dma_free(d);
    }
    nvme_target_close(t);
}

/* A CQ deeper than its SQ (nvme_qpair_opts.cq_extra, the perf backend's room for coalesced CQ doorbells): the
 * trackers stay the SQ's N-1 (a full batch queues that many, single and batched submits answer -EBUSY with CQ
 * room left), the CQ's own depth bounds cq_batch, and many wraps of both rings (different lengths) with the CQ
 * doorbell held back lose and double nothing. */
static void test_cq_deeper_than_sq(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=1MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair *q;
    struct nvme_qpair_opts bad = {.depth = 4, .cq_extra = nvme_ctrl_max_depth(c)};
    T_EQ(nvme_qpair_create(c, &bad, &q), -EINVAL); /* depth + cq_extra over MQES+1 */
    struct nvme_qpair_opts o = {.depth = 5, .batch = 5, .cq_extra = 8};
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    T_EQ(nvme_qpair_depth(q), 5);
    T_EQ(nvme_qpair_set_cq_batch(q, 13), -EINVAL); /* the CQ has 13 entries */
    T_EQ(nvme_qpair_set_cq_batch(q, 8), 0);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 16 * KIB, &d), 0);
    uint8_t *buf = nvme_dma_vaddr(d);
    struct order ord = {0};
    struct nvme_cpl cpl;
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, buf, 512, &cpl), 0); /* prime the fast path */
    struct nvme_io io[6];
    for (uint32_t i = 0; i < 6; i++)
        io[i] = (struct nvme_io){.slba = i, .buf = buf + i * 512, .arg = &ord};
    uint32_t queued = 99;
    T_EQ(nvme_qpair_submit_many(q, ns, NVME_CMD_READ, 1, io, 6, count_cb, &queued), -EBUSY);
    T_EQ(queued, 4);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 9, 1, buf, 512, count_cb, &ord), -EBUSY);
    drain(q);
    T_EQ(ord.done, 4);
    /* wraps: batches of 1..6 and single submits, polls of any size; the CQ doorbell every 8 completions */
    const uint64_t total = 3000;
    uint64_t sub = 4;
    for (int spin = 0; ord.done < total && spin < 1000000; spin++) {
        const uint32_t want = 1u + (uint32_t)spin % 6u;
        if (spin & 1) {
            uint32_t n = total - sub < want ? (uint32_t)(total - sub) : want;
            int rc = nvme_qpair_submit_many(q, ns, NVME_CMD_READ, 1, io, n, count_cb, &queued);
            T_CHECK(rc == 0 || rc == -EBUSY);
            sub += queued;
        } else {
            while (sub < total && nvme_qpair_submit(q, ns, NVME_CMD_READ, sub % 32, 1, buf, 512, count_cb, &ord) == 0)
                sub++;
        }
        T_CHECK(nvme_qpair_outstanding(q) <= 4);
        T_CHECK(nvme_qpair_poll(q, (uint32_t)(spin % 3)) >= 0);
    }
    T_EQ(ord.done, total);
    T_EQ(ord.bad, 0);
    T_EQ(nvme_qpair_outstanding(q), 0);
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

/* nvme_qpair_submit_many against single submits: same SQEs, -EBUSY when full, precise errors, data intact. */
static void test_submit_many(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=1MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair_opts o = {.depth = 8, .batch = 3};
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 64 * KIB, &d), 0);
    uint8_t *buf = nvme_dma_vaddr(d);
    struct order ord = {0};
    struct nvme_cpl cpl;
    /* prime the fast path with one general-path command */
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, buf, 512, &cpl), 0);

    /* a full queue: 7 trackers (N-1), a batch of 9 queues 7 and answers -EBUSY for the 8th */
    struct nvme_io io[9];
    for (uint32_t i = 0; i < 9; i++)
        io[i] = (struct nvme_io){.slba = i, .buf = buf + i * 512, .arg = &ord};
    uint32_t queued = 99;
    T_EQ(nvme_qpair_submit_many(q, ns, NVME_CMD_READ, 1, io, 9, count_cb, &queued), -EBUSY);
    T_EQ(queued, 7);
    T_EQ(nvme_qpair_outstanding(q), 7);
    drain(q);
    T_EQ(ord.done, 7);
    T_EQ(ord.bad, 0);

    /* a bad command in the middle: the ones before it are queued, its own error is the general path's */
    io[2].slba = nvme_ns_nsze(ns); /* beyond the namespace */
    T_EQ(nvme_qpair_submit_many(q, ns, NVME_CMD_READ, 1, io, 4, count_cb, &queued), -ERANGE);
    T_EQ(queued, 2);
    io[2].slba = 2;
    io[3].buf = buf + 1; /* not dword aligned */
    T_EQ(nvme_qpair_submit_many(q, ns, NVME_CMD_READ, 1, io + 3, 1, count_cb, &queued), -EINVAL);
    T_EQ(queued, 0);
    io[3].buf = buf + 3 * 512;
    T_EQ(nvme_qpair_submit_many(q, ns, NVME_CMD_FLUSH, 1, io, 1, count_cb, &queued), -EINVAL);
    drain(q);

    /* the SQE of a batched command equals a single submit's (CID aside) */
    const struct nvme_sqe *slot = next_slot(q);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_WRITE, 5, 2, buf + PAGE, 1024, count_cb, &ord), 0);
    qword single[SQE_WORDS];
    memcpy(single, slot_words(slot), sizeof(single));
    drain(q);
    slot = next_slot(q);
    struct nvme_io one = {.slba = 5, .buf = buf + PAGE, .arg = &ord};
    T_EQ(nvme_qpair_submit_many(q, ns, NVME_CMD_WRITE, 2, &one, 1, count_cb, &queued), 0);
    T_EQ(queued, 1);
    const qword *batched = slot_words(slot);
    for (uint32_t i = 0; i < SQE_WORDS; i++)
        T_EQ(i == 0 ? batched[i] & ~CID_MASK : batched[i], i == 0 ? single[i] & ~CID_MASK : single[i]);
    drain(q);

    /* data through batches across many SQ wraps and batch doorbells: write LBA i with pattern i, read back */
    for (uint32_t round = 0; round < 20; round++) {
        const uint32_t n = 1 + round % 7;
        for (uint32_t i = 0; i < n; i++) {
            t_fill(buf + i * 512, 512, (uint8_t)(round * 7 + i));
            io[i] = (struct nvme_io){.slba = round * 7 + i, .buf = buf + i * 512, .arg = &ord};
        }
        T_EQ(nvme_qpair_submit_many(q, ns, NVME_CMD_WRITE, 1, io, n, count_cb, &queued), 0);
        T_EQ(queued, n);
        drain(q);
        memset(buf + 8 * KIB, 0, 8 * 512);
        for (uint32_t i = 0; i < n; i++)
            io[i].buf = buf + 8 * KIB + i * 512;
        T_EQ(nvme_qpair_submit_many(q, ns, NVME_CMD_READ, 1, io, n, count_cb, &queued), 0);
        drain(q);
        T_EQ(memcmp(buf + 8 * KIB, buf, (size_t)n * 512), 0);
    }
    T_EQ(ord.bad, 0);
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

static void other_cb(void *arg, const struct nvme_cpl *cpl)
{
    count_cb(arg, cpl);
}

/* nvme_qpair_poll_collect: the chosen callback's successful completions come back as arguments, the others'
 * callbacks run, nothing is lost or doubled over many wraps. */
static void test_poll_collect(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=1MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair_opts o = {.depth = 9, .batch = 4};
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    T_EQ(nvme_qpair_set_cq_batch(q, 5), 0);
    T_EQ(nvme_qpair_set_cq_batch(q, 9), -EINVAL);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 16 * KIB, &d), 0);
    uint8_t *buf = nvme_dma_vaddr(d);
    struct order collected_ord = {0}, other = {0};
    void *out[8];
    uint32_t nout = 99;
    T_EQ(nvme_qpair_poll_collect(q, 0, count_cb, out, &nout), -EINVAL);
    T_EQ(nout, 0);
    uint64_t sub = 0, got = 0;
    const uint64_t total = 500;
    for (int spin = 0; (got < total || other.done < total) && spin < 1000000; spin++) {
        while (sub < 2 * total) {
            nvme_cb cb = sub % 2 ? other_cb : count_cb;
            void *arg = sub % 2 ? (void *)&other : (void *)&collected_ord;
            if (nvme_qpair_submit(q, ns, NVME_CMD_READ, sub % 64, 1, buf + (sub % 8) * 512, 512, cb, arg))
                break;
            sub++;
        }
        int n = nvme_qpair_poll_collect(q, 8, count_cb, out, &nout);
        T_CHECK(n >= 0 && (uint32_t)n >= nout && nout <= 8);
        for (uint32_t i = 0; i < nout; i++)
            T_CHECK(out[i] == &collected_ord);
        got += nout;
    }
    T_EQ(got, total);
    T_EQ(collected_ord.done, 0); /* collected: its callback never ran */
    T_EQ(other.done, total);
    T_EQ(other.bad, 0);
    T_EQ(nvme_qpair_outstanding(q), 0);
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

/* A callback run from poll_collect refills its queue with submit_many: the trackers that poll collected are free
 * already, outstanding still counts them until the poll returns; the batch must take no more trackers than
 * are free (here 4 of a 6-command batch: a CQ deeper than the SQ has room for more). */
struct refill {
    struct nvme_qpair *q;
    struct nvme_ns *ns;
    struct nvme_io io[6];
    struct order ord;
    uint32_t queued;
    int rc;
};

static void refill_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct refill *r = arg;
    (void)cpl;
    /* other_cb: not the collected callback, so these run wherever they complete (in this poll or a later one) */
    r->rc = nvme_qpair_submit_many(r->q, r->ns, NVME_CMD_READ, 1, r->io, 6, other_cb, &r->queued);
}

static void test_collect_then_refill(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=1MiB&lbads=512");
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair_opts o = {.depth = 5, .batch = 5, .cq_extra = 8};
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    T_EQ(nvme_qpair_set_cq_batch(q, 8), 0);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 16 * KIB, &d), 0);
    uint8_t *buf = nvme_dma_vaddr(d);
    struct nvme_cpl cpl;
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, buf, 512, &cpl), 0); /* prime the fast path */
    static struct refill r;
    r = (struct refill){.q = q, .ns = ns, .queued = 99};
    for (uint32_t i = 0; i < 6; i++)
        r.io[i] = (struct nvme_io){.slba = i, .buf = buf + i * 512, .arg = &r.ord};
    struct order collected_ord = {0};
    for (uint32_t i = 0; i < 3; i++)
        T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, i, 1, buf, 512, count_cb, &collected_ord), 0);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 3, 1, buf, 512, refill_cb, &r), 0);
    void *out[8];
    uint32_t nout = 0, got = 0;
    for (int spin = 0; got < 3 && spin < 1000000; spin++) {
        T_CHECK(nvme_qpair_poll_collect(q, 8, count_cb, out, &nout) >= 0);
        got += nout;
    }
    T_EQ(got, 3);
    T_EQ(r.rc, -EBUSY);
    T_EQ(r.queued, 4);
    T_CHECK(nvme_qpair_outstanding(q) + r.ord.done == 4);
    drain(q);
    T_EQ(r.ord.done, 4);
    T_EQ(r.ord.bad, 0);
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

/* QD 1's pair on a queue set up as the perf backend sets one up (a deeper CQ, its head doorbell coalesced). */
static void test_one(void)
{
    struct nvme_target *t = t_open("emu://?ndev=1&nsze=1MiB&lbads=512");
    struct nvme_emu_set *set = nvme_target_backend(t);
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair_opts o = {.depth = 9, .batch = 9, .cq_extra = 8, .timeout_ms = 100};
    struct nvme_qpair *q;
    T_EQ(nvme_qpair_create(c, &o, &q), 0);
    T_EQ(nvme_qpair_set_cq_batch(q, 8), 0);
    struct nvme_dma *d;
    T_EQ(nvme_dma_alloc(t, 16 * KIB, &d), 0);
    uint8_t *buf = nvme_dma_vaddr(d);
    struct nvme_cpl cpl;
    T_EQ(t_io(q, ns, NVME_CMD_READ, 0, 1, buf, 512, &cpl), 0); /* prime the fast path */
    struct order mine = {0}, other = {0};
    void *out = NULL;
    uint32_t nout = 99;

    /* the SQE submit_many writes, rung at once: the inline emulator has posted the CQE when the call returns */
    const struct nvme_sqe *slot = next_slot(q);
    struct nvme_io io = {.slba = 5, .buf = buf + 1024, .arg = &mine};
    T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_READ, 1, &io, count_cb), 0);
    const qword *w = slot_words(slot);
    T_EQ(w[0] & ~CID_MASK, NVME_CMD_READ | ((uint64_t)nvme_ns_id(ns) << 32));
    T_EQ(w[3], nvme_dma_iova(d, buf + 1024));
    T_EQ(w[5], 5);
    T_EQ(w[6], 0);
    T_EQ(q->sq_tail, (uint32_t)(slot - q->sq) + 1u);
    T_EQ(nvme_qpair_outstanding(q), 1);
    T_EQ(nvme_qpair_poll_one(q, count_cb, &out, &nout), 1);
    T_EQ(nout, 1);
    T_CHECK(out == &mine);
    T_EQ(mine.done, 0); /* collected, not called back */
    T_EQ(nvme_qpair_outstanding(q), 0);
    /* nothing in flight: nothing delivered */
    T_EQ(nvme_qpair_poll_one(q, count_cb, &out, &nout), 0);
    T_EQ(nout, 0);

    /* another callback runs; an error status reaches the callback with its SCT/SC (general poll) */
    io.arg = &other;
    T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_READ, 1, &io, other_cb), 0);
    T_EQ(nvme_qpair_poll_one(q, count_cb, &out, &nout), 1);
    T_EQ(nout, 0);
    T_EQ(other.done, 1);
    T_EQ(other.bad, 0);
    struct nvme_emu_fault f = {.kind = NVME_EMU_FAULT_STATUS,
                               .qid = nvme_qpair_qid(q),
                               .nth = 1,
                               .count = 1,
                               .sct = NVME_SCT_MEDIA,
                               .sc = NVME_SC_UNRECOVERED_READ};
    T_EQ(nvme_emu_inject(set, 0, &f), 0);
    struct t_wait tw = {0};
    io.arg = &tw;
    T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_READ, 1, &io, t_cb), 0);
    T_EQ(nvme_qpair_poll_one(q, t_cb, &out, &nout), 1);
    T_EQ(nout, 0);
    T_EQ(tw.done, 1);
    T_EQ(tw.cpl.err, 0);
    T_EQ(tw.cpl.sct, NVME_SCT_MEDIA);
    T_EQ(tw.cpl.sc, NVME_SC_UNRECOVERED_READ);

    /* a completion that never comes: the poll's timeout ends the command (-ETIMEDOUT through its callback) */
    f = (struct nvme_emu_fault){.kind = NVME_EMU_FAULT_DROP, .qid = nvme_qpair_qid(q), .nth = 1, .count = 1};
    T_EQ(nvme_emu_inject(set, 0, &f), 0);
    tw = (struct t_wait){0};
    T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_READ, 1, &io, t_cb), 0);
    for (uint64_t spin = 0; !tw.done && spin < 200000000ull; spin++)
        T_CHECK(nvme_qpair_poll_one(q, t_cb, &out, &nout) >= 0 && nout == 0);
    T_EQ(tw.done, 1);
    T_EQ(tw.cpl.err, -ETIMEDOUT);
    T_EQ(nvme_qpair_outstanding(q), 0);

    /* data through many SQ and CQ wraps, one command at a time: what was written reads back */
    for (uint32_t i = 0; i < 200; i++) {
        t_fill(buf + 2048, 512, i);
        io = (struct nvme_io){.slba = i % 64, .buf = buf + 2048, .arg = &mine};
        T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_WRITE, 1, &io, count_cb), 0);
        T_EQ(nvme_qpair_poll_one(q, count_cb, &out, &nout), 1);
        T_EQ(nout, 1);
        memset(buf + 4096, 0, 512);
        io.buf = buf + 4096;
        T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_READ, 1, &io, count_cb), 0);
        T_EQ(nvme_qpair_poll_one(q, count_cb, &out, &nout), 1);
        T_EQ(nout, 1);
        T_EQ(memcmp(buf + 2048, buf + 4096, 512), 0);
    }
    T_EQ(mine.done, 0);

    /* submit errors are submit_many's, precise; a full queue is -EBUSY, its commands all complete */
    uint8_t outside[512];
    io = (struct nvme_io){.slba = 0, .buf = outside, .arg = &mine};
    T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_READ, 1, &io, count_cb), -EINVAL);
    io.buf = buf;
    io.slba = nvme_ns_nsze(ns);
    T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_READ, 1, &io, count_cb), -ERANGE);
    io.slba = 0;
    T_EQ(nvme_qpair_submit_one(q, ns, NVME_CMD_FLUSH, 1, &io, count_cb), -EINVAL);
    uint32_t queued = 0;
    int rc;
    while ((rc = nvme_qpair_submit_one(q, ns, NVME_CMD_READ, 1, &io, count_cb)) == 0 && queued < 100)
        queued++;
    T_EQ(rc, -EBUSY);
    T_EQ(queued, 7); /* 8 trackers less the timed-out command's, whose CQE is still owed */
    uint32_t got = 0;
    for (int spin = 0; nvme_qpair_outstanding(q) && spin < 1000; spin++) {
        T_CHECK(nvme_qpair_poll_one(q, count_cb, &out, &nout) >= 0);
        got += nout;
    }
    T_EQ(got, 7);
    T_EQ(mine.done, 0);
    T_EQ(mine.bad, 0);
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
}

int main(void)
{
    RUN_CASE(test_fast_equals_slow);
    RUN_CASE(test_dirty_slots);
    RUN_CASE(test_two_namespaces);
    RUN_CASE(test_cq_wraps);
    RUN_CASE(test_cq_deeper_than_sq);
    RUN_CASE(test_submit_many);
    RUN_CASE(test_poll_collect);
    RUN_CASE(test_collect_then_refill);
    RUN_CASE(test_one);
    return CHECK_DONE("test_qpair_fastpath");
}
