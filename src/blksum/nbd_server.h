/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd_server.h — the qemu-nbd that blksum starts to serve an image (nbd.c reads it with libnbd): started
 * with systemd socket activation on a unix socket in a private directory, connected to before it starts.
 *
 * Key functions: blksum_nbd_spawn() starts qemu-nbd and returns a socket already connected to it (the
 * connection waits in the listening socket's backlog until qemu-nbd accepts it); the socket file and its
 * directory are removed before the fork, and directories left by a blksum that was killed in between (their
 * names hold its pid) are removed by the next. blksum_nbd_reap() says how a server that ended did.
 * Caveats: the image goes to qemu-nbd as an absolute path after "--" (a name is data); the server gets
 * SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG), so start it on a thread that outlives
 * the source. Errors: negative errno, one line in err. No libnbd needed.
 */
#ifndef NVMELAB_BLKSUM_NBD_SERVER_H
#define NVMELAB_BLKSUM_NBD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/** A qemu-nbd that was started: its pid, and our end of the connection to it (close-on-exec). */
struct blksum_nbd_server {
    pid_t pid;
    int fd;
};

/** The first executable name on PATH, into out. 0 or -ENOENT. */
int blksum_nbd_find_program(const char *name, char *out, size_t outlen);
/** Start qemu-nbd (prog) serving path read-only as format with aio mode aio; quiet: its standard error
 * goes to /dev/null. 0 (sp filled) or -errno with one line in err. */
int blksum_nbd_spawn(struct blksum_nbd_server *sp, const char *prog, const char *path, const char *format,
                     const char *aio, bool quiet, char *err, size_t errlen);
/** The server's wait status once it has ended, waiting for that up to wait_ms: true (reaped) or false (still
 * running). */
bool blksum_nbd_reap(pid_t pid, int wait_ms, int *status);
/** Remove the socket directories of blksum processes that no longer run, under base (or /tmp). */
void blksum_nbd_remove_stale(const char *base);

#endif /* NVMELAB_BLKSUM_NBD_SERVER_H */
