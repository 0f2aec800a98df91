/* blksum.c — the checksum pipeline: reader thread, I/O engines, hash threads, in-order combine.
 *
 * Chunks (one per slot, queue_depth slots) move FREE -> IO -> HASH -> DONE -> combined -> FREE.
 * The reader owns chunk planning and I/O; hash threads own per-block hashing; whoever marks
 * a chunk DONE feeds every finished chunk that is next in order into the outer hash. Only
 * the queues and the combine step take the job mutex; hashing and I/O run unlocked.
 */
#include "blksum/blksum.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvme/uring.h"

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#error "blksum needs OpenSSL 3.0 or newer (EVP_MD_fetch, EVP_MD_get_size)"
#endif

/** Alignment of chunk buffers (a page; enough for O_DIRECT-style engines too). */
#define BLKSUM_BUF_ALIGN 4096u
/** A hole chunk covers at most this many blocks, so progress and cancel stay responsive. */
#define BLKSUM_HOLE_CHUNK_BLOCKS (16u * 1024u)
/** Length field appended to the outer hash: little-endian uint64. */
#define BLKSUM_LENGTH_BYTES 8u
#define NS_PER_S 1000000000.0

enum slot_state { SLOT_FREE = 0, SLOT_IO, SLOT_HASH, SLOT_DONE };

struct slot {
    unsigned char *buf;       /* read_size bytes of I/O memory */
    unsigned char *hashes;    /* blocks_per_chunk * md_len */
    uint64_t seq;             /* position in the image's chunk order */
    uint64_t off;             /* image offset of the chunk */
    size_t len;               /* bytes of image the chunk covers */
    size_t filled;            /* bytes read so far (short reads are resumed) */
    uint64_t hole_blocks;     /* > 0: a hole chunk of this many full zero blocks, no buffer */
    uint64_t zero_blocks;     /* zero blocks found while hashing */
    enum slot_state state;
    struct slot *next;        /* free list / work queue link */
};

struct blksum_job {
    /* configuration */
    const struct blksum_source *src;
    struct blksum_opts opts;
    const EVP_MD *md;         /* NULL for "null" */
    EVP_MD *md_fetched;       /* owned when fetched */
    unsigned md_len;
    unsigned char zero_hash[BLKSUM_MAX_MD_SIZE];
    size_t blocks_per_chunk;
    const char *io_name;

    /* slots */
    struct slot *slots;
    struct slot **ring;       /* ring[seq % Q]: chunks awaiting combine */
    int nslots;

    /* shared state, under mu */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;   /* hash threads: work queued or stop */
    pthread_cond_t free_cv;   /* reader: a slot came free, or cancel */
    pthread_cond_t done_cv;   /* callers of blksum_wait */
    struct slot *free_list;
    struct slot *work_head, *work_tail;
    uint64_t next_combine;
    bool stop;                /* hash threads exit when the queue is empty */
    bool ended;               /* the job thread has finished */
    EVP_MD_CTX *outer;

    /* counters */
    atomic_int cancel;
    atomic_int err;           /* first error (negative), 0 if none */
    atomic_uint_least64_t done_bytes;
    atomic_uint_least64_t zero_blocks;
    uint64_t hole_blocks, bytes_read, reads, size;

    /* I/O engine state (reader thread only) */
    int inflight;
    struct slot **psync_done; /* psync: completed reads awaiting poll */
    int npsync_done;
    struct uring uring;       /* io_uring mode on a seekable source */
    bool uring_ready;
    int uring_pending;        /* prepared SQEs not yet submitted */

    /* threads */
    pthread_t reader;
    pthread_t *workers;
    int nworkers;
    bool reader_started;
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
    return atomic_load_explicit(&j->cancel, memory_order_relaxed) || atomic_load_explicit(&j->err, memory_order_relaxed);
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

static bool is_null_digest(const char *name)
{
    return name && strcmp(name, "null") == 0;
}

static const EVP_MD *fetch_md(const char *name, EVP_MD **owned)
{
    const EVP_MD *md;
    /* An explicitly fetched digest skips the implicit fetch on every DigestInit. */
    *owned = EVP_MD_fetch(NULL, name, NULL);
    if (*owned)
        return *owned;
    ERR_clear_error();
    md = EVP_get_digestbyname(name);
    ERR_clear_error();
    return md;
}

bool blksum_digest_known(const char *name)
{
    EVP_MD *owned;
    const EVP_MD *md;
    if (!name || !*name || strlen(name) >= BLKSUM_MAX_DIGEST_NAME)
        return false;
    if (is_null_digest(name))
        return true;
    md = fetch_md(name, &owned);
    EVP_MD_free(owned);
    return md != NULL;
}

bool blksum_have_io_uring(void)
{
    return uring_probe(NULL, 0) == 0;
}

const char *blksum_strerror(int err)
{
    if (err == -BLKSUM_EDIGEST)
        return "unknown digest name (see --list-digests)";
    if (err == -ECANCELED)
        return "interrupted";
    if (err == -ENODATA)
        return "the image shrank while it was read";
    return strerror(err < 0 ? -err : err);
}

void blksum_opts_init(struct blksum_opts *o)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    memset(o, 0, sizeof(*o));
    o->digest = BLKSUM_DEFAULT_DIGEST;
    o->threads = n > 0 ? (int)(n < BLKSUM_MAX_THREADS ? n : BLKSUM_MAX_THREADS) : 1;
    o->queue_depth = BLKSUM_DEFAULT_QUEUE_DEPTH;
    o->read_size = BLKSUM_DEFAULT_READ_SIZE;
    o->io = BLKSUM_IO_PSYNC;
}

int blksum_opts_check(const struct blksum_opts *o, char *msg, size_t msglen)
{
    char dummy[1];
    if (!msg) {
        msg = dummy;
        msglen = sizeof(dummy);
    }
    const char *d = o->digest ? o->digest : BLKSUM_DEFAULT_DIGEST;
    if (!blksum_digest_known(d)) {
        snprintf(msg, msglen, "unknown digest %.64s (see --list-digests)", d);
        return -BLKSUM_EDIGEST;
    }
    if (o->threads < 1 || o->threads > BLKSUM_MAX_THREADS) {
        snprintf(msg, msglen, "threads must be 1..%d, got %d", BLKSUM_MAX_THREADS, o->threads);
        return -EINVAL;
    }
    if (o->queue_depth < 1 || o->queue_depth > BLKSUM_MAX_QUEUE_DEPTH) {
        snprintf(msg, msglen, "queue depth must be 1..%d, got %d", BLKSUM_MAX_QUEUE_DEPTH, o->queue_depth);
        return -EINVAL;
    }
    if (o->read_size < BLKSUM_BLOCK_SIZE || o->read_size > BLKSUM_MAX_READ_SIZE ||
        o->read_size % BLKSUM_BLOCK_SIZE) {
        snprintf(msg, msglen, "read size must be a multiple of %u bytes between %u and %u, got %zu",
                 BLKSUM_BLOCK_SIZE, BLKSUM_BLOCK_SIZE, BLKSUM_MAX_READ_SIZE, o->read_size);
        return -EINVAL;
    }
    if (o->io != BLKSUM_IO_PSYNC && o->io != BLKSUM_IO_IO_URING && o->io != BLKSUM_IO_ENGINE) {
        snprintf(msg, msglen, "unknown I/O mode %d", (int)o->io);
        return -EINVAL;
    }
    if (o->io == BLKSUM_IO_IO_URING) {
        int rc = uring_probe(msg, msglen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- digests list */

struct name_list {
    char **names;
    size_t n, cap;
};

static void add_name(const char *name, void *arg)
{
    struct name_list *l = arg;
    char buf[BLKSUM_MAX_DIGEST_NAME];
    size_t i, len = strlen(name);
    if (len == 0 || len >= sizeof(buf) || (name[0] >= '0' && name[0] <= '9'))
        return; /* skip OIDs */
    for (i = 0; i <= len; i++)
        buf[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] - 'A' + 'a' : name[i]);
    for (i = 0; i < l->n; i++)
        if (strcmp(l->names[i], buf) == 0)
            return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **p = realloc(l->names, cap * sizeof(*p));
        if (!p)
            return;
        l->names = p;
        l->cap = cap;
    }
    l->names[l->n] = strdup(buf);
    if (l->names[l->n])
        l->n++;
}

static void each_md(EVP_MD *md, void *arg)
{
    EVP_MD_names_do_all(md, add_name, arg);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int blksum_list_digests(void (*fn)(const char *name, void *arg), void *arg)
{
    struct name_list l = {0};
    size_t i;
    int count = 0;
    add_name("null", &l);
    EVP_MD_do_all_provided(NULL, each_md, &l);
    qsort(l.names, l.n, sizeof(*l.names), cmp_str);
    for (i = 0; i < l.n; i++) {
        if (blksum_digest_known(l.names[i])) {
            fn(l.names[i], arg);
            count++;
        }
        free(l.names[i]);
    }
    free(l.names);
    return count;
}

/* ---------------------------------------------------------------- I/O engines */

/* psync: the read happens inside submit (the reader thread), completion is immediate. */
static int read_full(struct blksum_job *j, struct slot *s)
{
    const struct blksum_source *src = j->src;
    while (s->filled < s->len) {
        ssize_t r;
        if (src->seekable)
            r = pread(src->fd, s->buf + s->filled, s->len - s->filled, (off_t)(s->off + s->filled));
        else
            r = read(src->fd, s->buf + s->filled, s->len - s->filled);
        if (r < 0) {
            if (errno == EINTR) {
                if (should_stop(j))
                    return -ECANCELED;
                continue;
            }
            return -errno;
        }
        if (r == 0)
            return src->seekable ? -ENODATA : 0; /* pipe: EOF ends the image */
        s->filled += (size_t)r;
    }
    return 0;
}

static int io_submit_one(struct blksum_job *j, struct slot *s)
{
    j->reads++;
    switch (j->opts.io) {
    case BLKSUM_IO_IO_URING:
        if (j->src->seekable) {
            struct io_uring_sqe *sqe = uring_get_sqe(&j->uring);
            if (!sqe)
                return -EBUSY;
            uring_prep_rw(sqe, IORING_OP_READ, j->src->fd, s->buf + s->filled, (unsigned)(s->len - s->filled),
                          s->off + s->filled, 0, (uint64_t)(uintptr_t)s);
            j->uring_pending++;
            j->inflight++;
            return 0;
        }
        /* a pipe has no offsets: fall through to sequential reads */
        /* fall through */
    case BLKSUM_IO_PSYNC: {
        int rc = read_full(j, s);
        if (rc < 0)
            return rc;
        j->psync_done[j->npsync_done++] = s;
        j->inflight++;
        return 0;
    }
    case BLKSUM_IO_ENGINE: {
        const struct blksum_engine *e = &j->src->engine;
        int rc = e->submit(e->ctx, s->buf, s->off, s->len, s);
        if (rc < 0)
            return rc;
        j->inflight++;
        return 0;
    }
    }
    return -EINVAL;
}

static int uring_flush(struct blksum_job *j)
{
    while (j->uring_pending > 0) {
        int rc = uring_submit(&j->uring, 0);
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            return rc;
        j->uring_pending -= rc;
        if (rc == 0)
            return -EIO;
    }
    return 0;
}

/* Collect completed reads: fills done[], returns their count or -errno. A short read is
 * resubmitted for its remainder and not reported. */
static int io_poll(struct blksum_job *j, struct slot **done, int max, bool wait)
{
    int n = 0;
    if (j->npsync_done) {
        for (int i = 0; i < j->npsync_done && n < max; i++)
            done[n++] = j->psync_done[i];
        j->inflight -= n;
        j->npsync_done = 0;
        return n;
    }
    if (j->inflight == 0)
        return 0;
    switch (j->opts.io) {
    case BLKSUM_IO_IO_URING: {
        int rc = uring_flush(j);
        if (rc < 0)
            return rc;
        if (wait) {
            do
                rc = uring_wait_cqe(&j->uring);
            while (rc == -EINTR);
            if (rc < 0)
                return rc;
        } else if (uring_cq_ready(&j->uring) == 0 && uring_needs_enter(&j->uring)) {
            uring_get_events(&j->uring);
        }
        while (n < max && uring_cq_ready(&j->uring) > 0) {
            const struct io_uring_cqe *cqe = uring_cqe_at(&j->uring, 0);
            struct slot *s = (struct slot *)(uintptr_t)cqe->user_data;
            int res = cqe->res;
            uring_cq_advance(&j->uring, 1);
            j->inflight--;
            if (res == -EINTR || res == -EAGAIN) {
                res = 0; /* retried below as a short read */
            } else if (res < 0 || (res == 0 && s->filled < s->len)) {
                set_err(j, res < 0 ? res : -ENODATA); /* the slot stays out of the pipeline */
                continue;
            }
            s->filled += (size_t)res;
            if (s->filled < s->len) {
                if (should_stop(j))
                    continue;
                j->reads--; /* a continuation, not a new request */
                rc = io_submit_one(j, s);
                if (rc == 0)
                    rc = uring_flush(j);
                if (rc < 0)
                    return rc;
                continue;
            }
            done[n++] = s;
        }
        return n;
    }
    case BLKSUM_IO_ENGINE: {
        const struct blksum_engine *e = &j->src->engine;
        void *tags[BLKSUM_MAX_QUEUE_DEPTH];
        int results[BLKSUM_MAX_QUEUE_DEPTH];
        int got = e->poll(e->ctx, tags, results, max < j->inflight ? max : j->inflight, wait);
        if (got < 0)
            return got;
        for (int i = 0; i < got; i++) {
            struct slot *s = tags[i];
            j->inflight--;
            if (results[i] < 0) {
                set_err(j, results[i]);
                continue;
            }
            s->filled = s->len;
            done[n++] = s;
        }
        return n;
    }
    default:
        return 0;
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
        off_t d = lseek(src->fd, (off_t)off, SEEK_DATA);
        if (d < 0 && errno != ENXIO)
            return -errno;
        if (d < 0 || (uint64_t)d >= size) {
            p->region_hole = true;
            p->region_end = size;
        } else if ((uint64_t)d > off) {
            p->region_hole = true;
            p->region_end = (uint64_t)d;
        } else {
            off_t h = lseek(src->fd, (off_t)off, SEEK_HOLE);
            if (h < 0)
                return -errno;
            p->region_hole = false;
            p->region_end = (uint64_t)h > size ? size : (uint64_t)h;
        }
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
    uint32_t max_inflight = j->src->engine.max_inflight;
    int rc;

    for (;;) {
        bool submitted = false;
        if (should_stop(j))
            break;
        /* submit while a slot is free */
        while (!eof && !should_stop(j)) {
            struct slot *s;
            if (j->opts.io == BLKSUM_IO_ENGINE && max_inflight && (uint32_t)j->inflight >= max_inflight)
                break;
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
                if (rc < 0) {
                    set_err(j, rc);
                    /* the slot never reached the I/O; give it back so teardown sees it */
                    break;
                }
            }
            if (!j->src->seekable && s->filled < s->len) {
                /* a pipe at EOF: the chunk is the tail (possibly empty) */
                s->len = s->filled;
                eof = true;
            }
            seq++;
            off += s->len;
            submitted = true;
            if (j->src->seekable && off >= j->size)
                eof = true;
            if (j->npsync_done)
                break; /* hand a finished psync read to the hash threads at once */
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
                    j->bytes_read += done[i]->filled;
                    if (done[i]->len == 0) {
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
    reader_run(j);
    /* stop the hash threads once the queue is drained */
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_broadcast(&j->work_cv);
    pthread_mutex_unlock(&j->mu);
    for (int i = 0; i < j->nworkers; i++)
        pthread_join(j->workers[i], NULL);
    j->nworkers = 0;

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
        for (int i = 0; i < j->nslots; i++) {
            struct slot *s = &j->slots[i];
            if (s->buf) {
                if (j->opts.io == BLKSUM_IO_ENGINE && j->src->engine.free_buf)
                    j->src->engine.free_buf(j->src->engine.ctx, s->buf, j->opts.read_size);
                else
                    free(s->buf);
            }
            free(s->hashes);
        }
    }
    if (j->uring_ready)
        uring_exit(&j->uring);
    free(j->slots);
    free(j->ring);
    free(j->psync_done);
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
    if (src->fd < 0 && o->io != BLKSUM_IO_ENGINE)
        return -EBADF;
    if (o->io == BLKSUM_IO_ENGINE && (!src->engine.submit || !src->engine.poll || !src->seekable))
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
    case BLKSUM_IO_PSYNC: j->io_name = src->seekable ? "psync" : "read"; break;
    case BLKSUM_IO_IO_URING: j->io_name = src->seekable ? "io_uring" : "read"; break;
    case BLKSUM_IO_ENGINE: j->io_name = src->engine.name ? src->engine.name : "engine"; break;
    }

    if (!is_null_digest(j->opts.digest)) {
        static const unsigned char zeros[BLKSUM_BLOCK_SIZE];
        unsigned len = 0;
        j->md = fetch_md(j->opts.digest, &j->md_fetched);
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
        if (!j->outer || !EVP_Digest(zeros, sizeof(zeros), j->zero_hash, &len, j->md, NULL) ||
            len != j->md_len || !EVP_DigestInit_ex(j->outer, j->md, NULL)) {
            rc = -ENOMEM;
            goto fail;
        }
    }

    j->slots = calloc((size_t)j->nslots, sizeof(*j->slots));
    j->ring = calloc((size_t)j->nslots, sizeof(*j->ring));
    j->psync_done = calloc((size_t)j->nslots, sizeof(*j->psync_done));
    j->workers = calloc((size_t)o->threads, sizeof(*j->workers));
    if (!j->slots || !j->ring || !j->psync_done || !j->workers) {
        rc = -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < j->nslots; i++) {
        struct slot *s = &j->slots[i];
        if (o->io == BLKSUM_IO_ENGINE && src->engine.alloc_buf)
            s->buf = src->engine.alloc_buf(src->engine.ctx, o->read_size);
        else if (posix_memalign((void **)&s->buf, BLKSUM_BUF_ALIGN, o->read_size))
            s->buf = NULL;
        if (!s->buf) {
            rc = -ENOMEM;
            goto fail;
        }
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
    if (o->io == BLKSUM_IO_IO_URING && src->seekable) {
        /* Set up here, used by the reader thread: not a single-issuer ring. */
        rc = uring_init(&j->uring, (unsigned)j->nslots, 0, false, NULL, 0);
        if (rc < 0)
            goto fail;
        j->uring_ready = true;
    }

    clock_gettime(CLOCK_MONOTONIC, &j->t0);
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
        rc = timeout_ms < 0 ? pthread_cond_wait(&j->done_cv, &j->mu)
                            : pthread_cond_timedwait(&j->done_cv, &j->mu, &dl);
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

void blksum_hex(const struct blksum_result *res, char *out, size_t outlen)
{
    static const char digits[] = "0123456789abcdef";
    size_t k = 0;
    for (unsigned i = 0; i < res->md_len && k + 2 < outlen; i++) {
        out[k++] = digits[res->md[i] >> 4];
        out[k++] = digits[res->md[i] & 0xfu];
    }
    if (outlen)
        out[k < outlen ? k : outlen - 1] = '\0';
}
