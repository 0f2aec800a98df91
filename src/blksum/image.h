/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * image.h — what blksum reads beyond a plain descriptor: qcow2 images (a direct reader, no server),
 * NBD exports (libnbd: an nbd:// URI, or a qemu-nbd that blksum starts and stops itself), and the
 * one dispatcher that picks the reader for a name.
 *
 * Every source opened here is a target source (src->target, io = BLKSUM_IO_TARGET) with an
 * allocation map (src->map): unallocated and zero regions are never read and hash as zero blocks,
 * exactly as holes of a sparse file do, so the digest equals the one of the raw image.
 *
 * Key functions:
 *   blksum_source_open_image()  by name and mode: a file or block device, a qcow2 file (direct
 *                               reader), any image qemu reads (served by qemu-nbd), an NBD URI,
 *                               or an engine URI (emu://, pci://, file://, blk://)
 *   blksum_qcow2_open()         the direct qcow2 reader over an open descriptor
 *   blksum_nbd_connect()        an NBD URI (nbd://, nbd+unix://, ...)
 *   blksum_nbd_serve()          start qemu-nbd on a private unix socket and connect to it
 *   blksum_have_nbd()           whether this build has libnbd (and why not)
 *
 * The qcow2 reader checks every header field and table as qemu does when it opens an image and
 * refuses what qemu refuses as corrupt, with one line naming the field; its memory is bounded by the
 * file (the L1 table and a few L2 tables), not by the guest size.
 *
 * Caveats: the direct reader reads qcow2 versions 2 and 3 without a backing file, encryption, an
 * external data file, extended L2 entries, compressed clusters or the corrupt bit. Such an image that
 * qemu reads (all but encryption) makes blksum_qcow2_open() return -ENOTSUP; mode auto then serves
 * it with qemu-nbd and says why in err (a successful open with a non-empty err: one info line for the
 * caller to show), so every image qemu reads gets the digest of mode nbd; without qemu-nbd or libnbd
 * it fails naming the feature and what is missing. Mode qcow2 refuses it. The NBD parts exist only
 * when libnbd was found at configure time; otherwise they fail with -ENOTSUP and the reason.
 * Errors: negative errno, with one line in err (BLKSUM_IMAGE_ERRLEN bytes hold any of them).
 */
#ifndef NVMELAB_BLKSUM_IMAGE_H
#define NVMELAB_BLKSUM_IMAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "blksum/blksum.h"

#ifdef __cplusplus
extern "C" {
#endif

enum blksum_mode {
    BLKSUM_MODE_AUTO = 0, /* NBD URI via libnbd, qcow2 via the direct reader (or qemu-nbd: see above), else raw bytes */
    BLKSUM_MODE_FILE = 1, /* the bytes of the file as they are (raw) */
    BLKSUM_MODE_NBD = 2,  /* served by qemu-nbd (format probed: qcow2 or raw), read with libnbd */
    BLKSUM_MODE_QCOW2 = 3 /* the direct qcow2 reader; a file that is not qcow2 is an error */
};

/** qcow2's magic, the first four bytes of the file ("QFI\xfb"). */
/** A size for err that holds every message of this header's functions. */
#define BLKSUM_IMAGE_ERRLEN 512u
#define BLKSUM_QCOW2_MAGIC  0x514649fbu

/** "auto", "file", "nbd", "qcow2" -> mode; -EINVAL for anything else. */
int blksum_mode_parse(const char *name, enum blksum_mode *out);
/** True for the URI schemes libnbd reads: the NVME_SCHEME_NBD_EXPORT rows of nvme/scheme.h (nbd://, nbds://,
 * nbd+unix://, nbds+unix://, nbd+vsock://, nbds+vsock://; any case). */
bool blksum_is_nbd_uri(const char *name);

/** Open name for reading by mode. The source's io must then be BLKSUM_IO_TARGET when src->target is
 * set. Returns 0 or -errno, with one line in err; on success err is empty, or holds one info line to
 * show (mode auto reads a qcow2 through qemu-nbd, and why). */
int blksum_source_open_image(struct blksum_source *src, const char *name, enum blksum_mode mode, char *err,
                             size_t errlen);

/** The direct qcow2 reader over fd (kept open by the caller until blksum_source_close). -ENOTSUP: a
 * sound image with a feature qemu reads and this reader does not; -ENOKEY: encrypted; -EINVAL or
 * -EFBIG: an image qemu refuses too (err names the field). */
int blksum_qcow2_open(struct blksum_source *src, int fd, const char *name, char *err, size_t errlen);

/** Whether this build can read NBD; why names the reason when not (NULL allowed). */
bool blksum_have_nbd(const char **why);
/** Connect to an NBD URI. */
int blksum_nbd_connect(struct blksum_source *src, const char *uri, char *err, size_t errlen);
/** Serve path (format "qcow2" or "raw") with qemu-nbd on a unix socket in a private temporary
 * directory and connect to it; the socket and directory are removed as soon as the connection
 * stands, and qemu-nbd ends with the connection (blksum_source_close) or with this process. */
int blksum_nbd_serve(struct blksum_source *src, const char *path, const char *format, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* NVMELAB_BLKSUM_IMAGE_H */
