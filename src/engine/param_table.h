/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * param_table.h — what the engine run-parameter tables share: one range check and the per-type expansion
 * of a table row into its default and its check.
 *
 * Purpose: each engine declares its run parameters once as an X-macro table X(name, type, field, lo, hi,
 * def, doc) (perf_params.h for the perf engine, crun_params.h for cuda-run). Both tables' defaults and
 * range checks expand every row through PARAM_SET_<type> and PARAM_CHK_<type> below, so a value out of
 * bounds is refused, and named, the same way by either engine: "name=value: must be lo..hi" (seconds:
 * "name=value: must be lo..hi seconds"), "name: unknown pattern N".
 *
 * Key functions: param_bound() (a value within [lo, hi]), param_pattern() (an enum value at most max).
 * Row types here: U32, U64 (the whole range is valid), BOOL (any value is valid), SECONDS (given in
 * seconds, stored as ns), PATTERN (an enum whose last value the caller passes). A type one engine has
 * alone (cuda-run's POLL) defines its PARAM_SET_/PARAM_CHK_ pair in that engine's file.
 * Caveats: rules between parameters (iosize a multiple of the LBA size, readback needs verify) and
 * checks against a target stay with the engine.
 */
#ifndef NVMELAB_ENGINE_PARAM_TABLE_H
#define NVMELAB_ENGINE_PARAM_TABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PARAM_NS_PER_S 1e9 /* SECONDS rows: given in seconds, stored in ns */

enum param_unit {
    PARAM_INTEGRAL = 0, /* a count or a size: printed without decimals */
    PARAM_SECONDS = 1,  /* printed as %g seconds */
};

/* 0 when lo <= v <= hi, else -EINVAL with "name=v: must be lo..hi[ seconds]" in err. */
int param_bound(const char *name, double v, double lo, double hi, enum param_unit unit, char *err, size_t errlen);
/* 0 when v <= max, else -EINVAL with "name: unknown pattern v" in err. */
int param_pattern(const char *name, unsigned v, unsigned max, char *err, size_t errlen);

/* A row's default into struct s (pointer). */
#define PARAM_SET_U32(s, field, def)     ((s)->field = (uint32_t)(def))
#define PARAM_SET_U64(s, field, def)     ((s)->field = (uint64_t)(def))
#define PARAM_SET_BOOL(s, field, def)    ((s)->field = (def) != 0)
#define PARAM_SET_SECONDS(s, field, def) ((s)->field = (uint64_t)((def) * PARAM_NS_PER_S))
#define PARAM_SET_PATTERN(s, field, def) ((s)->field = (def))

/* A row's check of struct s (pointer): 0 or -EINVAL (err names the row). `patmax`: the table's last
 * pattern value (PATTERN rows only). */
#define PARAM_CHK_U32(s, name, field, lo, hi, patmax, err, errlen)                                                     \
    param_bound(#name, (double)(s)->field, (lo), (hi), PARAM_INTEGRAL, (err), (errlen))
#define PARAM_CHK_U64(s, name, field, lo, hi, patmax, err, errlen)  0 /* the full uint64 range is valid */
#define PARAM_CHK_BOOL(s, name, field, lo, hi, patmax, err, errlen) 0 /* stored as 0 or 1 */
#define PARAM_CHK_SECONDS(s, name, field, lo, hi, patmax, err, errlen)                                                 \
    param_bound(#name, (double)(s)->field / PARAM_NS_PER_S, (lo), (hi), PARAM_SECONDS, (err), (errlen))
#define PARAM_CHK_PATTERN(s, name, field, lo, hi, patmax, err, errlen)                                                 \
    param_pattern(#name, (unsigned)(s)->field, (unsigned)(patmax), (err), (errlen))

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_PARAM_TABLE_H */
