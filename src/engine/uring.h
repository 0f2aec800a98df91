/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uring.h — a minimal io_uring ring over the kernel's own ABI (no liburing).
 *
 * Purpose: the one io_uring module of nvmelab. The kernel I/O paths of the perf
 * engine (kio.c) and blksum's io_uring reader use it; nothing else talks to the
 * io_uring system calls.
 *
 * Key functions:
 *   uring_probe()          can this process create a ring? (-errno + reason)
 *   uring_init()           io_uring_setup + mmap of the SQ/CQ rings and the SQE array;
 *                          asks for SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN when
 *                          the caller is the only thread that will use the ring and
 *                          falls back one step at a time on kernels that refuse them
 *   uring_exit()           unmap and close: exactly what uring_init() set up
 *   uring_get_sqe()        next free SQE (zeroed) or NULL when the SQ ring is full
 *   uring_prep_rw()        fill an SQE for a read/write/read_fixed/write_fixed
 *   uring_submit()         publish queued SQEs and enter the kernel, optionally
 *                          waiting for wait_nr completions (submit-and-wait)
 *   uring_cq_ready(), uring_cqe_at(), uring_cq_advance()
 *                          consume completions from the CQ ring without a system call
 *   uring_wait_cqe()       block until at least one completion is posted
 *   uring_needs_enter(), uring_get_events()
 *                          the kernel holds completions (CQ overflow, deferred task
 *                          work): enter it so that it posts them
 *   uring_register_files(), uring_register_buffers() and their unregister twins
 *
 * Memory ordering: the SQ tail and the CQ head are ours (store-release after the
 * SQEs are written / the CQEs are read); the SQ head and CQ tail are the kernel's
 * (load-acquire before reading what they cover). The ring flags are read relaxed.
 *
 * Caveats: one thread per ring (no locking). SQPOLL and IOPOLL are not used.
 * io_uring may be disabled by the sysctl kernel.io_uring_disabled or blocked by a
 * seccomp filter (containers): uring_probe() and uring_init() say so by name.
 */
#ifndef NVMELAB_ENGINE_URING_H
#define NVMELAB_ENGINE_URING_H

#include <linux/io_uring.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Older kernel headers lack the newer setup flags: the values are ABI. */
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG (1U << 9)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif
#ifndef IORING_SQ_TASKRUN
#define IORING_SQ_TASKRUN (1U << 2)
#endif

#define URING_PROBE_ENTRIES 2u /* ring size used by uring_probe() */

struct uring {
    int fd;               /* -1 when not set up */
    unsigned setup_flags; /* the flags the kernel accepted */
    unsigned features;    /* IORING_FEAT_* reported by the kernel */
    /* SQ ring (kernel memory) */
    unsigned *sq_khead, *sq_ktail, *sq_kflags, *sq_kdropped;
    unsigned sq_mask, sq_entries;
    struct io_uring_sqe *sqes;
    unsigned sqe_tail; /* SQEs handed out by uring_get_sqe() */
    unsigned sqe_head; /* SQEs already published to the kernel */
    /* CQ ring (kernel memory) */
    unsigned *cq_khead, *cq_ktail, *cq_koverflow;
    unsigned cq_mask, cq_entries;
    struct io_uring_cqe *cqes;
    /* mappings */
    void *sq_ring, *cq_ring;
    size_t sq_ring_bytes, cq_ring_bytes, sqes_bytes;
};

/* 0 when this process can create an io_uring ring, else -errno and the reason
 * (naming kernel.io_uring_disabled or a seccomp filter) in err. */
int uring_probe(char *err, size_t errlen);

/* Set up a ring of `entries` SQEs (rounded up by the kernel to a power of two) and
 * cq_entries CQEs (0 = the kernel's default, twice entries). single_thread: the
 * calling thread alone will submit and reap, so SINGLE_ISSUER and DEFER_TASKRUN may
 * be used. Returns 0 or -errno with the reason in err (err may be NULL). */
int uring_init(struct uring *r, unsigned entries, unsigned cq_entries, bool single_thread, char *err, size_t errlen);
void uring_exit(struct uring *r);

/* Registered file table / buffers: 0 or -errno (the caller falls back to plain fds
 * and buffers on failure, e.g. a RLIMIT_MEMLOCK too small on old kernels). */
int uring_register_files(struct uring *r, const int *fds, unsigned n);
int uring_unregister_files(struct uring *r);
int uring_register_buffers(struct uring *r, const struct iovec *iov, unsigned n);
int uring_unregister_buffers(struct uring *r);

/* The next SQE, zeroed, or NULL when every SQ slot is queued or in the kernel. */
struct io_uring_sqe *uring_get_sqe(struct uring *r);

/* op: IORING_OP_READ, IORING_OP_WRITE, IORING_OP_READ_FIXED, IORING_OP_WRITE_FIXED.
 * buf_index is used by the _FIXED ops only. */
static inline void uring_prep_rw(struct io_uring_sqe *sqe, uint8_t op, int fd, void *buf, unsigned len, uint64_t off,
                                 unsigned buf_index, uint64_t user_data)
{
    sqe->opcode = op;
    sqe->fd = fd;
    sqe->addr = (uint64_t)(uintptr_t)buf;
    sqe->len = len;
    sqe->off = off;
    if (op == IORING_OP_READ_FIXED || op == IORING_OP_WRITE_FIXED)
        sqe->buf_index = (uint16_t)buf_index;
    sqe->user_data = user_data;
}

/* SQEs handed out but not yet published by uring_submit(). */
static inline unsigned uring_sq_pending(const struct uring *r)
{
    return r->sqe_tail - r->sqe_head;
}

/* Publish the queued SQEs and enter the kernel to submit them; with wait_nr > 0 also
 * wait until that many completions are posted. Enters the kernel without SQEs when
 * it holds completions for us. Returns the number of SQEs submitted or -errno
 * (-EINTR, -EAGAIN and -EBUSY are the caller's to retry). */
int uring_submit(struct uring *r, unsigned wait_nr);

/* Completions posted and not yet consumed. */
static inline unsigned uring_cq_ready(const struct uring *r)
{
    return __atomic_load_n(r->cq_ktail, __ATOMIC_ACQUIRE) - *r->cq_khead;
}

/* The i-th unconsumed completion (i < uring_cq_ready()). */
static inline const struct io_uring_cqe *uring_cqe_at(const struct uring *r, unsigned i)
{
    return &r->cqes[(*r->cq_khead + i) & r->cq_mask];
}

/* Hand n consumed CQEs back to the kernel. */
static inline void uring_cq_advance(struct uring *r, unsigned n)
{
    __atomic_store_n(r->cq_khead, *r->cq_khead + n, __ATOMIC_RELEASE);
}

/* True when the kernel holds completions it has not posted yet (CQ overflow, or
 * deferred task work flagged by TASKRUN_FLAG): uring_get_events() posts them. */
static inline bool uring_needs_enter(const struct uring *r)
{
    return (__atomic_load_n(r->sq_kflags, __ATOMIC_RELAXED) & (IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN)) != 0;
}

/* Enter the kernel only to let it post the completions it holds: 0 or -errno. */
int uring_get_events(struct uring *r);

/* Wait until at least one completion is posted (submitting nothing): 0 or -errno. */
int uring_wait_cqe(struct uring *r);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_URING_H */
