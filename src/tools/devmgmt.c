/* devmgmt.c — NVMe PCI function management over sysfs (see devmgmt.h). Mirrors nvmelab/devices.py. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "devmgmt.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DM_PATH_MAX   4096          /* longest path we build */
#define DM_LINE_MAX   4096          /* longest line read from a proc/sys file */
#define DM_MAX_BLK    128           /* block devices (namespaces, partitions, holders) per function */
#define DM_NAME_LEN   64            /* a block device name or "major:minor" */
#define DM_REASON_MAX 1024          /* the reasons a function is busy, joined */
#define PCI_CLASS_NVME 0x010802u    /* mass storage / non-volatile memory / NVM Express */
#define KB_PER_MB 1024L
#define DRV_UIO  "uio_pci_generic"
#define DRV_VFIO "vfio-pci"

struct blkset {
    int n;
    char name[DM_MAX_BLK][DM_NAME_LEN];   /* nvme0n1, nvme0n1p1, dm-0 ... */
    char devno[DM_MAX_BLK][DM_NAME_LEN];  /* "259:0" */
    char ctrl[DM_MAX_BLK][DM_NAME_LEN];   /* controller character devices: nvme0 ... (separate count) */
    int nctrl;
    char unnumbered[DM_NAME_LEN];         /* first device without a sysfs device number; "" if none */
    int overflow;                         /* more devices than the set holds (or a name too long) */
};

static void setmsg(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

static void vpath(char *out, const char *root, const char *fmt, va_list ap)
{
    size_t n = (size_t)snprintf(out, DM_PATH_MAX, "%s", root ? root : "");
    vsnprintf(out + n, DM_PATH_MAX - n, fmt, ap);
}

static void mkpath(char *out, const char *root, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpath(out, root, fmt, ap);
    va_end(ap);
}

/* Read the first line of a file into buf (newline stripped). */
static int rd(const char *root, char *buf, size_t len, const char *fmt, ...)
{
    char p[DM_PATH_MAX];
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
static int wr(const char *root, const char *val, const char *fmt, ...)
{
    char p[DM_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vpath(p, root, fmt, ap);
    va_end(ap);
    int fd = open(p, O_WRONLY | O_TRUNC);   /* as `echo > attr` does */
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, val, strlen(val));
    int rc = w < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Base name of a symlink's target ("" and -errno when it is not a link). */
static int link_base(const char *root, char *out, size_t len, const char *fmt, ...)
{
    char p[DM_PATH_MAX], t[DM_PATH_MAX];
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

static int exists(const char *root, const char *fmt, ...)
{
    char p[DM_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vpath(p, root, fmt, ap);
    va_end(ap);
    struct stat st;
    return stat(p, &st) == 0 || lstat(p, &st) == 0;
}

int dm_parse_addr(const char *in, char out[DM_ADDR_LEN])
{
    unsigned dom = 0, bus, dev, fn;
    char tail;
    if (!in)
        return -EINVAL;
    if (sscanf(in, "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) == 4) {
        /* full form */
    } else if (dom = 0, sscanf(in, "%2x:%2x.%1x%c", &bus, &dev, &fn, &tail) == 3) {
        /* short form, domain 0 */
    } else {
        return -EINVAL;
    }
    /* reject forms sscanf tolerates ("0:0:4.0", signs, spaces): the canonical text must match */
    size_t len = strlen(in);
    if (len != 12 && len != 7)
        return -EINVAL;
    for (const char *c = in; *c; c++)
        if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.')
            return -EINVAL;
    if (dev > 0x1f || fn > 7)
        return -EINVAL;
    snprintf(out, DM_ADDR_LEN, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

static int set_has(const struct blkset *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->name[i], name))
            return 1;
    return 0;
}

/* Add a block device. One the set cannot hold (full, or a name too long) sets s->overflow and
 * one without a device number is remembered in s->unnumbered, so that the caller refuses
 * instead of answering for devices it could not check. */
static void set_add(const char *root, struct blkset *s, const char *name)
{
    if (set_has(s, name))
        return;
    if (s->n >= DM_MAX_BLK || strlen(name) >= DM_NAME_LEN) {
        s->overflow = 1;
        return;
    }
    memcpy(s->name[s->n], name, strlen(name) + 1);
    if (rd(root, s->devno[s->n], DM_NAME_LEN, "/sys/class/block/%s/dev", name) < 0) {
        s->devno[s->n][0] = '\0';
        if (!s->unnumbered[0])
            memcpy(s->unnumbered, name, strlen(name) + 1);
    }
    s->n++;
}

/* Namespaces of every controller under ADDR, their partitions, and whatever holds them (dm, md). */
static void collect_blk(const char *root, const char *addr, struct blkset *s)
{
    char p[DM_PATH_MAX];
    memset(s, 0, sizeof *s);
    mkpath(p, root, "/sys/bus/pci/devices/%s/nvme", addr);
    DIR *d = opendir(p);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            unsigned c;
            char extra;
            if (sscanf(e->d_name, "nvme%u%c", &c, &extra) != 1 || s->nctrl >= DM_MAX_BLK)
                continue;
            snprintf(s->ctrl[s->nctrl++], DM_NAME_LEN, "%.*s", DM_NAME_LEN - 1, e->d_name);
            char cp[DM_PATH_MAX];
            mkpath(cp, root, "/sys/bus/pci/devices/%s/nvme/%s", addr, e->d_name);
            DIR *cd = opendir(cp);
            if (!cd)
                continue;
            struct dirent *n;
            while ((n = readdir(cd))) {
                unsigned a, b, k;
                int used = 0;
                char name[DM_NAME_LEN];
                /* multipath: hidden path nvme<subsys>c<ctrl>n<ns> belongs to the head nvme<subsys>n<ns> */
                if (sscanf(n->d_name, "nvme%uc%un%u%n", &a, &b, &k, &used) == 3 && n->d_name[used] == '\0') {
                    snprintf(name, sizeof name, "nvme%un%u", a, k);
                    set_add(root, s, name);
                } else if (sscanf(n->d_name, "nvme%un%u%n", &a, &k, &used) == 2 && n->d_name[used] == '\0') {
                    set_add(root, s, n->d_name);
                }
            }
            closedir(cd);
        }
        closedir(d);
    }
    /* partitions and holders; the set grows while we walk it, which follows holders of holders */
    for (int i = 0; i < s->n; i++) {
        char bp[DM_PATH_MAX];
        char name[DM_NAME_LEN];
        snprintf(name, sizeof name, "%s", s->name[i]);
        mkpath(bp, root, "/sys/class/block/%s", name);
        DIR *bd = opendir(bp);
        if (bd) {
            struct dirent *e;
            while ((e = readdir(bd)))
                if (e->d_name[0] != '.' && exists(root, "/sys/class/block/%s/%s/partition", name, e->d_name))
                    set_add(root, s, e->d_name);
            closedir(bd);
        }
        mkpath(bp, root, "/sys/class/block/%s/holders", name);
        bd = opendir(bp);
        if (bd) {
            struct dirent *e;
            while ((e = readdir(bd)))
                if (e->d_name[0] != '.')
                    set_add(root, s, e->d_name);
            closedir(bd);
        }
    }
}

static void append(char *why, size_t len, const char *fmt, ...)
{
    size_t n = strlen(why);
    if (n && n + 2 < len) {
        strcat(why, "; ");
        n += 2;
    }
    if (n >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + n, len - n, fmt, ap);
    va_end(ap);
}

static const char *devno_name(const struct blkset *s, const char *devno)
{
    for (int i = 0; i < s->n; i++)
        if (s->devno[i][0] && !strcmp(s->devno[i], devno))
            return s->name[i];
    return NULL;
}

/* The device named by root= (a /dev path, UUID=, PARTUUID= or LABEL=), or "" */
static void cmdline_root(const char *root, char *out, size_t len)
{
    char line[DM_LINE_MAX], *save = NULL;
    out[0] = '\0';
    if (rd(root, line, sizeof line, "/proc/cmdline") < 0)
        return;
    for (char *w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (strncmp(w, "root=", 5))
            continue;
        const char *v = w + 5;
        static const struct { const char *key, *dir; } by[] = {
            {"UUID=", "/dev/disk/by-uuid/"}, {"PARTUUID=", "/dev/disk/by-partuuid/"},
            {"LABEL=", "/dev/disk/by-label/"},
        };
        for (size_t i = 0; i < sizeof by / sizeof by[0]; i++)
            if (!strncmp(v, by[i].key, strlen(by[i].key))) {
                link_base(root, out, len, "%s%s", by[i].dir, v + strlen(by[i].key));
                return;
            }
        if (!strncmp(v, "/dev/", 5))
            snprintf(out, len, "%s", v + 5);
    }
}

/* Every process holding one of PATHS (NULL-terminated "/dev/..." names) open: "pid N (comm)". */
static void open_by(const char *root, const char *const *paths, char *why, size_t len)
{
    char p[DM_PATH_MAX];
    mkpath(p, root, "/proc");
    DIR *d = opendir(p);
    if (!d)
        return;
    struct dirent *e;
    pid_t self = getpid();
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || (!root[0] && pid == self))
            continue;
        char fp[DM_PATH_MAX];
        mkpath(fp, root, "/proc/%ld/fd", pid);
        DIR *fd = opendir(fp);
        if (!fd)
            continue;
        struct dirent *f;
        while ((f = readdir(fd))) {
            char lp[DM_PATH_MAX], t[DM_PATH_MAX];
            if (f->d_name[0] == '.')
                continue;
            mkpath(lp, root, "/proc/%ld/fd/%s", pid, f->d_name);
            ssize_t n = readlink(lp, t, sizeof t - 1);
            if (n < 0)
                continue;
            t[n] = '\0';
            for (const char *const *q = paths; *q; q++)
                if (!strcmp(t, *q)) {
                    char comm[DM_NAME_LEN] = "?";
                    rd(root, comm, sizeof comm, "/proc/%ld/comm", pid);
                    append(why, len, "%s open by pid %ld (%s)", t, pid, comm);
                }
        }
        closedir(fd);
    }
    closedir(d);
}

int dm_check_free(const char *root, const char *addr, char *why, size_t whylen)
{
    struct blkset s;
    char line[DM_LINE_MAX];
    if (!root)
        root = "";
    setmsg(why, whylen, "%s", "");
    if (!exists(root, "/sys/bus/pci/devices/%s", addr)) {
        setmsg(why, whylen, "no PCI function %s", addr);
        return -ENODEV;
    }
    collect_blk(root, addr, &s);
    if (s.overflow)
        append(why, whylen, "more than %d block devices: cannot check them all", DM_MAX_BLK);
    if (s.unnumbered[0])
        append(why, whylen, "cannot check /dev/%s (no device number in sysfs)", s.unnumbered);

    /* boot device: holds /, /boot or /boot/efi, or is named by root= */
    char rootdev[DM_NAME_LEN];
    cmdline_root(root, rootdev, sizeof rootdev);
    if (rootdev[0] && set_has(&s, rootdev))
        append(why, whylen, "boot device (root=/dev/%s on the kernel command line)", rootdev);

    char p[DM_PATH_MAX];
    mkpath(p, root, "/proc/self/mountinfo");
    FILE *f = fopen(p, "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char devno[DM_NAME_LEN], mnt[DM_LINE_MAX];
            if (sscanf(line, "%*s %*s %63s %*s %4095s", devno, mnt) != 2)
                continue;
            const char *name = devno_name(&s, devno);
            if (!name)
                continue;
            if (!strcmp(mnt, "/") || !strcmp(mnt, "/boot") || !strcmp(mnt, "/boot/efi"))
                append(why, whylen, "boot device (/dev/%s mounted on %s)", name, mnt);
            else
                append(why, whylen, "mounted (/dev/%s on %s)", name, mnt);
        }
        fclose(f);
    }
    mkpath(p, root, "/proc/swaps");
    f = fopen(p, "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char dev[DM_LINE_MAX];
            if (sscanf(line, "%4095s", dev) != 1 || strncmp(dev, "/dev/", 5))
                continue;
            if (set_has(&s, dev + 5))
                append(why, whylen, "swap (%s)", dev);
        }
        fclose(f);
    }
    /* holders (device-mapper, md): anything stacked on a namespace or partition */
    for (int i = 0; i < s.n; i++) {
        char hp[DM_PATH_MAX];
        mkpath(hp, root, "/sys/class/block/%s/holders", s.name[i]);
        DIR *d = opendir(hp);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.')
                append(why, whylen, "held by %s (stacked on /dev/%s)", e->d_name, s.name[i]);
        closedir(d);
    }
    /* open by a process: block devices, controller char devices, /dev/uioN, /dev/vfio/<group> */
    char store[2 * DM_MAX_BLK + 4][DM_NAME_LEN + 16];
    const char *paths[2 * DM_MAX_BLK + 5];
    int np = 0;
    for (int i = 0; i < s.n; i++) {
        snprintf(store[np], sizeof store[np], "/dev/%s", s.name[i]);
        paths[np] = store[np];
        np++;
    }
    for (int i = 0; i < s.nctrl; i++) {
        snprintf(store[np], sizeof store[np], "/dev/%s", s.ctrl[i]);
        paths[np] = store[np];
        np++;
    }
    mkpath(p, root, "/sys/bus/pci/devices/%s/uio", addr);
    DIR *d = opendir(p);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (!strncmp(e->d_name, "uio", 3) && np < 2 * DM_MAX_BLK + 3) {
                snprintf(store[np], sizeof store[np], "/dev/%.*s", DM_NAME_LEN - 1, e->d_name);
                paths[np] = store[np];
                np++;
            }
        closedir(d);
    }
    char drv[DM_NAME_LEN], grp[DM_NAME_LEN];
    link_base(root, drv, sizeof drv, "/sys/bus/pci/devices/%s/driver", addr);
    if (!strcmp(drv, DRV_VFIO) && link_base(root, grp, sizeof grp, "/sys/bus/pci/devices/%s/iommu_group", addr) == 0) {
        snprintf(store[np], sizeof store[np], "/dev/vfio/%s", grp);
        paths[np] = store[np];
        np++;
    }
    paths[np] = NULL;
    open_by(root, paths, why, whylen);
    return why && why[0] ? -EBUSY : 0;
}

/* Shared preamble of bind/unbind: a named, present NVMe function. */
static int named_nvme(const char *root, const char *in, char addr[DM_ADDR_LEN], char *err, size_t errlen)
{
    char cls[DM_NAME_LEN];
    if (dm_parse_addr(in, addr) < 0) {
        setmsg(err, errlen, "'%s' is not a PCI address (DDDD:BB:DD.F)", in ? in : "");
        return -EINVAL;
    }
    if (!exists(root, "/sys/bus/pci/devices/%s", addr)) {
        setmsg(err, errlen, "no PCI function %s", addr);
        return -ENODEV;
    }
    if (rd(root, cls, sizeof cls, "/sys/bus/pci/devices/%s/class", addr) < 0 ||
        strtoul(cls, NULL, 16) != PCI_CLASS_NVME) {
        setmsg(err, errlen, "%s is not an NVMe controller (class %s)", addr, cls);
        return -ENODEV;
    }
    return 0;
}

int dm_bind(const char *root, const char *in, const char *driver, char *err, size_t errlen)
{
    char addr[DM_ADDR_LEN], cur[DM_NAME_LEN], grp[DM_NAME_LEN], why[DM_REASON_MAX];
    int rc;
    if (!root)
        root = "";
    if (!driver || (strcmp(driver, DRV_UIO) && strcmp(driver, DRV_VFIO))) {
        setmsg(err, errlen, "driver must be %s or %s, not '%s'", DRV_UIO, DRV_VFIO, driver ? driver : "");
        return -EINVAL;
    }
    if ((rc = named_nvme(root, in, addr, err, errlen)) < 0)
        return rc;
    link_base(root, cur, sizeof cur, "/sys/bus/pci/devices/%s/driver", addr);
    if (!strcmp(cur, driver)) {
        setmsg(err, errlen, "%s already bound to %s", addr, driver);
        return 0;
    }
    if ((rc = dm_check_free(root, addr, why, sizeof why)) < 0) {
        setmsg(err, errlen, "refusing %s: %s", addr, why);
        return rc;
    }
    if (!strcmp(driver, DRV_VFIO) && link_base(root, grp, sizeof grp, "/sys/bus/pci/devices/%s/iommu_group", addr) < 0) {
        setmsg(err, errlen, "%s has no IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on) "
               "or use %s", addr, DRV_UIO);
        return -ENODEV;
    }
    if (!exists(root, "/sys/bus/pci/drivers/%s", driver)) {
        setmsg(err, errlen, "driver %s is not loaded (modprobe %s)", driver, driver);
        return -ENOENT;
    }
    if (cur[0] && (rc = wr(root, addr, "/sys/bus/pci/devices/%s/driver/unbind", addr)) < 0) {
        setmsg(err, errlen, "unbinding %s from %s: %s", addr, cur, strerror(-rc));
        return rc;
    }
    if ((rc = wr(root, driver, "/sys/bus/pci/devices/%s/driver_override", addr)) < 0 ||
        (rc = wr(root, addr, "/sys/bus/pci/drivers_probe")) < 0) {
        setmsg(err, errlen, "binding %s to %s: %s", addr, driver, strerror(-rc));
        return rc;
    }
    link_base(root, cur, sizeof cur, "/sys/bus/pci/devices/%s/driver", addr);
    if (strcmp(cur, driver)) {
        setmsg(err, errlen, "%s did not bind to %s (now '%s'; see dmesg)", addr, driver, cur);
        return -EIO;
    }
    setmsg(err, errlen, "%s bound to %s", addr, driver);
    return 0;
}

int dm_unbind(const char *root, const char *in, int reprobe, char *err, size_t errlen)
{
    char addr[DM_ADDR_LEN], cur[DM_NAME_LEN], why[DM_REASON_MAX];
    int rc;
    if (!root)
        root = "";
    if ((rc = named_nvme(root, in, addr, err, errlen)) < 0)
        return rc;
    link_base(root, cur, sizeof cur, "/sys/bus/pci/devices/%s/driver", addr);
    if (cur[0]) {
        if ((rc = dm_check_free(root, addr, why, sizeof why)) < 0) {
            setmsg(err, errlen, "refusing %s: %s", addr, why);
            return rc;
        }
        if ((rc = wr(root, addr, "/sys/bus/pci/devices/%s/driver/unbind", addr)) < 0) {
            setmsg(err, errlen, "unbinding %s from %s: %s", addr, cur, strerror(-rc));
            return rc;
        }
    }
    /* a newline clears driver_override so the kernel's own match applies again */
    if ((rc = wr(root, "\n", "/sys/bus/pci/devices/%s/driver_override", addr)) < 0) {
        setmsg(err, errlen, "clearing driver_override of %s: %s", addr, strerror(-rc));
        return rc;
    }
    if (reprobe && (rc = wr(root, addr, "/sys/bus/pci/drivers_probe")) < 0) {
        setmsg(err, errlen, "reprobing %s: %s", addr, strerror(-rc));
        return rc;
    }
    char now[DM_NAME_LEN];
    link_base(root, now, sizeof now, "/sys/bus/pci/devices/%s/driver", addr);
    setmsg(err, errlen, "%s released from %s; now %s", addr, cur[0] ? cur : "(none)", now[0] ? now : "unbound");
    return 0;
}

int dm_hugepages(const char *root, long n, long size_kb, long *total, long *free_pages, char *err, size_t errlen)
{
    char buf[DM_NAME_LEN];
    int rc;
    if (!root)
        root = "";
    if (!exists(root, "/sys/kernel/mm/hugepages/hugepages-%ldkB", size_kb)) {
        setmsg(err, errlen, "hugepage size %ld kB is not supported by this kernel", size_kb);
        return -EINVAL;
    }
    if (n >= 0) {
        snprintf(buf, sizeof buf, "%ld", n);
        if ((rc = wr(root, buf, "/sys/kernel/mm/hugepages/hugepages-%ldkB/nr_hugepages", size_kb)) < 0) {
            setmsg(err, errlen, "writing nr_hugepages: %s", strerror(-rc));
            return rc;
        }
    }
    if ((rc = rd(root, buf, sizeof buf, "/sys/kernel/mm/hugepages/hugepages-%ldkB/nr_hugepages", size_kb)) < 0)
        return rc;
    *total = strtol(buf, NULL, 10);
    if ((rc = rd(root, buf, sizeof buf, "/sys/kernel/mm/hugepages/hugepages-%ldkB/free_hugepages", size_kb)) < 0)
        return rc;
    *free_pages = strtol(buf, NULL, 10);
    if (n >= 0 && *total < n) {
        setmsg(err, errlen, "asked for %ld hugepages of %ld kB, the kernel reserved %ld (memory fragmented?)",
               n, size_kb, *total);
        return -ENOMEM;
    }
    setmsg(err, errlen, "%ld hugepages of %ld kB reserved, %ld free", *total, size_kb, *free_pages);
    return 0;
}

/* ---- command line ---- */

static void list_devices(const char *root)
{
    char p[DM_PATH_MAX];
    mkpath(p, root, "/sys/bus/pci/devices");
    DIR *d = opendir(p);
    if (!d) {
        printf("no PCI bus at %s\n", p);
        return;
    }
    struct dirent **ents;
    closedir(d);
    int n = scandir(p, &ents, NULL, alphasort);
    int found = 0;
    for (int i = 0; i < n; i++) {
        const char *a = ents[i]->d_name;
        char cls[DM_NAME_LEN], ven[DM_NAME_LEN] = "", dev[DM_NAME_LEN] = "", drv[DM_NAME_LEN], grp[DM_NAME_LEN];
        char numa[DM_NAME_LEN] = "-1", why[DM_REASON_MAX];
        if (a[0] == '.' || rd(root, cls, sizeof cls, "/sys/bus/pci/devices/%s/class", a) < 0 ||
            strtoul(cls, NULL, 16) != PCI_CLASS_NVME)
            continue;
        found++;
        rd(root, ven, sizeof ven, "/sys/bus/pci/devices/%s/vendor", a);
        rd(root, dev, sizeof dev, "/sys/bus/pci/devices/%s/device", a);
        rd(root, numa, sizeof numa, "/sys/bus/pci/devices/%s/numa_node", a);
        link_base(root, drv, sizeof drv, "/sys/bus/pci/devices/%s/driver", a);
        link_base(root, grp, sizeof grp, "/sys/bus/pci/devices/%s/iommu_group", a);
        struct blkset s;
        collect_blk(root, a, &s);
        char blk[DM_REASON_MAX] = "";
        for (int k = 0; k < s.n; k++)
            append(blk, sizeof blk, "%s", s.name[k]);
        for (char *c = blk; *c; c++)
            if (*c == ';')
                *c = ',';
        for (char *c = blk; *c; c++)   /* "a, b" -> "a,b" */
            if (*c == ' ')
                memmove(c, c + 1, strlen(c));
        int busy = dm_check_free(root, a, why, sizeof why) < 0;
        printf("%s %s:%s driver=%s iommu_group=%s numa=%s blk=%s state=%s%s%s\n", a, ven + (ven[1] == 'x' ? 2 : 0),
               dev + (dev[1] == 'x' ? 2 : 0), drv[0] ? drv : "-", grp[0] ? grp : "-", numa, blk[0] ? blk : "-",
               busy ? "busy" : "free", busy ? ": " : "", busy ? why : "");
    }
    for (int i = 0; i < n; i++)
        free(ents[i]);
    if (n >= 0)
        free(ents);
    if (!found)
        printf("no NVMe PCI functions\n");
}

static int usage(void)
{
    fprintf(stderr, "usage: devices | check ADDR | bind ADDR --driver {" DRV_UIO "," DRV_VFIO "} |"
                    " unbind ADDR [--no-probe] | hugepages [N] [--size 2M|1G]   (each takes --root DIR)\n");
    return 2;
}

int dm_main(int argc, char **argv)
{
    const char *root = "", *cmd = NULL, *addr = NULL, *driver = NULL, *count = NULL, *size = "2M";
    int reprobe = 1;
    char msg[DM_REASON_MAX + 128];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--root") && i + 1 < argc)
            root = argv[++i];
        else if (!strcmp(argv[i], "--driver") && i + 1 < argc)
            driver = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = argv[++i];
        else if (!strcmp(argv[i], "--no-probe"))
            reprobe = 0;
        else if (argv[i][0] == '-')
            return usage();
        else if (!cmd)
            cmd = argv[i];
        else if (!addr)
            addr = argv[i];
        else
            return usage();
    }
    if (!cmd)
        return usage();
    if (!strcmp(cmd, "devices")) {
        list_devices(root);
        return 0;
    }
    if (!strcmp(cmd, "hugepages")) {
        count = addr;
        char *end;
        long n = -1, kb;
        if (count) {
            n = strtol(count, &end, 10);
            if (*end || n < 0) {
                fprintf(stderr, "hugepages: '%s' is not a count\n", count);
                return 2;
            }
        }
        if (!strcmp(size, "2M"))
            kb = 2 * KB_PER_MB;
        else if (!strcmp(size, "1G"))
            kb = KB_PER_MB * KB_PER_MB;
        else {
            fprintf(stderr, "hugepages: size must be 2M or 1G, not '%s'\n", size);
            return 2;
        }
        long total = 0, freep = 0;
        int rc = dm_hugepages(root, n, kb, &total, &freep, msg, sizeof msg);
        printf("hugepages: %s\n", rc < 0 && msg[0] == '\0' ? strerror(-rc) : msg);
        return rc < 0 ? 1 : 0;
    }
    if (!addr)
        return usage();
    int rc;
    if (!strcmp(cmd, "check")) {
        char a[DM_ADDR_LEN];
        if (dm_parse_addr(addr, a) < 0) {
            fprintf(stderr, "check: '%s' is not a PCI address (DDDD:BB:DD.F)\n", addr);
            return 2;
        }
        rc = dm_check_free(root, a, msg, sizeof msg);
        printf("%s %s%s%s\n", a, rc < 0 ? "busy" : "free", rc < 0 ? ": " : "", msg);
        return rc < 0 ? 1 : 0;
    }
    if (!strcmp(cmd, "bind")) {
        if (!driver)
            return usage();
        rc = dm_bind(root, addr, driver, msg, sizeof msg);
    } else if (!strcmp(cmd, "unbind")) {
        rc = dm_unbind(root, addr, reprobe, msg, sizeof msg);
    } else {
        return usage();
    }
    printf("%s: %s\n", cmd, msg);
    return rc == -EINVAL ? 2 : rc < 0 ? 1 : 0;
}

#ifdef DM_STANDALONE
int main(int argc, char **argv) { return dm_main(argc, argv); }
#endif
