/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * profiles.c — the calibration of the emulator's device models, in one place.
 *
 * No number is written here: calibration.cmake generates nvme/emu/calibration.h from the fitted
 * model's profile CSV; tests/test_emu_profiles.py compares what the C code uses with that CSV.
 *
 * pm1753 (Samsung PM1753, PCIe Gen5 x4; 16 devices in the published server)
 * -----------------------------------------------------------------------
 * The device model of nvmelab.results.model (version NVME_CAL_MODEL_VERSION), fitted ONCE to the
 * published points named in data/reference/model-calibration.csv and written, with the points each
 * number came from, to data/results/model/pm1753-profile.csv; calibration.cmake copies that file into
 * calibration.h. The emulator runs the CPU submitter's discipline of that model (a queue kept full):
 *   dev_iops   = NVME_CAL_DEV_IOPS    device command cap (cpu_initiated: the best single-device run)
 *   dev_bw     = NVME_CAL_DEV_BW      device bandwidth cap (cpu_initiated: 4 KiB plateau / 16 devices)
 *   queue_iops = NVME_CAL_QUEUE_IOPS  one queue's fetch rate (the one-queue GPU rounds of seeds 000/001)
 *   lat_ns     = NVME_CAL_LAT_NS      a command's fixed turnaround (same points; includes a 512 B transfer)
 * The model's lock-step round cost is not in the profile: a queue kept full does not pay it (the GPU
 * emulator takes it from nvmelab.results.model.lockstep()). lat_sigma = 0: no published distribution.
 * link_bw = 0 for host memory: the CPU-initiated plateau is far above any one link.
 * fetch_burst = 0 (unlimited): no published number constrains it.
 * default_scale = 64 (our choice, not published): the caps are divided and the latency multiplied by
 *     it, so the 16-device roofline becomes 1/64 of the published one, within what one core of a
 *     2-core host issues (re-check with `make bench` on a new host).
 *
 * pm1753-p2p: pm1753 with the device-to-GPU path of the P2P studies
 * --------------------------------------------------------------------
 * link_bw    = NVME_CAL_P2P_LINK_BW payload bytes/s shared by all devices (pcie_saturation: the 4 KiB
 *     payload of 4 devices into one GPU; the link carried more, its framing, which the emulator does
 *     not count because it only counts payload bytes).
 *
 * null: no timing at all (no clock reads, no caps); the lean path for measuring the host side. With
 * data=none (a URI parameter, not part of the profile) reads leave the host buffer untouched and
 * writes are discarded.
 */
#include "nvme/emu/profiles.h"

#include <stddef.h>
#include <string.h>

#include "nvme/emu/calibration.h" /* generated from data/results/model/pm1753-profile.csv */

#define PM1753_DEFAULT_SCALE 64.0

/* The device model both pm1753 profiles share; they differ only in the link cap. */
#define PM1753_MODEL                                                                                                   \
    .default_scale = PM1753_DEFAULT_SCALE, .lat_ns = NVME_CAL_LAT_NS, .lat_sigma = 0.0, .dev_iops = NVME_CAL_DEV_IOPS, \
    .dev_bw = NVME_CAL_DEV_BW, .queue_iops = NVME_CAL_QUEUE_IOPS, .fetch_burst = 0

static const struct nvme_emu_profile profiles[] = {
    {
        .name = "null",
        .summary = "no timing model: commands complete as soon as they are fetched",
        .default_scale = 1.0,
    },
    {
        .name = "pm1753",
        .summary = "Samsung PM1753, fitted device model (nvmelab.results.model): device and per-queue caps, turnaround",
        PM1753_MODEL,
        .link_bw = 0.0,
    },
    {
        .name = "pm1753-p2p",
        .summary = "pm1753 with the fitted device-to-GPU payload cap shared by all devices",
        PM1753_MODEL,
        .link_bw = NVME_CAL_P2P_LINK_BW,
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
