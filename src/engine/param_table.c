/* SPDX-License-Identifier: BSD-3-Clause */
/* param_table.c — the one range check of the engine run-parameter tables (param_table.h). */
#include "engine/param_table.h"

#include <errno.h>
#include <stdio.h>

int param_bound(const char *name, double v, double lo, double hi, enum param_unit unit, char *err, size_t errlen)
{
    if (v >= lo && v <= hi)
        return 0;
    if (unit == PARAM_SECONDS)
        snprintf(err, errlen, "%s=%g: must be %g..%g seconds", name, v, lo, hi);
    else
        snprintf(err, errlen, "%s=%.0f: must be %.0f..%.0f", name, v, lo, hi);
    return -EINVAL;
}

int param_pattern(const char *name, unsigned v, unsigned max, char *err, size_t errlen)
{
    if (v <= max)
        return 0;
    snprintf(err, errlen, "%s: unknown pattern %d", name, (int)v);
    return -EINVAL;
}
