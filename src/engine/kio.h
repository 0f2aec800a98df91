/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kio.h — kernel I/O paths for the perf engine: psync and io_uring on file:// and blk://.
 *
 * Purpose: the same engine interface (struct perf_backend_ops) over the kernel
 * block layer, so CPU-initiated user-space I/O and the kernel stacks are measured
 * with the same parameters and produce the same record.
 *
 * Key functions:
 *   kio_target_open()  file:///path or blk:///dev/X, backend "psync" or "io_uring"
 *   kio_target_from_fd() an open file, block device or pipe (blksum's sources)
 *   kio_blk_check()    may this block device be used? (named, not mounted, no holders)
 *
 * Backends:
 *   psync     pread/pwrite on an O_DIRECT descriptor (read(2) on a pipe); the I/O
 *             happens in submit(), so one command is at the device at a time:
 *             the perf engine refuses qdepth > 1 (dev.max_qdepth = 1); a channel
 *             may still hold several slots whose completions wait for reap().
 *   io_uring  one ring per channel (uring.h, the kernel ABI), O_DIRECT, registered file and
 *             buffers (read_fixed/write_fixed), one submit per command unless the
 *             run sets batch (KIO_URING_SUBMIT_BATCH), completions reaped
 *             from the CQ ring without a system call; single issuer with
 *             deferred task work where the kernel has it (6.1+), falling back
 *             to cooperative task work, then to a plain ring; SQPOLL is not used.
 *
 * Caveats: O_DIRECT needs buffers, offsets and sizes aligned to the logical block
 * size (512 B assumed for files; BLKSSZGET for block devices). A file target must
 * exist and hold data (nvmelab.engines.perf.make_file writes real data, so reads are not
 * served from holes). blk:// refuses a device that is mounted, has holders or is
 * used for swap, and refuses writes unless allow_write is set.
 */
#ifndef NVMELAB_ENGINE_KIO_H
#define NVMELAB_ENGINE_KIO_H

#include <stddef.h>

#include "engine/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KIO_FILE_LBA_SIZE    512u       /* O_DIRECT granularity assumed for files */
#define KIO_MAX_IO_BYTES     (1u << 20) /* largest single command we issue */
#define KIO_BUF_ALIGN        4096u      /* buffer alignment (page) */
#define KIO_URING_CQ_PER_SQ  2u         /* CQ ring entries per SQ entry (io_uring) */
#define KIO_URING_MAX_QDEPTH 4096u      /* deepest io_uring channel we open */
/* io_uring submissions per io_uring_enter() unless the run sets batch: one, i.e.
 * each command goes to the kernel as soon as it is queued (what fio does with its
 * default iodepth_batch_submit=1). Measured on a virtio disk at QD 16 this gave
 * more IOPS than handing the kernel every refill at once (plugged). */
#define KIO_URING_SUBMIT_BATCH 1u

int kio_target_open(const char *uri, const struct perf_target_opts *opts, struct perf_target **out, char *err,
                    size_t errlen);

/* A target over an already open descriptor (not closed by the target): a regular
 * file or block device read with backend "psync" or "io_uring", or a pipe (always
 * sequential read(2), backend "read"). Byte granular (lba_size 1), no O_DIRECT: the
 * caller opened the descriptor. blksum's sources use this. */
int kio_target_from_fd(int fd, const char *backend, struct perf_target **out, char *err, size_t errlen);

/* 0 if the block device at path may be opened (writable only when allow_write and
 * want_write), else a negative errno and the reason in err. */
int kio_blk_check(const char *path, int want_write, int allow_write, char *err, size_t errlen);

/* 1 when the kernel lets this process create an io_uring ring, else 0. */
int kio_io_uring_available(void);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_ENGINE_KIO_H */
