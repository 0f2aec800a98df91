/* SPDX-License-Identifier: BSD-3-Clause */
/* vfio_user_msg.c — one vfio-user message at a time over a SOCK_STREAM UNIX socket, descriptors as
 * SCM_RIGHTS (the rules are in vfio_user.h). */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "nvme/vfio_user.h"

#define VFU_NS_PER_MS 1000000ll

static long long vfu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000ll + ts.tv_nsec / VFU_NS_PER_MS;
}

/* Wait until sock is ready for `events` or the deadline passes (deadline < 0: no limit). */
static int vfu_wait(int sock, short events, long long deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline >= 0) {
            long long left = deadline - vfu_now_ms();
            if (left <= 0)
                return -ETIMEDOUT;
            ms = left > 60000 ? 60000 : (int)left;
        }
        struct pollfd p = {.fd = sock, .events = events};
        int n = poll(&p, 1, ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n > 0)
            return 0; /* readable, writable, hung up or in error: the next call says which */
    }
}

void vfu_close_fds(int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

int vfu_msg_send(int sock, const void *msg, size_t len, const int *fds, unsigned nfds, int timeout_ms)
{
    if (!msg || len < VFU_HDR_SIZE || len > VFU_MAX_MSG || nfds > VFU_MAX_FDS || (nfds && !fds))
        return -EMSGSIZE;
    struct vfu_hdr h;
    memcpy(&h, msg, sizeof(h));
    if (h.size != len)
        return -EMSGSIZE;
    long long deadline = timeout_ms < 0 ? -1 : vfu_now_ms() + timeout_ms;
    union {
        char buf[CMSG_SPACE(sizeof(int) * VFU_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    size_t done = 0;
    bool fds_sent = nfds == 0;
    while (done < len) {
        struct iovec iov = {.iov_base = (char *)msg + done, .iov_len = len - done};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (!fds_sent) {
            memset(&ctl, 0, sizeof(ctl));
            mh.msg_control = ctl.buf;
            mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
            struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
            memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = vfu_wait(sock, POLLOUT, deadline);
                if (rc)
                    return rc;
                continue;
            }
            if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
                return -ECONNRESET;
            return -errno;
        }
        fds_sent = true;
        done += (size_t)n;
    }
    return 0;
}

/* Collect the descriptors of one recvmsg into fds (room `room`, *have so far); extras are closed. */
static void vfu_take_fds(struct msghdr *mh, int *fds, unsigned room, unsigned *have)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const unsigned char *p = CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, p + i * sizeof(int), sizeof(int));
            if (*have < room)
                fds[(*have)++] = fd;
            else
                close(fd);
        }
    }
}

/* Read exactly len bytes into buf, gathering descriptors. */
static int vfu_read_full(int sock, char *buf, size_t len, int *fds, unsigned room, unsigned *have, long long deadline)
{
    size_t done = 0;
    while (done < len) {
        int rc = vfu_wait(sock, POLLIN, deadline);
        if (rc)
            return rc;
        union {
            char buf[CMSG_SPACE(sizeof(int) * VFU_MAX_FDS)];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {.iov_base = buf + done, .iov_len = len - done};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
        ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            if (errno == ECONNRESET || errno == ENOTCONN || errno == EPIPE)
                return -ECONNRESET;
            return -errno;
        }
        vfu_take_fds(&mh, fds, room, have);
        if (n == 0)
            return -ECONNRESET;
        done += (size_t)n;
    }
    return 0;
}

int vfu_msg_recv(int sock, void *buf, size_t cap, size_t *len, int *fds, unsigned *nfds, int timeout_ms)
{
    int dummy_fds[VFU_MAX_FDS];
    unsigned room = 0, have = 0;
    if (nfds && fds) {
        room = *nfds < VFU_MAX_FDS ? *nfds : VFU_MAX_FDS;
        *nfds = 0;
    } else {
        fds = dummy_fds;
        if (nfds)
            *nfds = 0;
    }
    if (len)
        *len = 0;
    if (!buf || cap < VFU_HDR_SIZE)
        return -EMSGSIZE;
    long long deadline = timeout_ms < 0 ? -1 : vfu_now_ms() + timeout_ms;
    int rc = vfu_read_full(sock, buf, VFU_HDR_SIZE, fds, room, &have, deadline);
    if (rc)
        goto fail;
    struct vfu_hdr h;
    memcpy(&h, buf, sizeof(h));
    if (h.size < VFU_HDR_SIZE) {
        rc = -EPROTO;
        goto fail;
    }
    if (h.size > VFU_MAX_MSG || h.size > cap) {
        rc = -EMSGSIZE;
        goto fail;
    }
    rc = vfu_read_full(sock, (char *)buf + VFU_HDR_SIZE, h.size - VFU_HDR_SIZE, fds, room, &have, deadline);
    if (rc)
        goto fail;
    if (len)
        *len = h.size;
    if (nfds && fds != dummy_fds)
        *nfds = have;
    return 0;
fail:
    vfu_close_fds(fds, have);
    return rc;
}

const char *vfu_cmd_name(unsigned cmd)
{
    switch (cmd) {
    case VFU_CMD_VERSION:
        return "VERSION";
    case VFU_CMD_DMA_MAP:
        return "DMA_MAP";
    case VFU_CMD_DMA_UNMAP:
        return "DMA_UNMAP";
    case VFU_CMD_DEVICE_GET_INFO:
        return "DEVICE_GET_INFO";
    case VFU_CMD_DEVICE_GET_REGION_INFO:
        return "DEVICE_GET_REGION_INFO";
    case VFU_CMD_DEVICE_GET_REGION_IO_FDS:
        return "DEVICE_GET_REGION_IO_FDS";
    case VFU_CMD_DEVICE_GET_IRQ_INFO:
        return "DEVICE_GET_IRQ_INFO";
    case VFU_CMD_DEVICE_SET_IRQS:
        return "DEVICE_SET_IRQS";
    case VFU_CMD_REGION_READ:
        return "REGION_READ";
    case VFU_CMD_REGION_WRITE:
        return "REGION_WRITE";
    case VFU_CMD_DMA_READ:
        return "DMA_READ";
    case VFU_CMD_DMA_WRITE:
        return "DMA_WRITE";
    case VFU_CMD_DEVICE_RESET:
        return "DEVICE_RESET";
    default:
        return "UNKNOWN";
    }
}
