/* SPDX-License-Identifier: BSD-3-Clause */
/* vfu_server.c — the emu:// target, its listening sockets and one serving thread per controller
 * (vfu_server.h). */
#include "tools/vfu_server.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "nvme/emu/emu.h"
#include "nvme/errbuf.h"
#include "nvme/uri.h"

#define VFU_BACKLOG  4
#define VFU_DIR_MODE 0700

struct vfu_slot {
    struct vfu_server *s;
    unsigned i;
    struct vfu_dev *dev;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char sub[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* DIR/ctrl<i> (--dir only) */
    int lfd;
    bool bound, started, made_sub;
    pthread_t thread;
    pthread_mutex_t conn_lock; /* guards conn: vfu_server_close shuts it down to wake a blocked receive */
    int conn;                  /* the connection being served, -1 when none */
};

struct vfu_server {
    struct nvme_emu_set *set;
    unsigned n;
    struct vfu_slot *slots;
    int timeout_ms;
    atomic_bool stop;
};

/* Open the emu:// target with mode=thread (added when absent, mode=inline refused). */
static int open_target(const char *uri, struct nvme_emu_set **set, char *err, size_t errlen)
{
    struct nvme_uri *u = NULL;
    char e[512];
    int r = nvme_uri_parse(uri, &u, e, sizeof(e));
    if (r)
        return nvme_errf(err, errlen, r, "%s", e);
    if (strcmp(u->scheme, "emu") != 0) {
        nvme_uri_free(u);
        return nvme_errf(err, errlen, -EINVAL, "not an emu:// URI: '%s' (nvmelab-serve serves emulated controllers)",
                         uri);
    }
    const char *mode = nvme_uri_get(u, "mode");
    if (mode && strcmp(mode, "thread") != 0) {
        nvme_errf(err, errlen, -EINVAL,
                  "mode=%s cannot be served: the server needs mode=thread (the controller's service thread polls "
                  "the doorbell page the client writes)",
                  mode);
        nvme_uri_free(u); /* mode points into it */
        return -EINVAL;
    }
    if (!mode) {
        if (u->nparams >= NVME_URI_MAX_PARAMS) {
            nvme_uri_free(u);
            return nvme_errf(err, errlen, -EINVAL, "too many URI parameters to add mode=thread");
        }
        u->params[u->nparams++] = (struct nvme_uri_param){.key = "mode", .value = "thread"};
    }
    r = nvme_emu_target_open(u, set, e, sizeof(e));
    nvme_uri_free(u);
    if (r)
        return nvme_errf(err, errlen, r, "%s", e);
    return 0;
}

/* Where controller i listens: DIR/ctrl<i>/cntrl, or socket_path. */
static int slot_paths(struct vfu_slot *sl, const char *dir, const char *socket_path, char *err, size_t errlen)
{
    char name[32];
    snprintf(name, sizeof(name), VFU_CTRL_DIR, sl->i);
    int len = dir ? snprintf(sl->path, sizeof(sl->path), "%s/%s/" VFU_SOCKET_NAME, dir, name)
                  : snprintf(sl->path, sizeof(sl->path), "%s", socket_path);
    if (len < 0 || (size_t)len >= sizeof(sl->path))
        return nvme_errf(err, errlen, -ENAMETOOLONG, "socket path too long (at most %zu bytes): %s%s%s",
                         sizeof(sl->path) - 1, dir ? dir : socket_path, dir ? "/ctrl<i>/" : "",
                         dir ? VFU_SOCKET_NAME : "");
    if (!dir)
        return 0;
    snprintf(sl->sub, sizeof(sl->sub), "%s/%s", dir, name);
    struct stat st;
    if (mkdir(sl->sub, VFU_DIR_MODE) == 0)
        sl->made_sub = true;
    else if (errno != EEXIST || stat(sl->sub, &st) || !S_ISDIR(st.st_mode))
        return nvme_errf(err, errlen, errno == EEXIST ? -EEXIST : -errno, "cannot make directory %s: %s", sl->sub,
                         errno == EEXIST ? "something else is there" : strerror(errno));
    return 0;
}

/* A listening socket at path; an old socket file there is replaced, anything else refused. */
static int listen_at(struct vfu_slot *sl, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(sl->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return nvme_errf(err, errlen, -EEXIST, "%s exists and is not a socket", sl->path);
        unlink(sl->path);
    }
    sl->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sl->lfd < 0)
        return nvme_errf(err, errlen, -errno, "socket for %s: %s", sl->path, strerror(errno));
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, sl->path, strlen(sl->path) + 1);
    if (bind(sl->lfd, (struct sockaddr *)&a, sizeof(a)))
        return nvme_errf(err, errlen, -errno, "bind %s: %s", sl->path, strerror(errno));
    sl->bound = true;
    if (listen(sl->lfd, VFU_BACKLOG))
        return nvme_errf(err, errlen, -errno, "listen %s: %s", sl->path, strerror(errno));
    return 0;
}

int vfu_server_open(const char *uri, const char *dir, const char *socket_path, int timeout_ms, struct vfu_server **out,
                    char *err, size_t errlen)
{
    if (!uri || !out || (!dir == !socket_path) || timeout_ms <= 0)
        return nvme_errf(err, errlen, -EINVAL,
                         "give a URI, exactly one of a directory or a socket path, and a "
                         "positive timeout");
    *out = NULL;
    struct vfu_server *s = calloc(1, sizeof(*s));
    if (!s)
        return nvme_errf(err, errlen, -ENOMEM, "out of memory");
    s->timeout_ms = timeout_ms;
    int r = open_target(uri, &s->set, err, errlen);
    if (r) {
        free(s);
        return r;
    }
    unsigned n = nvme_emu_set_count(s->set);
    if (socket_path && n != 1) {
        vfu_server_close(s);
        return nvme_errf(err, errlen, -EINVAL, "--socket serves one controller, the URI has ndev=%u: use --dir", n);
    }
    s->slots = calloc(n, sizeof(*s->slots));
    if (!s->slots) {
        vfu_server_close(s);
        return nvme_errf(err, errlen, -ENOMEM, "out of memory");
    }
    for (unsigned i = 0; i < n; i++) {
        struct vfu_slot *sl = &s->slots[i];
        s->n = i + 1;
        sl->s = s;
        sl->i = i;
        sl->lfd = -1;
        sl->conn = -1;
        pthread_mutex_init(&sl->conn_lock, NULL);
        if ((r = slot_paths(sl, dir, socket_path, err, errlen))) {
            vfu_server_close(s);
            return r;
        }
        if ((r = vfu_dev_open(s->set, i, &sl->dev))) {
            vfu_server_close(s);
            return nvme_errf(err, errlen, r, "controller %u cannot be served: %s", i, strerror(-r));
        }
        if ((r = listen_at(sl, err, errlen))) {
            vfu_server_close(s);
            return r;
        }
    }
    *out = s;
    return 0;
}

static void *slot_main(void *arg)
{
    struct vfu_slot *sl = arg;
    struct vfu_server *s = sl->s;
    while (!atomic_load(&s->stop)) {
        struct pollfd pf = {.fd = sl->lfd, .events = POLLIN};
        int n = poll(&pf, 1, VFU_POLL_MS);
        if (n <= 0)
            continue;
        int conn = accept4(sl->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0)
            continue;
        pthread_mutex_lock(&sl->conn_lock);
        sl->conn = conn;
        pthread_mutex_unlock(&sl->conn_lock);
        vfu_dev_serve(sl->dev, conn, s->timeout_ms, &s->stop); /* one client at a time */
        pthread_mutex_lock(&sl->conn_lock);
        sl->conn = -1;
        close(conn);
        pthread_mutex_unlock(&sl->conn_lock);
    }
    return NULL;
}

int vfu_server_start(struct vfu_server *s, char *err, size_t errlen)
{
    for (unsigned i = 0; i < s->n; i++) {
        int r = pthread_create(&s->slots[i].thread, NULL, slot_main, &s->slots[i]);
        if (r)
            return nvme_errf(err, errlen, -r, "cannot start the thread of %s: %s", s->slots[i].path, strerror(r));
        s->slots[i].started = true;
    }
    return 0;
}

unsigned vfu_server_count(const struct vfu_server *s)
{
    return s ? s->n : 0;
}

const char *vfu_server_path(const struct vfu_server *s, unsigned i)
{
    return s && i < s->n ? s->slots[i].path : NULL;
}

struct nvme_emu_set *vfu_server_set(const struct vfu_server *s)
{
    return s ? s->set : NULL;
}

void vfu_server_stop(struct vfu_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, true);
    for (unsigned i = 0; i < s->n && s->slots; i++) { /* a thread waiting inside a message wakes up now */
        struct vfu_slot *sl = &s->slots[i];
        pthread_mutex_lock(&sl->conn_lock);
        if (sl->conn >= 0)
            shutdown(sl->conn, SHUT_RDWR);
        pthread_mutex_unlock(&sl->conn_lock);
    }
    for (unsigned i = 0; i < s->n && s->slots; i++) {
        struct vfu_slot *sl = &s->slots[i];
        if (sl->started)
            pthread_join(sl->thread, NULL); /* its connection is closed and its client disconnected */
        sl->started = false;
    }
}

void vfu_server_close(struct vfu_server *s)
{
    if (!s)
        return;
    vfu_server_stop(s);
    for (unsigned i = 0; i < s->n && s->slots; i++) {
        struct vfu_slot *sl = &s->slots[i];
        if (sl->lfd >= 0)
            close(sl->lfd);
        if (sl->bound)
            unlink(sl->path);
        if (sl->made_sub)
            rmdir(sl->sub); /* only when empty: anything a user put there stays */
        vfu_dev_close(sl->dev);
        pthread_mutex_destroy(&sl->conn_lock);
    }
    free(s->slots);
    nvme_emu_set_close(s->set);
    free(s);
}
