/* SPDX-License-Identifier: BSD-3-Clause */
/* vfio_user_client.c — the vfio-user:// backend: connect, VERSION, device/region info, config-space checks,
 * the BAR0 window (doorbells mapped from the server's fd), register accesses as REGION_READ/WRITE, DMA_MAP
 * and DMA_UNMAP with memfds; close unwinds in reverse (see vfio_user_client.h). */
#include "nvme/vfio_user_client.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "nvme/ctrl_internal.h"
#include "nvme/dma.h"
#include "nvme/errbuf.h"
#include "nvme/mmio.h"
#include "nvme/pci.h"
#include "nvme/spec.h"
#include "nvme/vfio_user.h"

static_assert(NVME_VFU_IOVA_BASE == VFU_CLIENT_IOVA_BASE, "dma.h hands out the IOVAs the design names");

#define VFU_REPLY_CAP      4096u /* every reply we expect fits (region info with its capabilities included) */
#define VFU_REQ_CAP        256u  /* every request we send fits (VERSION's JSON included) */
#define CFG_SPACE_MIN      256u  /* PCI config space header + capabilities */
#define CFG_VENDOR_ID      0x00u
#define CFG_COMMAND        0x04u
#define CFG_CLASS_REV      0x08u /* revision (7:0), class code (31:8) */
#define CFG_CMD_MEMORY     0x0002u
#define CFG_CMD_MASTER     0x0004u
#define CFG_CMD_INTX_OFF   0x0400u
#define CTRL_SOCK_FMT      "%s/" VFU_CTRL_DIR "/" VFU_SOCKET_NAME
#define CLIENT_VERSION_CAP "{\"capabilities\":{\"max_msg_fds\":8,\"max_data_xfer_size\":1048576}}"

static_assert(sizeof(CLIENT_VERSION_CAP) + sizeof(struct vfu_version) + VFU_HDR_SIZE <= VFU_REQ_CAP,
              "VERSION request fits the request buffer");

struct vfu_conn {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int sock;
    int timeout_ms;
    pthread_mutex_t lock; /* one request and its reply at a time */
    uint16_t next_id;
    int broken;        /* 0, or the code every later request fails with */
    bool warned;       /* one nvme_log line per connection for failed register accesses */
    uint64_t bar_size; /* region 0 */
    uint8_t *win;      /* anonymous window of bar_size, doorbell areas mapped over it */
    uint64_t db_off;   /* the mapped doorbell area [db_off, db_off + db_len); db_len 0: none */
    uint64_t db_len;
    struct nvme_bar bar;
    uint8_t reply[VFU_REPLY_CAP];
};

struct nvme_vfu_set {
    unsigned n;
    struct vfu_conn *c[NVME_VFU_MAX_CTRLS];
};

/* ------------------------------------------------------------------ one request, one reply */

/* Send cmd with payload (and fds), await its reply. On success the reply payload is c->reply (its length
 * in *rlen) and any fd that came with it in *rfd (-1 when none; NULL: closed). A reply with the error
 * flag gives -error. A lost peer gives -ENXIO, a stall -ETIMEDOUT, a garbled stream -EPROTO; each marks
 * the connection broken. Caller holds c->lock. */
static int request_locked(struct vfu_conn *c, uint16_t cmd, const void *payload, size_t plen, const int *fds,
                          unsigned nfds, size_t *rlen, int *rfd)
{
    if (rfd)
        *rfd = -1;
    if (c->broken)
        return c->broken;
    uint8_t req[VFU_REQ_CAP];
    if (plen > sizeof(req) - VFU_HDR_SIZE)
        return -EMSGSIZE;
    uint16_t id = c->next_id++;
    vfu_hdr_init((struct vfu_hdr *)req, id, cmd, (uint32_t)(VFU_HDR_SIZE + plen), VFU_F_TYPE_COMMAND, 0);
    if (plen)
        memcpy(req + VFU_HDR_SIZE, payload, plen);
    int rc = vfu_msg_send(c->sock, req, VFU_HDR_SIZE + plen, fds, nfds, c->timeout_ms);
    int got[VFU_MAX_FDS];
    unsigned ngot = VFU_MAX_FDS;
    size_t len = 0;
    if (rc == 0)
        rc = vfu_msg_recv(c->sock, c->reply, sizeof(c->reply), &len, got, &ngot, c->timeout_ms);
    if (rc) {
        c->broken = rc == -ETIMEDOUT ? -ETIMEDOUT : rc == -ECONNRESET || rc == -EPIPE ? -ENXIO : -EPROTO;
        return c->broken;
    }
    const struct vfu_hdr *h = (const struct vfu_hdr *)c->reply;
    if ((h->flags & VFU_F_TYPE_MASK) != VFU_F_TYPE_REPLY || h->msg_id != id || h->cmd != cmd) {
        vfu_close_fds(got, ngot);
        c->broken = -EPROTO;
        return c->broken;
    }
    if (h->flags & VFU_F_ERROR) {
        vfu_close_fds(got, ngot);
        return h->error ? -(int)h->error : -EIO;
    }
    *rlen = len - VFU_HDR_SIZE;
    if (rfd && ngot) {
        *rfd = got[0];
        got[0] = -1;
    }
    vfu_close_fds(got, ngot);
    return 0;
}

static int request(struct vfu_conn *c, uint16_t cmd, const void *payload, size_t plen, const int *fds, unsigned nfds,
                   void *out, size_t outlen)
{
    pthread_mutex_lock(&c->lock);
    size_t rlen = 0;
    int rc = request_locked(c, cmd, payload, plen, fds, nfds, &rlen, NULL);
    if (rc == 0 && out) {
        if (rlen < outlen)
            rc = -EPROTO;
        else
            memcpy(out, c->reply + VFU_HDR_SIZE, outlen);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* REGION_READ of count (<= 8) bytes at offset of region. */
static int region_read(struct vfu_conn *c, uint32_t region, uint64_t offset, void *data, uint32_t count)
{
    struct vfu_region_access a = {.offset = offset, .region = region, .count = count};
    pthread_mutex_lock(&c->lock);
    size_t rlen = 0;
    int rc = request_locked(c, VFU_CMD_REGION_READ, &a, sizeof(a), NULL, 0, &rlen, NULL);
    if (rc == 0) {
        const struct vfu_region_access *r = (const void *)(c->reply + VFU_HDR_SIZE);
        if (rlen < sizeof(*r) + count || r->count != count)
            rc = -EPROTO;
        else
            memcpy(data, c->reply + VFU_HDR_SIZE + sizeof(*r), count);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static int region_write(struct vfu_conn *c, uint32_t region, uint64_t offset, const void *data, uint32_t count)
{
    struct {
        struct vfu_region_access a;
        uint8_t data[NVME_MMIO_QWORD];
    } __attribute__((packed)) m = {.a = {.offset = offset, .region = region, .count = count}};
    if (count > sizeof(m.data))
        return -EINVAL;
    memcpy(m.data, data, count);
    return request(c, VFU_CMD_REGION_WRITE, &m, sizeof(m.a) + count, NULL, 0, NULL, 0);
}

static void warn_once(struct vfu_conn *c, const char *cmd, uint32_t off, int rc)
{
    if (c->warned)
        return;
    c->warned = true;
    nvme_log(NVME_LOG_ERROR, "vfio-user %s: %s of BAR0 + 0x%x failed: %s%s", c->path, cmd, off, strerror(-rc),
             rc == -ENXIO ? " (the server closed the connection)" : "");
}

/* ------------------------------------------------------------------ the bar's ops */

static bool in_db_area(const struct vfu_conn *c, uint32_t off, unsigned width)
{
    return c->db_len && off >= c->db_off && (uint64_t)off + width <= c->db_off + c->db_len;
}

static void bar_write(void *ctx, uint32_t off, uint64_t val, unsigned width)
{
    struct vfu_conn *c = ctx;
    if (in_db_area(c, off, width))
        return; /* the store is in the shared page: the server polls it */
    int rc = region_write(c, VFU_PCI_BAR0_REGION, off, &val, width);
    if (rc)
        warn_once(c, "REGION_WRITE", off, rc);
}

static uint64_t bar_read(void *ctx, uint32_t off, unsigned width)
{
    struct vfu_conn *c = ctx;
    if (in_db_area(c, off, width))
        return width == NVME_MMIO_QWORD ? *(volatile uint64_t *)(c->win + off) : *(volatile uint32_t *)(c->win + off);
    uint64_t v = 0;
    int rc = region_read(c, VFU_PCI_BAR0_REGION, off, &v, width);
    if (rc) {
        warn_once(c, "REGION_READ", off, rc);
        return width == NVME_MMIO_QWORD ? UINT64_MAX : UINT32_MAX;
    }
    return v;
}

static const struct nvme_bar_ops vfu_bar_ops = {.write = bar_write, .idle = NULL, .read = bar_read};

/* ------------------------------------------------------------------ bring-up of one connection */

static int conn_connect(struct vfu_conn *c, char *err, size_t errlen)
{
    struct stat st;
    if (stat(c->path, &st) != 0)
        return nvme_errf(err, errlen, -errno, "vfio-user %s: no such socket (%s)", c->path, strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return nvme_errf(err, errlen, -ENOTSOCK, "vfio-user %s: not a UNIX socket", c->path);
    c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->sock < 0)
        return nvme_errf(err, errlen, -errno, "vfio-user %s: socket: %s", c->path, strerror(errno));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
    if (connect(c->sock, (const struct sockaddr *)&sa, sizeof(sa)) != 0)
        return nvme_errf(err, errlen, -errno, "vfio-user %s: connect: %s%s", c->path, strerror(errno),
                         errno == ECONNREFUSED ? " (no server listening)" : "");
    return 0;
}

static int conn_version(struct vfu_conn *c, char *err, size_t errlen)
{
    uint8_t p[sizeof(struct vfu_version) + sizeof(CLIENT_VERSION_CAP)];
    struct vfu_version v = {.major = VFU_VERSION_MAJOR, .minor = VFU_VERSION_MINOR};
    memcpy(p, &v, sizeof(v));
    memcpy(p + sizeof(v), CLIENT_VERSION_CAP, sizeof(CLIENT_VERSION_CAP));
    struct vfu_version r;
    int rc = request(c, VFU_CMD_VERSION, p, sizeof(p), NULL, 0, &r, sizeof(r));
    if (rc == -ETIMEDOUT)
        return nvme_errf(err, errlen, rc,
                         "vfio-user %s: VERSION: no reply within %d ms (not a vfio-user server, or one serving another "
                         "client: a device takes one at a time)",
                         c->path, c->timeout_ms);
    if (rc)
        return nvme_errf(err, errlen, -EPROTO, "vfio-user %s: not a vfio-user server (VERSION: %s)", c->path,
                         strerror(-rc));
    if (r.major != VFU_VERSION_MAJOR)
        return nvme_errf(err, errlen, -EPROTO,
                         "vfio-user %s: not a vfio-user server we speak (version %u.%u, want %u.x)", c->path, r.major,
                         r.minor, VFU_VERSION_MAJOR);
    return 0;
}

static int fail_cmd(struct vfu_conn *c, char *err, size_t errlen, const char *what, int rc)
{
    return nvme_errf(err, errlen, rc, "vfio-user %s: %s: %s", c->path, what, strerror(-rc));
}

/* A PCI function with an NVMe class code: memory space and bus mastering on, INTx off (we poll). */
static int conn_pci(struct vfu_conn *c, char *err, size_t errlen)
{
    struct vfu_device_info di = {.argsz = sizeof(di)};
    int rc = request(c, VFU_CMD_DEVICE_GET_INFO, &di, sizeof(di), NULL, 0, &di, sizeof(di));
    if (rc)
        return fail_cmd(c, err, errlen, "DEVICE_GET_INFO", rc);
    if (!(di.flags & VFU_DEV_F_PCI) || di.num_regions <= VFU_PCI_CONFIG_REGION)
        return nvme_errf(err, errlen, -ENODEV, "vfio-user %s: not a PCI device (flags 0x%x, %u regions)", c->path,
                         di.flags, di.num_regions);
    struct vfu_region_info ri = {.argsz = sizeof(ri), .index = VFU_PCI_CONFIG_REGION};
    rc = request(c, VFU_CMD_DEVICE_GET_REGION_INFO, &ri, sizeof(ri), NULL, 0, &ri, sizeof(ri));
    if (rc)
        return fail_cmd(c, err, errlen, "GET_REGION_INFO (config space)", rc);
    if (ri.size < CFG_SPACE_MIN)
        return nvme_errf(err, errlen, -ENODEV, "vfio-user %s: config space of %llu bytes (a PCI function has %u)",
                         c->path, (unsigned long long)ri.size, CFG_SPACE_MIN);
    uint32_t class_rev = 0;
    rc = region_read(c, VFU_PCI_CONFIG_REGION, CFG_CLASS_REV, &class_rev, sizeof(class_rev));
    if (rc)
        return fail_cmd(c, err, errlen, "REGION_READ (config space class code)", rc);
    if ((class_rev >> 8) != NVME_PCI_CLASS_NVME)
        return nvme_errf(err, errlen, -ENODEV, "vfio-user %s: not an NVMe controller (class code 0x%06x)", c->path,
                         class_rev >> 8);
    uint16_t cmd = 0;
    rc = region_read(c, VFU_PCI_CONFIG_REGION, CFG_COMMAND, &cmd, sizeof(cmd));
    if (rc == 0) {
        cmd |= CFG_CMD_MEMORY | CFG_CMD_MASTER | CFG_CMD_INTX_OFF;
        rc = region_write(c, VFU_PCI_CONFIG_REGION, CFG_COMMAND, &cmd, sizeof(cmd));
    }
    if (rc)
        return fail_cmd(c, err, errlen, "config space command register", rc);
    return 0;
}

/* The sparse-mmap area of the doorbells in a GET_REGION_INFO reply (payload p of plen bytes). */
static int find_db_area(const uint8_t *p, size_t plen, const struct vfu_region_info *ri, struct vfu_sparse_area *area)
{
    uint32_t off = ri->cap_offset;
    for (unsigned hops = 0; off && hops < 16; hops++) {
        if (off < sizeof(*ri) || off > plen || plen - off < sizeof(struct vfu_cap_hdr))
            return -EPROTO;
        struct vfu_cap_hdr h;
        memcpy(&h, p + off, sizeof(h));
        if (h.id == VFU_CAP_SPARSE_MMAP) {
            struct vfu_cap_sparse s;
            if (plen - off < sizeof(s))
                return -EPROTO;
            memcpy(&s, p + off, sizeof(s));
            if (s.nr_areas > (plen - off - sizeof(s)) / sizeof(*area))
                return -EPROTO;
            /* the area holding the first doorbell (the design: one area [0x1000, emulator BAR size)) */
            for (uint32_t i = 0; i < s.nr_areas; i++) {
                memcpy(area, p + off + sizeof(s) + i * sizeof(*area), sizeof(*area));
                if (area->offset <= NVME_REG_DBS && area->offset + area->size > NVME_REG_DBS)
                    return 0;
            }
            return -ENOENT;
        }
        off = h.next;
    }
    return -ENOENT;
}

/* BAR0: its size, the window, the doorbell area mapped over it from the server's fd. */
static int conn_bar0(struct vfu_conn *c, char *err, size_t errlen)
{
    struct vfu_region_info ri = {.argsz = VFU_REPLY_CAP - VFU_HDR_SIZE, .index = VFU_PCI_BAR0_REGION};
    pthread_mutex_lock(&c->lock);
    size_t rlen = 0;
    int fd = -1;
    int rc = request_locked(c, VFU_CMD_DEVICE_GET_REGION_INFO, &ri, sizeof(ri), NULL, 0, &rlen, &fd);
    uint8_t p[VFU_REPLY_CAP];
    if (rc == 0 && rlen < sizeof(ri))
        rc = -EPROTO;
    if (rc == 0) {
        memcpy(p, c->reply + VFU_HDR_SIZE, rlen);
        memcpy(&ri, p, sizeof(ri));
    }
    pthread_mutex_unlock(&c->lock);
    if (rc)
        return fail_cmd(c, err, errlen, "GET_REGION_INFO (BAR0)", rc);
    if (ri.size < NVME_BAR0_MIN_SIZE || ri.size > ((uint64_t)1 << 32) ||
        (ri.flags & (VFU_REGION_F_READ | VFU_REGION_F_WRITE)) != (VFU_REGION_F_READ | VFU_REGION_F_WRITE)) {
        if (fd >= 0)
            close(fd);
        return nvme_errf(err, errlen, -ENODEV,
                         "vfio-user %s: BAR0 missing or too small (%llu bytes, flags 0x%x; an NVMe BAR0 has at least "
                         "0x%x, readable and writable)",
                         c->path, (unsigned long long)ri.size, ri.flags, NVME_BAR0_MIN_SIZE);
    }
    c->bar_size = ri.size;
    void *w = mmap(NULL, c->bar_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED) {
        rc = -errno;
        if (fd >= 0)
            close(fd);
        return fail_cmd(c, err, errlen, "mmap of the BAR0 window", rc);
    }
    c->win = w;
    struct vfu_sparse_area area = {0};
    if (fd >= 0 && (ri.flags & VFU_REGION_F_MMAP) && (ri.flags & VFU_REGION_F_CAPS) && ri.argsz <= rlen &&
        find_db_area(p, rlen, &ri, &area) == 0) {
        if (area.offset % VFU_PAGE_SIZE || area.size % VFU_PAGE_SIZE || area.offset + area.size > c->bar_size) {
            close(fd);
            return nvme_errf(err, errlen, -EPROTO,
                             "vfio-user %s: BAR0 doorbell area [0x%llx, +0x%llx) not page aligned inside BAR0", c->path,
                             (unsigned long long)area.offset, (unsigned long long)area.size);
        }
        void *m = mmap(c->win + area.offset, area.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                       (off_t)(ri.offset + area.offset));
        if (m == MAP_FAILED) {
            rc = -errno;
            close(fd);
            return fail_cmd(c, err, errlen, "mmap of the BAR0 doorbell area", rc);
        }
        c->db_off = area.offset;
        c->db_len = area.size;
    }
    if (fd >= 0)
        close(fd);
    c->bar.base = c->win;
    c->bar.size = c->bar_size;
    c->bar.ops = &vfu_bar_ops;
    c->bar.ctx = c;
    return 0;
}

static void conn_close(struct vfu_conn *c)
{
    if (!c)
        return;
    if (c->win)
        munmap(c->win, c->bar_size); /* the doorbell area with it */
    if (c->sock >= 0)
        close(c->sock);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static int conn_open(const char *path, int timeout_ms, struct vfu_conn **out, char *err, size_t errlen)
{
    *out = NULL;
    struct vfu_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->sock = -1;
    c->timeout_ms = timeout_ms;
    c->next_id = 1;
    pthread_mutex_init(&c->lock, NULL);
    snprintf(c->path, sizeof(c->path), "%s", path);
    int rc = conn_connect(c, err, errlen);
    if (rc == 0)
        rc = conn_version(c, err, errlen);
    if (rc == 0)
        rc = conn_pci(c, err, errlen);
    if (rc == 0)
        rc = conn_bar0(c, err, errlen);
    if (rc) {
        conn_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* ------------------------------------------------------------------ the set */

static const char *const vfu_keys[] = {"timeout_ms", NULL};

int nvme_vfu_open(const struct nvme_uri *u, struct nvme_vfu_set **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = nvme_uri_check_keys(u, vfu_keys, err, errlen);
    if (rc)
        return rc;
    uint64_t tmo = 0;
    rc = nvme_uri_get_u64(u, "timeout_ms", VFU_DEFAULT_TIMEOUT_MS, &tmo, err, errlen);
    if (rc)
        return rc;
    if (tmo == 0 || tmo > INT_MAX)
        return nvme_errf(err, errlen, -EINVAL, "parameter 'timeout_ms': must be 1..%d, not %llu", INT_MAX,
                         (unsigned long long)tmo);
    const char *path = u->path;
    if (u->authority[0] || path[0] != '/')
        return nvme_errf(
            err, errlen, -EINVAL,
            "%s: a vfio-user target names an absolute path: vfio-user:///dir/ctrl0 (a directory holding the "
            "socket " VFU_SOCKET_NAME "), vfio-user:///dir (every ctrl<i>) or a socket (three slashes)",
            u->raw);
    size_t sun_max = sizeof(((struct sockaddr_un *)0)->sun_path);
    struct stat st;
    if (stat(path, &st) != 0)
        return nvme_errf(err, errlen, -errno, "vfio-user %s: no such socket or directory (%s)", path, strerror(errno));
    struct nvme_vfu_set *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    /* A socket; a directory holding the socket `cntrl` (SPDK's traddr: one controller); or a directory holding
     * ctrl<i>/cntrl for i = 0, 1, ... (every controller nvmelab-serve --dir serves). */
    char sock[PATH_MAX];
    bool one = !S_ISDIR(st.st_mode);
    if (!one) {
        snprintf(sock, sizeof(sock), "%s/" VFU_SOCKET_NAME, path);
        one = access(sock, F_OK) == 0;
    }
    for (unsigned i = 0; i < NVME_VFU_MAX_CTRLS; i++) {
        if (one && i > 0)
            break;
        if (one && !S_ISDIR(st.st_mode)) {
            snprintf(sock, sizeof(sock), "%s", path);
        } else if (!one) {
            snprintf(sock, sizeof(sock), CTRL_SOCK_FMT, path, i);
            if (access(sock, F_OK) != 0) {
                if (i == 0) {
                    nvme_vfu_close(s);
                    return nvme_errf(err, errlen, -ENOENT,
                                     "vfio-user %s: neither a socket '" VFU_SOCKET_NAME "' nor ctrl0/" VFU_SOCKET_NAME
                                     " in this directory",
                                     path);
                }
                break;
            }
        }
        if (strlen(sock) >= sun_max) {
            nvme_vfu_close(s);
            return nvme_errf(err, errlen, -ENAMETOOLONG, "vfio-user %s: socket path longer than %zu bytes", sock,
                             sun_max - 1);
        }
        rc = conn_open(sock, (int)tmo, &s->c[i], err, errlen);
        if (rc) {
            nvme_vfu_close(s);
            return rc;
        }
        s->n++;
    }
    *out = s;
    return 0;
}

void nvme_vfu_close(void *set)
{
    struct nvme_vfu_set *s = set;
    if (!s)
        return;
    for (unsigned i = s->n; i-- > 0;)
        conn_close(s->c[i]);
    free(s);
}

unsigned nvme_vfu_count(const struct nvme_vfu_set *s)
{
    return s->n;
}

const struct nvme_bar *nvme_vfu_bar(const struct nvme_vfu_set *s, unsigned i)
{
    return i < s->n ? &s->c[i]->bar : NULL;
}

const char *nvme_vfu_path(const struct nvme_vfu_set *s, unsigned i)
{
    return i < s->n ? s->c[i]->path : "";
}

/* ------------------------------------------------------------------ DMA */

/* On a broken connection there is nothing to take back: a server drops a client's maps when the client
 * goes, and ours is about to go (the failure that broke it was logged already). */
static int dma_unmap_one(struct vfu_conn *c, uint64_t iova, size_t len)
{
    struct vfu_dma_unmap m = {.argsz = sizeof(m), .flags = 0, .addr = iova, .size = len};
    pthread_mutex_lock(&c->lock);
    size_t rlen = 0;
    int rc = c->broken ? 0 : request_locked(c, VFU_CMD_DMA_UNMAP, &m, sizeof(m), NULL, 0, &rlen, NULL);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* Every connection maps every DMA object: each served controller is a device of its own. (nvmelab-serve keeps
 * one VA == IOVA address space for the controllers of a set and shares identical maps between connections.) */
int nvme_vfu_dma_map(void *set, int fd, uint64_t iova, size_t len)
{
    struct nvme_vfu_set *s = set;
    struct vfu_dma_map m = {
        .argsz = sizeof(m), .flags = VFU_DMA_F_READ | VFU_DMA_F_WRITE, .offset = 0, .addr = iova, .size = len};
    for (unsigned i = 0; i < s->n; i++) {
        int rc = request(s->c[i], VFU_CMD_DMA_MAP, &m, sizeof(m), &fd, 1, NULL, 0);
        if (rc) {
            nvme_log(NVME_LOG_ERROR, "vfio-user %s: DMA_MAP of iova 0x%llx (%zu bytes) failed: %s", s->c[i]->path,
                     (unsigned long long)iova, len, strerror(-rc));
            while (i-- > 0)
                dma_unmap_one(s->c[i], iova, len);
            return rc;
        }
    }
    return 0;
}

int nvme_vfu_dma_unmap(void *set, uint64_t iova, size_t len)
{
    struct nvme_vfu_set *s = set;
    int first = 0;
    for (unsigned i = 0; i < s->n; i++) {
        int rc = dma_unmap_one(s->c[i], iova, len);
        if (rc && !first)
            first = rc;
    }
    return first;
}
