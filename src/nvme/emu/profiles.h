/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * profiles.h — named device-model profiles of the emulated controller.
 *
 * Purpose: one table of calibrated device models (profiles.c holds the
 * numbers, their sources and the arithmetic).  A profile gives nominal values
 * (as measured on the real hardware); the `scale` URI parameter stretches
 * time by `scale` and divides every rate by `scale`, so a small host can reach
 * the caps and still show the curves' shapes.  Every record made on emu://
 * names profile and scale.
 *
 * Key functions: nvme_emu_profile_find(), nvme_emu_profile_at().
 * Caveats: values are plain data (no clock, no state); the timing itself is in
 * model.c.  A rate of 0 means "no cap"; a fetch burst of 0 means unlimited.
 */
#ifndef NVME_EMU_PROFILES_H
#define NVME_EMU_PROFILES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nvme_emu_profile {
    const char *name;
    const char *summary;
    double default_scale; /* used when the URI gives no scale */
    double lat_ns;        /* base latency per command, nominal */
    double lat_sigma;     /* lognormal shape of the latency (0 = fixed); median stays lat_ns */
    double dev_iops;      /* per-device command rate cap, commands/s (0 = none) */
    double dev_bw;        /* per-device payload bandwidth cap, bytes/s (0 = none) */
    double queue_iops;    /* per-queue command rate cap, commands/s (0 = none) */
    uint32_t fetch_burst; /* SQEs fetched per doorbell/poll event and queue (0 = unlimited) */
    double link_bw;       /* payload bandwidth shared by all devices of a target, bytes/s (0 = none) */
};

/* NULL when no profile has that name. */
const struct nvme_emu_profile *nvme_emu_profile_find(const char *name);
/* i-th profile (0-based), NULL past the end: for listing in messages and docs. */
const struct nvme_emu_profile *nvme_emu_profile_at(unsigned i);

#ifdef __cplusplus
}
#endif

#endif /* NVME_EMU_PROFILES_H */
