/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrl_info.c — the public accessors of a controller's and a namespace's facts (identify data, limits,
 * registers read at bring-up, namespaces), over the state ctrl.c keeps (ctrl_internal.h). No side effects, except
 * nvme_ctrl_csts, which reads the CSTS register. */
#include <stddef.h>

#include "nvme/ctrl_internal.h"
#include "nvme/mmio.h"

const struct nvme_id_ctrl *nvme_ctrl_id(const struct nvme_ctrl *c)
{
    return &c->id;
}
uint32_t nvme_ctrl_mdts_bytes(const struct nvme_ctrl *c)
{
    return c->mdts_bytes;
}
uint32_t nvme_ctrl_max_xfer(const struct nvme_ctrl *c)
{
    return c->max_xfer;
}
uint32_t nvme_ctrl_nn(const struct nvme_ctrl *c)
{
    return c->id.nn;
}
uint64_t nvme_ctrl_cap(const struct nvme_ctrl *c)
{
    return c->cap;
}
uint32_t nvme_ctrl_vs(const struct nvme_ctrl *c)
{
    return c->vs;
}
uint32_t nvme_ctrl_page_size(const struct nvme_ctrl *c)
{
    return 1u << c->page_shift;
}
uint32_t nvme_ctrl_max_qpairs(const struct nvme_ctrl *c)
{
    return c->max_qpairs;
}
uint32_t nvme_ctrl_max_depth(const struct nvme_ctrl *c)
{
    return nvme_cap_mqes(c->cap) + 1u;
}
unsigned nvme_ctrl_index(const struct nvme_ctrl *c)
{
    return c->index;
}
struct nvme_target *nvme_ctrl_target(const struct nvme_ctrl *c)
{
    return c->target;
}
const struct nvme_bar *nvme_ctrl_bar(const struct nvme_ctrl *c)
{
    return &c->bar;
}
uint32_t nvme_ctrl_csts(const struct nvme_ctrl *c)
{
    return nvme_mmio_read32(&c->bar, NVME_REG_CSTS);
}
uint32_t nvme_ctrl_nns(const struct nvme_ctrl *c)
{
    return c->nns;
}

struct nvme_ns *nvme_ctrl_ns_at(struct nvme_ctrl *c, uint32_t i)
{
    return i < c->nns ? &c->ns[i] : NULL;
}

struct nvme_ns *nvme_ctrl_ns(struct nvme_ctrl *c, uint32_t nsid)
{
    for (uint32_t i = 0; i < c->nns; i++)
        if (c->ns[i].nsid == nsid)
            return &c->ns[i];
    return NULL;
}

uint32_t nvme_ns_id(const struct nvme_ns *ns)
{
    return ns->nsid;
}
uint32_t nvme_ns_lba_size(const struct nvme_ns *ns)
{
    return ns->lba_size;
}
uint32_t nvme_ns_lba_shift(const struct nvme_ns *ns)
{
    return ns->lba_shift;
}
uint64_t nvme_ns_nsze(const struct nvme_ns *ns)
{
    return ns->nsze;
}
const struct nvme_id_ns *nvme_ns_idns(const struct nvme_ns *ns)
{
    return &ns->id;
}
struct nvme_ctrl *nvme_ns_ctrl(const struct nvme_ns *ns)
{
    return ns->ctrl;
}
