/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qcow2_internal.h — what the direct qcow2 reader's two files share: qcow2.c (the tables, the
 * allocation map and the reads) and qcow2_header.c (the header, checked field by field).
 *
 * Key functions:
 *   qcow2_check_header()  every header field, header extension and table offset checked as qemu
 *                         checks them when it opens an image, with overflow-safe arithmetic; fills
 *                         the geometry the reader works with
 *   qcow2_pread()         exact reads (a short one is -EIO); qcow2_pread_zero() reads past the end
 *                         of the file as zeros, as qemu does for the metadata it reads at open
 * Errors: negative errno with one line in err naming the field: -EINVAL or -EFBIG for an image qemu
 * refuses as corrupt, -ENOTSUP for a sound image that uses a feature qemu reads and this reader does
 * not (a backing file, an external data file, extended L2 entries, the corrupt bit; compressed
 * clusters are found in the L2 tables), -ENOKEY for an encrypted one.
 */
#ifndef NVMELAB_BLKSUM_QCOW2_INTERNAL_H
#define NVMELAB_BLKSUM_QCOW2_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Table entries */
#define QE_OFFSET_MASK    0x00fffffffffffe00ull /* bits 9-55 */
#define QE_COMPRESSED     (1ull << 62)
#define QE_ZERO           1ull
#define QCOW2_ENTRY_BYTES 8u

/* What the header says, checked. */
struct qcow2_geom {
    uint32_t version;      /* 2 or 3 */
    unsigned cluster_bits; /* 9-21 */
    unsigned l2_bits;      /* cluster_bits - 3: entries per L2 table = 1 << l2_bits */
    uint64_t cluster_size, per_l2;
    uint64_t size;      /* guest bytes, whole 512-byte sectors, at most qemu's limit (< 2^63) */
    uint64_t nclusters; /* guest clusters: ceil(size / cluster_size), no wrap */
    uint64_t file_size;
    uint64_t l1_offset; /* cluster-aligned; the l1_need entries lie within the file */
    uint64_t l1_need;   /* L1 entries that cover the guest: ceil(nclusters / per_l2) <= l1_size */
};

/* Write one line into err (may be NULL) and return rc. */
int qcow2_say(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
uint64_t qcow2_be64(const unsigned char *p);
uint32_t qcow2_be32(const unsigned char *p);
/* Exactly len bytes at off: -EIO when the file ends first. */
int qcow2_pread(int fd, void *buf, size_t len, uint64_t off);
/* len bytes at off, what lies past the end of the file (file_size) read as zeros. */
int qcow2_pread_zero(int fd, void *buf, size_t len, uint64_t off, uint64_t file_size);

/* Check the header of the qcow2 image open at fd (file_size bytes) and fill g; name is for messages. */
int qcow2_check_header(int fd, uint64_t file_size, struct qcow2_geom *g, const char *name, char *err, size_t errlen);

#endif /* NVMELAB_BLKSUM_QCOW2_INTERNAL_H */
