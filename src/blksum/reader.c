/* SPDX-License-Identifier: BSD-3-Clause */
/* reader.c — what the target-backed image readers (qcow2.c, nbd.c) share, declared in
 * blksum_internal.h: their read channel (queue-depth buffers and a ring of completions that reap() hands
 * to the engine) and blksum_image_attach(), which puts a reader behind a blksum source. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blksum/blksum_internal.h"

int blksum_ichan_new(size_t size, void *reader, uint32_t dev, uint32_t qdepth, uint32_t iosize, uint32_t max_io,
                     const char *what, struct blksum_ichan **out, char *err, size_t errlen)
{
    if (dev != 0 || qdepth == 0 || qdepth > BLKSUM_MAX_QUEUE_DEPTH || iosize == 0 || iosize > max_io ||
        size < sizeof(struct blksum_ichan)) {
        snprintf(err, errlen, "%s: bad channel (device %u, queue depth %u, read size %u; reads of at most %u bytes)",
                 what, dev, qdepth, iosize, max_io);
        return -EINVAL;
    }
    struct blksum_ichan *c = calloc(1, size);
    if (!c || posix_memalign((void **)&c->bufs, BLKSUM_BLOCK_SIZE, (size_t)qdepth * iosize) ||
        !(c->cpl = calloc(qdepth, sizeof(*c->cpl)))) {
        if (c)
            free(c->bufs);
        free(c);
        snprintf(err, errlen, "%s: out of memory for %u buffers of %u bytes", what, qdepth, iosize);
        return -ENOMEM;
    }
    c->reader = reader;
    c->qdepth = qdepth;
    c->iosize = iosize;
    *out = c;
    return 0;
}

void blksum_ichan_free(struct blksum_ichan *c)
{
    if (!c)
        return;
    free(c->bufs);
    free(c->cpl);
    free(c);
}

void *blksum_ichan_buf(struct perf_chan *ch, uint32_t slot)
{
    struct blksum_ichan *c = (struct blksum_ichan *)ch;
    return c->bufs + (size_t)slot * c->iosize;
}

void blksum_ichan_complete(struct blksum_ichan *c, uint32_t slot, int status)
{
    c->cpl[(c->head + c->count) % c->qdepth] = (struct blksum_icpl){slot, status};
    c->count++;
}

int blksum_ichan_reap(struct perf_chan *ch, uint32_t max)
{
    struct blksum_ichan *c = (struct blksum_ichan *)ch;
    int n = 0;
    while (c->count && (uint32_t)n < max) {
        struct blksum_icpl e = c->cpl[c->head];
        c->head = (c->head + 1) % c->qdepth;
        c->count--;
        n++;
        ch->done(ch, e.slot, e.status);
    }
    return n;
}

int blksum_image_write_sync(void *ctx, uint32_t dev, uint64_t slba, const void *buf, size_t len)
{
    (void)ctx, (void)dev, (void)slba, (void)buf, (void)len;
    return -EROFS;
}

int blksum_image_attach(struct blksum_source *src, const struct blksum_image_reader *r, void *ctx, uint64_t size,
                        uint32_t max_io)
{
    struct perf_target *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->ops = r->ops;
    t->ctx = ctx;
    t->ndevs = 1;
    t->flags = r->flags;
    snprintf(t->backend, sizeof(t->backend), "%s", r->kind);
    t->dev[0] =
        (struct perf_dev_info){.lba_size = 1, .nlbas = size, .max_qdepth = r->max_qdepth, .max_io_bytes = max_io};
    src->target = t;
    src->dev = 0;
    src->kind = r->kind;
    src->seekable = true;
    src->sparse = true;
    src->size = size;
    src->map = r->map;
    src->map_ctx = ctx;
    return 0;
}
