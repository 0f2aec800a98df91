/* SPDX-License-Identifier: BSD-3-Clause */
/* target.c — nvme_target_open: parse the URI (uri.c), dispatch on the kind of its scheme's row (scheme.h) to
 * its backend (emu:// -> src/nvme/emu, pci:// -> pci.c, vfio-user:// -> vfio_user_client.c), bring each
 * controller up (ctrl.c); close unwinds in reverse. */
#include "nvme/target.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/ctrl_internal.h"
#include "nvme/pci.h"
#include "nvme/scheme.h"
#include "nvme/vfio_user_client.h"

#if defined(__has_include)
#if __has_include("nvme/emu/emu.h")
#include "nvme/emu/emu.h"
#include "nvme/errbuf.h"
#define NVME_HAVE_EMU 1
#endif
#endif

#ifdef NVME_HAVE_EMU
static void emu_close(void *b)
{
    nvme_emu_set_close(b);
}

/* Every DMA object of an emu:// target is a window of the emulator's IOMMU (emu.h). */
static int emu_iommu_map(void *set, const void *va, size_t len)
{
    return nvme_emu_dma_map(set, va, len);
}

static int emu_iommu_unmap(void *set, const void *va, size_t len)
{
    return nvme_emu_dma_unmap(set, va, len);
}
#endif

#define MAX_CTRLS (NVME_URI_MAX_ITEMS * 4u)

static int open_emu(struct nvme_target *t, const struct nvme_bar **bars, unsigned *nbars, char *err, size_t errlen)
{
#ifdef NVME_HAVE_EMU
    struct nvme_emu_set *set = NULL;
    int rc = nvme_emu_target_open(t->parsed, &set, err, errlen);
    if (rc)
        return rc;
    t->backend = set;
    t->backend_close = emu_close;
    unsigned n = nvme_emu_set_count(set);
    if (n > MAX_CTRLS)
        n = MAX_CTRLS;
    for (unsigned i = 0; i < n; i++)
        bars[i] = nvme_emu_set_bar(set, i);
    *nbars = n;
    rc = nvme_dma_domain_init(&t->dma, t, NVME_DMA_IDENTITY, -1);
    t->dma.iommu_map = emu_iommu_map;
    t->dma.iommu_unmap = emu_iommu_unmap;
    t->dma.iommu_ctx = set;
    return rc;
#else
    (void)t, (void)bars, (void)nbars;
    return nvme_errf(err, errlen, -ENOSYS, "emu:// is not compiled into this build");
#endif
}

static int open_pci(struct nvme_target *t, const struct nvme_bar **bars, unsigned *nbars, char *err, size_t errlen)
{
    struct nvme_pci *p = NULL;
    int rc = nvme_pci_open(t->parsed, &p, err, errlen);
    if (rc)
        return rc;
    t->backend = p;
    t->backend_close = nvme_pci_close;
    unsigned n = nvme_pci_count(p);
    for (unsigned i = 0; i < n; i++)
        bars[i] = nvme_pci_bar(p, i);
    *nbars = n;
    return nvme_dma_domain_init(&t->dma, t, nvme_pci_dma_kind(p), nvme_pci_vfio_container(p));
}

static int open_vfio_user(struct nvme_target *t, const struct nvme_bar **bars, unsigned *nbars, char *err,
                          size_t errlen)
{
    struct nvme_vfu_set *v = NULL;
    int rc = nvme_vfu_open(t->parsed, &v, err, errlen);
    if (rc)
        return rc;
    t->backend = v;
    t->backend_close = nvme_vfu_close;
    unsigned n = nvme_vfu_count(v);
    if (n > MAX_CTRLS)
        n = MAX_CTRLS;
    for (unsigned i = 0; i < n; i++)
        bars[i] = nvme_vfu_bar(v, i);
    *nbars = n;
    rc = nvme_dma_domain_init(&t->dma, t, NVME_DMA_VFIO_USER, -1);
    t->dma.fd_map = nvme_vfu_dma_map;
    t->dma.fd_unmap = nvme_vfu_dma_unmap;
    t->dma.fd_ctx = v;
    return rc;
}

/* Ask the scheme's backend (its row in scheme.h: the NVME_SCHEME_DRIVER rows) for the controllers' BARs and
 * the DMA translation. */
static int backend_open(struct nvme_target *t, const struct nvme_bar **bars, unsigned *nbars, char *err, size_t errlen)
{
    const struct nvme_uri *u = t->parsed;
    const struct nvme_scheme *row = nvme_scheme_find(u->scheme);
    if (row && (row->flags & NVME_SCHEME_DRIVER)) {
        switch (row->kind) {
        case NVME_SCHEME_EMU:
            return open_emu(t, bars, nbars, err, errlen);
        case NVME_SCHEME_PCI:
            return open_pci(t, bars, nbars, err, errlen);
        case NVME_SCHEME_VFIO_USER:
            return open_vfio_user(t, bars, nbars, err, errlen);
        default:
            return nvme_errf(err, errlen, -ENOSYS, "%s:// has no driver backend in this build", u->scheme);
        }
    }
    if (row && (row->flags & NVME_SCHEME_KIO))
        return nvme_errf(
            err, errlen, -EINVAL,
            "%s:// is a kernel I/O path (psync, io_uring): use it with the perf engine, not the NVMe driver",
            u->scheme);
    char list[NVME_SCHEME_LIST_LEN];
    return nvme_errf(err, errlen, -EINVAL, "unsupported scheme '%s://' (the driver takes %s)", u->scheme,
                     nvme_scheme_list(NVME_SCHEME_DRIVER, 0, list, sizeof(list)));
}

int nvme_target_open(const char *uri, struct nvme_target **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return nvme_errf(err, errlen, -EINVAL, "no output pointer");
    *out = NULL;
    struct nvme_target *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    int rc = nvme_uri_parse(uri, &t->parsed, err, errlen);
    if (rc) {
        free(t);
        return rc;
    }
    t->uri = strdup(uri);
    snprintf(t->scheme, sizeof(t->scheme), "%s", t->parsed->scheme);
    const struct nvme_bar *bars[MAX_CTRLS];
    unsigned nbars = 0;
    if (!t->uri) {
        rc = -ENOMEM;
        goto fail;
    }
    rc = backend_open(t, bars, &nbars, err, errlen);
    if (rc)
        goto fail;
    t->dma_ready = true;
    if (nbars == 0) {
        rc = nvme_errf(err, errlen, -ENODEV, "%s: names no controller", uri);
        goto fail;
    }
    t->ctrls = calloc(nbars, sizeof(*t->ctrls));
    if (!t->ctrls) {
        rc = -ENOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < nbars; i++) {
        rc = nvme_ctrl_attach(t, i, bars[i], &t->ctrls[i], err, errlen);
        if (rc)
            goto fail;
        t->nctrl++;
    }
    *out = t;
    return 0;
fail:
    nvme_target_close(t);
    if (err && errlen && !err[0])
        snprintf(err, errlen, "%s: %s", uri, strerror(-rc));
    return rc;
}

void nvme_target_close(struct nvme_target *t)
{
    if (!t)
        return;
    for (unsigned i = t->nctrl; i-- > 0;) {
        nvme_ctrl_detach(t->ctrls[i]);
        t->ctrls[i] = NULL; /* nvme_dma_free walks the remaining controllers */
    }
    free(t->ctrls);
    if (t->dma_ready)
        nvme_dma_domain_fini(&t->dma);
    if (t->backend_close)
        t->backend_close(t->backend);
    nvme_uri_free(t->parsed);
    free(t->uri);
    free(t);
}

unsigned nvme_target_nctrl(const struct nvme_target *t)
{
    return t->nctrl;
}

struct nvme_ctrl *nvme_target_ctrl(struct nvme_target *t, unsigned i)
{
    return i < t->nctrl ? t->ctrls[i] : NULL;
}

const char *nvme_target_uri(const struct nvme_target *t)
{
    return t->uri;
}

const char *nvme_target_scheme(const struct nvme_target *t)
{
    return t->scheme;
}

void *nvme_target_backend(const struct nvme_target *t)
{
    return t->backend;
}
