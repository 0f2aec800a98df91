/* SPDX-License-Identifier: BSD-3-Clause */
/* nbd.c — blksum's NBD reader (image.h), built only when libnbd was found: an engine backend whose
 * reads are libnbd's asynchronous preads into the slots' buffers (one connection, up to queue_depth
 * commands in flight), an allocation map from the server's base:allocation block status (extents
 * flagged ZERO are never read), and qemu-nbd started by blksum itself with systemd socket activation
 * on a unix socket in a private temporary directory. blksum connects to that socket before qemu-nbd is
 * started (the connection waits in the backlog until qemu-nbd accepts it), so the socket and the
 * directory are gone before the fork; one left by a blksum killed in those few system calls is removed by
 * the next (the directory's name holds its pid). qemu-nbd runs without --persistent and read-only, gets
 * the image as an absolute path after "--" (a name is data: no "json:" or "nbd:" prefix, no leading '-'
 * is read as anything but a file name), gets SIGKILL once the connection is closed (nothing of a
 * read-only export is left to flush, and waiting for it to notice the close costs wall time), and
 * SIGKILL if blksum dies first, whatever kills it (PR_SET_PDEATHSIG, checked against a parent already
 * gone; SIGKILL because qemu reads SIGTERM only in its main loop, which a hung open never reaches).
 *
 * Every wait is bounded by a cancel: connecting (and the handshake) polls the socket with a timeout
 * (NVMELAB_BLKSUM_NBD_TIMEOUT seconds, default 30) and ends with -EINTR on a signal or the process's
 * interrupt flag (blksum_set_interrupt); block status and reads wait on the socket and an eventfd that
 * blksum_cancel() writes (the source's interrupt), and a channel closed with reads still in flight (a
 * cancel, an error) closes the connection instead of waiting for a server that may never answer. The
 * server's block-status replies are checked by nbd_extents.c before they make the allocation map.
 *
 * Costs cut from the NBD path (measured: the blksum chapter's methods section, src/README.md): libnbd's
 * zeroing of every read buffer before the read (nbd_set_pread_initialize off, as the original does), the
 * wait for qemu-nbd to end by itself, its start-up after libnbd's (it is now started first), reads beyond
 * NBD_LOCAL_WIRE_DEPTH in flight to our own server (their buffers outgrow the caches), and the reader
 * sleeping on the socket while a hash thread freed a buffer (kick() also polls an eventfd that wake()
 * writes), and qemu's thread-pool hop on every read of a raw image (server_aio: io_uring for raw,
 * threads, its default and the original's with -c, for qcow2, on which qemu 7.2's io_uring hangs when
 * the file is truncated; NVMELAB_BLKSUM_QEMU_AIO names the mode outright).
 *
 * libnbd is loaded with dlopen() when an NBD source is first opened, not linked: it pulls in GnuTLS,
 * libxml2 and ICU (about 4 MiB of resident memory), which a checksum of a plain file must not pay
 * for. Its header gives the types; the functions are called through one table (nbd_lib), so the code
 * below reads as plain libnbd calls.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libnbd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blksum/blksum_internal.h"
#include "blksum/image.h"
#include "blksum/nbd_extents.h"
#include "blksum/nbd_server.h"
#include "engine/uring.h"

#define NBD_MAX_QDEPTH        BLKSUM_MAX_QUEUE_DEPTH
#define NBD_EXTENTS_QUERY     (1ull << 30) /* bytes of map asked for at once, as the original */
#define NBD_DEFAULT_MAX_BYTES (32u << 20)  /* NBD's customary largest request when the server names none */
#define NBD_TIMEOUT_S         30           /* connecting and the handshake, unless NVMELAB_BLKSUM_NBD_TIMEOUT says */
#define NBD_POLL_STEP_MS      100          /* a wait looks at the interrupt flag at least this often */
#define NBD_EXIT_WAIT_MS      1000         /* a server whose connection broke gets this long to exit */
#define NBD_HANGUP_WAIT_MS    1000         /* a server told we leave (NBD_CMD_DISC) gets this long to hang up */
#define NBD_SECTOR            512u         /* qemu serves a raw file rounded up to whole sectors */
/* Reads on the wire at once to a qemu-nbd of our own (a local unix socket): more only spread the data
 * in flight over more of qemu's buffers and ours, so that its copies miss the CPU caches (measured: the
 * blksum chapter's methods section); the rest of the queue depth holds chunks waiting to be hashed. */
#define NBD_LOCAL_WIRE_DEPTH 4u
/* File systems whose reads wait on a network (statfs f_type): there a read's latency is the network's,
 * and the whole queue depth stays on the wire. */
#define NBD_NFS_MAGIC   0x6969u
#define NBD_SMB2_MAGIC  0xfe534d42u
#define NBD_CIFS_MAGIC  0xff534d42u
#define NBD_CEPH_MAGIC  0x00c36400u
#define NBD_FUSE_MAGIC  0x65735546u
#define NBD_AFS_MAGIC   0x5346414fu
#define NBD_GFS2_MAGIC  0x01161970u
#define NBD_OCFS2_MAGIC 0x7461636fu

/* ---------------------------------------------------------------- libnbd, loaded at first use */

#define NBD_SONAME "libnbd.so.0"
/* clang-format off */
#define NBD_FUNCS(X)                                                                                       \
    X(nbd_create) X(nbd_close) X(nbd_get_errno) X(nbd_get_error) X(nbd_add_meta_context)                   \
    X(nbd_aio_connect_uri) X(nbd_aio_connect_socket) X(nbd_get_size) X(nbd_get_block_size)                  \
    X(nbd_can_meta_context) X(nbd_aio_block_status) X(nbd_aio_command_completed) X(nbd_aio_is_ready)        \
    X(nbd_aio_is_dead) X(nbd_aio_is_closed) X(nbd_aio_pread) X(nbd_poll) X(nbd_aio_disconnect) X(nbd_aio_get_fd)  \
    X(nbd_aio_get_direction) X(nbd_aio_notify_read) X(nbd_aio_notify_write)
/* Newer than the oldest libnbd blksum runs with: used when present. */
#define NBD_OPTIONAL_FUNCS(X) X(nbd_set_pread_initialize) /* libnbd 1.10 */
/* clang-format on */

static struct {
#define NBD_MEMBER(f) __typeof__(&f) f;
    NBD_FUNCS(NBD_MEMBER)
    NBD_OPTIONAL_FUNCS(NBD_MEMBER)
#undef NBD_MEMBER
} nbd_lib;
static pthread_once_t nbd_lib_once = PTHREAD_ONCE_INIT;
static char nbd_lib_err[PERF_ERRLEN];

static void nbd_lib_load(void)
{
    void *h = dlopen(NBD_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(nbd_lib_err, sizeof(nbd_lib_err), "cannot load %s (install libnbd0): %s", NBD_SONAME, dlerror());
        return;
    }
#define NBD_RESOLVE(f)                                                                                                 \
    if (!(*(void **)&nbd_lib.f = dlsym(h, #f))) {                                                                      \
        snprintf(nbd_lib_err, sizeof(nbd_lib_err), "%s has no %s (libnbd too old)", NBD_SONAME, #f);                   \
        return;                                                                                                        \
    }
    NBD_FUNCS(NBD_RESOLVE)
#undef NBD_RESOLVE
#define NBD_RESOLVE_OPTIONAL(f) *(void **)&nbd_lib.f = dlsym(h, #f);
    NBD_OPTIONAL_FUNCS(NBD_RESOLVE_OPTIONAL)
#undef NBD_RESOLVE_OPTIONAL
    /* the handle stays loaded for the life of the process */
}

/* 0 when libnbd is loaded; else -ENOTSUP with the reason in err. */
static int nbd_lib_ready(const char *name, char *err, size_t errlen)
{
    pthread_once(&nbd_lib_once, nbd_lib_load);
    if (!nbd_lib_err[0])
        return 0;
    snprintf(err, errlen, "%s: %s", name, nbd_lib_err);
    return -ENOTSUP;
}

/* From here on the libnbd names call through the table. */
#define NBD_CALL(f)               nbd_lib.f
#define nbd_create                NBD_CALL(nbd_create)
#define nbd_close                 NBD_CALL(nbd_close)
#define nbd_get_errno             NBD_CALL(nbd_get_errno)
#define nbd_get_error             NBD_CALL(nbd_get_error)
#define nbd_add_meta_context      NBD_CALL(nbd_add_meta_context)
#define nbd_aio_connect_uri       NBD_CALL(nbd_aio_connect_uri)
#define nbd_aio_connect_socket    NBD_CALL(nbd_aio_connect_socket)
#define nbd_get_size              NBD_CALL(nbd_get_size)
#define nbd_get_block_size        NBD_CALL(nbd_get_block_size)
#define nbd_can_meta_context      NBD_CALL(nbd_can_meta_context)
#define nbd_aio_block_status      NBD_CALL(nbd_aio_block_status)
#define nbd_aio_command_completed NBD_CALL(nbd_aio_command_completed)
#define nbd_aio_is_ready          NBD_CALL(nbd_aio_is_ready)
#define nbd_aio_is_dead           NBD_CALL(nbd_aio_is_dead)
#define nbd_aio_is_closed         NBD_CALL(nbd_aio_is_closed)
#define nbd_aio_pread             NBD_CALL(nbd_aio_pread)
#define nbd_poll                  NBD_CALL(nbd_poll)
#define nbd_aio_disconnect        NBD_CALL(nbd_aio_disconnect)
#define nbd_aio_get_fd            NBD_CALL(nbd_aio_get_fd)
#define nbd_aio_get_direction     NBD_CALL(nbd_aio_get_direction)
#define nbd_aio_notify_read       NBD_CALL(nbd_aio_notify_read)
#define nbd_aio_notify_write      NBD_CALL(nbd_aio_notify_write)

_Static_assert(BLKSUM_NBD_STATE_ZERO == LIBNBD_STATE_ZERO, "nbd_extents.h's zero flag is libnbd's");

struct nbd_src {
    struct nbd_handle *h; /* NULL once closed with reads in flight (a cancelled or failed run) */
    uint64_t size;
    uint32_t max_bytes;
    bool have_map;
    pid_t server;        /* qemu-nbd we started, 0 for a URI */
    uint32_t wire_depth; /* reads in flight at most (0: the queue depth) */
    int wake_fd;         /* eventfd: wake() and the interrupt make a wait on the socket return */
    atomic_int stop;     /* the run was cancelled (nbd_interrupt) */
    /* the last block-status reply (nbd_extents.h), or why it was refused */
    struct blksum_nbd_map map;
    uint64_t req_off, req_len;
    int map_rc;
    char map_err[PERF_ERRLEN];
};

struct nchan;
struct nslot {
    struct nchan *c;
    uint32_t slot;
};

struct nchan {
    struct blksum_ichan ic; /* first: buffers and completions (image.c) */
    struct nslot *slots;    /* each slot's completion-callback context */
    uint32_t inflight;
};

static int nbd_errno(void)
{
    int e = nbd_get_errno();
    return e ? -e : -EIO;
}

/* ---------------------------------------------------------------- waiting on the server */

/* The poll events the handle waits for (read before write; 0: none). */
static short nbd_events(struct nbd_handle *h)
{
    unsigned dir = nbd_aio_get_direction(h);
    return (short)(((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
                   ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0));
}

/* Move the handle's state machine on what poll said of its socket; 0 or -errno. */
static int nbd_step(struct nbd_handle *h, short revents)
{
    int rc = 0;
    if (revents & (POLLIN | POLLHUP))
        rc = nbd_aio_notify_read(h);
    else if (revents & POLLOUT)
        rc = nbd_aio_notify_write(h);
    else if (revents & (POLLERR | POLLNVAL))
        return -ENOTCONN; /* the server closed the connection */
    return rc < 0 ? nbd_errno() : 0;
}

/* What a wait waits for: 1 done, 0 not yet, < 0 failed (-errno). */
typedef int (*nbd_done_fn)(struct nbd_src *n, int64_t arg);

/* The signals that stop a front end: blocked while a source is opened (stop_signals_block) and let in only
 * inside the poll of nbd_wait (ppoll with the mask from before), so that one which comes between two polls
 * is not lost but ends the next one. */
static void stop_signals_block(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

/* Run n->h's state machine until done() says so. It ends early: -ECANCELED once the run is cancelled
 * (nbd_interrupt: it writes wake_fd); with sigmask (opening a source: the mask to poll with, see
 * stop_signals_block), -EINTR on a signal, on the process's interrupt flag (blksum_set_interrupt; looked
 * at every NBD_POLL_STEP_MS) or once its interrupt descriptor is readable (blksum_set_interrupt_fd, polled
 * beside the socket: a signal another thread caught); -ETIMEDOUT after timeout_ms (< 0: none). A wake() (a hash thread
 * freed a buffer) is taken and the wait goes on. */
static int nbd_wait(struct nbd_src *n, nbd_done_fn done, int64_t arg, int timeout_ms, const sigset_t *sigmask)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = done(n, arg);
        if (rc != 0)
            return rc < 0 ? rc : 0;
        if (atomic_load(&n->stop))
            return -ECANCELED;
        if (sigmask && blksum_interrupted())
            return -EINTR;
        int step = NBD_POLL_STEP_MS;
        if (timeout_ms >= 0) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            long long left = timeout_ms - ((t1.tv_sec - t0.tv_sec) * 1000ll + (t1.tv_nsec - t0.tv_nsec) / 1000000);
            if (left <= 0)
                return -ETIMEDOUT;
            if (left < step)
                step = (int)left;
        }
        struct pollfd p[3] = {{.fd = nbd_aio_get_fd(n->h), .events = nbd_events(n->h)},
                              {.fd = n->wake_fd, .events = POLLIN},
                              {.fd = sigmask ? blksum_interrupt_fd() : -1, .events = POLLIN}};
        if (p[0].fd < 0)
            return nbd_errno();
        if (!p[0].events) { /* nothing to wait for on the socket: let libnbd say why */
            if (nbd_poll(n->h, step) < 0)
                return nbd_errno();
            continue;
        }
        struct timespec ts = {.tv_sec = step / 1000, .tv_nsec = (long)(step % 1000) * 1000000L};
        if (ppoll(p, 3, &ts, sigmask) < 0) {
            if (errno == EINTR && !sigmask)
                continue;
            return errno == EINTR ? -EINTR : -errno;
        }
        if (p[2].revents & POLLIN)
            return -EINTR;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            if (read(n->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                return -errno;
        }
        if ((rc = nbd_step(n->h, p[0].revents)) < 0)
            return rc;
    }
}

/* ---------------------------------------------------------------- the allocation map */

/* The server's block-status reply for [n->req_off, + n->req_len): checked into n->map (nbd_extents.c);
 * a malformed one fails the command with EPROTO, its reason in n->map_err. */
static int extent_cb(void *user, const char *ctx, uint64_t off, uint32_t *entries, size_t nr, int *error)
{
    struct nbd_src *n = user;
    if (strcmp(ctx, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0)
        return 0;
    n->map_rc =
        blksum_nbd_extents_parse(&n->map, n->req_off, n->req_len, off, entries, nr, n->map_err, sizeof(n->map_err));
    if (n->map_rc < 0) {
        *error = -n->map_rc;
        return -1;
    }
    return 0;
}

static int block_status_done(struct nbd_src *n, int64_t cookie)
{
    int rc = nbd_aio_command_completed(n->h, (uint64_t)cookie);
    return rc < 0 ? (n->map_rc < 0 ? n->map_rc : nbd_errno()) : rc;
}

static int nbd_map(void *ctx, uint64_t off, uint64_t *end, bool *zero)
{
    struct nbd_src *n = ctx;
    if (!n->have_map) {
        *end = n->size;
        *zero = false;
        return 0;
    }
    if (!n->h)
        return -ENOTCONN;
    const struct blksum_nbd_extent *e = blksum_nbd_extents_find(&n->map, off);
    if (!e) {
        n->req_off = off;
        n->req_len = n->size - off < NBD_EXTENTS_QUERY ? n->size - off : NBD_EXTENTS_QUERY;
        n->map.n = 0;
        n->map_rc = 0;
        int64_t cookie =
            nbd_aio_block_status(n->h, n->req_len, off, (nbd_extent_callback){.callback = extent_cb, .user_data = n},
                                 NBD_NULL_COMPLETION, 0);
        if (cookie < 0)
            return nbd_errno();
        int rc = nbd_wait(n, block_status_done, cookie, -1, NULL);
        if (rc < 0)
            return rc;
        if (!(e = blksum_nbd_extents_find(&n->map, off))) {
            *end = n->size; /* a server that answered nothing about off (no base:allocation reply): read it */
            *zero = false;
            return 0;
        }
    }
    *end = e->end < n->size ? e->end : n->size;
    *zero = e->zero;
    return 0;
}

/* The source's interrupt (blksum_cancel): every wait on this connection ends with -ECANCELED or -EINTR. */
static void nbd_interrupt(void *ctx)
{
    static const uint64_t one = 1;
    struct nbd_src *n = ctx;
    atomic_store(&n->stop, 1);
    (void)!write(n->wake_fd, &one, sizeof(one));
}

/* ---------------------------------------------------------------- reads (engine backend) */

static int read_done(void *user, int *error)
{
    struct nslot *s = user;
    blksum_ichan_complete(&s->c->ic, s->slot, *error ? -*error : 0);
    s->c->inflight--;
    return 1; /* retire the command */
}

static int nchan_open(void *ctx, uint32_t dev, uint32_t qdepth, uint32_t iosize, struct perf_chan **out, char *err,
                      size_t errlen)
{
    struct nbd_src *n = ctx;
    struct blksum_ichan *ic;
    if (!n->h) {
        snprintf(err, errlen, "nbd: the connection was closed when an earlier run was cancelled or failed");
        return -ENOTCONN;
    }
    int rc = blksum_ichan_new(sizeof(struct nchan), n, dev, qdepth, iosize, n->max_bytes, "nbd", &ic, err, errlen);
    if (rc < 0)
        return rc;
    struct nchan *c = (struct nchan *)ic;
    if (!(c->slots = calloc(qdepth, sizeof(*c->slots)))) {
        blksum_ichan_free(ic);
        snprintf(err, errlen, "nbd: out of memory for %u slots", qdepth);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < qdepth; i++)
        c->slots[i] = (struct nslot){c, i};
    *out = &ic->base;
    return 0;
}

static void nchan_close(struct perf_chan *ch)
{
    struct nchan *c = (struct nchan *)ch;
    struct nbd_src *n = c->ic.reader;
    /* Reads the engine left in flight (a cancelled or failed run: the server may never answer them) are
     * abandoned with the connection, before their buffers go: libnbd writes into a buffer only inside our
     * own calls on the handle, and after nbd_close() there are none. */
    if (c->inflight && n->h) {
        nbd_close(n->h);
        n->h = NULL;
    }
    free(c->slots);
    blksum_ichan_free(&c->ic);
}

static int nchan_submit(struct perf_chan *ch, uint32_t slot, int write, uint64_t slba, uint32_t nlb)
{
    struct nchan *c = (struct nchan *)ch;
    struct nbd_src *n = c->ic.reader;
    if (write)
        return -EROFS;
    if (c->inflight + c->ic.count >= c->ic.qdepth || (n->wire_depth && c->inflight >= n->wire_depth))
        return -EBUSY;
    if (nlb > c->ic.iosize || slba > n->size || nlb > n->size - slba)
        return -EINVAL;
    nbd_completion_callback cb = {.callback = read_done, .user_data = &c->slots[slot]};
    c->inflight++;
    if (nbd_aio_pread(n->h, blksum_ichan_buf(ch, slot), nlb, slba, cb, 0) < 0) {
        c->inflight--;
        return nbd_errno();
    }
    return 0;
}

/* wait_min > 0: sleep until a read has completed, or until wake() (-EINTR). nbd_poll() would do the
 * first; this polls the handle's socket and the channel's eventfd together, as nbd_poll does the socket
 * alone (read before write; POLLHUP is a read). */
static int nchan_kick(struct perf_chan *ch, uint32_t wait_min)
{
    struct nchan *c = (struct nchan *)ch;
    struct nbd_src *n = c->ic.reader;
    struct nbd_handle *h = n->h;
    while (wait_min && !c->ic.count && c->inflight) {
        if (atomic_load(&n->stop))
            return -EINTR; /* cancelled: the engine sees it and stops */
        struct pollfd p[2] = {{.fd = nbd_aio_get_fd(h), .events = nbd_events(h)}, {.fd = n->wake_fd, .events = POLLIN}};
        if (p[0].fd < 0)
            return nbd_errno();
        if (!p[0].events) /* nothing to wait for on the socket: let libnbd say why */
            return nbd_poll(h, -1) < 0 ? nbd_errno() : 0;
        if (poll(p, 2, -1) < 0)
            return errno == EINTR ? -EINTR : -errno;
        int rc = nbd_step(h, p[0].revents);
        if (rc < 0)
            return rc;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            if (read(n->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                return -errno;
            return -EINTR;
        }
    }
    return 0;
}

static void nchan_wake(struct perf_chan *ch)
{
    static const uint64_t one = 1;
    struct nbd_src *n = ((struct nchan *)ch)->ic.reader;
    /* EAGAIN: the counter is full, so a wake-up is pending anyway */
    (void)!write(n->wake_fd, &one, sizeof(one));
}

static int nchan_reap(struct perf_chan *ch, uint32_t max)
{
    struct nchan *c = (struct nchan *)ch;
    struct nbd_src *n = c->ic.reader;
    if (!c->ic.count && c->inflight && nbd_poll(n->h, 0) < 0)
        return nbd_errno();
    return blksum_ichan_reap(ch, max);
}

/* After the connection closed: a read-only qemu-nbd has nothing to flush, so it is killed at once
 * rather than waited for (it would notice the close a scheduler round later). */
static void stop_server(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

static int hung_up(struct nbd_src *n, int64_t unused)
{
    (void)unused;
    return nbd_aio_is_closed(n->h) > 0 || nbd_aio_is_dead(n->h) > 0;
}

static void nbd_destroy(void *ctx)
{
    struct nbd_src *n = ctx;
    if (!n)
        return;
    if (n->h) {
        /* A server of our own is killed next: no NBD_CMD_DISC and no wait for it to hang up. Another is
         * told we leave, when it is connected and the run was not cancelled, and waited for a bounded time:
         * a server that stopped answering must not hold us. */
        if (n->server <= 0 && !atomic_load(&n->stop) && nbd_aio_is_ready(n->h) > 0 && nbd_aio_disconnect(n->h, 0) == 0)
            (void)nbd_wait(n, hung_up, 0, NBD_HANGUP_WAIT_MS, NULL);
        nbd_close(n->h);
    }
    if (n->server > 0)
        stop_server(n->server);
    if (n->wake_fd >= 0)
        close(n->wake_fd);
    blksum_nbd_extents_free(&n->map);
    free(n);
}

static const struct perf_backend_ops nbd_ops = {
    .chan_open = nchan_open,
    .chan_close = nchan_close,
    .chan_buf = blksum_ichan_buf,
    .submit = nchan_submit,
    .kick = nchan_kick,
    .wake = nchan_wake,
    .reap = nchan_reap,
    .destroy = nbd_destroy,
    .write_sync = blksum_image_write_sync,
};

static const struct blksum_image_reader nbd_reader = {
    .ops = &nbd_ops, .kind = "nbd", .max_qdepth = NBD_MAX_QDEPTH, .flags = PERF_TGT_BLOCKING, .map = nbd_map};

/* ---------------------------------------------------------------- connecting */

bool blksum_have_nbd(const char **why)
{
    if (why)
        *why = "libnbd found at configure time";
    return true;
}

/* The connected handle h becomes src's target. */
static int finish_open(struct blksum_source *src, struct nbd_src *n, const char *name, char *err, size_t errlen)
{
    int64_t size = nbd_get_size(n->h);
    if (size < 0) {
        int rc = nbd_errno();
        snprintf(err, errlen, "%s: %s", name, nbd_get_error());
        nbd_destroy(n);
        return rc;
    }
    int64_t maxb = nbd_get_block_size(n->h, LIBNBD_SIZE_MAXIMUM);
    n->size = (uint64_t)size;
    n->max_bytes = maxb > 0 && maxb < BLKSUM_MAX_READ_SIZE ? (uint32_t)maxb : NBD_DEFAULT_MAX_BYTES;
    n->have_map = nbd_can_meta_context(n->h, LIBNBD_CONTEXT_BASE_ALLOCATION) > 0;
    int rc = blksum_image_attach(src, &nbd_reader, n, n->size, n->max_bytes);
    if (rc < 0) {
        snprintf(err, errlen, "%s: out of memory", name);
        nbd_destroy(n);
        return rc;
    }
    src->interrupt = nbd_interrupt;
    return 0;
}

static struct nbd_src *new_handle(char *err, size_t errlen)
{
    struct nbd_src *n = calloc(1, sizeof(*n));
    if (n && (n->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        snprintf(err, errlen, "nbd: eventfd: %s", strerror(errno));
        free(n);
        return NULL;
    }
    if (n)
        n->h = nbd_create();
    /* the buffers are read into whole (a short read is an error): no need to zero them first */
    if (n && n->h && nbd_lib.nbd_set_pread_initialize)
        nbd_lib.nbd_set_pread_initialize(n->h, false);
    if (!n || !n->h || nbd_add_meta_context(n->h, LIBNBD_CONTEXT_BASE_ALLOCATION) < 0) {
        snprintf(err, errlen, "nbd: %s", n && n->h ? nbd_get_error() : "cannot create a libnbd handle");
        nbd_destroy(n);
        return NULL;
    }
    return n;
}

/* The limit on connecting and the handshake, in ms: NVMELAB_BLKSUM_NBD_TIMEOUT seconds, else NBD_TIMEOUT_S. */
static int connect_timeout_ms(void)
{
    const char *env = getenv("NVMELAB_BLKSUM_NBD_TIMEOUT");
    char *end;
    double s = env && *env ? strtod(env, &end) : 0;
    if (!env || !*env || *end || !(s > 0) || s > INT32_MAX / 1000)
        s = NBD_TIMEOUT_S;
    return (int)(s * 1000);
}

static int connected(struct nbd_src *n, int64_t unused)
{
    (void)unused;
    if (nbd_aio_is_ready(n->h) > 0)
        return 1;
    if (nbd_aio_is_dead(n->h) > 0 || nbd_aio_is_closed(n->h) > 0)
        return nbd_errno();
    return 0;
}

/* Wait for the connection and handshake that nbd_aio_connect_* began (rc: what that call returned);
 * who names the server in the one line err gets. */
static int wait_connected(struct nbd_src *n, int rc, const sigset_t *sigmask, const char *name, const char *who,
                          char *err, size_t errlen)
{
    int timeout_ms = connect_timeout_ms();
    if (rc < 0)
        rc = nbd_errno();
    else
        rc = nbd_wait(n, connected, 0, timeout_ms, sigmask);
    if (rc == -ETIMEDOUT)
        snprintf(err, errlen, "%s: %s did not answer within %g s (NVMELAB_BLKSUM_NBD_TIMEOUT sets the limit)", name,
                 who, timeout_ms / 1000.0);
    else if (rc == -EINTR)
        snprintf(err, errlen, "%s: interrupted while connecting to %s", name, who);
    else if (rc < 0)
        snprintf(err, errlen, "%s: %s", name, nbd_get_error());
    return rc;
}

int blksum_nbd_connect(struct blksum_source *src, const char *uri, char *err, size_t errlen)
{
    int rc = nbd_lib_ready(uri, err, errlen);
    if (rc < 0)
        return rc;
    struct nbd_src *n = new_handle(err, errlen);
    if (!n)
        return -ENOMEM;
    sigset_t old;
    stop_signals_block(&old);
    rc = wait_connected(n, nbd_aio_connect_uri(n->h, uri), &old, uri, "the NBD server", err, errlen);
    if (rc < 0)
        nbd_destroy(n);
    else
        rc = finish_open(src, n, uri, err, errlen);
    pthread_sigmask(SIG_SETMASK, &old, NULL); /* a signal held back is handled now */
    return rc;
}

/* Connect n->h to the qemu-nbd of sp; on failure say why (the server's exit status when it ended, and
 * then sp->pid = 0). */
static int connect_server(struct nbd_src *n, struct blksum_nbd_server *sp, const sigset_t *sigmask, const char *prog,
                          const char *path, const char *format, char *err, size_t errlen)
{
    int status = 0, fd = sp->fd;
    sp->fd = -1; /* libnbd's now, even when the call fails */
    int rc = wait_connected(n, nbd_aio_connect_socket(n->h, fd), sigmask, path, "qemu-nbd", err, errlen);
    if (rc == 0 || rc == -ETIMEDOUT || rc == -EINTR)
        return rc;
    /* the connection broke: qemu-nbd ended, or is about to */
    if (blksum_nbd_reap(sp->pid, NBD_EXIT_WAIT_MS, &status)) {
        sp->pid = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            snprintf(err, errlen, "%s: cannot run %s", path, prog);
        else
            snprintf(err, errlen, "%s: qemu-nbd could not serve it as %s (exit status %d, its message above)", path,
                     format, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return rc;
}

/* Reads on the wire at once to our qemu-nbd serving path (NBD_LOCAL_WIRE_DEPTH; 0 = the queue depth). */
static uint32_t wire_depth(const char *path)
{
    static const unsigned long remote[] = {NBD_NFS_MAGIC,  NBD_SMB2_MAGIC, NBD_CIFS_MAGIC, NBD_CEPH_MAGIC,
                                           NBD_FUSE_MAGIC, NBD_AFS_MAGIC,  NBD_GFS2_MAGIC, NBD_OCFS2_MAGIC};
    const char *env = getenv("NVMELAB_BLKSUM_NBD_WIRE");
    struct statfs fs;
    if (env && *env)
        return (uint32_t)strtoul(env, NULL, 10);
    if (statfs(path, &fs) == 0)
        for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
            if ((unsigned long)fs.f_type == remote[i])
                return 0;
    return NBD_LOCAL_WIRE_DEPTH;
}

/* qemu-nbd's aio mode: NVMELAB_BLKSUM_QEMU_AIO when set; else io_uring for a raw image where this
 * process may use io_uring (*fallback set: a qemu-nbd built without it is started again with threads),
 * threads (qemu-nbd's default) otherwise. With io_uring a read from the page cache completes in qemu's
 * main loop, with no hop to a thread of its pool and back: less of the server's CPU and a shorter
 * round trip (src/README.md). qcow2 keeps threads: qemu 7.2's io_uring path hangs on a read past the
 * end of a truncated qcow2 (a raw image read past its end, even one truncated while served, reads
 * zeros). */
static const char *server_aio(const char *format, bool *fallback)
{
    char why[PERF_ERRLEN];
    const char *aio = getenv("NVMELAB_BLKSUM_QEMU_AIO");
    *fallback = false;
    if (aio && *aio)
        return aio;
    if (strcmp(format, "raw") != 0 || uring_probe(why, sizeof(why)) < 0)
        return "threads";
    *fallback = true;
    return "io_uring";
}

/* One try: start qemu-nbd with aio and connect *out to it. *exited: the server ended before serving. */
static int serve_once(const char *prog, const char *path, const char *format, const char *aio, bool quiet,
                      const sigset_t *sigmask, struct nbd_src **out, bool *exited, char *err, size_t errlen)
{
    struct blksum_nbd_server sp;
    struct nbd_src *n = NULL;
    int rc = blksum_nbd_spawn(&sp, prog, path, format, aio, quiet, err, errlen);
    if (rc == 0)
        rc = nbd_lib_ready(path, err, errlen);
    if (rc == 0 && !(n = new_handle(err, errlen)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = connect_server(n, &sp, sigmask, prog, path, format, err, errlen);
    if (sp.fd >= 0)
        close(sp.fd);
    *exited = rc < 0 && n && sp.pid == 0;
    if (n) {
        n->server = sp.pid; /* nbd_destroy stops it */
        n->wire_depth = wire_depth(path);
    } else if (sp.pid > 0) {
        stop_server(sp.pid);
    }
    if (rc < 0) {
        nbd_destroy(n);
        n = NULL;
    }
    *out = n;
    return rc;
}

/* qemu-nbd is started first, and libnbd loaded while it starts up: the two take about as long (10-20 ms
 * each here), and the original, linked with libnbd, pays them one after the other. */
int blksum_nbd_serve(struct blksum_source *src, const char *path, const char *format, char *err, size_t errlen)
{
    char prog[4096];
    struct nbd_src *n = NULL;
    bool fallback, exited;
    if (blksum_nbd_find_program("qemu-nbd", prog, sizeof(prog)) < 0) {
        snprintf(err, errlen, "%s: qemu-nbd not found on PATH (install qemu-utils), needed to serve the image", path);
        return -ENOENT;
    }
    const char *aio = server_aio(format, &fallback);
    sigset_t old;
    stop_signals_block(&old);
    int rc = serve_once(prog, path, format, aio, fallback, &old, &n, &exited, err, errlen);
    if (rc < 0 && fallback && exited &&
        !blksum_interrupted()) /* e.g. a qemu-nbd without io_uring: again with its default */
        rc = serve_once(prog, path, format, "threads", false, &old, &n, &exited, err, errlen);
    if (rc == 0)
        rc = finish_open(src, n, path, err, errlen);
    pthread_sigmask(SIG_SETMASK, &old, NULL); /* a signal held back is handled now */
    if (rc == 0)
        src->own_server = true;
    return rc;
}
