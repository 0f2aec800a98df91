/* SPDX-License-Identifier: BSD-3-Clause */
/* image.c — pick the reader for a name (image.h): an NBD URI, an engine URI (both told by their scheme's
 * row, nvme/scheme.h), a qcow2 file (direct reader or qemu-nbd), or the raw bytes of a file, block device
 * or pipe; and the NBD parts' stand-ins when libnbd was not found at configure time. */
#include "blksum/image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvme/scheme.h"

#define QCOW2_MAGIC_BYTES 4u

int blksum_mode_parse(const char *name, enum blksum_mode *out)
{
    static const char *const names[] = {"auto", "file", "nbd", "qcow2"};
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (name && strcmp(name, names[i]) == 0) {
            *out = (enum blksum_mode)i;
            return 0;
        }
    }
    return -EINVAL;
}

bool blksum_is_nbd_uri(const char *name)
{
    const struct nvme_scheme *row = nvme_scheme_of_uri(name);
    return row && (row->flags & NVME_SCHEME_NBD_EXPORT);
}

static bool is_engine_uri(const char *name)
{
    const struct nvme_scheme *row = nvme_scheme_of_uri(name);
    return row && (row->flags & NVME_SCHEME_IMAGE);
}

/* Whether the regular file at fd starts with qcow2's magic. */
static bool has_qcow2_magic(int fd)
{
    unsigned char m[QCOW2_MAGIC_BYTES];
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || pread(fd, m, sizeof(m), 0) != (ssize_t)sizeof(m))
        return false;
    return ((uint32_t)m[0] << 24 | (uint32_t)m[1] << 16 | (uint32_t)m[2] << 8 | m[3]) == BLKSUM_QCOW2_MAGIC;
}

/* A sound qcow2 that the direct reader does not read (err says why) and qemu does: mode auto serves it
 * with qemu-nbd, as the original tool reads every image, and says so in err (rc 0); without qemu-nbd or
 * libnbd, one error naming the feature and what is missing. */
static int serve_instead(struct blksum_source *src, const char *name, bool *note, char *err, size_t errlen)
{
    char why[BLKSUM_IMAGE_ERRLEN], served[BLKSUM_IMAGE_ERRLEN];
    const char *no_nbd;
    snprintf(why, sizeof(why), "%s", err);
    if (!blksum_have_nbd(&no_nbd)) {
        snprintf(err, errlen, "%s, and this build cannot serve it with qemu-nbd: %s", why, no_nbd);
        return -ENOTSUP;
    }
    int rc = blksum_nbd_serve(src, name, "qcow2", served, sizeof(served));
    if (rc == 0) {
        snprintf(err, errlen, "%s; reading it through qemu-nbd", why);
        *note = true;
        return 0;
    }
    size_t skip = strncmp(served, name, strlen(name)) == 0 && !strncmp(served + strlen(name), ": ", 2)
                      ? strlen(name) + 2
                      : 0; /* the name is said once */
    snprintf(err, errlen, "%s, and qemu-nbd did not serve it: %s", why, served + skip);
    return rc;
}

static int open_image(struct blksum_source *src, const char *name, enum blksum_mode mode, bool *note, char *err,
                      size_t errlen)
{
    int rc;
    memset(src, 0, sizeof(*src));
    src->fd = -1;
    if (!name || !*name) {
        snprintf(err, errlen, "no image named");
        return -EINVAL;
    }
    if (blksum_is_nbd_uri(name)) {
        if (mode != BLKSUM_MODE_AUTO && mode != BLKSUM_MODE_NBD) {
            snprintf(err, errlen, "%s: an NBD URI is read with mode nbd (or auto)", name);
            return -EINVAL;
        }
        return blksum_nbd_connect(src, name, err, errlen);
    }
    if (is_engine_uri(name)) {
        if (mode != BLKSUM_MODE_AUTO) {
            snprintf(err, errlen, "%s: an engine target URI is read with mode auto", name);
            return -EINVAL;
        }
        return blksum_source_open_uri(src, name, 0, err, errlen);
    }
    rc = blksum_source_open(src, name);
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", name, strerror(-rc));
        return rc;
    }
    bool qcow2 = src->seekable && has_qcow2_magic(src->fd);
    if (mode == BLKSUM_MODE_NBD) {
        if (!src->seekable) {
            blksum_source_close(src);
            snprintf(err, errlen, "%s: a pipe cannot be served by qemu-nbd", name);
            return -EINVAL;
        }
        blksum_source_close(src);
        return blksum_nbd_serve(src, name, qcow2 ? "qcow2" : "raw", err, errlen);
    }
    if (mode == BLKSUM_MODE_QCOW2 || (mode == BLKSUM_MODE_AUTO && qcow2)) {
        int fd = src->fd;
        rc = blksum_qcow2_open(src, fd, name, err, errlen);
        if (rc < 0) {
            src->fd = fd;
            src->owns_fd = true;
            blksum_source_close(src);
            if (rc == -ENOTSUP && mode == BLKSUM_MODE_AUTO)
                return serve_instead(src, name, note, err, errlen);
            if (rc == -ENOTSUP)
                snprintf(err + strlen(err), errlen - strlen(err), " (try --mode nbd)");
            return rc;
        }
        src->fd = fd; /* closed by blksum_source_close after the target */
        src->owns_fd = true;
    }
    return 0;
}

int blksum_source_open_image(struct blksum_source *src, const char *name, enum blksum_mode mode, char *err,
                             size_t errlen)
{
    bool note = false;
    int rc = open_image(src, name, mode, &note, err, errlen);
    if (rc == 0 && !note && errlen)
        err[0] = '\0'; /* on success only the info line (a retry's message, say, is no news) */
    return rc;
}

/* ---------------------------------------------------------------- stand-ins without libnbd */

#ifndef NVMELAB_HAVE_NBD
#ifdef NVMELAB_NBD_WHY
#define NO_NBD_WHY NVMELAB_NBD_WHY /* the configure step's reason (src/blksum/CMakeLists.txt) */
#else
#define NO_NBD_WHY "libnbd was not found at configure time (install libnbd-dev and pkg-config, then rebuild)"
#endif

bool blksum_have_nbd(const char **why)
{
    if (why)
        *why = NO_NBD_WHY;
    return false;
}

int blksum_nbd_connect(struct blksum_source *src, const char *uri, char *err, size_t errlen)
{
    (void)src;
    snprintf(err, errlen, "%s: this build cannot read NBD (no libnbd): %s", uri, NO_NBD_WHY);
    return -ENOTSUP;
}

int blksum_nbd_serve(struct blksum_source *src, const char *path, const char *format, char *err, size_t errlen)
{
    (void)src, (void)format;
    snprintf(err, errlen, "%s: this build cannot read through qemu-nbd (no libnbd): %s", path, NO_NBD_WHY);
    return -ENOTSUP;
}
#endif
