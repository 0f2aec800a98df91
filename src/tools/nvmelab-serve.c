/* SPDX-License-Identifier: BSD-3-Clause */
/* nvmelab-serve — serve the controllers of an emu:// URI as vfio-user PCI NVMe devices, one UNIX socket
 * each (src/tools/vfu_server.h; protocol notes in src/nvme/vfio_user.h).
 *
 *   nvmelab-serve [--dir DIR | --socket PATH] [--timeout-ms N] URI
 *
 * --dir DIR (made when absent): DIR/ctrl<i>/cntrl for controller i (SPDK: trtype:VFIOUSER
 * traddr:DIR/ctrl<i>); --socket PATH: one controller only.
 * When every socket listens it prints `listening <path>` per controller, then `ready`. SIGINT/SIGTERM:
 * every connection closed, one line `stats ctrl<i> sweeps=N busy=N commands=N` per controller (its service
 * thread's passes, the busy ones, commands fetched: nvme_emu_svc_stats), every socket removed, exit 0. Bad arguments or
 * URI: one line on stderr, exit 2; a system error (socket, bind, threads): exit 1. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nvme/emu/emu.h"
#include "nvme/uri.h"
#include "tools/vfu_server.h"

#define SERVE_EXIT_SYS       1
#define SERVE_EXIT_USAGE     2
#define SERVE_MAX_TIMEOUT_MS 3600000L
#define SERVE_DIR_MODE       0700

static int usage(const char *why)
{
    fprintf(stderr, "nvmelab-serve: %s\nusage: nvmelab-serve [--dir DIR | --socket PATH] [--timeout-ms N] URI\n", why);
    return SERVE_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *sock = NULL, *uri = NULL;
    long timeout_ms = VFU_DEFAULT_TIMEOUT_MS;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--dir") || !strcmp(a, "--socket") || !strcmp(a, "--timeout-ms")) {
            if (i + 1 >= argc) {
                char m[64];
                snprintf(m, sizeof(m), "%s needs a value", a);
                return usage(m);
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--dir")) {
                dir = v;
            } else if (!strcmp(a, "--socket")) {
                sock = v;
            } else {
                char *end;
                errno = 0;
                timeout_ms = strtol(v, &end, 10);
                if (errno || *end || end == v || timeout_ms <= 0 || timeout_ms > SERVE_MAX_TIMEOUT_MS)
                    return usage("--timeout-ms takes milliseconds from 1 to 3600000");
            }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: nvmelab-serve [--dir DIR | --socket PATH] [--timeout-ms N] URI\n");
            return 0;
        } else if (a[0] == '-' && a[1] == '-') {
            char m[128];
            snprintf(m, sizeof(m), "unknown option %.80s", a);
            return usage(m);
        } else if (uri) {
            return usage("give one URI");
        } else {
            uri = a;
        }
    }
    if (!uri)
        return usage("no URI given (e.g. emu://?ndev=2)");
    if (dir && sock)
        return usage("give --dir or --socket, not both");
    if (!dir && !sock)
        return usage("give --dir DIR or --socket PATH");
    if (dir && mkdir(dir, SERVE_DIR_MODE) && errno != EEXIST) {
        fprintf(stderr, "nvmelab-serve: cannot make directory %s: %s\n", dir, strerror(errno));
        return SERVE_EXIT_SYS;
    }

    /* every thread inherits this mask; the main thread takes the signals with sigwait */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    struct vfu_server *s = NULL;
    char err[1024];
    int r = vfu_server_open(uri, dir, sock, (int)timeout_ms, &s, err, sizeof(err));
    if (r) {
        fprintf(stderr, "nvmelab-serve: %s\n", err);
        return r == -EINVAL || r == -ENAMETOOLONG ? SERVE_EXIT_USAGE : SERVE_EXIT_SYS;
    }
    const char *old = nvme_emu_set_warnings(vfu_server_set(s)); /* old key spellings: still served, named */
    if (old && *old)
        fprintf(stderr, "nvmelab-serve: %s\n", old);
    if ((r = vfu_server_start(s, err, sizeof(err)))) {
        fprintf(stderr, "nvmelab-serve: %s\n", err);
        vfu_server_close(s);
        return SERVE_EXIT_SYS;
    }
    for (unsigned i = 0; i < vfu_server_count(s); i++)
        printf("listening %s\n", vfu_server_path(s, i));
    printf("ready\n");
    fflush(stdout);

    for (;;) {
        int sig = 0;
        if (sigwait(&sigs, &sig) == 0 && (sig == SIGINT || sig == SIGTERM))
            break;
    }
    /* stopped serving: what each controller's service thread did (nvmelab.host.serve reads these lines) */
    vfu_server_stop(s);
    for (unsigned i = 0; i < vfu_server_count(s); i++) {
        struct nvme_emu_svc_stats st;
        if (!nvme_emu_svc_stats(vfu_server_set(s), i, &st))
            printf("stats ctrl%u sweeps=%llu busy=%llu commands=%llu\n", i, (unsigned long long)st.sweeps,
                   (unsigned long long)st.busy, (unsigned long long)st.commands);
    }
    fflush(stdout);
    vfu_server_close(s);
    return 0;
}
