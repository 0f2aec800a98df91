/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * model_keys.h — the device-model keys of an emulated target's URI (lat, lat_sigma, iops, bw, qiops, link),
 * parsed in one place for the CPU emulator (emu/params.c) and the GPU emulator (emu/gpu/gpu_emu_uri.cu).
 *
 * Key functions:
 *   nvme_emu_model_key_find()   the key's row (unit, bounds, hint), or NULL for a key that is not a model key
 *   nvme_emu_model_key_parse()  one value -> a nominal number (ns, commands/s, bytes/s, or the lognormal
 *                               shape); -EINVAL with one message naming key and value otherwise
 *   nvme_emu_inj_parse()        the fault-model keys both emulators take: err_every=M (every LBA that is a
 *                               multiple of M fails), err_status=NAME (its status, a spec name such as
 *                               unrecovered_read_error; default Unrecovered Read Error), ooo_win=W
 *                               (completions shuffled within windows of W); rules in cmd_rules.h
 *
 * Grammar: time = a number with ns|us|ms|s (bare: ns), at most 1000 s; rate = commands/s >= 0 (0 = no cap);
 * bytes/s = a size (KiB/MiB/GiB, KB/MB/GB; "45.2GB" is not a size: write 45200MB) with an optional "/s";
 * lat_sigma = 0..4. Values are nominal: each emulator applies its `scale` afterwards.
 *
 * Caveats: plain C, host only; the message starts with the caller's prefix ("emu: ", "gpu-emu: ").
 */
#ifndef NVME_EMU_MODEL_KEYS_H
#define NVME_EMU_MODEL_KEYS_H

#include <stddef.h>

#include "nvme/emu/cmd_rules.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NVME_EMU_MODEL_LAT_MAX_NS 1e12 /* 1000 s */
#define NVME_EMU_MODEL_SIGMA_MAX  4.0

enum nvme_emu_model_unit {
    NVME_EMU_MODEL_TIME,        /* ns */
    NVME_EMU_MODEL_RATE,        /* commands/s */
    NVME_EMU_MODEL_BYTES_PER_S, /* bytes/s */
    NVME_EMU_MODEL_SIGMA,       /* lognormal shape, 0..4 */
};

struct nvme_emu_model_key {
    const char *name;
    enum nvme_emu_model_unit unit;
    const char *hint; /* what a good value looks like, for the message */
};

const struct nvme_emu_model_key *nvme_emu_model_key_find(const char *name);
/* 0 and *out, or -EINVAL with "<prefix>parameter '<key>': bad ... '<val>' (<hint>)" in err. */
int nvme_emu_model_key_parse(const char *prefix, const char *key, const char *val, double *out, char *err,
                             size_t errlen);

#define NVME_EMU_INJ_WIN_MAX 65536u /* ooo_win at most one ring */

/* 1 when `key` is one of the injection keys (then *j updated, or -EINVAL with a message), 0 when it is not. */
int nvme_emu_inj_parse(const char *prefix, const char *key, const char *val, struct nvme_cr_inj *j, char *err,
                       size_t errlen);
struct nvme_uri;
/* The three keys read from a parsed URI (defaults first): 0, or -EINVAL with the message. */
int nvme_emu_inj_from_uri(const char *prefix, const struct nvme_uri *u, struct nvme_cr_inj *j, char *err,
                          size_t errlen);
/* The defaults: no errors, status Unrecovered Read Error, in order. */
void nvme_emu_inj_defaults(struct nvme_cr_inj *j);

#ifdef __cplusplus
}
#endif

#endif /* NVME_EMU_MODEL_KEYS_H */
