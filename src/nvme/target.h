/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * target.h — target internals: what nvme_target_open builds from a URI. The backend of the scheme's row
 * (scheme.h, the NVME_SCHEME_DRIVER rows: emu.c in src/nvme/emu for emu://, pci.c for pci://,
 * vfio_user_client.c for vfio-user://) supplies one BAR per controller and the DMA translation;
 * target.c brings each controller up through ctrl.c and tears everything down in reverse on close.
 *
 * Key items: struct nvme_target; nvme_target_dma (the DMA domain for a controller's queues).
 */
#ifndef NVME_TARGET_H
#define NVME_TARGET_H

#include "nvme/dma.h"
#include "nvme/nvme.h"
#include "nvme/uri.h"

struct nvme_target {
    char *uri;
    char scheme[16];
    struct nvme_uri *parsed;
    unsigned nctrl;
    struct nvme_ctrl **ctrls;
    struct nvme_dma_domain dma;
    bool dma_ready;
    void *backend;                        /* struct nvme_emu_set *, struct nvme_pci * or struct nvme_vfu_set * */
    void (*backend_close)(void *backend); /* after every controller is detached and DMA released */
};

static inline struct nvme_dma_domain *nvme_target_dma(struct nvme_target *t)
{
    return &t->dma;
}

#endif /* NVME_TARGET_H */
