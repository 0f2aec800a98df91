/* SPDX-License-Identifier: BSD-3-Clause */
/* qcow2_header.c — the qcow2 header checked field by field (qcow2_internal.h), as qemu 7.2 checks it when
 * it opens an image: what qemu refuses is refused here with one line naming the field, the tables'
 * offsets and sizes are checked with arithmetic that cannot wrap, and a sound image that uses a feature
 * qemu reads and the direct reader does not is told apart (-ENOTSUP) so that mode auto can hand it to
 * qemu-nbd. Layout: QEMU's docs/interop/qcow2.txt; the limits are qemu's (named below).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blksum/image.h"
#include "blksum/qcow2_internal.h"

/* Header fields (byte offsets) */
#define QH_MAGIC          0
#define QH_VERSION        4
#define QH_BACKING_OFFSET 8
#define QH_BACKING_SIZE   16
#define QH_CLUSTER_BITS   20
#define QH_SIZE           24
#define QH_CRYPT_METHOD   32
#define QH_L1_SIZE        36
#define QH_L1_OFFSET      40
#define QH_RT_OFFSET      48
#define QH_RT_CLUSTERS    56
#define QH_NB_SNAPSHOTS   60
#define QH_SNAPSHOTS      64
#define QH_INCOMPAT       72
#define QH_AUTOCLEAR      88
#define QH_REFCOUNT_ORDER 96
#define QH_HEADER_LENGTH  100
#define QH_COMPRESSION    104
#define QH_V2_LENGTH      72
#define QH_V3_MIN_LENGTH  104
#define QH_READ           112 /* the fields this reader looks at, compression_type's byte and padding included */
/* Incompatible feature bits (version 3) */
#define QF_DIRTY         (1ull << 0) /* refcounts may be stale: harmless for reading */
#define QF_CORRUPT       (1ull << 1)
#define QF_EXTERNAL_DATA (1ull << 2)
#define QF_COMPRESSION   (1ull << 3) /* compression_type is not zlib */
#define QF_EXTENDED_L2   (1ull << 4)
#define QF_KNOWN         (QF_DIRTY | QF_CORRUPT | QF_EXTERNAL_DATA | QF_COMPRESSION | QF_EXTENDED_L2)
#define QA_BITMAPS       (1ull << 0) /* autoclear: the bitmaps extension is consistent */
/* Header extensions */
#define QX_END            0x00000000u
#define QX_BACKING_FORMAT 0xe2792acau
#define QX_CRYPTO         0x0537be77u
#define QX_BITMAPS        0x23852875u
#define QX_HEAD_BYTES     8u
#define QX_CRYPTO_BYTES   16u
#define QX_BITMAPS_BYTES  24u
#define QX_ALIGN          8u
/* qemu's limits (block/qcow2.h, block/qcow2-bitmap.c, include/block/block_int.h) */
#define QCOW2_MIN_CLUSTER_BITS   9
#define QCOW2_MAX_CLUSTER_BITS   21
#define QCOW2_MAX_REFCOUNT_ORDER 6
#define QCOW2_V2_REFCOUNT_ORDER  4
#define QCOW2_MAX_CRYPT_METHOD   2 /* 1 AES, 2 LUKS */
#define QCOW2_CRYPT_LUKS         2
#define QCOW2_MAX_BACKING_NAME   1023
#define QCOW2_MAX_BACKING_FORMAT 16 /* a backing_format extension is shorter */
#define QCOW2_MAX_REFTABLE_BYTES (8ull << 20)
#define QCOW2_MAX_L1_BYTES       (32ull << 20)
#define QCOW2_MAX_SNAPSHOTS      65536ull
#define QCOW2_SNAPSHOT_HEAD      40u
#define QCOW2_MAX_SNAP_EXTRA     1024u
#define QCOW2_MAX_SNAP_TABLE     (64ull << 20)
#define QCOW2_MAX_BITMAPS        65535u
#define QCOW2_MAX_BITMAP_DIR     (1024ull * QCOW2_MAX_BITMAPS)
#define QCOW2_MAX_LENGTH         0x7fffffffc0000000ull /* INT64_MAX down to qemu's largest alignment, 1 GiB */
#define QCOW2_SECTOR             512ull
#define QCOW2_ZLIB               0u
#define QCOW2_ZSTD               1u

uint64_t qcow2_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

uint32_t qcow2_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const unsigned char *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

int qcow2_say(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int qcow2_pread(int fd, void *buf, size_t len, uint64_t off)
{
    unsigned char *p = buf;
    while (len) {
        if (off > (uint64_t)INT64_MAX - len)
            return -EIO;
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int qcow2_pread_zero(int fd, void *buf, size_t len, uint64_t off, uint64_t file_size)
{
    size_t in = off >= file_size ? 0 : (file_size - off < len ? (size_t)(file_size - off) : len);
    memset((unsigned char *)buf + in, 0, len - in);
    return in ? qcow2_pread(fd, buf, in, off) : 0;
}

/* qemu's check of a table's place (qcow2_validate_table): at most max_bytes, on a cluster boundary, and
 * ending below 2^63. what names the count field, where the offset field. */
static int check_table(const struct qcow2_geom *g, uint64_t off, uint64_t entries, uint64_t entry_bytes,
                       uint64_t max_bytes, const char *what, const char *where, const char *name, char *err,
                       size_t errlen)
{
    if (entries > max_bytes / entry_bytes)
        return qcow2_say(err, errlen, -EFBIG,
                         "%s: qcow2 %s %" PRIu64 " is too large (a table of at most %" PRIu64 " bytes)", name, what,
                         entries, max_bytes);
    if (off % g->cluster_size || (uint64_t)INT64_MAX - entries * entry_bytes < off)
        return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 %s %" PRIu64 " is invalid (%s)", name, where, off,
                         off % g->cluster_size ? "off a cluster boundary" : "the table would end past 2^63");
    return 0;
}

/* The header extensions between the header and the backing file's name (or the first cluster's end). */
static int check_extensions(const unsigned char *c, uint64_t start, uint64_t end, uint32_t crypt, uint64_t autoclear,
                            const struct qcow2_geom *g, const char *name, char *err, size_t errlen)
{
    for (uint64_t off = start; off < end;) {
        uint32_t type = qcow2_be32(c + off), len = qcow2_be32(c + off + 4);
        off += QX_HEAD_BYTES;
        if (off > end || len > end - off)
            return qcow2_say(err, errlen, -EINVAL,
                             "%s: qcow2 header extension 0x%08x at offset %" PRIu64 " is too large (length %u, %" PRIu64
                             " bytes left)",
                             name, type, off - QX_HEAD_BYTES, len, off > end ? 0 : end - off);
        const unsigned char *d = c + off;
        if (type == QX_END)
            return 0;
        if (type == QX_BACKING_FORMAT && len >= QCOW2_MAX_BACKING_FORMAT)
            return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 backing format extension length %u is too large (< %d)",
                             name, len, QCOW2_MAX_BACKING_FORMAT);
        if (type == QX_CRYPTO && (crypt != QCOW2_CRYPT_LUKS || len != QX_CRYPTO_BYTES))
            return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 crypto header extension %s", name,
                             crypt != QCOW2_CRYPT_LUKS ? "in an image whose crypt_method is not LUKS"
                                                       : "has the wrong length");
        if (type == QX_BITMAPS && (autoclear & QA_BITMAPS)) {
            bool whole = len == QX_BITMAPS_BYTES; /* the fields are read only then: d has len bytes */
            uint32_t nb = whole ? qcow2_be32(d) : 0, reserved = whole ? qcow2_be32(d + 4) : 0;
            uint64_t dir_size = whole ? qcow2_be64(d + 8) : 0, dir_off = whole ? qcow2_be64(d + 16) : 0;
            const char *why = !whole                            ? "has the wrong length"
                              : reserved                        ? "has a non-zero reserved field"
                              : nb == 0                         ? "names zero bitmaps"
                              : nb > QCOW2_MAX_BITMAPS          ? "names too many bitmaps"
                              : dir_off % g->cluster_size       ? "puts the bitmap directory off a cluster boundary"
                              : dir_size > QCOW2_MAX_BITMAP_DIR ? "has a bitmap directory too large"
                                                                : NULL;
            if (why)
                return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 bitmaps extension %s", name, why);
        }
        off += ((uint64_t)len + (QX_ALIGN - 1)) & ~(uint64_t)(QX_ALIGN - 1);
    }
    return 0;
}

/* The snapshot table's entries as qemu reads them at open: each entry's extra data is bounded and the
 * whole table too (what lies past the end of the file reads as zeros). */
static int check_snapshots(int fd, uint64_t off, uint32_t nb, uint64_t file_size, const char *name, char *err,
                           size_t errlen)
{
    unsigned char h[QCOW2_SNAPSHOT_HEAD];
    uint64_t start = off, length = 0;
    for (uint32_t i = 0; i < nb; i++) {
        off = (off + 7) & ~7ull;
        length = (length + 7) & ~7ull;
        int rc = qcow2_pread_zero(fd, h, sizeof(h), off, file_size);
        if (rc < 0)
            return qcow2_say(err, errlen, rc, "%s: reading qcow2 snapshot table entry %u: %s", name, i, strerror(-rc));
        uint32_t extra = qcow2_be32(h + 36);
        if (extra > QCOW2_MAX_SNAP_EXTRA)
            return qcow2_say(err, errlen, -EFBIG,
                             "%s: qcow2 snapshot table entry %u has extra_data_size %u, too large (at most %u)", name,
                             i, extra, QCOW2_MAX_SNAP_EXTRA);
        uint64_t bytes = QCOW2_SNAPSHOT_HEAD + (uint64_t)extra + be16(h + 12) + be16(h + 14);
        off += bytes;
        length += bytes;
        if (length > QCOW2_MAX_SNAP_TABLE || off - start > INT_MAX)
            return qcow2_say(err, errlen, -EFBIG, "%s: the qcow2 snapshot table exceeds %llu MiB (at entry %u)", name,
                             QCOW2_MAX_SNAP_TABLE >> 20, i);
    }
    return 0;
}

/* The fields up to the tables: version, cluster_bits, header_length, features, compression_type,
 * refcount_order, backing file and crypt_method. */
static int check_fields(const unsigned char *h, struct qcow2_geom *g, uint32_t *hlen, const char *name, char *err,
                        size_t errlen)
{
    g->version = qcow2_be32(h + QH_VERSION);
    if (g->version != 2 && g->version != 3)
        return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 version %u is not supported (qemu reads 2 and 3)", name,
                         g->version);
    g->cluster_bits = qcow2_be32(h + QH_CLUSTER_BITS);
    if (g->cluster_bits < QCOW2_MIN_CLUSTER_BITS || g->cluster_bits > QCOW2_MAX_CLUSTER_BITS)
        return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 cluster_bits %u is out of range (%d-%d)", name,
                         g->cluster_bits, QCOW2_MIN_CLUSTER_BITS, QCOW2_MAX_CLUSTER_BITS);
    g->cluster_size = 1ull << g->cluster_bits;
    uint64_t incompat = 0;
    uint32_t order = QCOW2_V2_REFCOUNT_ORDER, ctype = QCOW2_ZLIB;
    *hlen = QH_V2_LENGTH;
    if (g->version == 3) {
        *hlen = qcow2_be32(h + QH_HEADER_LENGTH);
        if (*hlen < QH_V3_MIN_LENGTH || *hlen > g->cluster_size)
            return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 header_length %u is %s", name, *hlen,
                             *hlen < QH_V3_MIN_LENGTH ? "too short (at least 104 in version 3)"
                                                      : "larger than a cluster");
        incompat = qcow2_be64(h + QH_INCOMPAT);
        order = qcow2_be32(h + QH_REFCOUNT_ORDER);
        if (*hlen > QH_COMPRESSION)
            ctype = h[QH_COMPRESSION];
    }
    if (incompat & ~QF_KNOWN)
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: qcow2 incompatible_features 0x%" PRIx64 " has bits neither qemu nor this reader knows",
                         name, incompat);
    if (ctype != QCOW2_ZLIB && ctype != QCOW2_ZSTD)
        return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 compression_type %u is unknown (0 zlib, 1 zstd)", name,
                         ctype);
    if (!(incompat & QF_COMPRESSION) != (ctype == QCOW2_ZLIB))
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: qcow2 incompatible_features bit 3 (compression type) is %s while compression_type is %u",
                         name, incompat & QF_COMPRESSION ? "set" : "clear", ctype);
    if (order > QCOW2_MAX_REFCOUNT_ORDER)
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: qcow2 refcount_order %u is too large (at most %d: 64-bit refcounts)", name, order,
                         QCOW2_MAX_REFCOUNT_ORDER);
    uint64_t boff = qcow2_be64(h + QH_BACKING_OFFSET);
    uint32_t bsize = qcow2_be32(h + QH_BACKING_SIZE);
    if (boff > g->cluster_size)
        return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 backing_file_offset %" PRIu64 " lies past the first cluster",
                         name, boff);
    if (boff && (bsize > QCOW2_MAX_BACKING_NAME || bsize > g->cluster_size - boff))
        return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 backing_file_size %u is too long", name, bsize);
    uint32_t crypt = qcow2_be32(h + QH_CRYPT_METHOD);
    if (crypt > QCOW2_MAX_CRYPT_METHOD)
        return qcow2_say(err, errlen, -EINVAL, "%s: qcow2 crypt_method %u is unknown", name, crypt);
    g->l2_bits = g->cluster_bits - ((incompat & QF_EXTENDED_L2) ? 4 : 3);
    g->per_l2 = 1ull << g->l2_bits;
    return 0;
}

/* Guest size and the L1 table: within qemu's limits, the L1 table large enough, its part that covers
 * the guest within the file. */
static int check_size(const unsigned char *h, struct qcow2_geom *g, const char *name, char *err, size_t errlen)
{
    uint64_t raw = qcow2_be64(h + QH_SIZE);
    uint32_t l1_size = qcow2_be32(h + QH_L1_SIZE);
    g->l1_offset = qcow2_be64(h + QH_L1_OFFSET);
    int rc = check_table(g, g->l1_offset, l1_size, QCOW2_ENTRY_BYTES, QCOW2_MAX_L1_BYTES, "l1_size", "l1_table_offset",
                         name, err, errlen);
    if (rc < 0)
        return rc;
    /* qemu reads a qcow2's size in whole 512-byte sectors (total_sectors = size / 512), and qemu-img
     * only writes such sizes: round down as it does, so this reader and qemu-nbd agree on every image */
    g->size = raw / QCOW2_SECTOR * QCOW2_SECTOR;
    unsigned cover = g->cluster_bits + g->l2_bits; /* bytes of guest one L1 entry covers: 2^cover */
    uint64_t need = (raw >> cover) + ((raw & ((1ull << cover) - 1)) != 0);
    if (g->size > QCOW2_MAX_LENGTH || need > INT_MAX)
        return qcow2_say(err, errlen, -EFBIG,
                         "%s: qcow2 size %" PRIu64 " is too big (qemu reads at most %" PRIu64 " bytes%s)", name, raw,
                         (uint64_t)QCOW2_MAX_LENGTH, need > INT_MAX ? " and 2^31 L1 entries" : "");
    if (l1_size < need)
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: qcow2 l1_size %u is too small (%" PRIu64 " L1 entries are needed for size %" PRIu64 ")",
                         name, l1_size, need, raw);
    g->nclusters = (g->size >> g->cluster_bits) + ((g->size & (g->cluster_size - 1)) != 0);
    g->l1_need = (g->nclusters >> g->l2_bits) + ((g->nclusters & (g->per_l2 - 1)) != 0);
    if (g->l1_need && (g->l1_offset > g->file_size || g->l1_need * QCOW2_ENTRY_BYTES > g->file_size - g->l1_offset))
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: the L1 table at host offset %" PRIu64 " (l1_table_offset) lies past the end of the file "
                         "(truncated image)",
                         name, g->l1_offset);
    return 0;
}

/* A sound image the direct reader does not read: why, for -ENOTSUP (qemu reads it). */
static const char *qemu_only(const unsigned char *h, const struct qcow2_geom *g)
{
    uint64_t f = g->version == 3 ? qcow2_be64(h + QH_INCOMPAT) : 0;
    return qcow2_be64(h + QH_BACKING_OFFSET) ? "has a backing file"
           : (f & QF_EXTERNAL_DATA)          ? "keeps its data in an external data file"
           : (f & QF_EXTENDED_L2)            ? "uses extended L2 entries (subclusters)"
           : (f & QF_CORRUPT)                ? "is marked corrupt (qemu reads it read-only)"
                                             : NULL;
}

int qcow2_check_header(int fd, uint64_t file_size, struct qcow2_geom *g, const char *name, char *err, size_t errlen)
{
    unsigned char h[QH_READ];
    uint32_t hlen = QH_V2_LENGTH;
    memset(g, 0, sizeof(*g));
    g->file_size = file_size;
    int rc = qcow2_pread_zero(fd, h, sizeof(h), 0, file_size);
    if (rc < 0)
        return qcow2_say(err, errlen, rc, "%s: %s", name, strerror(-rc));
    if (file_size < QH_V2_LENGTH || qcow2_be32(h + QH_MAGIC) != BLKSUM_QCOW2_MAGIC)
        return qcow2_say(err, errlen, -EINVAL, "%s: not a qcow2 image (%s)", name,
                         qcow2_be32(h + QH_MAGIC) != BLKSUM_QCOW2_MAGIC ? "no qcow2 magic at offset 0"
                                                                        : "truncated qcow2 header");
    if ((rc = check_fields(h, g, &hlen, name, err, errlen)) < 0)
        return rc;
    /* the header extensions, read from the first cluster (past the end of the file: zeros, the end) */
    unsigned char *c = malloc((size_t)g->cluster_size + QX_HEAD_BYTES);
    if (!c)
        return qcow2_say(err, errlen, -ENOMEM, "%s: out of memory", name);
    rc = qcow2_pread_zero(fd, c, (size_t)g->cluster_size + QX_HEAD_BYTES, 0, file_size);
    uint64_t boff = qcow2_be64(h + QH_BACKING_OFFSET);
    if (rc < 0)
        qcow2_say(err, errlen, rc, "%s: reading the qcow2 header: %s", name, strerror(-rc));
    else
        rc = check_extensions(c, hlen, boff ? boff : g->cluster_size, qcow2_be32(h + QH_CRYPT_METHOD),
                              g->version == 3 ? qcow2_be64(h + QH_AUTOCLEAR) : 0, g, name, err, errlen);
    free(c);
    if (rc < 0)
        return rc;
    uint32_t rt_clusters = qcow2_be32(h + QH_RT_CLUSTERS), nb = qcow2_be32(h + QH_NB_SNAPSHOTS);
    if (rt_clusters == 0)
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: qcow2 refcount_table_clusters is 0 (the image has no refcount table)", name);
    if ((rc = check_table(g, qcow2_be64(h + QH_RT_OFFSET), rt_clusters, g->cluster_size, QCOW2_MAX_REFTABLE_BYTES,
                          "refcount_table_clusters", "refcount_table_offset", name, err, errlen)) < 0 ||
        (rc = check_table(g, qcow2_be64(h + QH_SNAPSHOTS), nb, QCOW2_SNAPSHOT_HEAD,
                          QCOW2_SNAPSHOT_HEAD * QCOW2_MAX_SNAPSHOTS, "nb_snapshots", "snapshots_offset", name, err,
                          errlen)) < 0 ||
        (rc = check_size(h, g, name, err, errlen)) < 0 ||
        (rc = check_snapshots(fd, qcow2_be64(h + QH_SNAPSHOTS), nb, file_size, name, err, errlen)) < 0)
        return rc;
    if (qcow2_be32(h + QH_CRYPT_METHOD))
        return qcow2_say(err, errlen, -ENOKEY, "%s: the qcow2 image is encrypted; blksum cannot read it", name);
    const char *why = qemu_only(h, g);
    if (why)
        return qcow2_say(err, errlen, -ENOTSUP, "%s: the qcow2 image %s, which the direct reader does not read", name,
                         why);
    return 0;
}
