/* SPDX-License-Identifier: BSD-3-Clause */
/* nbd_extents.c — an NBD block-status reply as blksum's allocation map, checked (nbd_extents.h). */
#include "blksum/nbd_extents.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* A malformed reply: m emptied, one line in err. */
__attribute__((format(printf, 4, 5))) static int refuse(struct blksum_nbd_map *m, char *err, size_t errlen,
                                                        const char *fmt, ...)
{
    va_list ap;
    m->n = 0;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EPROTO;
}

int blksum_nbd_extents_parse(struct blksum_nbd_map *m, uint64_t req_off, uint64_t req_len, uint64_t off,
                             const uint32_t *entries, size_t nr, char *err, size_t errlen)
{
    uint64_t req_end = req_off + req_len;
    m->n = 0;
    m->start = off;
    if (req_len == 0 || req_end < req_off)
        return refuse(m, err, errlen, "block status of an empty or wrapping range (%" PRIu64 " bytes at %" PRIu64 ")",
                      req_len, req_off);
    if (nr == 0 || nr % 2)
        return refuse(m, err, errlen,
                      "the server's block status reply has %zu words, not a positive number of (length, flags) pairs",
                      nr);
    if (off != req_off)
        return refuse(m, err, errlen,
                      "the server's block status reply starts at %" PRIu64 ", not at the offset asked for, %" PRIu64,
                      off, req_off);
    uint64_t pos = off;
    for (size_t i = 0; i < nr; i += 2) {
        uint32_t len = entries[i];
        bool zero = entries[i + 1] & BLKSUM_NBD_STATE_ZERO;
        if (len == 0)
            return refuse(m, err, errlen,
                          "the server's block status reply has an extent of length 0 at %" PRIu64 " (extent %zu)", pos,
                          i / 2);
        if (pos >= req_end)
            return refuse(m, err, errlen,
                          "the server's block status reply goes on past the end of the range asked for, %" PRIu64
                          " (extent %zu)",
                          req_end, i / 2);
        if (UINT64_MAX - pos < len)
            return refuse(m, err, errlen,
                          "the server's block status reply has an extent at %" PRIu64 " of %" PRIu32
                          " bytes, past 2^64",
                          pos, len);
        pos += len;
        uint64_t end = pos < req_end ? pos : req_end; /* the last extent may reach beyond the request */
        if (m->n && m->ext[m->n - 1].zero == zero) {
            m->ext[m->n - 1].end = end; /* merge runs of one kind */
            continue;
        }
        if (m->n == m->cap) {
            size_t cap = m->cap ? 2 * m->cap : 64;
            struct blksum_nbd_extent *e = realloc(m->ext, cap * sizeof(*e));
            if (!e) {
                m->n = 0;
                snprintf(err, errlen, "out of memory for %zu extents of the server's block status", cap);
                return -ENOMEM;
            }
            m->ext = e;
            m->cap = cap;
        }
        m->ext[m->n++] = (struct blksum_nbd_extent){end, zero};
    }
    return 0;
}

const struct blksum_nbd_extent *blksum_nbd_extents_find(const struct blksum_nbd_map *m, uint64_t off)
{
    if (!m->n || off < m->start || off >= m->ext[m->n - 1].end)
        return NULL;
    size_t lo = 0, hi = m->n - 1; /* the first run whose end is past off */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->ext[mid].end > off)
            hi = mid;
        else
            lo = mid + 1;
    }
    return &m->ext[lo];
}

void blksum_nbd_extents_free(struct blksum_nbd_map *m)
{
    free(m->ext);
    *m = (struct blksum_nbd_map){0};
}
