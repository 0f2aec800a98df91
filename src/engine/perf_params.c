/* SPDX-License-Identifier: BSD-3-Clause */
/* perf_params.c — the run parameter table (perf_params.h) as data, defaults and one range check. */
#include "engine/perf_params.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define NS_PER_S_D 1e9

static const struct perf_param_info params[] = {
#define X(name, type, field, lo, hi, def, doc) {#name, PERF_PT_##type, (double)(lo), (double)(hi), (double)(def), doc},
    PERF_PARAMS(X)
#undef X
};

const struct perf_param_info *perf_param_info(size_t i)
{
    return i < PERF_NPARAMS ? &params[i] : NULL;
}

int perf_param_find(const char *name)
{
    for (size_t i = 0; i < PERF_NPARAMS; i++)
        if (!strcmp(params[i].name, name))
            return (int)i;
    return -1;
}

void perf_params_defaults(struct perf_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
#define SET_U32(field, def)                    cfg->field = (uint32_t)(def)
#define SET_U64(field, def)                    cfg->field = (uint64_t)(def)
#define SET_BOOL(field, def)                   cfg->field = (int)(def)
#define SET_SECONDS(field, def)                cfg->field = (uint64_t)((def) * NS_PER_S_D)
#define SET_PATTERN(field, def)                cfg->field = (enum perf_pattern)(def)
#define X(name, type, field, lo, hi, def, doc) SET_##type(field, def);
    PERF_PARAMS(X)
#undef X
}

/* One bound check; the value as the user gave it (seconds for SECONDS). */
static int out_of(const char *name, double v, double lo, double hi, int integral, char *err, size_t errlen)
{
    if (v >= lo && v <= hi)
        return 0;
    if (integral)
        snprintf(err, errlen, "%s=%.0f: must be %.0f..%.0f", name, v, lo, hi);
    else
        snprintf(err, errlen, "%s=%g: must be %g..%g seconds", name, v, lo, hi);
    return -EINVAL;
}

int perf_params_check(const struct perf_config *cfg, char *err, size_t errlen)
{
    int rc = 0;
#define CHK_U32(name, field, lo, hi)     out_of(#name, (double)cfg->field, lo, hi, 1, err, errlen)
#define CHK_U64(name, field, lo, hi)     0 /* the full uint64 range is valid */
#define CHK_BOOL(name, field, lo, hi)    out_of(#name, (double)(cfg->field != 0), lo, hi, 1, err, errlen)
#define CHK_SECONDS(name, field, lo, hi) out_of(#name, (double)cfg->field / NS_PER_S_D, lo, hi, 0, err, errlen)
#define CHK_PATTERN(name, field, lo, hi)                                                                               \
    ((unsigned)cfg->field <= PERF_PAT_RANDRW                                                                           \
         ? 0                                                                                                           \
         : (snprintf(err, errlen, #name ": unknown pattern %d", (int)cfg->field), -EINVAL))
#define X(name, type, field, lo, hi, def, doc)                                                                         \
    if (!rc)                                                                                                           \
        rc = CHK_##type(name, field, (double)(lo), (double)(hi));
    PERF_PARAMS(X)
#undef X
    return rc;
}
