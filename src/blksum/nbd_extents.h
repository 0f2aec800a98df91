/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd_extents.h — the NBD server's block-status reply (base:allocation) as blksum's allocation map: a
 * pure function over what the server sent, so that a reply someone else wrote is checked in one place
 * (and fuzzed: tests/fuzz/fuzz_nbd_reply.c) before nbd.c reads from it.
 *
 * Key function: blksum_nbd_extents_parse() turns the reply to "the status of [req_off, req_off + req_len)"
 * (entries: nr 32-bit words, (length, flags) pairs, as libnbd hands them over) into runs of one kind
 * (zero or data), each ending where the next begins; blksum_nbd_extents_find() looks one offset up.
 * Caveats: a malformed reply is refused whole (-EPROTO, one line in err): no extent, an odd word count, a
 * reply that does not start at the requested offset, an extent of length 0, one past the end of the
 * request (only the last one may reach beyond it, and it is cut there) or beyond 2^64. No libnbd needed.
 */
#ifndef NVMELAB_BLKSUM_NBD_EXTENTS_H
#define NVMELAB_BLKSUM_NBD_EXTENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The flag of a base:allocation extent that reads as zeros (NBD_STATE_ZERO, libnbd's LIBNBD_STATE_ZERO). */
#define BLKSUM_NBD_STATE_ZERO 0x2u

struct blksum_nbd_extent {
    uint64_t end; /* the run ends here (exclusive); it begins where the previous one ends */
    bool zero;
};

/** The map of one reply: runs covering [start, ext[n - 1].end), adjacent runs of one kind merged. */
struct blksum_nbd_map {
    struct blksum_nbd_extent *ext;
    size_t n, cap;
    uint64_t start;
};

/** Replace m with the reply (off, entries[0..nr)) to the request [req_off, req_off + req_len). 0; -EPROTO
 * (m emptied, err says what was wrong) for a malformed reply; -ENOMEM. */
int blksum_nbd_extents_parse(struct blksum_nbd_map *m, uint64_t req_off, uint64_t req_len, uint64_t off,
                             const uint32_t *entries, size_t nr, char *err, size_t errlen);
/** The run of m holding off, or NULL when m does not cover off. */
const struct blksum_nbd_extent *blksum_nbd_extents_find(const struct blksum_nbd_map *m, uint64_t off);
void blksum_nbd_extents_free(struct blksum_nbd_map *m);

#ifdef __cplusplus
}
#endif
#endif /* NVMELAB_BLKSUM_NBD_EXTENTS_H */
