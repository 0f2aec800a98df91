/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pci.h — the pci:// backend: real NVMe controllers bound to uio_pci_generic or vfio-pci.
 *
 *   pci://0000:4a:00.0[,0000:4b:00.0...][?driver=uio_pci_generic|vfio-pci]
 *
 * Safety rules (each refusal is one clear error naming the address and the reason):
 *   - only functions named in the URI are touched, and each must also be on the allow-list when
 *     NVMELAB_PCI_ALLOW (comma-separated addresses, or "*") is set;
 *   - the function must be an NVMe controller (class 0x010802);
 *   - it must already be bound to the requested driver (nvmelab never binds/unbinds here; the CLI
 *     `nvmelab bind` does that explicitly), and a function still on the kernel nvme driver is refused with
 *     the list of its block devices;
 *   - a function whose block devices (or partitions, or holders) are mounted, or back the root
 *     filesystem, is refused.
 * uio: BAR0 via sysfs resource0 mmap, DMA from 2 MiB hugepages + /proc/self/pagemap.
 * vfio: group from iommu_group, container (type1 IOMMU), device fd, region info, BAR0 mmap,
 *       DMA by VFIO_IOMMU_MAP_DMA at IOVAs from the DMA domain.
 * Both: bus mastering enabled through config space (and INTx disabled: we poll).
 *
 * Key functions: nvme_pci_open / nvme_pci_close / nvme_pci_bar / nvme_pci_count; nvme_pci_check (the
 * safety checks on their own, with a root prefix so tests run on a fake tree).
 */
#ifndef NVME_PCI_H
#define NVME_PCI_H

#include <stdbool.h>
#include <stddef.h>

#include "nvme/bar.h"
#include "nvme/dma.h"
#include "nvme/uri.h"

#define NVME_PCI_CLASS_NVME 0x010802u
#define NVME_PCI_ADDR_LEN   13u /* "0000:4a:00.0" + NUL */
#define NVME_PCI_ALLOW_ENV  "NVMELAB_PCI_ALLOW"

enum nvme_pci_driver { NVME_PCI_UIO, NVME_PCI_VFIO };

struct nvme_pci;

/* Open every function named by u; err names the address and the reason on refusal. */
int nvme_pci_open(const struct nvme_uri *u, struct nvme_pci **out, char *err, size_t errlen);
void nvme_pci_close(void *pci); /* void * so it fits target.backend_close */
unsigned nvme_pci_count(const struct nvme_pci *p);
const struct nvme_bar *nvme_pci_bar(const struct nvme_pci *p, unsigned i);
enum nvme_dma_kind nvme_pci_dma_kind(const struct nvme_pci *p);
int nvme_pci_vfio_container(const struct nvme_pci *p); /* -1 unless vfio */

/* Parse "DDDD:BB:DD.F" (domain optional) into canonical lower-case form in out[NVME_PCI_ADDR_LEN]. */
int nvme_pci_addr_canon(const char *s, char *out);
/* The safety checks alone: address, allow-list, NVMe class, not in use by the host (inuse.h: the one
 * check), bound to drv. root prefixes /sys, /proc and /dev ("" on a host; a fake tree in tests).
 * 0 when the function may be used with drv; -EPERM/-ENODEV/-EBUSY/-EINVAL with err filled otherwise. */
int nvme_pci_check(const char *addr, enum nvme_pci_driver drv, const char *root, const char *allow, char *err,
                   size_t errlen);

#endif /* NVME_PCI_H */
