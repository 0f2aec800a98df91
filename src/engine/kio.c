/* SPDX-License-Identifier: BSD-3-Clause */
/* kio.c — psync and io_uring backends on file:// and blk:// (see kio.h). */
#include "engine/kio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "engine/uring.h"
#include "nvme/uri.h"

enum kio_kind { KIO_PSYNC, KIO_URING };

struct kio_ctx {
    enum kio_kind kind;
    int fd;
    int owns_fd; /* opened from a URI (closed by destroy), not handed in */
    int stream;  /* a pipe or character device: sequential reads only */
    uint32_t lba_size;
    char path[PATH_MAX];
};

/* ------------------------------------------------------------------ URI */
/* file:///path[?backend=psync|io_uring][&allow_write=0|1], blk:///dev/X[?...]: the one URI grammar
 * (nvme/uri.c, src/README.md "Target URIs"), this scheme's keys and an absolute path. */
static int parse_uri(const char *uri, int *is_blk, char *path, size_t pathlen, char *backend, size_t backendlen,
                     int *allow_write, char *err, size_t errlen)
{
    static const char *const known[] = {"backend", "allow_write", NULL};
    struct nvme_uri *u = NULL;
    int rc = nvme_uri_parse(uri, &u, err, errlen);
    if (rc)
        return rc;
    const char *example = "file:///tmp/data.bin or blk:///dev/nvme0n1";
    bool aw = false;
    if (strcmp(u->scheme, "file") != 0 && strcmp(u->scheme, "blk") != 0) {
        snprintf(err, errlen, "%s: not a kernel-path URI (expected %s)", uri, example);
        rc = -EINVAL;
    } else if (u->authority[0]) {
        snprintf(err, errlen, "%s: '%s' is a host part; the path must be absolute (e.g. %s:///%s%s)", uri, u->authority,
                 u->scheme, u->authority, u->path);
        rc = -EINVAL;
    } else if (u->path[0] != '/') {
        snprintf(err, errlen, "%s: the path must be absolute (e.g. %s)", uri, example);
        rc = -EINVAL;
    } else if (strlen(u->path) >= pathlen) {
        snprintf(err, errlen, "%s: path too long", uri);
        rc = -ENAMETOOLONG;
    } else if (!(rc = nvme_uri_check_keys(u, known, err, errlen)) &&
               !(rc = nvme_uri_get_bool(u, "allow_write", false, &aw, err, errlen))) {
        const char *b = nvme_uri_get(u, "backend");
        if (b && strlen(b) >= backendlen) {
            snprintf(err, errlen, "%s: unknown backend '%s' (use psync or io_uring)", uri, b);
            rc = -EINVAL;
        } else {
            *is_blk = strcmp(u->scheme, "blk") == 0;
            snprintf(path, pathlen, "%s", u->path);
            snprintf(backend, backendlen, "%s", b ? b : "");
            *allow_write = aw;
        }
    }
    nvme_uri_free(u);
    return rc;
}

/* ------------------------------------------------------------------ blk safety */

/* realpath of /sys/dev/block/MAJ:MIN for a device number */
static int sysfs_dev_path(dev_t rdev, char *out, size_t outlen)
{
    char link[64];
    snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(rdev), minor(rdev));
    char buf[PATH_MAX];
    if (!realpath(link, buf))
        return -errno;
    if (strlen(buf) >= outlen)
        return -ENAMETOOLONG;
    strcpy(out, buf);
    return 0;
}

/* does sysfs path `inner` lie at or below `outer` (device itself or a partition)? */
static int sys_within(const char *outer, const char *inner)
{
    size_t n = strlen(outer);
    return !strncmp(outer, inner, n) && (inner[n] == 0 || inner[n] == '/');
}

static int dir_nonempty(const char *dir)
{
    int found = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            found = 1;
            break;
        }
    }
    closedir(d);
    return found;
}

int kio_blk_check(const char *path, int want_write, int allow_write, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st)) {
        int e = errno;
        snprintf(err, errlen, "blk://%s: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISBLK(st.st_mode)) {
        snprintf(err, errlen, "blk://%s: not a block device (use file:// for regular files)", path);
        return -ENOTBLK;
    }
    if (want_write && !allow_write) {
        snprintf(err, errlen, "blk://%s: this run writes to the device; refused unless allow_write=1 is given", path);
        return -EPERM;
    }
    char me[PATH_MAX];
    int rc = sysfs_dev_path(st.st_rdev, me, sizeof(me));
    if (rc) {
        snprintf(err, errlen, "blk://%s: cannot resolve its sysfs entry (%s)", path, strerror(-rc));
        return rc;
    }
    /* holders (device-mapper, md, ...) of the device or any partition of it */
    char holders[PATH_MAX + 16];
    snprintf(holders, sizeof(holders), "%s/holders", me);
    if (dir_nonempty(holders)) {
        snprintf(err, errlen, "blk://%s: refused, the device is held by another driver (see %s)", path, holders);
        return -EBUSY;
    }
    /* mounted: any mount source or swap area that is this device or one of its partitions */
    const char *tables[] = {"/proc/self/mounts", "/proc/swaps"};
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        FILE *f = fopen(tables[t], "r");
        if (!f)
            continue;
        char line[4096];
        while (fgets(line, sizeof(line), f)) {
            char src[PATH_MAX];
            if (sscanf(line, "%4095s", src) != 1 || strncmp(src, "/dev/", 5))
                continue;
            struct stat s2;
            if (stat(src, &s2) || !S_ISBLK(s2.st_mode))
                continue;
            char other[PATH_MAX];
            if (sysfs_dev_path(s2.st_rdev, other, sizeof(other)))
                continue;
            if (sys_within(me, other)) {
                fclose(f);
                snprintf(err, errlen, "blk://%s: refused, %s is %s (%s)", path, src, t == 0 ? "mounted" : "a swap area",
                         tables[t]);
                return -EBUSY;
            }
        }
        fclose(f);
    }
    return 0;
}

/* ------------------------------------------------------------------ psync */

/* A psync channel holds qdepth slots; submit() performs the I/O at once and queues
 * its completion, so exactly one command is ever at the device. The perf engine
 * asks for qdepth=1 (dev.max_qdepth); blksum keeps Q slots so that the hash threads
 * work on earlier chunks while the next one is read. */
/* A channel's I/O buffers: anonymous pages, page-aligned and zero-filled by the kernel when first
 * touched, so a channel costs resident memory only for the slots it uses (a short file read with
 * queue depth 16 touches one). NULL when the mapping fails. */
static unsigned char *bufs_alloc(size_t total)
{
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void bufs_free(unsigned char *p, size_t total)
{
    if (p)
        munmap(p, total);
}

struct psync_cpl {
    uint32_t slot;
    int status;
};

struct psync_chan {
    struct perf_chan pub;
    int fd;
    int stream; /* a pipe: read(2) in order, a short read ends the stream */
    uint32_t iosize, lba_size, qdepth;
    uint8_t *bufs;         /* qdepth * iosize */
    uint32_t *xfer;        /* bytes moved by the last command of each slot */
    struct psync_cpl *cpl; /* completions awaiting reap: a ring of qdepth */
    uint32_t head, count;
};

static int psync_open(void *vctx, uint32_t dev, uint32_t qdepth, uint32_t iosize, struct perf_chan **out, char *err,
                      size_t errlen)
{
    struct kio_ctx *ctx = vctx;
    (void)dev;
    struct psync_chan *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    size_t total = (size_t)qdepth * iosize;
    c->xfer = calloc(qdepth, sizeof(*c->xfer));
    c->cpl = calloc(qdepth, sizeof(*c->cpl));
    if (!c->xfer || !c->cpl || !(c->bufs = bufs_alloc(total))) {
        free(c->xfer);
        free(c->cpl);
        free(c);
        snprintf(err, errlen, "psync: cannot allocate %zu bytes of buffers", total);
        return -ENOMEM;
    }
    c->fd = ctx->fd;
    c->stream = ctx->stream;
    c->iosize = iosize;
    c->qdepth = qdepth;
    c->lba_size = ctx->lba_size;
    *out = &c->pub;
    return 0;
}

static void psync_close(struct perf_chan *ch)
{
    struct psync_chan *c = (struct psync_chan *)ch;
    bufs_free(c->bufs, (size_t)c->qdepth * c->iosize);
    free(c->xfer);
    free(c->cpl);
    free(c);
}

static void *psync_buf(struct perf_chan *ch, uint32_t slot)
{
    struct psync_chan *c = (struct psync_chan *)ch;
    return c->bufs + (size_t)slot * c->iosize;
}

/* The whole transfer, resumed after short counts and EINTR; a stream ends at EOF. */
static int psync_xfer(struct psync_chan *c, int write, uint8_t *buf, size_t len, off_t off, uint32_t *moved)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n;
        if (c->stream)
            n = read(c->fd, buf + done, len - done);
        else if (write)
            n = pwrite(c->fd, buf + done, len - done, off + (off_t)done);
        else
            n = pread(c->fd, buf + done, len - done, off + (off_t)done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            *moved = (uint32_t)done;
            return -errno;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    *moved = (uint32_t)done;
    if (done < len && !c->stream)
        return -ENODATA; /* the file ended inside the command: it shrank */
    return 0;
}

static int psync_submit(struct perf_chan *ch, uint32_t slot, int write, uint64_t slba, uint32_t nlb)
{
    struct psync_chan *c = (struct psync_chan *)ch;
    if (c->count == c->qdepth)
        return -EBUSY;
    int st = psync_xfer(c, write, c->bufs + (size_t)slot * c->iosize, (size_t)nlb * c->lba_size,
                        (off_t)(slba * c->lba_size), &c->xfer[slot]);
    c->cpl[(c->head + c->count) % c->qdepth] = (struct psync_cpl){slot, st};
    c->count++;
    return 0;
}

static int psync_kick(struct perf_chan *ch, uint32_t wait_min)
{
    (void)ch;
    (void)wait_min;
    return 0;
}

static int psync_reap(struct perf_chan *ch, uint32_t max)
{
    struct psync_chan *c = (struct psync_chan *)ch;
    uint32_t n = 0;
    while (c->count && n < max) {
        struct psync_cpl e = c->cpl[c->head];
        c->head = (c->head + 1) % c->qdepth;
        c->count--;
        c->pub.done(&c->pub, e.slot, e.status);
        n++;
    }
    return (int)n;
}

static uint32_t psync_chan_xfer(struct perf_chan *ch, uint32_t slot)
{
    return ((struct psync_chan *)ch)->xfer[slot];
}

static int kio_write_sync(void *vctx, uint32_t dev, uint64_t slba, const void *buf, size_t len)
{
    struct kio_ctx *ctx = vctx;
    (void)dev;
    void *bounce;
    if (posix_memalign(&bounce, KIO_BUF_ALIGN, len))
        return -ENOMEM;
    memcpy(bounce, buf, len);
    ssize_t n = pwrite(ctx->fd, bounce, len, (off_t)(slba * ctx->lba_size));
    int rc = n < 0 ? -errno : ((size_t)n == len ? 0 : -EIO);
    free(bounce);
    if (!rc && fdatasync(ctx->fd))
        rc = -errno;
    return rc;
}

static void kio_destroy(void *vctx)
{
    struct kio_ctx *ctx = vctx;
    if (ctx->owns_fd && ctx->fd >= 0)
        close(ctx->fd);
    free(ctx);
}

static const struct perf_backend_ops psync_ops = {
    .chan_open = psync_open,
    .chan_close = psync_close,
    .chan_buf = psync_buf,
    .submit = psync_submit,
    .kick = psync_kick,
    .reap = psync_reap,
    .destroy = kio_destroy,
    .write_sync = kio_write_sync,
    .chan_xfer = psync_chan_xfer,
};

/* ------------------------------------------------------------------ io_uring */

struct uring_chan {
    struct perf_chan pub;
    struct uring ring;
    uint32_t iosize, lba_size, qdepth;
    int fixed_files, fixed_bufs;
    int fd;
    uint8_t *bufs; /* qdepth * iosize, page aligned */
    struct iovec *iov;
    uint32_t queued; /* SQEs prepared since the last kick */
};

static int uchan_open(void *vctx, uint32_t dev, uint32_t qdepth, uint32_t iosize, struct perf_chan **out, char *err,
                      size_t errlen)
{
    struct kio_ctx *ctx = vctx;
    (void)dev;
    struct uring_chan *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->iosize = iosize;
    c->qdepth = qdepth;
    c->lba_size = ctx->lba_size;
    c->fd = ctx->fd;
    size_t total = (size_t)qdepth * iosize;
    if (!(c->bufs = bufs_alloc(total))) {
        free(c);
        snprintf(err, errlen, "io_uring: cannot allocate %zu bytes of buffers", total);
        return -ENOMEM;
    }
    c->iov = calloc(qdepth, sizeof(*c->iov));
    if (!c->iov) {
        bufs_free(c->bufs, total);
        free(c);
        return -ENOMEM;
    }
    /* The owning thread is the only submitter and reaper (chan_open, the hot loop
     * and chan_close all run on the worker thread): single issuer with deferred task
     * work where the kernel has it (uring_init() falls back on older kernels). */
    int rc = uring_init(&c->ring, qdepth, KIO_URING_CQ_PER_SQ * qdepth, true, err, errlen);
    if (rc < 0) {
        free(c->iov);
        bufs_free(c->bufs, total);
        free(c);
        return rc;
    }
    if (uring_register_files(&c->ring, &c->fd, 1) == 0)
        c->fixed_files = 1;
    for (uint32_t i = 0; i < qdepth; i++) {
        c->iov[i].iov_base = c->bufs + (size_t)i * iosize;
        c->iov[i].iov_len = iosize;
    }
    if (uring_register_buffers(&c->ring, c->iov, qdepth) == 0)
        c->fixed_bufs = 1;
    *out = &c->pub;
    return 0;
}

static void uchan_close(struct perf_chan *ch)
{
    struct uring_chan *c = (struct uring_chan *)ch;
    if (c->fixed_bufs)
        uring_unregister_buffers(&c->ring);
    if (c->fixed_files)
        uring_unregister_files(&c->ring);
    uring_exit(&c->ring);
    free(c->iov);
    bufs_free(c->bufs, (size_t)c->qdepth * c->iosize);
    free(c);
}

static void *uchan_buf(struct perf_chan *ch, uint32_t slot)
{
    struct uring_chan *c = (struct uring_chan *)ch;
    return c->bufs + (size_t)slot * c->iosize;
}

static int uchan_submit(struct perf_chan *ch, uint32_t slot, int write, uint64_t slba, uint32_t nlb)
{
    struct uring_chan *c = (struct uring_chan *)ch;
    struct io_uring_sqe *sqe = uring_get_sqe(&c->ring);
    if (!sqe)
        return -EBUSY;
    void *buf = c->bufs + (size_t)slot * c->iosize;
    unsigned len = nlb * c->lba_size;
    uint64_t off = slba * c->lba_size;
    int fd = c->fixed_files ? 0 : c->fd;
    uint8_t op = c->fixed_bufs ? (write ? IORING_OP_WRITE_FIXED : IORING_OP_READ_FIXED)
                               : (write ? IORING_OP_WRITE : IORING_OP_READ);
    uring_prep_rw(sqe, op, fd, buf, len, off, slot, ((uint64_t)len << 32) | slot);
    if (c->fixed_files)
        sqe->flags |= IOSQE_FIXED_FILE;
    c->queued++;
    return 0;
}

static int uchan_kick(struct perf_chan *ch, uint32_t wait_min)
{
    struct uring_chan *c = (struct uring_chan *)ch;
    if (!c->queued && !wait_min)
        return 0;
    int rc = uring_submit(&c->ring, wait_min);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
        return rc;
    c->queued = 0;
    return 0;
}

static int uchan_reap(struct perf_chan *ch, uint32_t max)
{
    struct uring_chan *c = (struct uring_chan *)ch;
    unsigned ready = uring_cq_ready(&c->ring), n = 0;
    for (; n < ready && n < max; n++) {
        const struct io_uring_cqe *cqe = uring_cqe_at(&c->ring, n);
        uint32_t slot = (uint32_t)cqe->user_data;
        uint32_t len = (uint32_t)(cqe->user_data >> 32);
        /* a short transfer on a file means it ended inside the command (it shrank) */
        int st = cqe->res < 0 ? cqe->res : ((uint32_t)cqe->res == len ? 0 : -ENODATA);
        c->pub.done(&c->pub, slot, st);
    }
    if (n)
        uring_cq_advance(&c->ring, n);
    else if (uring_needs_enter(&c->ring))
        uring_get_events(&c->ring); /* let the kernel post completions it holds */
    return (int)n;
}

static const struct perf_backend_ops uring_ops = {
    .chan_open = uchan_open,
    .chan_close = uchan_close,
    .chan_buf = uchan_buf,
    .submit = uchan_submit,
    .kick = uchan_kick,
    .reap = uchan_reap,
    .destroy = kio_destroy,
    .write_sync = kio_write_sync,
};

int kio_io_uring_available(void)
{
    return uring_probe(NULL, 0) == 0;
}

/* ------------------------------------------------------------------ open */

/* The perf_target over an open descriptor: lba_size 512 for O_DIRECT files, the
 * device's for blk://, 1 (byte granular) for a descriptor handed in. */
static int make_target(int fd, int owns_fd, enum kio_kind kind, const char *backend, uint32_t lba_size, uint64_t bytes,
                       int stream, struct perf_target **out)
{
    struct kio_ctx *ctx = calloc(1, sizeof(*ctx));
    struct perf_target *t = calloc(1, sizeof(*t));
    if (!ctx || !t) {
        free(ctx);
        free(t);
        return -ENOMEM;
    }
    ctx->kind = kind;
    ctx->fd = fd;
    ctx->owns_fd = owns_fd;
    ctx->stream = stream;
    ctx->lba_size = lba_size;
    t->ops = kind == KIO_PSYNC ? &psync_ops : &uring_ops;
    t->ctx = ctx;
    t->ndevs = 1;
    t->flags = PERF_TGT_BLOCKING | (kind == KIO_PSYNC ? PERF_TGT_SYNC : 0);
    snprintf(t->backend, sizeof(t->backend), "%s", backend);
    t->dev[0].lba_size = lba_size;
    t->dev[0].nlbas = bytes / lba_size;
    t->dev[0].nsid = 0;
    t->dev[0].max_qdepth = kind == KIO_PSYNC ? 1 : KIO_URING_MAX_QDEPTH;
    t->default_batch = kind == KIO_URING ? KIO_URING_SUBMIT_BATCH : 0;
    t->dev[0].max_io_bytes = owns_fd ? KIO_MAX_IO_BYTES : UINT32_MAX;
    *out = t;
    return 0;
}

int kio_target_open(const char *uri, const struct perf_target_opts *opts, struct perf_target **out, char *err,
                    size_t errlen)
{
    int is_blk = 0, allow_write = 0;
    char path[PATH_MAX], backend[PERF_NAMELEN] = "";
    int rc = parse_uri(uri, &is_blk, path, sizeof(path), backend, sizeof(backend), &allow_write, err, errlen);
    if (rc)
        return rc;
    if (opts && opts->backend && opts->backend[0]) {
        if (backend[0] && strcmp(backend, opts->backend)) {
            snprintf(err, errlen, "%s: the URI asks for backend=%s but backend=%s was given", uri, backend,
                     opts->backend);
            return -EINVAL;
        }
        snprintf(backend, sizeof(backend), "%s", opts->backend);
    }
    if (!backend[0])
        strcpy(backend, "io_uring");
    if (opts && opts->allow_write)
        allow_write = 1;
    int need_write = opts ? opts->need_write : 0;

    enum kio_kind kind;
    if (!strcmp(backend, "psync"))
        kind = KIO_PSYNC;
    else if (!strcmp(backend, "io_uring")) {
        kind = KIO_URING;
        char why[PERF_ERRLEN];
        rc = uring_probe(why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "%s: backend=io_uring: %s", uri, why);
            return rc;
        }
    } else {
        snprintf(err, errlen, "%s: unknown backend '%s' (use psync or io_uring)", uri, backend);
        return -EINVAL;
    }

    if (is_blk) {
        rc = kio_blk_check(path, need_write, allow_write, err, errlen);
        if (rc)
            return rc;
    } else {
        struct stat st;
        if (stat(path, &st)) {
            int e = errno;
            if (e == ENOENT)
                snprintf(err, errlen, "%s: no such file (create one with nvmelab.engines.perf.make_file(path, size))",
                         uri);
            else
                snprintf(err, errlen, "%s: %s", uri, strerror(e));
            return -e;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(err, errlen, "%s: not a regular file (use blk:// for block devices)", uri);
            return -EINVAL;
        }
    }

    int flags = (need_write ? O_RDWR : O_RDONLY) | O_DIRECT | O_CLOEXEC | (is_blk ? O_EXCL : 0);
    int fd = open(path, flags);
    if (fd < 0) {
        int e = errno;
        if (e == EINVAL)
            snprintf(err, errlen, "%s: the file system does not support O_DIRECT; put the file on another file system",
                     uri);
        else if (e == EBUSY)
            snprintf(err, errlen, "%s: device busy (in use by the kernel)", uri);
        else
            snprintf(err, errlen, "%s: cannot open: %s", uri, strerror(e));
        return -e;
    }
    uint32_t lba_size = KIO_FILE_LBA_SIZE;
    uint64_t bytes = 0;
    if (is_blk) {
        int ssz = 0;
        if (ioctl(fd, BLKSSZGET, &ssz) == 0 && ssz > 0)
            lba_size = (uint32_t)ssz;
        if (ioctl(fd, BLKGETSIZE64, &bytes)) {
            int e = errno;
            close(fd);
            snprintf(err, errlen, "%s: cannot read the device size: %s", uri, strerror(e));
            return -e;
        }
    } else {
        struct stat st;
        fstat(fd, &st);
        bytes = (uint64_t)st.st_size;
    }
    if (bytes < lba_size) {
        close(fd);
        snprintf(err, errlen, "%s: holds %llu bytes, less than one %u-byte block (make_file writes a usable file)", uri,
                 (unsigned long long)bytes, lba_size);
        return -EINVAL;
    }
    rc = make_target(fd, 1, kind, backend, lba_size, bytes, 0, out);
    if (rc < 0)
        close(fd);
    else
        snprintf(((struct kio_ctx *)(*out)->ctx)->path, PATH_MAX, "%s", path);
    return rc;
}

int kio_target_from_fd(int fd, const char *backend, struct perf_target **out, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        snprintf(err, errlen, "descriptor %d: %s", fd, strerror(e));
        return -e;
    }
    uint64_t bytes = 0;
    int stream = 0;
    if (S_ISREG(st.st_mode)) {
        bytes = (uint64_t)st.st_size;
    } else if (S_ISBLK(st.st_mode)) {
        if (ioctl(fd, BLKGETSIZE64, &bytes)) {
            int e = errno;
            snprintf(err, errlen, "descriptor %d: cannot read the device size: %s", fd, strerror(e));
            return -e;
        }
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)) {
        stream = 1;
        bytes = UINT64_MAX;
    } else {
        snprintf(err, errlen, "descriptor %d: not a file, block device or pipe", fd);
        return -EINVAL;
    }
    enum kio_kind kind = KIO_PSYNC;
    if (!strcmp(backend, "io_uring") && !stream) {
        char why[PERF_ERRLEN];
        int rc = uring_probe(why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "backend=io_uring: %s", why);
            return rc;
        }
        kind = KIO_URING;
    } else if (strcmp(backend, "psync") && strcmp(backend, "io_uring")) {
        snprintf(err, errlen, "unknown backend '%s' (use psync or io_uring)", backend);
        return -EINVAL;
    }
    return make_target(fd, 0, kind, kind == KIO_URING ? "io_uring" : (stream ? "read" : "psync"), 1, bytes, stream,
                       out);
}
