/* SPDX-License-Identifier: BSD-3-Clause */
/* devmgmt.c — NVMe PCI function management over sysfs (see devmgmt.h); the in-use check is the driver's
 * (nvme/inuse.h), the one nvmelab/devices.py also calls. */
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

#include "nvme/inuse.h"
#include "nvme/sysfs.h"

#define DM_PATH_MAX    NVME_SYSFS_PATH_MAX
#define DM_NAME_LEN    64        /* a block device name or "major:minor" */
#define DM_REASON_MAX  1024      /* the reasons a function is busy, joined */
#define PCI_CLASS_NVME 0x010802u /* mass storage / non-volatile memory / NVM Express */
#define KB_PER_MB      1024L
#define DRV_UIO        "uio_pci_generic"
#define DRV_VFIO       "vfio-pci"

static void setmsg(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
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

/* Shared preamble of bind/unbind: a named, present NVMe function. */
static int named_nvme(const char *root, const char *in, char addr[DM_ADDR_LEN], char *err, size_t errlen)
{
    char cls[DM_NAME_LEN];
    if (dm_parse_addr(in, addr) < 0) {
        setmsg(err, errlen, "'%s' is not a PCI address (DDDD:BB:DD.F)", in ? in : "");
        return -EINVAL;
    }
    if (!nvme_sysfs_exists(root, "/sys/bus/pci/devices/%s", addr)) {
        setmsg(err, errlen, "no PCI function %s", addr);
        return -ENODEV;
    }
    if (nvme_sysfs_read(root, cls, sizeof cls, "/sys/bus/pci/devices/%s/class", addr) < 0 ||
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
    nvme_sysfs_link_base(root, cur, sizeof cur, "/sys/bus/pci/devices/%s/driver", addr);
    if (!strcmp(cur, driver)) {
        setmsg(err, errlen, "%s already bound to %s", addr, driver);
        return 0;
    }
    if ((rc = nvme_pci_in_use(root, addr, why, sizeof why)) < 0) {
        setmsg(err, errlen, "refusing %s: %s", addr, why);
        return rc;
    }
    if (!strcmp(driver, DRV_VFIO) &&
        nvme_sysfs_link_base(root, grp, sizeof grp, "/sys/bus/pci/devices/%s/iommu_group", addr) < 0) {
        setmsg(err, errlen,
               "%s has no IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on) "
               "or use %s",
               addr, DRV_UIO);
        return -ENODEV;
    }
    if (!nvme_sysfs_exists(root, "/sys/bus/pci/drivers/%s", driver)) {
        setmsg(err, errlen, "driver %s is not loaded (modprobe %s)", driver, driver);
        return -ENOENT;
    }
    if (cur[0] && (rc = nvme_sysfs_write(root, addr, "/sys/bus/pci/devices/%s/driver/unbind", addr)) < 0) {
        setmsg(err, errlen, "unbinding %s from %s: %s", addr, cur, strerror(-rc));
        return rc;
    }
    if ((rc = nvme_sysfs_write(root, driver, "/sys/bus/pci/devices/%s/driver_override", addr)) < 0 ||
        (rc = nvme_sysfs_write(root, addr, "/sys/bus/pci/drivers_probe")) < 0) {
        setmsg(err, errlen, "binding %s to %s: %s", addr, driver, strerror(-rc));
        return rc;
    }
    nvme_sysfs_link_base(root, cur, sizeof cur, "/sys/bus/pci/devices/%s/driver", addr);
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
    nvme_sysfs_link_base(root, cur, sizeof cur, "/sys/bus/pci/devices/%s/driver", addr);
    if (cur[0]) {
        if ((rc = nvme_pci_in_use(root, addr, why, sizeof why)) < 0) {
            setmsg(err, errlen, "refusing %s: %s", addr, why);
            return rc;
        }
        if ((rc = nvme_sysfs_write(root, addr, "/sys/bus/pci/devices/%s/driver/unbind", addr)) < 0) {
            setmsg(err, errlen, "unbinding %s from %s: %s", addr, cur, strerror(-rc));
            return rc;
        }
    }
    /* a newline clears driver_override so the kernel's own match applies again */
    if ((rc = nvme_sysfs_write(root, "\n", "/sys/bus/pci/devices/%s/driver_override", addr)) < 0) {
        setmsg(err, errlen, "clearing driver_override of %s: %s", addr, strerror(-rc));
        return rc;
    }
    if (reprobe && (rc = nvme_sysfs_write(root, addr, "/sys/bus/pci/drivers_probe")) < 0) {
        setmsg(err, errlen, "reprobing %s: %s", addr, strerror(-rc));
        return rc;
    }
    char now[DM_NAME_LEN];
    nvme_sysfs_link_base(root, now, sizeof now, "/sys/bus/pci/devices/%s/driver", addr);
    setmsg(err, errlen, "%s released from %s; now %s", addr, cur[0] ? cur : "(none)", now[0] ? now : "unbound");
    return 0;
}

int dm_hugepages(const char *root, long n, long size_kb, long *total, long *free_pages, char *err, size_t errlen)
{
    char buf[DM_NAME_LEN];
    int rc;
    if (!root)
        root = "";
    if (!nvme_sysfs_exists(root, "/sys/kernel/mm/hugepages/hugepages-%ldkB", size_kb)) {
        setmsg(err, errlen, "hugepage size %ld kB is not supported by this kernel", size_kb);
        return -EINVAL;
    }
    if (n >= 0) {
        snprintf(buf, sizeof buf, "%ld", n);
        if ((rc = nvme_sysfs_write(root, buf, "/sys/kernel/mm/hugepages/hugepages-%ldkB/nr_hugepages", size_kb)) < 0) {
            setmsg(err, errlen, "writing nr_hugepages: %s", strerror(-rc));
            return rc;
        }
    }
    if ((rc = nvme_sysfs_read(root, buf, sizeof buf, "/sys/kernel/mm/hugepages/hugepages-%ldkB/nr_hugepages",
                              size_kb)) < 0)
        return rc;
    *total = strtol(buf, NULL, 10);
    if ((rc = nvme_sysfs_read(root, buf, sizeof buf, "/sys/kernel/mm/hugepages/hugepages-%ldkB/free_hugepages",
                              size_kb)) < 0)
        return rc;
    *free_pages = strtol(buf, NULL, 10);
    if (n >= 0 && *total < n) {
        setmsg(err, errlen, "asked for %ld hugepages of %ld kB, the kernel reserved %ld (memory fragmented?)", n,
               size_kb, *total);
        return -ENOMEM;
    }
    setmsg(err, errlen, "%ld hugepages of %ld kB reserved, %ld free", *total, size_kb, *free_pages);
    return 0;
}

/* ---- command line ---- */

static void list_devices(const char *root)
{
    char p[DM_PATH_MAX];
    nvme_sysfs_path(p, root, "/sys/bus/pci/devices");
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
        if (a[0] == '.' || nvme_sysfs_read(root, cls, sizeof cls, "/sys/bus/pci/devices/%s/class", a) < 0 ||
            strtoul(cls, NULL, 16) != PCI_CLASS_NVME)
            continue;
        found++;
        nvme_sysfs_read(root, ven, sizeof ven, "/sys/bus/pci/devices/%s/vendor", a);
        nvme_sysfs_read(root, dev, sizeof dev, "/sys/bus/pci/devices/%s/device", a);
        nvme_sysfs_read(root, numa, sizeof numa, "/sys/bus/pci/devices/%s/numa_node", a);
        nvme_sysfs_link_base(root, drv, sizeof drv, "/sys/bus/pci/devices/%s/driver", a);
        nvme_sysfs_link_base(root, grp, sizeof grp, "/sys/bus/pci/devices/%s/iommu_group", a);
        char blk[DM_REASON_MAX] = "";
        nvme_pci_block_devices(root, a, blk, sizeof blk);
        int busy = nvme_pci_in_use(root, a, why, sizeof why) < 0;
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
        rc = nvme_pci_in_use(root, a, msg, sizeof msg);
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
int main(int argc, char **argv)
{
    return dm_main(argc, argv);
}
#endif
