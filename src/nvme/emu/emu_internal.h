/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * emu_internal.h — private state of the emulated controller (not for the driver or bindings).
 *
 * Purpose: the structures shared by the emulator's translation units:
 *   params.c  URI / key=value parameters -> struct emu_cfg (validation, messages)
 *   ns.c      namespaces: lazily allocated RAM chunks or a sparse file
 *   model.c   device model: monotonic clock, GCRA token buckets, latency samples
 *   ctrl.c    set open/close, registers (CC/CSTS/AQA/ASQ/ACQ), admin commands,
 *             faults, stats, the service thread of mode=thread
 *   io.c      SQ fetch, NVM commands, PRP walking, completion posting
 *
 * Key functions: emu_parse_cfg(), emu_model_*(), emu_admin_exec(). The functions of ns.c, prp.c and io.c,
 * with their fast-path inlines (emu_ns_read, emu_dma_ok/emu_dma_ptr, emu_sq_doorbell), are in their owners'
 * headers ns.h, prp.h and io.h: no inline here calls up into a file above (tests/test_emu_keys.py).
 *
 * Caveats: per-queue state (struct emu_sq, its heap and bucket) is touched only
 * by the thread that drives that queue; per-device buckets are lock-free
 * atomics; a CQ shared by several SQs takes a spin lock while posting.
 */
#ifndef NVME_EMU_INTERNAL_H
#define NVME_EMU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nvme/bar.h"
#include "nvme/emu/cmd_rules.h"
#include "nvme/emu/emu.h"
#include "nvme/emu/emu_keys.h"
#include "nvme/emu/profiles.h"
#include "nvme/spec.h"

/* ---- limits of the URI parameters ---- */
#define EMU_MAX_CTRLS     64u
#define EMU_MAX_NS        32u
#define EMU_MAX_DSTRD     8u /* doorbell stride 4 << 8 = 1 KiB at most */
#define EMU_MAX_NIOQ      65535u
#define EMU_MAX_MQES      65536u /* entries (CAP.MQES is 0-based 16-bit) */
#define EMU_MIN_MQES      2u
#define EMU_MAX_PATH      4096u
#define EMU_MAX_RAM_NSZE  (1ull << 42) /* 4 TiB of sparse RAM namespace (chunk table 32 MiB) */
#define EMU_MAX_FILE_NSZE (1ull << 50)
/* RAM namespaces that hold data may allocate at most this share of the host's memory in all (sum of
 * ncap, params.c): fully written they then leave a quarter of it to the interpreter, DMA buffers, page
 * cache and the rest of the host, while sparse namespaces stay possible (nsze may exceed it with a
 * smaller ncap, data=none or backing=file). 75 % rather than 50 %: the studies' 16 x 1 GiB emulated
 * devices (cpu_initiated standard) need 68 % of the 24 GiB development host. */
#define EMU_RAM_SHARE_PCT 75u

/* ---- defaults ---- */
#define EMU_DEF_NDEV  1u
#define EMU_DEF_NNS   1u
#define EMU_DEF_NSZE  (1ull << 30) /* 1 GiB, costs nothing until written */
#define EMU_DEF_LBADS 512u
#define EMU_DEF_MDTS  (128u << 10) /* 128 KiB */
#define EMU_DEF_MQES  4096u
#define EMU_DEF_NIOQ  64u
#define EMU_DEF_SEED  1u

/* ---- controller constants ---- */
#define EMU_PAGE_SHIFT      NVME_PAGE_SHIFT_MIN /* CAP.MPSMIN = CAP.MPSMAX = 0: 4 KiB pages only */
#define EMU_PAGE_SIZE       NVME_PAGE_SIZE_MIN
#define EMU_CAP_TO_UNITS    2u  /* CAP.TO: 1 s for CSTS.RDY transitions */
#define EMU_CHUNK_SHIFT     20u /* RAM namespace allocation granule: 1 MiB */
#define EMU_CHUNK_SIZE      (1ull << EMU_CHUNK_SHIFT)
#define EMU_AERL            3u    /* 0-based: 4 outstanding Async Event Requests */
#define EMU_NFEATURES       0x0cu /* feature ids 0x01..0x0b kept in a table */
#define EMU_SMART_LOG_SIZE  512u
#define EMU_ERROR_LOG_ENTRY 64u
#define EMU_DATA_UNIT_BYTES 512000u /* SMART data units: 1000 x 512 bytes */
#define EMU_TEMP_KELVIN     300u
#define EMU_CID_WORDS       (65536u / 64u) /* outstanding-CID bitmap of one SQ */
#define EMU_FP_SHIFT        16u            /* model time: ns in 48.16 fixed point */
#define EMU_NS_PER_S        1000000000ull
#define EMU_NS_PER_MS       1000000ull
#define EMU_DUE_NEVER       UINT64_MAX
#define EMU_VID             NVME_EMU_VID /* QEMU's PCI vendor id: an emulated device */
#define EMU_SVC_IDLE_SPINS  256u         /* mode=thread: empty sweeps before sleeping */
#define EMU_SVC_SLEEP_NS    20000u

enum emu_mode { EMU_MODE_INLINE = 0, EMU_MODE_THREAD = 1 };
enum emu_backing { EMU_BACKING_RAM = 0, EMU_BACKING_FILE = 1 };

struct emu_ctrl_cfg {
    uint32_t nns;
    uint64_t nsze;  /* bytes */
    uint64_t ncap;  /* bytes that may be allocated (thin provisioning), <= nsze */
    uint32_t lbads; /* bytes: 512 or 4096 */
    uint64_t mdts;  /* bytes, 0 = unlimited */
    uint32_t mqes;  /* entries */
    uint32_t nioq;
    uint32_t dstrd;
};

/* Effective device model: nominal profile values with URI overrides, then scaled. */
struct emu_model_cfg {
    bool timed;      /* any latency or cap: the clock is read */
    uint64_t lat_ns; /* median latency after scale */
    double lat_sigma;
    uint64_t dev_iops_fp; /* fixed-point ns between commands at the device cap (0 = none) */
    double dev_bw_fp;     /* fixed-point ns per byte (0 = none) */
    uint64_t queue_iops_fp;
    double link_bw_fp;
    uint32_t fetch_burst; /* 0 = unlimited */
};

struct emu_cfg {
    unsigned ndev;
    struct emu_ctrl_cfg c[EMU_MAX_CTRLS];
    enum emu_backing backing;
    char path[EMU_MAX_PATH];
    const struct nvme_emu_profile *profile;
    double scale;
    /* nominal overrides: < 0 = not given */
    double lat_ns, lat_sigma, iops, bw, qiops, link;
    int64_t fetch;
    enum emu_mode mode;
    uint64_t seed;
    bool ooo;
    struct nvme_cr_inj inj; /* err_every, err_status, ooo_win (cmd_rules.h) */
    bool data;              /* false: data=none, no data movement */
    struct emu_model_cfg model;
    char warn[NVME_EMU_WARN_LEN]; /* old spellings the URI used (emu_keys.h), "" when none */
};

int emu_parse_cfg(const struct nvme_emu_kv *kv, size_t nkv, struct emu_cfg *cfg, char *err, size_t errlen);

/* ---- namespaces ---- */
#define EMU_CHUNK_DEALLOC ((uintptr_t)1) /* chunk pointer tag: mapped, memory given back, not in used_chunks */
struct emu_ns {
    uint32_t nsid;
    uint32_t lba_shift;
    uint64_t nlb;
    uint64_t bytes;
    int fd;                     /* -1: RAM */
    _Atomic(uint8_t *) *chunks; /* RAM: lazily mmap'ed EMU_CHUNK_SIZE pieces (tagged EMU_CHUNK_DEALLOC: given back) */
    uint64_t nchunks;
    uint64_t cap_chunks; /* allocation limit (ncap) */
    atomic_uint_fast64_t used_chunks;
};

struct emu_ctrl;
struct emu_sq;

/* ---- DMA windows ---- */
#define EMU_DMA_SHARDS 64u /* reader counters, one cache line each (by controller and queue) */
/* [lo, hi) in controller addresses (IOVAs); the host pointer of address a is a + delta (mod 2^64): 0 for an
 * identity window (the driver's, our vfio-user client's), va - iova for a translated one (QEMU's guest-physical
 * addresses, nvme_emu_dma_map_at) */
struct emu_dma_win {
    uint64_t lo, hi;
    uint64_t delta;
};
struct emu_dma_map {
    unsigned n;
    _Atomic unsigned hint;  /* index of the last window hit */
    struct emu_dma_win w[]; /* sorted by lo, disjoint */
};
struct emu_dma_shard {
    _Alignas(64) _Atomic unsigned long n[2]; /* sections in progress, by epoch parity */
};
/* One IOMMU domain (prp.c): an immutable sorted snapshot of windows replaced under lock, read inside a read-side
 * section (emu_dma_enter/exit); a replaced snapshot and an unmapped range are released only after every section
 * that could see them has ended. The set has one, shared by its controllers (the in-process driver's windows);
 * a controller may have its own (nvme_emu_ctrl_dma_private: a vfio-user server, one domain per client). */
struct emu_dma_dom {
    pthread_mutex_t lock;
    struct emu_dma_map *_Atomic map; /* NULL: no window, no DMA */
    _Atomic uint64_t gen;            /* bumped by every map/unmap: queues revalidate their rings */
    _Atomic unsigned epoch;          /* bit 0: which reader counter new sections take */
    struct emu_dma_shard rd[EMU_DMA_SHARDS];
};

/* ---- model ---- */
uint64_t emu_now_ns(const struct nvme_emu_set *set);
void emu_model_setup(struct emu_cfg *cfg);
/* Completion due time (ns since epoch) of a command of `bytes` payload fetched at `now`. */
uint64_t emu_model_due(struct emu_ctrl *c, struct emu_sq *sq, uint64_t now, uint64_t bytes);

/* ---- queues ---- */
struct emu_pend {
    uint64_t due; /* ns since set epoch; EMU_DUE_NEVER = dropped */
    uint64_t key; /* tie-breaker: sequence, or random with ooo */
    uint32_t dw0;
    uint16_t cid;
    uint16_t status; /* without phase */
};

/* fast_rd/fast_wr: successful reads/writes of a doorbell the fast path (io.c) ran whole, every command a successful
 * read or write posted at once; each counts in fetched, completed and rd_cmds/wr_cmds too, which are read with
 * emu_st_fetched etc. (one counter a direction instead of three per doorbell). */
struct emu_qstats_int {
    _Atomic uint64_t fetched, completed, errors, cq_full_held, dropped;
    _Atomic uint64_t rd_cmds, wr_cmds, rd_bytes, wr_bytes;
    _Atomic uint64_t fast_rd, fast_wr;
    _Atomic uint64_t inflight;
};

struct emu_cq {
    uint16_t id;
    uint32_t size;
    volatile struct nvme_cqe *ring; /* ring_iova translated through its DMA window (emu_sq_rings_ok renews it) */
    uint64_t ring_iova;
    bool ien;      /* interrupts enabled (the admin CQ always): completions posted call the controller's irq hook */
    uint16_t iv;   /* its interrupt vector */
    uint32_t tail; /* next slot the controller writes */
    uint32_t head; /* last head the host reported */
    uint16_t phase;
    uint16_t nsq;    /* SQs bound */
    uint16_t *sqids; /* nsq entries (grows) */
    uint16_t sqids_cap;
    atomic_flag lock; /* taken while posting when nsq > 1 */
};

struct emu_sq {
    uint16_t id;
    uint32_t size;
    const volatile struct nvme_sqe *ring; /* ring_iova translated (as emu_cq.ring) */
    uint64_t ring_iova;
    uint32_t head, tail;
    struct emu_cq *cq;
    struct emu_qstats_int *st;
    uint64_t *cid_bits;    /* EMU_CID_WORDS words: outstanding CIDs */
    struct emu_pend *heap; /* size entries */
    uint32_t nheap;
    uint64_t seq;
    uint64_t q_tat; /* per-queue GCRA (fixed point) */
    uint64_t rng;
    uint32_t aers;     /* admin SQ: outstanding async event requests */
    uint64_t ring_gen; /* dma->gen at which the rings were last found inside windows */
    /* the DMA window the last fast-path PRP1 fell in, [win_lo, win_hi) (empty: none); valid while ring_gen
     * is current: emu_sq_rings_ok empties it when the windows change (io.c prp1_direct) */
    uint64_t win_lo, win_hi, win_delta;
};

struct emu_fault {
    struct nvme_emu_fault f;
    atomic_uint_fast64_t seen;
    atomic_bool armed;
};

struct emu_ctrl {
    struct nvme_bar bar;
    /* its IOMMU domain: &set->dma, or its own (nvme_emu_ctrl_dma_private; switched under lock before use) */
    struct emu_dma_dom *dma;
    uint8_t *mem; /* BAR memory: memsize bytes of memfd (MAP_SHARED), so a vfio-user server can pass it on */
    size_t memsize;
    int memfd; /* -1 when memfd_create was refused (anonymous memory then) */
    struct nvme_emu_set *set;
    unsigned index;
    struct emu_ctrl_cfg cfg;
    /* fixed at creation, for the doorbell path: mode=thread; doorbell stride as shift and mask; the set's
     * configuration lets io.c's fast path run (no timing model, ooo, ooo_win, err_every) */
    bool threaded;
    uint32_t db_shift, db_mask;
    bool fast_cfg;
    struct emu_ns ns[EMU_MAX_NS];
    uint64_t cap;
    uint32_t cc;
    _Atomic uint32_t csts;
    bool enabled;
    _Atomic bool cfs;
    uint32_t nsq_alloc, ncq_alloc; /* Number of Queues (1-based counts) */
    uint32_t nvec;                 /* interrupt vectors the host side offers (Create I/O CQ IV < nvec), >= 1 */
    /* interrupt hook (nvme_emu_set_irq_hook): ctx stored before fn (release), read after it (acquire) */
    _Atomic(nvme_emu_irq_fn) irq_fn;
    void *_Atomic irq_ctx;
    /* Keep Alive Timer feature (0Fh): KATO in ms, 0 = disabled; set by admin commands, read by every host thread
     * that touches the controller (relaxed atomics: a late view only delays the timeout by one touch) */
    _Atomic uint32_t kato;
    _Atomic uint64_t ka_last; /* emu_now_ns() of the last Keep Alive (or of Set Features KATO) */
    uint8_t acre;             /* Host Behavior Support feature (16h): ACRE, byte 0 */
    bool nq_set;
    uint32_t feat[EMU_NFEATURES];
    struct emu_sq *_Atomic *sqs;   /* nioq + 1 */
    struct emu_cq **cqs;           /* nioq + 1 */
    struct emu_qstats_int *qstats; /* nioq + 1 */
    /* device model */
    _Atomic uint64_t iops_tat, bw_tat;
    /* faults */
    struct emu_fault faults[NVME_EMU_MAX_FAULTS];
    atomic_uint nfaults;
    /* mode=thread */
    pthread_mutex_t lock;
    pthread_t svc;
    bool svc_running;
    atomic_bool svc_stop;
    uint32_t *db_seen;                               /* last doorbell values seen by the service thread (2 per qid) */
    _Atomic uint64_t svc_sweeps, svc_busy, svc_cmds; /* the service thread's passes, busy ones, commands fetched */
};

struct nvme_emu_set {
    struct emu_cfg cfg;
    unsigned n;
    struct emu_ctrl *ctrls;
    uint64_t epoch_ns; /* CLOCK_MONOTONIC at open */
    _Atomic uint64_t link_tat;
    char desc[256];
    struct emu_dma_dom dma; /* DMA windows shared by the controllers (the emulator's IOMMU, prp.c) */
};

/* Post the held completions now due; returns how many were posted. */
uint64_t emu_sq_drain(struct emu_ctrl *c, struct emu_sq *sq, uint64_t now);
/* complete a command: post now (or hold when the CQ is full / model says later) */
void emu_complete(struct emu_ctrl *c, struct emu_sq *sq, uint16_t cid, uint16_t status, uint32_t dw0, uint64_t due);

/* ctrl.c */
/* Execute one admin command; *hold = true keeps it outstanding (Async Event Request). */
/* Keep Alive Timer (admin.c): with KATO set and no Keep Alive for longer than KATO, the controller
 * stops (CSTS.CFS), as the specification asks of a PCIe controller on a Keep Alive Timeout. True when it
 * expired now. Called by the service thread (mode=thread) and on the host's register writes and polls
 * (mode=inline); costs one compare while KATO is 0. */
bool emu_keep_alive_expired(struct emu_ctrl *c);
void emu_admin_exec(struct emu_ctrl *c, struct emu_sq *sq, const struct nvme_sqe *cmd, uint16_t *status, uint32_t *dw0,
                    bool *hold);

/* status helpers: 16-bit status without phase = (sct << 9) | (sc << 1) | dnr */
#define EMU_ST(sct, sc)     NVME_CR_ST(sct, sc) /* cmd_rules.h: shared with the GPU emulator */
#define EMU_ST_DNR(sct, sc) NVME_CR_ST_DNR(sct, sc)
#define EMU_ST_OK           NVME_CR_OK

/* Registers in BAR memory (release stores, acquire loads; 64-bit as two dwords, low first). */
static inline void emu_reg_w32(struct emu_ctrl *c, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(void *)(c->mem + off), v, __ATOMIC_RELEASE);
}
static inline void emu_reg_w64(struct emu_ctrl *c, uint32_t off, uint64_t v)
{
    emu_reg_w32(c, off, (uint32_t)v);
    emu_reg_w32(c, off + 4, (uint32_t)(v >> 32));
}
static inline uint32_t emu_reg_r32(const struct emu_ctrl *c, uint32_t off)
{
    return __atomic_load_n((const uint32_t *)(const void *)(c->mem + off), __ATOMIC_ACQUIRE);
}
static inline uint64_t emu_reg_r64(const struct emu_ctrl *c, uint32_t off)
{
    return emu_reg_r32(c, off) | ((uint64_t)emu_reg_r32(c, off + 4) << 32);
}

/* Controller Fatal Status: the controller stops fetching until CC.EN 1->0 (inline: prp.c sets it too, and
 * prp.c must not call into ctrl.c, which calls it). */
static inline void emu_ctrl_fatal(struct emu_ctrl *c)
{
    atomic_store(&c->cfs, true);
    uint32_t v = atomic_fetch_or_explicit(&c->csts, NVME_CSTS_CFS, memory_order_acq_rel) | NVME_CSTS_CFS;
    emu_reg_w32(c, NVME_REG_CSTS, v);
}

/* A statistics counter with one writer (always inlined: a call would cost more than the add). */
static inline __attribute__((always_inline)) void emu_st_add(_Atomic uint64_t *x, uint64_t n)
{
    atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + n, memory_order_relaxed);
}

static inline uint64_t emu_st_get(const _Atomic uint64_t *x)
{
    return atomic_load_explicit(x, memory_order_relaxed);
}

/* The counters the fast path's fast_rd/fast_wr stand in for (struct emu_qstats_int). */
static inline uint64_t emu_st_fetched(const struct emu_qstats_int *s)
{
    return emu_st_get(&s->fetched) + emu_st_get(&s->fast_rd) + emu_st_get(&s->fast_wr);
}
static inline uint64_t emu_st_completed(const struct emu_qstats_int *s)
{
    return emu_st_get(&s->completed) + emu_st_get(&s->fast_rd) + emu_st_get(&s->fast_wr);
}
static inline uint64_t emu_st_rd_cmds(const struct emu_qstats_int *s)
{
    return emu_st_get(&s->rd_cmds) + emu_st_get(&s->fast_rd);
}
static inline uint64_t emu_st_wr_cmds(const struct emu_qstats_int *s)
{
    return emu_st_get(&s->wr_cmds) + emu_st_get(&s->fast_wr);
}

/* admin.c: queue objects (also used by controller enable/disable in ctrl.c) */
/* base: the ring's controller address, translated here (only inside a read-side section; NULL when no window
 * holds the ring). */
struct emu_cq *emu_cq_new(struct emu_ctrl *c, uint16_t qid, uint64_t base, uint32_t size);
struct emu_sq *emu_sq_new(struct emu_ctrl *c, uint16_t qid, uint64_t base, uint32_t size, struct emu_cq *cq);
void emu_cq_free(struct emu_cq *cq);
void emu_sq_delete(struct emu_ctrl *c, uint16_t qid, bool post);
void emu_queues_reset(struct emu_ctrl *c);

/* Completions were just posted to cq (visible: the CQEs' release stores came first): with interrupts enabled on
 * it, tell the host side's hook its vector (nvme_emu_set_irq_hook). Called once per batch, from the thread that
 * posted. */
static inline void emu_cq_irq(struct emu_ctrl *c, const struct emu_cq *cq)
{
    if (!cq->ien)
        return;
    nvme_emu_irq_fn fn = atomic_load_explicit(&c->irq_fn, memory_order_acquire);
    if (fn)
        fn(atomic_load_explicit(&c->irq_ctx, memory_order_relaxed), c->index, cq->iv);
}

/* complete.c: a held completion (CQ full, not due yet, or out-of-order) */
void emu_heap_push(struct emu_sq *sq, const struct emu_pend *p);

/* Write one CQE (phase tag last, release) unless the CQ is full. */
static inline bool emu_cq_post(struct emu_cq *cq, uint16_t sqid, uint16_t sqhd, uint16_t cid, uint16_t status,
                               uint32_t dw0)
{
    uint32_t next = cq->tail + 1 == cq->size ? 0 : cq->tail + 1;
    if (next == cq->head)
        return false;
    struct nvme_cqe *e = (struct nvme_cqe *)&cq->ring[cq->tail];
    uint64_t lo = dw0, hi = (uint64_t)sqhd | ((uint64_t)sqid << 16) | ((uint64_t)cid << 32) |
                            ((uint64_t)(uint16_t)(status | cq->phase) << 48);
    __atomic_store_n((uint64_t *)(void *)e, lo, __ATOMIC_RELAXED);
    /* the phase tag is in the last word: the host sees the entry only after the rest is written */
    __atomic_store_n((uint64_t *)(void *)&e->sqhd, hi, __ATOMIC_RELEASE);
    cq->tail = next;
    if (!next)
        cq->phase ^= NVME_CQE_P;
    return true;
}

#endif /* NVME_EMU_INTERNAL_H */
