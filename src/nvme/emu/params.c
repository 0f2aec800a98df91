/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * params.c — emu:// parameters: parse and validate every key=value into struct emu_cfg.
 *
 * The keys are the rows of emu_keys.h that emu:// takes (their check, old spellings and the docs table
 * come from there); profile and scale are parsed by nvme_emu_profile_scale(). Per-controller keys
 * take a comma list with one value (all controllers) or exactly ndev values.
 * Every failure writes one message naming the key and the value and returns
 * -EINVAL; nothing is created before all parameters passed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvme/emu/emu_internal.h"
#include "nvme/emu/emu_keys.h"
#include "nvme/emu/model_keys.h"
#include "nvme/errbuf.h"
#include "nvme/uri.h"

#define EMU_LIST_ITEM_MAX 64u
#define EMU_CGROUP_MEM    "/sys/fs/cgroup/memory.max"

/* Memory this process may use: physical memory, or the cgroup v2 limit when that is lower. */
static uint64_t host_mem_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    uint64_t mem = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
    FILE *f = fopen(EMU_CGROUP_MEM, "re");
    if (f) {
        unsigned long long lim;
        if (fscanf(f, "%llu", &lim) == 1 && lim && (!mem || lim < mem))
            mem = lim;
        fclose(f);
    }
    return mem;
}

/* "4 TiB", "23.5 GiB", "512 MiB" */
static const char *fmt_bytes(uint64_t b, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    unsigned u = 0;
    while (v >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0]))
        v /= 1024, u++;
    snprintf(buf, len, v == floor(v) ? "%.0f %s" : "%.1f %s", v, unit[u]);
    return buf;
}

/* RAM namespaces that hold data (backing=ram, data=copy) may allocate up to their ncap each; the total
 * must stay within EMU_RAM_SHARE_PCT of the host's memory (emu_internal.h says why that share). */
static int check_ram_budget(const struct emu_cfg *cfg, char *err, size_t errlen)
{
    if (cfg->backing != EMU_BACKING_RAM || !cfg->data)
        return 0;
    uint64_t total = 0;
    for (unsigned i = 0; i < cfg->ndev; i++)
        total += (uint64_t)cfg->c[i].nns * cfg->c[i].ncap;
    uint64_t mem = host_mem_bytes();
    if (!mem || total / EMU_RAM_SHARE_PCT <= mem / 100)
        return 0;
    char t[32], m[32];
    return nvme_errf(err, errlen, -EINVAL,
                     "emu: namespaces total %s of RAM (ncap x nns x ndev), more than %u %% of this host's %s memory; "
                     "use a smaller nsze or ncap, data=none, or backing=file:/path",
                     fmt_bytes(total, t, sizeof(t)), EMU_RAM_SHARE_PCT, fmt_bytes(mem, m, sizeof(m)));
}

/* The value of canonical key `key`, given in its own spelling or the old one (emu_keys.h). */
static const char *find(const struct nvme_emu_kv *kv, size_t n, const char *key)
{
    const struct nvme_emu_key *row = nvme_emu_key_find(key, NVME_EMU_CPU, NULL);
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0 || (row && row->old && strcmp(kv[i].key, row->old) == 0))
            return kv[i].val ? kv[i].val : "1";
    return NULL;
}

/* Split a per-controller list and hand item i (or the only item) to the caller. */
static int list_get(const char *key, const char *val, unsigned ndev, unsigned i, char *buf, size_t len, char *err,
                    size_t errlen)
{
    unsigned n = nvme_uri_list_count(val);
    if (n != 1 && n != ndev)
        return nvme_errf(err, errlen, -EINVAL, "emu: parameter '%s': '%s' has %u values; give 1 or ndev=%u", key, val,
                         n, ndev);
    if (nvme_uri_list_item(val, n == 1 ? 0 : i, buf, len))
        return nvme_errf(err, errlen, -EINVAL, "emu: parameter '%s': value '%s' is too long", key, val);
    return 0;
}

static bool is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

int emu_parse_cfg(const struct nvme_emu_kv *kv, size_t nkv, struct emu_cfg *cfg, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof(*cfg));
    if (err && errlen)
        err[0] = 0;

    /* unknown and duplicate keys, old spellings (the table of emu_keys.h) */
    const char *names[NVME_URI_MAX_PARAMS] = {NULL};
    if (nkv > NVME_URI_MAX_PARAMS)
        return nvme_errf(err, errlen, -EINVAL, "emu: more than %u parameters", NVME_URI_MAX_PARAMS);
    for (size_t i = 0; i < nkv; i++)
        names[i] = kv[i].key;
    int rc = nvme_emu_keys_check("emu: ", NVME_EMU_CPU, names, nkv, cfg->warn, sizeof(cfg->warn), err, errlen);
    if (rc)
        return rc;

    const char *v;
    uint64_t u;
    char item[EMU_LIST_ITEM_MAX];

    cfg->ndev = EMU_DEF_NDEV;
    if ((v = find(kv, nkv, "ndev"))) {
        if (nvme_parse_u64(v, &u) || u < 1 || u > EMU_MAX_CTRLS)
            return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'ndev': bad value '%s' (1..%u)", v, EMU_MAX_CTRLS);
        cfg->ndev = (unsigned)u;
    }

    for (unsigned i = 0; i < cfg->ndev; i++) {
        struct emu_ctrl_cfg *c = &cfg->c[i];
        c->nns = EMU_DEF_NNS;
        c->nsze = EMU_DEF_NSZE;
        c->lbads = EMU_DEF_LBADS;
        c->mdts = EMU_DEF_MDTS;
        c->mqes = EMU_DEF_MQES;
        c->nioq = EMU_DEF_NIOQ;
        c->dstrd = 0;
        bool ncap_given = false;
#define ITEM(key) ((v = find(kv, nkv, key)) && !list_get(key, v, cfg->ndev, i, item, sizeof(item), err, errlen))
#define LISTCHK(key)                                                                                                   \
    do {                                                                                                               \
        const char *_v = find(kv, nkv, key);                                                                           \
        if (_v && list_get(key, _v, cfg->ndev, i, item, sizeof(item), err, errlen))                                    \
            return -EINVAL;                                                                                            \
    } while (0)
        LISTCHK("nns");
        LISTCHK("nsze");
        LISTCHK("ncap");
        LISTCHK("lbads");
        LISTCHK("mdts");
        LISTCHK("mqes");
        LISTCHK("nioq");
        LISTCHK("dstrd");
        if (ITEM("nns")) {
            if (nvme_parse_u64(item, &u) || u < 1 || u > EMU_MAX_NS)
                return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'nns': bad value '%s' (1..%u)", item,
                                 EMU_MAX_NS);
            c->nns = (uint32_t)u;
        }
        if (ITEM("lbads")) {
            if (nvme_parse_size(item, &u) || (u != 512 && u != 4096))
                return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'lbads': bad value '%s' (512 or 4096)", item);
            c->lbads = (uint32_t)u;
        }
        if (ITEM("nsze")) {
            if (nvme_parse_size(item, &u) || u == 0)
                return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'nsze': bad size '%s'", item);
            c->nsze = u;
        }
        if (c->nsze % c->lbads)
            return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'nsze': %llu bytes is not a multiple of lbads=%u",
                             (unsigned long long)c->nsze, c->lbads);
        c->ncap = c->nsze;
        if (ITEM("ncap")) {
            if (nvme_parse_size(item, &u) || u > c->nsze)
                return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'ncap': bad value '%s' (a size <= nsze)", item);
            c->ncap = u;
            ncap_given = true;
        }
        (void)ncap_given;
        if (ITEM("mdts")) {
            if (nvme_parse_size(item, &u) || (u != 0 && (u % EMU_PAGE_SIZE || !is_pow2(u / EMU_PAGE_SIZE))) ||
                (u / EMU_PAGE_SIZE) > (1ull << 30))
                return nvme_errf(err, errlen, -EINVAL,
                                 "emu: parameter 'mdts': bad value '%s' (0 = unlimited, or 4KiB x a power of two)",
                                 item);
            c->mdts = u;
        }
        if (ITEM("mqes")) {
            if (nvme_parse_u64(item, &u) || u < EMU_MIN_MQES || u > EMU_MAX_MQES)
                return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'mqes': bad value '%s' (%u..%u entries)", item,
                                 EMU_MIN_MQES, EMU_MAX_MQES);
            c->mqes = (uint32_t)u;
        }
        if (ITEM("nioq")) {
            if (nvme_parse_u64(item, &u) || u < 1 || u > EMU_MAX_NIOQ)
                return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'nioq': bad value '%s' (1..%u)", item,
                                 EMU_MAX_NIOQ);
            c->nioq = (uint32_t)u;
        }
        if (ITEM("dstrd")) {
            if (nvme_parse_u64(item, &u) || u > EMU_MAX_DSTRD)
                return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'dstrd': bad value '%s' (0..%u)", item,
                                 EMU_MAX_DSTRD);
            c->dstrd = (uint32_t)u;
        }
#undef ITEM
#undef LISTCHK
    }

    cfg->backing = EMU_BACKING_RAM;
    if ((v = find(kv, nkv, "backing"))) {
        if (strcmp(v, "ram") == 0) {
            cfg->backing = EMU_BACKING_RAM;
        } else if (strncmp(v, "file:", 5) == 0 && v[5]) {
            if (strlen(v + 5) >= EMU_MAX_PATH - 16)
                return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'backing': path too long");
            cfg->backing = EMU_BACKING_FILE;
            snprintf(cfg->path, sizeof(cfg->path), "%s", v + 5);
        } else {
            return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'backing': bad value '%s' (ram or file:/path)", v);
        }
    }
    for (unsigned i = 0; i < cfg->ndev; i++) {
        uint64_t lim = cfg->backing == EMU_BACKING_RAM ? EMU_MAX_RAM_NSZE : EMU_MAX_FILE_NSZE;
        if (cfg->c[i].nsze > lim)
            return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'nsze': %llu bytes exceeds the %s limit of %llu",
                             (unsigned long long)cfg->c[i].nsze, cfg->backing == EMU_BACKING_RAM ? "ram" : "file",
                             (unsigned long long)lim);
    }

    if ((rc = nvme_emu_profile_scale("emu: ", find(kv, nkv, "profile"), find(kv, nkv, "scale"), true, &cfg->profile,
                                     &cfg->scale, err, errlen)))
        return rc;

    cfg->mode = EMU_MODE_INLINE;
    if ((v = find(kv, nkv, "mode"))) {
        if (strcmp(v, "inline") == 0)
            cfg->mode = EMU_MODE_INLINE;
        else if (strcmp(v, "thread") == 0)
            cfg->mode = EMU_MODE_THREAD;
        else
            return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'mode': bad value '%s' (inline or thread)", v);
    }
    cfg->seed = EMU_DEF_SEED;
    if ((v = find(kv, nkv, "seed")) && nvme_parse_u64(v, &cfg->seed))
        return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'seed': bad value '%s' (an unsigned integer)", v);
    if ((v = find(kv, nkv, "ooo")) && nvme_parse_bool(v, &cfg->ooo))
        return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'ooo': bad value '%s' (0 or 1)", v);
    cfg->data = true;
    if ((v = nvme_emu_value("emu: ", "data", find(kv, nkv, "data"), cfg->warn, sizeof(cfg->warn)))) {
        if (strcmp(v, "copy") == 0)
            cfg->data = true;
        else if (strcmp(v, "none") == 0)
            cfg->data = false;
        else
            return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'data': bad value '%s' (copy or none)", v);
    }
    int rb = check_ram_budget(cfg, err, errlen);
    if (rb)
        return rb;

    /* device-model overrides (nominal values; scale applies afterwards) */
    cfg->lat_ns = cfg->lat_sigma = cfg->iops = cfg->bw = cfg->qiops = cfg->link = -1;
    cfg->fetch = -1;
    { /* the model keys are parsed in one place for emu:// and gpu-emu:// (model_keys.h) */
        static const char *const model_keys[] = {"lat", "lat_sigma", "iops", "qiops", "bw", "link"};
        double *const model_out[] = {&cfg->lat_ns, &cfg->lat_sigma, &cfg->iops, &cfg->qiops, &cfg->bw, &cfg->link};
        for (size_t i = 0; i < sizeof(model_keys) / sizeof(model_keys[0]); i++)
            if ((v = find(kv, nkv, model_keys[i])) &&
                nvme_emu_model_key_parse("emu: ", model_keys[i], v, model_out[i], err, errlen))
                return -EINVAL;
    }
    nvme_emu_inj_defaults(&cfg->inj);
    for (size_t i = 0; i < nkv; i++)
        if (nvme_emu_inj_parse("emu: ", kv[i].key, kv[i].val ? kv[i].val : "1", &cfg->inj, err, errlen) < 0)
            return -EINVAL;
    if ((v = find(kv, nkv, "fetch"))) {
        if (nvme_parse_u64(v, &u) || u > EMU_MAX_MQES)
            return nvme_errf(err, errlen, -EINVAL, "emu: parameter 'fetch': bad value '%s' (0 = unlimited, ..%u)", v,
                             EMU_MAX_MQES);
        cfg->fetch = (int64_t)u;
    }
    emu_model_setup(cfg);
    return 0;
}
