/* SPDX-License-Identifier: BSD-3-Clause */
/* hash.c — blksum's hash threads and the in-order combine (pipeline.h): read chunks are queued in
 * pieces, hashed block by block (a full zero block by the precomputed zero hash), and whoever finishes
 * a chunk feeds every finished chunk that is next in order into the outer hash and frees its slot.
 * In NBD mode the reader hashes pieces too while it has nothing to read or reap (reader_hashes), at
 * most hash_limit threads hashing at once (src/README.md, blksum's third round). */
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "blksum/blksum_internal.h"
#include "blksum/pipeline.h"

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

static void feed_chunk(struct blksum_job *j, struct slot *s)
{
    if (!j->md || atomic_load(&j->err))
        return;
    if (s->hole_blocks) {
        for (uint64_t b = 0; b < s->hole_blocks; b++)
            EVP_DigestUpdate(j->outer, j->zero_hash, j->md_len);
    } else {
        EVP_DigestUpdate(j->outer, s->hashes, blksum_chunk_blocks(s) * j->md_len);
    }
}

void blksum_combine_locked(struct blksum_job *j)
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
    if (freed) {
        pthread_cond_broadcast(&j->free_cv);
        if (j->io_waiting) { /* the reader sleeps on a read: it has a buffer to fill now */
            j->io_waiting = false;
            j->t->ops->wake(j->ch);
        }
    }
}

/* Hash blocks [b0, b1) of chunk s into its hash slots (zero blocks by the precomputed zero hash). */
int blksum_hash_blocks(struct blksum_job *j, struct slot *s, EVP_MD_CTX *ctx, size_t b0, size_t b1)
{
    uint64_t zeros = 0;
    for (size_t b = b0; b < b1; b++) {
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
    atomic_fetch_add(&j->zero_blocks, zeros);
    return 0;
}

size_t blksum_chunk_blocks(const struct slot *s)
{
    return (s->len + BLKSUM_BLOCK_SIZE - 1) / BLKSUM_BLOCK_SIZE;
}

/* Under mu: take the next piece of the first queued chunk (NULL when none is queued). */
static struct slot *take_piece_locked(struct blksum_job *j, size_t *piece)
{
    struct slot *s = j->work_head;
    if (!s)
        return NULL;
    *piece = s->next_piece++;
    if (s->next_piece == s->pieces) {
        j->work_head = s->next;
        if (!j->work_head)
            j->work_tail = NULL;
    }
    if (j->reader_hashes)
        j->hashing++;
    return s;
}

/* Unlocked: hash piece of chunk s with ctx (none for the null digest). */
static void hash_piece(struct blksum_job *j, struct slot *s, size_t piece, EVP_MD_CTX *ctx)
{
    if (j->md && !blksum_should_stop(j)) {
        size_t b0 = piece * s->piece_blocks, b1 = b0 + s->piece_blocks, nb = blksum_chunk_blocks(s);
        int rc = ctx ? blksum_hash_blocks(j, s, ctx, b0, b1 < nb ? b1 : nb) : -ENOMEM;
        if (rc < 0)
            blksum_set_err(j, rc);
    }
}

/* Under mu: a piece of s is hashed; whoever hashed the last one finishes the chunk. */
static void piece_done_locked(struct blksum_job *j, struct slot *s)
{
    if (j->reader_hashes)
        j->hashing--;
    if (atomic_fetch_sub(&s->pieces_left, 1) == 1) {
        s->state = SLOT_DONE;
        blksum_combine_locked(j);
    }
}

/* A chunk is hashed in pieces, one per hash thread idle when it is queued (pipeline.h): one chunk in
 * flight (a low queue depth) is hashed by every thread at once, as blkhash's per-block queue does, while
 * with a backlog each thread takes whole chunks and nobody is woken for nothing. When the reader hashes
 * too (reader_hashes), every piece is one block, and a hash thread waits while hash_limit threads
 * (the reader one of them) hash. */
void *blksum_worker_main(void *arg)
{
    struct blksum_job *j = arg;
    EVP_MD_CTX *ctx = j->md ? EVP_MD_CTX_new() : NULL;
    if (j->md && !ctx)
        blksum_set_err(j, -ENOMEM);
    for (;;) {
        struct slot *s;
        size_t piece = 0;
        pthread_mutex_lock(&j->mu);
        while ((!j->work_head || j->hashing >= j->hash_limit) && !j->stop) {
            j->idle_workers++;
            pthread_cond_wait(&j->work_cv, &j->mu);
            j->idle_workers--;
        }
        s = take_piece_locked(j, &piece);
        if (!s) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        pthread_mutex_unlock(&j->mu);

        hash_piece(j, s, piece, ctx);
        if (j->reader_hashes) {
            pthread_mutex_lock(&j->mu);
            piece_done_locked(j, s);
            pthread_mutex_unlock(&j->mu);
        } else if (atomic_fetch_sub(&s->pieces_left, 1) == 1) {
            pthread_mutex_lock(&j->mu);
            s->state = SLOT_DONE;
            blksum_combine_locked(j);
            pthread_mutex_unlock(&j->mu);
        }
    }
    EVP_MD_CTX_free(ctx);
    return NULL;
}

void blksum_queue_work_locked(struct blksum_job *j, struct slot *s)
{
    s->state = SLOT_HASH;
    size_t nb = blksum_chunk_blocks(s), ways = j->idle_workers > 1 ? (size_t)j->idle_workers : 1;
    if (j->reader_hashes)
        ways = nb; /* one block a piece: whoever is free takes the next, the reader too */
    s->piece_blocks = (uint32_t)((nb + ways - 1) / ways);
    s->pieces = (uint32_t)((nb + s->piece_blocks - 1) / s->piece_blocks);
    s->next_piece = 0;
    atomic_store(&s->pieces_left, s->pieces);
    s->next = NULL;
    if (j->work_tail)
        j->work_tail->next = s;
    else
        j->work_head = s;
    j->work_tail = s;
    if (j->reader_hashes)
        return; /* blksum_share_work_locked decides whom to wake */
    if (s->pieces > 1)
        pthread_cond_broadcast(&j->work_cv);
    else
        pthread_cond_signal(&j->work_cv);
}

void blksum_share_work_locked(struct blksum_job *j, bool reader_helps)
{
    size_t queued = 0;
    for (struct slot *s = j->work_head; s && queued < (size_t)j->idle_workers; s = s->next)
        queued += s->pieces - s->next_piece;
    int want = j->hash_limit - j->hashing - (reader_helps ? 1 : 0);
    if (want > j->idle_workers)
        want = j->idle_workers;
    if ((size_t)want > queued)
        want = (int)queued;
    if (want >= j->idle_workers && want > 1)
        pthread_cond_broadcast(&j->work_cv);
    else
        for (int i = 0; i < want; i++)
            pthread_cond_signal(&j->work_cv);
}

bool blksum_reader_hash_locked(struct blksum_job *j)
{
    size_t piece = 0;
    if (!j->work_head || j->hashing >= j->hash_limit)
        return false;
    if (j->md && !j->reader_ctx && !(j->reader_ctx = EVP_MD_CTX_new())) {
        blksum_set_err(j, -ENOMEM);
        return true; /* the caller sees the error before it would wait */
    }
    struct slot *s = take_piece_locked(j, &piece);
    pthread_mutex_unlock(&j->mu);
    hash_piece(j, s, piece, j->reader_ctx);
    pthread_mutex_lock(&j->mu);
    piece_done_locked(j, s);
    return true;
}
