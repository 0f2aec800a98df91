/* nvme_source.c — a blksum engine that reads a namespace through the user-space NVMe driver.
 *
 * The target (emu://, pci://) is opened here; the namespace read is the first active one of
 * controller 0 unless the caller asks for another NSID. One I/O qpair, used only by the blksum
 * reader thread; a chunk larger than the controller's transfer limit is split into several
 * Read commands and completes when all of them have. Completions come from polling the qpair
 * (the emulator serves commands inline on the doorbell write and on the poll).
 */
#include "blksum/blksum.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/emu/emu.h"
#include "nvme/nvme.h"

/** Extra queue entry: an NVMe queue of N entries holds N-1 commands. */
#define QUEUE_SLACK 1u

struct nvme_req {
    void *tag;
    uint32_t parts_left;
    int err;
    bool busy;
};

struct blksum_nvme {
    struct nvme_target *t;
    struct nvme_ctrl *c;
    struct nvme_ns *ns;
    struct nvme_qpair *q;
    uint32_t lba;
    uint32_t max_xfer;
    uint32_t parts_per_chunk;
    struct nvme_req *reqs;
    uint32_t nreqs;
    void **done_tags;         /* completed requests, in completion order */
    int *done_res;
    uint32_t ndone;
    struct nvme_dma **bufs;   /* DMA objects backing the chunk buffers */
    uint32_t nbufs;
    char describe[160];
};

static void on_cpl(void *arg, const struct nvme_cpl *cpl)
{
    struct nvme_req *r = arg;
    if (!nvme_cpl_ok(cpl) && r->err == 0)
        r->err = cpl->err ? cpl->err : -EIO; /* NVMe status: logged by the driver, -EIO here */
    r->parts_left--;
}

static int eng_submit(void *ctx, void *buf, uint64_t off, size_t len, void *tag)
{
    struct blksum_nvme *n = ctx;
    struct nvme_req *r = NULL;
    for (uint32_t i = 0; i < n->nreqs; i++)
        if (!n->reqs[i].busy) {
            r = &n->reqs[i];
            break;
        }
    if (!r)
        return -EBUSY;
    if (off % n->lba || len % n->lba)
        return -EINVAL;
    r->busy = true;
    r->tag = tag;
    r->err = 0;
    r->parts_left = 0;
    for (size_t done = 0; done < len;) {
        size_t part = len - done < n->max_xfer ? len - done : n->max_xfer;
        int rc = nvme_qpair_submit(n->q, n->ns, NVME_CMD_READ, (off + done) / n->lba, (uint32_t)(part / n->lba),
                                   (char *)buf + done, part, on_cpl, r);
        if (rc < 0) {
            if (r->parts_left == 0)
                r->busy = false;
            else
                r->err = rc; /* the parts already queued still complete */
            return r->parts_left == 0 ? rc : 0;
        }
        r->parts_left++;
        done += part;
    }
    nvme_qpair_ring(n->q);
    return 0;
}

static int eng_poll(void *ctx, void **tags, int *results, int max, bool wait)
{
    struct blksum_nvme *n = ctx;
    int got = 0;
    for (;;) {
        int rc = nvme_qpair_poll(n->q, 0);
        if (rc < 0 && rc != -ENXIO)
            return rc;
        for (uint32_t i = 0; i < n->nreqs && got < max; i++) {
            struct nvme_req *r = &n->reqs[i];
            if (r->busy && r->parts_left == 0) {
                tags[got] = r->tag;
                results[got] = r->err;
                got++;
                r->busy = false;
            }
        }
        if (got || !wait)
            return got;
        if (rc == -ENXIO)
            return -ENXIO;
        sched_yield();
    }
}

static void *eng_alloc(void *ctx, size_t len)
{
    struct blksum_nvme *n = ctx;
    struct nvme_dma *d;
    void **grow = realloc(n->bufs, (n->nbufs + 1) * sizeof(*n->bufs));
    if (!grow)
        return NULL;
    n->bufs = (struct nvme_dma **)grow;
    if (nvme_dma_alloc(n->t, len, &d) < 0)
        return NULL;
    n->bufs[n->nbufs++] = d;
    return nvme_dma_vaddr(d);
}

static void eng_free(void *ctx, void *buf, size_t len)
{
    struct blksum_nvme *n = ctx;
    (void)len;
    for (uint32_t i = 0; i < n->nbufs; i++)
        if (n->bufs[i] && nvme_dma_vaddr(n->bufs[i]) == buf) {
            nvme_dma_free(n->bufs[i]);
            n->bufs[i] = NULL;
        }
}

void blksum_nvme_close(struct blksum_nvme *n)
{
    if (!n)
        return;
    for (uint32_t i = 0; i < n->nbufs; i++)
        nvme_dma_free(n->bufs[i]);
    if (n->q)
        nvme_qpair_destroy(n->q);
    nvme_target_close(n->t);
    free(n->bufs);
    free(n->reqs);
    free(n);
}

int blksum_nvme_open(const char *uri, uint32_t nsid, int queue_depth, size_t read_size, struct blksum_source *src,
                     struct blksum_nvme **out, char *err, size_t errlen)
{
    struct blksum_nvme *n;
    int rc;
    *out = NULL;
    memset(src, 0, sizeof(*src));
    src->fd = -1;
    if (queue_depth < 1 || queue_depth > BLKSUM_MAX_QUEUE_DEPTH || read_size == 0) {
        snprintf(err, errlen, "queue depth must be 1..%d and read size > 0", BLKSUM_MAX_QUEUE_DEPTH);
        return -EINVAL;
    }
    n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    rc = nvme_target_open(uri, &n->t, err, errlen);
    if (rc < 0)
        goto fail;
    n->c = nvme_target_ctrl(n->t, 0);
    if (!n->c) {
        snprintf(err, errlen, "%s: the target has no controller", uri);
        rc = -ENODEV;
        goto fail;
    }
    n->ns = nsid ? nvme_ctrl_ns(n->c, nsid) : nvme_ctrl_ns_at(n->c, 0);
    if (!n->ns) {
        snprintf(err, errlen, "%s: namespace %u is not active on controller 0", uri, nsid ? nsid : 1u);
        rc = -ENODEV;
        goto fail;
    }
    n->lba = nvme_ns_lba_size(n->ns);
    n->max_xfer = nvme_ctrl_max_xfer(n->c);
    if (n->max_xfer == 0 || n->max_xfer > read_size)
        n->max_xfer = (uint32_t)read_size;
    n->max_xfer -= n->max_xfer % n->lba;
    if (n->max_xfer == 0) {
        snprintf(err, errlen, "%s: LBA size %u exceeds the transfer limit", uri, n->lba);
        rc = -EINVAL;
        goto fail;
    }
    n->parts_per_chunk = (uint32_t)((read_size + n->max_xfer - 1) / n->max_xfer);
    {
        uint32_t want = (uint32_t)queue_depth * n->parts_per_chunk + QUEUE_SLACK;
        uint32_t cap = nvme_ctrl_max_depth(n->c);
        struct nvme_qpair_opts qo = {.depth = want < cap ? want : cap, .timeout_ms = 0, .batch = 0};
        if (qo.depth < 2)
            qo.depth = 2;
        rc = nvme_qpair_create(n->c, &qo, &n->q);
        if (rc < 0) {
            snprintf(err, errlen, "%s: could not create an I/O queue pair (%s)", uri, strerror(-rc));
            goto fail;
        }
        n->nreqs = (nvme_qpair_depth(n->q) - QUEUE_SLACK) / n->parts_per_chunk;
        if (n->nreqs == 0) {
            snprintf(err, errlen, "%s: queue too shallow for one %zu-byte read", uri, read_size);
            rc = -EINVAL;
            goto fail;
        }
    }
    n->reqs = calloc(n->nreqs, sizeof(*n->reqs));
    if (!n->reqs) {
        rc = -ENOMEM;
        goto fail;
    }
    if (strcmp(nvme_target_scheme(n->t), "emu") == 0 && nvme_target_backend(n->t))
        nvme_emu_set_describe(nvme_target_backend(n->t), n->describe, sizeof(n->describe));

    src->kind = "engine";
    src->seekable = true;
    src->sparse = false;
    src->size = nvme_ns_nsze(n->ns) * (uint64_t)n->lba;
    src->engine = (struct blksum_engine){
        .ctx = n, .name = "nvme", .max_inflight = n->nreqs, .align = n->lba,
        .submit = eng_submit, .poll = eng_poll, .alloc_buf = eng_alloc, .free_buf = eng_free,
    };
    *out = n;
    return 0;
fail:
    blksum_nvme_close(n);
    return rc;
}

const char *blksum_nvme_describe(const struct blksum_nvme *n)
{
    return n->describe;
}
