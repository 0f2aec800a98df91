/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend.h — the one I/O backend interface of nvmelab's engine layer.
 *
 * Purpose: every source of I/O (the user-space NVMe driver on emu:// and pci://, the
 * kernel paths psync and io_uring on file://, blk:// or an open descriptor) is a
 * struct perf_target with one ops table (struct perf_backend_ops). The closed-loop
 * perf engine (perf.c) and blksum (src/blksum/) both drive targets through it;
 * nothing above this header knows which backend it talks to.
 *
 * Key functions:
 *   perf_target_open()        by URI: emu://, pci:// (perf_nvme.c), file://, blk:// (kio.c)
 *   kio_target_from_fd()      an open file, block device or pipe (kio.h; blksum's sources)
 *   perf_target_close()       destroy: exactly what the open set up
 *   perf_target_write_sync()  a cold-path write (tests, fault injection)
 *
 * Model: a target has ndevs devices (namespaces, or one file); a channel is one
 * queue on one device (an NVMe qpair, an io_uring ring, a psync slot set) owned by
 * one thread, with qdepth slots of iosize bytes of I/O memory (chan_buf). submit()
 * queues one command on a slot, kick() makes queued commands visible (and may wait
 * on a blocking target), reap() reports completions through ch->done(). Sizes and
 * offsets are in LBAs of the device (dev[i].lba_size; 1 for a byte-granular
 * descriptor target).
 *
 * Caveats: the ops are not thread-safe per channel (one owner); chan_open and
 * chan_close are serialised by the backend where they share state.
 */
#ifndef NVMELAB_ENGINE_BACKEND_H
#define NVMELAB_ENGINE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "nvme/nvme.h" /* struct nvme_io: a submit_many batch */

#ifdef __cplusplus
extern "C" {
#endif

#define PERF_MAX_DEVS    64
#define PERF_ERRLEN      256
#define PERF_NAMELEN     32
#define PERF_DESCRIBELEN 160 /* "profile=... scale=..." of an emulated target */

/* Geometry of one device (namespace / file / block device) of a target. */
struct perf_dev_info {
    uint32_t lba_size;     /* bytes */
    uint64_t nlbas;        /* capacity in LBAs */
    uint32_t nsid;         /* NVMe namespace id, 0 for kernel paths */
    uint32_t max_qdepth;   /* deepest channel the backend can open */
    uint32_t max_io_bytes; /* largest single command */
};

/* A channel as the engine sees it; a backend embeds it first in its own struct.
 * The backend calls done() once per completed command from reap(). status: 0 ok,
 * < 0 negative errno, > 0 NVMe status as (SCT << 8 | SC) | PERF_STATUS_DNR. */
#define PERF_STATUS_DNR (1 << 16)
struct perf_chan {
    void (*done)(struct perf_chan *ch, uint32_t slot, int status);
    void *eng; /* engine-private per-channel state */
    /* Set by the engine when the target has PERF_TGT_FREEL (else NULL): a backend then completes a
     * successful command by pushing its slot, freel[(*nfree)++] = slot, instead of calling done()
     * (errors still go through done()); the engine accounts for them per reap, not per command. */
    uint32_t *freel;
    uint32_t *nfree;
    /* Set by a PERF_TGT_FREEL backend in chan_open: 2 * qdepth cookies, cookie[slot] for a command of that
     * slot and cookie[qdepth + slot] for one whose success must still go through done() (a timed command). */
    void *const *cookie;
};

/* A submit_many batch is an array of the driver's struct nvme_io (nvme/nvme.h): slba, buf = the slot's
 * chan_buf, arg = the slot's cookie; the NVMe backend hands it to the driver as it is. */
typedef struct nvme_io perf_sub;

struct perf_backend_ops {
    /* Open a channel of qdepth slots of iosize bytes each on device dev; called in
     * the worker thread that will own it. */
    int (*chan_open)(void *ctx, uint32_t dev, uint32_t qdepth, uint32_t iosize, struct perf_chan **out, char *err,
                     size_t errlen);
    void (*chan_close)(struct perf_chan *ch);
    /* The I/O buffer of one slot (iosize bytes, DMA-able where it matters). */
    void *(*chan_buf)(struct perf_chan *ch, uint32_t slot);
    /* Queue one command (not yet visible to the device until kick). 0, -EBUSY, <0. */
    int (*submit)(struct perf_chan *ch, uint32_t slot, int write, uint64_t slba, uint32_t nlb);
    /* Optional (PERF_TGT_FREEL): queue n commands of one direction, nlb LBAs each, in order, as submit()
     * would; returns how many were queued (fewer than n only when the queue is full) or < 0 on an error.
     * kick != 0: then make them visible as kick(ch, 0) would (one call instead of two; an error of the kick
     * is returned as < 0 after the commands were queued). */
    int (*submit_many)(struct perf_chan *ch, const perf_sub *subs, uint32_t n, uint32_t nlb, int write, int kick);
    /* Optional (PERF_TGT_FREEL; the engine's QD-1 pass): submit_many of the one command sub with kick, in one call
     * that can pass straight on to the driver: 0 queued (and made visible), -EBUSY not queued (full), < 0 error. */
    int (*submit1)(struct perf_chan *ch, const perf_sub *sub, uint32_t nlb, int write);
    /* Make queued commands visible (doorbell / io_uring_enter); wait_min > 0 lets a
     * blocking backend sleep until that many completions are ready. */
    int (*kick)(struct perf_chan *ch, uint32_t wait_min);
    /* Optional, callable from any thread: a kick() waiting for completions in the channel's owner thread
     * (or the next one to wait) returns -EINTR at once, as if a signal had interrupted it: the engine has
     * other work for that thread (blksum: a hash thread freed a buffer to read into). */
    void (*wake)(struct perf_chan *ch);
    /* Deliver up to max completions through ch->done; returns the count or <0. */
    int (*reap)(struct perf_chan *ch, uint32_t max);
    /* Optional (PERF_TGT_FREEL; the engine's QD-1 pass): reap for a channel of one slot (max is 1), with the
     * backend's one-completion poll. */
    int (*reap1)(struct perf_chan *ch, uint32_t max);
    void (*destroy)(void *ctx);
    /* Cold path, for tests and fault injection: write len bytes (a whole number of
     * LBAs) at slba of device dev synchronously. 0 or <0; NVMe status as > 0. */
    int (*write_sync)(void *ctx, uint32_t dev, uint64_t slba, const void *buf, size_t len);
    /* Optional: bytes moved by the last completed command of slot, for targets that
     * can end a transfer short without an error (a pipe at end of stream). NULL:
     * a successful command always moves its full length. */
    uint32_t (*chan_xfer)(struct perf_chan *ch, uint32_t slot);
};

/* Target flags */
#define PERF_TGT_BLOCKING 0x1u /* kick() can wait for completions (kernel paths) */
#define PERF_TGT_SYNC     0x2u /* submit() performs the I/O; its completion is ready at once (psync) */
#define PERF_TGT_FREEL    0x4u /* reap() pushes successful completions to perf_chan.freel (see there) */

struct perf_target {
    const struct perf_backend_ops *ops;
    void *ctx;
    uint32_t ndevs;
    uint32_t flags;
    char backend[PERF_NAMELEN];      /* "psync", "io_uring", "nvmelab-emu", "nvmelab-pci" */
    char profile[PERF_NAMELEN];      /* emulated targets: device-model profile, else "" */
    double scale;                    /* emulated targets: profile scale, else 0 */
    char describe[PERF_DESCRIBELEN]; /* emulated targets: "profile=... scale=...", else "" */
    /* emulated targets: the profile's device model at this scale (0 = no cap);
     * device-model overrides given in the URI are not reflected here */
    struct {
        double lat_ns, dev_iops, queue_iops, dev_bw;
    } model;
    struct perf_dev_info dev[PERF_MAX_DEVS];
    /* submissions per kick when the config leaves batch at 0 (0: the whole
     * qdepth); a target whose kick is a system call may prefer to issue each
     * command as soon as it is queued */
    uint32_t default_batch;
};

struct perf_target_opts {
    const char *backend; /* kernel paths: "psync" or "io_uring" (default); NULL elsewhere */
    int allow_write;     /* blk://: writes need this; file:// always may write */
    int need_write;      /* the run will write: open read-write */
    uint32_t nsid;       /* NVMe targets: use this namespace on every controller (0: the first active) */
};

int perf_target_open(const char *uri, const struct perf_target_opts *opts, struct perf_target **out, char *err,
                     size_t errlen);
void perf_target_close(struct perf_target *t);

/* Synchronous write of whole LBAs outside any run (fault injection in tests). */
int perf_target_write_sync(struct perf_target *t, uint32_t dev, uint64_t slba, const void *buf, size_t len, char *err,
                           size_t errlen);

/* The NVMe-driver target (emu://, pci://; perf_nvme.c); perf_target_open()
 * dispatches on the URI scheme. */
int perf_nvme_target_open(const char *uri, const struct perf_target_opts *opts, struct perf_target **out, char *err,
                          size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_BACKEND_H */
