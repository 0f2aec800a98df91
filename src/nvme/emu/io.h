/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io.h — the emulator's command path (io.c): SQ fetch and service, the SQ doorbell's entry (private to emu/).
 *
 * Purpose: io.c's functions and the doorbell's inline dispatch, kept with their owner (emu_internal.h holds
 * the queue types and no code that calls up into the files above it).
 * Key functions: emu_sq_doorbell() (inline: one new command to emu_sq_one(), more to emu_sq_service()),
 * emu_sq_service(), emu_sq_one(), emu_cq_service().
 * Caveats: a queue is driven by one thread at a time (emu_internal.h).
 */
#ifndef NVME_EMU_IO_H
#define NVME_EMU_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nvme/emu/emu_internal.h"

void emu_sq_service(struct emu_ctrl *c, struct emu_sq *sq);
/* One new command (io.c): a Read/Write on a fast-path queue executed and posted at once, anything else through
 * emu_sq_service. */
void emu_sq_one(struct emu_ctrl *c, struct emu_sq *sq);
/* The SQ tail doorbell's entry (sq->tail just written): exactly one new command (QD 1) takes emu_sq_one, more take
 * the service (the test inline, so that a batch's doorbell pays one compare for it). */
static inline void emu_sq_doorbell(struct emu_ctrl *c, struct emu_sq *sq)
{
    if (sq->tail == (sq->head + 1u == sq->size ? 0 : sq->head + 1u))
        emu_sq_one(c, sq);
    else
        emu_sq_service(c, sq);
}
void emu_cq_service(struct emu_ctrl *c, struct emu_cq *cq);

#endif /* NVME_EMU_IO_H */
