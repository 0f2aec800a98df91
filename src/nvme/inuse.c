/* SPDX-License-Identifier: BSD-3-Clause */
/* inuse.c — is an NVMe PCI function in use by the host? (see inuse.h) */
#include "nvme/inuse.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "nvme/errbuf.h"
#include "nvme/sysfs.h"

#define INUSE_LINE_MAX 4096 /* longest line read from a proc file */
#define INUSE_NAME_LEN 64   /* a block device name or "major:minor" */

struct blkset {
    int n;
    char name[NVME_INUSE_MAX_BLK][INUSE_NAME_LEN];  /* nvme0n1, nvme0n1p1, dm-0 ... */
    char devno[NVME_INUSE_MAX_BLK][INUSE_NAME_LEN]; /* "259:0" */
    char ctrl[NVME_INUSE_MAX_BLK][INUSE_NAME_LEN];  /* controller character devices: nvme0 ... (separate count) */
    int nctrl;
    char unnumbered[INUSE_NAME_LEN]; /* first device without a sysfs device number; "" if none */
    int overflow;                    /* more devices than the set holds (or a name too long) */
};

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
    if (s->n >= NVME_INUSE_MAX_BLK || strlen(name) >= INUSE_NAME_LEN) {
        s->overflow = 1;
        return;
    }
    memcpy(s->name[s->n], name, strlen(name) + 1);
    if (nvme_sysfs_read(root, s->devno[s->n], INUSE_NAME_LEN, "/sys/class/block/%s/dev", name) < 0) {
        s->devno[s->n][0] = '\0';
        if (!s->unnumbered[0])
            memcpy(s->unnumbered, name, strlen(name) + 1);
    }
    s->n++;
}

/* Namespaces of every controller under ADDR, their partitions, and whatever holds them (dm, md). */
static void collect_blk(const char *root, const char *addr, struct blkset *s)
{
    char p[NVME_SYSFS_PATH_MAX];
    memset(s, 0, sizeof *s);
    nvme_sysfs_path(p, root, "/sys/bus/pci/devices/%s/nvme", addr);
    DIR *d = opendir(p);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            unsigned c;
            char extra;
            if (sscanf(e->d_name, "nvme%u%c", &c, &extra) != 1 || s->nctrl >= NVME_INUSE_MAX_BLK)
                continue;
            snprintf(s->ctrl[s->nctrl++], INUSE_NAME_LEN, "%.*s", INUSE_NAME_LEN - 1, e->d_name);
            char cp[NVME_SYSFS_PATH_MAX];
            nvme_sysfs_path(cp, root, "/sys/bus/pci/devices/%s/nvme/%s", addr, e->d_name);
            DIR *cd = opendir(cp);
            if (!cd)
                continue;
            struct dirent *n;
            while ((n = readdir(cd))) {
                unsigned a, b, k;
                int used = 0;
                char name[INUSE_NAME_LEN];
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
        char bp[NVME_SYSFS_PATH_MAX];
        char name[INUSE_NAME_LEN];
        snprintf(name, sizeof name, "%s", s->name[i]);
        nvme_sysfs_path(bp, root, "/sys/class/block/%s", name);
        DIR *bd = opendir(bp);
        if (bd) {
            struct dirent *e;
            while ((e = readdir(bd)))
                if (e->d_name[0] != '.' && nvme_sysfs_exists(root, "/sys/class/block/%s/%s/partition", name, e->d_name))
                    set_add(root, s, e->d_name);
            closedir(bd);
        }
        nvme_sysfs_path(bp, root, "/sys/class/block/%s/holders", name);
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
    char line[INUSE_LINE_MAX], *save = NULL;
    out[0] = '\0';
    if (nvme_sysfs_read(root, line, sizeof line, "/proc/cmdline") < 0)
        return;
    for (char *w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (strncmp(w, "root=", 5))
            continue;
        const char *v = w + 5;
        static const struct {
            const char *key, *dir;
        } by[] = {
            {"UUID=", "/dev/disk/by-uuid/"},
            {"PARTUUID=", "/dev/disk/by-partuuid/"},
            {"LABEL=", "/dev/disk/by-label/"},
        };
        for (size_t i = 0; i < sizeof by / sizeof by[0]; i++)
            if (!strncmp(v, by[i].key, strlen(by[i].key))) {
                nvme_sysfs_link_base(root, out, len, "%s%s", by[i].dir, v + strlen(by[i].key));
                return;
            }
        if (!strncmp(v, "/dev/", 5))
            snprintf(out, len, "%s", v + 5);
    }
}

/* Every process holding one of PATHS (NULL-terminated "/dev/..." names) open: "pid N (comm)". */
static void open_by(const char *root, const char *const *paths, char *why, size_t len)
{
    char p[NVME_SYSFS_PATH_MAX];
    nvme_sysfs_path(p, root, "/proc");
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
        char fp[NVME_SYSFS_PATH_MAX];
        nvme_sysfs_path(fp, root, "/proc/%ld/fd", pid);
        DIR *fd = opendir(fp);
        if (!fd)
            continue;
        struct dirent *f;
        while ((f = readdir(fd))) {
            char lp[NVME_SYSFS_PATH_MAX], t[NVME_SYSFS_PATH_MAX];
            if (f->d_name[0] == '.')
                continue;
            nvme_sysfs_path(lp, root, "/proc/%ld/fd/%s", pid, f->d_name);
            ssize_t n = readlink(lp, t, sizeof t - 1);
            if (n < 0)
                continue;
            t[n] = '\0';
            for (const char *const *q = paths; *q; q++)
                if (!strcmp(t, *q)) {
                    char comm[INUSE_NAME_LEN] = "?";
                    nvme_sysfs_read(root, comm, sizeof comm, "/proc/%ld/comm", pid);
                    append(why, len, "%s open by pid %ld (%s)", t, pid, comm);
                }
        }
        closedir(fd);
    }
    closedir(d);
}

int nvme_pci_in_use(const char *root, const char *addr, char *why, size_t whylen)
{
    struct blkset s;
    char line[INUSE_LINE_MAX];
    if (!root)
        root = "";
    if (why && whylen)
        why[0] = '\0';
    if (!nvme_sysfs_exists(root, "/sys/bus/pci/devices/%s", addr)) {
        return nvme_errf(why, whylen, -ENODEV, "no PCI function %s", addr);
    }
    collect_blk(root, addr, &s);
    if (s.overflow)
        append(why, whylen, "more than %d block devices: cannot check them all", NVME_INUSE_MAX_BLK);
    if (s.unnumbered[0])
        append(why, whylen, "cannot check /dev/%s (no device number in sysfs)", s.unnumbered);

    /* boot device: holds /, /boot or /boot/efi, or is named by root= */
    char rootdev[INUSE_NAME_LEN];
    cmdline_root(root, rootdev, sizeof rootdev);
    if (rootdev[0] && set_has(&s, rootdev))
        append(why, whylen, "boot device (root=/dev/%s on the kernel command line)", rootdev);

    char p[NVME_SYSFS_PATH_MAX];
    nvme_sysfs_path(p, root, "/proc/self/mountinfo");
    FILE *f = fopen(p, "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char devno[INUSE_NAME_LEN], mnt[INUSE_LINE_MAX];
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
    nvme_sysfs_path(p, root, "/proc/swaps");
    f = fopen(p, "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char dev[INUSE_LINE_MAX];
            if (sscanf(line, "%4095s", dev) != 1 || strncmp(dev, "/dev/", 5))
                continue;
            if (set_has(&s, dev + 5))
                append(why, whylen, "swap (%s)", dev);
        }
        fclose(f);
    }
    /* holders (device-mapper, md): anything stacked on a namespace or partition */
    for (int i = 0; i < s.n; i++) {
        char hp[NVME_SYSFS_PATH_MAX];
        nvme_sysfs_path(hp, root, "/sys/class/block/%s/holders", s.name[i]);
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
    char store[2 * NVME_INUSE_MAX_BLK + 4][INUSE_NAME_LEN + 16];
    const char *paths[2 * NVME_INUSE_MAX_BLK + 5];
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
    nvme_sysfs_path(p, root, "/sys/bus/pci/devices/%s/uio", addr);
    DIR *d = opendir(p);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (!strncmp(e->d_name, "uio", 3) && np < 2 * NVME_INUSE_MAX_BLK + 3) {
                snprintf(store[np], sizeof store[np], "/dev/%.*s", INUSE_NAME_LEN - 1, e->d_name);
                paths[np] = store[np];
                np++;
            }
        closedir(d);
    }
    char drv[INUSE_NAME_LEN], grp[INUSE_NAME_LEN];
    nvme_sysfs_link_base(root, drv, sizeof drv, "/sys/bus/pci/devices/%s/driver", addr);
    if (!strcmp(drv, "vfio-pci") &&
        nvme_sysfs_link_base(root, grp, sizeof grp, "/sys/bus/pci/devices/%s/iommu_group", addr) == 0) {
        snprintf(store[np], sizeof store[np], "/dev/vfio/%s", grp);
        paths[np] = store[np];
        np++;
    }
    paths[np] = NULL;
    open_by(root, paths, why, whylen);
    return why && why[0] ? -EBUSY : 0;
}

int nvme_pci_block_devices(const char *root, const char *addr, char *list, size_t len)
{
    struct blkset *s = malloc(sizeof(*s));
    if (!s)
        return -ENOMEM;
    collect_blk(root ? root : "", addr, s);
    size_t off = 0;
    if (len)
        list[0] = '\0';
    for (int i = 0; i < s->n && off < len; i++)
        off += (size_t)snprintf(list + off, len - off, "%s%s", off ? "," : "", s->name[i]);
    int n = s->n;
    free(s);
    return n;
}
