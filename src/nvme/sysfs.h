/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sysfs.h — small helpers over sysfs and procfs paths with a root prefix.
 *
 * Purpose: the PCI in-use check (inuse.c) and the device-management tool (src/tools/devmgmt.c)
 * read the same files; a root prefix ("" on a host) lets the tests point every path at a fake tree.
 *
 * Key functions: nvme_sysfs_path (root + printf path), nvme_sysfs_read (first line, newline
 * stripped), nvme_sysfs_write (one write, as `echo > attr`), nvme_sysfs_link_base (base name of a
 * symlink's target), nvme_sysfs_exists.
 *
 * Caveats: paths longer than NVME_SYSFS_PATH_MAX are truncated; returns are 0 or -errno.
 */
#ifndef NVME_SYSFS_H
#define NVME_SYSFS_H

#include <stddef.h>

#define NVME_SYSFS_PATH_MAX 4096 /* longest path built */

void nvme_sysfs_path(char *out, const char *root, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int nvme_sysfs_read(const char *root, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int nvme_sysfs_write(const char *root, const char *val, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int nvme_sysfs_link_base(const char *root, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int nvme_sysfs_exists(const char *root, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* NVME_SYSFS_H */
