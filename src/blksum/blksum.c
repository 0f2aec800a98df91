/* SPDX-License-Identifier: BSD-3-Clause */
/* blksum.c — the checksum pipeline: reader thread, I/O engines, hash threads, in-order combine.
 *
 * Chunks (one per slot, queue_depth slots) move FREE -> IO -> HASH -> DONE -> combined -> FREE.
 * The reader owns chunk planning and I/O; hash threads own per-block hashing; whoever marks
 * a chunk DONE feeds every finished chunk that is next in order into the outer hash. Only
 * the queues and the combine step take the job mutex; hashing and I/O run unlocked.
 */
#include "blksum/blksum.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blksum/blksum_internal.h"
#include "engine/kio.h"
#include "engine/uring.h"

/** A hole chunk covers at most this many blocks, so progress and cancel stay responsive. */
#define BLKSUM_HOLE_CHUNK_BLOCKS (16u * 1024u)
/** Length field appended to the outer hash: little-endian uint64. */
#define BLKSUM_LENGTH_BYTES 8u
#define NS_PER_S            1000000000.0

enum slot_state { SLOT_FREE = 0, SLOT_IO, SLOT_HASH, SLOT_DONE };

struct slot {
    unsigned char *buf;    /* read_size bytes of I/O memory */
    unsigned char *hashes; /* blocks_per_chunk * md_len */
    uint64_t seq;          /* position in the image's chunk order */
    uint64_t off;          /* image offset of the chunk */
    size_t len;            /* bytes of image the chunk covers */
    size_t filled;         /* bytes read so far (short reads are resumed) */
    uint64_t hole_blocks;  /* > 0: a hole chunk of this many full zero blocks, no buffer */
    uint64_t zero_blocks;  /* zero blocks found while hashing */
    enum slot_state state;
    struct slot *next; /* free list / work queue link */
};

struct blksum_job {
    /* configuration */
    const struct blksum_source *src;
    struct blksum_opts opts;
    const EVP_MD *md;   /* NULL for "null" */
    EVP_MD *md_fetched; /* owned when fetched */
    unsigned md_len;
    unsigned char zero_hash[BLKSUM_MAX_MD_SIZE];
    size_t blocks_per_chunk;
    const char *io_name;

    /* slots */
    struct slot *slots;
    struct slot **ring; /* ring[seq % Q]: chunks awaiting combine */
    int nslots;

    /* shared state, under mu */
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* hash threads: work queued or stop */
    pthread_cond_t free_cv; /* reader: a slot came free, or cancel */
    pthread_cond_t done_cv; /* callers of blksum_wait */
    struct slot *free_list;
    struct slot *work_head, *work_tail;
    uint64_t next_combine;
    bool stop;  /* hash threads exit when the queue is empty */
    bool ended; /* the job thread has finished */
    EVP_MD_CTX *outer;

    /* counters */
    atomic_int cancel;
    atomic_int err; /* first error (negative), 0 if none */
    atomic_uint_least64_t done_bytes;
    atomic_uint_least64_t zero_blocks;
    uint64_t hole_blocks, bytes_read, reads, size;

    /* I/O through one engine backend (reader thread only) */
    struct perf_target *t;     /* the source's target, or own_t */
    struct perf_target *own_t; /* psync / io_uring over the source's descriptor */
    struct perf_chan *ch;      /* one channel of nslots slots of read_size bytes */
    uint32_t gran;             /* bytes per LBA of the device */
    int inflight;
    struct blksum_cpl {
        uint32_t slot;
        int status;
    } *cpl; /* completions of one reap */
    int ncpl;
    struct slot *retry; /* planned, refused with -EBUSY: submitted first next time */

    /* threads */
    pthread_t reader;
    pthread_t *workers;
    int nworkers;
    bool reader_started;
    bool inline_run; /* an image of one chunk at most: read and hashed on the calling thread */
    struct timespec t0;
    double elapsed_s;
    struct blksum_result res;
};

/* ---------------------------------------------------------------- utilities */

static void set_err(struct blksum_job *j, int e)
{
    int zero = 0;
    atomic_compare_exchange_strong(&j->err, &zero, e);
}

static bool should_stop(struct blksum_job *j)
{
    return atomic_load_explicit(&j->cancel, memory_order_relaxed) ||
           atomic_load_explicit(&j->err, memory_order_relaxed);
}

/* True when n bytes at p are all zero; returns at the first non-zero 64-byte group. */
static bool is_zero(const unsigned char *p, size_t n)
{
    enum { GROUP = 64, WORD = sizeof(uint64_t) };
    size_t i = 0;
    for (; i + GROUP <= n; i += GROUP) {
        uint64_t acc = 0, w;
        for (size_t k = 0; k < GROUP; k += WORD) {
            memcpy(&w, p + i + k, WORD);
            acc |= w;
        }
        if (acc)
            return false;
    }
    for (; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* ---------------------------------------------------------------- I/O (engine backend) */

/* ch->done: record one completion; the reader handles it after reap() returns. */
static void on_done(struct perf_chan *ch, uint32_t slot, int status)
{
    struct blksum_job *j = ch->eng;
    j->cpl[j->ncpl++] = (struct blksum_cpl){slot, status};
}

/* Open the channel (in the reader thread: an io_uring ring is then single-issuer) and
 * hand each slot its I/O buffer. */
static int io_open(struct blksum_job *j)
{
    char err[PERF_ERRLEN];
    int rc = j->t->ops->chan_open(j->t->ctx, j->src->dev, (uint32_t)j->nslots, (uint32_t)j->opts.read_size, &j->ch, err,
                                  sizeof(err));
    if (rc < 0)
        return rc;
    j->ch->done = on_done;
    j->ch->eng = j;
    for (int i = 0; i < j->nslots; i++)
        j->slots[i].buf = j->t->ops->chan_buf(j->ch, (uint32_t)i);
    return 0;
}

/* Queue the read of slot s (made visible by io_kick). -EBUSY: the backend is full. */
static int io_submit_one(struct blksum_job *j, struct slot *s)
{
    if (s->off % j->gran || s->len % j->gran)
        return -EINVAL;
    int rc = j->t->ops->submit(j->ch, (uint32_t)(s - j->slots), 0, s->off / j->gran, (uint32_t)(s->len / j->gran));
    if (rc < 0)
        return rc;
    j->reads++;
    j->inflight++;
    return 0;
}

static int io_kick(struct blksum_job *j, uint32_t wait_min)
{
    int rc = j->t->ops->kick(j->ch, wait_min);
    return rc == -EINTR ? 0 : rc;
}

/* Collect completed reads into done[] (at most max), waiting for one when wait is set;
 * returns their count or -errno. A failed read sets the job error and is not reported. */
static int io_poll(struct blksum_job *j, struct slot **done, int max, bool wait)
{
    const struct perf_backend_ops *ops = j->t->ops;
    int n = 0;
    if (j->inflight == 0)
        return 0;
    for (;;) {
        j->ncpl = 0;
        int got = ops->reap(j->ch, (uint32_t)max);
        if (got < 0 && got != -ENXIO)
            return got;
        for (int i = 0; i < j->ncpl; i++) {
            struct slot *s = &j->slots[j->cpl[i].slot];
            int st = j->cpl[i].status;
            j->inflight--;
            if (st != 0) {
                set_err(j, st < 0 ? st : -EIO); /* NVMe status: the driver names it in its log */
                continue;
            }
            s->filled = ops->chan_xfer ? ops->chan_xfer(j->ch, j->cpl[i].slot) : s->len;
            done[n++] = s;
        }
        if (got == -ENXIO)
            return -ENXIO;
        if (n || j->ncpl || !wait || j->inflight == 0)
            return n;
        if (j->t->flags & PERF_TGT_BLOCKING) {
            int rc = io_kick(j, 1);
            if (rc < 0)
                return rc;
        } else {
            sched_yield(); /* a polled target: the emulator serves on the next poll */
        }
    }
}

/* ---------------------------------------------------------------- hashing and combine */

static void feed_chunk(struct blksum_job *j, struct slot *s)
{
    if (!j->md || atomic_load(&j->err))
        return;
    if (s->hole_blocks) {
        for (uint64_t b = 0; b < s->hole_blocks; b++)
            EVP_DigestUpdate(j->outer, j->zero_hash, j->md_len);
    } else {
        size_t nb = (s->len + BLKSUM_BLOCK_SIZE - 1) / BLKSUM_BLOCK_SIZE;
        EVP_DigestUpdate(j->outer, s->hashes, nb * j->md_len);
    }
}

/* Under mu: feed every finished chunk that is next in order, and free its slot. */
static void combine_locked(struct blksum_job *j)
{
    bool freed = false;
    for (;;) {
        struct slot *s = j->ring[j->next_combine % (uint64_t)j->nslots];
        if (!s || s->state != SLOT_DONE || s->seq != j->next_combine)
            break;
        feed_chunk(j, s);
        atomic_fetch_add(&j->done_bytes, s->len);
        j->ring[j->next_combine % (uint64_t)j->nslots] = NULL;
        j->next_combine++;
        s->state = SLOT_FREE;
        s->next = j->free_list;
        j->free_list = s;
        freed = true;
    }
    if (freed)
        pthread_cond_broadcast(&j->free_cv);
}

static int hash_chunk(struct blksum_job *j, struct slot *s, EVP_MD_CTX *ctx)
{
    size_t nb = (s->len + BLKSUM_BLOCK_SIZE - 1) / BLKSUM_BLOCK_SIZE;
    uint64_t zeros = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *p = s->buf + b * BLKSUM_BLOCK_SIZE;
        size_t n = s->len - b * BLKSUM_BLOCK_SIZE;
        unsigned char *out = s->hashes + b * j->md_len;
        unsigned outlen = 0;
        if (n > BLKSUM_BLOCK_SIZE)
            n = BLKSUM_BLOCK_SIZE;
        if (n == BLKSUM_BLOCK_SIZE && is_zero(p, n)) {
            memcpy(out, j->zero_hash, j->md_len);
            zeros++;
            continue;
        }
        if (!EVP_DigestInit_ex(ctx, j->md, NULL) || !EVP_DigestUpdate(ctx, p, n) ||
            !EVP_DigestFinal_ex(ctx, out, &outlen) || outlen != j->md_len)
            return -EIO;
    }
    s->zero_blocks = zeros;
    atomic_fetch_add(&j->zero_blocks, zeros);
    return 0;
}

static void *worker_main(void *arg)
{
    struct blksum_job *j = arg;
    EVP_MD_CTX *ctx = j->md ? EVP_MD_CTX_new() : NULL;
    if (j->md && !ctx)
        set_err(j, -ENOMEM);
    for (;;) {
        struct slot *s;
        pthread_mutex_lock(&j->mu);
        while (!j->work_head && !j->stop)
            pthread_cond_wait(&j->work_cv, &j->mu);
        s = j->work_head;
        if (!s) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        j->work_head = s->next;
        if (!j->work_head)
            j->work_tail = NULL;
        pthread_mutex_unlock(&j->mu);

        if (j->md && !should_stop(j)) {
            int rc = ctx ? hash_chunk(j, s, ctx) : -ENOMEM;
            if (rc < 0)
                set_err(j, rc);
        }
        pthread_mutex_lock(&j->mu);
        s->state = SLOT_DONE;
        combine_locked(j);
        pthread_mutex_unlock(&j->mu);
    }
    EVP_MD_CTX_free(ctx);
    return NULL;
}

/* ---------------------------------------------------------------- reader */

struct plan {
    uint64_t region_end; /* end of the current data or hole region */
    bool region_hole;
    bool known;
};

/* Decide the next chunk at off: a hole chunk of whole zero blocks, or a data chunk. */
static int plan_chunk(struct blksum_job *j, struct plan *p, uint64_t off, struct slot *s)
{
    const struct blksum_source *src = j->src;
    uint64_t size = j->size;
    s->off = off;
    s->filled = 0;
    s->hole_blocks = 0;
    s->zero_blocks = 0;
    if (!src->seekable) {
        s->len = j->opts.read_size;
        return 0;
    }
    if (src->sparse && (!p->known || off >= p->region_end)) {
        int rc = blksum_source_region(src, off, &p->region_end, &p->region_hole);
        if (rc < 0)
            return rc;
        p->known = true;
    }
    if (src->sparse && p->region_hole) {
        uint64_t full = (p->region_end - off) / BLKSUM_BLOCK_SIZE;
        if (full > BLKSUM_HOLE_CHUNK_BLOCKS)
            full = BLKSUM_HOLE_CHUNK_BLOCKS;
        if (full > 0) {
            s->hole_blocks = full;
            s->len = full * BLKSUM_BLOCK_SIZE;
            return 0;
        }
        /* less than a block of hole before data or EOF: read it (reads as zeros) */
    }
    uint64_t len = size - off;
    if (len > j->opts.read_size)
        len = j->opts.read_size;
    if (src->sparse && !p->region_hole) {
        /* stop at the block holding the start of the next hole */
        uint64_t end = (p->region_end + BLKSUM_BLOCK_SIZE - 1) / BLKSUM_BLOCK_SIZE * BLKSUM_BLOCK_SIZE;
        if (end > off && end - off < len)
            len = end - off;
    }
    s->len = (size_t)len;
    return 0;
}

static void queue_work_locked(struct blksum_job *j, struct slot *s)
{
    s->state = SLOT_HASH;
    s->next = NULL;
    if (j->work_tail)
        j->work_tail->next = s;
    else
        j->work_head = s;
    j->work_tail = s;
    pthread_cond_signal(&j->work_cv);
}

static void reader_run(struct blksum_job *j)
{
    struct plan plan = {0};
    uint64_t off = 0, seq = 0;
    bool eof = j->src->seekable && j->size == 0;
    struct slot *done[BLKSUM_MAX_QUEUE_DEPTH];
    const bool sync = j->t->flags & PERF_TGT_SYNC;
    int rc;

    for (;;) {
        bool submitted = false;
        if (should_stop(j))
            break;
        /* submit while a slot is free */
        while ((!eof || j->retry) && !should_stop(j)) {
            struct slot *s;
            if (j->retry) {
                s = j->retry;
                rc = io_submit_one(j, s);
                if (rc == -EBUSY)
                    break;
                j->retry = NULL;
                if (rc < 0) {
                    set_err(j, rc);
                    break;
                }
                submitted = true;
                continue;
            }
            pthread_mutex_lock(&j->mu);
            s = j->free_list;
            if (s)
                j->free_list = s->next;
            pthread_mutex_unlock(&j->mu);
            if (!s)
                break;
            rc = plan_chunk(j, &plan, off, s);
            if (rc < 0) {
                set_err(j, rc);
                break;
            }
            s->seq = seq;
            s->state = SLOT_IO;
            if (s->hole_blocks) {
                j->hole_blocks += s->hole_blocks;
                pthread_mutex_lock(&j->mu);
                j->ring[seq % (uint64_t)j->nslots] = s;
                s->state = SLOT_DONE;
                combine_locked(j);
                pthread_mutex_unlock(&j->mu);
            } else {
                pthread_mutex_lock(&j->mu);
                j->ring[seq % (uint64_t)j->nslots] = s;
                pthread_mutex_unlock(&j->mu);
                rc = io_submit_one(j, s);
                if (rc == -EBUSY) {
                    j->retry = s; /* planned and placed in order: it goes first next time */
                } else if (rc < 0) {
                    set_err(j, rc);
                    break;
                }
            }
            seq++;
            submitted = true;
            if (j->src->seekable) {
                off += s->len;
                if (off >= j->size)
                    eof = true;
            } else {
                /* a pipe: its length is known once the read completes (sync backend) */
                break;
            }
            if (sync || j->retry)
                break; /* hand a finished psync read to the hash threads at once */
        }
        if (submitted) {
            rc = io_kick(j, 0);
            if (rc < 0) {
                set_err(j, rc);
                break;
            }
        }
        if (should_stop(j))
            break;
        /* collect completions; wait for one if nothing else can move */
        if (j->inflight > 0) {
            int n = io_poll(j, done, BLKSUM_MAX_QUEUE_DEPTH, !submitted);
            if (n < 0) {
                set_err(j, n);
                break;
            }
            if (n > 0) {
                pthread_mutex_lock(&j->mu);
                for (int i = 0; i < n; i++) {
                    if (!j->src->seekable) {
                        if (done[i]->filled < done[i]->len) {
                            done[i]->len = done[i]->filled; /* the pipe ended: the tail, possibly empty */
                            eof = true;
                        }
                        off += done[i]->len;
                    }
                    j->bytes_read += done[i]->filled;
                    if (j->inline_run && j->md && done[i]->len) {
                        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
                        int hrc = ctx ? hash_chunk(j, done[i], ctx) : -ENOMEM;
                        EVP_MD_CTX_free(ctx);
                        if (hrc < 0)
                            set_err(j, hrc);
                    }
                    if (done[i]->len == 0 || !j->md || j->inline_run) { /* nothing to hand off */
                        done[i]->state = SLOT_DONE;
                        combine_locked(j);
                    } else {
                        queue_work_locked(j, done[i]);
                    }
                }
                pthread_mutex_unlock(&j->mu);
            }
            continue;
        }
        if (submitted)
            continue;
        pthread_mutex_lock(&j->mu);
        if (eof && j->next_combine == seq) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        while (!j->free_list && !should_stop(j) && !(eof && j->next_combine == seq))
            pthread_cond_wait(&j->free_cv, &j->mu);
        pthread_mutex_unlock(&j->mu);
    }
    /* drain I/O still in flight: its buffers must not be freed under the kernel */
    while (j->inflight > 0) {
        if (io_poll(j, done, BLKSUM_MAX_QUEUE_DEPTH, true) < 0)
            break;
    }
    if (!j->src->seekable)
        j->size = off;
}

static void *reader_main(void *arg)
{
    struct blksum_job *j = arg;
    int rc = io_open(j);
    if (rc < 0)
        set_err(j, rc);
    else
        reader_run(j);
    /* stop the hash threads once the queue is drained */
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_broadcast(&j->work_cv);
    pthread_mutex_unlock(&j->mu);
    for (int i = 0; i < j->nworkers; i++)
        pthread_join(j->workers[i], NULL);
    j->nworkers = 0;
    /* the hash threads are done with the buffers: close the channel on its own thread */
    if (j->ch) {
        j->t->ops->chan_close(j->ch);
        j->ch = NULL;
        for (int i = 0; i < j->nslots; i++)
            j->slots[i].buf = NULL;
    }

    if (!atomic_load(&j->err) && atomic_load(&j->cancel))
        set_err(j, -ECANCELED);
    if (!atomic_load(&j->err)) {
        struct blksum_result *r = &j->res;
        memset(r, 0, sizeof(*r));
        if (j->md) {
            unsigned char le[BLKSUM_LENGTH_BYTES];
            uint64_t v = j->size;
            unsigned len = 0;
            for (unsigned i = 0; i < BLKSUM_LENGTH_BYTES; i++, v >>= 8)
                le[i] = (unsigned char)(v & 0xffu);
            if (!EVP_DigestUpdate(j->outer, le, sizeof(le)) || !EVP_DigestFinal_ex(j->outer, r->md, &len))
                set_err(j, -EIO);
            r->md_len = len;
        }
        r->size = j->size;
        r->bytes_read = j->bytes_read;
        r->blocks = (j->size + BLKSUM_BLOCK_SIZE - 1) / BLKSUM_BLOCK_SIZE;
        r->zero_blocks = atomic_load(&j->zero_blocks);
        r->hole_blocks = j->hole_blocks;
        r->reads = j->reads;
        r->io = j->io_name;
    }
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    j->res.elapsed_s = (double)(t1.tv_sec - j->t0.tv_sec) + (double)(t1.tv_nsec - j->t0.tv_nsec) / NS_PER_S;

    pthread_mutex_lock(&j->mu);
    j->ended = true;
    pthread_cond_broadcast(&j->done_cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* ---------------------------------------------------------------- job lifetime */

static void job_free(struct blksum_job *j)
{
    if (!j)
        return;
    if (j->slots) {
        for (int i = 0; i < j->nslots; i++)
            free(j->slots[i].hashes); /* the buffers belong to the channel */
    }
    if (j->own_t)
        perf_target_close(j->own_t);
    free(j->slots);
    free(j->ring);
    free(j->cpl);
    free(j->workers);
    EVP_MD_CTX_free(j->outer);
    EVP_MD_free(j->md_fetched);
    pthread_cond_destroy(&j->work_cv);
    pthread_cond_destroy(&j->free_cv);
    pthread_cond_destroy(&j->done_cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

int blksum_start(const struct blksum_source *src, const struct blksum_opts *o, struct blksum_job **out)
{
    struct blksum_job *j;
    int rc;
    *out = NULL;
    if (!src || !o)
        return -EINVAL;
    rc = blksum_opts_check(o, NULL, 0);
    if (rc < 0)
        return rc;
    if (src->fd < 0 && o->io != BLKSUM_IO_TARGET)
        return -EBADF;
    if (o->io == BLKSUM_IO_TARGET && (!src->target || src->dev >= src->target->ndevs || !src->seekable))
        return -EINVAL;

    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->work_cv, NULL);
    pthread_cond_init(&j->free_cv, NULL);
    pthread_cond_init(&j->done_cv, NULL);
    j->src = src;
    j->opts = *o;
    if (!j->opts.digest)
        j->opts.digest = BLKSUM_DEFAULT_DIGEST;
    j->size = src->seekable ? src->size : 0;
    j->nslots = o->queue_depth;
    j->blocks_per_chunk = o->read_size / BLKSUM_BLOCK_SIZE;
    switch (o->io) {
    case BLKSUM_IO_PSYNC:
        j->io_name = src->seekable ? "psync" : "read";
        break;
    case BLKSUM_IO_IO_URING:
        j->io_name = src->seekable ? "io_uring" : "read";
        break;
    case BLKSUM_IO_TARGET:
        j->io_name = src->target->backend;
        break;
    }
    if (o->io == BLKSUM_IO_TARGET) {
        j->t = src->target;
    } else {
        char err[PERF_ERRLEN];
        rc = kio_target_from_fd(src->fd, o->io == BLKSUM_IO_IO_URING ? "io_uring" : "psync", &j->own_t, err,
                                sizeof(err));
        if (rc < 0)
            goto fail;
        j->t = j->own_t;
    }
    j->gran = j->t->dev[src->dev].lba_size;

    if (!blksum_is_null_digest(j->opts.digest)) {
        static const unsigned char zeros[BLKSUM_BLOCK_SIZE];
        unsigned len = 0;
        j->md = blksum_fetch_md(j->opts.digest, &j->md_fetched);
        if (!j->md) {
            rc = -BLKSUM_EDIGEST;
            goto fail;
        }
        j->md_len = (unsigned)EVP_MD_get_size(j->md);
        if (j->md_len == 0 || j->md_len > BLKSUM_MAX_MD_SIZE) {
            rc = -BLKSUM_EDIGEST;
            goto fail;
        }
        j->outer = EVP_MD_CTX_new();
        if (!j->outer || !EVP_Digest(zeros, sizeof(zeros), j->zero_hash, &len, j->md, NULL) || len != j->md_len ||
            !EVP_DigestInit_ex(j->outer, j->md, NULL)) {
            rc = -ENOMEM;
            goto fail;
        }
    }

    j->slots = calloc((size_t)j->nslots, sizeof(*j->slots));
    j->ring = calloc((size_t)j->nslots, sizeof(*j->ring));
    j->cpl = calloc((size_t)j->nslots, sizeof(*j->cpl));
    j->workers = calloc((size_t)o->threads, sizeof(*j->workers));
    if (!j->slots || !j->ring || !j->cpl || !j->workers) {
        rc = -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < j->nslots; i++) {
        struct slot *s = &j->slots[i];
        if (j->md) {
            s->hashes = malloc(j->blocks_per_chunk * j->md_len);
            if (!s->hashes) {
                rc = -ENOMEM;
                goto fail;
            }
        }
        s->next = j->free_list;
        j->free_list = s;
    }

    clock_gettime(CLOCK_MONOTONIC, &j->t0);
    /* At most one chunk of image (a small file): read and hash it here, with no thread to start and
     * no hand-off to wait for; the job has ended when blksum_start returns. */
    j->inline_run = src->seekable && j->size <= o->read_size && o->io != BLKSUM_IO_TARGET;
    if (j->inline_run) {
        reader_main(j);
        *out = j;
        return 0;
    }
    for (int i = 0; i < o->threads; i++) {
        rc = -pthread_create(&j->workers[i], NULL, worker_main, j);
        if (rc < 0) {
            /* unwind the workers already started */
            pthread_mutex_lock(&j->mu);
            j->stop = true;
            pthread_cond_broadcast(&j->work_cv);
            pthread_mutex_unlock(&j->mu);
            for (int k = 0; k < i; k++)
                pthread_join(j->workers[k], NULL);
            goto fail;
        }
        j->nworkers = i + 1;
    }
    rc = -pthread_create(&j->reader, NULL, reader_main, j);
    if (rc < 0) {
        pthread_mutex_lock(&j->mu);
        j->stop = true;
        pthread_cond_broadcast(&j->work_cv);
        pthread_mutex_unlock(&j->mu);
        for (int k = 0; k < j->nworkers; k++)
            pthread_join(j->workers[k], NULL);
        goto fail;
    }
    j->reader_started = true;
    *out = j;
    return 0;
fail:
    job_free(j);
    return rc;
}

int blksum_wait(struct blksum_job *j, int timeout_ms)
{
    int rc = 0;
    struct timespec dl;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&j->mu);
    while (!j->ended && rc == 0)
        rc = timeout_ms < 0 ? pthread_cond_wait(&j->done_cv, &j->mu) : pthread_cond_timedwait(&j->done_cv, &j->mu, &dl);
    rc = j->ended ? 0 : -ETIMEDOUT;
    pthread_mutex_unlock(&j->mu);
    return rc;
}

void blksum_progress(struct blksum_job *j, uint64_t *done, uint64_t *total)
{
    if (done)
        *done = atomic_load(&j->done_bytes);
    if (total)
        *total = j->src->seekable ? j->src->size : 0;
}

void blksum_cancel(struct blksum_job *j)
{
    atomic_store(&j->cancel, 1);
    pthread_mutex_lock(&j->mu);
    pthread_cond_broadcast(&j->free_cv);
    pthread_cond_broadcast(&j->work_cv);
    pthread_mutex_unlock(&j->mu);
}

int blksum_finish(struct blksum_job *j, struct blksum_result *res)
{
    int rc;
    if (!j)
        return -EINVAL;
    if (j->reader_started)
        pthread_join(j->reader, NULL);
    rc = atomic_load(&j->err);
    if (rc == 0 && res)
        *res = j->res;
    job_free(j);
    return rc;
}

int blksum_compute(const struct blksum_source *src, const struct blksum_opts *o, struct blksum_result *res)
{
    struct blksum_job *j;
    int rc = blksum_start(src, o, &j);
    if (rc < 0)
        return rc;
    return blksum_finish(j, res);
}
