/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io.c — the command path of the emulated controller: fetch SQEs, execute NVM
 * commands, walk PRPs, hold and post completions.
 *
 * Fast path (profile without timing, no faults armed, no ooo/ooo_win/err_every, nothing held,
 * CQ not shared): each fetched command executes and its CQE is written at
 * once — no clock read, no allocation, no lock, no CID bookkeeping (a command
 * that completes before the next is fetched cannot conflict).  Everything else
 * goes through the per-SQ min-heap of pending completions keyed by due time
 * (ties: fetch order, or a random key with ooo=1, which shuffles the
 * completions of one fetch batch).  A due completion waits while its CQ is
 * full and is posted when the host frees a slot (CQ head doorbell) or polls.
 */
#include "nvme/emu/io.h"

#include <errno.h>
#include <string.h>

#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/emu_internal.h"
#include "nvme/emu/ns.h"
#include "nvme/emu/prp.h"

#define EMU_DSM_BUF (NVME_DSM_MAX_RANGES * NVME_DSM_RANGE_SIZE)

/* ---------------------------------------------------------------- DMA windows */
#define EMU_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define EMU_LIKELY(x)   __builtin_expect(!!(x), 1)

struct xfer {
    struct emu_ns *ns;
    uint64_t off; /* namespace byte offset of the transfer */
    uint8_t *buf; /* DSM: bounce buffer */
};

static int seg_read(void *arg, uint8_t *host, size_t len, uint64_t xo)
{
    struct xfer *x = arg;
    return emu_ns_read(x->ns, x->off + xo, host, len) ? EMU_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL) : 0;
}

static int seg_write(void *arg, uint8_t *host, size_t len, uint64_t xo)
{
    struct xfer *x = arg;
    int r = emu_ns_write(x->ns, x->off + xo, host, len);
    if (r == -ENOSPC)
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_CAP_EXCEEDED);
    return r ? EMU_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL) : 0;
}

static int seg_copy_in(void *arg, uint8_t *host, size_t len, uint64_t xo)
{
    struct xfer *x = arg;
    memcpy(x->buf + xo, host, len);
    return 0;
}

/* ---------------------------------------------------------------- NVM commands */
static inline struct emu_ns *ns_of(struct emu_ctrl *c, uint32_t nsid)
{
    return nsid - 1u < c->cfg.nns ? &c->ns[nsid - 1] : NULL;
}

static inline uint16_t range_ok(const struct emu_ns *ns, uint64_t slba, uint64_t nlb)
{
    return nvme_cr_range(slba, nlb, ns->nlb);
}

static uint16_t io_exec(struct emu_ctrl *c, const struct nvme_sqe *cmd, uint64_t *bytes)
{
    const bool data = c->set->cfg.data;
    struct emu_ns *ns;
    uint16_t st = nvme_cr_flags(cmd->flags);
    uint64_t slba, nlb;
    if (st)
        return st;
    switch (cmd->opc) {
    case NVME_CMD_READ:
    case NVME_CMD_WRITE: {
        if (!(ns = ns_of(c, cmd->nsid)))
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        nvme_cr_rw(cmd->cdw10, cmd->cdw11, cmd->cdw12, &slba, &nlb);
        if ((st = range_ok(ns, slba, nlb)))
            return st;
        uint64_t len = nlb << ns->lba_shift;
        if ((st = nvme_cr_mdts(len, c->cfg.mdts)))
            return st;
        if ((st = nvme_cr_lba_err(&c->set->cfg.inj, slba, nlb))) /* err_every: per-LBA injected error */
            return st;
        struct xfer x = {ns, slba << ns->lba_shift, NULL};
        emu_seg_fn fn = !data ? NULL : cmd->opc == NVME_CMD_READ ? seg_read : seg_write;
        st = emu_prp_walk(c->dma, cmd->prp1, cmd->prp2, len, fn, &x);
        if (!st)
            *bytes = len;
        return st;
    }
    case NVME_CMD_FLUSH:
        if (cmd->nsid != UINT32_MAX && !ns_of(c, cmd->nsid))
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        return EMU_ST_OK;
    case NVME_CMD_WRITE_ZEROES: {
        if (!(ns = ns_of(c, cmd->nsid)))
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        nvme_cr_rw(cmd->cdw10, cmd->cdw11, cmd->cdw12, &slba, &nlb);
        if ((st = range_ok(ns, slba, nlb)))
            return st;
        if (data && emu_ns_zero(ns, slba << ns->lba_shift, nlb << ns->lba_shift))
            return EMU_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
        return EMU_ST_OK;
    }
    case NVME_CMD_DSM: {
        if (!(ns = ns_of(c, cmd->nsid)))
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        uint32_t nr = (cmd->cdw10 & NVME_DSM_NR_MASK) + 1u;
        uint8_t buf[EMU_DSM_BUF];
        struct xfer x = {ns, 0, buf};
        st = emu_prp_walk(c->dma, cmd->prp1, cmd->prp2, (uint64_t)nr * NVME_DSM_RANGE_SIZE, seg_copy_in, &x);
        if (st)
            return st;
        const struct nvme_dsm_range *r = (const struct nvme_dsm_range *)buf;
        for (uint32_t i = 0; i < nr; i++)
            if (r[i].nlb && (st = range_ok(ns, r[i].slba, r[i].nlb)))
                return st;
        if ((cmd->cdw11 & NVME_DSM_AD) && data)
            for (uint32_t i = 0; i < nr; i++)
                if (r[i].nlb && emu_ns_zero(ns, r[i].slba << ns->lba_shift, (uint64_t)r[i].nlb << ns->lba_shift))
                    return EMU_ST(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
        return EMU_ST_OK;
    }
    default:
        return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
    }
}

/* PRP1 alone covers the transfer and lies inside a registered DMA window: the fast path then checks PRP1
 * itself and moves the data without the PRP walk. The window is the queue's last one hit (sq->win_lo/hi,
 * three compares), else looked up (emu_dma_window) and remembered; the queue forgets it whenever the
 * windows change (emu_sq_rings_ok, at the first service after a map or unmap), and within one read-side
 * section a window found in it stays valid (prp.c). The one place that decides when the walk
 * (emu_prp_walk, with its DMA checks) may be skipped; anything else, an address outside every window
 * included, takes the walk and its statuses. */
struct rw_batch {
    struct emu_ns *ns; /* the controller's namespaces */
    uint32_t nns;
    uint64_t mdts;
    uint64_t mdts_max; /* mdts, or UINT64_MAX for no limit: one compare per command */
    bool data;
    const struct emu_dma_dom *dom; /* the DMA windows (the controller's IOMMU domain) */
    uint64_t win_lo, win_hi;       /* the queue's last window hit (sq->win_lo/hi/delta, written back) */
    uint64_t win_delta;            /* its translation: host pointer = controller address + win_delta */
    uint64_t nsid_last;            /* the last valid NSID seen (UINT64_MAX: none yet) and its namespace */
    struct emu_ns *ns_last;
};

/* Not in the remembered window: look it up in the DMA map and remember it. */
static __attribute__((noinline)) bool prp1_window(struct rw_batch *b, uint64_t prp1, uint64_t len)
{
    struct emu_dma_win w;
    if (!emu_dma_window(b->dom, prp1, len, &w))
        return false;
    b->win_lo = w.lo;
    b->win_hi = w.hi;
    b->win_delta = w.delta;
    return true;
}

/* emu_sq_one's look-up: the window PRP1 lies in becomes the queue's (none: it keeps its own). */
static __attribute__((noinline)) void sq_window(const struct emu_dma_dom *dom, struct emu_sq *sq, uint64_t prp1)
{
    struct emu_dma_win w;
    if (emu_dma_window(dom, prp1, 1, &w)) {
        sq->win_lo = w.lo;
        sq->win_hi = w.hi;
        sq->win_delta = w.delta;
    }
}

/* len <= nvme_cr_prp_first(prp1, len, EMU_PAGE_SIZE), i.e. the transfer ends in PRP1's page, and the page's
 * bytes [prp1, prp1 + len) lie in one DMA window (prp1 < win_hi rules out a wrap of prp1 + len) */
static inline bool prp1_direct(struct rw_batch *b, uint64_t prp1, uint64_t len, const bool look_up)
{
    if ((prp1 & (EMU_PAGE_SIZE - 1u)) + len > EMU_PAGE_SIZE)
        return false;
    if (EMU_LIKELY(prp1 >= b->win_lo && prp1 < b->win_hi && prp1 + len <= b->win_hi))
        return true;
    return look_up && prp1_window(b, prp1, len);
}

/* Read/Write on the fast path: every check io_exec makes (cmd_rules.h); for the common transfer that fits
 * in PRP1's page (prp1_direct) no PRP walk, and with data the namespace is read or written in place
 * (seg_read/seg_write's work without their indirection). */
static inline uint16_t rw_fast(struct emu_ctrl *c, struct rw_batch *b, const struct nvme_sqe *cmd, uint64_t *bytes,
                               const bool look_up)
{
    const bool data = b->data;
    uint64_t slba, nlb;
    uint16_t st = nvme_cr_flags(cmd->flags);
    if (EMU_UNLIKELY(st))
        return st;
    const uint32_t nsid = cmd->nsid;
    struct emu_ns *ns = b->ns_last; /* the namespace of the previous command, most often this one's */
    if (EMU_UNLIKELY(nsid != b->nsid_last)) {
        if (EMU_UNLIKELY(nsid - 1u >= b->nns))
            return EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
        ns = b->ns_last = &b->ns[nsid - 1u];
        b->nsid_last = nsid;
    }
    nvme_cr_rw(cmd->cdw10, cmd->cdw11, cmd->cdw12, &slba, &nlb);
    if (EMU_UNLIKELY((st = range_ok(ns, slba, nlb))))
        return st;
    uint64_t len = nlb << ns->lba_shift;
    if (EMU_UNLIKELY(len > b->mdts_max))
        return nvme_cr_mdts(len, b->mdts);
    const uint64_t prp1 = cmd->prp1;
    if (EMU_UNLIKELY(!prp1_direct(b, prp1, len, look_up))) {
        struct xfer x = {ns, slba << ns->lba_shift, NULL};
        emu_seg_fn fn = !data ? NULL : cmd->opc == NVME_CMD_READ ? seg_read : seg_write;
        if ((st = emu_prp_walk(c->dma, prp1, cmd->prp2, len, fn, &x)))
            return st;
    } else {
        if (EMU_UNLIKELY((st = nvme_cr_prp1_offset(prp1)) || (st = nvme_cr_addr(prp1, true))))
            return st;
        if (data) {
            struct xfer x = {ns, slba << ns->lba_shift, NULL};
            uint8_t *host = (uint8_t *)(uintptr_t)(prp1 + b->win_delta); /* 0 for an identity window */
            st = cmd->opc == NVME_CMD_READ ? (uint16_t)seg_read(&x, host, (size_t)len, 0)
                                           : (uint16_t)seg_write(&x, host, (size_t)len, 0);
            if (st)
                return st;
        }
    }
    *bytes = len;
    return EMU_ST_OK;
}

/* The fast path's per-doorbell state: the controller's namespaces and limits, the queue's DMA window. */
static inline struct rw_batch rw_batch_of(struct emu_ctrl *c, const struct emu_sq *sq)
{
    return (struct rw_batch){
        .ns = c->ns,
        .nns = c->cfg.nns,
        .mdts = c->cfg.mdts,
        .mdts_max = c->cfg.mdts ? c->cfg.mdts : UINT64_MAX,
        .data = c->set->cfg.data,
        .dom = c->dma,
        .win_lo = sq->win_lo,
        .win_hi = sq->win_hi,
        .win_delta = sq->win_delta,
        .nsid_last = UINT64_MAX, /* no NSID equals it */
        .ns_last = NULL,
    };
}

/* A fast-path CQE: hi holds SQHD, SQ id, CID and status with the phase tag; the phase tag is in the last word,
 * so the host sees the entry only after the rest is written. */
static inline void cqe_store(struct nvme_cqe *e, uint64_t hi)
{
    __atomic_store_n((uint64_t *)(void *)e, 0, __ATOMIC_RELAXED);
    __atomic_store_n((uint64_t *)(void *)&e->sqhd, hi, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- completion queue */
/* ---------------------------------------------------------------- faults */
enum fault_effect { FX_NONE, FX_STATUS, FX_DROP, FX_DELAY };

static enum fault_effect fault_check(struct emu_ctrl *c, uint16_t sqid, uint16_t *status, uint32_t *delay_ms)
{
    enum fault_effect fx = FX_NONE;
    unsigned n = atomic_load_explicit(&c->nfaults, memory_order_acquire);
    for (unsigned i = 0; i < n && i < NVME_EMU_MAX_FAULTS; i++) {
        struct emu_fault *f = &c->faults[i];
        if (!atomic_load_explicit(&f->armed, memory_order_acquire))
            continue;
        int32_t q = f->f.qid;
        if (!(q == sqid || (q == NVME_EMU_FAULT_ANY_QUEUE && sqid != 0)))
            continue;
        uint64_t seen = atomic_fetch_add_explicit(&f->seen, 1, memory_order_relaxed) + 1;
        uint64_t count = f->f.count ? f->f.count : 1;
        if (seen < f->f.nth)
            continue;
        if (seen >= f->f.nth + count - 1)
            atomic_store_explicit(&f->armed, false, memory_order_release);
        if (seen >= f->f.nth + count)
            continue;
        switch (f->f.kind) {
        case NVME_EMU_FAULT_STATUS:
            *status = (uint16_t)(EMU_ST(f->f.sct & 0x7u, f->f.sc) | (f->f.dnr ? NVME_CQE_DNR : 0));
            fx = FX_STATUS;
            break;
        case NVME_EMU_FAULT_DROP:
            return FX_DROP;
        case NVME_EMU_FAULT_DELAY:
            *delay_ms = f->f.delay_ms;
            if (fx == FX_NONE)
                fx = FX_DELAY;
            break;
        default:
            break;
        }
    }
    return fx;
}

/* ---------------------------------------------------------------- fetch */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* the order key of a completion among those due together: fetch order; random with ooo=1; shuffled within
 * windows of ooo_win (cmd_rules.h nvme_cr_ooo_key) */
static inline uint64_t fetch_key(const struct emu_cfg *cfg, struct emu_sq *sq)
{
    if (cfg->ooo)
        return rng_next(&sq->rng);
    if (cfg->inj.ooo_win > 1u)
        return nvme_cr_ooo_key(sq->seq++, cfg->inj.ooo_win, (uint32_t)rng_next(&sq->rng));
    return sq->seq++;
}

/* one command through the general path: faults, CID conflicts, model, heap */
static void fetch_slow(struct emu_ctrl *c, struct emu_sq *sq, const struct nvme_sqe *cmd, uint64_t *now, uint64_t *rd,
                       uint64_t *wr, uint64_t *rdb, uint64_t *wrb)
{
    const struct emu_cfg *cfg = &c->set->cfg;
    uint16_t status = 0;
    uint32_t dw0 = 0, delay_ms = 0;
    uint64_t bytes = 0, due = 0;
    bool admin = sq->id == 0;
    enum fault_effect fx =
        atomic_load_explicit(&c->nfaults, memory_order_relaxed) ? fault_check(c, sq->id, &status, &delay_ms) : FX_NONE;
    uint16_t cid = cmd->cid;
    uint64_t bit = 1ull << (cid & 63);
    struct emu_pend p = {.cid = cid};
    if (sq->cid_bits[cid >> 6] & bit) {
        /* Command ID Conflict: completes at once, the outstanding command keeps its CID */
        p.status = EMU_ST_DNR(NVME_SCT_GENERIC, NVME_SC_CID_CONFLICT);
        p.key = fetch_key(cfg, sq);
        emu_heap_push(sq, &p);
        return;
    }
    sq->cid_bits[cid >> 6] |= bit;
    if (fx != FX_STATUS) {
        if (admin) {
            bool hold = false;
            status = 0;
            emu_admin_exec(c, sq, cmd, &status, &dw0, &hold);
            if (hold)
                due = EMU_DUE_NEVER;
        } else {
            status = io_exec(c, cmd, &bytes);
            if (!status) {
                if (cmd->opc == NVME_CMD_READ)
                    (*rd)++, *rdb += bytes;
                else if (cmd->opc == NVME_CMD_WRITE)
                    (*wr)++, *wrb += bytes;
            }
        }
    }
    if (!admin && cfg->model.timed && due != EMU_DUE_NEVER) {
        if (!*now)
            *now = emu_now_ns(c->set);
        due = emu_model_due(c, sq, *now, bytes);
    }
    if (fx == FX_DELAY) {
        if (!*now)
            *now = emu_now_ns(c->set);
        uint64_t d = *now + (uint64_t)delay_ms * EMU_NS_PER_MS;
        due = due > d ? due : d;
    } else if (fx == FX_DROP) {
        due = EMU_DUE_NEVER;
        emu_st_add(&sq->st->dropped, 1);
    }
    p.due = due;
    p.status = status;
    p.dw0 = dw0;
    p.key = fetch_key(cfg, sq);
    emu_heap_push(sq, &p);
}

void emu_sq_service(struct emu_ctrl *c, struct emu_sq *sq)
{
    if (atomic_load_explicit(&c->cfs, memory_order_relaxed))
        return;
    /* a DMA window changed since the rings were checked: are they still reachable? (prp.c) */
    if (EMU_UNLIKELY(sq->ring_gen != atomic_load_explicit(&c->dma->gen, memory_order_relaxed)) &&
        !emu_sq_rings_ok(c, sq))
        return;
    const struct emu_cfg *cfg = &c->set->cfg;
    struct emu_cq *cq = sq->cq;
    const uint32_t ctail0 = cq->tail; /* moved at the end: completions were posted (interrupt, emu_cq_irq) */
    uint32_t head = sq->head, tail = sq->tail, size = sq->size;
    uint32_t avail = tail >= head ? tail - head : tail + size - head;
    uint32_t burst = cfg->model.fetch_burst;
    if (burst && avail > burst)
        avail = burst;
    uint64_t now = 0, rd = 0, wr = 0, rdb = 0, wrb = 0, fetched = 0;
    const struct nvme_sqe *ring = (const struct nvme_sqe *)(uintptr_t)sq->ring;

    if (avail && sq->id && !sq->nheap && c->fast_cfg && cq->nsq == 1 &&
        !atomic_load_explicit(&c->nfaults, memory_order_relaxed)) {
        /* fast path: execute and post in order */
        uint64_t posted = 0, other_ok = 0; /* errors = posted - successes (rd + wr + other_ok, less a held one) */
        struct rw_batch b = rw_batch_of(c, sq);
        /* the CQ in locals (one SQ feeds it, nothing else posts meanwhile), written back below: the free
         * entries (one always stays empty) counted once, the SQ id and phase tag kept in the high CQE word */
        volatile struct nvme_cqe *const cring = cq->ring;
        const uint32_t csize = cq->size;
        uint32_t ctail = cq->tail;
        uint32_t croom = (cq->head > ctail ? cq->head - ctail : cq->head + csize - ctail) - 1u;
        uint64_t hi_base = ((uint64_t)sq->id << 16) | ((uint64_t)cq->phase << 48);
        const uint32_t avail0 = avail;
        uint32_t held = 0;
        /* the host wrote these SQEs before its tail doorbell: read them as plain memory after this fence */
        atomic_thread_fence(memory_order_acquire);
        while (avail) {
            /* read in place: the fence above orders these reads after the doorbell's */
            const struct nvme_sqe *cmd = (const struct nvme_sqe *)(uintptr_t)&ring[head];
            head = head + 1 == size ? 0 : head + 1;
            avail--;
            uint64_t bytes = 0;
            const uint8_t opc = cmd->opc;
            const uint16_t cid = cmd->cid;
            uint16_t st;
            if (EMU_LIKELY(opc == NVME_CMD_READ)) {
                if (!(st = rw_fast(c, &b, cmd, &bytes, true)))
                    rd++, rdb += bytes;
            } else if (opc == NVME_CMD_WRITE) {
                if (!(st = rw_fast(c, &b, cmd, &bytes, true)))
                    wr++, wrb += bytes;
            } else {
                struct nvme_sqe copy = *cmd;
                st = io_exec(c, &copy, &bytes);
                other_ok += st == 0;
            }
            /* emu_cq_post on the local CQ state */
            if (EMU_LIKELY(croom)) {
                croom--;
                struct nvme_cqe *e = (struct nvme_cqe *)&cring[ctail];
                cqe_store(e, hi_base | head | ((uint64_t)cid << 32) | ((uint64_t)st << 48));
                if (EMU_UNLIKELY(++ctail == csize)) {
                    ctail = 0;
                    hi_base ^= (uint64_t)NVME_CQE_P << 48;
                }
            } else {
                /* CQ full: hold this one, the rest of the batch takes the general path */
                sq->cid_bits[cid >> 6] |= 1ull << (cid & 63);
                struct emu_pend p = {.due = 0, .key = sq->seq++, .cid = cid, .status = st};
                emu_heap_push(sq, &p);
                held = 1;
                other_ok -= st == 0; /* counted as a success above, not posted */
                break;
            }
        }
        posted = avail0 - avail - held;
        sq->win_lo = b.win_lo;
        sq->win_hi = b.win_hi;
        sq->win_delta = b.win_delta;
        cq->tail = ctail;
        cq->phase = (uint16_t)((hi_base >> 48) & NVME_CQE_P);
        sq->head = head;
        if (EMU_LIKELY(posted == rd + wr && !held)) {
            /* every command a successful read or write, posted: one counter a direction (emu_qstats_int) */
            if (rd) {
                emu_st_add(&sq->st->fast_rd, rd);
                emu_st_add(&sq->st->rd_bytes, rdb);
            }
            if (wr) {
                emu_st_add(&sq->st->fast_wr, wr);
                emu_st_add(&sq->st->wr_bytes, wrb);
            }
            rd = wr = rdb = wrb = 0;
        } else {
            fetched += avail0 - avail; /* the held one included */
            emu_st_add(&sq->st->completed, posted);
            emu_st_add(&sq->st->errors, posted - (rd + wr + other_ok));
        }
    }
    while (avail && sq->nheap < sq->size) {
        struct nvme_sqe cmd = ring[head];
        head = head + 1 == size ? 0 : head + 1;
        sq->head = head;
        avail--;
        fetched++;
        fetch_slow(c, sq, &cmd, &now, &rd, &wr, &rdb, &wrb);
        if (atomic_load_explicit(&c->cfs, memory_order_relaxed) || sq->ring == NULL)
            break; /* an admin command (e.g. its own deletion is impossible) or CFS stopped us */
    }
    if (fetched) { /* the general path, and a fast-path doorbell with anything but successful reads/writes */
        emu_st_add(&sq->st->fetched, fetched);
        emu_st_add(&sq->st->rd_cmds, rd);
        emu_st_add(&sq->st->wr_cmds, wr);
        emu_st_add(&sq->st->rd_bytes, rdb);
        emu_st_add(&sq->st->wr_bytes, wrb);
    }
    if (sq->nheap) /* held completions (emu_sq_drain returns at once without) */
        emu_sq_drain(c, sq, now);
    if (EMU_UNLIKELY(cq->ien) && cq->tail != ctail0) /* sq->cq: an admin command cannot delete its own SQ */
        emu_cq_irq(c, cq);
}

void emu_cq_service(struct emu_ctrl *c, struct emu_cq *cq)
{
    for (uint16_t i = 0; i < cq->nsq; i++) {
        struct emu_sq *sq = atomic_load_explicit(&c->sqs[cq->sqids[i]], memory_order_acquire);
        if (sq)
            emu_sq_service(c, sq);
    }
}

/* One new Read/Write on a queue the fast path serves (its conditions as in emu_sq_service: fast_cfg, an I/O queue
 * alone on its CQ, nothing held, no fault armed, the rings checked against the current DMA windows) with room in
 * the CQ: executed and posted here without the service's set-up (QD 1's doorbell: emu_sq_doorbell); its
 * accounting as the service's fast path keeps it (a success: one counter a direction and the bytes; a failure:
 * fetched, completed, errors). Anything else goes to emu_sq_service. */
void emu_sq_one(struct emu_ctrl *c, struct emu_sq *sq)
{
    const uint32_t head = sq->head, next = head + 1u == sq->size ? 0 : head + 1u;
    struct emu_cq *const cq = sq->cq;
    const uint32_t ctail = cq->tail, cnext = ctail + 1u == cq->size ? 0 : ctail + 1u;
    const struct nvme_sqe *cmd = (const struct nvme_sqe *)(uintptr_t)&sq->ring[head];
    if (EMU_LIKELY(cnext != cq->head && c->fast_cfg && sq->id && !sq->nheap && cq->nsq == 1 &&
                   !atomic_load_explicit(&c->cfs, memory_order_relaxed) &&
                   sq->ring_gen == atomic_load_explicit(&c->dma->gen, memory_order_relaxed) &&
                   !atomic_load_explicit(&c->nfaults, memory_order_relaxed))) {
        /* the host wrote the SQE before its tail doorbell: read it as plain memory after this fence */
        atomic_thread_fence(memory_order_acquire);
        const uint8_t opc = cmd->opc;
        if (EMU_LIKELY(opc == NVME_CMD_READ || opc == NVME_CMD_WRITE)) {
            const uint16_t cid = cmd->cid;
            /* the window looked up here, before the batch state is built, so that rw_fast need not take its
             * address (the state then stays in registers) */
            const uint64_t prp1 = cmd->prp1;
            if (EMU_UNLIKELY(prp1 < sq->win_lo || prp1 >= sq->win_hi))
                sq_window(c->dma, sq, prp1);
            struct rw_batch b = rw_batch_of(c, sq);
            uint64_t bytes = 0;
            const uint16_t st = rw_fast(c, &b, cmd, &bytes, false);
            sq->head = next;
            cqe_store((struct nvme_cqe *)&cq->ring[ctail], ((uint64_t)sq->id << 16) | ((uint64_t)cq->phase << 48) |
                                                               next | ((uint64_t)cid << 32) | ((uint64_t)st << 48));
            cq->tail = cnext;
            if (EMU_UNLIKELY(cnext == 0))
                cq->phase ^= NVME_CQE_P;
            if (EMU_UNLIKELY(cq->ien))
                emu_cq_irq(c, cq);
            struct emu_qstats_int *const qs = sq->st;
            if (EMU_LIKELY(!st)) {
                emu_st_add(opc == NVME_CMD_READ ? &qs->fast_rd : &qs->fast_wr, 1);
                emu_st_add(opc == NVME_CMD_READ ? &qs->rd_bytes : &qs->wr_bytes, bytes);
            } else {
                emu_st_add(&qs->fetched, 1);
                emu_st_add(&qs->completed, 1);
                emu_st_add(&qs->errors, 1);
            }
            return;
        }
    }
    emu_sq_service(c, sq);
}
