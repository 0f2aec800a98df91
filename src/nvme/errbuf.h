/* SPDX-License-Identifier: BSD-3-Clause */
/* errbuf.h — the one helper that fills a caller's error buffer; public, as the err/errlen convention is
 * the house's beyond the driver too (the vfio-user server, src/tools/vfu_server.c, reports through it).
 *
 * Purpose: functions that take `char *err, size_t errlen` report a failure with
 *   return nvme_errf(err, errlen, -EINVAL, "nsid=%u: no such namespace", nsid);
 * which formats the message into the buffer (when one was given) and returns the code it
 * was handed, so the message and the negative errno leave together.
 * Key function: nvme_errf().
 * Caveats: the message is truncated to errlen - 1 characters; a NULL or empty buffer gets
 * nothing. The code is returned as is: callers pass a negative errno, never an NVMe status.
 */
#ifndef NVME_ERRBUF_H
#define NVME_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline int nvme_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static inline int nvme_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

#endif /* NVME_ERRBUF_H */
