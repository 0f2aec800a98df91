/* SPDX-License-Identifier: BSD-3-Clause */
/* hotpath.c — the driver's submit/ring/poll loop on emu://?profile=null, for callgrind.
 *
 * Usage: hotpath URI QDEPTH NIOS
 * Keeps QDEPTH 512-byte reads in flight on one qpair of the first namespace until
 * NIOS have completed, then prints "ios=N". bench_driver_hotpath.py runs it under
 * callgrind and splits the instruction counts between driver and emulator. */
#include <stdio.h>
#include <stdlib.h>

#include "nvme/nvme.h"

#define IOSIZE         512u
#define QP_EXTRA_ENTRY 1u /* N entries hold N-1 commands */

static unsigned long long completed;
static unsigned free_count;

static void bench_cb(void *arg, const struct nvme_cpl *cpl)
{
    (void)arg;
    if (!nvme_cpl_ok(cpl)) {
        fprintf(stderr, "command failed\n");
        exit(1);
    }
    completed++;
    free_count++;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s URI QDEPTH NIOS\n", argv[0]);
        return 2;
    }
    const char *uri = argv[1];
    unsigned qd = (unsigned)strtoul(argv[2], NULL, 0);
    unsigned long long nios = strtoull(argv[3], NULL, 0);
    char err[NVME_ERRLEN];
    struct nvme_target *t;
    if (nvme_target_open(uri, &t, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns_at(c, 0);
    struct nvme_qpair_opts o = {.depth = qd + QP_EXTRA_ENTRY, .batch = qd + QP_EXTRA_ENTRY};
    struct nvme_qpair *qp;
    struct nvme_dma *d;
    if (nvme_qpair_create(c, &o, &qp) || nvme_dma_alloc(t, (size_t)qd * IOSIZE, &d)) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    char *buf = nvme_dma_vaddr(d);
    uint64_t nlbas = nvme_ns_nsze(ns);
    unsigned long long submitted = 0;
    uint64_t lba = 0;
    free_count = qd;
    while (completed < nios) {
        while (free_count && submitted < nios) {
            unsigned slot = (unsigned)(submitted % qd);
            if (nvme_qpair_submit(qp, ns, NVME_CMD_READ, lba, 1, buf + (size_t)slot * IOSIZE, IOSIZE, bench_cb, NULL))
                break;
            lba = (lba + 7919) % nlbas;
            free_count--;
            submitted++;
        }
        nvme_qpair_ring(qp);
        nvme_qpair_poll(qp, 0);
    }
    printf("ios=%llu\n", completed);
    nvme_qpair_destroy(qp);
    nvme_dma_free(d);
    nvme_target_close(t);
    return 0;
}
