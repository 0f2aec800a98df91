/* SPDX-License-Identifier: BSD-3-Clause */
/* blksum.c — the checksum pipeline: reader thread, I/O engines, hash threads, in-order combine.
 *
 * Chunks (one per slot, queue_depth slots) move FREE -> IO -> HASH -> DONE -> combined -> FREE.
 * The reader (here) owns chunk planning and I/O; the hash threads (hash.c) own per-block hashing;
 * whoever marks a chunk DONE feeds every finished chunk that is next in order into the outer hash.
 * Only the queues and the combine step take the job mutex; hashing and I/O run unlocked. The job's
 * state is in pipeline.h.
 */
#include "blksum/blksum.h"

#include <errno.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blksum/blksum_internal.h"
#include "blksum/pipeline.h"
#include "engine/kio.h"
#include "engine/uring.h"

/** A hole chunk covers at most this many blocks, so progress and cancel stay responsive. */
#define BLKSUM_HOLE_CHUNK_BLOCKS (16u * 1024u)
/** Length field appended to the outer hash: little-endian uint64. */
#define BLKSUM_LENGTH_BYTES 8u
#define NS_PER_S            1000000000.0

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
    struct perf_chan *ch;
    int rc = j->t->ops->chan_open(j->t->ctx, j->src->dev, (uint32_t)j->nslots, (uint32_t)j->opts.read_size, &ch, err,
                                  sizeof(err));
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&j->mu); /* blksum_cancel() may look at it */
    j->ch = ch;
    pthread_mutex_unlock(&j->mu);
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
                blksum_set_err(j, st < 0 ? st : -EIO); /* NVMe status: the driver names it in its log */
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
            int rc = ops->kick(j->ch, 1);
            if (rc == -EINTR) {
                wait = false; /* woken (ops->wake) or a signal: collect what is there, then return */
                continue;
            }
            if (rc < 0)
                return rc;
        } else {
            sched_yield(); /* a polled target: the emulator serves on the next poll */
        }
    }
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
        if (blksum_should_stop(j))
            break;
        /* submit while a slot is free */
        while ((!eof || j->retry) && !blksum_should_stop(j)) {
            struct slot *s;
            if (j->retry) {
                s = j->retry;
                rc = io_submit_one(j, s);
                if (rc == -EBUSY)
                    break;
                j->retry = NULL;
                if (rc < 0) {
                    blksum_set_err(j, rc);
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
                blksum_set_err(j, rc);
                break;
            }
            s->seq = seq;
            s->state = SLOT_IO;
            if (s->hole_blocks) {
                j->hole_blocks += s->hole_blocks;
                pthread_mutex_lock(&j->mu);
                j->ring[seq % (uint64_t)j->nslots] = s;
                s->state = SLOT_DONE;
                blksum_combine_locked(j);
                pthread_mutex_unlock(&j->mu);
            } else {
                pthread_mutex_lock(&j->mu);
                j->ring[seq % (uint64_t)j->nslots] = s;
                pthread_mutex_unlock(&j->mu);
                rc = io_submit_one(j, s);
                if (rc == -EBUSY) {
                    j->retry = s; /* planned and placed in order: it goes first next time */
                } else if (rc < 0) {
                    blksum_set_err(j, rc);
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
                blksum_set_err(j, rc);
                break;
            }
        }
        if (blksum_should_stop(j))
            break;
        /* collect completions; wait for one if nothing else can move */
        if (j->inflight > 0) {
            /* About to sleep on a read with every buffer taken: where the backend can be woken, ask the
             * hash threads to wake the reader when they free one, so that the next read is asked for at
             * once rather than after the read in flight (the original polls its hash completions too). */
            bool wait = !submitted, armed = false;
            if (wait && !eof && !j->retry && j->t->ops->wake) {
                pthread_mutex_lock(&j->mu);
                if (j->free_list)
                    wait = false;
                else
                    j->io_waiting = armed = true;
                if (j->reader_hashes && j->work_head) /* pieces the reader meant to hash: not now */
                    blksum_share_work_locked(j, false);
                pthread_mutex_unlock(&j->mu);
            }
            int n = io_poll(j, done, BLKSUM_MAX_QUEUE_DEPTH, wait);
            if (armed) {
                pthread_mutex_lock(&j->mu);
                j->io_waiting = false;
                pthread_mutex_unlock(&j->mu);
            }
            if (n < 0) {
                blksum_set_err(j, n);
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
                        int hrc = ctx ? blksum_hash_blocks(j, done[i], ctx, 0, blksum_chunk_blocks(done[i])) : -ENOMEM;
                        EVP_MD_CTX_free(ctx);
                        if (hrc < 0)
                            blksum_set_err(j, hrc);
                    }
                    if (done[i]->len == 0 || !j->md || j->inline_run) { /* nothing to hand off */
                        done[i]->state = SLOT_DONE;
                        blksum_combine_locked(j);
                    } else {
                        blksum_queue_work_locked(j, done[i]);
                    }
                }
                if (j->reader_hashes) /* the reader hashes next when it has nothing to read or reap */
                    blksum_share_work_locked(j, !j->inflight && !j->retry && (eof || !j->free_list));
                pthread_mutex_unlock(&j->mu);
            }
            continue;
        }
        if (submitted)
            continue;
        /* Nothing to read or reap: wait for a free buffer (at the end, for the last chunk), hashing
         * meanwhile where the reader hashes too. */
        pthread_mutex_lock(&j->mu);
        if (eof && j->next_combine == seq) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        while ((!j->free_list || eof) && !blksum_should_stop(j) && !(eof && j->next_combine == seq)) {
            if (!j->reader_hashes || !blksum_reader_hash_locked(j))
                pthread_cond_wait(&j->free_cv, &j->mu);
        }
        if (j->reader_hashes && j->work_head) /* pieces left: to the hash threads */
            blksum_share_work_locked(j, false);
        pthread_mutex_unlock(&j->mu);
    }
    /* Drain I/O still in flight: its buffers must not be freed under the kernel. A cancelled run of a source
     * that can be interrupted (NBD: a server that may never answer) leaves its reads to chan_close, which
     * abandons them (blksum.h). */
    while (j->inflight > 0) {
        if (atomic_load(&j->cancel) && j->src->interrupt)
            break;
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
        blksum_set_err(j, rc);
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
        struct perf_chan *ch = j->ch;
        pthread_mutex_lock(&j->mu);
        j->ch = NULL;
        pthread_mutex_unlock(&j->mu);
        j->t->ops->chan_close(ch);
        for (int i = 0; i < j->nslots; i++)
            j->slots[i].buf = NULL;
    }

    if (!atomic_load(&j->err) && atomic_load(&j->cancel))
        blksum_set_err(j, -ECANCELED);
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
                blksum_set_err(j, -EIO);
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
    EVP_MD_CTX_free(j->reader_ctx);
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
    /* A reader that sleeps through its reads (NBD: a round trip through the server) hashes while it
     * has nothing to read or reap, in place of a hash thread; see hash.c. */
    j->reader_hashes = j->t->ops->wake != NULL && !blksum_is_null_digest(j->opts.digest);
    j->hash_limit = o->threads + (j->reader_hashes && o->reader_joins ? 1 : 0);

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
        rc = -pthread_create(&j->workers[i], NULL, blksum_worker_main, j);
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

static volatile sig_atomic_t *interrupt_flag;

void blksum_set_interrupt(volatile sig_atomic_t *flag)
{
    interrupt_flag = flag;
}

static atomic_int interrupt_fd = -1;

void blksum_set_interrupt_fd(int fd)
{
    atomic_store(&interrupt_fd, fd);
}

int blksum_interrupt_fd(void)
{
    return atomic_load(&interrupt_fd);
}

bool blksum_interrupted(void)
{
    volatile sig_atomic_t *f = interrupt_flag;
    if (f && *f)
        return true;
    struct pollfd p = {.fd = blksum_interrupt_fd(), .events = POLLIN};
    return p.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

void blksum_cancel(struct blksum_job *j)
{
    atomic_store(&j->cancel, 1);
    if (j->src->interrupt) /* a source waiting on someone else (a server) stops waiting */
        j->src->interrupt(j->src->map_ctx);
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
