/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * profiles.c — the calibration of the emulator's device models, in one place.
 *
 * The published inputs are NOT written here: calibration.cmake copies the rows named below from
 * data/reference/headline.csv (the published AiSIO numbers, with their sources) into the generated
 * header nvme/emu/calibration.h. This file holds the arithmetic; tests/test_emu_profiles.py
 * re-derives every effective constant from the CSV and compares it with what the C code uses.
 *
 * pm1753 (Samsung PM1753, PCIe Gen5 x4; 16 devices in the published server)
 * -----------------------------------------------------------------------
 * dev_iops   = NVME_CAL_DEVICE_IOPS_CAP  (cpu-initiated,device_iops_cap: the best single-device run).
 *     Cross-check (tested): cpu-initiated,roofline_iops equals 16 x that cap exactly, so the 16-device
 *     roofline is 16 independent device caps with no shared IOPS limit.
 * dev_bw     = NVME_CAL_PLATEAU_GIB_S GiB/s / 16 devices
 *     (cpu-initiated,bandwidth "4096B plateau", reached with 16 devices). At 4 KiB the IOPS cap alone
 *     would allow cap x 4096 x 16 bytes/s, more than the plateau, so the plateau is a per-device
 *     bandwidth limit.
 * queue_iops = NVME_CAL_NQ1_QD512_IOPS / 16
 *     (cuda-qdepth,iops "nqueues=1 qd=512": 16 devices, one queue each, still short of the roofline at
 *     any depth): one submission queue cannot feed a device faster than that.
 * lat_ns     = 128 x 16 / NVME_CAL_NQ1_QD128_IOPS seconds   (Little's law, L = N / X)
 *     (cuda-qdepth,iops "nqueues=1 qd=128": 16 devices x 1 queue x 128 commands in flight, below both
 *     caps, so the rate is latency-bound and the mean time a command spends in the device is N / X).
 *     The published data give no distribution, so lat_sigma = 0 (fixed); a lognormal spread can be
 *     asked for with lat_sigma=. Sanity check against the published saturation points: with this
 *     latency, nqueues=2 at qd=128 exceeds the device cap (saturated, as published) and nqueues=2 at
 *     qd=64 does not (as published: the minimum depth for nqueues=2 is 128).
 * link_bw    = 0 (none) for host-memory I/O: the CPU-initiated study's plateau was far above any
 *     single link, so the host link is never the limit there.
 * fetch_burst = 0 (unlimited): no published number constrains it.
 * default_scale = 64 (our choice, not published): the caps are divided and the latency multiplied by
 *     it, so the 16-device roofline becomes 1/64 of the published one, within what one core of a
 *     2-core host issues (the emulator alone runs tens of M null commands/s per core:
 *     tests/c/test_emu_throughput; re-check with `make bench` on a new host).
 *
 * pm1753-p2p: pm1753 with the device-to-GPU path of the P2P studies
 * --------------------------------------------------------------------
 * link_bw    = NVME_CAL_P2P_PAYLOAD_GB_S GB/s payload, shared by all devices
 *     (pcie-saturation,payload_bandwidth ">=4096B": all devices into one GPU behind one PCIe Gen5 x16
 *     link; the link itself carried more, the protocol overhead, which this model folds into the
 *     payload ceiling because the emulator only counts payload bytes).
 *
 * null: no timing at all (no clock reads, no caps); the lean path for measuring the host side. With
 * data=none (a URI parameter, not part of the profile) reads leave the host buffer untouched and
 * writes are discarded.
 */
#include "nvme/emu/profiles.h"

#include <stddef.h>
#include <string.h>

#include "nvme/emu/calibration.h" /* generated from data/reference/headline.csv */

#define GIB                       1073741824.0
#define NS_PER_S                  1e9
#define PM1753_NDEVS_PUBLISHED    16.0                             /* the published server's device count */
#define PM1753_NQ1_QD128_INFLIGHT (128.0 * PM1753_NDEVS_PUBLISHED) /* qd x devices, one queue each */
#define PM1753_DEFAULT_SCALE      64.0
#define PM1753_DEVICE_IOPS_CAP    NVME_CAL_DEVICE_IOPS_CAP
#define P2P_PAYLOAD_CEILING_B_S   (NVME_CAL_P2P_PAYLOAD_GB_S * 1e9)

/* ---- derived constants (the arithmetic in the header comment) ---- */
#define PM1753_DEV_BW     (NVME_CAL_PLATEAU_GIB_S * GIB / PM1753_NDEVS_PUBLISHED)
#define PM1753_QUEUE_IOPS (NVME_CAL_NQ1_QD512_IOPS / PM1753_NDEVS_PUBLISHED)
#define PM1753_LAT_NS     (PM1753_NQ1_QD128_INFLIGHT / NVME_CAL_NQ1_QD128_IOPS * NS_PER_S)

/* The device model both pm1753 profiles share; they differ only in the link cap. */
#define PM1753_MODEL                                                                                                   \
    .default_scale = PM1753_DEFAULT_SCALE, .lat_ns = PM1753_LAT_NS, .lat_sigma = 0.0,                                  \
    .dev_iops = PM1753_DEVICE_IOPS_CAP, .dev_bw = PM1753_DEV_BW, .queue_iops = PM1753_QUEUE_IOPS, .fetch_burst = 0

static const struct nvme_emu_profile profiles[] = {
    {
        .name = "null",
        .summary = "no timing model: commands complete as soon as they are fetched",
        .default_scale = 1.0,
    },
    {
        .name = "pm1753",
        .summary = "Samsung PM1753 as published (aisio): IOPS, bandwidth and per-queue caps, Little's-law latency",
        PM1753_MODEL,
        .link_bw = 0.0,
    },
    {
        .name = "pm1753-p2p",
        .summary = "pm1753 with the published device-to-GPU payload ceiling shared by all devices",
        PM1753_MODEL,
        .link_bw = P2P_PAYLOAD_CEILING_B_S,
    },
};

#define NPROFILES (sizeof(profiles) / sizeof(profiles[0]))

const struct nvme_emu_profile *nvme_emu_profile_find(const char *name)
{
    for (size_t i = 0; name && i < NPROFILES; i++)
        if (strcmp(profiles[i].name, name) == 0)
            return &profiles[i];
    return NULL;
}

const struct nvme_emu_profile *nvme_emu_profile_at(unsigned i)
{
    return i < NPROFILES ? &profiles[i] : NULL;
}
