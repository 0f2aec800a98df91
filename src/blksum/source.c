/* SPDX-License-Identifier: BSD-3-Clause */
/* source.c — open what blksum reads: a regular file, a block device, a pipe, or a target of the
 * engine layer (src/engine/backend.h) named by a URI. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blksum/blksum.h"

static void probe_sparse(struct blksum_source *src)
{
    /* SEEK_DATA either finds data, or fails with ENXIO when none is left (an empty or
     * fully sparse file); any other failure means the file system cannot tell us. */
    off_t r = lseek(src->fd, 0, SEEK_DATA);
    src->sparse = (r >= 0 || errno == ENXIO);
    (void)lseek(src->fd, 0, SEEK_SET);
}

int blksum_source_from_fd(struct blksum_source *src, int fd)
{
    struct stat st;
    memset(src, 0, sizeof(*src));
    src->fd = -1;
    if (fd < 0)
        return -EBADF;
    if (fstat(fd, &st) < 0)
        return -errno;
    src->fd = fd;
    if (S_ISDIR(st.st_mode)) {
        src->fd = -1;
        return -EISDIR;
    }
    if (S_ISREG(st.st_mode)) {
        src->kind = "file";
        src->seekable = true;
        src->size = (uint64_t)st.st_size;
        probe_sparse(src);
    } else if (S_ISBLK(st.st_mode)) {
        uint64_t bytes = 0;
        if (ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
            int e = -errno;
            src->fd = -1;
            return e;
        }
        src->kind = "block";
        src->seekable = true;
        src->size = bytes;
        probe_sparse(src);
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)) {
        src->kind = "pipe";
        src->seekable = false;
        src->sparse = false;
        src->size = 0;
    } else {
        src->fd = -1;
        return -EINVAL;
    }
    return 0;
}

int blksum_source_open(struct blksum_source *src, const char *path)
{
    int fd, rc;
    memset(src, 0, sizeof(*src));
    src->fd = -1;
    if (!path || !*path)
        return -EINVAL;
    if (strcmp(path, "-") == 0)
        return blksum_source_from_fd(src, STDIN_FILENO);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    rc = blksum_source_from_fd(src, fd);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    src->owns_fd = true;
    return 0;
}

int blksum_source_open_uri(struct blksum_source *src, const char *uri, uint32_t nsid, char *err, size_t errlen)
{
    struct perf_target_opts o = {.nsid = nsid};
    memset(src, 0, sizeof(*src));
    src->fd = -1;
    int rc = perf_target_open(uri, &o, &src->target, err, errlen);
    if (rc < 0)
        return rc;
    const struct perf_dev_info *d = &src->target->dev[0];
    src->dev = 0;
    src->kind = "target";
    src->seekable = true;
    src->sparse = false;
    src->size = d->nlbas * (uint64_t)d->lba_size;
    return 0;
}

int blksum_source_region(const struct blksum_source *src, uint64_t off, uint64_t *end, bool *zero)
{
    if (src->map)
        return src->map(src->map_ctx, off, end, zero);
    off_t d = lseek(src->fd, (off_t)off, SEEK_DATA);
    if (d < 0 && errno != ENXIO)
        return -errno;
    if (d < 0 || (uint64_t)d >= src->size) {
        *zero = true;
        *end = src->size;
    } else if ((uint64_t)d > off) {
        *zero = true;
        *end = (uint64_t)d;
    } else {
        off_t h = lseek(src->fd, (off_t)off, SEEK_HOLE);
        if (h < 0)
            return -errno;
        *zero = false;
        *end = (uint64_t)h > src->size ? src->size : (uint64_t)h;
    }
    return 0;
}

const char *blksum_source_describe(const struct blksum_source *src)
{
    return src->target ? src->target->describe : "";
}

void blksum_source_close(struct blksum_source *src)
{
    if (src->target)
        perf_target_close(src->target);
    src->target = NULL;
    if (src->owns_fd && src->fd >= 0)
        close(src->fd);
    src->fd = -1;
    src->owns_fd = false;
}
