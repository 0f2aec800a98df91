/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ctrl_internal.h — controller internals: the state ctrl.c keeps per controller, bring-up / shutdown entry
 * points used by target.c, and the log helper every driver file uses. Private to the driver: only the
 * driver's own .c files include it (and the white-box unit test tests/c/test_driver_units.c); callers use
 * nvme.h. tests/test_public_headers.py fails when a file elsewhere includes it (the public list of the
 * driver's headers: NVMELAB_DRIVER_PUBLIC_HEADERS in src/nvme/CMakeLists.txt).
 *
 * Bring-up order (nvme_ctrl_attach): read CAP/VS; disable (CC.EN=0, wait CSTS.RDY=0 within CAP.TO);
 * AQA/ASQ/ACQ; CC (CSS, MPS, AMS, IOSQES, IOCQES) then CC.EN=1; wait RDY=1 within CAP.TO (CFS -> error);
 * Identify Controller; Active Namespace ID list (CNS 02h); Identify Namespace for each; Set Features
 * Number of Queues. nvme_ctrl_detach unwinds exactly: I/O qpairs (Delete SQ, Delete CQ), CC.SHN=normal
 * and wait SHST=complete, CC.EN=0 and wait RDY=0, free the admin queue memory.
 *
 * Key functions: nvme_ctrl_attach, nvme_ctrl_detach, nvme_log.
 */
#ifndef NVME_CTRL_INTERNAL_H
#define NVME_CTRL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "nvme/bar.h"
#include "nvme/nvme.h"
#include "nvme/qpair.h"

#define NVME_ADMIN_DEPTH             32u   /* admin queue entries */
#define NVME_ADMIN_TIMEOUT_MS        5000u /* default admin command timeout */
#define NVME_IOQ_REQUEST             1024u /* I/O queues asked for in Set Features Number of Queues */
#define NVME_SHUTDOWN_TIMEOUT_MS     5000u /* when RTD3E is 0 */
#define NVME_SHUTDOWN_TIMEOUT_MAX_MS 60000u
#define NVME_SYNC_QPAIR_DEPTH        8u /* the per-controller queue behind nvme_ns_io_sync */

struct nvme_ns {
    struct nvme_ctrl *ctrl;
    uint32_t nsid;
    uint32_t lba_shift;
    uint32_t lba_size;
    uint64_t nsze;
    struct nvme_id_ns id;
};

struct nvme_ctrl {
    struct nvme_target *target;
    unsigned index;
    struct nvme_bar bar;
    uint64_t cap;
    uint32_t vs;
    uint32_t dstrd;
    uint32_t page_shift;       /* controller memory page (12 + CC.MPS) */
    uint32_t ready_timeout_ms; /* CAP.TO */
    uint32_t mdts_bytes;
    uint32_t max_xfer;
    uint32_t max_qpairs; /* granted I/O queue pairs */
    uint32_t generation; /* bumped by every reset; qpairs compare against it */
    bool enabled;        /* bring-up reached CC.EN=1 */
    struct nvme_id_ctrl id;
    uint32_t nns;
    struct nvme_ns *ns; /* nns entries, ascending NSID */

    pthread_mutex_t admin_lock; /* admin queue + admin buffer */
    struct nvme_qpair admin;
    struct nvme_dma *admin_buf; /* NVME_ADMIN_BUF_SIZE bounce buffer */

    pthread_mutex_t q_lock;    /* qid bitmap and qpair list */
    uint8_t *qid_used;         /* max_qpairs + 1 bytes */
    struct nvme_qpair *qpairs; /* live I/O qpairs (list) */

    pthread_mutex_t sync_lock; /* nvme_ns_io_sync */
    struct nvme_qpair *sync_q;
    struct nvme_dma *sync_buf;
};

/* Bring up the controller behind bar (copied). On failure err names the step; nothing is left behind. */
int nvme_ctrl_attach(struct nvme_target *t, unsigned index, const struct nvme_bar *bar, struct nvme_ctrl **out,
                     char *err, size_t errlen);
/* Orderly shutdown and free; frees qpairs the user leaked. */
void nvme_ctrl_detach(struct nvme_ctrl *c);

/* One admin command of the driver's own, its PRPs (if any) set by the caller and pointing at the driver's memory
 * (GPU queue rings): not checked by the raw commands' IOMMU (nvme_ctrl_admin is). Same returns as nvme_ctrl_admin. */
int nvme_ctrl_admin_own(struct nvme_ctrl *c, struct nvme_sqe *cmd, struct nvme_cpl *cpl, uint32_t timeout_ms);

/* Log one formatted line through the hook (see nvme_set_log). */
void nvme_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Build PRP1/PRP2 (and the tracker's PRP list) for [buf, buf + len) inside d. Shared by admin and I/O. */
int nvme_prp_build(struct nvme_qpair *q, struct nvme_tracker *t, struct nvme_dma *d, const void *buf, size_t len,
                   struct nvme_sqe *sqe);

#endif /* NVME_CTRL_INTERNAL_H */
