/* SPDX-License-Identifier: BSD-3-Clause */
// gpu_emu_uri.cu — the gpu-emu:// URI: values, the device model's constants, and the one-line description
// that goes into every record (see gpu_emu.h; host code only, no GPU needed). The keys, their old spellings
// and the key check are emu_keys.h's table, shared with emu://; profile and scale are parsed there too.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nvme/emu/emu_keys.h"
#include "nvme/emu/gpu/gpu_emu.h"
#include "nvme/emu/model_keys.h"
#include "nvme/nvme_gpuq.h"
#include "nvme/uri.h"

#define GEMU_NS_PER_S 1e9

static uint64_t gemu_gap_fp(double rate) // fixed-point ns between commands at `rate` per second
{
    return rate > 0 ? (uint64_t)llround(GEMU_NS_PER_S * (double)(1u << GEMU_FP_SHIFT) / rate) : 0;
}

// A device-model override (the CPU emulator's keys, parsed by the one parser of emu/model_keys.h):
// absent -> *out = nominal. Values are nominal, before scale.
static int gemu_model_key(const nvme_uri *u, const char *key, double nominal, double *out, char *err, size_t errlen)
{
    *out = nominal;
    const char *v = nvme_uri_get(u, key);
    return v ? nvme_emu_model_key_parse("gpu-emu: ", key, v, out, err, errlen) : 0;
}

// The key check of emu_keys.h's table (old spellings named in e->warn), then the keys one by one.
static int gemu_parse(gemu *e, const nvme_uri *u, uint32_t ndev_default, char *err, size_t errlen)
{
    const char *names[NVME_URI_MAX_PARAMS];
    for (unsigned i = 0; i < u->nparams; i++)
        names[i] = u->params[i].key;
    e->warn[0] = 0;
    int rc = nvme_emu_keys_check("gpu-emu: ", NVME_EMU_GPU, names, u->nparams, e->warn, sizeof(e->warn), err, errlen);
    if (rc)
        return rc;
    // the spelling the URI used for a canonical key (the old one is read the same way)
    auto key = [&](const char *name) {
        const char *k = nvme_emu_key_name(name, names, u->nparams);
        return k ? k : name;
    };
    uint64_t v;
    if ((rc = nvme_uri_get_u64(u, "ndev", ndev_default, &v, err, errlen)))
        return rc;
    if (v < 1 || v > GEMU_MAX_DEVS) {
        snprintf(err, errlen, "parameter 'ndev': %llu is out of range 1..%u", (unsigned long long)v, GEMU_MAX_DEVS);
        return -EINVAL;
    }
    e->ndev = (uint32_t)v;
    const nvme_emu_profile *p = NULL;
    if ((rc = nvme_emu_profile_scale("gpu-emu: ", nvme_uri_get(u, "profile"), nvme_uri_get(u, "scale"), false, &p,
                                     &e->scale, err, errlen)))
        return rc;
    if (p->lat_sigma > 0) {
        snprintf(err, errlen, "parameter 'profile': '%s' has a lognormal latency, which gpu-emu does not model",
                 p->name);
        return -EINVAL;
    }
    snprintf(e->profile, sizeof(e->profile), "%s", p->name);
    if ((rc = nvme_uri_get_u64(u, "blocks", GEMU_DEFAULT_BLOCKS, &v, err, errlen)))
        return rc;
    if (v < 1 || v > 1024) {
        snprintf(err, errlen, "parameter 'blocks': %llu is out of range 1..1024", (unsigned long long)v);
        return -EINVAL;
    }
    e->blocks = (uint32_t)v;
    if ((rc = nvme_uri_get_u64(u, "warps", GEMU_DEFAULT_WARPS, &v, err, errlen)))
        return rc;
    if (v < 1 || v > GEMU_MAX_WARPS_BLOCK) {
        snprintf(err, errlen, "parameter 'warps': %llu is out of range 1..%u", (unsigned long long)v,
                 GEMU_MAX_WARPS_BLOCK);
        return -EINVAL;
    }
    e->warps = (uint32_t)v;
    if ((rc = nvme_uri_get_size(u, key("nsze"), (uint64_t)GEMU_DEFAULT_NS_MIB * GEMU_MIB, &v, err, errlen)))
        return rc;
    if (v < GEMU_MIB || v % GEMU_MIB) {
        snprintf(err, errlen, "parameter 'nsze': %llu bytes is not a whole number of MiB >= 1 MiB",
                 (unsigned long long)v);
        return -EINVAL;
    }
    e->ns_mib = (uint32_t)(v / GEMU_MIB);
    if ((rc = nvme_uri_get_u64(u, key("lbads"), NVME_GPUQ_LBA_SIZE_MIN, &v, err, errlen)))
        return rc;
    if (v != 512 && v != 4096) {
        snprintf(err, errlen, "parameter 'lbads': %llu is not 512 or 4096", (unsigned long long)v);
        return -EINVAL;
    }
    e->lba_size = (uint32_t)v;
    const char *data = nvme_emu_value("gpu-emu: ", "data", nvme_uri_get(u, "data"), e->warn, sizeof(e->warn));
    if (!data || !strcmp(data, "copy"))
        e->data = 1;
    else if (!strcmp(data, "none"))
        e->data = 0;
    else {
        snprintf(err, errlen, "parameter 'data': '%s' is not copy or none", data);
        return -EINVAL;
    }
    const char *fill = nvme_uri_get(u, "fill");
    if (!fill || !strcmp(fill, "zero"))
        e->fill_stamp = 0;
    else if (!strcmp(fill, "stamp"))
        e->fill_stamp = 1;
    else {
        snprintf(err, errlen, "parameter 'fill': '%s' is not zero or stamp", fill);
        return -EINVAL;
    }
    if (e->fill_stamp && !e->data) {
        snprintf(err, errlen, "parameter 'fill': stamp needs data=copy");
        return -EINVAL;
    }
    bool b;
    if ((rc = nvme_uri_get_bool(u, "ooo", false, &b, err, errlen)))
        return rc;
    e->ooo = b;
    if ((rc = nvme_emu_inj_from_uri("", u, &e->h.inj, err, errlen))) // err_every, err_status, ooo_win
        return rc;
    if ((rc = nvme_uri_get_u64(u, "drop", 0, &v, err, errlen)))
        return rc;
    if (v > UINT32_MAX) {
        snprintf(err, errlen, "parameter 'drop': %llu is too large", (unsigned long long)v);
        return -EINVAL;
    }
    e->drop_nth = (uint32_t)v;
    if ((rc = nvme_uri_get_size(u, "mdts", NVME_GPUQ_MAX_IO, &v, err, errlen)))
        return rc;
    if (v < e->lba_size || v > NVME_GPUQ_MAX_IO) {
        snprintf(err, errlen, "parameter 'mdts': %llu is out of range %u..%u bytes", (unsigned long long)v, e->lba_size,
                 NVME_GPUQ_MAX_IO);
        return -EINVAL;
    }
    double lat, iops, bw, qiops, link;
    if ((rc = gemu_model_key(u, "lat", p->lat_ns, &lat, err, errlen)) ||
        (rc = gemu_model_key(u, "iops", p->dev_iops, &iops, err, errlen)) ||
        (rc = gemu_model_key(u, "bw", p->dev_bw, &bw, err, errlen)) ||
        (rc = gemu_model_key(u, "qiops", p->queue_iops, &qiops, err, errlen)) ||
        (rc = gemu_model_key(u, "link", p->link_bw, &link, err, errlen)))
        return rc;
    gemu_model &m = e->h.model;
    const double s = e->scale;
    m.lat_ns = (uint64_t)llround(lat * s);
    m.queue_gap_fp = gemu_gap_fp(qiops / s);
    m.dev_gap_fp = gemu_gap_fp(iops / s);
    m.dev_byte_fp = gemu_gap_fp(bw / s);
    m.link_byte_fp = gemu_gap_fp(link / s);
    e->lat_ns = lat;
    e->iops = iops;
    e->bw = bw;
    e->qiops = qiops;
    e->link = link;
    m.timed = m.lat_ns || m.queue_gap_fp || m.dev_gap_fp || m.dev_byte_fp || m.link_byte_fp;
    e->h.mdts_bytes = v;
    e->h.drop_nth = e->drop_nth;
    e->h.ooo = e->ooo;
    e->h.data = e->data;
    e->h.ndev = e->ndev;
    return 0;
}

int gemu_parse_uri(const char *uri, uint32_t ndev_default, gemu *e, char *err, size_t errlen)
{
    nvme_uri *u = NULL;
    int rc = nvme_uri_parse(uri, &u, err, errlen);
    if (rc)
        return rc;
    if (strcmp(u->scheme, "gpu-emu") != 0 || u->authority[0] || u->path[0]) {
        snprintf(err, errlen, "target '%s': expected gpu-emu://?key=value&... (no host or path)", uri);
        nvme_uri_free(u);
        return -EINVAL;
    }
    rc = gemu_parse(e, u, ndev_default, err, errlen);
    nvme_uri_free(u);
    return rc;
}

int gemu_describe(const gemu *e, char *buf, size_t len)
{
    return snprintf(buf, len,
                    "profile=%s scale=%g ndev=%u blocks=%u warps=%u ns=%uMiB lba=%u data=%s fill=%s ooo=%d drop=%u "
                    "lat=%gns iops=%g bw=%g qiops=%g link=%g ooo_win=%u err_every=%llu err_status=0x%x",
                    e->profile, e->scale, e->ndev, e->blocks, e->warps, e->ns_mib, e->lba_size,
                    e->data ? "ram" : "none", e->fill_stamp ? "stamp" : "zero", e->ooo, e->drop_nth, e->lat_ns, e->iops,
                    e->bw, e->qiops, e->link, e->h.inj.ooo_win, (unsigned long long)e->h.inj.every,
                    (unsigned)e->h.inj.status);
}
