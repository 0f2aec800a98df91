/* SPDX-License-Identifier: BSD-3-Clause */
/* nbd_server.c — the qemu-nbd that blksum starts, and its socket (nbd_server.h). */
#include "blksum/nbd_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NBD_SOCKET_FD     3 /* systemd socket activation: the first passed descriptor */
#define NBD_PID_DIGITS    20
#define NBD_DIR_PREFIX    "nvmelab-blksum-"
#define NBD_SOCK_NAME     "nbd.sock"
#define NBD_DIR_RANDOM    "XXXXXX"
#define NBD_EXIT_NOPARENT 125 /* the child found its parent gone before it could be told */
#define NBD_EXIT_NOEXEC   127
#define NBD_REAP_STEP_MS  10

extern char **environ;

int blksum_nbd_find_program(const char *name, char *out, size_t outlen)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        if (len && (size_t)snprintf(out, outlen, "%.*s/%s", (int)len, path, name) < outlen && access(out, X_OK) == 0)
            return 0;
        path += len + (path[len] == ':');
    }
    return -ENOENT;
}

/* "nvmelab-blksum-<pid>-XXXXXX" -> pid; 0 for any other name. */
static pid_t dir_owner(const char *name)
{
    size_t plen = strlen(NBD_DIR_PREFIX);
    if (strncmp(name, NBD_DIR_PREFIX, plen) != 0)
        return 0;
    const char *p = name + plen;
    long long pid = 0;
    size_t nd = 0;
    for (; p[nd] >= '0' && p[nd] <= '9' && nd < NBD_PID_DIGITS; nd++)
        pid = pid * 10 + (p[nd] - '0');
    if (!nd || p[nd] != '-' || strlen(p + nd + 1) != strlen(NBD_DIR_RANDOM) || pid <= 0 || pid != (pid_t)pid)
        return 0;
    return (pid_t)pid;
}

void blksum_nbd_remove_stale(const char *base)
{
    int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = bfd >= 0 ? fdopendir(bfd) : NULL;
    if (!d) {
        if (bfd >= 0)
            close(bfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t pid = dir_owner(e->d_name);
        struct stat st;
        /* ours (this user's), a directory, and its blksum no longer runs */
        if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        if (fstatat(bfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
            continue;
        int dfd = openat(bfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0) {
            unlinkat(dfd, NBD_SOCK_NAME, 0);
            close(dfd);
        }
        unlinkat(bfd, e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* The child: dies with its parent (SIGKILL: qemu reads SIGTERM only in its main loop), and checks the
 * parent did not die before that was set; then fd 3 = the listening socket, LISTEN_PID = its own pid, no
 * signal blocked, and qemu-nbd. Only async-signal-safe calls (environment and argv built before fork). */
static void exec_server(pid_t parent, int sock, const char *prog, char *const argv[], char **envp, char *pidvar,
                        bool quiet)
{
    char digits[NBD_PID_DIGITS];
    int nd = 0;
    sigset_t none;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(NBD_EXIT_NOPARENT);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (quiet) { /* a first try that is retried on failure: the retry says what went wrong */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDERR_FILENO);
    }
    if (sock == NBD_SOCKET_FD)
        fcntl(sock, F_SETFD, 0);
    else if (dup2(sock, NBD_SOCKET_FD) < 0)
        _exit(126);
    for (pid_t p = getpid(); p > 0 && nd < NBD_PID_DIGITS; p /= 10)
        digits[nd++] = (char)('0' + p % 10);
    for (int i = 0; i < nd; i++)
        pidvar[strlen("LISTEN_PID=") + i] = digits[nd - 1 - i];
    pidvar[strlen("LISTEN_PID=") + nd] = '\0';
    execve(prog, argv, envp);
    _exit(NBD_EXIT_NOEXEC);
}

/* path as an absolute path (malloc'd): the current directory's name before a relative one. */
static char *absolute(const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char *cwd = getcwd(NULL, 0), *out = NULL;
    if (cwd && asprintf(&out, "%s/%s", cwd, path) < 0)
        out = NULL;
    free(cwd);
    return out;
}

/* A listening socket in a fresh private directory under base (or /tmp), and our connection to it waiting in
 * its backlog; the socket file and the directory are removed before this returns. */
static int listen_and_connect(int *lsock, int *csock, char *err, size_t errlen)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char dir[sizeof(addr.sun_path) - sizeof("/" NBD_SOCK_NAME) + 1];
    const char *base = getenv("TMPDIR");
    int rc = 0;
    *lsock = *csock = -1;
    /* the private directory goes under $TMPDIR when a socket path there fits, else /tmp */
    if (!base || !*base ||
        snprintf(dir, sizeof(dir), "%s/" NBD_DIR_PREFIX "%d-" NBD_DIR_RANDOM, base, (int)getpid()) >= (int)sizeof(dir))
        snprintf(dir, sizeof(dir), "/tmp/" NBD_DIR_PREFIX "%d-" NBD_DIR_RANDOM, (int)getpid());
    *strrchr(dir, '/') = '\0';
    blksum_nbd_remove_stale(dir);
    dir[strlen(dir)] = '/';
    if (!mkdtemp(dir)) {
        rc = -errno;
        snprintf(err, errlen, "nbd: cannot create a private directory %s: %s", dir, strerror(-rc));
        return rc;
    }
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/" NBD_SOCK_NAME, dir);
    *lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *csock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*lsock < 0 || *csock < 0 || bind(*lsock, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(*lsock, 1) < 0 ||
        connect(*csock, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "nbd: socket %s: %s", addr.sun_path, strerror(-rc));
    }
    unlink(addr.sun_path);
    rmdir(dir);
    if (rc < 0) {
        if (*lsock >= 0)
            close(*lsock);
        if (*csock >= 0)
            close(*csock);
        *lsock = *csock = -1;
    }
    return rc;
}

int blksum_nbd_spawn(struct blksum_nbd_server *sp, const char *prog, const char *path, const char *format,
                     const char *aio, bool quiet, char *err, size_t errlen)
{
    char fmtarg[64], aioarg[32];
    char pidvar[sizeof("LISTEN_PID=") + NBD_PID_DIGITS] = "LISTEN_PID=";
    int lsock, rc;
    *sp = (struct blksum_nbd_server){.pid = 0, .fd = -1};
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    char **envp = calloc(nenv + 3, sizeof(*envp));
    char *abspath = absolute(path);
    if (!envp || !abspath) {
        free(envp);
        free(abspath);
        snprintf(err, errlen, "%s: out of memory (or the current directory is gone)", path);
        return -ENOMEM;
    }
    size_t k = 0;
    envp[k++] = pidvar;
    envp[k++] = "LISTEN_FDS=1";
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], "LISTEN_PID=", 11) && strncmp(environ[i], "LISTEN_FDS=", 11))
            envp[k++] = environ[i];
    snprintf(fmtarg, sizeof(fmtarg), "--format=%s", format);
    snprintf(aioarg, sizeof(aioarg), "--aio=%s", aio);
    /* the image last, after "--", as an absolute path: nothing of its name is an option or a protocol */
    char *const argv[] = {"qemu-nbd", "--read-only", "--shared=1", "--cache=writeback", aioarg, fmtarg,
                          "--",       abspath,       NULL};
    pid_t parent = getpid();
    rc = listen_and_connect(&lsock, &sp->fd, err, errlen);
    if (rc == 0 && (sp->pid = fork()) < 0) {
        rc = -errno;
        snprintf(err, errlen, "nbd: fork: %s", strerror(-rc));
        sp->pid = 0;
        close(sp->fd);
        sp->fd = -1;
    } else if (rc == 0 && sp->pid == 0) {
        exec_server(parent, lsock, prog, argv, envp, pidvar, quiet);
    }
    if (lsock >= 0)
        close(lsock);
    free(envp);
    free(abspath);
    return rc;
}

bool blksum_nbd_reap(pid_t pid, int wait_ms, int *status)
{
    const struct timespec step = {.tv_nsec = NBD_REAP_STEP_MS * 1000000L};
    for (int waited = 0;; waited += NBD_REAP_STEP_MS) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return true;
        if (r < 0 && errno != EINTR)
            return false;
        if (waited >= wait_ms)
            return false;
        nanosleep(&step, NULL);
    }
}
