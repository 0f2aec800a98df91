/* SPDX-License-Identifier: BSD-3-Clause */
/* crun_params.c — the cuda-run parameter table (crun_params.h) as data, defaults, one check, the poll
 * discipline's names and the occupancy rule in integers. Plain C: built with or without CUDA. */
#include "engine/crun_params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/param_table.h"

#define CRUN_POLL_SPIN "spin"
#define CRUN_POLL_BACK "backoff:"
#define CRUN_PERMILLE  1000u
#define CRUN_PERCENT   100u

static const struct crun_param_info params[] = {
#define X(name, type, field, lo, hi, def, doc) {#name, CRUN_PT_##type, (double)(lo), (double)(hi), (double)(def), doc},
    CRUN_PARAMS(X)
#undef X
};

static const char *const rw_names[] = {"read", "randread", "write", "randwrite"};

const struct crun_param_info *crun_param_info(size_t i)
{
    return i < CRUN_NPARAMS ? &params[i] : NULL;
}

int crun_param_find(const char *name)
{
    for (size_t i = 0; name && i < CRUN_NPARAMS; i++)
        if (!strcmp(params[i].name, name))
            return (int)i;
    return -1;
}

void crun_params_defaults(struct nvme_cuda_run_params *p)
{
    memset(p, 0, sizeof(*p));
#define PARAM_SET_POLL(s, field, def)          ((s)->field = (uint32_t)(def))
#define PARAM_SET_MATCH(s, field, def)         ((s)->field = (uint32_t)(def))
#define X(name, type, field, lo, hi, def, doc) PARAM_SET_##type(p, field, def);
    CRUN_PARAMS(X)
#undef X
}

int crun_params_check(const struct nvme_cuda_run_params *p, char *err, size_t errlen)
{
    int rc = 0;
    /* each row through the engines' one range check (param_table.h); runtime does not count with rounds */
#define PARAM_CHK_POLL(s, name, field, lo, hi, patmax, err, errlen)                                                    \
    param_bound(#name " (backoff ns)", (double)(s)->field, (lo), (hi), PARAM_INTEGRAL, (err), (errlen))
#define PARAM_CHK_MATCH(s, name, field, lo, hi, patmax, err, errlen)                                                   \
    ((s)->field < NVME_GPUQ_MATCH_MODES                                                                                \
         ? 0                                                                                                           \
         : (snprintf(err, errlen, #name "=%u: not a mode (cid, positional, scan)", (unsigned)(s)->field), -EINVAL))
#define X(name, type, field, lo, hi, def, doc)                                                                         \
    if (!rc && !(CRUN_PT_##type == CRUN_PT_SECONDS && !strcmp(#name, "runtime") && p->rounds))                         \
        rc = PARAM_CHK_##type(p, name, field, (double)(lo), (double)(hi), NVME_CUDA_RANDWRITE, err, errlen);
    CRUN_PARAMS(X)
#undef X
    if (rc)
        return rc;
    if (p->iosize % CRUN_LBA_MIN)
        return snprintf(err, errlen, "iosize=%u: must be a multiple of %u bytes", p->iosize, CRUN_LBA_MIN), -EINVAL;
    if (p->readback && (!p->rounds || (p->rw != NVME_CUDA_WRITE && p->rw != NVME_CUDA_RANDWRITE)))
        return snprintf(err, errlen, "readback: needs a write pattern and rounds > 0"), -EINVAL;
    if (p->readback && !p->verify)
        return snprintf(err, errlen, "readback: needs verify"), -EINVAL;
    if (p->corun && p->rounds) /* the co-runner's loaded phase is sized to the timed window */
        return snprintf(err, errlen, "corun=%u: needs a timed run (rounds=0)", p->corun), -EINVAL;
    return 0;
}

int nvme_cuda_rw_parse(const char *name, enum nvme_cuda_rw *out)
{
    for (unsigned i = 0; name && i < sizeof(rw_names) / sizeof(rw_names[0]); i++)
        if (!strcmp(name, rw_names[i])) {
            *out = (enum nvme_cuda_rw)i;
            return 0;
        }
    return -EINVAL;
}

const char *nvme_cuda_rw_name(enum nvme_cuda_rw rw)
{
    return (unsigned)rw < sizeof(rw_names) / sizeof(rw_names[0]) ? rw_names[rw] : "?";
}

int crun_poll_parse(const char *s, uint32_t *max_ns)
{
    if (!s)
        return -EINVAL;
    if (!strcmp(s, CRUN_POLL_SPIN)) {
        *max_ns = 0;
        return 0;
    }
    const size_t n = strlen(CRUN_POLL_BACK);
    if (strncmp(s, CRUN_POLL_BACK, n) || s[n] < '0' || s[n] > '9')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s + n, &end, 10);
    if (errno || *end || v < 1 || v > CRUN_POLL_MAX_NS)
        return -EINVAL;
    *max_ns = (uint32_t)v;
    return 0;
}

void crun_poll_format(uint32_t max_ns, char *buf, size_t len)
{
    if (max_ns)
        snprintf(buf, len, CRUN_POLL_BACK "%u", max_ns);
    else
        snprintf(buf, len, CRUN_POLL_SPIN);
}

bool crun_occupancy_ok(uint64_t need_a, uint64_t per_sm_a, uint64_t need_b, uint64_t per_sm_b, uint64_t sms,
                       uint32_t pct, uint32_t *used_permille)
{
    if (!need_b)
        per_sm_b = 1; /* one kernel: the second term is absent */
    if (!per_sm_a || !per_sm_b || !sms) {
        if (used_permille)
            *used_permille = UINT32_MAX;
        return false;
    }
    /* capacity in units of 1 / (per_sm_a * per_sm_b) of an SM: all products stay far below 2^64
     * (blocks <= 2^16, per-SM counts <= 2^6, SMs <= 2^10) */
    const uint64_t need = need_a * per_sm_b + need_b * per_sm_a, cap = per_sm_a * per_sm_b * sms;
    if (used_permille) {
        uint64_t pm = (need * CRUN_PERMILLE + cap - 1u) / cap;
        *used_permille = pm > UINT32_MAX ? UINT32_MAX : (uint32_t)pm;
    }
    return need * CRUN_PERCENT <= (uint64_t)pct * cap;
}
