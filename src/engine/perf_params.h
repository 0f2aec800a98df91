/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf_params.h — every run parameter of the perf engine, declared once.
 *
 * Purpose: one table (name, type, bounds, default, doc) from which everything else is derived:
 * the C range check (perf_params_check, called by perf_config_check), the defaults
 * (perf_params_defaults), the pybind11 keyword parsing of PerfTarget.run/check/fill, the parameter
 * list Python exports (nvmelab._native.PERF_PARAMS, nvmelab.engines.perf.PARAMS), the `nvmelab perf run`
 * options and the parameter reference (`nvmelab perf params`). Adding a parameter is one line here
 * (plus its field in struct perf_config).
 *
 * X(name, type, field, lo, hi, def, doc)
 *   name   the keyword in Python and the CLI (--name, '_' written '-')
 *   type   U32 | U64 | BOOL | SECONDS (a double in seconds, stored as ns in field) | PATTERN (a name
 *          of perf_pattern_name(), stored as enum perf_pattern)
 *   lo, hi inclusive bounds of the value as the user gives it (seconds for SECONDS)
 *   def    the default (for PATTERN: the enum value)
 *
 * Key functions: perf_params_defaults(), perf_params_check(), perf_param_info(i) / PERF_NPARAMS.
 * Caveats: checks against a target (LBA size, device limits, the range) stay in perf_config_check;
 * the Python layer adds only what the C engine does not see (target URI, CPU list, kernel backend).
 */
#ifndef NVMELAB_ENGINE_PERF_PARAMS_H
#define NVMELAB_ENGINE_PERF_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/perf.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PERF_MAX_QUEUES  1024    /* channels per device per thread */
#define PERF_MAX_SECONDS 86400.0 /* one run: at most a day */
#define PERF_MIN_RUNTIME 0.001   /* a measured window of at least 1 ms */

#define PERF_PARAMS(X)                                                                                                 \
    X(rw, PATTERN, pattern, 0, 0, PERF_PAT_RANDREAD, "access pattern: read, randread, write, randwrite, randrw")       \
    X(rwmix, U32, rwmix, 0, 100, 50, "randrw: percentage of reads")                                                    \
    X(iosize, U32, iosize, 1, UINT32_MAX, 512, "bytes per I/O, a multiple of the LBA size")                            \
    X(qdepth, U32, qdepth, 1, PERF_MAX_QDEPTH, 128, "I/Os in flight per queue")                                        \
    X(nqueues, U32, nqueues, 1, PERF_MAX_QUEUES, 1, "queues per device per thread")                                    \
    X(alldevs, BOOL, alldevs, 0, 1, 0,                                                                                 \
      "every thread has nqueues queues on every device (0: devices split among threads)")                              \
    X(nthreads, U32, nthreads, 1, PERF_MAX_THREADS, 1, "worker threads, one per pinned CPU")                           \
    X(ndevs, U32, ndevs, 0, PERF_MAX_DEVS, 0, "use the first N devices of the target (0: all)")                        \
    X(runtime, SECONDS, runtime_ns, PERF_MIN_RUNTIME, PERF_MAX_SECONDS, 5, "measured seconds")                         \
    X(warmup, SECONDS, warmup_ns, 0, PERF_MAX_SECONDS, 1, "seconds run before measuring (not counted)")                \
    X(lba_start, U64, lba_start, 0, UINT64_MAX, 0, "first LBA of the range on every device")                           \
    X(lba_count, U64, lba_count, 0, UINT64_MAX, 0, "LBAs in the range (0: to the end)")                                \
    X(align, U32, align, 0, UINT32_MAX, 0, "offset alignment in bytes (0: iosize)")                                    \
    X(batch, U32, batch, 0, PERF_MAX_QDEPTH, 0, "commands per submission (0: the target's default)")                   \
    X(seed, U64, seed, 0, UINT64_MAX, 1, "random seed")                                                                \
    X(verify, BOOL, verify, 0, 1, 0, "stamp writes and check reads")                                                   \
    X(lat, BOOL, lat, 0, 1, 1, "sample latency (off for hot-path measurements)")                                       \
    X(bd, BOOL, bd, 0, 1, 1, "per-I/O time breakdown on a share of the timed commands (needs lat; 0: off)")

enum perf_param_type { PERF_PT_U32, PERF_PT_U64, PERF_PT_BOOL, PERF_PT_SECONDS, PERF_PT_PATTERN };

struct perf_param_info {
    const char *name;
    enum perf_param_type type;
    double lo, hi, def;
    const char *doc;
};

#define PERF_PARAM_COUNT_(name, type, field, lo, hi, def, doc) +1
#define PERF_NPARAMS                                           (0 PERF_PARAMS(PERF_PARAM_COUNT_))

/* The i-th parameter (i < PERF_NPARAMS), or NULL. */
const struct perf_param_info *perf_param_info(size_t i);
/* Index of the parameter called name, or -1. */
int perf_param_find(const char *name);
/* Fill cfg with every default (cpus, stop: NULL). */
void perf_params_defaults(struct perf_config *cfg);
/* Every value within its bounds: 0, or -EINVAL with "name=value: must be lo..hi" in err. */
int perf_params_check(const struct perf_config *cfg, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_PERF_PARAMS_H */
