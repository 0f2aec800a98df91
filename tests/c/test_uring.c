/* SPDX-License-Identifier: BSD-3-Clause */
/* test_uring.c — the io_uring module over the kernel ABI: ring set-up and fallbacks, a full SQ
 * refuses more SQEs, reads and writes (plain and fixed) land where they should across many
 * wrap-arounds of both rings, and a process that may not use io_uring gets an error that says why. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "engine/kio.h"
#include "engine/uring.h"

enum { ENTRIES = 8, BLK = 4096, NBLK = 64, ROUNDS = 50 };

static void rw_rounds(struct uring *r, int fd, unsigned char *bufs, int fixed)
{
    /* Every round writes ENTRIES blocks with a round-dependent pattern, then reads them back. */
    for (unsigned round = 0; round < ROUNDS; round++) {
        for (int phase = 0; phase < 2; phase++) {
            for (unsigned i = 0; i < ENTRIES; i++) {
                unsigned char *b = bufs + (size_t)i * BLK;
                if (phase == 0)
                    memset(b, (int)(round * 31 + i + 1), BLK);
                else
                    memset(b, 0, BLK);
                struct io_uring_sqe *sqe = uring_get_sqe(r);
                CHECK(sqe != NULL);
                uint8_t op = fixed ? (phase ? IORING_OP_READ_FIXED : IORING_OP_WRITE_FIXED)
                                   : (phase ? IORING_OP_READ : IORING_OP_WRITE);
                uring_prep_rw(sqe, op, fd, b, BLK, (uint64_t)((round * ENTRIES + i) % NBLK) * BLK, i, i);
            }
            CHECK(uring_get_sqe(r) == NULL); /* the SQ ring is full */
            CHECK(uring_sq_pending(r) == ENTRIES);
            int rc = uring_submit(r, ENTRIES);
            CHECK(rc == ENTRIES);
            unsigned seen = 0;
            while (seen < ENTRIES) {
                if (uring_cq_ready(r) == 0)
                    CHECK(uring_wait_cqe(r) == 0);
                const struct io_uring_cqe *cqe = uring_cqe_at(r, 0);
                CHECK(cqe->res == BLK);
                CHECK(cqe->user_data < ENTRIES);
                if (phase == 1) {
                    const unsigned char *b = bufs + (size_t)cqe->user_data * BLK;
                    CHECK(b[0] == (unsigned char)(round * 31 + cqe->user_data + 1) && b[BLK - 1] == b[0]);
                }
                uring_cq_advance(r, 1);
                seen++;
            }
        }
    }
}

/* In a child: forbid io_uring_setup with EPERM through seccomp, as a container profile does. */
static int child_denied(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        printf("seccomp unavailable: denied-path check skipped\n");
        return 0;
    }
    char err[256] = "";
    int rc = uring_probe(err, sizeof(err));
    printf("denied: %d %s\n", rc, err);
    if (rc != -EPERM || !strstr(err, "io_uring_disabled") || !strstr(err, "seccomp"))
        return 1;
    if (kio_io_uring_available())
        return 2;
    struct perf_target *t = NULL;
    struct perf_target_opts o = {.backend = "io_uring"};
    char uri[64] = "file:///etc/hostname";
    err[0] = 0;
    rc = perf_target_open(uri, &o, &t, err, sizeof(err));
    printf("denied open: %d %s\n", rc, err);
    if (rc != -EPERM || !strstr(err, "backend=io_uring") || !strstr(err, "seccomp"))
        return 3;
    return 0;
}

int main(void)
{
    char err[256] = "";
    if (uring_probe(err, sizeof(err)) < 0) {
        printf("io_uring unavailable here (%s): ring checks skipped\n", err);
    } else {
        char path[] = "/var/tmp/nvmelab-test-uring-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        unlink(path);
        CHECK(ftruncate(fd, (off_t)NBLK * BLK) == 0);
        unsigned char *bufs = aligned_alloc(BLK, (size_t)ENTRIES * BLK);
        CHECK(bufs);
        for (int single = 0; single < 2; single++) {
            struct uring r;
            CHECK(uring_init(&r, ENTRIES, 0, single, err, sizeof(err)) == 0);
            CHECK(r.sq_entries == ENTRIES && r.cq_entries == 2 * ENTRIES);
            printf("ring: single_thread=%d setup flags 0x%x\n", single, r.setup_flags);
            if (single)
                CHECK(r.setup_flags & IORING_SETUP_COOP_TASKRUN); /* 5.19+ kernels */
            rw_rounds(&r, fd, bufs, 0);
            struct iovec iov[ENTRIES];
            for (int i = 0; i < ENTRIES; i++)
                iov[i] = (struct iovec){bufs + (size_t)i * BLK, BLK};
            CHECK(uring_register_files(&r, &fd, 1) == 0);
            if (uring_register_buffers(&r, iov, ENTRIES) == 0) {
                rw_rounds(&r, fd, bufs, 1);
                CHECK(uring_unregister_buffers(&r) == 0);
            }
            CHECK(uring_unregister_files(&r) == 0);
            uring_exit(&r);
            CHECK(r.fd == -1);
        }
        /* a custom CQ size */
        struct uring r;
        CHECK(uring_init(&r, 4, 64, true, err, sizeof(err)) == 0);
        CHECK(r.cq_entries == 64);
        uring_exit(&r);
        free(bufs);
        close(fd);
    }

    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int code = child_denied();
        fflush(stdout);
        _exit(code);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return CHECK_DONE("test_uring");
}
