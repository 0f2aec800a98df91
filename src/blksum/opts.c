/* SPDX-License-Identifier: BSD-3-Clause */
/* opts.c — blksum's options, digests and error texts: defaults, checks, the digest list, the digest as
 * hex (see blksum.h). */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blksum/blksum.h"
#include "blksum/blksum_internal.h"
#include "engine/uring.h"

bool blksum_is_null_digest(const char *name)
{
    return name && strcmp(name, "null") == 0;
}

const EVP_MD *blksum_fetch_md(const char *name, EVP_MD **owned)
{
    const EVP_MD *md;
    /* An explicitly fetched digest skips the implicit fetch on every DigestInit. */
    *owned = EVP_MD_fetch(NULL, name, NULL);
    if (*owned)
        return *owned;
    ERR_clear_error();
    md = EVP_get_digestbyname(name);
    ERR_clear_error();
    return md;
}

bool blksum_digest_known(const char *name)
{
    EVP_MD *owned;
    const EVP_MD *md;
    if (!name || !*name || strlen(name) >= BLKSUM_MAX_DIGEST_NAME)
        return false;
    if (blksum_is_null_digest(name))
        return true;
    md = blksum_fetch_md(name, &owned);
    EVP_MD_free(owned);
    return md != NULL;
}

bool blksum_have_io_uring(void)
{
    return uring_probe(NULL, 0) == 0;
}

const char *blksum_strerror(int err)
{
    if (err == -BLKSUM_EDIGEST)
        return "unknown digest name (see --list-digests)";
    if (err == -ECANCELED)
        return "interrupted";
    if (err == -ENODATA)
        return "the image shrank while it was read";
    return strerror(err < 0 ? -err : err);
}

void blksum_opts_init(struct blksum_opts *o)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    memset(o, 0, sizeof(*o));
    o->digest = BLKSUM_DEFAULT_DIGEST;
    o->threads = n > 0 ? (int)(n < BLKSUM_MAX_THREADS ? n : BLKSUM_MAX_THREADS) : 1;
    o->queue_depth = BLKSUM_DEFAULT_QUEUE_DEPTH;
    o->read_size = BLKSUM_DEFAULT_READ_SIZE;
    o->io = BLKSUM_IO_PSYNC;
}

int blksum_opts_check(const struct blksum_opts *o, char *msg, size_t msglen)
{
    char dummy[1];
    if (!msg) {
        msg = dummy;
        msglen = sizeof(dummy);
    }
    const char *d = o->digest ? o->digest : BLKSUM_DEFAULT_DIGEST;
    if (!blksum_digest_known(d)) {
        snprintf(msg, msglen, "unknown digest %.64s (see --list-digests)", d);
        return -BLKSUM_EDIGEST;
    }
    if (o->threads < 1 || o->threads > BLKSUM_MAX_THREADS) {
        snprintf(msg, msglen, "threads must be 1..%d, got %d", BLKSUM_MAX_THREADS, o->threads);
        return -EINVAL;
    }
    if (o->queue_depth < 1 || o->queue_depth > BLKSUM_MAX_QUEUE_DEPTH) {
        snprintf(msg, msglen, "queue depth must be 1..%d, got %d", BLKSUM_MAX_QUEUE_DEPTH, o->queue_depth);
        return -EINVAL;
    }
    if (o->read_size < BLKSUM_BLOCK_SIZE || o->read_size > BLKSUM_MAX_READ_SIZE || o->read_size % BLKSUM_BLOCK_SIZE) {
        snprintf(msg, msglen, "read size must be a multiple of %u bytes between %u and %u, got %zu", BLKSUM_BLOCK_SIZE,
                 BLKSUM_BLOCK_SIZE, BLKSUM_MAX_READ_SIZE, o->read_size);
        return -EINVAL;
    }
    if (o->io != BLKSUM_IO_PSYNC && o->io != BLKSUM_IO_IO_URING && o->io != BLKSUM_IO_TARGET) {
        snprintf(msg, msglen, "unknown I/O mode %d", (int)o->io);
        return -EINVAL;
    }
    if (o->io == BLKSUM_IO_IO_URING) {
        int rc = uring_probe(msg, msglen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- digests list */

struct name_list {
    char **names;
    size_t n, cap;
};

static void add_name(const char *name, void *arg)
{
    struct name_list *l = arg;
    char buf[BLKSUM_MAX_DIGEST_NAME];
    size_t i, len = strlen(name);
    if (len == 0 || len >= sizeof(buf) || (name[0] >= '0' && name[0] <= '9'))
        return; /* skip OIDs */
    for (i = 0; i <= len; i++)
        buf[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] - 'A' + 'a' : name[i]);
    for (i = 0; i < l->n; i++)
        if (strcmp(l->names[i], buf) == 0)
            return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **p = realloc(l->names, cap * sizeof(*p));
        if (!p)
            return;
        l->names = p;
        l->cap = cap;
    }
    l->names[l->n] = strdup(buf);
    if (l->names[l->n])
        l->n++;
}

static void each_md(EVP_MD *md, void *arg)
{
    EVP_MD_names_do_all(md, add_name, arg);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int blksum_list_digests(void (*fn)(const char *name, void *arg), void *arg)
{
    struct name_list l = {0};
    size_t i;
    int count = 0;
    add_name("null", &l);
    EVP_MD_do_all_provided(NULL, each_md, &l);
    qsort(l.names, l.n, sizeof(*l.names), cmp_str);
    for (i = 0; i < l.n; i++) {
        if (blksum_digest_known(l.names[i])) {
            fn(l.names[i], arg);
            count++;
        }
        free(l.names[i]);
    }
    free(l.names);
    return count;
}

void blksum_hex(const struct blksum_result *res, char *out, size_t outlen)
{
    static const char digits[] = "0123456789abcdef";
    size_t k = 0;
    for (unsigned i = 0; i < res->md_len && k + 2 < outlen; i++) {
        out[k++] = digits[res->md[i] >> 4];
        out[k++] = digits[res->md[i] & 0xfu];
    }
    if (outlen)
        out[k < outlen ? k : outlen - 1] = '\0';
}
