/* SPDX-License-Identifier: BSD-3-Clause */
/* test_vfio_user_client.c — the driver as a vfio-user client (vfio-user:// targets): refusals with one message
 * each (bad URI, no socket, nobody listening, not a vfio-user server, a stalled server); then against an
 * in-process server (vfu_server.h) serving emu:// controllers: bring-up and identify of two controllers
 * through a directory, write/read/verify across PRP shapes, queue errors, reset, a second client after the
 * first closed, DMA buffers allocated from several threads at once, the perf engine on the target (fill,
 * verify, two threads and queues per device), and a server stopped under the client (an error, never a hang). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "engine/perf.h"
#include "nvme/emu/emu.h"
#include "nvme/spec.h"
#include "nvme/vfio_user.h"
#include "test_driver.h"
#include "tools/vfu_server.h"

#define KIB        1024u
#define PAGE       4096u
#define NIOQ       4u /* I/O queues each served controller grants */
#define SERVED_URI "emu://?ndev=2&mode=thread&nsze=32MiB&lbads=512&mdts=256KiB&nioq=4"

static char tmpdir[64];

/* ------------------------------------------------------------------ a fake peer for the refusals */

enum fake_mode {
    FAKE_CLOSE,     /* accept, close at once */
    FAKE_SILENT,    /* accept, read, never answer */
    FAKE_MAJOR_ONE, /* answer VERSION with major 1 */
    FAKE_NOT_PCI,   /* a vfio-user device that is not a PCI function */
    FAKE_NOT_NVME,  /* a PCI function of another class (AHCI) */
    FAKE_SMALL_BAR, /* an NVMe function whose BAR0 cannot hold the doorbells */
};

#define FAKE_CLASS_AHCI 0x010601u

/* Serve a minimal device until the client goes: what each FAKE_NOT_* / FAKE_SMALL_BAR mode needs. */
static void fake_device(int s, enum fake_mode mode)
{
    uint8_t buf[512];
    for (;;) {
        size_t len = 0;
        unsigned nfds = 0;
        if (vfu_msg_recv(s, buf, sizeof(buf), &len, NULL, &nfds, 2000) != 0)
            return;
        const struct vfu_hdr *q = (const void *)buf;
        struct {
            struct vfu_hdr h;
            uint8_t p[64];
        } __attribute__((packed)) r;
        memset(&r, 0, sizeof(r));
        size_t plen = 0;
        uint32_t error = 0;
        if (q->cmd == VFU_CMD_VERSION) {
            struct vfu_version v = {.major = 0, .minor = 1};
            memcpy(r.p, &v, sizeof(v));
            memcpy(r.p + sizeof(v), "{}", 3);
            plen = sizeof(v) + 3;
        } else if (q->cmd == VFU_CMD_DEVICE_GET_INFO) {
            struct vfu_device_info di = {.argsz = sizeof(di),
                                         .flags = mode == FAKE_NOT_PCI ? VFU_DEV_F_RESET : VFU_DEV_F_PCI,
                                         .num_regions = VFU_PCI_NUM_REGIONS,
                                         .num_irqs = VFU_PCI_NUM_IRQS};
            memcpy(r.p, &di, sizeof(di));
            plen = sizeof(di);
        } else if (q->cmd == VFU_CMD_DEVICE_GET_REGION_INFO) {
            struct vfu_region_info ri;
            memcpy(&ri, buf + VFU_HDR_SIZE, sizeof(ri));
            ri.argsz = sizeof(ri);
            ri.flags = VFU_REGION_F_READ | VFU_REGION_F_WRITE;
            ri.cap_offset = 0;
            ri.size = ri.index == VFU_PCI_CONFIG_REGION ? 256 : mode == FAKE_SMALL_BAR ? PAGE : 4 * PAGE;
            ri.offset = 0;
            memcpy(r.p, &ri, sizeof(ri));
            plen = sizeof(ri);
        } else if (q->cmd == VFU_CMD_REGION_READ || q->cmd == VFU_CMD_REGION_WRITE) {
            struct vfu_region_access a;
            memcpy(&a, buf + VFU_HDR_SIZE, sizeof(a));
            memcpy(r.p, &a, sizeof(a));
            plen = sizeof(a);
            if (q->cmd == VFU_CMD_REGION_READ && a.count <= 8) {
                uint32_t cls = (mode == FAKE_NOT_NVME ? FAKE_CLASS_AHCI : 0x010802u) << 8;
                if (a.region == VFU_PCI_CONFIG_REGION && a.offset == 8)
                    memcpy(r.p + plen, &cls, sizeof(cls));
                plen += a.count;
            }
        } else {
            error = ENOSYS;
        }
        vfu_hdr_init(&r.h, q->msg_id, q->cmd, (uint32_t)(VFU_HDR_SIZE + plen),
                     VFU_F_TYPE_REPLY | (error ? VFU_F_ERROR : 0), error);
        if (vfu_msg_send(s, &r, VFU_HDR_SIZE + plen, NULL, 0, 2000) != 0)
            return;
    }
}

struct fake {
    int lsock;
    enum fake_mode mode;
    pthread_t thr;
    int stop[2]; /* a pipe: closed by the test to end FAKE_SILENT */
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    int s = accept(f->lsock, NULL, NULL);
    if (s < 0)
        return NULL;
    if (f->mode == FAKE_MAJOR_ONE) {
        uint8_t buf[512];
        size_t len = 0;
        unsigned nfds = 0;
        if (vfu_msg_recv(s, buf, sizeof(buf), &len, NULL, &nfds, 2000) == 0) {
            struct {
                struct vfu_hdr h;
                struct vfu_version v;
                char json[3];
            } __attribute__((packed)) r = {.v = {.major = 1, .minor = 0}, .json = "{}"};
            const struct vfu_hdr *q = (const void *)buf;
            vfu_hdr_init(&r.h, q->msg_id, q->cmd, sizeof(r), VFU_F_TYPE_REPLY, 0);
            vfu_msg_send(s, &r, sizeof(r), NULL, 0, 2000);
        }
    }
    if (f->mode >= FAKE_NOT_PCI)
        fake_device(s, f->mode);
    if (f->mode == FAKE_SILENT) {
        char c;
        while (read(f->stop[0], &c, 1) > 0)
            ;
    }
    close(s);
    return NULL;
}

static void fake_start(struct fake *f, const char *path, enum fake_mode mode)
{
    memset(f, 0, sizeof(*f));
    f->mode = mode;
    REQUIRE(pipe(f->stop) == 0);
    f->lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(f->lsock >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    unlink(path);
    REQUIRE(bind(f->lsock, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    REQUIRE(listen(f->lsock, 1) == 0);
    REQUIRE(pthread_create(&f->thr, NULL, fake_main, f) == 0);
}

static void fake_stop(struct fake *f, const char *path)
{
    close(f->stop[1]);
    pthread_join(f->thr, NULL);
    close(f->stop[0]);
    close(f->lsock);
    unlink(path);
}

static int open_err(const char *uri, char *err, size_t errlen)
{
    struct nvme_target *t = NULL;
    int rc = nvme_target_open(uri, &t, err, errlen);
    if (rc == 0)
        nvme_target_close(t);
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_refusals(void)
{
    char err[NVME_ERRLEN], uri[256], path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    T_EQ(open_err("vfio-user://relative.sock", err, sizeof(err)), -EINVAL);
    T_CONTAINS(err, "absolute path");
    snprintf(uri, sizeof(uri), "vfio-user://%s/nope.sock", tmpdir);
    T_EQ(open_err(uri, err, sizeof(err)), -ENOENT);
    T_CONTAINS(err, "nope.sock");
    snprintf(uri, sizeof(uri), "vfio-user://%s?timeout_ms=0", tmpdir);
    T_EQ(open_err(uri, err, sizeof(err)), -EINVAL);
    T_CONTAINS(err, "timeout_ms");
    snprintf(uri, sizeof(uri), "vfio-user://%s?bogus=1", tmpdir);
    T_EQ(open_err(uri, err, sizeof(err)), -EINVAL);
    T_CONTAINS(err, "bogus");
    /* a directory holding neither cntrl nor ctrl0/cntrl */
    snprintf(uri, sizeof(uri), "vfio-user://%s", tmpdir);
    T_EQ(open_err(uri, err, sizeof(err)), -ENOENT);
    T_CONTAINS(err, "ctrl0/cntrl");
    /* a regular file */
    snprintf(path, sizeof(path), "%s/plain", tmpdir);
    FILE *fp = fopen(path, "w");
    REQUIRE(fp != NULL);
    fclose(fp);
    snprintf(uri, sizeof(uri), "vfio-user://%s", path);
    T_EQ(open_err(uri, err, sizeof(err)), -ENOTSOCK);
    T_CONTAINS(err, "not a UNIX socket");
    unlink(path);
    /* a socket nobody listens on */
    snprintf(path, sizeof(path), "%s/dead.sock", tmpdir);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    REQUIRE(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    snprintf(uri, sizeof(uri), "vfio-user://%s", path);
    T_EQ(open_err(uri, err, sizeof(err)), -ECONNREFUSED);
    T_CONTAINS(err, "no server listening");
    close(s);
    unlink(path);

    /* peers that are not vfio-user servers: one closes, one answers a major we do not speak, one is silent */
    struct fake f;
    snprintf(path, sizeof(path), "%s/fake.sock", tmpdir);
    snprintf(uri, sizeof(uri), "vfio-user://%s", path);
    fake_start(&f, path, FAKE_CLOSE);
    T_EQ(open_err(uri, err, sizeof(err)), -EPROTO);
    T_CONTAINS(err, "not a vfio-user server");
    T_CONTAINS(err, path);
    fake_stop(&f, path);
    fake_start(&f, path, FAKE_MAJOR_ONE);
    T_EQ(open_err(uri, err, sizeof(err)), -EPROTO);
    T_CONTAINS(err, "version 1.0");
    fake_stop(&f, path);
    fake_start(&f, path, FAKE_SILENT);
    snprintf(uri, sizeof(uri), "vfio-user://%s?timeout_ms=200", path);
    double t0 = now_s();
    T_EQ(open_err(uri, err, sizeof(err)), -ETIMEDOUT);
    T_CHECK(now_s() - t0 < 2.0);
    T_CONTAINS(err, "VERSION");
    T_CONTAINS(err, path);
    fake_stop(&f, path);

    /* vfio-user devices that are not what the driver drives */
    snprintf(uri, sizeof(uri), "vfio-user://%s", path);
    fake_start(&f, path, FAKE_NOT_PCI);
    T_EQ(open_err(uri, err, sizeof(err)), -ENODEV);
    T_CONTAINS(err, "not a PCI device");
    fake_stop(&f, path);
    fake_start(&f, path, FAKE_NOT_NVME);
    T_EQ(open_err(uri, err, sizeof(err)), -ENODEV);
    T_CONTAINS(err, "not an NVMe controller (class code 0x010601)");
    fake_stop(&f, path);
    fake_start(&f, path, FAKE_SMALL_BAR);
    T_EQ(open_err(uri, err, sizeof(err)), -ENODEV);
    T_CONTAINS(err, "BAR0 missing or too small");
    fake_stop(&f, path);
}

/* ------------------------------------------------------------------ against our own server, in process */

static struct vfu_server *srv;
static char srvdir[80];

static void server_up(void)
{
    char err[256];
    snprintf(srvdir, sizeof(srvdir), "%s/srv", tmpdir);
    mkdir(srvdir, 0700);
    int rc = vfu_server_open(SERVED_URI, srvdir, NULL, 2000, &srv, err, sizeof(err));
    if (rc == 0)
        rc = vfu_server_start(srv, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "server: %s (%d)\n", err, rc);
        exit(1);
    }
}

static struct nvme_target *open_served(void)
{
    char uri[160];
    snprintf(uri, sizeof(uri), "vfio-user://%s", srvdir);
    return t_open(uri);
}

static void rw_check(struct nvme_qpair *q, struct nvme_ns *ns, uint8_t *w, uint8_t *r, size_t woff, size_t roff,
                     uint64_t slba, size_t len, uint64_t seed)
{
    struct nvme_cpl cpl = {0};
    uint32_t nlb = (uint32_t)(len / nvme_ns_lba_size(ns));
    t_fill(w + woff, len, seed);
    T_EQ(t_io(q, ns, NVME_CMD_WRITE, slba, nlb, w + woff, len, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    memset(r + roff, 0xa5, len);
    T_EQ(t_io(q, ns, NVME_CMD_READ, slba, nlb, r + roff, len, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_CHECK(memcmp(w + woff, r + roff, len) == 0);
}

static void expect_status(const struct nvme_cpl *cpl, uint8_t sct, uint8_t sc)
{
    char s[128];
    if (cpl->err || cpl->sct != sct || cpl->sc != sc)
        fprintf(stderr, "got %s, want %s\n", nvme_cpl_str(cpl, s, sizeof(s)), nvme_status_name(sct, sc));
    T_CHECK(!cpl->err && cpl->sct == sct && cpl->sc == sc);
}

/* Both controllers of the directory come up and identify as the emulator does in process. */
static void test_identify(void)
{
    struct nvme_target *t = open_served();
    REQUIRE_EQ(nvme_target_nctrl(t), 2);
    T_STREQ(nvme_target_scheme(t), "vfio-user");
    struct nvme_target *e = t_open("emu://?ndev=2&nsze=32MiB&lbads=512&mdts=256KiB&nioq=4");
    for (unsigned i = 0; i < 2; i++) {
        const struct nvme_id_ctrl *id = nvme_ctrl_id(nvme_target_ctrl(t, i));
        const struct nvme_id_ctrl *ie = nvme_ctrl_id(nvme_target_ctrl(e, i));
        REQUIRE(id != NULL && ie != NULL);
        T_EQ(id->vid, NVME_EMU_VID);
        T_CHECK(memcmp(id->mn, ie->mn, sizeof(id->mn)) == 0);
        T_CHECK(memcmp(id->sn, ie->sn, sizeof(id->sn)) == 0);
        struct nvme_ns *ns = nvme_ctrl_ns(nvme_target_ctrl(t, i), 1);
        REQUIRE(ns != NULL);
        T_EQ(nvme_ns_nsze(ns), 32u * KIB * KIB / 512u);
        T_EQ(nvme_ctrl_max_qpairs(nvme_target_ctrl(t, i)), NIOQ);
    }
    nvme_target_close(e);
    nvme_target_close(t);
}

/* Write, read back, compare on both controllers over every PRP shape (PRP1 only, PRP2, a list). */
static void test_rw(void)
{
    struct nvme_target *t = open_served();
    REQUIRE_EQ(nvme_target_nctrl(t), 2);
    struct nvme_dma *dw, *dr;
    REQUIRE_EQ(nvme_dma_alloc(t, 1024 * KIB, &dw), 0);
    REQUIRE_EQ(nvme_dma_alloc(t, 1024 * KIB, &dr), 0);
    uint8_t *w = nvme_dma_vaddr(dw), *r = nvme_dma_vaddr(dr);
    T_CHECK(nvme_dma_iova(dw, w) >= VFU_CLIENT_IOVA_BASE);
    const size_t offs[] = {0, 4, 512, PAGE - 512};
    const size_t lens[] = {512, PAGE, 2 * PAGE, PAGE + 512, 3 * PAGE, 17 * PAGE + 1024, 256 * KIB};
    for (unsigned i = 0; i < 2; i++) {
        struct nvme_ctrl *c = nvme_target_ctrl(t, i);
        struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
        struct nvme_qpair *q;
        struct nvme_qpair_opts o = {.depth = 16, .timeout_ms = 2000};
        REQUIRE_EQ(nvme_qpair_create(c, &o, &q), 0);
        uint64_t seed = 100 * i + 1, slba = 0;
        for (size_t a = 0; a < sizeof(offs) / sizeof(offs[0]); a++)
            for (size_t b = 0; b < sizeof(lens) / sizeof(lens[0]); b++) {
                rw_check(q, ns, w, r, offs[a], offs[(a + b) % 4], slba, lens[b], seed++);
                slba += lens[b] / 512 + 3;
            }
        /* a queue's worth in flight at once */
        struct t_wait wt[8] = {0};
        for (unsigned k = 0; k < 8; k++)
            T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, k * 8, 8, r + k * PAGE, PAGE, t_cb, &wt[k]), 0);
        unsigned done = 0;
        for (unsigned spins = 0; done < 8 && spins < 10000000; spins++) {
            int n = nvme_qpair_poll(q, 0);
            if (n < 0)
                break;
            done += (unsigned)n;
        }
        T_EQ(done, 8);
        T_EQ(nvme_qpair_destroy(q), 0);
    }
    nvme_dma_free(dw);
    nvme_dma_free(dr);
    nvme_target_close(t);
}

/* The controller's own statuses through the wire; the queue grant bounds queue creation. */
static void test_queue_errors(void)
{
    struct nvme_target *t = open_served();
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *d;
    REQUIRE_EQ(nvme_dma_alloc(t, 64 * KIB, &d), 0);
    uint8_t *b = nvme_dma_vaddr(d);
    struct nvme_qpair *q[NIOQ + 1];
    struct nvme_qpair_opts o = {.depth = 8, .timeout_ms = 2000};
    for (unsigned i = 0; i < NIOQ; i++)
        REQUIRE_EQ(nvme_qpair_create(c, &o, &q[i]), 0);
    T_EQ(nvme_qpair_create(c, &o, &q[NIOQ]), -EBUSY); /* the grant is used up */
    struct nvme_cpl cpl = {0};
    struct nvme_sqe s;
    /* Create I/O CQ beyond the controller's queues: Invalid Queue Identifier */
    memset(&s, 0, sizeof(s));
    s.opc = NVME_ADM_CREATE_CQ;
    s.prp1 = nvme_dma_iova(d, b);
    s.cdw10 = NVME_CREATE_Q_CDW10(NIOQ + 1, 8);
    s.cdw11 = NVME_CREATE_Q_PC;
    T_EQ(nvme_ctrl_admin(c, &s, NULL, 0, &cpl, 2000), 0);
    expect_status(&cpl, NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID);
    /* a read past the namespace: LBA Out of Range */
    memset(&s, 0, sizeof(s));
    s.opc = NVME_CMD_READ;
    s.nsid = 1;
    s.cdw10 = (uint32_t)nvme_ns_nsze(ns);
    T_EQ(t_raw(q[0], &s, b, 512, &cpl), 0);
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
    /* an unknown namespace */
    s.cdw10 = 0;
    s.nsid = 9;
    T_EQ(t_raw(q[0], &s, b, 512, &cpl), 0);
    expect_status(&cpl, NVME_SCT_GENERIC, NVME_SC_INVALID_NS);
    for (unsigned i = NIOQ; i-- > 0;)
        T_EQ(nvme_qpair_destroy(q[i]), 0);
    nvme_dma_free(d);
    nvme_target_close(t);
}

/* Reset: old qpairs dead, new ones work, the data stays. */
static void test_reset(void)
{
    struct nvme_target *t = open_served();
    struct nvme_ctrl *c = nvme_target_ctrl(t, 1);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *dw, *dr;
    REQUIRE_EQ(nvme_dma_alloc(t, 64 * KIB, &dw), 0);
    REQUIRE_EQ(nvme_dma_alloc(t, 64 * KIB, &dr), 0);
    uint8_t *w = nvme_dma_vaddr(dw), *r = nvme_dma_vaddr(dr);
    struct nvme_qpair *q;
    struct nvme_qpair_opts o = {.depth = 8, .timeout_ms = 2000};
    REQUIRE_EQ(nvme_qpair_create(c, &o, &q), 0);
    rw_check(q, ns, w, r, 0, 0, 1000, 16 * KIB, 77);
    T_EQ(nvme_ctrl_reset(c), 0);
    T_EQ(nvme_qpair_submit(q, ns, NVME_CMD_READ, 0, 1, r, 512, NULL, NULL), -ENXIO);
    T_EQ(nvme_qpair_destroy(q), 0);
    REQUIRE_EQ(nvme_qpair_create(c, &o, &q), 0);
    struct nvme_cpl cpl = {0};
    memset(r, 0, 16 * KIB);
    T_EQ(t_io(q, ns, NVME_CMD_READ, 1000, 32, r, 16 * KIB, &cpl), 0);
    T_CHECK(nvme_cpl_ok(&cpl));
    T_CHECK(memcmp(w, r, 16 * KIB) == 0);
    T_EQ(nvme_qpair_destroy(q), 0);
    nvme_dma_free(dw);
    nvme_dma_free(dr);
    nvme_target_close(t);
}

/* One client per device: a second one waits, and gives up after its timeout_ms naming why. */
static void test_second_client(void)
{
    struct nvme_target *t = open_served();
    char uri[160], err[NVME_ERRLEN];
    snprintf(uri, sizeof(uri), "vfio-user://%s/ctrl0?timeout_ms=300", srvdir);
    double t0 = now_s();
    int rc = open_err(uri, err, sizeof(err));
    T_CHECK(now_s() - t0 < 3.0);
    T_CHECK(rc < 0);
    if (rc == -ETIMEDOUT)
        T_CONTAINS(err, "another client");
    else
        fprintf(stderr, "second client: %d %s\n", rc, err);
    nvme_target_close(t);
}

/* Close and open again: the server serves the next client, and the namespace kept what the last one wrote. */
static void test_reopen(void)
{
    for (unsigned round = 0; round < 3; round++) {
        struct nvme_target *t = open_served();
        REQUIRE_EQ(nvme_target_nctrl(t), 2);
        struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
        struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
        struct nvme_dma *d;
        REQUIRE_EQ(nvme_dma_alloc(t, 2 * PAGE, &d), 0);
        uint8_t *b = nvme_dma_vaddr(d), want[PAGE];
        struct nvme_qpair *q;
        struct nvme_qpair_opts o = {.depth = 4, .timeout_ms = 2000};
        REQUIRE_EQ(nvme_qpair_create(c, &o, &q), 0);
        struct nvme_cpl cpl = {0};
        if (round > 0) {
            t_fill(want, PAGE, 500 + round - 1);
            T_EQ(t_io(q, ns, NVME_CMD_READ, 4096, 8, b, PAGE, &cpl), 0);
            T_CHECK(nvme_cpl_ok(&cpl) && memcmp(b, want, PAGE) == 0);
        }
        t_fill(b, PAGE, 500 + round);
        T_EQ(t_io(q, ns, NVME_CMD_WRITE, 4096, 8, b, PAGE, &cpl), 0);
        T_CHECK(nvme_cpl_ok(&cpl));
        T_EQ(nvme_qpair_destroy(q), 0);
        nvme_dma_free(d);
        nvme_target_close(t);
    }
}

/* DMA objects allocated and freed from several threads while another does I/O: each request is one
 * critical section per connection. */
struct alloc_arg {
    struct nvme_target *t;
    int failures;
};

static void *alloc_main(void *p)
{
    struct alloc_arg *a = p;
    for (unsigned i = 0; i < 40; i++) {
        struct nvme_dma *d = NULL;
        if (nvme_dma_alloc(a->t, (1 + i % 5) * PAGE, &d) != 0) {
            a->failures++;
            continue;
        }
        memset(nvme_dma_vaddr(d), (int)i, PAGE);
        nvme_dma_free(d);
    }
    return NULL;
}

static void test_threads(void)
{
    struct nvme_target *t = open_served();
    struct alloc_arg a[3] = {{.t = t}, {.t = t}, {.t = t}};
    pthread_t thr[3];
    for (unsigned i = 0; i < 3; i++)
        REQUIRE(pthread_create(&thr[i], NULL, alloc_main, &a[i]) == 0);
    struct nvme_ctrl *c = nvme_target_ctrl(t, 1);
    struct nvme_dma *dw, *dr;
    REQUIRE_EQ(nvme_dma_alloc(t, 64 * KIB, &dw), 0);
    REQUIRE_EQ(nvme_dma_alloc(t, 64 * KIB, &dr), 0);
    struct nvme_qpair *q;
    struct nvme_qpair_opts o = {.depth = 8, .timeout_ms = 2000};
    REQUIRE_EQ(nvme_qpair_create(c, &o, &q), 0);
    for (unsigned i = 0; i < 20; i++)
        rw_check(q, nvme_ctrl_ns(c, 1), nvme_dma_vaddr(dw), nvme_dma_vaddr(dr), 0, 0, 64 * i, 32 * KIB, 900 + i);
    for (unsigned i = 0; i < 3; i++) {
        pthread_join(thr[i], NULL);
        T_EQ(a[i].failures, 0);
    }
    T_EQ(nvme_qpair_destroy(q), 0);
    nvme_dma_free(dw);
    nvme_dma_free(dr);
    nvme_target_close(t);
}

/* The perf engine takes vfio-user:// as it takes pci://: fill, then a verifying random mix. */
static void test_perf(void)
{
    char uri[160], err[PERF_ERRLEN] = "";
    snprintf(uri, sizeof(uri), "vfio-user://%s", srvdir);
    struct perf_target *t = NULL;
    struct perf_target_opts o = {.need_write = 1};
    REQUIRE_EQ(perf_target_open(uri, &o, &t, err, sizeof(err)), 0);
    T_EQ(t->ndevs, 2);
    T_STREQ(t->backend, "nvmelab-vfio-user");
    static struct perf_result res;
    struct perf_config v = {.pattern = PERF_PAT_RANDRW,
                            .rwmix = 50,
                            .iosize = 8192,
                            .qdepth = 8,
                            .nqueues = 2,
                            .nthreads = 2,
                            .runtime_ns = 200000000ull,
                            .seed = 7,
                            .verify = 1,
                            .lba_start = 0,
                            .lba_count = 8192};
    T_EQ(perf_fill(t, &v, &res, err, sizeof(err)), 0);
    T_EQ(res.errors, 0);
    int rc = perf_run(t, &v, &res, err, sizeof(err));
    if (rc)
        fprintf(stderr, "perf_run: %s\n", err);
    T_EQ(rc, 0);
    T_CHECK(res.ios > 0 && res.dev_ios[0] > 0 && res.dev_ios[1] > 0);
    T_EQ(res.errors, 0);
    T_EQ(res.verify_errors, 0);
    perf_target_close(t);
}

/* The server stops under an open target: commands end with an error, close returns, nothing hangs. */
static void test_server_gone(void)
{
    char uri[160];
    snprintf(uri, sizeof(uri), "vfio-user://%s?timeout_ms=500", srvdir);
    struct nvme_target *t = t_open(uri);
    struct nvme_ctrl *c = nvme_target_ctrl(t, 0);
    struct nvme_ns *ns = nvme_ctrl_ns(c, 1);
    struct nvme_dma *d;
    REQUIRE_EQ(nvme_dma_alloc(t, 2 * PAGE, &d), 0);
    struct nvme_qpair *q;
    struct nvme_qpair_opts o = {.depth = 4, .timeout_ms = 500};
    REQUIRE_EQ(nvme_qpair_create(c, &o, &q), 0);
    double t0 = now_s();
    vfu_server_close(srv);
    srv = NULL;
    struct nvme_cpl cpl = {0};
    int rc = t_io(q, ns, NVME_CMD_READ, 0, 8, nvme_dma_vaddr(d), PAGE, &cpl);
    T_CHECK(rc != 0 || cpl.err != 0); /* the command times out: nobody serves the queue */
    T_CHECK(nvme_ctrl_reset(c) < 0);  /* registers are gone */
    struct nvme_dma *d2 = NULL;
    T_CHECK(nvme_dma_alloc(t, PAGE, &d2) < 0); /* DMA_MAP finds no server */
    nvme_qpair_destroy(q);
    nvme_dma_free(d);
    nvme_target_close(t);
    T_CHECK(now_s() - t0 < 15.0);
    /* and a new open names the socket */
    char err[NVME_ERRLEN];
    T_CHECK(open_err(uri, err, sizeof(err)) < 0);
    T_CONTAINS(err, srvdir);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/nvmelab-vfu-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN_CASE(test_refusals);
    server_up();
    RUN_CASE(test_identify);
    RUN_CASE(test_rw);
    RUN_CASE(test_queue_errors);
    RUN_CASE(test_reset);
    RUN_CASE(test_second_client);
    RUN_CASE(test_reopen);
    RUN_CASE(test_threads);
    RUN_CASE(test_perf);
    RUN_CASE(test_server_gone);
    vfu_server_close(srv);
    rmdir(srvdir);
    rmdir(tmpdir);
    return CHECK_DONE("test_vfio_user_client");
}
