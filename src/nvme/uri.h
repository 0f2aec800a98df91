/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uri.h — the one generic target-URI parser (grammar in src/README.md, "Target URIs"):
 *
 *     uri       = scheme "://" [ authority ] [ path ] [ "?" query ]
 *     authority = item *( "," item )            e.g. pci://0000:4a:00.0,0000:4b:00.0
 *     path      = "/" *char                       e.g. file:///data/img, blk:///dev/nvme0n1
 *     query     = param *( "&" param )
 *     param     = key [ "=" value ]               a bare key means key=1
 *
 * Values may use %XX escapes. Keys are [a-z0-9_] and appear at most once. The backend (emu, pci, ...)
 * owns its key set and checks it with nvme_uri_check_keys(); typed getters parse sizes (KiB/MiB/GiB/TiB
 * and K/M/G/T are binary, KB/MB/GB/TB decimal, B or no suffix = bytes), unsigned integers (decimal or
 * 0x hex) and booleans (1/0, true/false, yes/no, on/off). Every error fills `err` with one line naming
 * the bad part ("parameter 'nsze': bad size '12Q'") and returns -EINVAL.
 *
 * Key functions: nvme_uri_parse, nvme_uri_free, nvme_uri_scheme, nvme_uri_get, nvme_uri_get_u64/size/bool,
 * nvme_uri_check_keys, nvme_uri_list_count/nvme_uri_list_item (comma lists inside one value),
 * nvme_parse_size/u64/bool (the value grammars on their own).
 *
 * Caveats: a parsed URI is immutable and owns all its strings (one allocation freed by nvme_uri_free).
 */
#ifndef NVME_URI_H
#define NVME_URI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NVME_URI_MAX_LEN    4096u /* longest URI accepted */
#define NVME_URI_MAX_ITEMS  64u   /* authority items (e.g. PCI functions) */
#define NVME_URI_MAX_PARAMS 64u   /* query parameters */

struct nvme_uri_param {
    const char *key;
    const char *value; /* "1" for a bare key */
};

struct nvme_uri {
    const char *raw;       /* the URI as given */
    const char *scheme;    /* lower case, e.g. "emu" */
    const char *authority; /* "" when empty */
    unsigned nitems;       /* authority split on ',' (0 when empty) */
    const char *items[NVME_URI_MAX_ITEMS];
    const char *path; /* "" when absent, else starts with '/' (decoded) */
    unsigned nparams;
    struct nvme_uri_param params[NVME_URI_MAX_PARAMS];
};

/* Parse; on success *out must be released with nvme_uri_free. -EINVAL (err filled) or -ENOMEM. */
int nvme_uri_parse(const char *s, struct nvme_uri **out, char *err, size_t errlen);
void nvme_uri_free(struct nvme_uri *u);

/* The scheme of s (the text before its first "://", or all of s when it has none) checked and lower-cased
 * by the parser's rules into buf (at least NVME_URI_SCHEME_LEN bytes); -EINVAL when it is not a scheme.
 * Reads nothing after the scheme: the dispatchers' cheap look-up (nvme/scheme.h). */
#define NVME_URI_SCHEME_LEN 16u /* a scheme and its NUL */
int nvme_uri_scheme(const char *s, char *buf, size_t buflen);

/* Raw value of key, or NULL when absent. */
const char *nvme_uri_get(const struct nvme_uri *u, const char *key);
/* Typed getters: absent key -> *out = def and 0; bad value -> -EINVAL with err naming key and value. */
int nvme_uri_get_u64(const struct nvme_uri *u, const char *key, uint64_t def, uint64_t *out, char *err, size_t errlen);
int nvme_uri_get_size(const struct nvme_uri *u, const char *key, uint64_t def, uint64_t *out, char *err, size_t errlen);
int nvme_uri_get_bool(const struct nvme_uri *u, const char *key, bool def, bool *out, char *err, size_t errlen);
/* Every key must be in the NULL-terminated list `known`; else -EINVAL naming the first unknown key. */
int nvme_uri_check_keys(const struct nvme_uri *u, const char *const *known, char *err, size_t errlen);

/* Comma lists inside one value ("512,4096"): number of items, and item i copied into buf (NUL ended).
 * nvme_uri_list_item returns -ERANGE when i is out of range, -ENAMETOOLONG when buf is too small. */
unsigned nvme_uri_list_count(const char *value);
int nvme_uri_list_item(const char *value, unsigned i, char *buf, size_t buflen);

/* Value grammars: 0 or -EINVAL (also on overflow). */
int nvme_parse_u64(const char *s, uint64_t *out);
int nvme_parse_size(const char *s, uint64_t *out);
int nvme_parse_bool(const char *s, bool *out);

#ifdef __cplusplus
}
#endif

#endif /* NVME_URI_H */
