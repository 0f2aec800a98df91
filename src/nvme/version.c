/* SPDX-License-Identifier: BSD-3-Clause */
/* nvmelab driver version string. */
#include "nvme/version.h"

const char *nvme_version(void)
{
    return NVME_VERSION_STRING;
}
