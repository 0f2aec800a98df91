/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inuse.h — the one check whether an NVMe PCI function is in use by the host.
 *
 * Purpose: before nvmelab takes a function from its driver (pci.c opening pci://, `nvmelab bind`
 * and `nvmelab devices` in Python through the binding, the guest tool devmgmt.c), it asks this
 * check, so the three callers can no longer disagree.
 *
 * What counts as in use: a namespace of any controller under the function (multipath hidden paths
 * nvme<S>c<C>n<N> count for their head nvme<S>n<N>), a partition, or anything stacked on them
 * (device-mapper, md; holders of holders) that is mounted (/proc/self/mountinfo, by device
 * number), is the boot device (/, /boot, /boot/efi, or root= on the kernel command line), is a swap
 * area, is held, or is open by a process (block devices, controller character devices, /dev/uioN,
 * /dev/vfio/<group>). A function with more block devices than the check holds, or one without a
 * device number in sysfs, is refused rather than vouched for.
 *
 * Key functions:
 *   nvme_pci_in_use()        0 when free; -EBUSY with every reason joined by "; "; -ENODEV absent
 *   nvme_pci_block_devices() the function's block devices, comma separated
 *
 * Caveats: root prefixes every /sys, /proc and /dev path read ("" on a host) so tests run on a
 * fake tree; the address must be canonical (dddd:bb:dd.f).
 */
#ifndef NVME_INUSE_H
#define NVME_INUSE_H

#include <stddef.h>

#define NVME_INUSE_MAX_BLK 128 /* block devices (namespaces, partitions, holders) per function */

int nvme_pci_in_use(const char *root, const char *addr, char *why, size_t whylen);
/* Returns the number of block devices (list may be truncated), or -errno. */
int nvme_pci_block_devices(const char *root, const char *addr, char *list, size_t len);

#endif /* NVME_INUSE_H */
