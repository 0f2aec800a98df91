/* SPDX-License-Identifier: BSD-3-Clause */
/* qcow2.c — the direct qcow2 reader of blksum (image.h): the header is checked field by field as qemu
 * checks it when it opens an image (qcow2_header.c), the L1 table is kept, and every L2 table it names
 * is read and checked once at open; reads and the allocation map then look clusters up in L2 tables
 * read again on demand through a small cache, so memory is bounded by the file (the L1 table and a few
 * clusters), never by the guest size. An engine backend of the psync kind: submit() does the I/O;
 * unallocated and zero clusters are the allocation map's zero regions and are never read.
 *
 * Layout (QEMU's docs/interop/qcow2.txt): big-endian header; L1 entries hold an L2 table's offset in
 * bits 9-55; L2 entries hold a cluster's host offset in bits 9-55, bit 62 = compressed, bit 0 = reads
 * as zeros (version 3).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blksum/blksum_internal.h"
#include "blksum/image.h"
#include "blksum/qcow2_internal.h"

#define QCOW2_MAX_QDEPTH BLKSUM_MAX_QUEUE_DEPTH
/** L2 tables kept decoded after open (LRU): a read of up to BLKSUM_MAX_READ_SIZE spans at most two of
 * the smallest whole-table coverage that such a read can need, the map one more. */
#define QCOW2_L2_CACHE 4u
/** One call of the allocation map looks at most this many L2 tables, so it returns promptly (cancel,
 * progress) on a huge sparse image; the pipeline asks again where the region ended. */
#define QCOW2_MAP_MAX_TABLES 64u
/* Decoded L2 entries: a host offset (cluster-aligned, > 0) or one of these. */
#define CL_UNALLOCATED 0ull
#define CL_ZERO        1ull
#define CL_BAD         2ull /* refused at open; only entries past the guest's end may hold it */

struct l2_slot {
    uint64_t off;   /* the table's host offset; 0 = empty slot */
    uint64_t stamp; /* last use (LRU) */
    uint64_t *e;    /* per_l2 decoded entries */
    bool all_zero;  /* every entry unallocated or zero: the map passes the table in one step */
};

struct qcow2 {
    struct qcow2_geom g;
    int fd;
    uint64_t *l1; /* g.l1_need L2 table offsets (0: unallocated) */
    unsigned char *raw;
    struct l2_slot cache[QCOW2_L2_CACHE];
    uint64_t clock;
};

/* ---------------------------------------------------------------- L2 entries */

/* Bytes of guest data in cluster c (the last one may be short). */
static uint64_t cluster_bytes(const struct qcow2_geom *g, uint64_t c)
{
    uint64_t start = c << g->cluster_bits;
    return g->size - start < g->cluster_size ? g->size - start : g->cluster_size;
}

/* Decode the L2 entry e of guest cluster c: *out = CL_UNALLOCATED, CL_ZERO or the host offset. With err,
 * a refusal names the entry and the reason (-ENOTSUP: compressed, which qemu reads). */
static int decode_entry(const struct qcow2_geom *g, uint64_t e, uint64_t c, uint64_t *out, const char *name, char *err,
                        size_t errlen)
{
    uint64_t host = e & QE_OFFSET_MASK, guest = c << g->cluster_bits;
    if (e & QE_COMPRESSED)
        return qcow2_say(err, errlen, -ENOTSUP,
                         "%s: the qcow2 image has compressed clusters (the first at guest offset %" PRIu64
                         "), which the direct reader does not decompress",
                         name, guest);
    if ((e & QE_ZERO) && g->version < 3)
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: the L2 entry of guest offset %" PRIu64
                         " has the zero flag (bit 0), which a version 2 image cannot have (qemu: corrupt)",
                         name, guest);
    if (host % g->cluster_size)
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: the L2 entry of guest offset %" PRIu64 " points to host offset %" PRIu64
                         ", off a cluster boundary (corrupt image)",
                         name, guest, host);
    if (e & QE_ZERO) {
        *out = CL_ZERO;
    } else if (!host) {
        *out = CL_UNALLOCATED;
    } else if (host > g->file_size || cluster_bytes(g, c) > g->file_size - host) {
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: the L2 entry of guest offset %" PRIu64 " points to host offset %" PRIu64
                         ", past the end of the file (truncated or corrupt image)",
                         name, guest, host);
    } else {
        *out = host;
    }
    return 0;
}

/* Read the L2 table of L1 index i at off into q->raw; decode its entries for guest clusters into e (those
 * past the guest's end become CL_BAD when refused). With err (at open): the first refusal, -errno. */
static int read_l2(struct qcow2 *q, uint64_t i, uint64_t off, uint64_t *e, const char *name, char *err, size_t errlen)
{
    const struct qcow2_geom *g = &q->g;
    int rc = qcow2_pread(q->fd, q->raw, (size_t)g->cluster_size, off);
    if (rc < 0)
        return err ? qcow2_say(err, errlen, rc, "%s: reading the L2 table at host offset %" PRIu64 ": %s", name, off,
                               strerror(-rc))
                   : rc;
    uint64_t first = i << g->l2_bits;
    for (uint64_t k = 0; k < g->per_l2; k++) {
        uint64_t c = first + k, v = CL_BAD;
        bool guest = c < g->nclusters;
        rc = decode_entry(g, qcow2_be64(q->raw + k * QCOW2_ENTRY_BYTES), c, &v, name, guest ? err : NULL,
                          guest ? errlen : 0);
        if (rc < 0 && guest)
            return rc;
        if (e)
            e[k] = rc < 0 ? CL_BAD : v;
    }
    return 0;
}

/* Where an L1 entry points: 0 (unallocated) or an L2 table within the file on a cluster boundary. */
static int check_l1_entry(const struct qcow2_geom *g, uint64_t i, uint64_t off, const char *name, char *err,
                          size_t errlen)
{
    if (off % g->cluster_size)
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: L1 entry %" PRIu64 " points to an L2 table at host offset %" PRIu64
                         ", off a cluster boundary (corrupt image)",
                         name, i, off);
    if (off > g->file_size || g->cluster_size > g->file_size - off)
        return qcow2_say(err, errlen, -EINVAL,
                         "%s: L1 entry %" PRIu64 " points to an L2 table at host offset %" PRIu64
                         ", past the end of the file (truncated or corrupt image)",
                         name, i, off);
    return 0;
}

/* An L2 table's offset and an L1 index that names it (for the guest offsets in messages). */
struct l2_ref {
    uint64_t off, idx;
};

static int cmp_ref(const void *a, const void *b)
{
    const struct l2_ref *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Read the L1 table and check every L2 table it names, each distinct table once (an image whose L1
 * entries all name one table costs one read of it, not one per entry). */
static int load_tables(struct qcow2 *q, const char *name, char *err, size_t errlen)
{
    const struct qcow2_geom *g = &q->g;
    uint64_t n = g->l1_need, m = 0;
    q->l1 = malloc(n ? n * sizeof(*q->l1) : 1);
    q->raw = malloc((size_t)g->cluster_size);
    struct l2_ref *refs = malloc(n ? n * sizeof(*refs) : 1);
    int rc = 0;
    if (!q->l1 || !q->raw || !refs) {
        rc = qcow2_say(err, errlen, -ENOMEM, "%s: out of memory for the qcow2 tables", name);
        goto out;
    }
    for (uint64_t done = 0; done < n && rc == 0;) { /* the L1 table, a cluster at a time */
        uint64_t k = n - done < g->per_l2 ? n - done : g->per_l2;
        rc = qcow2_pread(q->fd, q->raw, (size_t)(k * QCOW2_ENTRY_BYTES), g->l1_offset + done * QCOW2_ENTRY_BYTES);
        if (rc < 0)
            rc = qcow2_say(err, errlen, rc, "%s: reading the L1 table: %s", name, strerror(-rc));
        for (uint64_t j = 0; rc == 0 && j < k; j++) {
            q->l1[done + j] = qcow2_be64(q->raw + j * QCOW2_ENTRY_BYTES) & QE_OFFSET_MASK;
            if (q->l1[done + j])
                rc = check_l1_entry(g, done + j, q->l1[done + j], name, err, errlen);
        }
        done += k;
    }
    /* the last L1 entry's table may cover the guest's end: checked alone, up to there */
    for (uint64_t i = 0; rc == 0 && i + 1 < n; i++)
        if (q->l1[i])
            refs[m++] = (struct l2_ref){q->l1[i], i};
    qsort(refs, (size_t)m, sizeof(*refs), cmp_ref);
    for (uint64_t i = 0; rc == 0 && i < m; i++)
        if (!i || refs[i].off != refs[i - 1].off)
            rc = read_l2(q, refs[i].idx, refs[i].off, NULL, name, err, errlen);
    if (rc == 0 && n) {
        struct l2_ref last = {q->l1[n - 1], n - 1};
        if (last.off && !bsearch(&last, refs, (size_t)m, sizeof(*refs), cmp_ref))
            rc = read_l2(q, last.idx, last.off, NULL, name, err, errlen);
    }
out:
    free(refs);
    return rc;
}

/* ---------------------------------------------------------------- lookups after open */

static bool is_zero_cluster(uint64_t e)
{
    return e == CL_UNALLOCATED || e == CL_ZERO;
}

/* The decoded L2 table of L1 index i (not 0), from the cache or read again: NULL with *rc on failure. */
static const struct l2_slot *l2_table(struct qcow2 *q, uint64_t i, int *rc)
{
    struct l2_slot *victim = &q->cache[0];
    uint64_t off = q->l1[i];
    for (unsigned k = 0; k < QCOW2_L2_CACHE; k++) {
        struct l2_slot *s = &q->cache[k];
        if (s->off == off && s->e) {
            s->stamp = ++q->clock;
            return s;
        }
        if (s->stamp < victim->stamp)
            victim = s;
    }
    if (!victim->e && !(victim->e = malloc((size_t)q->g.per_l2 * sizeof(*victim->e)))) {
        *rc = -ENOMEM;
        return NULL;
    }
    victim->off = 0;
    *rc = read_l2(q, i, off, victim->e, "", NULL, 0);
    if (*rc < 0)
        return NULL;
    victim->all_zero = true;
    for (uint64_t k = 0; k < q->g.per_l2 && victim->all_zero; k++)
        victim->all_zero = is_zero_cluster(victim->e[k]);
    victim->off = off;
    victim->stamp = ++q->clock;
    return victim;
}

/* The decoded entry of guest cluster c (< nclusters). */
static int cluster_entry(struct qcow2 *q, uint64_t c, uint64_t *out)
{
    uint64_t i = c >> q->g.l2_bits;
    int rc = 0;
    if (!q->l1[i]) {
        *out = CL_UNALLOCATED;
        return 0;
    }
    const struct l2_slot *t = l2_table(q, i, &rc);
    if (!t)
        return rc;
    *out = t->e[c & (q->g.per_l2 - 1)];
    return *out == CL_BAD ? -EIO : 0; /* the file changed since it was checked */
}

/* ---------------------------------------------------------------- the allocation map */

/* The region from off: clusters of the same kind (zero or data), a whole table at a time where the L1
 * entry is unallocated or the table holds no data, at most QCOW2_MAP_MAX_TABLES tables per call. */
static int qcow2_map(void *ctx, uint64_t off, uint64_t *end, bool *zero)
{
    struct qcow2 *q = ctx;
    const struct qcow2_geom *g = &q->g;
    if (off >= g->size)
        return -EINVAL;
    uint64_t c = off >> g->cluster_bits, e = 0;
    int rc = cluster_entry(q, c, &e);
    if (rc < 0)
        return rc;
    bool z = is_zero_cluster(e);
    unsigned tables = 0;
    for (c++; c < g->nclusters;) {
        uint64_t i = c >> g->l2_bits, k = c & (g->per_l2 - 1), next = (i + 1) << g->l2_bits;
        if (k == 0 && ++tables == QCOW2_MAP_MAX_TABLES)
            break;
        const struct l2_slot *t = NULL;
        if (q->l1[i] && !(t = l2_table(q, i, &rc)))
            return rc;
        if (!t || t->all_zero) {
            if (!z)
                break;
            c = next;
            continue;
        }
        for (; c < next && c < g->nclusters; c++, k++) {
            if (t->e[k] == CL_BAD)
                return -EIO; /* the file changed since it was checked */
            if (is_zero_cluster(t->e[k]) != z)
                goto done;
        }
    }
done:
    c = c < g->nclusters ? c : g->nclusters;
    *end = c << g->cluster_bits < g->size ? c << g->cluster_bits : g->size;
    *zero = z;
    return 0;
}

/* ---------------------------------------------------------------- reads (engine backend) */

/* Guest bytes [off, off + len) (within the guest) into buf: runs of host-contiguous clusters in one
 * pread each, zeros for unallocated and zero clusters. */
static int qcow2_read(struct qcow2 *q, unsigned char *buf, uint64_t off, uint64_t len)
{
    const struct qcow2_geom *g = &q->g;
    while (len) {
        uint64_t c = off >> g->cluster_bits, in = off & (g->cluster_size - 1), e = 0, next = 0;
        uint64_t n = g->cluster_size - in;
        int rc = cluster_entry(q, c, &e);
        if (rc < 0)
            return rc;
        bool z = is_zero_cluster(e);
        while (n < len && c + 1 < g->nclusters) {
            if ((rc = cluster_entry(q, c + 1, &next)) < 0)
                return rc;
            if (z ? !is_zero_cluster(next) : next != e + (n + in))
                break;
            c++;
            n += g->cluster_size;
        }
        n = n < len ? n : len;
        if (z)
            memset(buf, 0, (size_t)n);
        else if ((rc = qcow2_pread(q->fd, buf, (size_t)n, e + in)) < 0)
            return rc;
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
    if (nlb <= c->iosize && slba <= q->g.size && nlb <= q->g.size - slba)
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
    if (!q)
        return;
    for (unsigned k = 0; k < QCOW2_L2_CACHE; k++)
        free(q->cache[k].e);
    free(q->l1);
    free(q->raw);
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
    struct stat st;
    struct qcow2 *q = calloc(1, sizeof(*q));
    int rc;
    if (!q)
        return qcow2_say(err, errlen, -ENOMEM, "%s: out of memory", name);
    q->fd = fd;
    if (fstat(fd, &st) < 0) {
        rc = qcow2_say(err, errlen, -errno, "%s: %s", name, strerror(errno));
        goto fail;
    }
    rc = qcow2_check_header(fd, (uint64_t)st.st_size, &q->g, name, err, errlen);
    if (rc == 0)
        rc = load_tables(q, name, err, errlen);
    if (rc < 0)
        goto fail;
    rc = blksum_image_attach(src, &qcow2_reader, q, q->g.size, BLKSUM_MAX_READ_SIZE);
    if (rc == 0)
        return 0;
    qcow2_say(err, errlen, rc, "%s: out of memory", name);
fail:
    qcow2_destroy(q);
    return rc;
}
