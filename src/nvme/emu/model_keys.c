/* SPDX-License-Identifier: BSD-3-Clause */
/* model_keys.c — the device-model keys of emu:// and gpu-emu:// parsed once (model_keys.h). */
#include "nvme/emu/model_keys.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/spec.h"
#include "nvme/uri.h"

#define MODEL_VAL_MAX 64u /* longest value accepted (a size with its unit and "/s") */

static const struct nvme_emu_model_key keys[] = {
    {"lat", NVME_EMU_MODEL_TIME, "e.g. 50us; ns, us, ms, s"},
    {"lat_sigma", NVME_EMU_MODEL_SIGMA, "0..4"},
    {"iops", NVME_EMU_MODEL_RATE, "commands/s, 0 = no cap"},
    {"qiops", NVME_EMU_MODEL_RATE, "commands/s, 0 = no cap"},
    {"bw", NVME_EMU_MODEL_BYTES_PER_S, "bytes/s, e.g. 14GiB or 500MB/s"},
    {"link", NVME_EMU_MODEL_BYTES_PER_S, "bytes/s, e.g. 45200MB/s"},
};

const struct nvme_emu_model_key *nvme_emu_model_key_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!strcmp(keys[i].name, name))
            return &keys[i];
    return NULL;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v))
        return -EINVAL;
    *out = v;
    return 0;
}

/* A number with ns|us|ms|s (no suffix = ns), >= 0. */
static int parse_time_ns(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0)
        return -EINVAL;
    double mul = !*end || !strcmp(end, "ns") ? 1
                 : !strcmp(end, "us")        ? 1e3
                 : !strcmp(end, "ms")        ? 1e6
                 : !strcmp(end, "s")         ? 1e9
                                             : -1;
    if (mul < 0)
        return -EINVAL;
    *out = v * mul;
    return 0;
}

/* A size optionally ending in "/s". */
static int parse_rate(const char *s, double *out)
{
    char buf[MODEL_VAL_MAX];
    size_t n = strlen(s);
    if (n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, s, n + 1);
    if (n > 2 && !strcmp(buf + n - 2, "/s"))
        buf[n - 2] = 0;
    uint64_t v;
    if (nvme_parse_size(buf, &v))
        return -EINVAL;
    *out = (double)v;
    return 0;
}

int nvme_emu_model_key_parse(const char *prefix, const char *key, const char *val, double *out, char *err,
                             size_t errlen)
{
    const struct nvme_emu_model_key *k = nvme_emu_model_key_find(key);
    const char *what = "value";
    int bad = !k || !val;
    if (!bad) {
        switch (k->unit) {
        case NVME_EMU_MODEL_TIME:
            what = "time";
            bad = parse_time_ns(val, out) || *out > NVME_EMU_MODEL_LAT_MAX_NS;
            break;
        case NVME_EMU_MODEL_RATE:
            bad = parse_double(val, out) || *out < 0;
            break;
        case NVME_EMU_MODEL_BYTES_PER_S:
            what = "rate";
            bad = parse_rate(val, out);
            break;
        case NVME_EMU_MODEL_SIGMA:
            bad = parse_double(val, out) || *out < 0 || *out > NVME_EMU_MODEL_SIGMA_MAX;
            break;
        }
    }
    if (!bad)
        return 0;
    if (err && errlen)
        snprintf(err, errlen, "%sparameter '%s': bad %s '%s' (%s)", prefix ? prefix : "", key ? key : "", what,
                 val ? val : "", k ? k->hint : "not a device-model key");
    return -EINVAL;
}

void nvme_emu_inj_defaults(struct nvme_cr_inj *j)
{
    j->every = 0;
    j->status = NVME_CR_ST(NVME_SCT_MEDIA, NVME_SC_UNRECOVERED_READ);
    j->ooo_win = 0;
}

int nvme_emu_inj_parse(const char *prefix, const char *key, const char *val, struct nvme_cr_inj *j, char *err,
                       size_t errlen)
{
    const char *pre = prefix ? prefix : "";
    uint64_t v;
    if (!key)
        return 0;
    if (!strcmp(key, "err_every") || !strcmp(key, "ooo_win")) {
        const bool win = key[0] == 'o';
        if (!val || nvme_parse_u64(val, &v) || (win && v > NVME_EMU_INJ_WIN_MAX)) {
            if (err && errlen)
                snprintf(err, errlen, "%sparameter '%s': bad value '%s' (%s)", pre, key, val ? val : "",
                         win ? "completions per shuffled window, 0..65536 (0 or 1: in order)"
                             : "an LBA count: every LBA that is a multiple of it fails; 0 = off");
            return -EINVAL;
        }
        if (win)
            j->ooo_win = (uint32_t)v;
        else
            j->every = v;
        return 1;
    }
    if (!strcmp(key, "err_status")) {
        uint8_t sct, sc;
        if (!val || nvme_status_parse(val, &sct, &sc)) {
            if (err && errlen)
                snprintf(err, errlen,
                         "%sparameter 'err_status': '%s' is not an NVMe status name (e.g. unrecovered_read_error, "
                         "lba_out_of_range, internal_error)",
                         pre, val ? val : "");
            return -EINVAL;
        }
        j->status = NVME_CR_ST(sct, sc);
        return 1;
    }
    return 0;
}

int nvme_emu_inj_from_uri(const char *prefix, const struct nvme_uri *u, struct nvme_cr_inj *j, char *err, size_t errlen)
{
    static const char *const keys[] = {"err_every", "err_status", "ooo_win"};
    nvme_emu_inj_defaults(j);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *v = nvme_uri_get(u, keys[i]);
        if (v && nvme_emu_inj_parse(prefix, keys[i], v, j, err, errlen) < 0)
            return -EINVAL;
    }
    return 0;
}
