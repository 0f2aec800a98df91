/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * version.h — version of the nvmelab C driver.
 *
 * Key functions: nvme_version().
 */
#ifndef NVME_VERSION_H
#define NVME_VERSION_H

#define NVME_VERSION_STRING "0.1.0"

const char *nvme_version(void);

#endif /* NVME_VERSION_H */
