/* SPDX-License-Identifier: BSD-3-Clause */
/* test_blksum_qcow2.c — the direct qcow2 reader (src/blksum/qcow2.c) on images crafted here, under the
 * sanitizers too (make test-sanitize): a guest size within one cluster of 2^64 is refused naming the
 * size (it wrapped the cluster count and read past the reader's table), an 8 TiB guest whose L1 entries
 * all name one L2 table is mapped and read region by region (each region advances, the data cluster
 * repeats every 512 MiB), a version 2 image with a zero flag is refused, and a compressed cluster is told
 * apart as -ENOTSUP (mode auto then serves the image with qemu-nbd). tests/test_blksum_qcow2_crafted.py
 * has the full table of crafted fields, against the command and qemu.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blksum/blksum.h"
#include "blksum/image.h"
#include "check.h"

#define CB       16u
#define CS       (1ull << CB)
#define PER_L2   (CS / 8)
#define COPIED   (1ull << 63)
#define COMPRESS (1ull << 62)
#define HDR_V3   104u

static int read_status = 1;

static void on_done(struct perf_chan *ch, uint32_t slot, int status)
{
    (void)ch, (void)slot;
    read_status = status;
}

struct img {
    unsigned char *b;
    size_t len;
};

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

/* Header, refcount table (cluster 1) and block (2), L1 (cluster 3..), one L2 table named by all l1
 * entries, then ndata data clusters; returns the L2 table's offset. */
static uint64_t build(struct img *m, uint32_t version, uint64_t size, uint32_t l1, unsigned ndata)
{
    uint64_t l1_clusters = ((uint64_t)l1 * 8 + CS - 1) / CS, l2 = (3 + l1_clusters) * CS;
    m->len = (size_t)(l2 + CS + ndata * CS);
    m->b = calloc(1, m->len);
    REQUIRE(m->b != NULL);
    put32(m->b, BLKSUM_QCOW2_MAGIC);
    put32(m->b + 4, version);
    put32(m->b + 20, CB);
    put64(m->b + 24, size);
    put32(m->b + 36, l1);
    put64(m->b + 40, 3 * CS);
    put64(m->b + 48, CS);
    put32(m->b + 56, 1);
    if (version == 3) {
        put32(m->b + 96, 4);
        put32(m->b + 100, HDR_V3);
    }
    put64(m->b + CS, 2 * CS);
    for (uint64_t i = 0; i < m->len / CS; i++)
        m->b[2 * CS + 2 * i + 1] = 1;
    for (uint32_t i = 0; i < l1; i++)
        put64(m->b + 3 * CS + 8 * i, l2 | COPIED);
    return l2;
}

/* Open m with the direct reader: rc, and the one line in err. */
static int open_img(const struct img *m, struct blksum_source *src, int *fd, char *err, size_t errlen)
{
    char path[] = "/tmp/test_blksum_qcow2_XXXXXX";
    *fd = mkstemp(path);
    REQUIRE(*fd >= 0);
    unlink(path);
    REQUIRE(pwrite(*fd, m->b, m->len, 0) == (ssize_t)m->len);
    memset(src, 0, sizeof(*src));
    src->fd = -1;
    err[0] = '\0';
    return blksum_qcow2_open(src, *fd, "crafted.qcow2", err, errlen);
}

static void size_within_a_cluster_of_2_64(void)
{
    struct img m;
    struct blksum_source src;
    char err[512];
    int fd;
    build(&m, 3, UINT64_MAX - 511, 1, 0);
    CHECK_EQ(open_img(&m, &src, &fd, err, sizeof(err)), -EFBIG);
    CHECK_CONTAINS(err, "qcow2 size");
    close(fd);
    free(m.b);
}

/* The allocation map and reads over the whole guest of one shared L2 table with a data cluster first. */
static void shared_l2_table(void)
{
    enum { L1 = 16384 }; /* 8 TiB of guest in a 384 KiB file */
    struct img m;
    struct blksum_source src;
    char err[512];
    int fd;
    uint64_t l2 = build(&m, 3, (uint64_t)L1 * PER_L2 * CS, L1, 1);
    put64(m.b + l2, (l2 + CS) | COPIED);
    memset(m.b + l2 + CS, 0xa5, CS);
    REQUIRE_EQ(open_img(&m, &src, &fd, err, sizeof(err)), 0);
    CHECK_EQ(src.size, (uint64_t)L1 * PER_L2 * CS);
    uint64_t off = 0, data = 0, regions = 0;
    while (off < src.size) {
        uint64_t end = 0;
        bool zero = true;
        REQUIRE_EQ(src.map(src.map_ctx, off, &end, &zero), 0);
        REQUIRE(end > off && end <= src.size);
        if (!zero) {
            CHECK_EQ(off % (PER_L2 * CS), 0);
            CHECK_EQ(end - off, CS);
            data++;
        }
        regions++;
        off = end;
    }
    CHECK_EQ(data, L1);
    CHECK(regions <= 2 * L1 + 1);
    struct perf_target *t = src.target;
    struct perf_chan *ch = NULL;
    REQUIRE_EQ(t->ops->chan_open(t->ctx, 0, 1, 2 * CS, &ch, err, sizeof(err)), 0);
    ch->done = on_done;
    unsigned char *buf = t->ops->chan_buf(ch, 0);
    /* one read across the end of one table's coverage into the next: zeros, then the data cluster */
    CHECK_EQ(t->ops->submit(ch, 0, 0, PER_L2 * CS - CS, 2 * CS), 0);
    CHECK_EQ(t->ops->reap(ch, 1), 1);
    CHECK_EQ(read_status, 0);
    CHECK(buf[0] == 0 && buf[CS - 1] == 0 && buf[CS] == 0xa5 && buf[2 * CS - 1] == 0xa5);
    t->ops->chan_close(ch);
    blksum_source_close(&src);
    close(fd);
    free(m.b);
}

static void v2_zero_flag_and_compressed(void)
{
    struct img m;
    struct blksum_source src;
    char err[512];
    int fd;
    uint64_t l2 = build(&m, 2, PER_L2 * CS, 1, 1);
    put64(m.b + l2, (l2 + CS) | COPIED | 1);
    CHECK_EQ(open_img(&m, &src, &fd, err, sizeof(err)), -EINVAL);
    CHECK_CONTAINS(err, "zero flag");
    close(fd);
    put64(m.b + l2, (l2 + CS) | COMPRESS);
    CHECK_EQ(open_img(&m, &src, &fd, err, sizeof(err)), -ENOTSUP);
    CHECK_CONTAINS(err, "compressed clusters");
    close(fd);
    free(m.b);
}

int main(void)
{
    RUN_CASE(size_within_a_cluster_of_2_64);
    RUN_CASE(shared_l2_table);
    RUN_CASE(v2_zero_flag_and_compressed);
    return CHECK_DONE("test_blksum_qcow2");
}
