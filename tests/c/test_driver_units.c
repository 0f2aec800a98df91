/* SPDX-License-Identifier: BSD-3-Clause */
/* test_driver_units.c — unit tests of the driver's pieces that need no controller: register field
 * accessors and doorbell offsets, status names, the URI grammar, PCI address parsing and the pci://
 * safety checks on a fake sysfs tree (allow-list, class, binding, mounted and root-filesystem refusal). */
#include <sys/stat.h>
#include <unistd.h>

#include "nvme/ctrl_internal.h"
#include "nvme/inuse.h"
#include "nvme/pci.h"
#include "nvme/qpair.h"
#include "nvme/uri.h"
#include "test_driver.h"

static void test_registers(void)
{
    uint64_t cap = NVME_CAP_MQES(1023) | NVME_CAP_CQR | NVME_CAP_TO(30) | NVME_CAP_DSTRD(2) | NVME_CAP_CSS(1) |
                   NVME_CAP_MPSMIN(0) | NVME_CAP_MPSMAX(4);
    T_EQ(nvme_cap_mqes(cap), 1023);
    T_EQ(nvme_cap_cqr(cap), 1);
    T_EQ(nvme_cap_to(cap), 30);
    T_EQ(nvme_cap_dstrd(cap), 2);
    T_EQ(nvme_cap_css(cap), 1);
    T_EQ(nvme_cap_mpsmax(cap), 4);
    /* doorbells: SQ0 0x1000, CQ0 0x1000 + stride, SQ1 0x1000 + 2 stride; stride = 4 << DSTRD */
    T_EQ(nvme_db_sq_off(0, 0), 0x1000);
    T_EQ(nvme_db_cq_off(0, 0), 0x1004);
    T_EQ(nvme_db_sq_off(1, 0), 0x1008);
    T_EQ(nvme_db_cq_off(3, 0), 0x101c);
    T_EQ(nvme_db_sq_off(1, 2), 0x1000 + 2 * 16);
    T_EQ(nvme_db_cq_off(1, 2), 0x1000 + 3 * 16);
    T_EQ(NVME_AQA(32, 16), (31u | (15u << 16)));
    uint16_t st = NVME_CQE_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_QUEUE_SIZE, true, 1);
    T_EQ(nvme_cqe_phase(st), 1);
    T_EQ(nvme_cqe_sct(st), NVME_SCT_CMD_SPECIFIC);
    T_EQ(nvme_cqe_sc(st), NVME_SC_QUEUE_SIZE);
    T_EQ(nvme_cqe_dnr(st), 1);
    T_EQ(NVME_NUM_QUEUES(8, 4), (7u | (3u << 16)));
    T_EQ(nvme_num_queues_nsq(7u | (3u << 16)), 8);
    T_EQ(nvme_num_queues_ncq(7u | (3u << 16)), 4);
    T_EQ(NVME_CREATE_Q_CDW10(5, 64), (5u | (63u << 16)));
    /* layouts at run time too (the static_asserts already hold at compile time) */
    T_EQ(sizeof(struct nvme_sqe), 64);
    T_EQ(sizeof(struct nvme_cqe), 16);
    T_EQ(sizeof(struct nvme_id_ctrl), 4096);
    T_EQ(sizeof(struct nvme_id_ns), 4096);
    struct nvme_id_ns ns;
    memset(&ns, 0, sizeof(ns));
    ns.flbas = 1;
    ns.lbaf[1].lbads = 12;
    T_EQ(nvme_id_ns_lbads(&ns), 12);
}

static void test_status_names(void)
{
    struct {
        uint8_t sct, sc;
        const char *name;
    } cases[] = {
        {0, 0x00, "Successful Completion"},    {0, 0x01, "Invalid Command Opcode"},
        {0, 0x02, "Invalid Field in Command"}, {0, 0x03, "Command ID Conflict"},
        {0, 0x04, "Data Transfer Error"},      {0, 0x06, "Internal Error"},
        {0, 0x07, "Command Abort Requested"},  {0, 0x0b, "Invalid Namespace or Format"},
        {0, 0x0c, "Command Sequence Error"},   {0, 0x13, "PRP Offset Invalid"},
        {0, 0x80, "LBA Out of Range"},         {0, 0x81, "Capacity Exceeded"},
        {0, 0x82, "Namespace Not Ready"},      {1, 0x00, "Completion Queue Invalid"},
        {1, 0x01, "Invalid Queue Identifier"}, {1, 0x02, "Invalid Queue Size"},
        {1, 0x08, "Invalid Interrupt Vector"}, {1, 0x09, "Invalid Log Page"},
        {1, 0x0a, "Invalid Format"},           {1, 0x0c, "Invalid Queue Deletion"},
        {2, 0x81, "Unrecovered Read Error"},   {2, 0x85, "Compare Failure"},
        {3, 0x71, "Command Aborted By Host"},  {7, 0x42, "Vendor Specific Status"},
        {0, 0x7f, "Unknown Status"},           {5, 0x00, "Unknown Status"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        T_STREQ(nvme_status_name(cases[i].sct, cases[i].sc), cases[i].name);
    T_STREQ(nvme_opc_name(true, NVME_ADM_CREATE_CQ), "Create I/O Completion Queue");
    T_STREQ(nvme_opc_name(false, NVME_CMD_DSM), "Dataset Management");
    char buf[128];
    struct nvme_cpl cpl = {.sct = 0, .sc = 0x80, .dnr = true};
    T_STREQ(nvme_cpl_str(&cpl, buf, sizeof(buf)), "LBA Out of Range (sct 0x0 sc 0x80, dnr)");
    cpl = (struct nvme_cpl){.err = -ETIMEDOUT};
    T_STREQ(nvme_cpl_str(&cpl, buf, sizeof(buf)), "timed out");
    T_CHECK(!nvme_cpl_ok(&cpl));
}

static void test_uri_good(void)
{
    struct nvme_uri *u;
    char err[NVME_ERRLEN];
    T_EQ(nvme_uri_parse("EMU://?ndev=4&nsze=1GiB&lbads=512,4096&data", &u, err, sizeof(err)), 0);
    T_STREQ(u->scheme, "emu");
    T_STREQ(u->authority, "");
    T_EQ(u->nitems, 0);
    T_STREQ(u->path, "");
    T_EQ(u->nparams, 4);
    T_STREQ(nvme_uri_get(u, "data"), "1");
    T_CHECK(nvme_uri_get(u, "nope") == NULL);
    uint64_t v;
    T_EQ(nvme_uri_get_size(u, "nsze", 0, &v, err, sizeof(err)), 0);
    T_EQ(v, 1ull << 30);
    T_EQ(nvme_uri_get_u64(u, "ndev", 1, &v, err, sizeof(err)), 0);
    T_EQ(v, 4);
    T_EQ(nvme_uri_get_u64(u, "absent", 7, &v, err, sizeof(err)), 0);
    T_EQ(v, 7);
    bool b = false;
    T_EQ(nvme_uri_get_bool(u, "data", false, &b, err, sizeof(err)), 0);
    T_EQ(b, 1);
    const char *lb = nvme_uri_get(u, "lbads");
    T_EQ(nvme_uri_list_count(lb), 2);
    char item[16];
    T_EQ(nvme_uri_list_item(lb, 1, item, sizeof(item)), 0);
    T_STREQ(item, "4096");
    T_EQ(nvme_uri_list_item(lb, 2, item, sizeof(item)), -ERANGE);
    T_EQ(nvme_uri_list_item(lb, 0, item, 2), -ENAMETOOLONG);
    static const char *const known[] = {"ndev", "nsze", "lbads", "data", NULL};
    T_EQ(nvme_uri_check_keys(u, known, err, sizeof(err)), 0);
    static const char *const fewer[] = {"ndev", "nsze", NULL};
    T_EQ(nvme_uri_check_keys(u, fewer, err, sizeof(err)), -EINVAL);
    T_CONTAINS(err, "unknown parameter 'lbads'");
    T_EQ(nvme_uri_get_u64(u, "nsze", 0, &v, err, sizeof(err)), -EINVAL);
    T_CONTAINS(err, "'nsze'");
    T_CONTAINS(err, "1GiB");
    nvme_uri_free(u);

    T_EQ(nvme_uri_parse("pci://0000:4a:00.0,4b:00.0?driver=vfio-pci", &u, err, sizeof(err)), 0);
    T_STREQ(u->scheme, "pci");
    T_STREQ(u->authority, "0000:4a:00.0,4b:00.0");
    T_EQ(u->nitems, 2);
    T_STREQ(u->items[0], "0000:4a:00.0");
    T_STREQ(u->items[1], "4b:00.0");
    T_STREQ(nvme_uri_get(u, "driver"), "vfio-pci");
    nvme_uri_free(u);

    T_EQ(nvme_uri_parse("file:///data/my%20img.raw?direct=1", &u, err, sizeof(err)), 0);
    T_STREQ(u->authority, "");
    T_STREQ(u->path, "/data/my img.raw");
    T_STREQ(nvme_uri_get(u, "direct"), "1");
    nvme_uri_free(u);

    T_EQ(nvme_uri_parse("blk:///dev/nvme0n1", &u, err, sizeof(err)), 0);
    T_STREQ(u->path, "/dev/nvme0n1");
    T_EQ(u->nparams, 0);
    nvme_uri_free(u);
}

static void test_uri_bad(void)
{
    static const struct {
        const char *uri;
        const char *msg;
    } cases[] = {
        {"", "empty URI"},
        {"emu:/x", "no scheme"},
        {"://x", "bad scheme"},
        {"e_m://x", "bad scheme"},
        {"emu://?", "empty query"},
        {"emu://?a=1&&b=2", "empty parameter"},
        {"emu://?a=1&", "empty parameter"},
        {"emu://?a=", "'a': empty value"},
        {"emu://?A=1", "bad parameter name 'A'"},
        {"emu://?a=1&a=2", "'a' given twice"},
        {"emu://?a=%zz", "bad %-escape"},
        {"emu://?a=%00", "an encoded NUL character"},
        {"pci://a,,b", "empty item"},
        {"pci://,a", "empty item"},
        {"emu://?a=b c", "space or control"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct nvme_uri *u = (struct nvme_uri *)1;
        char err[NVME_ERRLEN] = "";
        int rc = nvme_uri_parse(cases[i].uri, &u, err, sizeof(err));
        if (rc != -EINVAL || !strstr(err, cases[i].msg)) {
            fprintf(stderr, "'%s': rc %d err '%s', want '%s'\n", cases[i].uri, rc, err, cases[i].msg);
            abort();
        }
        T_CHECK(u == NULL);
    }
    char big[NVME_URI_MAX_LEN + 16];
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "emu://?", 7);
    big[sizeof(big) - 1] = '\0';
    struct nvme_uri *u;
    char err[NVME_ERRLEN];
    T_EQ(nvme_uri_parse(big, &u, err, sizeof(err)), -EINVAL);
    T_CONTAINS(err, "longer than");
}

static void test_values(void)
{
    static const struct {
        const char *s;
        uint64_t v;
    } sizes[] = {
        {"0", 0},
        {"4096", 4096},
        {"4KiB", 4096},
        {"4k", 4096},
        {"4K", 4096},
        {"64MiB", 64ull << 20},
        {"64M", 64ull << 20},
        {"1GiB", 1ull << 30},
        {"2G", 2ull << 30},
        {"1TiB", 1ull << 40},
        {"3KB", 3000},
        {"2MB", 2000000},
        {"1GB", 1000000000},
        {"512B", 512},
        {"0x1000", 4096},
    };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t v = 1;
        T_EQ(nvme_parse_size(sizes[i].s, &v), 0);
        T_EQ(v, sizes[i].v);
    }
    static const char *bad_sizes[] = {"",     "-1", "1.5G", "12Q", "G", "1 G", "99999999999999999999", "20000000TiB",
                                      "1KiBB"};
    for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
        uint64_t v;
        if (nvme_parse_size(bad_sizes[i], &v) != -EINVAL) {
            fprintf(stderr, "size '%s' accepted\n", bad_sizes[i]);
            abort();
        }
    }
    uint64_t v;
    T_EQ(nvme_parse_u64("18446744073709551615", &v), 0);
    T_EQ(nvme_parse_u64("18446744073709551616", &v), -EINVAL);
    T_EQ(nvme_parse_u64("+5", &v), -EINVAL);
    T_EQ(nvme_parse_u64("0x", &v), -EINVAL);
    bool b;
    const char *yes[] = {"1", "true", "YES", "on"}, *no[] = {"0", "False", "no", "OFF"};
    for (int i = 0; i < 4; i++) {
        T_EQ(nvme_parse_bool(yes[i], &b), 0);
        T_EQ(b, 1);
        T_EQ(nvme_parse_bool(no[i], &b), 0);
        T_EQ(b, 0);
    }
    T_EQ(nvme_parse_bool("maybe", &b), -EINVAL);
}

/* ---- pci:// safety checks on a fake sysfs tree ---- */
static char root[256];

static void mkpath(const char *rel)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static void put(const char *rel, const char *text)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    T_CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

static void link_driver(const char *addr, const char *drv)
{
    char p[1024], target[256];
    snprintf(p, sizeof(p), "%s/sys/bus/pci/devices/%s/driver", root, addr);
    unlink(p);
    if (drv) {
        snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s", drv);
        T_EQ(symlink(target, p), 0);
    }
}

static void fake_function(const char *addr, const char *cls)
{
    char rel[512];
    snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s", addr);
    mkpath(rel);
    snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s/class", addr);
    put(rel, cls);
}

static int check(const char *addr, enum nvme_pci_driver drv, const char *allow, char *err, size_t errlen)
{
    return nvme_pci_check(addr, drv, root, allow, err, errlen);
}

/* A block device as sysfs shows it: /sys/class/block/NAME/dev; a partition also appears as a
 * directory with a 'partition' attribute under its parent; a namespace under its controller. */
static void blk(const char *name, const char *devno, const char *parent, const char *ctrl_dir)
{
    char rel[768];
    snprintf(rel, sizeof(rel), "sys/class/block/%s/holders", name);
    mkpath(rel);
    snprintf(rel, sizeof(rel), "sys/class/block/%s/dev", name);
    char line[64];
    snprintf(line, sizeof(line), "%s\n", devno);
    put(rel, line);
    if (parent) {
        snprintf(rel, sizeof(rel), "sys/class/block/%s/%s", parent, name);
        mkpath(rel);
        snprintf(rel, sizeof(rel), "sys/class/block/%s/%s/partition", parent, name);
        put(rel, "1\n");
    }
    if (ctrl_dir) {
        snprintf(rel, sizeof(rel), "%s/%s", ctrl_dir, name);
        mkpath(rel);
    }
}

static void hold(const char *lower, const char *upper)
{
    char rel[768];
    snprintf(rel, sizeof(rel), "sys/class/block/%s/holders/%s", lower, upper);
    mkpath(rel);
}

static void test_pci(void)
{
    char c[NVME_PCI_ADDR_LEN];
    T_EQ(nvme_pci_addr_canon("0000:4A:00.0", c), 0);
    T_STREQ(c, "0000:4a:00.0");
    T_EQ(nvme_pci_addr_canon("4a:00.1", c), 0);
    T_STREQ(c, "0000:4a:00.1");
    T_EQ(nvme_pci_addr_canon("0000:4a:20.0", c), -EINVAL); /* device > 0x1f */
    T_EQ(nvme_pci_addr_canon("0000:4a:00.8", c), -EINVAL);
    T_EQ(nvme_pci_addr_canon("0000:4a:00.0x", c), -EINVAL);
    T_EQ(nvme_pci_addr_canon("nvme0", c), -EINVAL);

    snprintf(root, sizeof(root), "/tmp/nvmelab-test-pci-%d", (int)getpid());
    mkdir(root, 0755);
    mkpath("sys/bus/pci/drivers/nvme");
    mkpath("sys/bus/pci/drivers/vfio-pci");
    mkpath("sys/bus/pci/drivers/uio_pci_generic");
    mkpath("proc/self");
    /* 01: root disk on nvme (partition 2 on /), 02: data disk mounted via dm, 03: bound to vfio-pci,
     * 04: bound to nvme, nothing mounted, 05: a network card, 06: unbound, 0a: multipath hidden path whose
     * head is mounted */
    fake_function("0000:01:00.0", "0x010802\n");
    link_driver("0000:01:00.0", "nvme");
    blk("nvme0n1", "259:0", NULL, "sys/bus/pci/devices/0000:01:00.0/nvme/nvme0");
    blk("nvme0n1p1", "259:1", "nvme0n1", NULL);
    blk("nvme0n1p2", "259:2", "nvme0n1", NULL);
    fake_function("0000:02:00.0", "0x010802\n");
    link_driver("0000:02:00.0", "nvme");
    blk("nvme1n1", "259:3", NULL, "sys/bus/pci/devices/0000:02:00.0/nvme/nvme1");
    blk("dm-0", "253:0", NULL, NULL);
    hold("nvme1n1", "dm-0");
    fake_function("0000:03:00.0", "0x010802\n");
    link_driver("0000:03:00.0", "vfio-pci");
    fake_function("0000:04:00.0", "0x010802\n");
    link_driver("0000:04:00.0", "nvme");
    blk("nvme2n1", "259:4", NULL, "sys/bus/pci/devices/0000:04:00.0/nvme/nvme2");
    fake_function("0000:05:00.0", "0x020000\n");
    fake_function("0000:06:00.0", "0x010802\n");
    fake_function("0000:0a:00.0", "0x010802\n");
    link_driver("0000:0a:00.0", "nvme");
    mkpath("sys/bus/pci/devices/0000:0a:00.0/nvme/nvme5/nvme5c5n1");
    blk("nvme5n1", "259:20", NULL, NULL);
    put("proc/self/mountinfo", "22 1 0:5 / /proc rw - proc proc rw\n"
                               "30 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
                               "31 30 259:1 / /boot/efi rw - vfat /dev/nvme0n1p1 rw\n"
                               "32 30 253:0 / /data rw - xfs /dev/mapper/vg-data rw\n"
                               "33 30 259:20 / /mp rw - xfs /dev/nvme5n1 rw\n");

    char err[NVME_ERRLEN];
    T_EQ(check("0000:01:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -EBUSY);
    T_CONTAINS(err, "boot device (/dev/nvme0n1p2 mounted on /)");
    T_EQ(check("0000:02:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -EBUSY);
    T_CONTAINS(err, "mounted (/dev/dm-0 on /data)");
    T_CONTAINS(err, "held by dm-0 (stacked on /dev/nvme1n1)");
    T_EQ(check("0000:0a:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -EBUSY);
    T_CONTAINS(err, "mounted (/dev/nvme5n1 on /mp)"); /* multipath: the head of the hidden path */
    T_EQ(check("0000:03:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), 0);
    T_EQ(check("3:00.0", NVME_PCI_VFIO, "*", err, sizeof(err)), 0);
    T_EQ(check("0000:03:00.0", NVME_PCI_VFIO, "0000:04:00.0,0000:03:00.0", err, sizeof(err)), 0);
    T_EQ(check("0000:03:00.0", NVME_PCI_VFIO, "0000:04:00.0", err, sizeof(err)), -EPERM);
    T_CONTAINS(err, "allow-list");
    T_EQ(check("0000:03:00.0", NVME_PCI_UIO, NULL, err, sizeof(err)), -EPERM);
    T_CONTAINS(err, "bound to vfio-pci, not uio_pci_generic");
    T_EQ(check("0000:04:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -EBUSY);
    T_CONTAINS(err, "kernel nvme driver");
    T_CONTAINS(err, "nvme2n1");
    T_EQ(check("0000:05:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -ENODEV);
    T_CONTAINS(err, "not an NVMe controller");
    T_EQ(check("0000:06:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -ENODEV);
    T_CONTAINS(err, "not bound to any driver");
    T_EQ(check("0000:07:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -ENODEV);
    T_CONTAINS(err, "no PCI function 0000:07:00.0");
    T_EQ(check("junk", NVME_PCI_VFIO, NULL, err, sizeof(err)), -EINVAL);

    /* 09: more partitions than the check can hold: refused as unchecked, never passed */
    char rel[128], name[64], devno[32];
    fake_function("0000:09:00.0", "0x010802\n");
    link_driver("0000:09:00.0", "vfio-pci");
    blk("nvme4n1", "259:100", NULL, "sys/bus/pci/devices/0000:09:00.0/nvme/nvme4");
    for (int i = 1; i <= NVME_INUSE_MAX_BLK + 1; i++) {
        snprintf(name, sizeof(name), "nvme4n1p%d", i);
        snprintf(devno, sizeof(devno), "260:%d", i);
        blk(name, devno, "nvme4n1", NULL);
    }
    T_EQ(check("0000:09:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -EBUSY);
    T_CONTAINS(err, "cannot check them all");
    /* 0b: a partition without a device number: refused, never vouched for */
    fake_function("0000:0b:00.0", "0x010802\n");
    link_driver("0000:0b:00.0", "vfio-pci");
    blk("nvme6n1", "259:200", NULL, "sys/bus/pci/devices/0000:0b:00.0/nvme/nvme6");
    blk("nvme6n1p1", "259:201", "nvme6n1", NULL);
    snprintf(rel, sizeof(rel), "%s/sys/class/block/nvme6n1p1/dev", root);
    T_EQ(unlink(rel), 0);
    T_EQ(check("0000:0b:00.0", NVME_PCI_VFIO, NULL, err, sizeof(err)), -EBUSY);
    T_CONTAINS(err, "no device number in sysfs");

    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    T_EQ(system(cmd), 0);
}

/* PRP building over non-contiguous bus memory (the hugepage + pagemap translation), without a device:
 * a fake DMA object of two 2 MiB pages at unrelated bus addresses. */
static void test_prp_pagemap(void)
{
    const size_t huge = (size_t)1 << 21, page = 4096;
    uint8_t *mem = calloc(2, huge);
    uint64_t pages[2] = {0x100000000ull, 0x7340000000ull};
    struct nvme_dma d = {.vaddr = mem, .size = 2 * huge, .pages = pages, .page_shift = 21};
    uint64_t *list = calloc(page / 8, 8);
    struct nvme_tracker t = {.prp_list = list, .prp_iova = 0xabc000};
    struct nvme_qpair q;
    memset(&q, 0, sizeof(q));
    q.page_shift = 12;
    struct nvme_sqe s = {0};
    /* inside one controller page: PRP1 only, offset kept */
    T_EQ(nvme_prp_build(&q, &t, &d, mem + 100 * 4, 512, &s), 0);
    T_EQ(s.prp1, pages[0] + 400);
    T_EQ(s.prp2, 0);
    /* two pages straddling the hugepage boundary: PRP2 is the second hugepage */
    T_EQ(nvme_prp_build(&q, &t, &d, mem + huge - page + 8, page, &s), 0);
    T_EQ(s.prp1, pages[0] + huge - page + 8);
    T_EQ(s.prp2, pages[1]);
    /* three pages across the boundary: a PRP list in the tracker's page */
    T_EQ(nvme_prp_build(&q, &t, &d, mem + huge - 2 * page + 4, 3 * page, &s), 0);
    T_EQ(s.prp1, pages[0] + huge - 2 * page + 4);
    T_EQ(s.prp2, t.prp_iova);
    T_EQ(list[0], pages[0] + huge - page);
    T_EQ(list[1], pages[1]);
    T_EQ(list[2], pages[1] + page);
    /* 2 MiB from a page-aligned start: 1 + 511 entries, all whole pages */
    T_EQ(nvme_prp_build(&q, &t, &d, mem + page, huge, &s), 0);
    T_EQ(list[0], pages[0] + 2 * page);
    T_EQ(list[510], pages[1]);
    /* misaligned */
    T_EQ(nvme_prp_build(&q, &t, &d, mem + 2, 512, &s), -EINVAL);
    /* identity translation: contiguous */
    struct nvme_dma id = {.vaddr = mem, .size = 2 * huge, .iova = 0x5000000, .page_shift = 12};
    T_EQ(nvme_prp_build(&q, &t, &id, mem + 4092, 5 * page, &s), 0);
    T_EQ(s.prp1, 0x5000000 + 4092);
    T_EQ(s.prp2, t.prp_iova);
    for (int i = 0; i < 5; i++)
        T_EQ(list[i], 0x5000000 + (uint64_t)(i + 1) * page);
    free(list);
    free(mem);
}

int main(void)
{
    RUN_CASE(test_registers);
    RUN_CASE(test_prp_pagemap);
    RUN_CASE(test_status_names);
    RUN_CASE(test_uri_good);
    RUN_CASE(test_uri_bad);
    RUN_CASE(test_values);
    RUN_CASE(test_pci);
    return CHECK_DONE("test_driver_units");
}
