/* SPDX-License-Identifier: BSD-3-Clause */
/* perf_config.c — the perf engine's pattern names and its configuration check against a target (see perf.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/perf.h"
#include "engine/perf_params.h"

static const char *const pattern_names[] = {
    [PERF_PAT_READ] = "read",           [PERF_PAT_RANDREAD] = "randread", [PERF_PAT_WRITE] = "write",
    [PERF_PAT_RANDWRITE] = "randwrite", [PERF_PAT_RANDRW] = "randrw",
};
#define NPATTERNS (sizeof(pattern_names) / sizeof(pattern_names[0]))

const char *perf_pattern_name(enum perf_pattern p)
{
    return (unsigned)p < NPATTERNS ? pattern_names[p] : "?";
}

int perf_pattern_parse(const char *name, enum perf_pattern *out)
{
    for (unsigned i = 0; i < NPATTERNS; i++)
        if (!strcmp(name, pattern_names[i])) {
            *out = (enum perf_pattern)i;
            return 0;
        }
    return -EINVAL;
}

/* ------------------------------------------------------------------ checks */

int perf_config_check(const struct perf_target *t, const struct perf_config *cfg, char *err, size_t errlen)
{
    int rc = perf_params_check(cfg, err, errlen); /* every value within its bounds (perf_params.h) */
    if (rc)
        return rc;
    uint32_t ndevs = cfg->ndevs ? cfg->ndevs : t->ndevs;
    if (ndevs > t->ndevs) {
        snprintf(err, errlen, "ndevs=%u: the target has %u device(s)", ndevs, t->ndevs);
        return -EINVAL;
    }
    for (uint32_t d = 0; d < ndevs; d++) {
        const struct perf_dev_info *di = &t->dev[d];
        if (cfg->qdepth > di->max_qdepth) {
            if (di->max_qdepth == 1)
                snprintf(
                    err, errlen,
                    "qdepth=%u: the %s backend keeps one I/O in flight per thread; use qdepth=1 (or backend=io_uring)",
                    cfg->qdepth, t->backend);
            else
                snprintf(err, errlen, "qdepth=%u: device %u allows at most %u", cfg->qdepth, d, di->max_qdepth);
            return -EINVAL;
        }
        if (cfg->iosize % di->lba_size) {
            snprintf(err, errlen, "iosize=%u: must be a multiple of the LBA size %u of device %u", cfg->iosize,
                     di->lba_size, d);
            return -EINVAL;
        }
        if (cfg->iosize > di->max_io_bytes) {
            snprintf(err, errlen, "iosize=%u: device %u accepts at most %u bytes per command", cfg->iosize, d,
                     di->max_io_bytes);
            return -EINVAL;
        }
        uint32_t align = cfg->align ? cfg->align : cfg->iosize;
        if (align % di->lba_size) {
            snprintf(err, errlen, "align=%u: must be a multiple of the LBA size %u of device %u", align, di->lba_size,
                     d);
            return -EINVAL;
        }
        if (cfg->lba_start >= di->nlbas) {
            snprintf(err, errlen, "lba_start=%llu: device %u has %llu LBAs", (unsigned long long)cfg->lba_start, d,
                     (unsigned long long)di->nlbas);
            return -EINVAL;
        }
        uint64_t count = cfg->lba_count ? cfg->lba_count : di->nlbas - cfg->lba_start;
        if (cfg->lba_start + count > di->nlbas) {
            snprintf(err, errlen, "lba range %llu+%llu: beyond the %llu LBAs of device %u",
                     (unsigned long long)cfg->lba_start, (unsigned long long)count, (unsigned long long)di->nlbas, d);
            return -EINVAL;
        }
        if (count * di->lba_size < cfg->iosize) {
            snprintf(err, errlen, "iosize=%u: larger than the LBA range (%llu bytes) of device %u", cfg->iosize,
                     (unsigned long long)(count * di->lba_size), d);
            return -EINVAL;
        }
    }
    return 0;
}
