/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c — nvmelab-blksum: the native command, a drop-in for the original blksum(1) in scripts.
 *
 * Same options and output as the original (blkhash's blksum: -d/--digest, -p/--progress, -c/--cache,
 * -t/--threads, --queue-depth, --read-size, --block-size, -l/--list-digests, -h/--help, FILENAME or NBD
 * URL or standard input; prints "<hexdigest>  <filename>"), plus nvmelab's --mode (auto, file, nbd,
 * qcow2), --io (psync, io_uring) and -q as a short --queue-depth. Errors: one line on stderr, exit 1.
 * SIGINT, SIGTERM and SIGHUP, at any moment (connecting to a server that never answers, reading from one
 * that stopped), cancel the job, close the source (a qemu-nbd we started ends with it), and end the
 * process with one line ("interrupted", naming the signal unless it is SIGINT) and exit status 128 + n,
 * as `python -m nvmelab blksum` does (nvmelab.cli). An info line of the open (mode auto reading a qcow2
 * through qemu-nbd, a raw image qemu pads to whole sectors) goes to stderr before the digest.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blksum/blksum.h"
#include "blksum/image.h"

#define PROG            "nvmelab-blksum"
#define WAIT_STEP_MS    100
#define KiB             1024ull
#define ORIGINAL_BLOCKS (64u * 1024u) /* the only block size the blkhash format of this digest uses */
#define QEMU_SECTOR     512u          /* qemu serves a raw file in whole sectors */

enum { OPT_QUEUE_DEPTH = 256, OPT_READ_SIZE, OPT_BLOCK_SIZE, OPT_MODE, OPT_IO };

static volatile sig_atomic_t terminated;

static void on_signal(int sig)
{
    if (!terminated)
        terminated = sig;
}

/* One line and 128 + the signal, as nvmelab.cli ends a command that a signal stopped. */
static void end_by_signal(int sig)
{
    if (sig == SIGINT)
        fputs(PROG ": interrupted\n", stderr);
    else
        fprintf(stderr, PROG ": interrupted (%s)\n", sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "signal");
    exit(128 + sig);
}

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_FAILURE);
}

static void usage(FILE *f, int code)
{
    fputs("\n"
          "Compute message digest for disk images (blkhash format; nvmelab's native blksum)\n"
          "\n"
          "    " PROG " [-d DIGEST|--digest=DIGEST] [-p|--progress]\n"
          "           [-c|--cache] [-t N|--threads N] [-q N|--queue-depth=N]\n"
          "           [--read-size=N] [--block-size=N] [-l|--list-digests]\n"
          "           [--mode=auto|file|nbd|qcow2] [--io=psync|io_uring]\n"
          "           [-h|--help] [filename|nbd-url]\n"
          "\n"
          "--mode: auto (default) reads an NBD URL with libnbd, a qcow2 file with the direct reader and\n"
          "anything else as raw bytes; nbd serves the file with qemu-nbd (any format qemu reads);\n"
          "qcow2 insists on the direct reader; file reads the bytes as they are. Without a filename,\n"
          "standard input is read (raw). Options and output follow blksum(1) of blkhash.\n"
          "\n",
          f);
    exit(code);
}

/* qemu serves a raw file whose size is not a multiple of 512 padded with zeros to the next one, and that
 * is what a qemu-nbd served source hashes (as the original blksum's digest is): one line saying so. */
static void warn_if_padded(const char *name, const struct blksum_source *src)
{
    unsigned char magic[4] = {0};
    struct stat st;
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    bool qcow2 = fd >= 0 && read(fd, magic, sizeof(magic)) == (ssize_t)sizeof(magic) &&
                 ((uint32_t)magic[0] << 24 | (uint32_t)magic[1] << 16 | (uint32_t)magic[2] << 8 | magic[3]) ==
                     BLKSUM_QCOW2_MAGIC;
    if (fd >= 0 && !qcow2 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size % QEMU_SECTOR &&
        src->size != (uint64_t)st.st_size)
        fprintf(stderr,
                PROG ": warning: %s: its size, %lld bytes, is not a multiple of %u: qemu-nbd serves it padded with "
                     "zeros to %llu bytes, and that is what is hashed (as the original blksum does; --mode file "
                     "hashes the file's own bytes)\n",
                name, (long long)st.st_size, QEMU_SECTOR, (unsigned long long)src->size);
    if (fd >= 0)
        close(fd);
}

/* "256k", "1m", "1MiB", "65536" -> value (binary units); -1 when not a size. */
static long long parse_size(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10, end++;
        break;
    case 'm':
    case 'M':
        shift = 20, end++;
        break;
    case 'g':
    case 'G':
        shift = 30, end++;
        break;
    default:
        break;
    }
    if (shift && (!strcmp(end, "iB") || !strcmp(end, "B")))
        end += strlen(end);
    if (*end || v > (LLONG_MAX >> shift))
        return -1;
    return v << shift;
}

static long long parse_range(const char *optname, const char *arg, long long lo, long long hi)
{
    long long v = parse_size(arg);
    if (v < lo || v > hi)
        fail("Invalid value for option %s: '%s' (valid range %lld-%lld)", optname, arg, lo, hi);
    return v;
}

static void print_digest_name(const char *name, void *arg)
{
    (void)arg;
    puts(name);
}

static void show_progress(uint64_t done, uint64_t total)
{
    if (total)
        fprintf(stderr, "\r%5.1f%%  %llu / %llu MiB   ", 100.0 * (double)done / (double)total,
                (unsigned long long)(done >> 20), (unsigned long long)(total >> 20));
    else
        fprintf(stderr, "\r%llu MiB   ", (unsigned long long)(done >> 20));
}

int main(int argc, char *argv[])
{
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'},
        {"list-digests", no_argument, 0, 'l'},
        {"digest", required_argument, 0, 'd'},
        {"progress", no_argument, 0, 'p'},
        {"cache", no_argument, 0, 'c'},
        {"threads", required_argument, 0, 't'},
        {"queue-depth", required_argument, 0, OPT_QUEUE_DEPTH},
        {"read-size", required_argument, 0, OPT_READ_SIZE},
        {"block-size", required_argument, 0, OPT_BLOCK_SIZE},
        {"mode", required_argument, 0, OPT_MODE},
        {"io", required_argument, 0, OPT_IO},
        {0, 0, 0, 0},
    };
    struct blksum_opts o;
    enum blksum_mode mode = BLKSUM_MODE_AUTO;
    bool progress = false, threads_given = false;
    char msg[512];
    blksum_opts_init(&o);
    opterr = 0;
    for (;;) {
        const char *optname = argv[optind];
        int c = getopt_long(argc, argv, ":hld:t:q:cp", longopts, NULL);
        if (c == -1)
            break;
        switch (c) {
        case 'h':
            usage(stdout, 0);
            break;
        case 'l':
            blksum_list_digests(print_digest_name, NULL);
            return 0;
        case 'd':
            o.digest = optarg;
            break;
        case 'p':
            progress = isatty(STDERR_FILENO);
            break;
        case 'c':
            break; /* nvmelab always reads through the page cache (see src/README.md) */
        case 't':
            o.threads = (int)parse_range(optname, optarg, 1, BLKSUM_MAX_THREADS);
            threads_given = true;
            break;
        case 'q':
        case OPT_QUEUE_DEPTH:
            o.queue_depth = (int)parse_range(optname, optarg, 1, BLKSUM_MAX_QUEUE_DEPTH);
            break;
        case OPT_READ_SIZE:
            o.read_size = (size_t)parse_range(optname, optarg, BLKSUM_BLOCK_SIZE, BLKSUM_MAX_READ_SIZE);
            break;
        case OPT_BLOCK_SIZE:
            if (parse_size(optarg) != ORIGINAL_BLOCKS)
                fail("Invalid value for option %s: '%s' (this blksum hashes 64 KiB blocks only)", optname, optarg);
            break;
        case OPT_MODE:
            if (blksum_mode_parse(optarg, &mode) < 0)
                fail("Invalid value for option %s: '%s' (auto, file, nbd or qcow2)", optname, optarg);
            break;
        case OPT_IO:
            if (strcmp(optarg, "psync") && strcmp(optarg, "io_uring"))
                fail("Invalid value for option %s: '%s' (psync or io_uring)", optname, optarg);
            o.io = strcmp(optarg, "psync") ? BLKSUM_IO_IO_URING : BLKSUM_IO_PSYNC;
            break;
        case ':':
            fail("Option %s requires an argument", optname);
            break;
        default:
            fail("Invalid option: %s", optname);
        }
    }
    if (o.read_size % BLKSUM_BLOCK_SIZE)
        fail("Invalid read-size is not a multiply of block size (%u)", BLKSUM_BLOCK_SIZE);
    if (!blksum_digest_known(o.digest))
        fail("Unknown digest '%s' (see --list-digests)", o.digest);
    if (optind + 1 < argc)
        fail("Too many arguments: '%s'", argv[optind + 1]);
    const char *name = optind < argc ? argv[optind] : "-";

    /* no SA_RESTART: a wait in the open (connecting to a server) returns at once */
    struct sigaction sa = {.sa_handler = on_signal};
    sigfillset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    blksum_set_interrupt(&terminated);

    struct blksum_source src;
    msg[0] = '\0';
    int rc = blksum_source_open_image(&src, name, mode, msg, sizeof(msg));
    if (terminated) {
        if (rc == 0)
            blksum_source_close(&src);
        end_by_signal(terminated);
    }
    if (rc < 0)
        fail("%s", msg[0] ? msg : blksum_strerror(rc));
    if (msg[0]) /* an info line of the open */
        fprintf(stderr, PROG ": %s\n", msg);
    if (src.own_server)
        warn_if_padded(name, &src);
    if (src.target)
        o.io = BLKSUM_IO_TARGET;
    /* The default hash threads (one per CPU) leave one CPU to a qemu-nbd of our own: it does 40-70 % of
     * the work of an NBD run, and on the 2-CPU benchmark host one hash thread beat two in every NBD
     * configuration (src/README.md); the reader joins them while every buffer waits for hashing, when
     * no read is in flight and the server is idle */
    if (!threads_given && src.own_server && o.threads > 1) {
        o.threads--;
        o.reader_joins = true;
    }
    if (o.io == BLKSUM_IO_IO_URING && !blksum_have_io_uring())
        fail("--io=io_uring: this kernel or its settings do not permit io_uring here");

    struct blksum_job *job;
    struct blksum_result res;
    rc = blksum_start(&src, &o, &job);
    if (rc == 0) {
        while (blksum_wait(job, WAIT_STEP_MS) == -ETIMEDOUT && !terminated) {
            if (progress) {
                uint64_t done, total;
                blksum_progress(job, &done, &total);
                show_progress(done, total);
            }
        }
        if (terminated)
            blksum_cancel(job);
        rc = blksum_finish(job, &res);
        if (progress)
            fputc('\n', stderr);
    }
    blksum_source_close(&src);
    if (terminated)
        end_by_signal(terminated);
    if (rc < 0)
        fail("%s: %s", name, blksum_strerror(rc));
    char hex[2 * BLKSUM_MAX_MD_SIZE + 1];
    blksum_hex(&res, hex, sizeof(hex));
    // the digest is the result: one that cannot be written (a full disk, a closed pipe or stdout) is a failure
    // with its reason, not exit 0 with nothing printed (stdio would report it only at exit, and not in the status)
    if (printf("%s  %s\n", hex, name) < 0 || fflush(stdout) != 0)
        fail("writing the digest of %s to standard output: %s", name, strerror(errno));
    return 0;
}
