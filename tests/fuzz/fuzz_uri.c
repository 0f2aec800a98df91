/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_uri.c — libFuzzer harness of the target-URI parser (src/nvme/uri.c) and the emu:// parameter parser
 * behind it (src/nvme/emu/params.c, emu_parse_cfg), the text every driver and engine target starts from.
 *
 * The input is one URI (cut at its first NUL, as a C string is). It is parsed with nvme_uri_parse(); a
 * parsed URI is checked against the grammar of uri.h (scheme in lower case, items and values non-empty,
 * keys [a-z0-9_] and unique, a path that starts with '/'), every value goes through the typed getters and
 * the comma-list helpers (whose items must put the value back together), the key sets of emu://, gpu-emu://
 * (the rows of emu_keys.h's table), pci:// and file:// are checked, so is the table's own key check of both
 * emulators (old spellings resolve and warn), and an emu:// URI's parameters go through emu_parse_cfg() as
 * nvme_emu_target_open() hands them over (no controller is created). The input is also given whole to the value
 * grammars (nvme_parse_u64/size/bool), whose answers are compared with a reference reading of uri.h's grammar. A
 * refusal must be -EINVAL with a message; anything else that goes wrong aborts (a finding).
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/emu/emu_internal.h"
#include "nvme/emu/emu_keys.h"
#include "nvme/uri.h"

#define FUZZ_MAX_INPUT    (NVME_URI_MAX_LEN + 64u)
#define FUZZ_EMU_KEYS_MAX 64u /* rows of emu_keys.h at most (the key sets below) */

static void fail(const char *what, const char *s)
{
    fprintf(stderr, "fuzz_uri: %s: '%s'\n", what, s);
    abort();
}

/* uri.h's key grammar read independently of uri.c: one or more of [a-z0-9_] */
static bool key_ok(const char *k)
{
    return *k && strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(k);
}

/* uri.h's unsigned integer: decimal digits, or 0x/0X and hex digits; the value, or false (not one, or it
 * does not fit in 64 bits). Prefix = how many leading characters make the number (the rest is a suffix). */
static bool ref_u64(const char *s, uint64_t *out, size_t *prefix)
{
    unsigned base = 10;
    const char *p = s;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    uint64_t v = 0;
    const char *d = p;
    for (; *p; p++) {
        int x = isdigit((unsigned char)*p)                  ? *p - '0'
                : base == 16 && isxdigit((unsigned char)*p) ? tolower((unsigned char)*p) - 'a' + 10
                                                            : -1;
        if (x < 0)
            break;
        if (v > (UINT64_MAX - (uint64_t)x) / base)
            return false;
        v = v * base + (uint64_t)x;
    }
    if (p == d)
        return false;
    *out = v;
    *prefix = (size_t)(p - s);
    return true;
}

static void check_value_grammars(const char *s)
{
    uint64_t v = 0, r = 0;
    size_t n = 0;
    bool ok = ref_u64(s, &r, &n);
    int rc = nvme_parse_u64(s, &v);
    if (rc != 0 && rc != -EINVAL)
        fail("nvme_parse_u64: neither 0 nor -EINVAL", s);
    bool whole = ok && s[n] == '\0';
    if ((rc == 0) != whole || (rc == 0 && v != r))
        fail(rc == 0 ? "nvme_parse_u64 accepted what uri.h's grammar does not (or read another value)"
                     : "nvme_parse_u64 refused an unsigned integer",
             s);
    rc = nvme_parse_size(s, &v);
    if (rc != 0 && rc != -EINVAL)
        fail("nvme_parse_size: neither 0 nor -EINVAL", s);
    if (rc == 0 && !ok)
        fail("nvme_parse_size accepted a value that does not start with a number", s);
    if (rc == 0 && s[n] == '\0' && v != r)
        fail("nvme_parse_size read a plain number as another value", s);
    bool b;
    rc = nvme_parse_bool(s, &b);
    if (rc != 0 && rc != -EINVAL)
        fail("nvme_parse_bool: neither 0 nor -EINVAL", s);
}

/* A comma list: the items put back together with ',' are the value; an item past the end is -ERANGE. */
static void check_list(const char *value)
{
    unsigned n = nvme_uri_list_count(value);
    size_t len = strlen(value);
    char *joined = calloc(1, len + 2), *buf = malloc(len + 1);
    if (!joined || !buf)
        abort();
    size_t off = 0;
    for (unsigned i = 0; i < n; i++) {
        if (nvme_uri_list_item(value, i, buf, len + 1) != 0)
            fail("nvme_uri_list_item refused an item it counted", value);
        size_t k = strlen(buf);
        if (off + k + (i > 0) > len)
            fail("the list's items are longer than the value", value);
        off += (size_t)snprintf(joined + off, len + 2 - off, "%s%s", i ? "," : "", buf);
        char small[4];
        int rc = nvme_uri_list_item(value, i, small, sizeof(small));
        if (rc != 0 && (rc != -ENAMETOOLONG || k < sizeof(small)))
            fail("nvme_uri_list_item with a small buffer", value);
    }
    if (strcmp(joined, value) != 0)
        fail("the list's items do not make the value", value);
    if (nvme_uri_list_item(value, n, buf, len + 1) != -ERANGE)
        fail("an item past the end of a list is not -ERANGE", value);
    free(joined);
    free(buf);
}

static void check_parsed(const struct nvme_uri *u, const char *s)
{
    if (!u->scheme[0] || !u->raw || strcmp(u->raw, s) != 0 || !u->authority || !u->path)
        fail("a parsed URI lacks a part", s);
    for (const char *p = u->scheme; *p; p++)
        if (isupper((unsigned char)*p))
            fail("the scheme is not lower case", s);
    if (u->path[0] && u->path[0] != '/')
        fail("a path that does not start with '/'", s);
    if (u->nitems > NVME_URI_MAX_ITEMS || u->nparams > NVME_URI_MAX_PARAMS)
        fail("more items or parameters than the limits", s);
    for (unsigned i = 0; i < u->nitems; i++)
        if (!u->items[i][0] || strchr(u->items[i], ','))
            fail("an empty authority item, or one with a ','", s);
    char err[512];
    for (unsigned i = 0; i < u->nparams; i++) {
        const char *k = u->params[i].key, *v = u->params[i].value;
        if (!key_ok(k) || !v || !v[0])
            fail("a bad key or an empty value was accepted", s);
        for (unsigned j = 0; j < i; j++)
            if (strcmp(u->params[j].key, k) == 0)
                fail("a key given twice was accepted", s);
        if (nvme_uri_get(u, k) != v)
            fail("nvme_uri_get does not find a parsed key", s);
        uint64_t x;
        bool b;
        int rc = nvme_uri_get_u64(u, k, 0, &x, err, sizeof(err)) | nvme_uri_get_size(u, k, 0, &x, err, sizeof(err)) |
                 nvme_uri_get_bool(u, k, false, &b, err, sizeof(err));
        if (rc != 0 && rc != -EINVAL)
            fail("a typed getter: neither 0 nor -EINVAL", s);
        check_list(v);
        check_value_grammars(v);
    }
    /* the emulators' key sets: the rows of emu_keys.h's table (no key listed here by hand) */
    static const char *emu_keys[FUZZ_EMU_KEYS_MAX + 1], *gpu_keys[FUZZ_EMU_KEYS_MAX + 1];
    if (!emu_keys[0]) {
        const struct nvme_emu_key *k;
        for (unsigned i = 0, ne = 0, ng = 0; (k = nvme_emu_key_at(i)) && i < FUZZ_EMU_KEYS_MAX; i++) {
            if (k->who & NVME_EMU_CPU)
                emu_keys[ne++] = k->name;
            if (k->who & NVME_EMU_GPU)
                gpu_keys[ng++] = k->name;
        }
    }
    static const char *const pci_keys[] = {"driver", NULL};
    static const char *const kio_keys[] = {"backend", "allow_write", NULL};
    static const char *const none[] = {NULL};
    const char *const *sets[] = {emu_keys, gpu_keys, pci_keys, kio_keys, none};
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        err[0] = '\0';
        int rc = nvme_uri_check_keys(u, sets[i], err, sizeof(err));
        if (rc != 0 && (rc != -EINVAL || !err[0]))
            fail("nvme_uri_check_keys: a refusal without -EINVAL and a message", s);
    }
    /* the table's key check of either emulator: a refusal has a message; what passes resolves to rows */
    const char *names[NVME_URI_MAX_PARAMS];
    for (unsigned i = 0; i < u->nparams; i++)
        names[i] = u->params[i].key;
    static const unsigned who[] = {NVME_EMU_CPU, NVME_EMU_GPU};
    for (size_t w = 0; w < sizeof(who) / sizeof(who[0]); w++) {
        char warn[NVME_EMU_WARN_LEN] = "";
        err[0] = '\0';
        int rc = nvme_emu_keys_check("fuzz: ", who[w], names, u->nparams, warn, sizeof(warn), err, sizeof(err));
        if (rc != 0 && (rc != -EINVAL || !err[0]))
            fail("nvme_emu_keys_check: a refusal without -EINVAL and a message", s);
        bool old_used = false;
        for (unsigned i = 0; !rc && i < u->nparams; i++) {
            bool old = false;
            const struct nvme_emu_key *k = nvme_emu_key_find(names[i], who[w], &old);
            if (!k || nvme_emu_key_name(k->name, names, u->nparams) != names[i])
                fail("nvme_emu_keys_check passed a key the table does not resolve", s);
            old_used |= old;
            (void)nvme_emu_value("fuzz: ", k->name, u->params[i].value, warn, sizeof(warn));
        }
        if (!rc && old_used && !warn[0])
            fail("an old spelling passed without a warning", s);
    }
    if (strcmp(u->scheme, "emu") == 0) {
        struct nvme_emu_kv kv[NVME_URI_MAX_PARAMS];
        for (unsigned i = 0; i < u->nparams; i++)
            kv[i] = (struct nvme_emu_kv){.key = u->params[i].key, .val = u->params[i].value};
        static struct emu_cfg cfg; /* large: not on the stack */
        err[0] = '\0';
        int rc = emu_parse_cfg(kv, u->nparams, &cfg, err, sizeof(err));
        if (rc != 0 && (rc != -EINVAL || !err[0]))
            fail("emu_parse_cfg: a refusal without -EINVAL and a message", s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return 0;
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    check_value_grammars(s);
    struct nvme_uri *u = NULL;
    char err[512] = "";
    int rc = nvme_uri_parse(s, &u, err, sizeof(err));
    if (rc == 0) {
        if (!u)
            fail("parsed, and no URI", s);
        check_parsed(u, s);
        nvme_uri_free(u);
    } else if (u || rc != -EINVAL || !err[0]) {
        fail("a refusal that is not -EINVAL with a message (or leaves a URI)", s);
    }
    free(s);
    return 0;
}
