/* SPDX-License-Identifier: BSD-3-Clause */
/* backend.c — targets of the engine layer: open by the URI scheme's row (nvme/scheme.h), close, cold-path write (see
 * backend.h). */
#include "engine/backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kio.h"
#include "nvme/scheme.h"

/* ------------------------------------------------------------------ targets */

int perf_target_open(const char *uri, const struct perf_target_opts *opts, struct perf_target **out, char *err,
                     size_t errlen)
{
    char list[NVME_SCHEME_LIST_LEN];
    if (!uri || !*uri) {
        snprintf(err, errlen, "target: empty URI (use %s)",
                 nvme_scheme_list(NVME_SCHEME_PERF, NVME_SCHEME_LIST_EXAMPLES, list, sizeof(list)));
        return -EINVAL;
    }
    /* the row of the URI's scheme (nvme/scheme.h) picks the backend: the kernel paths or the NVMe driver */
    const struct nvme_scheme *row = nvme_scheme_of_uri(uri);
    if (row && (row->flags & NVME_SCHEME_KIO))
        return kio_target_open(uri, opts, out, err, errlen);
    if (row && (row->flags & NVME_SCHEME_DRIVER)) {
        if (opts && opts->backend && opts->backend[0]) {
            snprintf(err, errlen, "%s: backend=%s applies to %s only", uri, opts->backend,
                     nvme_scheme_list(NVME_SCHEME_KIO, NVME_SCHEME_LIST_AND, list, sizeof(list)));
            return -EINVAL;
        }
        return perf_nvme_target_open(uri, opts, out, err, errlen);
    }
    snprintf(err, errlen, "%s: unknown target scheme (use %s)", uri,
             nvme_scheme_list(NVME_SCHEME_PERF, 0, list, sizeof(list)));
    return -EINVAL;
}

void perf_target_close(struct perf_target *t)
{
    if (!t)
        return;
    if (t->ops && t->ops->destroy)
        t->ops->destroy(t->ctx);
    free(t);
}

int perf_target_write_sync(struct perf_target *t, uint32_t dev, uint64_t slba, const void *buf, size_t len, char *err,
                           size_t errlen)
{
    if (dev >= t->ndevs) {
        snprintf(err, errlen, "dev=%u: the target has %u device(s)", dev, t->ndevs);
        return -EINVAL;
    }
    const struct perf_dev_info *d = &t->dev[dev];
    if (len == 0 || len % d->lba_size || len > d->max_io_bytes) {
        snprintf(err, errlen, "len=%zu: must be a whole number of %u-byte LBAs, at most %u bytes", len, d->lba_size,
                 d->max_io_bytes);
        return -EINVAL;
    }
    if (slba >= d->nlbas || len / d->lba_size > d->nlbas - slba) {
        snprintf(err, errlen, "lba=%llu: beyond the %llu LBAs of device %u", (unsigned long long)slba,
                 (unsigned long long)d->nlbas, dev);
        return -EINVAL;
    }
    int rc = t->ops->write_sync(t->ctx, dev, slba, buf, len);
    if (rc < 0)
        snprintf(err, errlen, "device %u: write at LBA %llu failed: %s", dev, (unsigned long long)slba, strerror(-rc));
    else if (rc > 0)
        snprintf(err, errlen, "device %u: write at LBA %llu failed with NVMe status sct 0x%x sc 0x%x", dev,
                 (unsigned long long)slba, (rc >> 8) & 0xff, rc & 0xff);
    return rc > 0 ? -EIO : rc;
}
