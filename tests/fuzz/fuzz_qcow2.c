/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_qcow2.c — libFuzzer harness of blksum's direct qcow2 reader (src/blksum/qcow2.c, image.h).
 *
 * The input is the whole image file: it is written to a memfd and opened with blksum_qcow2_open(), as
 * nvmelab-blksum opens a file with the qcow2 magic. An image the reader accepts is then walked the way
 * blksum walks it: its allocation map (src->map) region by region over the whole guest, checked for
 * sense (each region ends past its start and within the guest), and every allocated region read through
 * the reader's own engine channel, up to FUZZ_READ_BUDGET bytes per input so that a crafted guest of
 * 2^60 bytes stays fast. A small guest is also hashed by blksum_compute(), the production path.
 * The heap the opened reader holds is checked against the file: at most FUZZ_MEM_FIXED bytes plus
 * FUZZ_MEM_PER_BYTE per byte of the image (its tables and a few clusters), never in proportion to the
 * guest (issue 33: a 384 KiB image whose L1 entries all name one L2 table took 1 GB).
 * A refusal (any negative errno with a message) is a correct answer; a crash, a sanitizer report, a
 * leak, a hang or a map that contradicts itself is a finding.
 */
#include <errno.h>
#include <sanitizer/allocator_interface.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "blksum/blksum.h"
#include "blksum/image.h"

#define FUZZ_READ_BUDGET  (4u << 20)   /* guest bytes read per input */
#define FUZZ_MAP_STEPS    65536u       /* allocation-map regions walked per input */
#define FUZZ_IO_BYTES     (64u << 10)  /* one read */
#define FUZZ_COMPUTE_MAX  (256u << 10) /* guests up to this size are also hashed (one chunk: no threads) */
#define FUZZ_MAX_FILE     (1u << 20)   /* inputs beyond this are ignored (libFuzzer's -max_len is lower) */
#define FUZZ_MEM_FIXED    (16u << 20)  /* heap an open reader may hold whatever the file ... */
#define FUZZ_MEM_PER_BYTE 64u          /* ... plus this much per byte of the file */

static int memfd = -1;
static int last_status;

/* The channel's completion callback: the reader completes each read at once (a psync-kind backend). */
static void on_done(struct perf_chan *ch, uint32_t slot, int status)
{
    (void)ch;
    (void)slot;
    last_status = status;
}

static void fail(const char *what, uint64_t a, uint64_t b)
{
    fprintf(stderr, "fuzz_qcow2: %s (%llu, %llu)\n", what, (unsigned long long)a, (unsigned long long)b);
    abort();
}

/* Read [off, end) through the channel in FUZZ_IO_BYTES pieces, at most *budget bytes in all. */
static void read_region(struct perf_target *t, struct perf_chan *ch, uint64_t off, uint64_t end, uint64_t *budget)
{
    while (off < end && *budget) {
        uint64_t n = end - off;
        n = n < FUZZ_IO_BYTES ? n : FUZZ_IO_BYTES;
        n = n < *budget ? n : *budget;
        last_status = 1;
        int rc = t->ops->submit(ch, 0, 0, off, (uint32_t)n);
        if (rc < 0)
            return;
        if (t->ops->kick)
            t->ops->kick(ch, 0);
        if (t->ops->reap(ch, 1) != 1 || last_status == 1)
            fail("a submitted read completed nothing", off, n);
        if (last_status != 0)
            return; /* a refused read (a table entry past the end of the file, say): the reader said so */
        off += n;
        *budget -= n;
    }
}

static void walk(struct blksum_source *src)
{
    struct perf_target *t = src->target;
    if (!t || !src->map)
        fail("an opened image has no target or no allocation map", 0, 0);
    struct perf_chan *ch = NULL;
    char err[256];
    if (t->ops->chan_open(t->ctx, 0, 1, FUZZ_IO_BYTES, &ch, err, sizeof(err)) != 0)
        return;
    ch->done = on_done;
    uint64_t off = 0, budget = FUZZ_READ_BUDGET;
    for (unsigned step = 0; off < src->size && step < FUZZ_MAP_STEPS; step++) {
        uint64_t end = 0;
        bool zero = false;
        if (src->map(src->map_ctx, off, &end, &zero) != 0)
            break;
        if (end <= off || end > src->size)
            fail("the allocation map returned a region that does not advance or ends past the guest", off, end);
        if (!zero)
            read_region(t, ch, off, end, &budget);
        off = end;
    }
    t->ops->chan_close(ch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_FILE)
        return 0;
    if (memfd < 0 && (memfd = memfd_create("fuzz_qcow2", MFD_CLOEXEC)) < 0)
        abort();
    if (ftruncate(memfd, 0) != 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
        abort();
    struct blksum_source src;
    memset(&src, 0, sizeof(src));
    src.fd = -1;
    char err[512] = "";
    size_t heap0 = __sanitizer_get_current_allocated_bytes();
    int rc = blksum_qcow2_open(&src, memfd, "fuzz.qcow2", err, sizeof(err));
    if (rc != 0) {
        if (rc > 0 || !err[0])
            fail("a refusal without a negative errno and a message", (uint64_t)(unsigned)-rc, 0);
        return 0;
    }
    walk(&src);
    size_t held = __sanitizer_get_current_allocated_bytes() - heap0;
    if (held > FUZZ_MEM_FIXED + FUZZ_MEM_PER_BYTE * (uint64_t)size)
        fail("the open reader holds heap out of proportion to the file (bytes held, file bytes)", held, size);
    if (src.size <= FUZZ_COMPUTE_MAX) {
        struct blksum_opts o;
        blksum_opts_init(&o);
        o.digest = "null";
        o.threads = 1;
        o.queue_depth = 1;
        o.io = BLKSUM_IO_TARGET;
        struct blksum_result res;
        (void)blksum_compute(&src, &o, &res);
    }
    blksum_source_close(&src);
    return 0;
}
