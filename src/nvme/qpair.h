/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpair.h — queue pair internals shared by qpair.c (I/O queues) and ctrl.c (the admin queue runs on the
 * same code with qid 0). Public calls are in nvme.h.
 *
 * A qpair owns one DMA block holding the SQ ring, the CQ ring (plus one host-only sentinel entry) and one
 * PRP-list page per CID tracker. Trackers (depth - 1 of them: the N-1 rule) sit on a free list; the CID of a
 * command is its tracker's index, so a completion finds its tracker by CID with one bounds check. A tracker is
 * active while its cb is non-NULL (a command submitted without a callback gets a no-op one); a free tracker has
 * cb == NULL and deadline == 0, so submit writes no state and no deadline.
 *
 * Fast path: nvme_qpair_submit handles a Read/Write whose buffer fits one controller page of a contiguous DMA
 * object (PRP1 only) with the checks reduced by what the general path established once and cached in the
 * qpair: fast_ns (namespace validated for this qpair; each tracker holds its CID and fast_ns's NSID ready for
 * SQE qword 0) and fast_dma (the cached DMA object when it is contiguous with a page-aligned bus address and
 * size). Anything else takes the general path, which reports the precise error. The SQ tail wrap and the batch
 * doorbell share one countdown (sq_left). CQ head doorbells can be coalesced (nvme_qpair_set_cq_batch): the
 * controller must always have room for the CQE of every outstanding command, so room_used counts the entries
 * it may still need (outstanding and timed-out commands, entries consumed but not yet reported) and a submit
 * that finds no room rings the CQ head doorbell first. The CQ may be deeper than the SQ (cq_depth, from
 * nvme_qpair_opts.cq_extra): room for the held-back entries without a deeper SQ; the trackers stay the SQ's N-1,
 * so a submit needs both CQ room and a free tracker. nvme_qpair_submit_many (qpair_batch.c) runs the same fast path
 * over a batch, checking what holds for the whole batch once. SQE words the fast path never sets stay zero in the ring;
 * a general- path command that sets them makes the next depth submits zero them again (sq_dirty). Poll stops at the
 * first entry that is not new; the sentinel after the last entry never is, so the loop has no end-of-ring test.
 *
 * Key functions: nvme_qpair_setup (rings + trackers over a fresh DMA block), nvme_qpair_teardown,
 * nvme_qpair_reset_rings (after a controller reset, for the admin queue), nvme_clock_ticks; the doorbells as
 * small inline functions (nvme_qpair_sq_ring, nvme_qpair_cq_ring: one MMIO access each) and the poll's expiry
 * clock (nvme_qpair_clock_check), shared by qpair.c and qpair_batch.c (submit_many, and the QD-1 pair
 * nvme_qpair_submit_one / nvme_qpair_poll_one).
 *
 * Caveats: no locks; one thread per qpair. The clock is the TSC on x86-64 (cntvct on aarch64), read by every
 * poll that delivers nothing and by every NVME_POLL_CLOCK_EVERY-th poll that delivers something (so a command
 * that never completes expires while others keep completing, at most that many polls late); submit never reads
 * it. Timeouts are stamped lazily: a command's deadline is set by the first expiry scan that sees it, so a timeout
 * fires between timeout and timeout + 2 scan intervals after submission (plus those polls), and submit costs no
 * clock read. Poll hands every successful completion the same struct
 * nvme_cpl (only cdw0 and cid change): callbacks must not write through their const pointer.
 */
#ifndef NVME_QPAIR_H
#define NVME_QPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/bar.h"
#include "nvme/barrier.h"
#include "nvme/dma.h"
#include "nvme/mmio.h"
#include "nvme/nvme.h"

#define NVME_SCAN_DIVISOR     4u /* expiry scans run every timeout / 4 (at most NVME_SCAN_MAX_MS) */
#define NVME_SCAN_MAX_MS      250u
#define NVME_CQ_SENTINELS     1u  /* host-only CQE after the ring's last entry, never new (see poll) */
#define NVME_FAST_NS_SWITCH   64u /* general-path submits for other namespaces before fast_ns moves */
#define NVME_POLL_CLOCK_EVERY 64u /* polls that deliver completions read the clock once in this many */

/* A tracker is one cache line so that a CID turns into its address with a single shift. */
#define NVME_TRK_SIZE  64u
#define NVME_TRK_SHIFT 6u

struct nvme_tracker {
    /* hot: written by submit, read and cleared by poll */
    nvme_cb cb;        /* non-NULL while the command is active */
    uint64_t deadline; /* clock ticks; 0 = not yet stamped by an expiry scan (and while free) */
    void *arg;
    uint64_t fast_dw0; /* SQE qword 0 of a fast-path command but its opcode: this CID, fast_ns's NSID */
    struct nvme_tracker *next_free;
    uint8_t opc;
    bool zombie; /* timed out or abandoned, its CQE still owed (cb is NULL) */
    uint8_t rsvd[6];
    /* cold: only the general PRP path reads these */
    uint64_t *prp_list; /* this tracker's PRP-list page (vaddr) */
    uint64_t prp_iova;  /* and its bus address */
};
NVME_STATIC_ASSERT(sizeof(struct nvme_tracker) == NVME_TRK_SIZE, "tracker is one cache line");
NVME_STATIC_ASSERT(((size_t)1 << NVME_TRK_SHIFT) == NVME_TRK_SIZE, "tracker shift matches its size");
NVME_STATIC_ASSERT(offsetof(struct nvme_tracker, deadline) == offsetof(struct nvme_tracker, cb) + sizeof(nvme_cb),
                   "cb and deadline are adjacent: freeing clears both together");

struct nvme_qpair {
    /* hot: what submit touches per command */
    struct nvme_sqe *sq_next;        /* SQ slot the next command goes to (the software tail) */
    struct nvme_tracker *free_trk;   /* free list of trackers (NULL: all N-1 in use) */
    const struct nvme_ns *fast_ns;   /* namespace validated for the fast path (NULL: none yet) */
    const struct nvme_dma *fast_dma; /* dma_cache when it qualifies for the fast path, else a sentinel */
    struct nvme_dma *dma_cache;      /* last DMA object a buffer was found in (nvme_dma_free clears it) */
    const uint32_t *ctrl_gen;        /* live generation of the controller */
    uint32_t gen;                    /* controller generation at creation */
    uint32_t sq_left;                /* submits left before the next SQ event: batch doorbell or ring wrap */
    uint64_t page_mask;
    uint32_t page_size;
    uint64_t fast_lba_size; /* LBA size of fast_ns */
    uint32_t outstanding;
    uint32_t sq_dirty;  /* next submits that must zero the SQE words the fast path skips (see post) */
    uint32_t room_used; /* CQ entries the controller may still need: outstanding + zombies + cq_unrung (+ the
                         * entries the running poll consumed); a submit needs room_used < cq_cap and a free
                         * tracker (ntrk of them: the SQ's N-1; the CQ may be deeper, see cq_depth) */
    uint32_t cq_cap;    /* cq_depth - 1: the most CQ entries the controller can hold */
    /* poll and the SQ events */
    struct nvme_sqe *sq;
    struct nvme_sqe *sq_end; /* sq + depth */
    volatile struct nvme_cqe *cq;
    struct nvme_tracker *trk;
    const struct nvme_bar *bar;
    uint32_t sq_chunk;   /* sq_left when it was last set */
    uint32_t sq_pending; /* SQEs written before the current chunk and not yet rung */
    uint32_t batch;
    uint32_t depth;    /* SQ entries (N): ntrk = N - 1 commands can be outstanding */
    uint32_t cq_depth; /* CQ entries: depth + nvme_qpair_opts.cq_extra (the room a coalesced CQ doorbell needs) */
    uint64_t ntrk;     /* trackers: depth - 1 (64-bit: compared with a CID used as an index) */
    uint32_t cq_head;
    uint32_t cq_unrung; /* CQ entries consumed before cq_head and not yet reported by the CQ head doorbell */
    uint32_t cq_batch;  /* ring the CQ head doorbell once cq_unrung reaches this (1: every poll that consumed) */
    uint32_t sq_tail;   /* tail index last written to the SQ doorbell */
    uint16_t qid;
    uint8_t phase;
    bool dead;    /* controller reset under us */
    bool fast_ok; /* one controller page fits max_xfer: the PRP1-only fast path may be used */
    uint32_t sq_db_off;
    uint32_t cq_db_off;
    uint32_t page_shift; /* controller memory page */
    uint32_t max_xfer;
    uint64_t now;        /* clock at the last poll that read it */
    uint32_t clock_left; /* polls that deliver completions until the next one that reads the clock */
    uint64_t next_scan;
    uint64_t scan_ticks;
    uint64_t timeout_ticks;
    /* cold */
    uint32_t nzombie;
    struct nvme_ctrl *ctrl;
    struct nvme_dma *mem;           /* rings + PRP pages */
    struct nvme_qpair *prev, *next; /* controller's list of live I/O qpairs */
    uint64_t spurious;              /* completions with an unknown CID */
    uint32_t fast_ns_misses;        /* general-path submits for another namespace since fast_ns was set */
};

#define NVME_SQE_CID_SHIFT 16u /* CID in SQE qword 0 (qpair.c asserts it against spec.h) */
/* fast_dma when no DMA object qualifies: never equal to dma_cache, size 0 (qpair.c). */
extern const struct nvme_dma nvme_qpair_no_fast_dma;

/* Queue sqe as given but its CID and the PRPs for buf/len: the driver's own commands, unchecked (ctrl.c). */
int nvme_qpair_submit_cmd(struct nvme_qpair *q, const struct nvme_sqe *sqe, void *buf, size_t len, nvme_cb cb,
                          void *arg);
/* The driver's IOMMU for a user's raw command (qpair_raw.c, rules at nvme_qpair_submit_raw in nvme.h): PRP1/PRP2
 * for sqe into *prp1 and *prp2 (a PRP list copied into t's page), or a negative errno with the reason in err. With
 * buf (len > 0) only the checks: the caller builds buf's PRPs. */
int nvme_qpair_raw_prps(struct nvme_qpair *q, struct nvme_tracker *t, const struct nvme_sqe *sqe, const void *buf,
                        size_t len, uint64_t *prp1, uint64_t *prp2, char *err, size_t errlen);

/* Build rings and trackers for qid over a new DMA block of the controller's target (qpair_setup.c). */
int nvme_qpair_setup(struct nvme_qpair *q, struct nvme_ctrl *c, uint16_t qid, uint32_t depth, uint32_t cq_depth,
                     uint32_t timeout_ms, uint32_t batch);
void nvme_qpair_teardown(struct nvme_qpair *q);
/* Empty both rings (zero the CQ), reset indices and phase, free every tracker (callbacks NOT run). */
void nvme_qpair_reset_rings(struct nvme_qpair *q);
/* Complete every outstanding command with err (callbacks run); trackers become free. Callbacks run from
 * nvme_qpair_poll may submit on the same qpair but must not poll or destroy it. */
void nvme_qpair_fail_all(struct nvme_qpair *q, int err);

/* SQ event (sq_left reached 0, sq_next already advanced): wrap the tail and/or ring the batch doorbell. */
void nvme_qpair_sq_event(struct nvme_qpair *q);
/* Zero the SQE words of slot the fast path does not write (sq_dirty was non-zero); counts sq_dirty down. */
void nvme_qpair_sq_clean(struct nvme_qpair *q, struct nvme_sqe *slot);

uint64_t nvme_clock_ticks(void);
uint64_t nvme_clock_ticks_per_ms(void);
/* The expiry clock's turn came (q->clock_left reached 0 in a poll that delivered): read it, scan when due. */
void nvme_qpair_clock_check(struct nvme_qpair *q);

/* Status bits that make a completion anything but plain success (all but the phase tag, CRD and More). */
#define NVME_CQE_STATUS_NOT_OK (NVME_CQE_SC_MASK | NVME_CQE_SCT_MASK | NVME_CQE_DNR)

/* SQ events. Submit counts sq_left down and handles the tail wrap and the batch doorbell only when it reaches
 * 0: sq_left is the distance to whichever of the two comes first. SQEs written but not yet rung:
 * sq_pending + (sq_chunk - sq_left). */
static inline void nvme_qpair_sq_refill(struct nvme_qpair *q)
{
    uint32_t to_end = (uint32_t)(q->sq_end - q->sq_next);
    uint32_t to_ring = q->batch - q->sq_pending;
    q->sq_left = q->sq_chunk = to_end < to_ring ? to_end : to_ring;
}

static inline uint32_t nvme_qpair_sq_unrung(const struct nvme_qpair *q)
{
    return q->sq_pending + (q->sq_chunk - q->sq_left);
}

/* The SQ tail doorbell (the one MMIO access here): every SQE written so far becomes visible. */
static inline void nvme_qpair_sq_ring(struct nvme_qpair *q)
{
    const uint32_t tail = (uint32_t)(q->sq_next - q->sq);
    nvme_wmb();
    nvme_mmio_write32(q->bar, q->sq_db_off, tail);
    q->sq_tail = tail;
    q->sq_pending = 0;
    nvme_qpair_sq_refill(q);
}

/* The CQ head doorbell (the one MMIO access here): report every consumed CQ entry (up to cq_head). */
static inline void nvme_qpair_cq_ring(struct nvme_qpair *q)
{
    nvme_mmio_write32(q->bar, q->cq_db_off, q->cq_head);
    q->room_used -= q->cq_unrung;
    q->cq_unrung = 0;
}

#endif /* NVME_QPAIR_H */
