/*
 * profiles.c — the calibration of the emulator's device models, in one place.
 *
 * Every constant below is derived from published rows of
 * data/reference/headline.csv (copied from the xnvme/aisio artifact; columns
 * experiment,quantity,config,value,unit,source).  tests/test_emu_profiles.py
 * re-derives each constant from that file with the arithmetic written here and
 * fails if they drift apart, so edit both together.
 *
 * pm1753 (Samsung PM1753, PCIe Gen5 x4, 16 devices in the published server)
 * -----------------------------------------------------------------------
 * dev_iops   = 3 857 938 commands/s
 *     row: cpu-initiated,device_iops_cap,"single device max over all runs",3857938
 *     cross-check: cpu-initiated,roofline_iops,"16 devices",61727008
 *                  = 16 x 3 857 938 exactly, so the 16-device roofline is 16
 *                  independent single-device caps (no shared IOPS limit).
 * dev_bw     = 215 GiB/s / 16 = 13.4375 GiB/s = 14 428 405 760 bytes/s
 *     row: cpu-initiated,bandwidth,"4096B plateau (approx)",215 GiB/s, which
 *     was reached with 16 devices; at 4 KiB the IOPS cap alone would allow
 *     3 857 938 x 4096 x 16 / 2^30 = 235.5 GiB/s, so the plateau is a per-device
 *     bandwidth limit of 215/16 GiB/s.
 * queue_iops = 53 500 000 / 16 = 3 343 750 commands/s
 *     row: cuda-qdepth,iops,"nqueues=1 qd=512",53500000 (16 devices, one queue
 *     each, still short of the 61.7 M roofline at any depth): one submission
 *     queue cannot feed a device faster than 53.5 M / 16 per second.
 * lat_ns     = 128 x 16 / 41 900 000 s = 48 878 ns   (Little's law, L = N / X)
 *     row: cuda-qdepth,iops,"nqueues=1 qd=128",41900000: 16 devices x 1 queue
 *     x 128 commands in flight, below both caps (41.9 M / 16 = 2.62 M per
 *     device < 3.34 M per queue), so the rate is latency-bound and the mean
 *     time a command spends in the device is N / X.  The published data give
 *     no distribution, so lat_sigma = 0 (fixed); a lognormal spread can be
 *     asked for with lat_sigma=.
 *     Sanity check against the published saturation points (caps: 3.86 M per
 *     device): nqueues=2 qd=128 -> 2 x 128 / 48.878 us = 5.2 M >= cap
 *     (saturated, as published); nqueues=2 qd=64 -> 2.6 M < cap (not
 *     saturated, as published: min qd for nqueues=2 is 128).
 * link_bw    = 0 (none) for host-memory I/O: the CPU-initiated study moved
 *     215 GiB/s into host memory, so the host link is never the limit there.
 * fetch_burst = 0 (unlimited): no published number constrains it.
 * default_scale = 64: the 16-device roofline becomes 61 727 008 / 64 =
 *     964 484 commands/s, the per-device cap 60 280/s and the latency 3.13 ms.
 *     The emulator alone runs about 30 M null commands/s per core
 *     (tests/c/test_emu_throughput), so the caps of 16 scaled devices stay
 *     well inside what a 2-core host can issue even with the driver's own
 *     per-command cost on top; re-check with `make bench` on a new host.
 *
 * pm1753-p2p: pm1753 with the device-to-GPU path of the P2P studies
 * --------------------------------------------------------------------
 * link_bw    = 45.2 GB/s = 45 200 000 000 bytes/s payload, shared by all devices
 *     row: pcie-saturation,payload_bandwidth,">=4096B",45.2 GB/s (all devices
 *     into one GPU behind one PCIe Gen5 x16 link; the link itself carried
 *     57.8 GB/s, a 1.28 protocol-overhead ratio, which this model folds into
 *     the payload ceiling because the emulator only counts payload bytes).
 *     Cross-check: cuda-iosize,bandwidth,"practical ceiling all lines",44-45.
 *
 * null: no timing at all (no clock reads, no caps); the lean path for
 * measuring the host side.  With data=none (a URI parameter, not part of the
 * profile) reads leave the host buffer untouched and writes are discarded.
 */
#include "nvme/emu/profiles.h"

#include <stddef.h>
#include <string.h>

/* ---- published inputs (data/reference/headline.csv) ---- */
#define PM1753_DEVICE_IOPS_CAP      3857938.0     /* cpu-initiated,device_iops_cap */
#define PM1753_PLATEAU_GIB_S_16DEV  215.0         /* cpu-initiated,bandwidth,4096B plateau */
#define PM1753_NDEVS_PUBLISHED      16.0          /* the server's device count */
#define PM1753_NQ1_QD512_IOPS       53500000.0    /* cuda-qdepth,iops,nqueues=1 qd=512 */
#define PM1753_NQ1_QD128_IOPS       41900000.0    /* cuda-qdepth,iops,nqueues=1 qd=128 */
#define PM1753_NQ1_QD128_INFLIGHT   (128.0 * 16.0) /* qd x devices, one queue each */
#define P2P_PAYLOAD_CEILING_B_S     45.2e9        /* pcie-saturation,payload_bandwidth */

#define GIB                         1073741824.0
#define NS_PER_S                    1e9
#define PM1753_DEFAULT_SCALE        64.0

/* ---- derived constants (the arithmetic in the header comment) ---- */
#define PM1753_DEV_BW      (PM1753_PLATEAU_GIB_S_16DEV * GIB / PM1753_NDEVS_PUBLISHED)
#define PM1753_QUEUE_IOPS  (PM1753_NQ1_QD512_IOPS / PM1753_NDEVS_PUBLISHED)
#define PM1753_LAT_NS      (PM1753_NQ1_QD128_INFLIGHT / PM1753_NQ1_QD128_IOPS * NS_PER_S)

static const struct nvme_emu_profile profiles[] = {
    {
        .name = "null",
        .summary = "no timing model: commands complete as soon as they are fetched",
        .default_scale = 1.0,
    },
    {
        .name = "pm1753",
        .summary = "Samsung PM1753 as published (aisio): IOPS, bandwidth and per-queue caps, Little's-law latency",
        .default_scale = PM1753_DEFAULT_SCALE,
        .lat_ns = PM1753_LAT_NS,
        .lat_sigma = 0.0,
        .dev_iops = PM1753_DEVICE_IOPS_CAP,
        .dev_bw = PM1753_DEV_BW,
        .queue_iops = PM1753_QUEUE_IOPS,
        .fetch_burst = 0,
        .link_bw = 0.0,
    },
    {
        .name = "pm1753-p2p",
        .summary = "pm1753 with the 45.2 GB/s device-to-GPU payload ceiling shared by all devices",
        .default_scale = PM1753_DEFAULT_SCALE,
        .lat_ns = PM1753_LAT_NS,
        .lat_sigma = 0.0,
        .dev_iops = PM1753_DEVICE_IOPS_CAP,
        .dev_bw = PM1753_DEV_BW,
        .queue_iops = PM1753_QUEUE_IOPS,
        .fetch_burst = 0,
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
