/* SPDX-License-Identifier: BSD-3-Clause */
/* devmgmt.h — NVMe PCI function management over sysfs, for hosts without Python (the QEMU guest).
 *
 * The same rules as the Python module nvmelab.devices (which hosts use through `nvmelab devices|bind|
 * unbind|hugepages`); tests/test_devices.py runs both against one fake sysfs tree and compares them.
 *
 * Key functions:
 *   dm_main(argc, argv)        command line: devices | bind ADDR --driver D | unbind ADDR [--no-probe] |
 *                              hugepages [N] [--size 2M|1G] | check ADDR; all take --root DIR (default "")
 *   (in use or not: nvme_pci_in_use() in src/nvme/inuse.h, the one check pci.c and Python use too)
 *   dm_bind / dm_unbind        move one named function between drivers (driver_override + drivers_probe)
 *   dm_hugepages               reserve N hugepages of one size and report what the kernel gave
 *
 * Caveats: only the function named is ever touched (no wildcard, no "all"); the root prefix lets tests
 * point every path (sys, proc, dev) at a fake tree. Return values are 0 or a negative errno; a reason
 * for the user is written to the caller's buffer.
 */
#ifndef NVMELAB_DEVMGMT_H
#define NVMELAB_DEVMGMT_H

#include <stddef.h>

/* Length of a full PCI address "DDDD:BB:DD.F" plus its terminator. */
#define DM_ADDR_LEN 13

/* Normalise "BB:DD.F" or "DDDD:BB:DD.F" (any case) to "dddd:bb:dd.f"; -EINVAL when malformed. */
int dm_parse_addr(const char *in, char out[DM_ADDR_LEN]);

/* Bind ADDR to driver ("uio_pci_generic" or "vfio-pci"). */
int dm_bind(const char *root, const char *addr, const char *driver, char *err, size_t errlen);

/* Release ADDR from its driver; with reprobe != 0 let the kernel pick its default driver again. */
int dm_unbind(const char *root, const char *addr, int reprobe, char *err, size_t errlen);

/* Reserve n hugepages of size_kb (n < 0: only report); total and free_pages receive what the kernel reports. */
int dm_hugepages(const char *root, long n, long size_kb, long *total, long *free_pages, char *err, size_t errlen);

/* The command line described above; returns the process exit status (0 ok, 1 refused/failed, 2 usage). */
int dm_main(int argc, char **argv);

#endif /* NVMELAB_DEVMGMT_H */
