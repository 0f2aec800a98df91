/* SPDX-License-Identifier: BSD-3-Clause */
/* scheme.c — the one table of target-URI schemes and its look-ups (scheme.h). */
#include "nvme/scheme.h"

#include <stdio.h>
#include <string.h>

#include "nvme/uri.h"

#define NBD_FLAGS  (NVME_SCHEME_NBD_EXPORT | NVME_SCHEME_NEEDS_NBD)
#define LIST_SEP   ", "
#define LIST_OR    " or "
#define LIST_AND   " and "
#define SCHEME_SEP "://"

/* Table order is the order of every generated list ("emu://, pci:// or vfio-user://"). */
static const struct nvme_scheme schemes[NVME_SCHEME_COUNT] = {
    [NVME_SCHEME_EMU] = {"emu", NVME_SCHEME_EMU,
                         NVME_SCHEME_DRIVER | NVME_SCHEME_CUDA_RUN | NVME_SCHEME_IMAGE | NVME_SCHEME_EMULATED,
                         "emulated controllers in host memory (src/nvme/emu)", "emu://..."},
    [NVME_SCHEME_PCI] = {"pci", NVME_SCHEME_PCI, NVME_SCHEME_DRIVER | NVME_SCHEME_CUDA_RUN | NVME_SCHEME_IMAGE,
                         "PCI functions bound to vfio-pci or uio_pci_generic", "pci://..."},
    [NVME_SCHEME_VFIO_USER] = {"vfio-user", NVME_SCHEME_VFIO_USER, NVME_SCHEME_DRIVER,
                               "controllers served over a vfio-user socket", "vfio-user:///path"},
    [NVME_SCHEME_GPU_EMU] = {"gpu-emu", NVME_SCHEME_GPU_EMU,
                             NVME_SCHEME_CUDA_RUN | NVME_SCHEME_EMULATED | NVME_SCHEME_NEEDS_CUDA,
                             "emulated controllers in GPU memory (src/nvme/emu/gpu)", "gpu-emu://..."},
    [NVME_SCHEME_FILE] = {"file", NVME_SCHEME_FILE, NVME_SCHEME_KIO | NVME_SCHEME_IMAGE,
                          "a file through the kernel (psync, io_uring)", "file:///path"},
    [NVME_SCHEME_BLK] = {"blk", NVME_SCHEME_BLK, NVME_SCHEME_KIO | NVME_SCHEME_IMAGE,
                         "a block device through the kernel (psync, io_uring)", "blk:///dev/X"},
    [NVME_SCHEME_NBD] = {"nbd", NVME_SCHEME_NBD, NBD_FLAGS, "an NBD export over TCP (libnbd)", "nbd://host/export"},
    [NVME_SCHEME_NBDS] = {"nbds", NVME_SCHEME_NBDS, NBD_FLAGS, "an NBD export over TLS (libnbd)", "nbds://host/export"},
    [NVME_SCHEME_NBD_UNIX] = {"nbd+unix", NVME_SCHEME_NBD_UNIX, NBD_FLAGS, "an NBD export on a unix socket (libnbd)",
                              "nbd+unix:///export?socket=path"},
    [NVME_SCHEME_NBDS_UNIX] = {"nbds+unix", NVME_SCHEME_NBDS_UNIX, NBD_FLAGS,
                               "an NBD export over TLS on a unix socket (libnbd)", "nbds+unix:///export?socket=path"},
    [NVME_SCHEME_NBD_VSOCK] = {"nbd+vsock", NVME_SCHEME_NBD_VSOCK, NBD_FLAGS, "an NBD export over vsock (libnbd)",
                               "nbd+vsock://cid/export"},
    [NVME_SCHEME_NBDS_VSOCK] = {"nbds+vsock", NVME_SCHEME_NBDS_VSOCK, NBD_FLAGS,
                                "an NBD export over TLS on vsock (libnbd)", "nbds+vsock://cid/export"},
};

const struct nvme_scheme *nvme_scheme_find(const char *scheme_or_uri)
{
    char name[NVME_URI_SCHEME_LEN];
    if (nvme_uri_scheme(scheme_or_uri, name, sizeof(name)))
        return NULL;
    for (unsigned i = 0; i < NVME_SCHEME_COUNT; i++)
        if (strcmp(schemes[i].name, name) == 0)
            return &schemes[i];
    return NULL;
}

const struct nvme_scheme *nvme_scheme_of_uri(const char *uri)
{
    return uri && strstr(uri, SCHEME_SEP) ? nvme_scheme_find(uri) : NULL;
}

const struct nvme_scheme *nvme_scheme_at(unsigned i)
{
    return i < NVME_SCHEME_COUNT ? &schemes[i] : NULL;
}

unsigned nvme_scheme_count(void)
{
    return NVME_SCHEME_COUNT;
}

const char *nvme_scheme_list(unsigned flags, unsigned style, char *buf, size_t buflen)
{
    if (!buf || !buflen)
        return buf;
    buf[0] = '\0';
    unsigned total = 0, seen = 0;
    for (unsigned i = 0; i < NVME_SCHEME_COUNT; i++)
        total += (schemes[i].flags & flags) != 0;
    size_t used = 0;
    for (unsigned i = 0; i < NVME_SCHEME_COUNT && used < buflen; i++) {
        if (!(schemes[i].flags & flags))
            continue;
        const char *last = style & NVME_SCHEME_LIST_AND ? LIST_AND : LIST_OR;
        const char *sep = seen == 0 ? "" : seen + 1 == total ? last : LIST_SEP;
        int n = style & NVME_SCHEME_LIST_EXAMPLES
                    ? snprintf(buf + used, buflen - used, "%s%s", sep, schemes[i].example)
                    : snprintf(buf + used, buflen - used, "%s%s%s", sep, schemes[i].name, SCHEME_SEP);
        if (n < 0)
            break;
        used += (size_t)n;
        seen++;
    }
    return buf;
}
