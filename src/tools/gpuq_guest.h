/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpuq_guest.h — `nvmelab-guest gpuq URI [--rounds N]`: checks of the GPU-queue path on real controllers
 * without a GPU (queue pairs with host-memory rings driven by the CPU stand-in; see gpuq_guest.c).
 *
 * Key function: gpuq_guest_run() — runs the checks on every controller, prints NVMELAB-TEST lines,
 * returns 0 when all passed.
 */
#ifndef NVME_TOOLS_GPUQ_GUEST_H
#define NVME_TOOLS_GPUQ_GUEST_H

#include "nvme/nvme.h"

int gpuq_guest_run(struct nvme_target *t, unsigned rounds);

#endif /* NVME_TOOLS_GPUQ_GUEST_H */
