/* SPDX-License-Identifier: BSD-3-Clause */
/* emu_keys.c — the key table of both emulators, its key check, and profile and scale parsed once (emu_keys.h). */
#include "nvme/emu/emu_keys.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/errbuf.h"
#include "nvme/uri.h"

#define EMU_KEYS_LIST_LEN 512u /* the "known keys" list of one emulator */

#define EMU_KEY_ROW(name_, old_, oldval_, newval_, who_, list_, values_, def_cpu_, def_gpu_, doc_)                     \
    {#name_, old_, oldval_, newval_, who_, list_, values_, def_cpu_, def_gpu_, doc_},
static const struct nvme_emu_key keys[] = {NVME_EMU_KEYS(EMU_KEY_ROW)};
#undef EMU_KEY_ROW

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

const struct nvme_emu_key *nvme_emu_key_at(unsigned i)
{
    return i < NKEYS ? &keys[i] : NULL;
}

const struct nvme_emu_key *nvme_emu_key_find(const char *key, unsigned who, bool *old)
{
    for (size_t i = 0; key && i < NKEYS; i++) {
        if (!(keys[i].who & who))
            continue;
        bool is_old = keys[i].old && !strcmp(keys[i].old, key);
        if (is_old || !strcmp(keys[i].name, key)) {
            if (old)
                *old = is_old;
            return &keys[i];
        }
    }
    return NULL;
}

/* Append one warning (they are short; a full buffer keeps what fits). */
static void warn_add(char *warn, size_t warnlen, const char *prefix, const char *what, const char *was, const char *now)
{
    if (!warn || !warnlen)
        return;
    size_t o = strnlen(warn, warnlen);
    if (o + 1 < warnlen)
        snprintf(warn + o, warnlen - o, "%s%sparameter %s'%s' is now '%s' (the old spelling goes in the next release)",
                 o ? "; " : "", prefix, what, was, now);
}

int nvme_emu_keys_check(const char *prefix, unsigned who, const char *const *keys_given, size_t n, char *warn,
                        size_t warnlen, char *err, size_t errlen)
{
    const char *pre = prefix ? prefix : "";
    for (size_t i = 0; i < n; i++) {
        const char *k = keys_given[i];
        if (!k || !k[0])
            return nvme_errf(err, errlen, -EINVAL, "%sempty parameter name", pre);
        bool old = false;
        const struct nvme_emu_key *row = nvme_emu_key_find(k, who, &old);
        if (!row) {
            char list[EMU_KEYS_LIST_LEN] = "";
            size_t o = 0;
            for (size_t j = 0; j < NKEYS && o < sizeof(list); j++)
                if (keys[j].who & who)
                    o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", o ? " " : "", keys[j].name);
            return nvme_errf(err, errlen, -EINVAL, "%sunknown parameter '%s' (known: %s)", pre, k, list);
        }
        for (size_t j = 0; j < i; j++)
            if (keys_given[j] && nvme_emu_key_find(keys_given[j], who, NULL) == row)
                return nvme_errf(err, errlen, -EINVAL, "%sparameter '%s' given twice", pre, row->name);
        if (old)
            warn_add(warn, warnlen, pre, "", row->old, row->name);
    }
    return 0;
}

const char *nvme_emu_key_name(const char *name, const char *const *keys_given, size_t n)
{
    const struct nvme_emu_key *row = nvme_emu_key_find(name, NVME_EMU_BOTH, NULL);
    for (size_t i = 0; row && i < n; i++)
        if (keys_given[i] && (!strcmp(keys_given[i], row->name) || (row->old && !strcmp(keys_given[i], row->old))))
            return keys_given[i];
    return NULL;
}

const char *nvme_emu_value(const char *prefix, const char *name, const char *val, char *warn, size_t warnlen)
{
    const struct nvme_emu_key *row = nvme_emu_key_find(name, NVME_EMU_BOTH, NULL);
    if (!row || !row->oldval || !val || strcmp(val, row->oldval))
        return val;
    char what[64];
    snprintf(what, sizeof(what), "%s=", row->name);
    char was[64], now[64];
    snprintf(was, sizeof(was), "%s%s", what, row->oldval);
    snprintf(now, sizeof(now), "%s%s", what, row->newval);
    warn_add(warn, warnlen, prefix ? prefix : "", "value ", was, now);
    return row->newval;
}

int nvme_emu_profile_scale(const char *prefix, const char *profile, const char *scale, bool profile_scale,
                           const struct nvme_emu_profile **p, double *s, char *err, size_t errlen)
{
    const char *pre = prefix ? prefix : "";
    const char *name = profile ? profile : "null";
    *p = nvme_emu_profile_find(name);
    if (!*p) {
        char names[EMU_KEYS_LIST_LEN] = "";
        size_t o = 0;
        const struct nvme_emu_profile *q;
        for (unsigned i = 0; (q = nvme_emu_profile_at(i)) && o < sizeof(names); i++)
            o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", i ? ", " : "", q->name);
        return nvme_errf(err, errlen, -EINVAL, "%sparameter 'profile': unknown profile '%s' (known: %s)", pre, name,
                         names);
    }
    *s = profile_scale ? (*p)->default_scale : 1.0;
    if (scale) {
        char *end;
        errno = 0;
        double v = strtod(scale, &end);
        if (end == scale || *end || errno || !isfinite(v) || !(v > 0) || v > NVME_EMU_SCALE_MAX)
            return nvme_errf(err, errlen, -EINVAL, "%sparameter 'scale': bad value '%s' (a number > 0, at most 1e6)",
                             pre, scale);
        *s = v;
    }
    return 0;
}

void nvme_emu_uri_warnings(const char *uri, char *warn, size_t warnlen)
{
    if (!warn || !warnlen)
        return;
    warn[0] = '\0';
    struct nvme_uri *u = NULL;
    char err[NVME_EMU_WARN_LEN];
    if (!uri || nvme_uri_parse(uri, &u, err, sizeof(err)))
        return;
    const bool cpu = !strcmp(u->scheme, "emu"), gpu = !strcmp(u->scheme, "gpu-emu");
    if (cpu || gpu) {
        const char *prefix = cpu ? "emu: " : "gpu-emu: ";
        const char *keys_given[NVME_URI_MAX_PARAMS];
        for (unsigned i = 0; i < u->nparams; i++)
            keys_given[i] = u->params[i].key;
        if (nvme_emu_keys_check(prefix, cpu ? NVME_EMU_CPU : NVME_EMU_GPU, keys_given, u->nparams, warn, warnlen, err,
                                sizeof(err)) == 0) {
            for (unsigned i = 0; i < u->nparams; i++) {
                const struct nvme_emu_key *row = nvme_emu_key_find(u->params[i].key, NVME_EMU_BOTH, NULL);
                if (row)
                    (void)nvme_emu_value(prefix, row->name, u->params[i].value, warn, warnlen);
            }
        } else {
            warn[0] = '\0';
        }
    }
    nvme_uri_free(u);
}
