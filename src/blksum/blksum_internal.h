/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blksum_internal.h — what blksum's C files share and the public header does not show.
 *
 * Key functions: blksum_fetch_md() (an OpenSSL digest by name, explicitly fetched when the provider
 * has it), blksum_is_null_digest() ("null": time the I/O alone); for the image readers (qcow2.c,
 * nbd.c) their one read channel (blksum_ichan_*) and blksum_image_attach() (a reader as a source).
 * Caveats: internal to libblksum; OpenSSL 3.0 or newer.
 */
#ifndef NVMELAB_BLKSUM_INTERNAL_H
#define NVMELAB_BLKSUM_INTERNAL_H

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blksum/blksum.h"

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#error "blksum needs OpenSSL 3.0 or newer (EVP_MD_fetch, EVP_MD_get_size)"
#endif

/* The digest by name: *owned is the fetched object to free with EVP_MD_free() (may be NULL). */
const EVP_MD *blksum_fetch_md(const char *name, EVP_MD **owned);
bool blksum_is_null_digest(const char *name);
/* Whether the process's interrupt flag (blksum_set_interrupt) is set or its interrupt descriptor
 * (blksum_set_interrupt_fd) is readable. */
bool blksum_interrupted(void);
/* The interrupt descriptor (blksum_set_interrupt_fd), -1 when none: a wait polls it beside its own. */
int blksum_interrupt_fd(void);

/* ---------------------------------------------------------------- the image readers' common part
 * What the target-backed image readers (qcow2.c, nbd.c; image.h) share, in reader.c: a read channel of
 * queue-depth buffers with a ring of completions that reap() hands to the engine, and the target that
 * puts a reader behind a blksum source. A reader embeds struct blksum_ichan first in its own channel. */
struct blksum_icpl {
    uint32_t slot;
    int status;
};

struct blksum_ichan {
    struct perf_chan base;   /* first: what the engine holds */
    void *reader;            /* the reader's context (the target's ctx) */
    uint32_t qdepth, iosize; /* slots, and bytes per slot */
    unsigned char *bufs;     /* qdepth buffers of iosize bytes, aligned to a hash block */
    struct blksum_icpl *cpl; /* completions not yet reaped: a ring of qdepth from head */
    uint32_t head, count;
};

/* A channel of size bytes (the reader's struct, blksum_ichan first) for device 0 of a reader whose
 * reads may be up to max_io bytes; what names the reader in the one-line error. 0 or -errno. */
int blksum_ichan_new(size_t size, void *reader, uint32_t dev, uint32_t qdepth, uint32_t iosize, uint32_t max_io,
                     const char *what, struct blksum_ichan **out, char *err, size_t errlen);
void blksum_ichan_free(struct blksum_ichan *c);
void *blksum_ichan_buf(struct perf_chan *ch, uint32_t slot);
/* Record the completion of slot's read (status 0 or -errno); reap() reports it. */
void blksum_ichan_complete(struct blksum_ichan *c, uint32_t slot, int status);
/* Report up to max recorded completions through ch->done(); their count. */
int blksum_ichan_reap(struct perf_chan *ch, uint32_t max);
/* The readers are read-only: every write is -EROFS. */
int blksum_image_write_sync(void *ctx, uint32_t dev, uint64_t slba, const void *buf, size_t len);

/* A reader as a blksum source: one byte-granular device of size bytes, reads of at most max_io bytes,
 * behind the reader's ops with context ctx and its allocation map. kind names both the source and the
 * backend ("qcow2", "nbd"). On success the source owns ctx (ops->destroy with the target); on failure
 * (-ENOMEM) the caller still does. */
struct blksum_image_reader {
    const struct perf_backend_ops *ops;
    const char *kind;
    uint32_t max_qdepth, flags;
    int (*map)(void *ctx, uint64_t off, uint64_t *end, bool *zero);
};
int blksum_image_attach(struct blksum_source *src, const struct blksum_image_reader *r, void *ctx, uint64_t size,
                        uint32_t max_io);

#endif /* NVMELAB_BLKSUM_INTERNAL_H */
