/* SPDX-License-Identifier: BSD-3-Clause */
/* nbd.c — blksum's NBD reader (image.h), built only when libnbd was found: an engine backend whose
 * reads are libnbd's asynchronous preads into the slots' buffers (one connection, up to queue_depth
 * commands in flight), an allocation map from the server's base:allocation block status (extents
 * flagged ZERO are never read), and qemu-nbd started by blksum itself with systemd socket activation
 * on a unix socket in a private temporary directory. The socket and the directory are removed as
 * soon as the connection stands (nothing is left behind even if blksum is killed); qemu-nbd runs
 * without --persistent and read-only, gets SIGKILL once the connection is closed (nothing of a
 * read-only export is left to flush, and waiting for it to notice the close costs wall time), and
 * SIGTERM if blksum dies first (PR_SET_PDEATHSIG).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blksum/blksum_internal.h"
#include "blksum/image.h"
#include "engine/uring.h"

#define NBD_MAX_QDEPTH        BLKSUM_MAX_QUEUE_DEPTH
#define NBD_EXTENTS_QUERY     (1ull << 30) /* bytes of map asked for at once, as the original */
#define NBD_SOCKET_FD         3            /* systemd socket activation: the first passed descriptor */
#define NBD_DEFAULT_MAX_BYTES (32u << 20)  /* NBD's customary largest request when the server names none */
#define NBD_PID_DIGITS        20
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
    X(nbd_connect_uri) X(nbd_connect_unix) X(nbd_get_size) X(nbd_get_block_size) X(nbd_can_meta_context)    \
    X(nbd_block_status) X(nbd_aio_pread) X(nbd_poll) X(nbd_shutdown) X(nbd_aio_get_fd)                     \
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
#define NBD_CALL(f)           nbd_lib.f
#define nbd_create            NBD_CALL(nbd_create)
#define nbd_close             NBD_CALL(nbd_close)
#define nbd_get_errno         NBD_CALL(nbd_get_errno)
#define nbd_get_error         NBD_CALL(nbd_get_error)
#define nbd_add_meta_context  NBD_CALL(nbd_add_meta_context)
#define nbd_connect_uri       NBD_CALL(nbd_connect_uri)
#define nbd_connect_unix      NBD_CALL(nbd_connect_unix)
#define nbd_get_size          NBD_CALL(nbd_get_size)
#define nbd_get_block_size    NBD_CALL(nbd_get_block_size)
#define nbd_can_meta_context  NBD_CALL(nbd_can_meta_context)
#define nbd_block_status      NBD_CALL(nbd_block_status)
#define nbd_aio_pread         NBD_CALL(nbd_aio_pread)
#define nbd_poll              NBD_CALL(nbd_poll)
#define nbd_shutdown          NBD_CALL(nbd_shutdown)
#define nbd_aio_get_fd        NBD_CALL(nbd_aio_get_fd)
#define nbd_aio_get_direction NBD_CALL(nbd_aio_get_direction)
#define nbd_aio_notify_read   NBD_CALL(nbd_aio_notify_read)
#define nbd_aio_notify_write  NBD_CALL(nbd_aio_notify_write)

struct nbd_extent {
    uint64_t end;
    bool zero;
};

struct nbd_src {
    struct nbd_handle *h;
    uint64_t size;
    uint32_t max_bytes;
    bool have_map;
    pid_t server;        /* qemu-nbd we started, 0 for a URI */
    uint32_t wire_depth; /* reads in flight at most (0: the queue depth) */
    /* the last block-status reply: extents covering [ext_start, ext[next - 1].end) */
    struct nbd_extent *ext;
    size_t next, cap, cursor;
    uint64_t ext_start;
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
    int wake_fd; /* eventfd: wake() makes a waiting kick() return */
};

static int nbd_errno(void)
{
    int e = nbd_get_errno();
    return e ? -e : -EIO;
}

/* ---------------------------------------------------------------- the allocation map */

static int extent_cb(void *user, const char *ctx, uint64_t off, uint32_t *entries, size_t nr, int *error)
{
    struct nbd_src *n = user;
    (void)error;
    if (strcmp(ctx, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0)
        return 0;
    uint64_t pos = off;
    n->ext_start = off;
    n->next = n->cursor = 0;
    for (size_t i = 0; i + 1 < nr; i += 2) {
        bool zero = entries[i + 1] & LIBNBD_STATE_ZERO;
        pos += entries[i];
        if (n->next && n->ext[n->next - 1].zero == zero) {
            n->ext[n->next - 1].end = pos; /* merge runs of one kind */
            continue;
        }
        if (n->next == n->cap) {
            size_t cap = n->cap ? 2 * n->cap : 64;
            struct nbd_extent *e = realloc(n->ext, cap * sizeof(*e));
            if (!e) {
                *error = ENOMEM;
                return -1;
            }
            n->ext = e;
            n->cap = cap;
        }
        n->ext[n->next++] = (struct nbd_extent){pos, zero};
    }
    return 0;
}

static int nbd_map(void *ctx, uint64_t off, uint64_t *end, bool *zero)
{
    struct nbd_src *n = ctx;
    if (!n->have_map) {
        *end = n->size;
        *zero = false;
        return 0;
    }
    if (!n->next || off < n->ext_start || off >= n->ext[n->next - 1].end) {
        uint64_t count = n->size - off < NBD_EXTENTS_QUERY ? n->size - off : NBD_EXTENTS_QUERY;
        n->next = 0;
        if (nbd_block_status(n->h, count, off, (nbd_extent_callback){.callback = extent_cb, .user_data = n}, 0) < 0)
            return nbd_errno();
        if (!n->next || n->ext[n->next - 1].end <= off) {
            *end = n->size; /* a server that answered nothing about off: read it */
            *zero = false;
            return 0;
        }
        n->cursor = 0;
    }
    if (n->cursor >= n->next || (n->cursor && off < n->ext[n->cursor - 1].end))
        n->cursor = 0;
    while (n->ext[n->cursor].end <= off)
        n->cursor++;
    *end = n->ext[n->cursor].end < n->size ? n->ext[n->cursor].end : n->size;
    *zero = n->ext[n->cursor].zero;
    return 0;
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
    if ((c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "nbd: eventfd: %s", strerror(-rc));
        free(c->slots);
        blksum_ichan_free(ic);
        return rc;
    }
    *out = &ic->base;
    return 0;
}

static void nchan_close(struct perf_chan *ch)
{
    struct nchan *c = (struct nchan *)ch;
    struct nbd_src *n = c->ic.reader;
    /* the engine drains its reads first; anything left would complete into freed memory */
    while (c->inflight && nbd_poll(n->h, -1) >= 0)
        ;
    close(c->wake_fd);
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
    struct nbd_handle *h = ((struct nbd_src *)c->ic.reader)->h;
    while (wait_min && !c->ic.count && c->inflight) {
        unsigned dir = nbd_aio_get_direction(h);
        struct pollfd p[2] = {
            {.fd = nbd_aio_get_fd(h),
             .events = (short)(((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
                               ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0))},
            {.fd = c->wake_fd, .events = POLLIN},
        };
        if (p[0].fd < 0)
            return nbd_errno();
        if (!p[0].events) /* nothing to wait for on the socket: let libnbd say why */
            return nbd_poll(h, -1) < 0 ? nbd_errno() : 0;
        if (poll(p, 2, -1) < 0)
            return errno == EINTR ? -EINTR : -errno;
        int rc = 0;
        if (p[0].revents & (POLLIN | POLLHUP))
            rc = nbd_aio_notify_read(h);
        else if (p[0].revents & POLLOUT)
            rc = nbd_aio_notify_write(h);
        else if (p[0].revents & (POLLERR | POLLNVAL))
            return -ENOTCONN; /* the server closed the connection */
        if (rc < 0)
            return nbd_errno();
        if (p[1].revents & POLLIN) {
            uint64_t v;
            if (read(c->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                return -errno;
            return -EINTR;
        }
    }
    return 0;
}

static void nchan_wake(struct perf_chan *ch)
{
    static const uint64_t one = 1;
    struct nchan *c = (struct nchan *)ch;
    /* EAGAIN: the counter is full, so a wake-up is pending anyway */
    (void)!write(c->wake_fd, &one, sizeof(one));
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

static void nbd_destroy(void *ctx)
{
    struct nbd_src *n = ctx;
    if (!n)
        return;
    if (n->h) {
        /* a server of our own is killed next: no NBD_CMD_DISC and no wait for it to hang up */
        if (n->server <= 0)
            nbd_shutdown(n->h, 0);
        nbd_close(n->h);
    }
    if (n->server > 0)
        stop_server(n->server);
    free(n->ext);
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
    }
    return rc;
}

static struct nbd_src *new_handle(char *err, size_t errlen)
{
    struct nbd_src *n = calloc(1, sizeof(*n));
    if (n)
        n->h = nbd_create();
    /* the buffers are read into whole (a short read is an error): no need to zero them first */
    if (n && n->h && nbd_lib.nbd_set_pread_initialize)
        nbd_lib.nbd_set_pread_initialize(n->h, false);
    if (!n || !n->h || nbd_add_meta_context(n->h, LIBNBD_CONTEXT_BASE_ALLOCATION) < 0) {
        snprintf(err, errlen, "nbd: %s", n && n->h ? nbd_get_error() : "cannot create a libnbd handle");
        if (n && n->h)
            nbd_close(n->h);
        free(n);
        return NULL;
    }
    return n;
}

int blksum_nbd_connect(struct blksum_source *src, const char *uri, char *err, size_t errlen)
{
    int rc = nbd_lib_ready(uri, err, errlen);
    if (rc < 0)
        return rc;
    struct nbd_src *n = new_handle(err, errlen);
    if (!n)
        return -ENOMEM;
    if (nbd_connect_uri(n->h, uri) < 0) {
        rc = nbd_errno();
        snprintf(err, errlen, "%s: %s", uri, nbd_get_error());
        nbd_destroy(n);
        return rc;
    }
    return finish_open(src, n, uri, err, errlen);
}

/* The first executable name on PATH, into out. */
static int find_program(const char *name, char *out, size_t outlen)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        if (len && (size_t)snprintf(out, outlen, "%.*s/%s", (int)len, path, name) < outlen && access(out, X_OK) == 0)
            return 0;
        path += len + (path[len] == ':');
    }
    return -ENOENT;
}

/* The child: fd 3 = the listening socket, LISTEN_PID = its own pid, then qemu-nbd. Only
 * async-signal-safe calls (the environment and argv were built before fork). */
static void exec_server(int sock, const char *prog, char *const argv[], char **envp, char *pidvar, bool quiet)
{
    char digits[NBD_PID_DIGITS];
    int nd = 0;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (quiet) { /* a first try that is retried on failure: the retry says what went wrong */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDERR_FILENO);
    }
    if (sock == NBD_SOCKET_FD)
        fcntl(sock, F_SETFD, 0);
    else if (dup2(sock, NBD_SOCKET_FD) < 0)
        _exit(126);
    for (pid_t p = getpid(); p > 0 && nd < NBD_PID_DIGITS; p /= 10)
        digits[nd++] = (char)('0' + p % 10);
    for (int i = 0; i < nd; i++)
        pidvar[strlen("LISTEN_PID=") + i] = digits[nd - 1 - i];
    pidvar[strlen("LISTEN_PID=") + nd] = '\0';
    execve(prog, argv, envp);
    _exit(127);
}

extern char **environ;

/* A qemu-nbd we are starting: its listening socket's path, in a private directory. */
struct nbd_spawn {
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path) - sizeof("/nbd.sock") + 1];
    struct sockaddr_un addr;
    pid_t pid;
};

/* Start qemu-nbd (prog) serving path with the given aio mode on a listening unix socket of its own
 * (socket activation: it accepts once it is up, and a connect() before that waits in the backlog);
 * quiet: its standard error goes to /dev/null. */
static int spawn_server(struct nbd_spawn *sp, const char *prog, const char *path, const char *format, const char *aio,
                        bool quiet, char *err, size_t errlen)
{
    char fmtarg[64], aioarg[32];
    char pidvar[sizeof("LISTEN_PID=") + NBD_PID_DIGITS] = "LISTEN_PID=";
    int rc = 0, sock = -1;
    *sp = (struct nbd_spawn){.addr.sun_family = AF_UNIX};
    /* The socket's private directory goes under $TMPDIR when a socket path there fits, else /tmp. */
    const char *base = getenv("TMPDIR");
    if (!base || !*base || snprintf(sp->dir, sizeof(sp->dir), "%s/nvmelab-blksum-XXXXXX", base) >= (int)sizeof(sp->dir))
        snprintf(sp->dir, sizeof(sp->dir), "/tmp/nvmelab-blksum-XXXXXX");
    if (!mkdtemp(sp->dir)) {
        rc = -errno;
        snprintf(err, errlen, "nbd: cannot create a private directory %s: %s", sp->dir, strerror(-rc));
        sp->dir[0] = '\0';
        return rc;
    }
    snprintf(sp->addr.sun_path, sizeof(sp->addr.sun_path), "%s/nbd.sock", sp->dir);
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    char **envp = calloc(nenv + 3, sizeof(*envp));
    if (!envp) {
        snprintf(err, errlen, "nbd: out of memory");
        return -ENOMEM;
    }
    size_t k = 0;
    envp[k++] = pidvar;
    envp[k++] = "LISTEN_FDS=1";
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], "LISTEN_PID=", 11) && strncmp(environ[i], "LISTEN_FDS=", 11))
            envp[k++] = environ[i];
    snprintf(fmtarg, sizeof(fmtarg), "--format=%s", format);
    snprintf(aioarg, sizeof(aioarg), "--aio=%s", aio);
    char *const argv[] = {"qemu-nbd", "--read-only", "--shared=1", "--cache=writeback",
                          aioarg,     fmtarg,        (char *)path, NULL};
    sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || bind(sock, (struct sockaddr *)&sp->addr, sizeof(sp->addr)) < 0 || listen(sock, 1) < 0) {
        rc = -errno;
        snprintf(err, errlen, "nbd: socket %s: %s", sp->addr.sun_path, strerror(-rc));
    } else if ((sp->pid = fork()) < 0) {
        rc = -errno;
        snprintf(err, errlen, "nbd: fork: %s", strerror(-rc));
        sp->pid = 0;
    } else if (sp->pid == 0) {
        exec_server(sock, prog, argv, envp, pidvar, quiet);
    }
    if (sock >= 0)
        close(sock);
    free(envp);
    return rc;
}

/* Connect n->h to the qemu-nbd of sp; on failure say why (the server's exit status when it ended). */
static int connect_server(struct nbd_src *n, struct nbd_spawn *sp, const char *prog, const char *path,
                          const char *format, char *err, size_t errlen)
{
    if (nbd_connect_unix(n->h, sp->addr.sun_path) == 0)
        return 0;
    int status = 0, rc = nbd_errno();
    nbd_close(n->h);
    n->h = NULL;
    if (waitpid(sp->pid, &status, 0) == sp->pid) {
        sp->pid = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            snprintf(err, errlen, "%s: cannot run %s", path, prog);
        else
            snprintf(err, errlen, "%s: qemu-nbd could not serve it as %s (exit status %d, its message above)", path,
                     format, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    } else {
        snprintf(err, errlen, "%s: connecting to qemu-nbd failed", path);
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
                      struct nbd_src **out, bool *exited, char *err, size_t errlen)
{
    struct nbd_spawn sp;
    struct nbd_src *n = NULL;
    int rc = spawn_server(&sp, prog, path, format, aio, quiet, err, errlen);
    if (rc == 0)
        rc = nbd_lib_ready(path, err, errlen);
    if (rc == 0 && !(n = new_handle(err, errlen)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = connect_server(n, &sp, prog, path, format, err, errlen);
    /* connected or failed: nothing on disk is needed any more */
    if (sp.dir[0]) {
        unlink(sp.addr.sun_path);
        rmdir(sp.dir);
    }
    *exited = rc < 0 && n && sp.pid == 0;
    if (n) {
        n->server = sp.pid; /* nbd_destroy stops it */
        n->wire_depth = wire_depth(path);
    } else if (sp.pid > 0)
        stop_server(sp.pid);
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
    if (find_program("qemu-nbd", prog, sizeof(prog)) < 0) {
        snprintf(err, errlen, "%s: qemu-nbd not found on PATH (install qemu-utils), needed to serve the image", path);
        return -ENOENT;
    }
    const char *aio = server_aio(format, &fallback);
    int rc = serve_once(prog, path, format, aio, fallback, &n, &exited, err, errlen);
    if (rc < 0 && fallback && exited) /* e.g. a qemu-nbd without io_uring: again with its default */
        rc = serve_once(prog, path, format, "threads", false, &n, &exited, err, errlen);
    if (rc < 0)
        return rc;
    rc = finish_open(src, n, path, err, errlen);
    if (rc == 0)
        src->own_server = true;
    return rc;
}
