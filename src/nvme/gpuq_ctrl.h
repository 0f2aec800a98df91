/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpuq_ctrl.h — I/O queue pairs on a controller for a driver outside this process's threads (CUDA
 * threads of the cuda-run engine), in plain C with no CUDA include: queue creation with interrupts off,
 * host-memory rings, the DMA-address lookup table of a payload buffer, teardown that deletes the queues
 * (or resets the controller) before any memory is freed, and a CPU stand-in that drives the rings with
 * the same lock-step round and CID matching the GPU uses (nvme/nvme_gpuq.h).
 *
 * Key functions:
 *   nvme_gpuq_pair_create()   one DMA block (SQ ring, CQ ring), Create I/O CQ (PC=1, IEN=0), Create I/O SQ
 *   nvme_gpuq_pair_quiesce()  the deletion (or reset) alone, before a CUDA caller unregisters the rings
 *   nvme_gpuq_pair_destroy()  Delete I/O SQ, Delete I/O CQ; if the controller does not answer (or the
 *                             caller says the queue timed out) nvme_ctrl_reset() first; then free
 *   nvme_gpuq_lut()           DMA address of every NVMe page of a DMA object (the PRP lookup table)
 *   nvme_gpuq_cpu_round()     one lock-step round on the CPU: qdepth SQEs, the read-back of the last SQE,
 *                             one doorbell, CQEs read in the poller warp's order (nvme_gpuq_poller_idx)
 *                             and matched by CID with a deadline per completion (the GPU kernel's stand-in);
 *                             with p->stamps, the per-I/O time stamps of a sample of its commands
 *   nvme_gpuq_cpu_round_opt() the same with a matching mode (cid, positional, scan) and the missing-fence
 *                             model (SQE stores that land after the doorbell) for the cuda_match study
 *
 * Works on every target the driver opens (emu://, pci:// on vfio-pci or uio_pci_generic). The rings are
 * ordinary DMA memory of the target, so a CUDA caller can cudaHostRegister them (mapped) and hand the
 * device pointers to its kernel; the doorbell offsets are in the pair (BAR0 + sq_db_off / cq_db_off).
 *
 * Errors: negative errno (-EINVAL bad argument, -EBUSY no queue identifier, -EIO the controller refused a
 * command: its status name is in err, -ETIMEDOUT a completion missed its deadline, -EPROTO a completion
 * named a command that is not outstanding or another SQ). NVMe status of I/O is returned per command.
 *
 * Caveats: a pair belongs to one user at a time (the GPU kernel or the stand-in). After a timeout the
 * controller may still write the CQ and the payload: destroy with `timed_out` set, which resets the
 * controller when the queue deletion cannot be confirmed, and only then frees the memory.
 */
#ifndef NVME_GPUQ_CTRL_H
#define NVME_GPUQ_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/nvme.h"
#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NVME_GPUQ_CTRL_ADMIN_TIMEOUT_MS 5000u /* Create/Delete queue commands */

/* Per-command time stamps of nvme_gpuq_cpu_round (nvme_gpuq.h, "the per-I/O time breakdown"),
 * CLOCK_MONOTONIC ns. A round stamps command i when nvme_gpuq_sampled(cmds + i, every): commands first,
 * first + every, ... (n of them), whose sampled[i] it sets (and clears the last round's); it advances cmds by
 * qdepth. t and sampled hold one row per command of a round (qdepth rows). The unsampled commands cost the
 * round one compare each (no store, no clock read). */
struct nvme_gpuq_stamps {
    uint32_t every; /* one command in `every` (0: none) */
    uint64_t cmds;  /* commands of the pair before this round */
    uint64_t (*t)[NVME_GPUQ_NSTAMPS];
    uint8_t *sampled;
    uint32_t first, n; /* the last round's stamped commands: first, first + every, ... (n of them; 0: none) */
    uint64_t next;     /* the running number of the next command to stamp (kept by the rounds; 0 with cmds 0) */
};

struct nvme_gpuq_pair {
    struct nvme_ctrl *ctrl;
    uint16_t qid;         /* SQ and CQ identifier (the same) */
    uint32_t entries;     /* slots per ring */
    struct nvme_dma *mem; /* SQ ring, then CQ ring */
    struct nvme_sqe *sq;  /* host virtual addresses */
    struct nvme_cqe *cq;
    size_t mem_len;                /* bytes of mem in use (for cudaHostRegister) */
    uint64_t sq_iova, cq_iova;     /* bus addresses given to the controller */
    uint32_t sq_db_off, cq_db_off; /* BAR0 offsets of the doorbells */
    bool cq_created, sq_created;
    bool quiesced; /* nvme_gpuq_pair_quiesce() ran */
    int quiesce_rc;
    /* state of the CPU stand-in (the GPU kernel keeps its own) */
    uint64_t sq_pos, cq_pos;
    uint32_t round;
    /* fault injection (tests, any controller): ring the SQ doorbell this many entries short of the round,
     * so the last commands are never fetched and their completions time out (a "dropped completion") */
    uint32_t db_short;
    /* the stand-in's self-checks and time breakdown (issue 24): CQEs matched to their command, and optional
     * per-command stamps (NULL: none) */
    uint64_t completed;
    struct nvme_gpuq_stamps *stamps;
};

/* Create one pair with `entries` slots (2..min(MQES+1, 65536)). err names the failing step. */
int nvme_gpuq_pair_create(struct nvme_ctrl *c, uint32_t entries, struct nvme_gpuq_pair **out, char *err, size_t errlen);
/* Delete SQ then CQ and free. timed_out: commands may still be in flight; when a deletion fails or times
 * out, the controller is reset (which stops all its DMA) before the rings are freed. Returns 0, or the
 * first error (the memory is freed in every case only after the queue is gone or the controller reset;
 * if even the reset fails, the rings are leaked on purpose: -EIO). NULL ok. */
int nvme_gpuq_pair_destroy(struct nvme_gpuq_pair *p, bool timed_out);

/* The first half of destroy: Delete I/O SQ and CQ, or reset the controller when that fails (always after
 * a timeout whose deletion failed); frees nothing, so a CUDA caller can unregister the rings from the GPU
 * after the controller stopped and before the memory goes. -EIO: neither worked (keep the memory). */
int nvme_gpuq_pair_quiesce(struct nvme_gpuq_pair *p, bool timed_out);
/* lut[0..npages) = bus address of each NVMe page (4 KiB) of d; npages = nvme_dma_size(d) / 4096. */
int nvme_gpuq_lut(const struct nvme_dma *d, uint64_t *lut, size_t npages);

/* One lock-step round of qdepth (<= entries - 1) commands: command i is opc on slba[i] (nlb LBAs, nsid)
 * with PRPs prp1[i]/prp2[i]; st[i] receives its NVMe status (without phase). Every completion has
 * timeout_ns from the doorbell. Returns 0 (look at st), -ETIMEDOUT, -EPROTO, -EINVAL, -EIO (the read-back of the last
 * SQE failed). After -ETIMEDOUT or -EPROTO the pair is unusable: destroy it with timed_out = true. */
int nvme_gpuq_cpu_round(struct nvme_gpuq_pair *p, uint8_t opc, uint32_t nsid, const uint64_t *slba, uint32_t nlb,
                        const uint64_t *prp1, const uint64_t *prp2, uint32_t qdepth, uint64_t timeout_ns, uint16_t *st,
                        char *err, size_t errlen);

/* The stand-in's study knobs of a round (nvme_gpuq_cpu_round_opt); zeroed = nvme_gpuq_cpu_round's behaviour. */
struct nvme_gpuq_round_opt {
    int match;          /* enum nvme_gpuq_match_mode (nvme/nvme_gpuq_match.h) */
    uint32_t unordered; /* the missing-fence model: the last `unordered` SQE stores of the round land in the
                           ring only after the doorbell, unless `no_fence` is 0 (the fence orders them first) */
    bool no_fence;      /* study subject: skip the fence that orders the SQE stores before the read-back */
    bool no_readback;   /* study subject: skip the read-back of the last SQE before the doorbell */
};

/* nvme_gpuq_cpu_round with the completions handed out by o->match and the SQE stores ordered (or not) as
 * o says; ctr (may be NULL) accumulates the match counters (looks, CQ bytes, stale, foreign). With
 * positional matching st[i] is the status of whatever CQE landed at round position i. */
int nvme_gpuq_cpu_round_opt(struct nvme_gpuq_pair *p, uint8_t opc, uint32_t nsid, const uint64_t *slba, uint32_t nlb,
                            const uint64_t *prp1, const uint64_t *prp2, uint32_t qdepth, uint64_t timeout_ns,
                            const struct nvme_gpuq_round_opt *o, struct nvme_gpuq_match_ctr *ctr, uint16_t *st,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NVME_GPUQ_CTRL_H */
