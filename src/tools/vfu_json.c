/* SPDX-License-Identifier: BSD-3-Clause */
/* vfu_json.c — the strict little JSON reader of VERSION's capability object (vfu_server.h): RFC 8259
 * syntax, nesting at most VFU_JSON_MAX_DEPTH deep; only capabilities.{max_msg_fds, max_data_xfer_size,
 * pgsizes} are read, every other key is skipped whatever its value (the specification says unknown
 * capabilities are ignored). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tools/vfu_server.h"

#define VFU_JSON_MAX_DEPTH  16
#define VFU_JSON_HEX_DIGITS 4

struct jp {
    const char *s;
    size_t n, i;
};

static void ws(struct jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static bool eat(struct jp *p, char c)
{
    ws(p);
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return true;
    }
    return false;
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string; on success [*b, *e) is its raw content between the quotes. */
static int string(struct jp *p, size_t *b, size_t *e)
{
    if (!eat(p, '"'))
        return -EINVAL;
    *b = p->i;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            *e = p->i++;
            return 0;
        }
        if (c < 0x20)
            return -EINVAL;
        if (c == '\\') {
            if (++p->i >= p->n)
                return -EINVAL;
            char x = p->s[p->i];
            if (x == 'u') {
                for (int k = 0; k < VFU_JSON_HEX_DIGITS; k++)
                    if (++p->i >= p->n || !is_hex(p->s[p->i]))
                        return -EINVAL;
            } else if (!strchr("\"\\/bfnrt", x) || x == 0) {
                return -EINVAL;
            }
        }
        p->i++;
    }
    return -EINVAL;
}

/* A number; *u gets its value when it is a non-negative integer that fits (else *is_u = false). */
static int number(struct jp *p, uint64_t *u, bool *is_u)
{
    ws(p);
    *is_u = true;
    *u = 0;
    if (p->i < p->n && p->s[p->i] == '-') {
        *is_u = false;
        p->i++;
    }
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return -EINVAL;
    if (p->s[p->i] == '0') {
        p->i++;
    } else {
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            unsigned d = (unsigned)(p->s[p->i] - '0');
            if (*u > (UINT64_MAX - d) / 10)
                *is_u = false;
            else
                *u = *u * 10 + d;
            p->i++;
        }
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        *is_u = false;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return -EINVAL;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        *is_u = false;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return -EINVAL;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    return 0;
}

static bool literal(struct jp *p, const char *w)
{
    size_t l = strlen(w);
    ws(p);
    if (p->n - p->i >= l && memcmp(p->s + p->i, w, l) == 0) {
        p->i += l;
        return true;
    }
    return false;
}

static int object(struct jp *p, int depth, struct vfu_caps *caps);

/* Any value, skipped. */
static int skip(struct jp *p, int depth)
{
    if (depth > VFU_JSON_MAX_DEPTH)
        return -EINVAL;
    ws(p);
    if (p->i >= p->n)
        return -EINVAL;
    char c = p->s[p->i];
    size_t b, e;
    uint64_t u;
    bool is_u;
    if (c == '{')
        return object(p, depth + 1, NULL);
    if (c == '[') {
        p->i++;
        if (eat(p, ']'))
            return 0;
        do {
            int r = skip(p, depth + 1);
            if (r)
                return r;
        } while (eat(p, ','));
        return eat(p, ']') ? 0 : -EINVAL;
    }
    if (c == '"')
        return string(p, &b, &e);
    if (c == '-' || (c >= '0' && c <= '9'))
        return number(p, &u, &is_u);
    if (literal(p, "true") || literal(p, "false") || literal(p, "null"))
        return 0;
    return -EINVAL;
}

static bool key_is(const struct jp *p, size_t b, size_t e, const char *k)
{
    return e - b == strlen(k) && memcmp(p->s + b, k, e - b) == 0;
}

/* An object. caps == NULL: skip it; depth 1 with caps: the top level (looks for "capabilities");
 * depth 2 with caps: the capability object (reads the known keys). */
static int object(struct jp *p, int depth, struct vfu_caps *caps)
{
    if (depth > VFU_JSON_MAX_DEPTH || !eat(p, '{'))
        return -EINVAL;
    if (eat(p, '}'))
        return 0;
    do {
        size_t b, e;
        int r = string(p, &b, &e);
        if (r)
            return r;
        if (!eat(p, ':'))
            return -EINVAL;
        if (caps && depth == 1 && key_is(p, b, e, "capabilities")) {
            ws(p);
            r = object(p, depth + 1, caps);
        } else if (caps && depth == 2 &&
                   (key_is(p, b, e, "max_msg_fds") || key_is(p, b, e, "max_data_xfer_size") ||
                    key_is(p, b, e, "pgsizes"))) {
            uint64_t u;
            bool is_u;
            r = number(p, &u, &is_u);
            if (!r && !is_u)
                r = -EINVAL;
            if (!r) {
                if (key_is(p, b, e, "max_msg_fds"))
                    caps->max_msg_fds = u;
                else if (key_is(p, b, e, "max_data_xfer_size"))
                    caps->max_data_xfer_size = u;
                else
                    caps->pgsizes = u;
            }
        } else {
            r = skip(p, depth);
        }
        if (r)
            return r;
    } while (eat(p, ','));
    return eat(p, '}') ? 0 : -EINVAL;
}

int vfu_json_caps(const char *s, size_t n, struct vfu_caps *out)
{
    out->max_msg_fds = VFU_MAX_FDS;
    out->max_data_xfer_size = VFU_MAX_DATA_XFER;
    out->pgsizes = VFU_PAGE_SIZE;
    if (n && s[n - 1] == '\0')
        n--; /* the specification's terminating NUL */
    if (n == 0)
        return 0;
    struct jp p = {.s = s, .n = n, .i = 0};
    struct vfu_caps c = *out;
    int r = object(&p, 1, &c);
    if (r)
        return r;
    ws(&p);
    if (p.i != p.n)
        return -EINVAL; /* trailing bytes (a NUL inside included) */
    *out = c;
    return 0;
}
