/* SPDX-License-Identifier: BSD-3-Clause */
/* perf_params.c — the run parameter table (perf_params.h) as data, defaults and its range check (the
 * engines' one checker, param_table.h). */
#include "engine/perf_params.h"

#include <string.h>

#include "engine/param_table.h"

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
#define X(name, type, field, lo, hi, def, doc) PARAM_SET_##type(cfg, field, def);
    PERF_PARAMS(X)
#undef X
}

/* Each row through the engines' one range check (param_table.h); the first value out of bounds. */
int perf_params_check(const struct perf_config *cfg, char *err, size_t errlen)
{
    int rc = 0;
#define X(name, type, field, lo, hi, def, doc)                                                                         \
    if (!rc)                                                                                                           \
        rc = PARAM_CHK_##type(cfg, name, field, (double)(lo), (double)(hi), PERF_PAT_RANDRW, err, errlen);
    PERF_PARAMS(X)
#undef X
    return rc;
}
