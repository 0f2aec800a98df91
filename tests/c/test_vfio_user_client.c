/* SPDX-License-Identifier: BSD-3-Clause */
/* test_vfio_user_client.c — the driver as a vfio-user client (vfio-user:// targets): refusals with one message
 * each (bad URI, no socket, nobody listening, not a vfio-user server, a stalled server); then against an
 * in-process server (vfu_server.h) serving emu:// controllers: bring-up and identify of two controllers
 * through a directory, write/read/verify across PRP shapes, queue errors, reset, a second client after the
 * first closed, and a server stopped under the client (an error, never a hang). */
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

#include "nvme/vfio_user.h"
#include "test_driver.h"

#define KIB  1024u
#define PAGE 4096u

static char tmpdir[64];

/* ------------------------------------------------------------------ a fake peer for the refusals */

enum fake_mode {
    FAKE_CLOSE,     /* accept, close at once */
    FAKE_SILENT,    /* accept, read, never answer */
    FAKE_MAJOR_ONE, /* answer VERSION with major 1 */
};

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
    /* a directory without ctrl0.sock */
    snprintf(uri, sizeof(uri), "vfio-user://%s", tmpdir);
    T_EQ(open_err(uri, err, sizeof(err)), -ENOENT);
    T_CONTAINS(err, "ctrl0.sock");
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
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/nvmelab-vfu-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN_CASE(test_refusals);
    rmdir(tmpdir);
    return CHECK_DONE("test_vfio_user_client");
}
