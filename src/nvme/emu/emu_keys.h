/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * emu_keys.h — the one table of URI keys of both emulated controllers (emu:// and gpu-emu://).
 *
 * Purpose: one spelling per concept for the two emulators. Every key both parsers take is one row of
 * NVME_EMU_KEYS below (an X-macro, as engine/perf_params.h is for the perf engine): its name, the old
 * spelling still accepted for one release (key, or value), which emulator takes it, whether it takes a
 * per-controller comma list, its values (type, unit, bounds, as users read them), its default per
 * emulator, and what it means. From the table come: the key check of both parsers (an unknown key is
 * refused with one message listing the emulator's keys, a key given twice is refused, an old spelling
 * is accepted and named in a warning), the fuzz harness's key sets (tests/fuzz/fuzz_uri.c), and the key
 * table of src/README.md (tests/test_emu_keys.py holds it equal to this one). The values themselves are
 * parsed by each emulator (params.c, gpu/gpu_emu_uri.cu; device-model and fault keys by model_keys.c),
 * profile and scale by nvme_emu_profile_scale() for both.
 *
 * Canonical spellings: the CPU emulator's (`nsze`, `lbads`, `data=copy`): NVMe's own field names and the
 * spelling nearly every URI in the tests, notebooks and docs already used. gpu-emu's `ns`, `lba` and
 * `data=ram` are the old spellings; either emulator accepts them with a warning until the next release.
 *
 * Key functions:
 *   nvme_emu_key_at()       row i of the table (0-based), NULL past the end
 *   nvme_emu_key_find()     the row of a key (canonical or old spelling) that an emulator takes
 *   nvme_emu_keys_check()   the key check of a whole URI: unknown and repeated keys refused, old spellings
 *                           named in `warn`
 *   nvme_emu_key_name()     the spelling of a canonical key that a URI used (to read its value)
 *   nvme_emu_value()        a value with its old spelling replaced (data=ram -> copy), warning once
 *   nvme_emu_profile_scale() profile and scale of either emulator, parsed once
 *
 * Caveats: plain C, host only, no allocation; messages start with the caller's prefix ("emu: ",
 * "gpu-emu: "). Defaults differ where the emulators differ on purpose (scale: the CPU emulator runs a
 * profile at its default scale, gpu-emu unscaled); the table says so, the parsers apply them.
 */
#ifndef NVME_EMU_KEYS_H
#define NVME_EMU_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "nvme/emu/profiles.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which emulator takes a key (a row's `who`, bits). */
#define NVME_EMU_CPU       1u /* emu:// */
#define NVME_EMU_GPU       2u /* gpu-emu:// */
#define NVME_EMU_BOTH      (NVME_EMU_CPU | NVME_EMU_GPU)

#define NVME_EMU_SCALE_MAX 1e6 /* the largest `scale` either emulator takes */

/* X(name, old, oldval, newval, who, list, values, def_cpu, def_gpu, doc)
 *   name     the canonical key
 *   old      its old spelling (a key still accepted with a warning), or NULL
 *   oldval   an old spelling of one of its values, accepted with a warning as `newval`, or NULL
 *   who      NVME_EMU_CPU, NVME_EMU_GPU or NVME_EMU_BOTH
 *   list     1: emu:// takes one value or a comma list of ndev values (one per controller)
 *   values   type, unit and bounds, as users read them (docs)
 *   def_cpu, def_gpu   the default of emu:// and of gpu-emu:// ("" where that emulator lacks the key)
 *   doc      what it means
 * The order is the order of the "known keys" messages and of the docs table. */
#define NVME_EMU_KEYS(X)                                                                                               \
    X(ndev, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "1..64", "1", "the run's `ndevs`, else 16", "controllers")             \
    X(nns, NULL, NULL, NULL, NVME_EMU_CPU, 1, "1..32", "1", "", "namespaces per controller")                           \
    X(nsze, "ns", NULL, NULL, NVME_EMU_BOTH, 1, "size, a multiple of `lbads` (gpu-emu: whole MiB)", "1GiB", "64MiB",   \
      "namespace size in bytes (gpu-emu: GPU memory per device)")                                                      \
    X(ncap, NULL, NULL, NULL, NVME_EMU_CPU, 1, "size ≤ `nsze`", "`nsze`", "",                                          \
      "bytes that may be allocated (thin provisioning); writes past it fail with Capacity Exceeded")                   \
    X(lbads, "lba", NULL, NULL, NVME_EMU_BOTH, 1, "512 \\| 4096", "512", "512", "LBA data size")                       \
    X(mdts, NULL, NULL, NULL, NVME_EMU_BOTH, 1, "0 or 4 KiB × 2^n (gpu-emu: size `lbads`..2MiB)", "128KiB", "2MiB",    \
      "maximum data transfer size (0 = unlimited); larger commands get Invalid Field")                                 \
    X(mqes, NULL, NULL, NULL, NVME_EMU_CPU, 1, "2..65536", "4096", "", "maximum entries per queue (CAP.MQES + 1)")     \
    X(nioq, NULL, NULL, NULL, NVME_EMU_CPU, 1, "1..65535", "64", "", "I/O queues (SQs and CQs) the controller offers") \
    X(dstrd, NULL, NULL, NULL, NVME_EMU_CPU, 1, "0..8", "0", "", "doorbell stride: 4 << dstrd bytes")                  \
    X(backing, NULL, NULL, NULL, NVME_EMU_CPU, 0, "`ram` \\| `file:/path`", "ram", "",                                 \
      "namespace storage. A file is created sparse, or grown if it is shorter, and is never deleted. With more "       \
      "than one namespace in the URI, the files are `/path.<ctrl>.<nsid>`. Only regular files are accepted.")          \
    X(profile, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "`null` \\| `pm1753` \\| `pm1753-p2p`", "null", "null",             \
      "device model (profiles.c; gpu-emu refuses a lognormal latency)")                                                \
    X(scale, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "number > 0, at most 1e6", "from the profile", "1",                   \
      "times × scale, rates ÷ scale")                                                                                  \
    X(mode, NULL, NULL, NULL, NVME_EMU_CPU, 0, "`inline` \\| `thread`", "inline", "", "where commands run")            \
    X(seed, NULL, NULL, NULL, NVME_EMU_CPU, 0, "unsigned", "1", "",                                                    \
      "seeds the serial numbers, `ooo` shuffles and lognormal samples")                                                \
    X(ooo, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "0 \\| 1", "0", "0",                                                    \
      "post each fetch batch's completions in shuffled order (gpu-emu: reversed)")                                     \
    X(data, NULL, "ram", "copy", NVME_EMU_BOTH, 0, "`copy` \\| `none`", "copy", "copy",                                \
      "`none`: no data movement (for benchmarks)")                                                                     \
    X(lat, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "time (ns, us, ms, s)", "from the profile", "from the profile",         \
      "median command latency, nominal (before scale)")                                                                \
    X(lat_sigma, NULL, NULL, NULL, NVME_EMU_CPU, 0, "0..4", "from the profile", "",                                    \
      "lognormal shape of the latency (0 = fixed)")                                                                    \
    X(iops, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "commands/s (0 = none)", "from the profile", "from the profile",       \
      "per-device command cap, nominal")                                                                               \
    X(bw, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "bytes/s, e.g. `14GiB` or `500MB/s` (0 = none)", "from the profile",     \
      "from the profile", "per-device payload bandwidth cap, nominal")                                                 \
    X(qiops, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "commands/s (0 = none)", "from the profile", "from the profile",      \
      "per-queue command cap, nominal")                                                                                \
    X(fetch, NULL, NULL, NULL, NVME_EMU_CPU, 0, "0..65536", "from the profile (0)", "",                                \
      "SQEs fetched per doorbell or poll event and queue (0 = unlimited)")                                             \
    X(link, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "bytes/s (0 = none)", "from the profile", "from the profile",          \
      "payload bandwidth shared by all devices of the URI, nominal")                                                   \
    X(err_every, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "LBA count (0 = off)", "0", "0",                                  \
      "every Read/Write whose range holds an LBA that is a multiple of it completes with `err_status` (DNR clear)")    \
    X(err_status, NULL, NULL, NULL, NVME_EMU_BOTH, 0,                                                                  \
      "NVMe status name, e.g. `unrecovered_read_error`, `lba_out_of_range` (any case, `_` or `-` for spaces)",         \
      "Unrecovered Read Error", "Unrecovered Read Error", "the status of `err_every`")                                 \
    X(ooo_win, NULL, NULL, NULL, NVME_EMU_BOTH, 0, "0..65536", "0", "0",                                               \
      "shuffle completions at random within windows of W (in submission order between windows; among completions "     \
      "due together, so with a timed profile only ties move)")                                                         \
    X(blocks, NULL, NULL, NULL, NVME_EMU_GPU, 0, "1..1024", "", "8", "the persistent kernel's blocks")                 \
    X(warps, NULL, NULL, NULL, NVME_EMU_GPU, 0, "1..16", "", "8", "warps per block")                                   \
    X(fill, NULL, NULL, NULL, NVME_EMU_GPU, 0, "`zero` \\| `stamp`", "", "zero",                                       \
      "`stamp`: every word holds `nvme_gpuq_stamp(dev, lba, word)` (needs data=copy)")                                 \
    X(drop, NULL, NULL, NULL, NVME_EMU_GPU, 0, "N", "", "0",                                                           \
      "never complete the N-th command of every queue (timeout tests)")

struct nvme_emu_key {
    const char *name;
    const char *old;    /* old spelling of the key, or NULL */
    const char *oldval; /* old spelling of a value, or NULL */
    const char *newval; /* what oldval means now */
    unsigned who;       /* NVME_EMU_CPU | NVME_EMU_GPU */
    bool list;          /* emu://: one value per controller allowed */
    const char *values, *def_cpu, *def_gpu, *doc;
};

#define NVME_EMU_WARN_LEN 1024u /* room for the warnings of one URI */

/* Row i (0-based) of the table, NULL past the end. */
const struct nvme_emu_key *nvme_emu_key_at(unsigned i);
/* The row of `key` (canonical or old spelling) that emulator `who` takes, or NULL. *old (may be NULL):
 * true when `key` is the old spelling. */
const struct nvme_emu_key *nvme_emu_key_find(const char *key, unsigned who, bool *old);

/* The key check of one URI of emulator `who`: keys[0..n). 0, or -EINVAL with one message in err:
 * "<prefix>empty parameter name", "<prefix>unknown parameter 'k' (known: ndev nns ...)" (the emulator's
 * keys in table order) or "<prefix>parameter 'k' given twice" (either spelling). Old spellings are
 * accepted; each adds "<prefix>parameter 'ns' is now 'nsze' (the old spelling goes in the next release); "
 * to warn (may be NULL; not cleared here). */
int nvme_emu_keys_check(const char *prefix, unsigned who, const char *const *keys, size_t n, char *warn, size_t warnlen,
                        char *err, size_t errlen);
/* Which of keys[0..n) spells canonical key `name` (its own spelling or the old one), or NULL. */
const char *nvme_emu_key_name(const char *name, const char *const *keys, size_t n);
/* `val` of canonical key `name`, its old spelling replaced by the new one (warning into warn), else val. */
const char *nvme_emu_value(const char *prefix, const char *name, const char *val, char *warn, size_t warnlen);

/* The old spellings URI text `uri` uses, if it is an emu:// or gpu-emu:// URI: the warnings the emulator will
 * give when it opens (keys and values, "; "-joined, "" when none) into warn, without opening anything; a URI
 * that does not parse, is of another scheme or has a bad key leaves warn "" (opening it names the error). For
 * callers that log where the emulator cannot: the tools, the Python binding. */
void nvme_emu_uri_warnings(const char *uri, char *warn, size_t warnlen);

/* Profile and scale of either emulator, parsed once: `profile` NULL -> "null"; `scale` NULL -> the
 * profile's default_scale when profile_scale is true (emu://), else 1 (gpu-emu:// runs profiles unscaled).
 * 0, or -EINVAL with "<prefix>parameter 'profile': unknown profile 'x' (known: null, pm1753, ...)" or
 * "<prefix>parameter 'scale': bad value 'x' (a number > 0, at most 1e6)". */
int nvme_emu_profile_scale(const char *prefix, const char *profile, const char *scale, bool profile_scale,
                           const struct nvme_emu_profile **p, double *s, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NVME_EMU_KEYS_H */
