/* SPDX-License-Identifier: BSD-3-Clause */
/* pci.c — the pci:// backend: sysfs discovery and safety checks, BAR0 mapping through uio (resource0) or
 * VFIO (container, group, device, region info), bus mastering. See pci.h for the rules. */
#include "nvme/pci.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvme/ctrl_internal.h"
#include "nvme/errbuf.h"
#include "nvme/inuse.h"

#define SYSFS_ROOT      "/sys"
#define PROC_MOUNTS     "/proc/self/mounts"
#define VFIO_CONTAINER  "/dev/vfio/vfio"
#define MAX_FUNCS       NVME_URI_MAX_ITEMS
#define MAX_BLOCKDEVS   64u
#define NAME_LEN        64u
#define DM_NAME_MAX     128u /* device-mapper names with their NUL (DM_NAME_LEN in linux/dm-ioctl.h) */
#define LINE_LEN        4096u
#define PCI_DOMAIN_MAX  0xffffu
#define PCI_BUS_MAX     0xffu
#define PCI_DEV_MAX     0x1fu
#define PCI_FN_MAX      0x7u
#define PCI_CLASS_SHIFT 0 /* sysfs 'class' holds the 24-bit class code */
#define PCI_CMD_SIZE    2u

int nvme_pci_addr_canon(const char *s, char *out)
{
    unsigned dom = 0, bus, dev, fn;
    char tail;
    if (!s)
        return -EINVAL;
    if (sscanf(s, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) {
        dom = 0;
        if (sscanf(s, "%x:%x.%x%c", &bus, &dev, &fn, &tail) != 3)
            return -EINVAL;
    }
    for (const char *p = s; *p; p++)
        if (!strchr("0123456789abcdefABCDEF:.", *p))
            return -EINVAL;
    if (dom > PCI_DOMAIN_MAX || bus > PCI_BUS_MAX || dev > PCI_DEV_MAX || fn > PCI_FN_MAX)
        return -EINVAL;
    snprintf(out, NVME_PCI_ADDR_LEN, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    int rc = fgets(buf, (int)len, f) ? 0 : -EIO;
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return rc;
}

static const char *driver_names[] = {[NVME_PCI_UIO] = "uio_pci_generic", [NVME_PCI_VFIO] = "vfio-pci"};

/* Basename of the driver bound to the function, "" when none. */
static int bound_driver(const char *sysfs, const char *addr, char *out, size_t len)
{
    char path[PATH_MAX], target[PATH_MAX];
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/driver", sysfs, addr);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n < 0) {
        out[0] = '\0';
        return errno == ENOENT ? 0 : -errno;
    }
    target[n] = '\0';
    const char *b = strrchr(target, '/');
    snprintf(out, len, "%.*s", (int)(len - 1), b ? b + 1 : target);
    return 0;
}

static bool allow_listed(const char *addr, const char *allow)
{
    if (!allow)
        return true;
    if (strcmp(allow, "*") == 0)
        return true;
    unsigned n = nvme_uri_list_count(allow);
    for (unsigned i = 0; i < n; i++) {
        char item[LINE_LEN / 16], canon[NVME_PCI_ADDR_LEN];
        if (nvme_uri_list_item(allow, i, item, sizeof(item)) == 0 && nvme_pci_addr_canon(item, canon) == 0 &&
            strcmp(canon, addr) == 0)
            return true;
    }
    return false;
}

int nvme_pci_check(const char *addr, enum nvme_pci_driver drv, const char *root, const char *allow, char *err,
                   size_t errlen)
{
    char sysfs[PATH_MAX / 2];
    snprintf(sysfs, sizeof(sysfs), "%s%s", root, SYSFS_ROOT);
    char canon[NVME_PCI_ADDR_LEN];
    if (nvme_pci_addr_canon(addr, canon) != 0)
        return nvme_errf(err, errlen, -EINVAL, "'%s' is not a PCI address (expected DDDD:BB:DD.F)", addr);
    if (!allow_listed(canon, allow))
        return nvme_errf(err, errlen, -EPERM, "%s is not on the allow-list %s='%s'", canon, NVME_PCI_ALLOW_ENV, allow);
    char path[PATH_MAX], line[NAME_LEN];
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/class", sysfs, canon);
    if (read_line(path, line, sizeof(line)) != 0)
        return nvme_errf(err, errlen, -ENODEV, "no PCI function %s", canon);
    unsigned long cls = strtoul(line, NULL, 0) >> PCI_CLASS_SHIFT;
    if (cls != NVME_PCI_CLASS_NVME)
        return nvme_errf(err, errlen, -ENODEV, "%s is not an NVMe controller (class 0x%06lx, want 0x%06x)", canon, cls,
                         NVME_PCI_CLASS_NVME);
    /* in use by the host: the one check (inuse.h) that `nvmelab devices` and the guest tool use too */
    char why[LINE_LEN / 4];
    int rc = nvme_pci_in_use(root, canon, why, sizeof(why));
    if (rc == -EBUSY)
        return nvme_errf(err, errlen, -EBUSY, "refusing %s: %s", canon, why);
    if (rc < 0)
        return nvme_errf(err, errlen, rc, "%s: %s", canon, why[0] ? why : strerror(-rc));
    char bound[NAME_LEN];
    rc = bound_driver(sysfs, canon, bound, sizeof(bound));
    if (rc)
        return nvme_errf(err, errlen, rc, "%s: cannot read its driver binding: %s", canon, strerror(-rc));
    if (strcmp(bound, "nvme") == 0) {
        char list[LINE_LEN / 4] = "";
        int n = nvme_pci_block_devices(root, canon, list, sizeof(list));
        rc =
            nvme_errf(err, errlen, -EBUSY,
                      "refusing %s: it is bound to the kernel nvme driver (block devices: %s); bind it explicitly with "
                      "`nvmelab bind %s --driver %s` first",
                      canon, n > 0 ? list : "none", canon, driver_names[drv]);
    } else if (!bound[0]) {
        rc =
            nvme_errf(err, errlen, -ENODEV, "%s is not bound to any driver; bind it with `nvmelab bind %s --driver %s`",
                      canon, canon, driver_names[drv]);
    } else if (strcmp(bound, driver_names[drv]) != 0) {
        rc = nvme_errf(err, errlen, -EPERM, "%s is bound to %s, not %s", canon, bound, driver_names[drv]);
    }
    return rc;
}

/* ------------------------------------------------------------------------------------------------ */
/* Opening functions                                                                                */
/* ------------------------------------------------------------------------------------------------ */
struct pci_func {
    char addr[NVME_PCI_ADDR_LEN];
    struct nvme_bar bar;
    void *map;
    size_t map_len;
    int cfg_fd; /* uio: sysfs config; vfio: device fd (config region at cfg_off) */
    off_t cfg_off;
    int dev_fd; /* vfio device fd, -1 for uio */
    uint16_t cmd_saved;
    bool cmd_valid;
};

struct vfio_group_ref {
    int num;
    int fd;
};

struct nvme_pci {
    enum nvme_pci_driver drv;
    unsigned n;
    struct pci_func f[MAX_FUNCS];
    int container;
    bool iommu_set;
    unsigned ngroups;
    struct vfio_group_ref groups[MAX_FUNCS];
};

static int cfg_rw(struct pci_func *f, bool write, uint16_t *v, off_t reg)
{
    ssize_t n = write ? pwrite(f->cfg_fd, v, PCI_CMD_SIZE, f->cfg_off + reg)
                      : pread(f->cfg_fd, v, PCI_CMD_SIZE, f->cfg_off + reg);
    return n == (ssize_t)PCI_CMD_SIZE ? 0 : -EIO;
}

/* Memory space + bus master on, INTx off (we poll). The old value is restored on close. */
static int enable_bus_master(struct pci_func *f)
{
    uint16_t cmd;
    if (cfg_rw(f, false, &cmd, PCI_COMMAND) != 0)
        return -EIO;
    f->cmd_saved = cmd;
    f->cmd_valid = true;
    cmd |= PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE;
    return cfg_rw(f, true, &cmd, PCI_COMMAND);
}

static int open_uio(struct pci_func *f, char *err, size_t errlen)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), SYSFS_ROOT "/bus/pci/devices/%s/config", f->addr);
    f->cfg_fd = open(path, O_RDWR | O_CLOEXEC);
    if (f->cfg_fd < 0)
        return nvme_errf(err, errlen, -errno, "%s: cannot open config space: %s", f->addr, strerror(errno));
    snprintf(path, sizeof(path), SYSFS_ROOT "/bus/pci/devices/%s/resource0", f->addr);
    int fd = open(path, O_RDWR | O_SYNC | O_CLOEXEC);
    if (fd < 0)
        return nvme_errf(err, errlen, -errno, "%s: cannot open BAR0 (%s): %s", f->addr, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)NVME_BAR0_MIN_SIZE) {
        close(fd);
        return nvme_errf(err, errlen, -ENODEV, "%s: BAR0 is missing or too small", f->addr);
    }
    f->map_len = (size_t)st.st_size;
    f->map = mmap(NULL, f->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return nvme_errf(err, errlen, -errno, "%s: mmap of BAR0 failed: %s", f->addr, strerror(errno));
    }
    int rc = enable_bus_master(f);
    if (rc)
        return nvme_errf(err, errlen, rc, "%s: cannot enable bus mastering", f->addr);
    return 0;
}

static int vfio_group_fd(struct nvme_pci *p, const char *addr, char *err, size_t errlen)
{
    char path[PATH_MAX], target[PATH_MAX];
    snprintf(path, sizeof(path), SYSFS_ROOT "/bus/pci/devices/%s/iommu_group", addr);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n < 0)
        return nvme_errf(err, errlen, -ENODEV, "%s: no IOMMU group (is the IOMMU enabled, e.g. intel_iommu=on?)", addr);
    target[n] = '\0';
    const char *b = strrchr(target, '/');
    int num = atoi(b ? b + 1 : target);
    for (unsigned i = 0; i < p->ngroups; i++)
        if (p->groups[i].num == num)
            return p->groups[i].fd;
    snprintf(path, sizeof(path), "/dev/vfio/%d", num);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return nvme_errf(err, errlen, -errno, "%s: cannot open %s: %s", addr, path, strerror(errno));
    struct vfio_group_status st = {.argsz = sizeof(st)};
    if (ioctl(fd, VFIO_GROUP_GET_STATUS, &st) != 0 || !(st.flags & VFIO_GROUP_FLAGS_VIABLE)) {
        close(fd);
        return nvme_errf(err, errlen, -EBUSY,
                         "%s: IOMMU group %d is not viable (bind every function in it to vfio-pci)", addr, num);
    }
    if (ioctl(fd, VFIO_GROUP_SET_CONTAINER, &p->container) != 0) {
        int e = errno;
        close(fd);
        return nvme_errf(err, errlen, -e, "%s: attaching group %d to the container failed: %s", addr, num, strerror(e));
    }
    if (!p->iommu_set) {
        if (ioctl(p->container, VFIO_SET_IOMMU, VFIO_TYPE1_IOMMU) != 0) {
            int e = errno;
            close(fd);
            return nvme_errf(err, errlen, -e, "%s: setting the type1 IOMMU failed: %s", addr, strerror(e));
        }
        p->iommu_set = true;
    }
    p->groups[p->ngroups].num = num;
    p->groups[p->ngroups].fd = fd;
    p->ngroups++;
    return fd;
}

static int open_vfio(struct nvme_pci *p, struct pci_func *f, char *err, size_t errlen)
{
    int gfd = vfio_group_fd(p, f->addr, err, errlen);
    if (gfd < 0)
        return gfd;
    f->dev_fd = ioctl(gfd, VFIO_GROUP_GET_DEVICE_FD, f->addr);
    if (f->dev_fd < 0)
        return nvme_errf(err, errlen, -errno, "%s: VFIO_GROUP_GET_DEVICE_FD failed: %s", f->addr, strerror(errno));
    struct vfio_region_info bar = {.argsz = sizeof(bar), .index = VFIO_PCI_BAR0_REGION_INDEX};
    if (ioctl(f->dev_fd, VFIO_DEVICE_GET_REGION_INFO, &bar) != 0 || !(bar.flags & VFIO_REGION_INFO_FLAG_MMAP) ||
        bar.size < NVME_BAR0_MIN_SIZE)
        return nvme_errf(err, errlen, -ENODEV, "%s: BAR0 region is missing, too small or not mappable", f->addr);
    f->map_len = (size_t)bar.size;
    f->map = mmap(NULL, f->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, f->dev_fd, (off_t)bar.offset);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return nvme_errf(err, errlen, -errno, "%s: mmap of BAR0 failed: %s", f->addr, strerror(errno));
    }
    struct vfio_region_info cfg = {.argsz = sizeof(cfg), .index = VFIO_PCI_CONFIG_REGION_INDEX};
    if (ioctl(f->dev_fd, VFIO_DEVICE_GET_REGION_INFO, &cfg) != 0)
        return nvme_errf(err, errlen, -ENODEV, "%s: no config region", f->addr);
    f->cfg_fd = f->dev_fd;
    f->cfg_off = (off_t)cfg.offset;
    int rc = enable_bus_master(f);
    if (rc)
        return nvme_errf(err, errlen, rc, "%s: cannot enable bus mastering", f->addr);
    return 0;
}

int nvme_pci_open(const struct nvme_uri *u, struct nvme_pci **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"driver", NULL};
    *out = NULL;
    int rc = nvme_uri_check_keys(u, keys, err, errlen);
    if (rc)
        return rc;
    if (u->nitems == 0)
        return nvme_errf(err, errlen, -EINVAL, "pci:// names no function (e.g. pci://0000:4a:00.0)");
    if (u->path[0])
        return nvme_errf(err, errlen, -EINVAL, "pci:// takes no path ('%s')", u->path);
    struct nvme_pci *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->container = -1;
    for (unsigned i = 0; i < MAX_FUNCS; i++) {
        p->f[i].cfg_fd = -1;
        p->f[i].dev_fd = -1;
    }
    const char *drv = nvme_uri_get(u, "driver");
    if (!drv || strcmp(drv, "vfio-pci") == 0 || strcmp(drv, "vfio") == 0) {
        p->drv = NVME_PCI_VFIO;
    } else if (strcmp(drv, "uio_pci_generic") == 0 || strcmp(drv, "uio") == 0) {
        p->drv = NVME_PCI_UIO;
    } else {
        free(p);
        return nvme_errf(err, errlen, -EINVAL, "parameter 'driver': bad value '%s' (uio_pci_generic or vfio-pci)", drv);
    }
    const char *allow = getenv(NVME_PCI_ALLOW_ENV);
    for (unsigned i = 0; i < u->nitems; i++) {
        struct pci_func *f = &p->f[i];
        if (nvme_pci_addr_canon(u->items[i], f->addr) != 0) {
            rc = nvme_errf(err, errlen, -EINVAL, "'%s' is not a PCI address (expected DDDD:BB:DD.F)", u->items[i]);
            goto fail;
        }
        for (unsigned k = 0; k < i; k++)
            if (strcmp(p->f[k].addr, f->addr) == 0) {
                rc = nvme_errf(err, errlen, -EINVAL, "%s is named twice", f->addr);
                goto fail;
            }
        rc = nvme_pci_check(f->addr, p->drv, "", allow, err, errlen);
        if (rc)
            goto fail;
    }
    if (p->drv == NVME_PCI_VFIO) {
        p->container = open(VFIO_CONTAINER, O_RDWR | O_CLOEXEC);
        if (p->container < 0) {
            rc = nvme_errf(err, errlen, -errno, "cannot open %s: %s (is vfio-pci loaded?)", VFIO_CONTAINER,
                           strerror(errno));
            goto fail;
        }
        if (ioctl(p->container, VFIO_GET_API_VERSION) != VFIO_API_VERSION ||
            !ioctl(p->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1_IOMMU)) {
            rc = nvme_errf(err, errlen, -ENOTSUP, "VFIO API version or type1 IOMMU not supported");
            goto fail;
        }
    }
    for (unsigned i = 0; i < u->nitems; i++) {
        struct pci_func *f = &p->f[i];
        p->n = i + 1;
        rc = p->drv == NVME_PCI_UIO ? open_uio(f, err, errlen) : open_vfio(p, f, err, errlen);
        if (rc)
            goto fail;
        f->bar.base = f->map;
        f->bar.size = f->map_len;
        f->bar.ops = NULL;
        f->bar.ctx = NULL;
    }
    *out = p;
    return 0;
fail:
    nvme_pci_close(p);
    return rc;
}

void nvme_pci_close(void *arg)
{
    struct nvme_pci *p = arg;
    if (!p)
        return;
    for (unsigned i = p->n; i-- > 0;) {
        struct pci_func *f = &p->f[i];
        if (f->cmd_valid)
            (void)cfg_rw(f, true, &f->cmd_saved, PCI_COMMAND);
        if (f->map)
            munmap(f->map, f->map_len);
        if (f->dev_fd >= 0)
            close(f->dev_fd);
        else if (f->cfg_fd >= 0)
            close(f->cfg_fd);
    }
    for (unsigned i = p->ngroups; i-- > 0;) {
        ioctl(p->groups[i].fd, VFIO_GROUP_UNSET_CONTAINER);
        close(p->groups[i].fd);
    }
    if (p->container >= 0)
        close(p->container);
    free(p);
}

unsigned nvme_pci_count(const struct nvme_pci *p)
{
    return p->n;
}

const struct nvme_bar *nvme_pci_bar(const struct nvme_pci *p, unsigned i)
{
    return i < p->n ? &p->f[i].bar : NULL;
}

enum nvme_dma_kind nvme_pci_dma_kind(const struct nvme_pci *p)
{
    return p->drv == NVME_PCI_VFIO ? NVME_DMA_VFIO : NVME_DMA_PAGEMAP;
}

int nvme_pci_vfio_container(const struct nvme_pci *p)
{
    return p->drv == NVME_PCI_VFIO ? p->container : -1;
}
