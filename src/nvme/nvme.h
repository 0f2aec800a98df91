/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvme.h — public API of the nvmelab user-space NVMe driver (C11). Include this one header.
 *
 * Objects (all opaque; created and destroyed only through these functions):
 *   nvme_target  what a URI names: one or more controllers plus the DMA domain they share
 *                (emu:// emulated controllers, pci:// real functions on uio_pci_generic or vfio-pci).
 *   nvme_ctrl    one controller: brought up per spec when the target opens, shut down (CC.SHN) on close.
 *   nvme_ns      an active namespace of a controller (owned by the controller).
 *   nvme_qpair   an I/O submission/completion queue pair; belongs to ONE thread, takes no locks.
 *   nvme_dma     a DMA-able host buffer of a target (identity / pagemap / VFIO IOVA translation).
 *
 * Key functions: nvme_target_open/close, nvme_target_ctrl, nvme_ctrl_id, nvme_ctrl_ns, nvme_ctrl_admin,
 * nvme_ctrl_reset, nvme_dma_alloc, nvme_qpair_create/submit/ring/poll/destroy, nvme_ns_io_sync.
 *
 * Error model: functions return 0 (or a count) on success and a NEGATIVE errno on a system-level failure
 * (-EINVAL bad argument, -ENOMEM, -ETIMEDOUT, -ENXIO controller gone/reset, -EBUSY queue full, -E2BIG
 * over MDTS, -ERANGE beyond the namespace, -EIO controller fatal status or a failed NVMe command where
 * no struct nvme_cpl is there to hold the status). The NVMe status of a command (SCT, SC, DNR) travels
 * separately in struct nvme_cpl, never folded into errno; nvme_status_name() gives its spec name.
 *
 * Caveats: buffers passed to I/O must lie inside one nvme_dma object of the same target, dword aligned.
 * After nvme_ctrl_reset() every qpair created before it is dead: submit/poll return -ENXIO; destroy it.
 */
#ifndef NVME_NVME_H
#define NVME_NVME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/spec.h"
#include "nvme/version.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nvme_target;
struct nvme_ctrl;
struct nvme_ns;
struct nvme_qpair;
struct nvme_dma;
struct nvme_bar;

#define NVME_ERRLEN 256u /* a comfortable size for the err buffers below */

/* ---------------------------------------------------------------------------------------------------
 * Completions
 * ------------------------------------------------------------------------------------------------- */
struct nvme_cpl {
    int err;       /* 0, or -errno from the driver: -ETIMEDOUT, -ENXIO (reset/gone), -ECANCELED */
    uint8_t sct;   /* NVMe status code type (valid when err == 0) */
    uint8_t sc;    /* NVMe status code */
    bool dnr;      /* do not retry */
    uint32_t cdw0; /* command specific result */
    uint16_t cid;  /* command identifier the driver used */
};

static inline bool nvme_cpl_ok(const struct nvme_cpl *cpl)
{
    return cpl->err == 0 && cpl->sct == NVME_SCT_GENERIC && cpl->sc == NVME_SC_SUCCESS;
}

/* One line describing a completion: "ok", "LBA Out of Range (sct 0x0 sc 0x80, dnr)", "timed out". */
const char *nvme_cpl_str(const struct nvme_cpl *cpl, char *buf, size_t len);

typedef void (*nvme_cb)(void *arg, const struct nvme_cpl *cpl);

/* ---------------------------------------------------------------------------------------------------
 * Diagnostics: the library never prints by default. A hook receives one-line messages (spurious CIDs,
 * timeouts, controller fatal status, bring-up steps at debug level); the Python layer forwards them to
 * `logging`. With no hook set, messages at or above NVME_LOG_WARN go to stderr when NVMELAB_DEBUG is set.
 * ------------------------------------------------------------------------------------------------- */
enum nvme_log_level { NVME_LOG_DEBUG = 10, NVME_LOG_INFO = 20, NVME_LOG_WARN = 30, NVME_LOG_ERROR = 40 };
typedef void (*nvme_log_fn)(int level, const char *msg);
void nvme_set_log(nvme_log_fn fn);

/* ---------------------------------------------------------------------------------------------------
 * Targets
 * ------------------------------------------------------------------------------------------------- */
/* Open what uri names and bring up each controller. On error returns -errno and writes one line to err
 * naming the bad part of the URI or the step that failed. */
int nvme_target_open(const char *uri, struct nvme_target **out, char *err, size_t errlen);
/* Shut down every controller (CC.SHN, wait SHST), release queues and DMA memory, unmap, free. NULL ok. */
void nvme_target_close(struct nvme_target *t);
unsigned nvme_target_nctrl(const struct nvme_target *t);
struct nvme_ctrl *nvme_target_ctrl(struct nvme_target *t, unsigned i); /* NULL when i >= nctrl */
const char *nvme_target_uri(const struct nvme_target *t);
const char *nvme_target_scheme(const struct nvme_target *t); /* "emu", "pci" */
/* Backend object behind the target (struct nvme_emu_set * for emu://, NULL otherwise); for tests and
 * fault injection. */
void *nvme_target_backend(const struct nvme_target *t);

/* ---------------------------------------------------------------------------------------------------
 * DMA memory
 * ------------------------------------------------------------------------------------------------- */
/* Allocate size bytes (rounded up to the translation's page size) of zeroed DMA memory usable by every
 * controller of t. -EINVAL (size 0), -ENOMEM. */
int nvme_dma_alloc(struct nvme_target *t, size_t size, struct nvme_dma **out);
void nvme_dma_free(struct nvme_dma *d); /* NULL ok */
void *nvme_dma_vaddr(const struct nvme_dma *d);
size_t nvme_dma_size(const struct nvme_dma *d);
/* Bus address the controller uses for vaddr (must lie inside d); UINT64_MAX when outside. */
uint64_t nvme_dma_iova(const struct nvme_dma *d, const void *vaddr);
/* Mark d as the driver's own memory (queue rings, list pages, internal buffers): no raw command's PRP may
 * point into it (nvme_qpair_submit_raw). Memory from nvme_dma_alloc is a data buffer until marked. */
void nvme_dma_mark_internal(struct nvme_dma *d);

/* ---------------------------------------------------------------------------------------------------
 * Controllers and namespaces
 * ------------------------------------------------------------------------------------------------- */
const struct nvme_id_ctrl *nvme_ctrl_id(const struct nvme_ctrl *c);
uint32_t nvme_ctrl_mdts_bytes(const struct nvme_ctrl *c); /* 0 = no limit reported (driver caps it) */
uint32_t nvme_ctrl_max_xfer(const struct nvme_ctrl *c);   /* largest transfer the driver will build */
uint32_t nvme_ctrl_nn(const struct nvme_ctrl *c);
uint64_t nvme_ctrl_cap(const struct nvme_ctrl *c);
uint32_t nvme_ctrl_vs(const struct nvme_ctrl *c);
uint32_t nvme_ctrl_page_size(const struct nvme_ctrl *c);  /* memory page size in use (CC.MPS) */
uint32_t nvme_ctrl_max_qpairs(const struct nvme_ctrl *c); /* I/O queue pairs granted (Number of Queues) */
uint32_t nvme_ctrl_max_depth(const struct nvme_ctrl *c);  /* CAP.MQES + 1 */
unsigned nvme_ctrl_index(const struct nvme_ctrl *c);      /* position in its target */
struct nvme_target *nvme_ctrl_target(const struct nvme_ctrl *c);
const struct nvme_bar *nvme_ctrl_bar(const struct nvme_ctrl *c);
uint32_t nvme_ctrl_csts(const struct nvme_ctrl *c); /* current CSTS (CFS = controller fatal) */
/* Reserve / release an I/O queue identifier (for callers that build their own queues, e.g. on a GPU,
 * and create them with nvme_ctrl_admin). Returns qid >= 1, or -EBUSY when none is left. */
int nvme_ctrl_qid_alloc(struct nvme_ctrl *c);
void nvme_ctrl_qid_free(struct nvme_ctrl *c, uint16_t qid);
/* Number of active namespaces and the i-th one (ascending NSID order). */
uint32_t nvme_ctrl_nns(const struct nvme_ctrl *c);
struct nvme_ns *nvme_ctrl_ns_at(struct nvme_ctrl *c, uint32_t i);
/* Namespace nsid, NULL if inactive or out of range. */
struct nvme_ns *nvme_ctrl_ns(struct nvme_ctrl *c, uint32_t nsid);

uint32_t nvme_ns_id(const struct nvme_ns *ns);
uint32_t nvme_ns_lba_size(const struct nvme_ns *ns);
uint32_t nvme_ns_lba_shift(const struct nvme_ns *ns);
uint64_t nvme_ns_nsze(const struct nvme_ns *ns);
const struct nvme_id_ns *nvme_ns_idns(const struct nvme_ns *ns);
struct nvme_ctrl *nvme_ns_ctrl(const struct nvme_ns *ns);

/* Full re-bring-up (disable, ..., Identify, Set Features). Existing I/O qpairs become invalid: their
 * outstanding commands complete with err = -ENXIO on the next poll, later submits return -ENXIO. */
int nvme_ctrl_reset(struct nvme_ctrl *c);
/* Run one admin command synchronously. buf (len bytes, may be NULL/0) need NOT be DMA memory: it is
 * bounced through the controller's admin buffer (len <= NVME_ADMIN_BUF_SIZE). The driver fills CID and
 * PRPs. Returns 0 when a completion (any status) arrived — look at cpl — or -errno (-ETIMEDOUT, -ENXIO,
 * -EINVAL, -E2BIG). Thread-safe (serialised by a mutex); not for hot paths. Without buf, the SQE's own
 * PRPs pass the driver's IOMMU (nvme_qpair_submit_raw): Identify, Get Log Page, Get/Set Features with a
 * data structure, Firmware Image Download and Namespace Management/Attachment are sized from the SQE, a
 * Create I/O CQ/SQ queue ([PRP1, PRP1 + entries x entry size), PC=1 only) and the Doorbell Buffer Config
 * pages must lie in data buffers (-EFAULT, -EINVAL for PC=0). */
#define NVME_ADMIN_BUF_SIZE (64u * 1024u)
int nvme_ctrl_admin(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len, struct nvme_cpl *cpl,
                    uint32_t timeout_ms);
/* nvme_ctrl_admin, with the reason for a refusal (which PRP, which address) in err (errlen bytes). */
int nvme_ctrl_admin_err(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len, struct nvme_cpl *cpl,
                        uint32_t timeout_ms, char *err, size_t errlen);

/* ---------------------------------------------------------------------------------------------------
 * I/O queue pairs (hot path)
 * ------------------------------------------------------------------------------------------------- */
#define NVME_QPAIR_DEFAULT_DEPTH      64u
#define NVME_QPAIR_DEFAULT_TIMEOUT_MS 10000u

struct nvme_qpair_opts {
    uint32_t depth;      /* queue entries (N); N-1 commands can be outstanding. 0 = default */
    uint32_t timeout_ms; /* per-command timeout; 0 = default */
    uint32_t batch;      /* ring the SQ doorbell after this many submits; 0/1 = every submit */
    uint32_t cq_extra;   /* CQ entries beyond depth (0: the CQ has depth entries too), at most MQES+1 - depth: room
                          * for the completions a coalesced CQ head doorbell holds back (nvme_qpair_set_cq_batch)
                          * without a deeper SQ (64-byte entries) and more trackers */
};

/* Create an I/O CQ and SQ pair (Create I/O CQ, then Create I/O SQ). -EINVAL (depth < 2, or depth or
 * depth + cq_extra > MQES+1),
 * -EBUSY (no queue identifier left), -EIO (the controller refused: status in the log). */
int nvme_qpair_create(struct nvme_ctrl *c, const struct nvme_qpair_opts *opts, struct nvme_qpair **out);
/* Delete SQ then CQ (skipped when the controller was reset), free. Outstanding commands complete with
 * err = -ECANCELED (callbacks run). NULL ok. */
int nvme_qpair_destroy(struct nvme_qpair *q);

/* Queue one NVM command. opc: NVME_CMD_READ/WRITE/WRITE_ZEROES/FLUSH/DSM. For Read/Write len must be
 * nlb * lba_size; for Write Zeroes buf is NULL; Flush ignores slba/nlb; DSM: nlb = number of ranges and
 * buf holds struct nvme_dsm_range[nlb] (deallocate). Returns 0, -EBUSY (full: N-1 outstanding), -EINVAL,
 * -E2BIG (over max transfer), -ERANGE (beyond namespace), -ENXIO (qpair dead after reset). */
int nvme_qpair_submit(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t opc, uint64_t slba, uint32_t nlb, void *buf,
                      size_t len, nvme_cb cb, void *arg);
/* One command of a batch (nvme_qpair_submit_many). */
struct nvme_io {
    uint64_t slba;
    void *buf;
    void *arg;
};
/* Queue n commands of one opcode (NVME_CMD_READ or NVME_CMD_WRITE), nlb LBAs each (len = nlb * the
 * namespace's LBA size), with one callback, in order, as n nvme_qpair_submit calls would, with what those
 * calls check once per call checked once per batch where it can be. Returns 0 when all n were queued; else
 * the error nvme_qpair_submit gives command *queued (the first one not queued: -EBUSY when the queue is
 * full), the *queued before it being queued. */
int nvme_qpair_submit_many(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t opc, uint32_t nlb,
                           const struct nvme_io *io, uint32_t n, nvme_cb cb, uint32_t *queued);
/* A queue with one command in flight (QD 1), the pair of calls that replaces submit_many + ring and
 * poll_collect there. nvme_qpair_submit_one: nvme_qpair_submit_many of one command (io) followed by
 * nvme_qpair_ring; returns 0 or submit_many's error (the doorbell still rung for what was queued before).
 * nvme_qpair_poll_one: nvme_qpair_poll_collect with max 1; when the entry at the CQ head is the successful
 * completion of a command with callback cb it is taken without the general poll's set-up (its tracker matched
 * by CID, freed, the coalesced CQ head doorbell and the expiry clock as in poll); anything else (no new entry,
 * an error status, another callback, an unknown CID, a dead queue) goes through nvme_qpair_poll_collect. */
int nvme_qpair_submit_one(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t opc, uint32_t nlb, const struct nvme_io *io,
                          nvme_cb cb);
int nvme_qpair_poll_one(struct nvme_qpair *q, nvme_cb cb, void **out, uint32_t *nout);
/* Queue a caller-built SQE (opcode, NSID, CDW2-3, CDW10-15 taken as given); the driver fills CID and
 * the data pointer for buf/len (PRPs; MPTR is left as given).
 * The driver's IOMMU (qpair_raw.c): a raw command's PRPs reach only data buffers (nvme_dma_alloc), never the
 * driver's own memory (queue rings, PRP-list pages, admin and bounce buffers, nvme_dma_mark_internal). The bytes
 * it moves come from the SQE (Read/Write/Compare: NLB blocks of its namespace, metadata too; DSM: its ranges; an
 * opcode whose bits 1:0 are 0: none); where the driver cannot tell (another opcode, an unknown namespace), the
 * largest transfer. With buf, buf must be a data buffer and the command may move at most len bytes (-EINVAL).
 * Without, PRP1, PRP2 and every PRP-list entry (chains followed) of the transfer must each lie inside one data
 * buffer, [start, start + len) checked without overflow (-EFAULT), a list pointer 8-byte aligned (-EINVAL); the
 * list is copied into the command's own list page, so writing the user's copy later changes nothing. A transfer
 * past the largest one: -E2BIG. A refused command takes no CID and leaves the qpair as it was. */
int nvme_qpair_submit_raw(struct nvme_qpair *q, const struct nvme_sqe *sqe, void *buf, size_t len, nvme_cb cb,
                          void *arg);
/* nvme_qpair_submit_raw, with the reason for a refusal (which PRP, which address) in err (errlen bytes). */
int nvme_qpair_submit_raw_err(struct nvme_qpair *q, const struct nvme_sqe *sqe, void *buf, size_t len, nvme_cb cb,
                              void *arg, char *err, size_t errlen);
/* A qpair's own DMA memory as bus addresses (inspection, tests): no raw command may point into it. */
struct nvme_qpair_mem {
    uint64_t sq, sq_bytes;               /* the SQ ring */
    uint64_t cq, cq_bytes;               /* the CQ ring (with its host-only sentinel entry) */
    uint64_t prp_lists, prp_lists_bytes; /* one PRP-list page per CID */
};
void nvme_qpair_mem_info(const struct nvme_qpair *q, struct nvme_qpair_mem *out);
/* Coalesce CQ head doorbells: poll reports consumed entries once n of them have accumulated (default 1:
 * every poll that consumed any). A submit that would leave the controller no room for its completion rings
 * the doorbell first, so any n is safe; a queue deeper than the commands kept in flight by n or more never
 * needs that. 0, or -EINVAL for n = 0 or n >= depth. */
int nvme_qpair_set_cq_batch(struct nvme_qpair *q, uint32_t n);
/* Write the SQ tail doorbell now if anything is queued since the last ring. */
void nvme_qpair_ring(struct nvme_qpair *q);
/* Reap up to max completions (0 = all available), run callbacks, ring the CQ head doorbell once, expire
 * timed-out commands (err = -ETIMEDOUT). Also rings a pending SQ doorbell first. Returns the number of
 * callbacks run, or -ENXIO when the qpair is dead (after its callbacks with -ENXIO ran). */
int nvme_qpair_poll(struct nvme_qpair *q, uint32_t max);
/* nvme_qpair_poll, but a successful completion of a command whose callback is cb is not called back: its
 * argument is appended to out (room for max entries; max must be > 0, else -EINVAL) and *nout says how
 * many; failures (and other callbacks) run as usual. Returns the completions delivered either way. The
 * collected commands count as outstanding until the call returns (a callback it runs sees them so). */
int nvme_qpair_poll_collect(struct nvme_qpair *q, uint32_t max, nvme_cb cb, void **out, uint32_t *nout);
uint32_t nvme_qpair_outstanding(const struct nvme_qpair *q);
uint32_t nvme_qpair_depth(const struct nvme_qpair *q);
uint16_t nvme_qpair_qid(const struct nvme_qpair *q);
struct nvme_ctrl *nvme_qpair_ctrl(const struct nvme_qpair *q);

/* ---------------------------------------------------------------------------------------------------
 * Synchronous helpers (tests, Python; NOT the hot path)
 * ------------------------------------------------------------------------------------------------- */
/* One command on a lazily created per-controller qpair (mutex protected). buf need NOT be DMA memory:
 * it is bounced through a DMA buffer. Returns 0 when a completion arrived (see cpl), or -errno. */
int nvme_ns_io_sync(struct nvme_ctrl *c, struct nvme_ns *ns, uint8_t opc, uint64_t slba, uint32_t nlb, void *buf,
                    size_t len, struct nvme_cpl *cpl);

#ifdef __cplusplus
}
#endif

#endif /* NVME_NVME_H */
