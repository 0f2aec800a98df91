/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_vfio_user.c — libFuzzer harness of the vfio-user server's message handling (src/tools/vfu_dev.c,
 * vfu_json.c, vfu_pci.c): what a client of `nvmelab-serve` may send.
 *
 * One served emu:// controller (mode=thread, a small RAM namespace) lives for the whole run. An input is
 * a mode byte, then a stream of messages as a client would send them: each message is taken from the
 * stream by its header's size field (cut short at the end of the input, so truncated messages occur too)
 * and handed to vfu_dev_handle() with one memfd of FUZZ_MEMFD_SIZE bytes when its header carries the
 * otherwise unused flag bit FUZZ_F_FD (so DMA_MAP and SET_IRQS see 0 or 1 descriptors). Mode bit 0 set:
 * a valid VERSION is handled first, so the rest reaches every command. After a message the server would
 * close the connection for (-EPROTO), or at the end of the input, the client is disconnected, which must
 * leave the controller reset and no DMA window behind. Mode bit 1 set (stream mode): the bytes are written
 * into a socketpair instead (with one memfd as SCM_RIGHTS on the first byte when mode bit 2 is set) and
 * taken apart by the framing code, vfu_msg_recv(), as the server's connection loop does. Checked: every
 * reply is a well-formed reply to the message (same id and command, size = header + payload, an error
 * reply carries an errno and nothing else), no descriptor leaks (every received fd is closed by the
 * handler, except SET_IRQS's eventfds, which the device keeps: those by the disconnect at the latest), and
 * the framing refuses only with -ECONNRESET, -EPROTO or -EMSGSIZE.
 * Seeds: corpus/vfio_user/, written by make_vfio_user_seeds.py.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "nvme/emu/emu.h"
#include "nvme/uri.h"
#include "nvme/vfio_user.h"
#include "tools/vfu_server.h"

#define FUZZ_URI         "emu://?mode=thread&nsze=1M&nioq=2&mqes=64"
#define FUZZ_MEMFD_SIZE  (64u << 10)
#define FUZZ_F_FD        0x80u /* header flag bit (unused by the protocol) asking the harness for one fd */
#define FUZZ_MODE_VER    0x01u
#define FUZZ_MAX_MSGS    64u
#define FUZZ_MODE_STREAM 0x02u
#define FUZZ_MODE_FD     0x04u
#define FUZZ_MAX_STREAM  (64u << 10) /* below a socketpair's buffer: the one write never blocks */
#define FUZZ_RECV_MS     1000        /* never waited for: the whole input is in the socket, then EOF */

#define FUZZ_MAX_KEPT    (FUZZ_MAX_MSGS * VFU_MAX_FDS) /* SET_IRQS descriptors the device may keep in one input */

static struct nvme_emu_set *g_set;
static struct vfu_dev *g_dev;
static int g_kept[FUZZ_MAX_KEPT]; /* descriptors SET_IRQS may have kept: closed by the disconnect */
static unsigned g_nkept;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_vfio_user: %s\n", what);
    abort();
}

static void setup(void)
{
    struct nvme_uri *u = NULL;
    char err[256];
    if (nvme_uri_parse(FUZZ_URI, &u, err, sizeof(err)) || nvme_emu_target_open(u, &g_set, err, sizeof(err)))
        fail(err);
    nvme_uri_free(u);
    if (vfu_dev_open(g_set, 0, &g_dev))
        fail("vfu_dev_open");
}

static void check_reply(const struct vfu_hdr *cmd, const struct vfu_reply *r)
{
    if (cmd->flags & VFU_F_NO_REPLY) {
        if (r->len)
            fail("a reply to a NO_REPLY command");
        return;
    }
    if (r->len < VFU_HDR_SIZE || r->len > VFU_MAX_MSG)
        fail("reply size");
    struct vfu_hdr h;
    memcpy(&h, r->msg, sizeof(h));
    if (h.size != r->len || h.msg_id != cmd->msg_id || h.cmd != cmd->cmd ||
        (h.flags & VFU_F_TYPE_MASK) != VFU_F_TYPE_REPLY)
        fail("reply header");
    if ((h.flags & VFU_F_ERROR) && (!h.error || r->len != VFU_HDR_SIZE || r->nfds))
        fail("error reply");
    if (!(h.flags & VFU_F_ERROR) && h.error)
        fail("errno in a success reply");
    if (r->nfds > 1)
        fail("reply fds");
}

static int memfd_new(void)
{
    int fd = memfd_create("fuzz-dma", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, FUZZ_MEMFD_SIZE))
        fail("memfd");
    return fd;
}

/* Hand one message and its descriptors to the server; every descriptor must be closed afterwards. */
static void handle_with(const uint8_t *msg, size_t len, int *fds, unsigned nfds, bool *closed)
{
    struct vfu_hdr h = {0};
    memcpy(&h, msg, len < sizeof(h) ? len : sizeof(h));
    int probe[VFU_MAX_FDS];
    if (nfds)
        memcpy(probe, fds, nfds * sizeof(int));
    struct vfu_reply r;
    int rc = vfu_dev_handle(g_dev, msg, len, fds, nfds, &r);
    bool irqs = len >= sizeof(h) && h.cmd == VFU_CMD_DEVICE_SET_IRQS; /* its eventfds are the device's now */
    for (unsigned i = 0; i < nfds; i++)
        if (irqs && g_nkept < FUZZ_MAX_KEPT)
            g_kept[g_nkept++] = probe[i];
        else if (fcntl(probe[i], F_GETFD) != -1)
            fail("a received fd was left open");
    if (rc == -EPROTO) {
        *closed = true;
        return;
    }
    if (rc)
        fail("vfu_dev_handle: neither 0 nor -EPROTO");
    check_reply(&h, &r);
}

/* A message cut from the input, with a memfd when its header asks for one. */
static void handle(const uint8_t *msg, size_t len, bool *closed)
{
    struct vfu_hdr h = {0};
    memcpy(&h, msg, len < sizeof(h) ? len : sizeof(h));
    int fds[1] = {-1};
    unsigned nfds = 0;
    if (len >= sizeof(h) && (h.flags & FUZZ_F_FD)) {
        fds[0] = memfd_new();
        nfds = 1;
    }
    handle_with(msg, len, fds, nfds, closed);
}

/* The input as a byte stream through a socketpair and the framing code. */
static void stream(const uint8_t *data, size_t size, bool with_fd)
{
    static uint8_t *buf;
    if (!buf && !(buf = malloc(VFU_MAX_MSG)))
        fail("malloc");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        fail("socketpair");
    if (size > FUZZ_MAX_STREAM)
        size = FUZZ_MAX_STREAM;
    if (size) {
        union {
            char b[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {.iov_base = (void *)(uintptr_t)data, .iov_len = size};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        int mfd = with_fd ? memfd_new() : -1;
        if (with_fd) {
            memset(&ctl, 0, sizeof(ctl));
            mh.msg_control = ctl.b;
            mh.msg_controllen = sizeof(ctl.b);
            struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &mfd, sizeof(int));
        }
        if (sendmsg(sv[0], &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)size)
            fail("sendmsg");
        if (mfd >= 0)
            close(mfd);
    }
    shutdown(sv[0], SHUT_WR);
    bool closed = false;
    for (unsigned n = 0; n < FUZZ_MAX_MSGS && !closed; n++) {
        int fds[VFU_MAX_FDS];
        unsigned nfds = VFU_MAX_FDS;
        size_t len = 0;
        int r = vfu_msg_recv(sv[1], buf, VFU_MAX_MSG, &len, fds, &nfds, FUZZ_RECV_MS);
        if (r == -ECONNRESET || r == -EPROTO || r == -EMSGSIZE)
            break;
        if (r)
            fail("vfu_msg_recv: an unexpected error");
        handle_with(buf, len, fds, nfds, &closed);
    }
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_dev)
        setup();
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    bool closed = false;
    if (mode & FUZZ_MODE_VER) {
        uint8_t v[VFU_HDR_SIZE + sizeof(struct vfu_version)];
        struct vfu_hdr h;
        struct vfu_version ver = {.major = VFU_VERSION_MAJOR, .minor = VFU_VERSION_MINOR};
        vfu_hdr_init(&h, 0, VFU_CMD_VERSION, sizeof(v), VFU_F_TYPE_COMMAND, 0);
        memcpy(v, &h, sizeof(h));
        memcpy(v + sizeof(h), &ver, sizeof(ver));
        handle(v, sizeof(v), &closed);
    }
    if (mode & FUZZ_MODE_STREAM) {
        stream(data, size, mode & FUZZ_MODE_FD);
        size = 0;
    }
    for (unsigned n = 0; n < FUZZ_MAX_MSGS && size && !closed; n++) {
        size_t len = size;
        if (size >= VFU_HDR_SIZE) {
            struct vfu_hdr h;
            memcpy(&h, data, sizeof(h));
            if (h.size >= VFU_HDR_SIZE && h.size < size)
                len = h.size;
        }
        /* a private copy: the handler must not depend on anything past len */
        uint8_t *m = malloc(len ? len : 1);
        if (!m)
            fail("malloc");
        memcpy(m, data, len);
        handle(m, len, &closed);
        free(m);
        data += len;
        size -= len;
    }
    vfu_dev_disconnect(g_dev);
    if (vfu_dev_dma_count(g_dev) || nvme_emu_dma_count(g_set))
        fail("a DMA window outlived its client");
    for (unsigned i = 0; i < g_nkept; i++)
        if (fcntl(g_kept[i], F_GETFD) != -1)
            fail("an eventfd outlived its client");
    g_nkept = 0;
    return 0;
}
