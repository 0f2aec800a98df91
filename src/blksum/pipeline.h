/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pipeline.h — the state of one checksum job, shared by the reader (blksum.c) and the hash threads
 * (hash.c); internal to libblksum.
 *
 * A job has queue_depth slots, each one chunk of read_size bytes: FREE -> IO (the reader) -> HASH
 * (the hash threads, by pieces) -> DONE -> combined in image order -> FREE. Everything marked "under
 * mu" is read and written with the job mutex held.
 *
 * Key functions (hash.c): blksum_queue_work_locked() hands a read chunk to the hash threads,
 * blksum_worker_main() is a hash thread, blksum_combine_locked() feeds the finished chunks that are
 * next in order into the outer hash and frees their slots (waking the reader), blksum_hash_blocks()
 * hashes blocks of a chunk on the calling thread; where the reader hashes too (NBD),
 * blksum_share_work_locked() wakes the hash threads a queued chunk needs and
 * blksum_reader_hash_locked() hashes one piece on the reader.
 * Caveats: OpenSSL 3 (blksum_internal.h); not a public interface.
 */
#ifndef NVMELAB_BLKSUM_PIPELINE_H
#define NVMELAB_BLKSUM_PIPELINE_H

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "blksum/blksum.h"
#include "engine/backend.h"

enum slot_state { SLOT_FREE = 0, SLOT_IO, SLOT_HASH, SLOT_DONE };

struct slot {
    unsigned char *buf;      /* read_size bytes of I/O memory */
    unsigned char *hashes;   /* blocks_per_chunk * md_len */
    uint64_t seq;            /* position in the image's chunk order */
    uint64_t off;            /* image offset of the chunk */
    size_t len;              /* bytes of image the chunk covers */
    size_t filled;           /* bytes read so far (short reads are resumed) */
    uint64_t hole_blocks;    /* > 0: a hole chunk of this many full zero blocks, no buffer */
    uint32_t pieces;         /* hash work items the chunk is cut into (under mu) */
    uint32_t piece_blocks;   /* blocks per piece (the last one may have fewer) */
    uint32_t next_piece;     /* the next one a hash thread takes (under mu) */
    atomic_uint pieces_left; /* not yet hashed: whoever hashes the last one finishes the chunk */
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
    int idle_workers; /* hash threads waiting for work */
    /* The reader hashes too while it has no read to issue or reap (NBD, hash.c): then chunks are cut
     * into one piece per block, and at most hash_limit threads, the reader included, hash at once. */
    bool reader_hashes;
    int hashing;            /* threads hashing a piece now (kept only when reader_hashes) */
    int hash_limit;         /* at most this many hash at once: opts.threads (+1 with opts.reader_joins) */
    EVP_MD_CTX *reader_ctx; /* the reader's hash context (reader thread only) */
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
    bool io_waiting;    /* under mu: the reader waits in kick() for a read, no buffer free (ops->wake) */

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

static inline void blksum_set_err(struct blksum_job *j, int e)
{
    int zero = 0;
    atomic_compare_exchange_strong(&j->err, &zero, e);
}

static inline bool blksum_should_stop(struct blksum_job *j)
{
    return atomic_load_explicit(&j->cancel, memory_order_relaxed) ||
           atomic_load_explicit(&j->err, memory_order_relaxed);
}

/* Under mu: queue read chunk s for the hash threads, cut into one piece per idle hash thread (per block
 * when reader_hashes: then nobody is woken here, see blksum_share_work_locked). */
void blksum_queue_work_locked(struct blksum_job *j, struct slot *s);
/* Under mu, reader_hashes only: wake the idle hash threads the queued pieces need, leaving one
 * thread's share to the reader when it will hash (reader_helps). */
void blksum_share_work_locked(struct blksum_job *j, bool reader_helps);
/* Under mu, reader_hashes only: the reader hashes one queued piece (unlocking mu meanwhile) when fewer
 * than hash_limit threads hash; false when it did not (nothing queued, or enough hash threads); true
 * also when it failed (the job's error is set). */
bool blksum_reader_hash_locked(struct blksum_job *j);
/* Under mu: feed every finished chunk that is next in order, free its slot, wake the reader. */
void blksum_combine_locked(struct blksum_job *j);
/* A hash thread (pthread start routine, arg = the job). */
void *blksum_worker_main(void *arg);
/* Hash blocks [b0, b1) of chunk s with ctx; 0 or -EIO. */
int blksum_hash_blocks(struct blksum_job *j, struct slot *s, EVP_MD_CTX *ctx, size_t b0, size_t b1);
/* Blocks (the last one possibly short) in chunk s. */
size_t blksum_chunk_blocks(const struct slot *s);

#endif /* NVMELAB_BLKSUM_PIPELINE_H */
