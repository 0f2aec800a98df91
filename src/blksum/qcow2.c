/* SPDX-License-Identifier: BSD-3-Clause */
/* qcow2.c — the direct qcow2 reader of blksum (image.h): the header, the L1 table and every L2 table
 * are read and checked when the image is opened, leaving one entry per guest cluster (unallocated,
 * zero, or the host offset of its data); reads translate guest offsets to host runs and pread them
 * (an engine backend of the psync kind: submit() does the I/O), unallocated and zero clusters are the
 * allocation map's zero regions and are never read.
 *
 * Layout (QEMU's docs/interop/qcow2.txt): big-endian header; L1 entries hold an L2 table's offset in
 * bits 9-55; L2 entries hold a cluster's host offset in bits 9-55, bit 62 = compressed, bit 0 = reads
 * as zeros (version 3). Caveat: the per-cluster table costs 8 bytes per guest cluster (128 KiB for
 * 1 GiB of 64 KiB clusters), the same as the image's own L2 tables.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blksum/blksum_internal.h"
#include "blksum/image.h"

/* Header fields (byte offsets) */
#define QH_MAGIC          0
#define QH_VERSION        4
#define QH_BACKING_OFFSET 8
#define QH_CLUSTER_BITS   20
#define QH_SIZE           24
#define QH_CRYPT_METHOD   32
#define QH_L1_SIZE        36
#define QH_L1_OFFSET      40
#define QH_INCOMPAT       72
#define QH_V2_LENGTH      72
#define QH_V3_MIN_LENGTH  104
/* Incompatible feature bits (version 3) */
#define QF_DIRTY         (1ull << 0) /* refcounts may be stale: harmless for reading */
#define QF_CORRUPT       (1ull << 1)
#define QF_EXTERNAL_DATA (1ull << 2)
#define QF_COMPRESSION   (1ull << 3) /* a compression type other than zlib: only matters for compressed clusters */
#define QF_EXTENDED_L2   (1ull << 4)
#define QF_KNOWN         (QF_DIRTY | QF_CORRUPT | QF_EXTERNAL_DATA | QF_COMPRESSION | QF_EXTENDED_L2)
/* Table entries */
#define QE_OFFSET_MASK         0x00fffffffffffe00ull /* bits 9-55 */
#define QE_COMPRESSED          (1ull << 62)
#define QE_ZERO                1ull
#define QCOW2_MIN_CLUSTER_BITS 9
#define QCOW2_MAX_CLUSTER_BITS 21
#define QCOW2_ENTRY_BYTES      8u
#define QCOW2_SECTOR           512ull
#define QCOW2_MAX_QDEPTH       BLKSUM_MAX_QUEUE_DEPTH
/* Per-cluster entries kept after open: a host offset (cluster-aligned, > 0) or one of these. */
#define CL_UNALLOCATED 0ull
#define CL_ZERO        1ull

struct qcow2 {
    int fd;
    uint64_t size, file_size;
    unsigned cluster_bits;
    uint64_t cluster_size, nclusters;
    uint64_t *cl; /* nclusters entries */
};

static uint64_t be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read exactly len bytes at off: -EIO with a short read (the file ends first). */
static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    unsigned char *p = buf;
    while (len) {
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

/* ---------------------------------------------------------------- open: header and tables */

static int check_header(struct qcow2 *q, const unsigned char *h, size_t hlen, const char *name, char *err,
                        size_t errlen)
{
    if (hlen < QH_V2_LENGTH || be32(h + QH_MAGIC) != BLKSUM_QCOW2_MAGIC) {
        snprintf(err, errlen, "%s: not a qcow2 image (no qcow2 magic at offset 0)", name);
        return -EINVAL;
    }
    uint32_t version = be32(h + QH_VERSION);
    if (version != 2 && version != 3) {
        snprintf(err, errlen, "%s: qcow2 version %u is not supported (2 and 3 are)", name, version);
        return -ENOTSUP;
    }
    if (version == 3) {
        if (hlen < QH_V3_MIN_LENGTH) {
            snprintf(err, errlen, "%s: truncated qcow2 header", name);
            return -EINVAL;
        }
        uint64_t f = be64(h + QH_INCOMPAT);
        const char *what = (f & QF_CORRUPT)         ? "is marked corrupt (repair it with qemu-img check -r all)"
                           : (f & QF_EXTERNAL_DATA) ? "keeps its data in an external data file"
                           : (f & QF_EXTENDED_L2)   ? "uses extended L2 entries (subclusters)"
                           : (f & ~QF_KNOWN)        ? "uses incompatible features this reader does not know"
                                                    : NULL;
        if (what) {
            snprintf(err, errlen, "%s: the qcow2 image %s; the direct reader refuses it (try --mode nbd)", name, what);
            return -ENOTSUP;
        }
    }
    if (be64(h + QH_BACKING_OFFSET)) {
        snprintf(err, errlen,
                 "%s: the qcow2 image has a backing file; blksum reads standalone images only "
                 "(qemu-img convert -O qcow2 it first)",
                 name);
        return -ENOTSUP;
    }
    if (be32(h + QH_CRYPT_METHOD)) {
        snprintf(err, errlen, "%s: the qcow2 image is encrypted; blksum cannot read it", name);
        return -ENOTSUP;
    }
    q->cluster_bits = be32(h + QH_CLUSTER_BITS);
    if (q->cluster_bits < QCOW2_MIN_CLUSTER_BITS || q->cluster_bits > QCOW2_MAX_CLUSTER_BITS) {
        snprintf(err, errlen, "%s: qcow2 cluster_bits %u is out of range (%d-%d)", name, q->cluster_bits,
                 QCOW2_MIN_CLUSTER_BITS, QCOW2_MAX_CLUSTER_BITS);
        return -EINVAL;
    }
    q->cluster_size = 1ull << q->cluster_bits;
    /* qemu reads a qcow2's size in whole 512-byte sectors (total_sectors = size / 512), and qemu-img
     * only writes such sizes: round down as it does, so this reader and qemu-nbd agree on every image */
    q->size = be64(h + QH_SIZE) / QCOW2_SECTOR * QCOW2_SECTOR;
    q->nclusters = (q->size + q->cluster_size - 1) >> q->cluster_bits;
    return 0;
}

/* Bytes of guest data in cluster c (the last one may be short). */
static uint64_t cluster_bytes(const struct qcow2 *q, uint64_t c)
{
    uint64_t start = c << q->cluster_bits;
    return q->size - start < q->cluster_size ? q->size - start : q->cluster_size;
}

/* Fill q->cl from the L2 table at l2off covering clusters [first, first + n). */
static int load_l2(struct qcow2 *q, uint64_t l2off, uint64_t first, uint64_t n, unsigned char *tab, const char *name,
                   char *err, size_t errlen)
{
    if (l2off % q->cluster_size || l2off + q->cluster_size > q->file_size) {
        snprintf(err, errlen, "%s: the L2 table at host offset %" PRIu64 " lies %s (truncated or corrupt image)", name,
                 l2off, l2off % q->cluster_size ? "off a cluster boundary" : "past the end of the file");
        return -EINVAL;
    }
    int rc = pread_full(q->fd, tab, (size_t)q->cluster_size, l2off);
    if (rc < 0) {
        snprintf(err, errlen, "%s: reading the L2 table at %" PRIu64 ": %s", name, l2off, strerror(-rc));
        return rc;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = be64(tab + i * QCOW2_ENTRY_BYTES), c = first + i;
        uint64_t host = e & QE_OFFSET_MASK;
        if (e & QE_COMPRESSED) {
            snprintf(err, errlen,
                     "%s: compressed cluster at guest offset %" PRIu64
                     "; the direct qcow2 reader does not decompress (use --mode nbd)",
                     name, c << q->cluster_bits);
            return -ENOTSUP;
        }
        if (e & QE_ZERO) {
            q->cl[c] = CL_ZERO;
        } else if (!host) {
            q->cl[c] = CL_UNALLOCATED;
        } else if (host % q->cluster_size || host + cluster_bytes(q, c) > q->file_size) {
            snprintf(err, errlen,
                     "%s: the cluster at guest offset %" PRIu64 " points to host offset %" PRIu64
                     ", %s (truncated or corrupt image)",
                     name, c << q->cluster_bits, host,
                     host % q->cluster_size ? "off a cluster boundary" : "past the end of the file");
            return -EINVAL;
        } else {
            q->cl[c] = host;
        }
    }
    return 0;
}

static int load_tables(struct qcow2 *q, const unsigned char *h, const char *name, char *err, size_t errlen)
{
    uint64_t per_l2 = q->cluster_size / QCOW2_ENTRY_BYTES;
    uint64_t need = (q->nclusters + per_l2 - 1) / per_l2;
    uint32_t l1_size = be32(h + QH_L1_SIZE);
    uint64_t l1_off = be64(h + QH_L1_OFFSET);
    if (l1_size < need) {
        snprintf(err, errlen, "%s: the L1 table has %u entries, %" PRIu64 " needed for %" PRIu64 " bytes", name,
                 l1_size, need, q->size);
        return -EINVAL;
    }
    if (need &&
        (l1_off % QCOW2_ENTRY_BYTES || l1_off > q->file_size || need * QCOW2_ENTRY_BYTES > q->file_size - l1_off)) {
        snprintf(err, errlen,
                 "%s: the L1 table at host offset %" PRIu64 " lies past the end of the file (truncated image)", name,
                 l1_off);
        return -EINVAL;
    }
    q->cl = calloc(q->nclusters ? q->nclusters : 1, sizeof(*q->cl));
    unsigned char *l1 = malloc(need ? need * QCOW2_ENTRY_BYTES : 1);
    unsigned char *tab = malloc((size_t)q->cluster_size);
    int rc = (!q->cl || !l1 || !tab) ? -ENOMEM : 0;
    if (rc == 0 && need) {
        rc = pread_full(q->fd, l1, (size_t)(need * QCOW2_ENTRY_BYTES), l1_off);
        if (rc < 0)
            snprintf(err, errlen, "%s: reading the L1 table: %s", name, strerror(-rc));
    }
    for (uint64_t i = 0; rc == 0 && i < need; i++) {
        uint64_t l2off = be64(l1 + i * QCOW2_ENTRY_BYTES) & QE_OFFSET_MASK;
        uint64_t first = i * per_l2, n = q->nclusters - first < per_l2 ? q->nclusters - first : per_l2;
        if (l2off) /* else: every cluster of this table is unallocated (calloc) */
            rc = load_l2(q, l2off, first, n, tab, name, err, errlen);
    }
    if (rc == -ENOMEM)
        snprintf(err, errlen, "%s: out of memory for the qcow2 tables", name);
    free(l1);
    free(tab);
    return rc;
}

/* ---------------------------------------------------------------- the allocation map */

static bool is_zero_cluster(uint64_t e)
{
    return e == CL_UNALLOCATED || e == CL_ZERO;
}

static int qcow2_map(void *ctx, uint64_t off, uint64_t *end, bool *zero)
{
    struct qcow2 *q = ctx;
    uint64_t c = off >> q->cluster_bits;
    if (off >= q->size)
        return -EINVAL;
    bool z = is_zero_cluster(q->cl[c]);
    while (++c < q->nclusters && is_zero_cluster(q->cl[c]) == z)
        ;
    *end = c << q->cluster_bits < q->size ? c << q->cluster_bits : q->size;
    *zero = z;
    return 0;
}

/* ---------------------------------------------------------------- reads (engine backend) */

/* Guest bytes [off, off + len) into buf: host runs of contiguous clusters in one pread each. */
static int qcow2_read(struct qcow2 *q, unsigned char *buf, uint64_t off, uint64_t len)
{
    while (len) {
        uint64_t c = off >> q->cluster_bits, in = off & (q->cluster_size - 1);
        uint64_t e = q->cl[c], n = q->cluster_size - in;
        if (is_zero_cluster(e)) {
            while (n < len && is_zero_cluster(q->cl[c + 1])) {
                c++;
                n += q->cluster_size;
            }
            n = n < len ? n : len;
            memset(buf, 0, (size_t)n);
        } else {
            while (n < len && q->cl[c + 1] == q->cl[c] + q->cluster_size) {
                c++;
                n += q->cluster_size;
            }
            n = n < len ? n : len;
            int rc = pread_full(q->fd, buf, (size_t)n, e + in);
            if (rc < 0)
                return rc;
        }
        buf += n;
        off += n;
        len -= n;
    }
    return 0;
}

static int qchan_open(void *ctx, uint32_t dev, uint32_t qdepth, uint32_t iosize, struct perf_chan **out, char *err,
                      size_t errlen)
{
    struct blksum_ichan *c;
    int rc = blksum_ichan_new(sizeof(*c), ctx, dev, qdepth, iosize, BLKSUM_MAX_READ_SIZE, "qcow2", &c, err, errlen);
    if (rc == 0)
        *out = &c->base;
    return rc;
}

static void qchan_close(struct perf_chan *ch)
{
    blksum_ichan_free((struct blksum_ichan *)ch);
}

/* A psync-kind backend: the read happens here, its completion is reaped at once. */
static int qchan_submit(struct perf_chan *ch, uint32_t slot, int write, uint64_t slba, uint32_t nlb)
{
    struct blksum_ichan *c = (struct blksum_ichan *)ch;
    struct qcow2 *q = c->reader;
    if (write)
        return -EROFS;
    if (c->count == c->qdepth)
        return -EBUSY;
    int st = -EINVAL;
    if (nlb <= c->iosize && slba <= q->size && nlb <= q->size - slba)
        st = qcow2_read(q, blksum_ichan_buf(ch, slot), slba, nlb);
    blksum_ichan_complete(c, slot, st);
    return 0;
}

static int qchan_kick(struct perf_chan *ch, uint32_t wait_min)
{
    (void)ch;
    (void)wait_min;
    return 0;
}

static void qcow2_destroy(void *ctx)
{
    struct qcow2 *q = ctx;
    if (q)
        free(q->cl);
    free(q);
}

static const struct perf_backend_ops qcow2_ops = {
    .chan_open = qchan_open,
    .chan_close = qchan_close,
    .chan_buf = blksum_ichan_buf,
    .submit = qchan_submit,
    .kick = qchan_kick,
    .reap = blksum_ichan_reap,
    .destroy = qcow2_destroy,
    .write_sync = blksum_image_write_sync,
};

static const struct blksum_image_reader qcow2_reader = {.ops = &qcow2_ops,
                                                        .kind = "qcow2",
                                                        .max_qdepth = QCOW2_MAX_QDEPTH,
                                                        .flags = PERF_TGT_BLOCKING | PERF_TGT_SYNC,
                                                        .map = qcow2_map};

int blksum_qcow2_open(struct blksum_source *src, int fd, const char *name, char *err, size_t errlen)
{
    unsigned char h[QH_V3_MIN_LENGTH] = {0};
    struct stat st;
    struct qcow2 *q = calloc(1, sizeof(*q));
    int rc = 0;
    if (!q) {
        snprintf(err, errlen, "%s: out of memory", name);
        rc = -ENOMEM;
        goto fail;
    }
    q->fd = fd;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", name, strerror(-rc));
        goto fail;
    }
    q->file_size = (uint64_t)st.st_size;
    ssize_t n = pread(fd, h, sizeof(h), 0);
    if (n < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", name, strerror(-rc));
        goto fail;
    }
    rc = check_header(q, h, (size_t)n, name, err, errlen);
    if (rc == 0)
        rc = load_tables(q, h, name, err, errlen);
    if (rc < 0)
        goto fail;
    rc = blksum_image_attach(src, &qcow2_reader, q, q->size, BLKSUM_MAX_READ_SIZE);
    if (rc == 0)
        return 0;
    snprintf(err, errlen, "%s: out of memory", name);
fail:
    qcow2_destroy(q);
    return rc;
}
