/* SPDX-License-Identifier: BSD-3-Clause */
/* uring.c — io_uring through its three system calls and mmap'd rings (see uring.h). */
#include "engine/uring.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define URING_SYSCTL "/proc/sys/kernel/io_uring_disabled"

static int sys_setup(unsigned entries, struct io_uring_params *p)
{
    long rc = syscall(SYS_io_uring_setup, entries, p);
    return rc < 0 ? -errno : (int)rc;
}

static int sys_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags)
{
    long rc = syscall(SYS_io_uring_enter, fd, to_submit, min_complete, flags, NULL, (size_t)0);
    return rc < 0 ? -errno : (int)rc;
}

static int sys_register(int fd, unsigned op, const void *arg, unsigned nr)
{
    long rc = syscall(SYS_io_uring_register, fd, op, arg, nr);
    return rc < 0 ? -errno : (int)rc;
}

/* Say why io_uring_setup failed, naming the sysctl or seccomp where that is the cause. */
static void explain(int rc, char *err, size_t errlen)
{
    if (!err || !errlen)
        return;
    if (rc == -ENOSYS) {
        snprintf(err, errlen, "io_uring is not available: this kernel has no io_uring_setup (ENOSYS)");
        return;
    }
    if (rc == -EPERM || rc == -EACCES) {
        int level = -1;
        FILE *f = fopen(URING_SYSCTL, "r");
        if (f) {
            if (fscanf(f, "%d", &level) != 1)
                level = -1;
            fclose(f);
        }
        if (level > 0)
            snprintf(err, errlen,
                     "io_uring is disabled by the sysctl kernel.io_uring_disabled=%d "
                     "(0 enables it; 1 allows the io_uring_group only)",
                     level);
        else
            snprintf(err, errlen,
                     "io_uring is not permitted for this process (%s): kernel.io_uring_disabled=%d, "
                     "so a seccomp filter (e.g. a container's default profile) blocks it",
                     strerror(-rc), level);
        return;
    }
    snprintf(err, errlen, "io_uring: cannot set up a ring: %s", strerror(-rc));
}

int uring_probe(char *err, size_t errlen)
{
    struct uring r;
    int rc = uring_init(&r, URING_PROBE_ENTRIES, 0, false, err, errlen);
    if (rc == 0)
        uring_exit(&r);
    return rc;
}

static void unmap_all(struct uring *r)
{
    if (r->sqes && r->sqes != MAP_FAILED)
        munmap(r->sqes, r->sqes_bytes);
    if (r->cq_ring && r->cq_ring != MAP_FAILED && r->cq_ring != r->sq_ring)
        munmap(r->cq_ring, r->cq_ring_bytes);
    if (r->sq_ring && r->sq_ring != MAP_FAILED)
        munmap(r->sq_ring, r->sq_ring_bytes);
    r->sqes = NULL;
    r->sq_ring = r->cq_ring = NULL;
}

static int map_rings(struct uring *r, const struct io_uring_params *p)
{
    r->sq_ring_bytes = p->sq_off.array + p->sq_entries * sizeof(unsigned);
    r->cq_ring_bytes = p->cq_off.cqes + p->cq_entries * sizeof(struct io_uring_cqe);
    if (p->features & IORING_FEAT_SINGLE_MMAP) {
        if (r->cq_ring_bytes > r->sq_ring_bytes)
            r->sq_ring_bytes = r->cq_ring_bytes;
        r->cq_ring_bytes = r->sq_ring_bytes;
    }
    r->sq_ring =
        mmap(NULL, r->sq_ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    if (r->sq_ring == MAP_FAILED)
        return -errno;
    if (p->features & IORING_FEAT_SINGLE_MMAP) {
        r->cq_ring = r->sq_ring;
    } else {
        r->cq_ring =
            mmap(NULL, r->cq_ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
        if (r->cq_ring == MAP_FAILED)
            return -errno;
    }
    r->sqes_bytes = p->sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(NULL, r->sqes_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED)
        return -errno;

    char *sq = r->sq_ring, *cq = r->cq_ring;
    r->sq_khead = (unsigned *)(sq + p->sq_off.head);
    r->sq_ktail = (unsigned *)(sq + p->sq_off.tail);
    r->sq_kflags = (unsigned *)(sq + p->sq_off.flags);
    r->sq_kdropped = (unsigned *)(sq + p->sq_off.dropped);
    r->sq_mask = *(unsigned *)(sq + p->sq_off.ring_mask);
    r->sq_entries = *(unsigned *)(sq + p->sq_off.ring_entries);
    r->cq_khead = (unsigned *)(cq + p->cq_off.head);
    r->cq_ktail = (unsigned *)(cq + p->cq_off.tail);
    r->cq_koverflow = (unsigned *)(cq + p->cq_off.overflow);
    r->cq_mask = *(unsigned *)(cq + p->cq_off.ring_mask);
    r->cq_entries = *(unsigned *)(cq + p->cq_off.ring_entries);
    r->cqes = (struct io_uring_cqe *)(cq + p->cq_off.cqes);
    /* SQ slot i always names SQE i: the array is filled once, only the tail moves. */
    unsigned *array = (unsigned *)(sq + p->sq_off.array);
    for (unsigned i = 0; i < r->sq_entries; i++)
        array[i] = i;
    r->sqe_head = r->sqe_tail = *r->sq_ktail;
    return 0;
}

int uring_init(struct uring *r, unsigned entries, unsigned cq_entries, bool single_thread, char *err, size_t errlen)
{
    /* With one thread submitting and reaping, completion task work can wait until that
     * thread enters the kernel (DEFER_TASKRUN, 6.1+) instead of interrupting it;
     * TASKRUN_FLAG tells uring_needs_enter() when such work is pending. Kernels that do
     * not know a flag refuse it with -EINVAL: drop one step at a time to a plain ring. */
    static const unsigned chain[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        0,
    };
    struct io_uring_params p;
    int rc = -EINVAL;
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    for (size_t i = 0; i < sizeof(chain) / sizeof(chain[0]) && rc == -EINVAL; i++) {
        unsigned flags = chain[i];
        if (!single_thread)
            flags &= ~(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
        memset(&p, 0, sizeof(p));
        p.flags = flags;
        if (cq_entries) {
            p.flags |= IORING_SETUP_CQSIZE;
            p.cq_entries = cq_entries;
        }
        rc = sys_setup(entries, &p);
    }
    if (rc < 0) {
        explain(rc, err, errlen);
        return rc;
    }
    r->fd = rc;
    r->setup_flags = p.flags;
    r->features = p.features;
    rc = map_rings(r, &p);
    if (rc < 0) {
        if (err && errlen)
            snprintf(err, errlen, "io_uring: cannot map the rings of %u entries: %s", entries, strerror(-rc));
        uring_exit(r);
        return rc;
    }
    return 0;
}

void uring_exit(struct uring *r)
{
    unmap_all(r);
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
}

int uring_register_files(struct uring *r, const int *fds, unsigned n)
{
    int rc = sys_register(r->fd, IORING_REGISTER_FILES, fds, n);
    return rc < 0 ? rc : 0;
}

int uring_unregister_files(struct uring *r)
{
    int rc = sys_register(r->fd, IORING_UNREGISTER_FILES, NULL, 0);
    return rc < 0 ? rc : 0;
}

int uring_register_buffers(struct uring *r, const struct iovec *iov, unsigned n)
{
    int rc = sys_register(r->fd, IORING_REGISTER_BUFFERS, iov, n);
    return rc < 0 ? rc : 0;
}

int uring_unregister_buffers(struct uring *r)
{
    int rc = sys_register(r->fd, IORING_UNREGISTER_BUFFERS, NULL, 0);
    return rc < 0 ? rc : 0;
}

struct io_uring_sqe *uring_get_sqe(struct uring *r)
{
    unsigned head = __atomic_load_n(r->sq_khead, __ATOMIC_ACQUIRE);
    if (r->sqe_tail - head >= r->sq_entries)
        return NULL;
    struct io_uring_sqe *sqe = &r->sqes[r->sqe_tail & r->sq_mask];
    memset(sqe, 0, sizeof(*sqe));
    r->sqe_tail++;
    return sqe;
}

int uring_submit(struct uring *r, unsigned wait_nr)
{
    if (r->sqe_tail != r->sqe_head) {
        /* The SQEs are written: publish them with the tail (release). */
        __atomic_store_n(r->sq_ktail, r->sqe_tail, __ATOMIC_RELEASE);
        r->sqe_head = r->sqe_tail;
    }
    /* Everything published that the kernel has not consumed yet, including SQEs left
     * by an earlier enter that failed with -EINTR/-EAGAIN. */
    unsigned n = r->sqe_tail - __atomic_load_n(r->sq_khead, __ATOMIC_ACQUIRE);
    unsigned flags = 0;
    if (wait_nr || uring_needs_enter(r))
        flags |= IORING_ENTER_GETEVENTS;
    if (!n && !flags)
        return 0;
    return sys_enter(r->fd, n, wait_nr, flags);
}

int uring_get_events(struct uring *r)
{
    int rc = sys_enter(r->fd, 0, 0, IORING_ENTER_GETEVENTS);
    return rc < 0 ? rc : 0;
}

int uring_wait_cqe(struct uring *r)
{
    while (uring_cq_ready(r) == 0) {
        int rc = sys_enter(r->fd, 0, 1, IORING_ENTER_GETEVENTS);
        if (rc < 0)
            return rc;
    }
    return 0;
}
