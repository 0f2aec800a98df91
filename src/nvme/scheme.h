/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scheme.h — the one table of target-URI schemes (SPDK's transport list, xNVMe's backend list): which
 * schemes exist, what each is, and which layers serve it. Every dispatcher (nvme_target_open in target.c,
 * perf_target_open in engine/backend.c, cuda-run's crun_target.cu, blksum's image.c) looks a URI's row up
 * here and dispatches on its kind or flags; its "unknown scheme" message lists the schemes of its layer
 * with nvme_scheme_list(). A new target kind is one row here plus its open function in the layer(s) named
 * by its flags.
 *
 * Key functions: nvme_scheme_find (by scheme or URI), nvme_scheme_of_uri (URIs only), nvme_scheme_at/nvme_scheme_count
 * (walk the table), nvme_scheme_list (the "a://, b:// or c://" text of the rows with some flags).
 *
 * Caveats: rows are not compiled out. A scheme whose server a build lacks (gpu-emu:// without CUDA, the NBD
 * schemes without libnbd, emu:// without the emulator) keeps its row, so that every build reads and names
 * URIs alike; the serving layer, which has the build flag (NVMELAB_HAVE_CUDA, NVMELAB_HAVE_NBD), says that
 * it is not compiled in. NVME_SCHEME_NEEDS_* record which flag that is. The lower layer cannot call upward:
 * the table holds no function pointers; each layer keeps its own open functions, chosen by kind or flag.
 */
#ifndef NVME_SCHEME_H
#define NVME_SCHEME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One per row of the table, in table order. */
enum nvme_scheme_kind {
    NVME_SCHEME_EMU,        /* emu://        the in-process emulated controller */
    NVME_SCHEME_PCI,        /* pci://        PCI functions (vfio-pci, uio_pci_generic) */
    NVME_SCHEME_VFIO_USER,  /* vfio-user://  controllers behind a vfio-user socket */
    NVME_SCHEME_GPU_EMU,    /* gpu-emu://    the GPU-resident emulator */
    NVME_SCHEME_FILE,       /* file://       a regular file through the kernel */
    NVME_SCHEME_BLK,        /* blk://        a block device through the kernel */
    NVME_SCHEME_NBD,        /* nbd://        NBD over TCP */
    NVME_SCHEME_NBDS,       /* nbds://       NBD over TLS */
    NVME_SCHEME_NBD_UNIX,   /* nbd+unix://   NBD over a unix socket */
    NVME_SCHEME_NBDS_UNIX,  /* nbds+unix://  NBD over TLS on a unix socket */
    NVME_SCHEME_NBD_VSOCK,  /* nbd+vsock://  NBD over vsock */
    NVME_SCHEME_NBDS_VSOCK, /* nbds+vsock:// NBD over TLS on vsock */
    NVME_SCHEME_COUNT
};

/* Row flags: the layers that serve the scheme, and what it is. */
#define NVME_SCHEME_DRIVER     0x01u /* controllers nvme_target_open brings up (the driver, perf_nvme) */
#define NVME_SCHEME_KIO        0x02u /* a kernel I/O path of the perf engine (engine/kio.c) */
#define NVME_SCHEME_CUDA_RUN   0x04u /* a target of the cuda-run engine (engine/cuda/crun_target.cu) */
#define NVME_SCHEME_IMAGE      0x08u /* an engine target blksum reads (blksum_source_open_uri) */
#define NVME_SCHEME_NBD_EXPORT 0x10u /* an NBD export blksum reads with libnbd */
#define NVME_SCHEME_EMULATED   0x20u /* served by an emulated controller, not hardware */
#define NVME_SCHEME_NEEDS_CUDA 0x40u /* served only in a build with NVMELAB_HAVE_CUDA */
#define NVME_SCHEME_NEEDS_NBD  0x80u /* served only in a build with NVMELAB_HAVE_NBD */
/* The perf engine's (and blksum's) target URIs: perf_target_open serves these. */
#define NVME_SCHEME_PERF     (NVME_SCHEME_DRIVER | NVME_SCHEME_KIO)

#define NVME_SCHEME_LIST_LEN 256u /* holds any nvme_scheme_list() of the table */

struct nvme_scheme {
    const char *name;           /* lower case, without "://" */
    enum nvme_scheme_kind kind; /* == its index in the table */
    unsigned flags;             /* NVME_SCHEME_* */
    const char *what;           /* one line for messages and docs */
    const char *example;        /* a URI shape for messages, e.g. "file:///path" */
};

/* The row of a scheme ("emu", any case) or of a URI's scheme (the text before the first "://", read by
 * uri.c's scheme rules); NULL when the scheme is not in the table or the text is not a scheme. */
const struct nvme_scheme *nvme_scheme_find(const char *scheme_or_uri);
/* The row of uri's scheme when uri is a URI ("scheme://..."); NULL for a text without "://" (a file name, a
 * bare scheme) and for a scheme outside the table. What the dispatchers call. */
const struct nvme_scheme *nvme_scheme_of_uri(const char *uri);
/* Row i in table order (i < NVME_SCHEME_COUNT), else NULL. */
const struct nvme_scheme *nvme_scheme_at(unsigned i);
unsigned nvme_scheme_count(void);
/* The rows with any of `flags`, in table order, as "a://, b:// or c://"; style NVME_SCHEME_LIST_EXAMPLES
 * writes each row's example instead of "name://", NVME_SCHEME_LIST_AND ends with " and " instead of " or ".
 * Returns buf (always NUL-terminated, cut to buflen; NVME_SCHEME_LIST_LEN holds any list of the table). */
#define NVME_SCHEME_LIST_EXAMPLES 0x1u
#define NVME_SCHEME_LIST_AND      0x2u
const char *nvme_scheme_list(unsigned flags, unsigned style, char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif

#endif /* NVME_SCHEME_H */
