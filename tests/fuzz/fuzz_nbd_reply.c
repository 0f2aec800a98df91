/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_nbd_reply.c — libFuzzer harness of blksum's reading of an NBD server's block-status reply
 * (src/blksum/nbd_extents.c, blksum_nbd_extents_parse: what nbd.c's extent callback hands it), the part of
 * the NBD path that turns bytes a server chose into the allocation map the reader trusts.
 *
 * The input: 8 bytes of the requested offset, 4 of the requested length, 1 that picks the reply's offset
 * (the requested one, or a wrong one from the next 8 bytes), then the reply's words (little-endian 32-bit
 * lengths and flags), parsed twice into one map (as nbd.c reuses it). A refusal must be -EPROTO with a
 * message and an empty map; an accepted reply must make a map of runs that start at the requested offset,
 * grow strictly, alternate in kind, stay inside the request, cover the whole reply, and answer
 * blksum_nbd_extents_find() for every run's first and last byte with that run. Anything else aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blksum/nbd_extents.h"

#define FUZZ_MAX_WORDS 4096u

static uint64_t take(const uint8_t **p, size_t *left, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && *left; i++, (*p)++, (*left)--)
        v |= (uint64_t)**p << (8 * i);
    return v;
}

static void fail(const char *what, uint64_t a, uint64_t b)
{
    fprintf(stderr, "fuzz_nbd_reply: %s (%llu, %llu)\n", what, (unsigned long long)a, (unsigned long long)b);
    abort();
}

static void check(const struct blksum_nbd_map *m, uint64_t req_off, uint64_t req_len, const uint32_t *w, size_t nr)
{
    uint64_t req_end = req_off + req_len, covered = req_off;
    for (size_t i = 0; i < nr; i += 2)
        covered = covered + w[i] < req_end ? covered + w[i] : req_end;
    if (!m->n || m->start != req_off)
        fail("an accepted reply without runs, or not at the requested offset", m->n, m->start);
    uint64_t begin = m->start;
    for (size_t i = 0; i < m->n; i++) {
        const struct blksum_nbd_extent *e = &m->ext[i];
        if (e->end <= begin || e->end > req_end)
            fail("a run that does not grow or leaves the request", begin, e->end);
        if (i && e->zero == m->ext[i - 1].zero)
            fail("two adjacent runs of one kind", i, e->zero);
        if (blksum_nbd_extents_find(m, begin) != e || blksum_nbd_extents_find(m, e->end - 1) != e)
            fail("find() misses a run", begin, e->end);
        begin = e->end;
    }
    if (begin != covered)
        fail("the runs do not cover the reply", begin, covered);
    if (blksum_nbd_extents_find(m, begin) || (req_off && blksum_nbd_extents_find(m, req_off - 1)))
        fail("find() answers outside the map", req_off, begin);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint32_t words[FUZZ_MAX_WORDS];
    const uint8_t *p = data;
    size_t left = size;
    uint64_t req_off = take(&p, &left, 8);
    uint64_t req_len = take(&p, &left, 4);
    uint64_t off = req_off;
    if (take(&p, &left, 1) & 1)
        off = take(&p, &left, 8);
    size_t nr = left / 4 < FUZZ_MAX_WORDS ? left / 4 : FUZZ_MAX_WORDS;
    for (size_t i = 0; i < nr; i++)
        words[i] = (uint32_t)take(&p, &left, 4);
    struct blksum_nbd_map m = {0};
    char err[256];
    for (int round = 0; round < 2; round++) {
        err[0] = '\0';
        int rc = blksum_nbd_extents_parse(&m, req_off, req_len, off, words, nr, err, sizeof(err));
        if (rc == -EPROTO) {
            if (!err[0] || m.n)
                fail("a refusal without a message, or with a map left", (uint64_t)m.n, 0);
        } else if (rc == 0) {
            check(&m, req_off, req_len, words, nr);
        } else {
            fail("an answer that is neither 0 nor -EPROTO", (uint64_t)-rc, 0);
        }
    }
    blksum_nbd_extents_free(&m);
    return 0;
}
