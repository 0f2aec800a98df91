/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blksum.h — blkhash-compatible parallel image checksum (C core of nvmelab.blksum).
 *
 * The digest (checked against the conformance vectors in tests/vectors/blkhash.csv):
 *
 *     digest = H( H(block_1) || H(block_2) || ... || H(block_N) || le64(total_length) )
 *
 * where the image is cut into BLKSUM_BLOCK_SIZE (64 KiB) blocks, the last one possibly
 * short, H is one OpenSSL message digest (by name), and le64 is the byte length of the
 * image as a little-endian unsigned 64-bit integer. An empty image is H(le64(0)). The
 * digest "null" hashes nothing and has an empty output (used to time the I/O alone).
 * A full-size all-zero block contributes a precomputed H(zero block); a short all-zero
 * last block is hashed as itself. Holes (SEEK_HOLE) are never read. The digest does not
 * depend on threads, queue depth, read size or I/O mode.
 *
 * Pipeline: one reader thread keeps up to queue_depth chunks of read_size bytes in
 * flight through one backend of the engine layer (src/engine/backend.h: psync, pread in the
 * reader; io_uring, up to Q reads submitted at once; a URI target, e.g. the user-space NVMe
 * driver), hash
 * threads compute the block hashes of completed chunks, and the finished chunks are fed
 * into the outer hash strictly in order. Memory is bounded by Q chunks. An image of at most one
 * chunk is read and hashed on the calling thread (no threads: an instant start).
 *
 * Key functions:
 *   blksum_source_open()   a file, block device or pipe ("-" = stdin)
 *   blksum_source_open_uri() an engine target (emu://, pci://, file://, blk://)
 *   (image.h: qcow2 files, NBD exports and qemu-nbd served images, with an allocation map)
 *   blksum_start()         start a job (own threads); blksum_wait()/blksum_progress()
 *                          let a caller poll (e.g. to serve Ctrl-C), blksum_cancel()
 *                          stops it promptly, blksum_finish() joins and reports
 *   blksum_compute()       start + finish in one call
 *   blksum_list_digests()  the digest names OpenSSL offers (plus "null")
 *
 * Errors are negative errno values; blksum_strerror() adds blksum's own meaning for
 * a few (-ENOENT for an unknown digest name is reported via BLKSUM_EDIGEST).
 *
 * Caveats: a source opened on a pipe is read sequentially with read(2), whatever the
 * I/O mode; blksum_result.io says which backend actually ran. A target source has no
 * holes to skip (all blocks are read; zero blocks still use the precomputed hash).
 */
#ifndef NVMELAB_BLKSUM_H
#define NVMELAB_BLKSUM_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Size of one hashed block; fixed by the blkhash format. */
#define BLKSUM_BLOCK_SIZE (64u * 1024u)
/** Largest digest output in bytes (OpenSSL's EVP_MAX_MD_SIZE). */
#define BLKSUM_MAX_MD_SIZE 64u
/** Defaults, as in the original tool. */
#define BLKSUM_DEFAULT_DIGEST      "sha256"
#define BLKSUM_DEFAULT_QUEUE_DEPTH 16
#define BLKSUM_DEFAULT_READ_SIZE   (256u * 1024u)
/** Limits that keep a mistyped option from exhausting memory. */
#define BLKSUM_MAX_THREADS     256
#define BLKSUM_MAX_QUEUE_DEPTH 1024
#define BLKSUM_MAX_READ_SIZE   (64u * 1024u * 1024u)
/** Digest name length limit (OpenSSL names are short). */
#define BLKSUM_MAX_DIGEST_NAME 64

/** Error codes beyond errno (negative, outside the errno range). */
#define BLKSUM_EDIGEST 4096 /* unknown digest name */

enum blksum_io {
    BLKSUM_IO_PSYNC = 0,    /* pread(2) in the reader thread, Q buffers for the hashers */
    BLKSUM_IO_IO_URING = 1, /* up to Q reads in flight (the kernel must permit io_uring) */
    BLKSUM_IO_TARGET = 2,   /* the source's own engine target (blksum_source_open_uri) */
};

/** What to read. Filled by blksum_source_open() (a descriptor: file, block device, pipe) or
 * blksum_source_open_uri() (a target of the engine layer, e.g. an NVMe namespace). */
struct blksum_source {
    int fd;                     /* -1 for a target source */
    bool owns_fd;               /* close fd in blksum_source_close() */
    bool seekable;              /* false: a pipe, read sequentially */
    bool sparse;                /* SEEK_DATA/SEEK_HOLE usable */
    uint64_t size;              /* bytes; meaningful only when seekable */
    const char *kind;           /* "file", "block", "pipe", "target" */
    struct perf_target *target; /* a target source (io = BLKSUM_IO_TARGET): device dev of it */
    uint32_t dev;
    /* Allocation map of a target source (NBD block status, qcow2 L2 tables; image.h), NULL when
     * none (a descriptor source uses SEEK_DATA/SEEK_HOLE): the region holding off ends at *end and
     * reads as zeros when *zero. Called from the reader thread only. 0 or -errno. */
    int (*map)(void *ctx, uint64_t off, uint64_t *end, bool *zero);
    void *map_ctx;
    bool own_server; /* served by a qemu-nbd blksum started: it shares this host's CPUs (image.h) */
    /* Set by a source whose reads may wait on someone else (NBD), NULL otherwise: called (from any thread)
     * by blksum_cancel(), it ends every wait of the source at once; a channel closed then may abandon its
     * reads in flight, and the engine does not wait for them. */
    void (*interrupt)(void *map_ctx);
};

struct blksum_opts {
    const char *digest; /* OpenSSL name or "null"; NULL = sha256 */
    int threads;        /* hash threads >= 1 */
    int queue_depth;    /* chunks in flight >= 1 */
    size_t read_size;   /* bytes per read, a multiple of BLKSUM_BLOCK_SIZE */
    enum blksum_io io;
    /* A reader that hashes (NBD) may hash as one more thread, not only in place of an idle one, when
     * every buffer waits for hashing: nvmelab-blksum's default with a qemu-nbd of its own. */
    bool reader_joins;
};

struct blksum_result {
    unsigned char md[BLKSUM_MAX_MD_SIZE];
    unsigned md_len;      /* 0 for "null" */
    uint64_t size;        /* image length in bytes */
    uint64_t bytes_read;  /* bytes actually read (holes are not) */
    uint64_t blocks;      /* number of blocks */
    uint64_t zero_blocks; /* full-size zero blocks found by scanning data */
    uint64_t hole_blocks; /* full-size blocks inside holes, never read */
    uint64_t reads;       /* read requests issued */
    double elapsed_s;     /* wall time from start to the final digest */
    const char *io;       /* engine that ran: "psync", "io_uring", "read" (pipe), engine name */
};

struct blksum_job;

/** Fill opts with the defaults. */
void blksum_opts_init(struct blksum_opts *o);
/** Check opts; returns 0 or -EINVAL / -BLKSUM_EDIGEST; msg (may be NULL) gets a reason. */
int blksum_opts_check(const struct blksum_opts *o, char *msg, size_t msglen);

/** Open a path ("-" = stdin). Returns 0 or -errno (-EISDIR for a directory). */
int blksum_source_open(struct blksum_source *src, const char *path);
/** Wrap an already open fd (not closed by blksum_source_close). */
int blksum_source_from_fd(struct blksum_source *src, int fd);
void blksum_source_close(struct blksum_source *src);
/** The region holding off (< src->size) of a sparse source: it ends at *end (<= size) and reads as
 * zeros when *zero. Through src->map, else SEEK_DATA/SEEK_HOLE. 0 or -errno. */
int blksum_source_region(const struct blksum_source *src, uint64_t off, uint64_t *end, bool *zero);

/** Start a job; the source must outlive it. Returns 0 or -errno. */
int blksum_start(const struct blksum_source *src, const struct blksum_opts *o, struct blksum_job **out);
/** Wait up to timeout_ms (<0 = forever) for the job to end: 0 ended, -ETIMEDOUT not yet. */
int blksum_wait(struct blksum_job *job, int timeout_ms);
/** Bytes of the image done so far (read or skipped as holes), and the total (0 if unknown). */
void blksum_progress(struct blksum_job *job, uint64_t *done, uint64_t *total);
/** Ask the job to stop; it ends promptly and blksum_finish() returns -ECANCELED, whatever a server does
 * (a stopped or silent NBD server included). */
void blksum_cancel(struct blksum_job *job);
/** Process-wide, for what waits outside a job (opening an NBD source: connecting and the handshake): once
 * *flag is nonzero (a signal handler sets it), such a wait ends with -EINTR within 100 ms; a signal
 * caught by the thread while it waits ends it at once. NULL: no flag. */
void blksum_set_interrupt(volatile sig_atomic_t *flag);
/** Process-wide, the same waits: a descriptor that becomes readable when a signal arrives, whichever thread
 * caught it (Python's signal.set_wakeup_fd; the Python bindings set one while they open a source): once it is
 * readable such a wait ends with -EINTR at once. Never read or closed here. -1: none. */
void blksum_set_interrupt_fd(int fd);
/** Join the job, fill res (on success) and free it. Returns 0 or -errno. */
int blksum_finish(struct blksum_job *job, struct blksum_result *res);
/** Start and finish in one call. */
int blksum_compute(const struct blksum_source *src, const struct blksum_opts *o, struct blksum_result *res);

/** Lowercase hex of the digest into out (2*md_len+1 bytes). */
void blksum_hex(const struct blksum_result *res, char *out, size_t outlen);
/** Call fn for each digest name (sorted, "null" included); returns the count. */
int blksum_list_digests(void (*fn)(const char *name, void *arg), void *arg);
/** True when name is "null" or a digest OpenSSL can fetch. */
bool blksum_digest_known(const char *name);
/** Human text for a blksum error code (negative errno or -BLKSUM_EDIGEST). */
const char *blksum_strerror(int err);
/** Whether this process may use io_uring (the kernel has it, no sysctl or seccomp forbids it). */
bool blksum_have_io_uring(void);

/*
 * Reading a target of the engine layer (emu://, pci://: the user-space driver; file://,
 * blk://: the kernel paths) through the same backend ops the perf engine uses.
 * blksum_source_open_uri() opens the target (namespace nsid of every controller, 0 = the
 * first active one; device 0 is read) and fills src (use io = BLKSUM_IO_TARGET);
 * blksum_source_close() closes the target after the job has finished. err gets one line.
 */
int blksum_source_open_uri(struct blksum_source *src, const char *uri, uint32_t nsid, char *err, size_t errlen);
/** "profile=... scale=..." of an emulated target source, "" otherwise. */
const char *blksum_source_describe(const struct blksum_source *src);

#ifdef __cplusplus
}
#endif
#endif /* NVMELAB_BLKSUM_H */
