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
 * leave the controller reset and no DMA window behind. Checked: every reply is a well-formed reply to the
 * message (same id and command, size = header + payload, an error reply carries an errno and nothing
 * else), and no descriptor leaks (every received fd is closed by the handler).
 * Seeds: corpus/vfio_user/, written by make_vfio_user_seeds.py.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nvme/emu/emu.h"
#include "nvme/uri.h"
#include "nvme/vfio_user.h"
#include "tools/vfu_server.h"

#define FUZZ_URI        "emu://?mode=thread&nsze=1M&nioq=2&mqes=64"
#define FUZZ_MEMFD_SIZE (64u << 10)
#define FUZZ_F_FD       0x80u /* header flag bit (unused by the protocol) asking the harness for one fd */
#define FUZZ_MODE_VER   0x01u
#define FUZZ_MAX_MSGS   64u

static struct nvme_emu_set *g_set;
static struct vfu_dev *g_dev;

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
    int probe = fds[0];
    struct vfu_reply r;
    int rc = vfu_dev_handle(g_dev, msg, len, fds, nfds, &r);
    if (probe >= 0 && fcntl(probe, F_GETFD) != -1)
        fail("a received fd was left open");
    if (rc == -EPROTO) {
        *closed = true;
        return;
    }
    if (rc)
        fail("vfu_dev_handle: neither 0 nor -EPROTO");
    check_reply(&h, &r);
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
    return 0;
}
