/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * emu.h — the embedded emulated NVMe controller behind `emu://` URIs.
 *
 * Purpose: a set of in-process NVMe controllers that implement the controller
 * side of the real register interface (CAP/VS/CC/CSTS/AQA/ASQ/ACQ, doorbells
 * with CAP.DSTRD stride), queues in host memory, admin and NVM command
 * semantics with spec status codes, RAM or sparse-file namespaces, and a
 * device model (latency, IOPS/bandwidth caps, fetch limit, shared link cap).
 * The driver sees each controller as a `struct nvme_bar` (bar.h): BAR0 is
 * ordinary memory; after every store the driver calls bar->ops->write(), and
 * after an empty completion poll it calls bar->ops->idle().
 *
 * Key functions:
 *   nvme_emu_target_open()     parse + validate an emu:// URI, create controllers
 *   nvme_emu_target_open_kv()  the same over a plain (key, value) array
 *   nvme_emu_set_count() / nvme_emu_set_bar() / nvme_emu_set_close()
 *   nvme_emu_set_bar_fd() / nvme_emu_ctrl_reset()   for the vfio-user server (BAR memfd, power-cycle reset)
 *   nvme_emu_ctrl_set_vectors()  for the vfio-user server: interrupt vectors its MSI-X table offers
 *   nvme_emu_set_irq_hook()  for the vfio-user server: told the vector of every CQ with interrupts that got CQEs
 *   nvme_emu_dma_map_at()    a DMA window whose controller addresses (IOVAs) differ from the host's (QEMU)
 *   nvme_emu_inject()          arm a fault (delay/drop completion, CSTS.CFS, status)
 *   nvme_emu_queue_stats()     per-queue command counters; nvme_emu_svc_stats() the service thread's sweeps
 *   nvme_emu_set_describe()    profile, scale, mode (for record provenance)
 *   nvme_emu_set_warnings()    old key spellings the URI used (to log)
 *
 * Caveats:
 *   - DMA addresses are controller addresses (IOVAs) inside the DMA windows the
 *     host registered (below); outside them a command fails with Data Transfer
 *     Error and touches no memory.  A window registered with nvme_emu_dma_map()
 *     is identity (IOVA == process virtual address: the driver, our vfio-user
 *     client); one registered with nvme_emu_dma_map_at() translates (IOVA ->
 *     wherever the memory is mapped here: QEMU's guest-physical addresses).
 *     Null PRPs are refused (Data Transfer Error).
 *   - mode=inline (default): commands run on the thread that rings the SQ
 *     doorbell or polls an empty CQ.  Different host threads may drive
 *     different qpairs of one controller concurrently; one qpair belongs to
 *     one thread.  Admin commands and register writes come from one thread.
 *   - mode=thread: one service thread per controller polls the doorbell words.
 *   - Errors: functions return 0 or a negative errno; URI problems also write
 *     one message naming the key and the value into err.
 *   The URI keys are one table for both emulators: emu_keys.h (docs: src/README.md).
 */
#ifndef NVME_EMU_EMU_H
#define NVME_EMU_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nvme_uri;     /* nvme/uri.h: generic parsed URI (scheme, authority, key=value list) */
struct nvme_bar;     /* nvme/bar.h: BAR0 memory + transport ops */
struct nvme_emu_set; /* opaque: the controllers of one emu:// target */

/* One key=value pair of an emu:// query string. */
struct nvme_emu_kv {
    const char *key;
    const char *val;
};

/* Open an emu:// target. Every parameter is validated first (unknown key, bad
 * value, out of range: -EINVAL and a message naming key and value in err);
 * then the controllers are created (-ENOMEM, or -errno of a backing file).
 * On success *out owns everything; release it with nvme_emu_set_close(). */
int nvme_emu_target_open(const struct nvme_uri *u, struct nvme_emu_set **out, char *err, size_t errlen);
int nvme_emu_target_open_kv(const struct nvme_emu_kv *kv, size_t nkv, struct nvme_emu_set **out, char *err,
                            size_t errlen);

unsigned nvme_emu_set_count(const struct nvme_emu_set *set);
/* BAR of controller i (0-based), NULL when i is out of range. */
const struct nvme_bar *nvme_emu_set_bar(const struct nvme_emu_set *set, unsigned i);
/* PCI vendor id the controllers report in Identify (VID and SSVID): QEMU's, an emulated device. */
#define NVME_EMU_VID 0x1b36u

/* The memfd behind controller i's BAR memory (owned by the set, closed by nvme_emu_set_close(); for a
 * vfio-user server, which passes it to its client for the doorbell page), -EINVAL when i is out of
 * range or the BAR is anonymous memory (memfd_create refused). */
int nvme_emu_set_bar_fd(const struct nvme_emu_set *set, unsigned i);
/* Reset controller i as a power cycle would: what CC.EN 1->0 does (every queue deleted, commands held
 * by the device model dropped, doorbells 0, CSTS.RDY/CFS/SHST clear), then every register back to its
 * reset value. DMA windows are kept. For a vfio-user server whose client went away or asked for
 * DEVICE_RESET; not from inside the controller. 0 or -EINVAL. */
int nvme_emu_ctrl_reset(struct nvme_emu_set *set, unsigned i);
/* The number of interrupt vectors the host side of controller i offers (a vfio-user server: its MSI-X
 * table size), 1..NVME_EMU_MAX_VECTORS; 1 (vector 0 only) until set. Create I/O Completion Queue with
 * interrupts enabled and IV >= nvec fails with Invalid Interrupt Vector. Call before a client attaches.
 * 0 or -EINVAL. */
#define NVME_EMU_MAX_VECTORS 2048u /* MSI-X Table Size is an 11-bit count */
int nvme_emu_ctrl_set_vectors(struct nvme_emu_set *set, unsigned i, uint32_t nvec);
/* Interrupts: fn(ctx, ctrl, iv) is called whenever completions were posted to a CQ of controller ctrl with
 * interrupts enabled (the admin CQ always, vector 0; an I/O CQ created with IEN, its IV), after the entries are
 * visible, from the thread that posted them (mode=thread: the service thread), once per batch of entries (at
 * least once for every entry; a call may cover several). fn must be quick and must not call into the
 * emulator. NULL removes the hook; with mode=thread, once this returns no call of the old hook is running
 * (mode=inline: the caller makes sure no host thread is inside the controller). 0 or -EINVAL. */
typedef void (*nvme_emu_irq_fn)(void *ctx, unsigned ctrl, uint16_t iv);
int nvme_emu_set_irq_hook(struct nvme_emu_set *set, unsigned ctrl, nvme_emu_irq_fn fn, void *ctx);
/* Stops service threads, frees queues state, namespaces and BAR memory. Host
 * memory (queues, buffers) belongs to the host and is never touched here. */
void nvme_emu_set_close(struct nvme_emu_set *set);

/* "profile=pm1753 scale=64 mode=inline ndev=4" — for provenance; returns the
 * length snprintf would have written. */
int nvme_emu_set_describe(const struct nvme_emu_set *set, char *buf, size_t len);
const char *nvme_emu_set_profile(const struct nvme_emu_set *set);
/* What the URI spelled the old way (emu_keys.h: "emu: parameter 'ns' is now 'nsze' (...)"; several joined
 * by "; "), "" when nothing: for the caller to log (the library does not print). */
const char *nvme_emu_set_warnings(const struct nvme_emu_set *set);
double nvme_emu_set_scale(const struct nvme_emu_set *set);

/* ---- fault injection (tests) ---- */
enum nvme_emu_fault_kind {
    NVME_EMU_FAULT_CLEAR = 0, /* disarm every fault of the controller (CFS stays until reset) */
    NVME_EMU_FAULT_DELAY,     /* post the completion of the nth command delay_ms later */
    NVME_EMU_FAULT_DROP,      /* never post the completion of the nth command */
    NVME_EMU_FAULT_CFS,       /* set CSTS.CFS now; the controller stops fetching until CC.EN 1->0 */
    NVME_EMU_FAULT_STATUS,    /* complete the nth command with sct/sc/dnr, without executing it */
};

#define NVME_EMU_FAULT_ANY_QUEUE (-1) /* count commands of every I/O queue of the controller */

struct nvme_emu_fault {
    enum nvme_emu_fault_kind kind;
    int32_t qid;       /* 0 = admin, >0 = that I/O SQ, NVME_EMU_FAULT_ANY_QUEUE = any I/O SQ */
    uint32_t nth;      /* 1 = the next command fetched on qid after injection */
    uint32_t count;    /* consecutive commands affected from nth on (0 is taken as 1) */
    uint32_t delay_ms; /* NVME_EMU_FAULT_DELAY */
    uint8_t sct, sc;   /* NVME_EMU_FAULT_STATUS */
    bool dnr;          /* NVME_EMU_FAULT_STATUS */
};

/* Arm a fault on controller ctrl. At most NVME_EMU_MAX_FAULTS are armed at once
 * (-ENOSPC beyond); -EINVAL for a bad kind/qid/ctrl. Thread-safe against the
 * command path (faults are published with release semantics). */
#define NVME_EMU_MAX_FAULTS 8
int nvme_emu_inject(struct nvme_emu_set *set, unsigned ctrl, const struct nvme_emu_fault *f);

/* ---- DMA windows (the emulator's IOMMU) ----
 * The controller reaches host memory only through windows the host registered, as a device behind
 * vfio's IOMMU reaches only what was mapped: every queue base, PRP entry, PRP list, admin and DSM data
 * buffer must lie inside one window, else the command completes with Data Transfer Error and no byte of
 * host memory is read or written (queue creation: Invalid Field; admin queues at CC.EN: CSTS.CFS; a
 * queue whose ring is unmapped later: CSTS.CFS at its next doorbell).  With no window registered the
 * controller reaches nothing.  The driver registers every nvme_dma object of an emu:// target (dma.c).
 *   nvme_emu_dma_map()    [addr, addr+len) becomes reachable at the same controller addresses (identity);
 *                         -EEXIST when it overlaps a window, -EINVAL for a null or wrapping range, -ENOMEM.
 *   nvme_emu_dma_map_at() controller addresses [iova, iova+len) reach host memory [va, va+len) (translated;
 *                         iova may be 0, windows are disjoint in controller addresses); errors as above.
 *                         Identity windows pay nothing for it (the translation adds 0).
 *   nvme_emu_dma_unmap()  remove the window registered with exactly (addr, len) (-ENOENT otherwise); when
 *                         it returns, no command that could still see the window is running, so the
 *                         memory may be freed at once.  Must not be called from inside the controller.
 *   nvme_emu_dma_unmap_at() the same by controller address (for nvme_emu_dma_map_at windows, iova 0 too).
 *   nvme_emu_dma_allow()  the same as nvme_emu_dma_map() (older name).
 *   nvme_emu_dma_clear()  remove every window.
 * These are the set's windows, shared by its controllers. A controller may instead have an IOMMU domain of its
 * own, as every vfio-user client has (nvme_emu_ctrl_dma_private(), before the controller is enabled; mode=thread,
 * or no host thread inside the controller); then only nvme_emu_ctrl_dma_map_at()/unmap_at() reach it (rules as
 * above, windows disjoint within the domain only), and the set's windows no longer do. nvme_emu_dma_count()
 * counts the windows of every domain of the set. */
int nvme_emu_dma_map(struct nvme_emu_set *set, const void *addr, size_t len);
int nvme_emu_dma_unmap(struct nvme_emu_set *set, const void *addr, size_t len);
int nvme_emu_dma_map_at(struct nvme_emu_set *set, uint64_t iova, void *va, size_t len);
int nvme_emu_dma_unmap_at(struct nvme_emu_set *set, uint64_t iova, size_t len);
int nvme_emu_ctrl_dma_private(struct nvme_emu_set *set, unsigned ctrl); /* 0, -EBUSY (enabled), -EINVAL, -ENOMEM */
int nvme_emu_ctrl_dma_map_at(struct nvme_emu_set *set, unsigned ctrl, uint64_t iova, void *va, size_t len);
int nvme_emu_ctrl_dma_unmap_at(struct nvme_emu_set *set, unsigned ctrl, uint64_t iova, size_t len);
int nvme_emu_dma_allow(struct nvme_emu_set *set, const void *addr, size_t len);
void nvme_emu_dma_clear(struct nvme_emu_set *set);
/* Windows registered now. */
unsigned nvme_emu_dma_count(const struct nvme_emu_set *set);

/* ---- statistics ---- */
struct nvme_emu_qstats {
    uint64_t fetched;      /* SQEs consumed from the SQ */
    uint64_t completed;    /* CQEs posted for commands of this SQ */
    uint64_t errors;       /* CQEs posted with a non-zero status */
    uint64_t cq_full_held; /* times a due completion waited because the CQ was full */
    uint64_t dropped;      /* completions dropped by fault injection */
};

/* Counters of SQ sqid (0 = admin) of controller ctrl; counters survive queue
 * deletion until the qid is created again. -EINVAL for a bad ctrl/sqid. */
int nvme_emu_queue_stats(const struct nvme_emu_set *set, unsigned ctrl, uint16_t sqid, struct nvme_emu_qstats *out);

/* mode=thread: what the service thread of controller ctrl did since the set was opened: sweeps (passes over the
 * controller's doorbells), busy (passes that fetched or completed a command) and commands (fetched); all 0 with
 * mode=inline. A server shows with them that the emulator was not the limit (busy well below sweeps). 0 or -EINVAL. */
struct nvme_emu_svc_stats {
    uint64_t sweeps, busy, commands;
};
int nvme_emu_svc_stats(const struct nvme_emu_set *set, unsigned ctrl, struct nvme_emu_svc_stats *out);

/* Commands still held by the device model (fetched, completion not yet posted)
 * on controller ctrl, all queues. */
uint64_t nvme_emu_inflight(const struct nvme_emu_set *set, unsigned ctrl);

#ifdef __cplusplus
}
#endif

#endif /* NVME_EMU_EMU_H */
