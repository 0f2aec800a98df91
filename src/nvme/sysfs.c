/* SPDX-License-Identifier: BSD-3-Clause */
/* sysfs.c — root-prefixed reads, writes and links of sysfs/procfs files (see sysfs.h). */
#include "nvme/sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void vpath(char *out, const char *root, const char *fmt, va_list ap)
{
    size_t n = (size_t)snprintf(out, NVME_SYSFS_PATH_MAX, "%s", root ? root : "");
    vsnprintf(out + n, NVME_SYSFS_PATH_MAX - n, fmt, ap);
}

void nvme_sysfs_path(char *out, const char *root, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpath(out, root, fmt, ap);
    va_end(ap);
}

/* Read the first line of a file into buf (newline stripped). */
int nvme_sysfs_read(const char *root, char *buf, size_t len, const char *fmt, ...)
{
    char p[NVME_SYSFS_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vpath(p, root, fmt, ap);
    va_end(ap);
    FILE *f = fopen(p, "r");
    if (!f)
        return -errno;
    if (!fgets(buf, (int)len, f))
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* Write a string to a sysfs attribute (one write, as the kernel expects). */
int nvme_sysfs_write(const char *root, const char *val, const char *fmt, ...)
{
    char p[NVME_SYSFS_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vpath(p, root, fmt, ap);
    va_end(ap);
    int fd = open(p, O_WRONLY | O_TRUNC); /* as `echo > attr` does */
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, val, strlen(val));
    int rc = w < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Base name of a symlink's target ("" and -errno when it is not a link). */
int nvme_sysfs_link_base(const char *root, char *out, size_t len, const char *fmt, ...)
{
    char p[NVME_SYSFS_PATH_MAX], t[NVME_SYSFS_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vpath(p, root, fmt, ap);
    va_end(ap);
    out[0] = '\0';
    ssize_t n = readlink(p, t, sizeof t - 1);
    if (n < 0)
        return -errno;
    t[n] = '\0';
    const char *b = strrchr(t, '/');
    snprintf(out, len, "%.*s", (int)len - 1, b ? b + 1 : t);
    return 0;
}

int nvme_sysfs_exists(const char *root, const char *fmt, ...)
{
    char p[NVME_SYSFS_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vpath(p, root, fmt, ap);
    va_end(ap);
    struct stat st;
    return stat(p, &st) == 0 || lstat(p, &st) == 0;
}
