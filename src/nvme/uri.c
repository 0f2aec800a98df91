/* SPDX-License-Identifier: BSD-3-Clause */
/* uri.c — the generic target-URI parser (grammar in uri.h and src/README.md). */
#include "nvme/uri.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/errbuf.h"

#define URI_SCHEME_SEP "://"
#define URI_SCHEME_MAX 15u
#define HEX_BASE       16

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decode %XX escapes in place; -EINVAL on a malformed escape, -EILSEQ on an encoded NUL (a NUL anywhere in
 * a URI is an error: the text after it would be lost). */
static int pct_decode(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r != '%') {
            *w++ = *r;
            continue;
        }
        int hi = hexval(r[1]), lo = hi >= 0 ? hexval(r[2]) : -1;
        if (hi < 0 || lo < 0)
            return -EINVAL;
        if (hi == 0 && lo == 0)
            return -EILSEQ;
        *w++ = (char)(hi * HEX_BASE + lo);
        r += 2;
    }
    *w = '\0';
    return 0;
}

static bool key_ok(const char *k)
{
    if (!*k)
        return false;
    for (; *k; k++)
        if (!(islower((unsigned char)*k) || isdigit((unsigned char)*k) || *k == '_'))
            return false;
    return true;
}

_Static_assert(NVME_URI_SCHEME_LEN == URI_SCHEME_MAX + 1u, "uri.h's scheme buffer holds the longest scheme");

/* A scheme as the grammar takes it: 1..URI_SCHEME_MAX of [A-Za-z0-9+.-], lower-cased in place. -EINVAL
 * otherwise (the characters before the first bad one are lower-cased: the parser's message quotes s). */
static int scheme_take(char *s)
{
    if (!*s || strlen(s) > URI_SCHEME_MAX)
        return -EINVAL;
    for (char *p = s; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '+' && *p != '.')
            return -EINVAL;
        *p = (char)tolower((unsigned char)*p);
    }
    return 0;
}

int nvme_uri_scheme(const char *s, char *buf, size_t buflen)
{
    if (!s || !buf || buflen < NVME_URI_SCHEME_LEN)
        return -EINVAL;
    const char *sep = strstr(s, URI_SCHEME_SEP);
    size_t n = sep ? (size_t)(sep - s) : strnlen(s, NVME_URI_SCHEME_LEN);
    if (n == 0 || n > URI_SCHEME_MAX)
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return scheme_take(buf);
}

/* The parsed URI and all its strings live in one allocation: the header, a copy of the raw URI, a copy of
 * the authority (kept whole), and a working copy that is cut in place into scheme, items, path, params. */
int nvme_uri_parse(const char *s, struct nvme_uri **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc;
    if (!s || !*s)
        return nvme_errf(err, errlen, -EINVAL, "empty URI");
    size_t n = strnlen(s, NVME_URI_MAX_LEN + 1);
    if (n > NVME_URI_MAX_LEN)
        return nvme_errf(err, errlen, -EINVAL, "URI longer than %u characters", NVME_URI_MAX_LEN);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return nvme_errf(err, errlen, -EINVAL, "URI contains a space or control character at position %zu", i);

    /* 5 regions of n + 1 bytes: raw, scheme/query work copy, authority (whole), items (split), path */
    struct nvme_uri *u = calloc(1, sizeof(*u) + 5 * (n + 1));
    if (!u)
        return -ENOMEM;
    char *raw = (char *)(u + 1);
    char *w = raw + (n + 1);
    char *auth = w + (n + 1);
    char *items = auth + (n + 1);
    char *path = items + (n + 1);
    memcpy(raw, s, n + 1);
    memcpy(w, s, n + 1);
    u->raw = raw;

    char *sep = strstr(w, URI_SCHEME_SEP);
    if (!sep) {
        nvme_errf(err, errlen, -EINVAL, "URI '%s' has no scheme (expected e.g. emu://, pci://)", s);
        goto bad;
    }
    *sep = '\0';
    if (scheme_take(w)) {
        nvme_errf(err, errlen, -EINVAL, "URI '%s': bad scheme '%s'", s, w);
        goto bad;
    }
    u->scheme = w;

    char *rest = sep + strlen(URI_SCHEME_SEP);
    size_t alen = strcspn(rest, "/?");
    size_t plen = rest[alen] == '/' ? strcspn(rest + alen, "?") : 0;
    memcpy(auth, rest, alen);
    auth[alen] = '\0';
    memcpy(items, rest, alen);
    items[alen] = '\0';
    memcpy(path, rest + alen, plen);
    path[plen] = '\0';
    u->authority = auth;
    u->path = path;
    if (plen && (rc = pct_decode(path)) != 0) {
        nvme_errf(err, errlen, -EINVAL, "URI '%s': %s in the path", s,
                  rc == -EILSEQ ? "'%00' (an encoded NUL character)" : "bad %-escape");
        goto bad;
    }
    if (alen) {
        if (items[0] == ',' || items[alen - 1] == ',' || strstr(items, ",,")) {
            nvme_errf(err, errlen, -EINVAL, "URI '%s': empty item in '%s'", s, auth);
            goto bad;
        }
        char *save = NULL;
        for (char *tok = strtok_r(items, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (u->nitems == NVME_URI_MAX_ITEMS) {
                nvme_errf(err, errlen, -EINVAL, "URI '%s': more than %u items in the authority", s, NVME_URI_MAX_ITEMS);
                goto bad;
            }
            u->items[u->nitems++] = tok;
        }
    }
    char *q = strchr(rest, '?');
    if (q)
        *q++ = '\0';
    if (q) {
        if (!*q) {
            nvme_errf(err, errlen, -EINVAL, "URI '%s': empty query after '?'", s);
            goto bad;
        }
        if (q[strlen(q) - 1] == '&' || q[0] == '&' || strstr(q, "&&")) {
            nvme_errf(err, errlen, -EINVAL, "URI '%s': empty parameter in '%s'", s, q);
            goto bad;
        }
        char *save = NULL;
        for (char *tok = strtok_r(q, "&", &save); tok; tok = strtok_r(NULL, "&", &save)) {
            if (u->nparams == NVME_URI_MAX_PARAMS) {
                nvme_errf(err, errlen, -EINVAL, "URI '%s': more than %u parameters", s, NVME_URI_MAX_PARAMS);
                goto bad;
            }
            char *eq = strchr(tok, '=');
            const char *val = "1";
            if (eq) {
                *eq = '\0';
                val = eq + 1;
                if ((rc = pct_decode(eq + 1)) != 0) {
                    nvme_errf(err, errlen, -EINVAL, "parameter '%s': %s in its value", tok,
                              rc == -EILSEQ ? "'%00' (an encoded NUL character)" : "bad %-escape");
                    goto bad;
                }
                if (!*val) {
                    nvme_errf(err, errlen, -EINVAL, "parameter '%s': empty value", tok);
                    goto bad;
                }
            }
            if (!key_ok(tok)) {
                nvme_errf(err, errlen, -EINVAL, "URI '%s': bad parameter name '%s' (lower-case letters, digits, '_')",
                          s, tok);
                goto bad;
            }
            for (unsigned i = 0; i < u->nparams; i++) {
                if (strcmp(u->params[i].key, tok) == 0) {
                    nvme_errf(err, errlen, -EINVAL, "parameter '%s' given twice", tok);
                    goto bad;
                }
            }
            u->params[u->nparams].key = tok;
            u->params[u->nparams].value = val;
            u->nparams++;
        }
    }
    *out = u;
    return 0;
bad:
    free(u);
    return -EINVAL;
}

void nvme_uri_free(struct nvme_uri *u)
{
    free(u);
}

const char *nvme_uri_get(const struct nvme_uri *u, const char *key)
{
    for (unsigned i = 0; i < u->nparams; i++)
        if (strcmp(u->params[i].key, key) == 0)
            return u->params[i].value;
    return NULL;
}

int nvme_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -EINVAL;
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = HEX_BASE;
        s += 2;
        if (!*s)
            return -EINVAL;
    }
    /* digits only: strtoull alone would also take a sign, spaces and a second "0x" ("0x-1" = 2^64 - 1) */
    for (const char *p = s; *p; p++)
        if (base == HEX_BASE ? !isxdigit((unsigned char)*p) : !isdigit((unsigned char)*p))
            return -EINVAL;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, base);
    if (errno || *end || end == s)
        return -EINVAL;
    *out = v;
    return 0;
}

struct size_suffix {
    const char *name;
    uint64_t mult;
};

#define KIB ((uint64_t)1 << 10)
#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
#define TIB ((uint64_t)1 << 40)
#define KB  1000ull
#define MB  (KB * KB)
#define GB  (MB * KB)
#define TB  (GB * KB)

static const struct size_suffix size_suffixes[] = {
    {"", 1},    {"B", 1},   {"KiB", KIB}, {"MiB", MIB}, {"GiB", GIB}, {"TiB", TIB}, {"k", KIB}, {"K", KIB},
    {"M", MIB}, {"G", GIB}, {"T", TIB},   {"KB", KB},   {"kB", KB},   {"MB", MB},   {"GB", GB}, {"TB", TB},
};

int nvme_parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    char *end = NULL;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        return nvme_parse_u64(s, out);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(size_suffixes) / sizeof(size_suffixes[0]); i++) {
        if (strcmp(end, size_suffixes[i].name) == 0) {
            uint64_t m = size_suffixes[i].mult;
            if (v > UINT64_MAX / m)
                return -EINVAL;
            *out = v * m;
            return 0;
        }
    }
    return -EINVAL;
}

int nvme_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

int nvme_uri_get_u64(const struct nvme_uri *u, const char *key, uint64_t def, uint64_t *out, char *err, size_t errlen)
{
    const char *v = nvme_uri_get(u, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (nvme_parse_u64(v, out) != 0)
        return nvme_errf(err, errlen, -EINVAL, "parameter '%s': bad unsigned integer '%s'", key, v);
    return 0;
}

int nvme_uri_get_size(const struct nvme_uri *u, const char *key, uint64_t def, uint64_t *out, char *err, size_t errlen)
{
    const char *v = nvme_uri_get(u, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (nvme_parse_size(v, out) != 0)
        return nvme_errf(err, errlen, -EINVAL, "parameter '%s': bad size '%s' (e.g. 4096, 64MiB, 1GiB)", key, v);
    return 0;
}

int nvme_uri_get_bool(const struct nvme_uri *u, const char *key, bool def, bool *out, char *err, size_t errlen)
{
    const char *v = nvme_uri_get(u, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (nvme_parse_bool(v, out) != 0)
        return nvme_errf(err, errlen, -EINVAL, "parameter '%s': bad boolean '%s' (1/0, true/false, yes/no, on/off)",
                         key, v);
    return 0;
}

int nvme_uri_check_keys(const struct nvme_uri *u, const char *const *known, char *err, size_t errlen)
{
    for (unsigned i = 0; i < u->nparams; i++) {
        bool found = false;
        for (const char *const *k = known; *k; k++)
            if (strcmp(*k, u->params[i].key) == 0)
                found = true;
        if (!found) {
            char list[NVME_URI_MAX_LEN / 4] = "";
            size_t off = 0;
            for (const char *const *k = known; *k && off < sizeof(list); k++)
                off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", off ? ", " : "", *k);
            return nvme_errf(err, errlen, -EINVAL, "unknown parameter '%s' for %s:// (known: %s)", u->params[i].key,
                             u->scheme, list);
        }
    }
    return 0;
}

unsigned nvme_uri_list_count(const char *value)
{
    if (!value || !*value)
        return 0;
    unsigned n = 1;
    for (; *value; value++)
        n += *value == ',';
    return n;
}

int nvme_uri_list_item(const char *value, unsigned i, char *buf, size_t buflen)
{
    if (!value || i >= nvme_uri_list_count(value))
        return -ERANGE;
    const char *p = value;
    for (unsigned k = 0; k < i; k++)
        p = strchr(p, ',') + 1;
    size_t n = strcspn(p, ",");
    if (n + 1 > buflen)
        return -ENAMETOOLONG;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 0;
}
