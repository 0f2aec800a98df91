/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrl.c — controller bring-up per spec, admin commands, I/O queue creation/deletion, reset, shutdown,
 * and the synchronous I/O helper. See ctrl_internal.h for the order of steps. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvme/barrier.h"
#include "nvme/ctrl_internal.h"
#include "nvme/errbuf.h"
#include "nvme/mmio.h"
#include "nvme/target.h"

#define SPINS_BEFORE_SLEEP 1024u
#define SLEEP_NS           50000L /* 50 us between polls of a slow controller */
#define CSTS_CHECK_EVERY   1024u  /* admin wait: read CSTS every this many empty polls */
#define NS_PER_MS          1000000ull
#define US_PER_MS          1000u
#define LBADS_MAX          16u                  /* largest LBA data size we accept: 64 KiB */
#define MAX_XFER_CAP       (2u * 1024u * 1024u) /* one PRP-list page of 4 KiB pages covers 2 MiB */

void nvme_qpair_expire_cid(struct nvme_qpair *q, uint16_t cid, int err);

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / NS_PER_MS;
}

static void pause_short(void)
{
    struct timespec ts = {0, SLEEP_NS};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------------------------------ */
/* Register-level steps                                                                             */
/* ------------------------------------------------------------------------------------------------ */
/* Wait until CSTS.RDY == rdy within timeout_ms. -ENXIO all-ones, -EIO CFS (when enabling), -ETIMEDOUT. */
static int wait_ready(struct nvme_ctrl *c, bool rdy, uint32_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    for (unsigned spin = 0;; spin++) {
        uint32_t csts = nvme_mmio_read32(&c->bar, NVME_REG_CSTS);
        if (csts == NVME_REG32_GONE)
            return -ENXIO;
        if (rdy && nvme_csts_cfs(csts))
            return -EIO;
        if (nvme_csts_rdy(csts) == rdy)
            return 0;
        if (now_ms() > deadline)
            return -ETIMEDOUT;
        if (spin > SPINS_BEFORE_SLEEP)
            pause_short();
        else
            sched_yield();
    }
}

static int ctrl_disable(struct nvme_ctrl *c)
{
    uint32_t cc = nvme_mmio_read32(&c->bar, NVME_REG_CC);
    uint32_t csts = nvme_mmio_read32(&c->bar, NVME_REG_CSTS);
    if (csts == NVME_REG32_GONE)
        return -ENXIO;
    if (nvme_cc_en(cc) && !nvme_csts_rdy(csts) && !nvme_csts_cfs(csts)) {
        /* an enable is in progress: the spec wants RDY to follow EN before EN changes again */
        (void)wait_ready(c, true, c->ready_timeout_ms);
    }
    if (nvme_cc_en(cc))
        nvme_mmio_write32(&c->bar, NVME_REG_CC, cc & ~NVME_CC_EN);
    return wait_ready(c, false, c->ready_timeout_ms);
}

static int ctrl_enable(struct nvme_ctrl *c)
{
    /* The admin ring was sized (and clamped to CAP.MQES+1) in nvme_qpair_setup: AQA must say the same. */
    nvme_mmio_write32(&c->bar, NVME_REG_AQA, NVME_AQA(c->admin.depth, c->admin.depth));
    nvme_mmio_write64(&c->bar, NVME_REG_ASQ, nvme_dma_iova(c->admin.mem, c->admin.sq));
    nvme_mmio_write64(&c->bar, NVME_REG_ACQ, nvme_dma_iova(c->admin.mem, (const void *)c->admin.cq));
    uint32_t cc = (NVME_CC_CSS_NVM << NVME_CC_CSS_SHIFT) |
                  ((c->page_shift - NVME_PAGE_SHIFT_MIN) << NVME_CC_MPS_SHIFT) | (0u << NVME_CC_AMS_SHIFT) |
                  (NVME_SQES_LOG2 << NVME_CC_IOSQES_SHIFT) | (NVME_CQES_LOG2 << NVME_CC_IOCQES_SHIFT);
    nvme_mmio_write32(&c->bar, NVME_REG_CC, cc);
    nvme_wmb();
    nvme_mmio_write32(&c->bar, NVME_REG_CC, cc | NVME_CC_EN);
    return wait_ready(c, true, c->ready_timeout_ms);
}

/* ------------------------------------------------------------------------------------------------ */
/* Admin commands                                                                                   */
/* ------------------------------------------------------------------------------------------------ */
/* A waiter for one command's completion, used by the admin path and by synchronous I/O. */
struct cmd_wait {
    bool done;
    struct nvme_cpl cpl;
};

static void cmd_wait_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct cmd_wait *w = arg;
    w->cpl = *cpl;
    w->done = true;
}

/* Caller holds admin_lock. buf is NULL or inside c->admin_buf. A user's command (user) goes through the
 * driver's IOMMU (nvme_qpair_submit_raw_err: its PRPs only into data buffers, the reason in err). */
static int admin_exec_as(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len, struct nvme_cpl *cpl,
                         uint32_t timeout_ms, bool user, char *err, size_t errlen)
{
    struct cmd_wait w = {0};
    struct nvme_qpair *q = &c->admin;
    int rc = user ? nvme_qpair_submit_raw_err(q, cmd, buf, len, cmd_wait_cb, &w, err, errlen)
                  : nvme_qpair_submit_cmd(q, cmd, buf, len, cmd_wait_cb, &w);
    if (rc)
        return rc;
    uint16_t cid = (uint16_t)((q->sq_tail + q->depth - 1) % q->depth); /* slot just written */
    cid = q->sq[cid].cid;
    uint64_t deadline = now_ms() + (timeout_ms ? timeout_ms : NVME_ADMIN_TIMEOUT_MS);
    for (unsigned spin = 1; !w.done; spin++) {
        rc = nvme_qpair_poll(q, 0);
        if (w.done)
            break;
        if (rc < 0)
            return rc;
        if (spin % CSTS_CHECK_EVERY == 0) {
            uint32_t csts = nvme_mmio_read32(&c->bar, NVME_REG_CSTS);
            if (csts == NVME_REG32_GONE || nvme_csts_cfs(csts)) {
                nvme_qpair_expire_cid(q, cid, -EIO);
                nvme_log(NVME_LOG_ERROR, "controller %u: %s", c->index,
                         csts == NVME_REG32_GONE ? "registers read all ones (gone)"
                                                 : "controller fatal status (CSTS.CFS)");
                return csts == NVME_REG32_GONE ? -ENXIO : -EIO;
            }
        }
        if (now_ms() > deadline) {
            nvme_qpair_expire_cid(q, cid, -ETIMEDOUT);
            uint32_t csts = nvme_mmio_read32(&c->bar, NVME_REG_CSTS);
            if (csts != NVME_REG32_GONE && nvme_csts_cfs(csts))
                return -EIO;
            return -ETIMEDOUT;
        }
        if (spin > SPINS_BEFORE_SLEEP)
            pause_short();
    }
    if (cpl)
        *cpl = w.cpl;
    return w.cpl.err;
}

/* The driver's own admin commands (their PRPs built by it). */
static int admin_exec(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len, struct nvme_cpl *cpl,
                      uint32_t timeout_ms)
{
    return admin_exec_as(c, cmd, buf, len, cpl, timeout_ms, false, NULL, 0);
}

int nvme_ctrl_admin(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len, struct nvme_cpl *cpl,
                    uint32_t timeout_ms)
{
    return nvme_ctrl_admin_err(c, cmd, buf, len, cpl, timeout_ms, NULL, 0);
}

int nvme_ctrl_admin_own(struct nvme_ctrl *c, struct nvme_sqe *cmd, struct nvme_cpl *cpl, uint32_t timeout_ms)
{
    if (!c || !cmd)
        return -EINVAL;
    struct nvme_cpl local;
    if (!cpl)
        cpl = &local;
    memset(cpl, 0, sizeof(*cpl));
    pthread_mutex_lock(&c->admin_lock);
    int rc = admin_exec(c, cmd, NULL, 0, cpl, timeout_ms);
    pthread_mutex_unlock(&c->admin_lock);
    return rc;
}

int nvme_ctrl_admin_err(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len, struct nvme_cpl *cpl,
                        uint32_t timeout_ms, char *err, size_t errlen)
{
    if (!c || !cmd || (len && !buf))
        return -EINVAL;
    if (len > NVME_ADMIN_BUF_SIZE)
        return -E2BIG;
    if (len && (cmd->opc == NVME_ADM_CREATE_CQ || cmd->opc == NVME_ADM_CREATE_SQ || cmd->opc == NVME_ADM_DBBUF_CONFIG))
        return nvme_errf(err, errlen, -EINVAL,
                         "%s: the controller keeps using this memory, so it cannot be buf (copied through the "
                         "driver's admin buffer): give a data buffer's bus address as PRP1",
                         nvme_opc_name(true, cmd->opc));
    struct nvme_cpl local;
    if (!cpl)
        cpl = &local;
    memset(cpl, 0, sizeof(*cpl));
    pthread_mutex_lock(&c->admin_lock);
    void *dbuf = NULL;
    if (len) {
        dbuf = c->admin_buf->vaddr;
        memcpy(dbuf, buf, len);
    }
    /* with buf the driver builds the PRPs into its bounce buffer; without, the user's PRPs are checked */
    int rc = admin_exec_as(c, cmd, dbuf, len, cpl, timeout_ms, len == 0, err, errlen);
    if (rc == 0 && len)
        memcpy(buf, dbuf, len);
    pthread_mutex_unlock(&c->admin_lock);
    if (rc == 0)
        cmd->cid = cpl->cid;
    return rc;
}

/* Admin command whose failure status is an error: -EIO with the status logged and in err. */
static int admin_checked(struct nvme_ctrl *c, struct nvme_sqe *cmd, void *buf, size_t len, uint32_t *cdw0, char *err,
                         size_t errlen)
{
    struct nvme_cpl cpl;
    int rc = admin_exec(c, cmd, buf, len, &cpl, NVME_ADMIN_TIMEOUT_MS);
    const char *what = nvme_opc_name(true, cmd->opc);
    if (rc)
        return nvme_errf(err, errlen, rc, "controller %u: %s failed: %s", c->index, what, strerror(-rc));
    if (!nvme_cpl_ok(&cpl))
        return nvme_errf(err, errlen, -EIO, "controller %u: %s failed: %s (sct 0x%x sc 0x%02x)", c->index, what,
                         nvme_status_name(cpl.sct, cpl.sc), cpl.sct, cpl.sc);
    if (cdw0)
        *cdw0 = cpl.cdw0;
    return 0;
}

static void identify_cmd(struct nvme_sqe *cmd, uint8_t cns, uint32_t nsid)
{
    memset(cmd, 0, sizeof(*cmd));
    cmd->opc = NVME_ADM_IDENTIFY;
    cmd->nsid = nsid;
    cmd->cdw10 = cns;
}

static int identify_namespaces(struct nvme_ctrl *c, char *err, size_t errlen)
{
    struct nvme_sqe cmd;
    uint32_t *ids = calloc(NVME_NS_LIST_MAX > c->id.nn ? NVME_NS_LIST_MAX : c->id.nn, sizeof(uint32_t));
    if (!ids)
        return -ENOMEM;
    uint32_t n = 0;
    bool have_list = nvme_vs_mjr(c->vs) > 1 || nvme_vs_mnr(c->vs) >= 1; /* CNS 02h since 1.1 */
    if (have_list) {
        uint32_t start = 0;
        for (;;) {
            identify_cmd(&cmd, NVME_CNS_ACTIVE_NS_LIST, start);
            struct nvme_cpl cpl;
            int rc = admin_exec(c, &cmd, c->admin_buf->vaddr, NVME_IDENTIFY_SIZE, &cpl, NVME_ADMIN_TIMEOUT_MS);
            if (rc) {
                free(ids);
                return nvme_errf(err, errlen, rc, "controller %u: Identify active namespace list failed: %s", c->index,
                                 strerror(-rc));
            }
            if (!nvme_cpl_ok(&cpl)) {
                have_list = false; /* fall back to probing 1..NN */
                n = 0;
                break;
            }
            const uint32_t *l = (const uint32_t *)c->admin_buf->vaddr;
            uint32_t k = 0;
            while (k < NVME_NS_LIST_MAX && l[k] && n < NVME_NS_LIST_MAX)
                ids[n++] = l[k++];
            if (k < NVME_NS_LIST_MAX || n >= NVME_NS_LIST_MAX)
                break;
            start = l[NVME_NS_LIST_MAX - 1];
        }
    }
    if (!have_list)
        for (uint32_t i = 1; i <= c->id.nn && n < NVME_NS_LIST_MAX; i++)
            ids[n++] = i;

    struct nvme_ns *ns = calloc(n ? n : 1, sizeof(*ns));
    if (!ns) {
        free(ids);
        return -ENOMEM;
    }
    uint32_t nns = 0;
    for (uint32_t i = 0; i < n; i++) {
        identify_cmd(&cmd, NVME_CNS_NS, ids[i]);
        int rc = admin_checked(c, &cmd, c->admin_buf->vaddr, NVME_IDENTIFY_SIZE, NULL, err, errlen);
        if (rc) {
            free(ids);
            free(ns);
            return rc;
        }
        const struct nvme_id_ns *idns = (const struct nvme_id_ns *)c->admin_buf->vaddr;
        if (idns->nsze == 0)
            continue; /* inactive (probing fallback) */
        uint32_t lbads = nvme_id_ns_lbads(idns);
        if (lbads < NVME_LBADS_MIN || lbads > LBADS_MAX) {
            rc = nvme_errf(err, errlen, -EIO, "controller %u: namespace %u reports LBA data size 2^%u", c->index,
                           ids[i], lbads);
            free(ids);
            free(ns);
            return rc;
        }
        struct nvme_ns *x = &ns[nns++];
        x->ctrl = c;
        x->nsid = ids[i];
        memcpy(&x->id, idns, sizeof(x->id));
        x->lba_shift = lbads;
        x->lba_size = 1u << lbads;
        x->nsze = idns->nsze;
    }
    free(ids);
    /* after a reset, keep the namespace objects callers hold when the active set did not change */
    bool same = c->ns && c->nns == nns;
    for (uint32_t i = 0; same && i < nns; i++)
        same = c->ns[i].nsid == ns[i].nsid;
    if (same) {
        memcpy(c->ns, ns, (size_t)nns * sizeof(*ns));
        free(ns);
    } else {
        if (c->ns)
            nvme_log(NVME_LOG_WARN, "controller %u: active namespaces changed; old namespace handles are invalid",
                     c->index);
        free(c->ns);
        c->ns = ns;
        c->nns = nns;
    }
    return 0;
}

/* Steps after the admin queue is live: Identify, namespaces, Number of Queues. */
static int ctrl_configure(struct nvme_ctrl *c, char *err, size_t errlen)
{
    struct nvme_sqe cmd;
    identify_cmd(&cmd, NVME_CNS_CTRL, 0);
    int rc = admin_checked(c, &cmd, c->admin_buf->vaddr, NVME_IDENTIFY_SIZE, NULL, err, errlen);
    if (rc)
        return rc;
    memcpy(&c->id, c->admin_buf->vaddr, sizeof(c->id));
    if (c->id.sqes && (nvme_id_qes_min(c->id.sqes) > NVME_SQES_LOG2 || nvme_id_qes_max(c->id.sqes) < NVME_SQES_LOG2))
        return nvme_errf(err, errlen, -ENOTSUP, "controller %u: does not take 64-byte SQEs (SQES 0x%02x)", c->index,
                         c->id.sqes);
    if (c->id.cqes && (nvme_id_qes_min(c->id.cqes) > NVME_CQES_LOG2 || nvme_id_qes_max(c->id.cqes) < NVME_CQES_LOG2))
        return nvme_errf(err, errlen, -ENOTSUP, "controller %u: does not take 16-byte CQEs (CQES 0x%02x)", c->index,
                         c->id.cqes);
    uint64_t mpsmin = (uint64_t)1 << (NVME_PAGE_SHIFT_MIN + nvme_cap_mpsmin(c->cap));
    uint64_t mdts = c->id.mdts ? ((uint64_t)1 << c->id.mdts) * mpsmin : 0;
    c->mdts_bytes = mdts > UINT32_MAX ? UINT32_MAX : (uint32_t)mdts;
    uint64_t cap = (uint64_t)((1u << c->page_shift) / NVME_PRP_ENTRY_SIZE) << c->page_shift;
    if (cap > MAX_XFER_CAP && c->page_shift == NVME_PAGE_SHIFT_MIN)
        cap = MAX_XFER_CAP;
    c->max_xfer = (uint32_t)(mdts && mdts < cap ? mdts : cap);

    rc = identify_namespaces(c, err, errlen);
    if (rc)
        return rc;

    memset(&cmd, 0, sizeof(cmd));
    cmd.opc = NVME_ADM_SET_FEATURES;
    cmd.cdw10 = NVME_FEAT_NUM_QUEUES;
    cmd.cdw11 = NVME_NUM_QUEUES(NVME_IOQ_REQUEST, NVME_IOQ_REQUEST);
    uint32_t dw0 = 0;
    rc = admin_checked(c, &cmd, NULL, 0, &dw0, err, errlen);
    if (rc)
        return rc;
    uint32_t nsq = nvme_num_queues_nsq(dw0), ncq = nvme_num_queues_ncq(dw0);
    uint32_t granted = nsq < ncq ? nsq : ncq;
    if (granted > NVME_IOQ_REQUEST)
        granted = NVME_IOQ_REQUEST;
    uint8_t *used = calloc(granted + 1u, 1);
    if (!used)
        return -ENOMEM;
    pthread_mutex_lock(&c->q_lock);
    free(c->qid_used);
    c->qid_used = used;
    c->max_qpairs = granted;
    pthread_mutex_unlock(&c->q_lock);
    return 0;
}

static const char *rc_str(int rc)
{
    return rc == -ETIMEDOUT ? "timed out" : rc == -EIO ? "controller fatal status (CSTS.CFS)" : strerror(-rc);
}

/* Disable, program the admin queue, enable, configure. The admin qpair memory exists already. */
static int ctrl_bringup(struct nvme_ctrl *c, char *err, size_t errlen)
{
    int rc = ctrl_disable(c);
    if (rc)
        return nvme_errf(err, errlen, rc, "controller %u: disabling (CC.EN=0, wait CSTS.RDY=0 within %u ms) failed: %s",
                         c->index, c->ready_timeout_ms, rc_str(rc));
    nvme_qpair_reset_rings(&c->admin);
    rc = ctrl_enable(c);
    if (rc)
        return nvme_errf(err, errlen, rc, "controller %u: enabling (CC.EN=1, wait CSTS.RDY=1 within %u ms) failed: %s",
                         c->index, c->ready_timeout_ms, rc_str(rc));
    c->enabled = true;
    return ctrl_configure(c, err, errlen);
}

static void ctrl_shutdown(struct nvme_ctrl *c)
{
    if (!c->enabled)
        return;
    uint32_t cc = nvme_mmio_read32(&c->bar, NVME_REG_CC);
    if (cc == NVME_REG32_GONE)
        return;
    uint32_t timeout = NVME_SHUTDOWN_TIMEOUT_MS;
    if (c->id.rtd3e) {
        uint32_t ms = c->id.rtd3e / US_PER_MS;
        timeout = ms > NVME_SHUTDOWN_TIMEOUT_MAX_MS ? NVME_SHUTDOWN_TIMEOUT_MAX_MS : ms < timeout ? timeout : ms;
    }
    nvme_mmio_write32(&c->bar, NVME_REG_CC, (cc & ~NVME_CC_SHN_MASK) | (NVME_CC_SHN_NORMAL << NVME_CC_SHN_SHIFT));
    uint64_t deadline = now_ms() + timeout;
    for (unsigned spin = 0;; spin++) {
        uint32_t csts = nvme_mmio_read32(&c->bar, NVME_REG_CSTS);
        if (csts == NVME_REG32_GONE || nvme_csts_cfs(csts))
            break;
        if (nvme_csts_shst(csts) == NVME_CSTS_SHST_COMPLETE)
            break;
        if (now_ms() > deadline) {
            nvme_log(NVME_LOG_WARN, "controller %u: shutdown did not complete within %u ms", c->index, timeout);
            break;
        }
        if (spin > SPINS_BEFORE_SLEEP)
            pause_short();
        else
            sched_yield();
    }
    /* mirror of the enable: leave the controller disabled */
    cc = nvme_mmio_read32(&c->bar, NVME_REG_CC);
    nvme_mmio_write32(&c->bar, NVME_REG_CC, cc & ~(NVME_CC_EN | NVME_CC_SHN_MASK));
    if (wait_ready(c, false, c->ready_timeout_ms) != 0)
        nvme_log(NVME_LOG_WARN, "controller %u: CSTS.RDY did not clear after shutdown", c->index);
    c->enabled = false;
}

int nvme_ctrl_attach(struct nvme_target *t, unsigned index, const struct nvme_bar *bar, struct nvme_ctrl **out,
                     char *err, size_t errlen)
{
    *out = NULL;
    if (!bar || !bar->base || bar->size < NVME_BAR0_MIN_SIZE)
        return nvme_errf(err, errlen, -EINVAL, "controller %u: BAR0 missing or smaller than %u bytes", index,
                         NVME_BAR0_MIN_SIZE);
    struct nvme_ctrl *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->target = t;
    c->index = index;
    c->bar = *bar;
    pthread_mutex_init(&c->admin_lock, NULL);
    pthread_mutex_init(&c->q_lock, NULL);
    pthread_mutex_init(&c->sync_lock, NULL);

    int rc;
    c->cap = nvme_mmio_read64(&c->bar, NVME_REG_CAP);
    c->vs = nvme_mmio_read32(&c->bar, NVME_REG_VS);
    if (c->cap == UINT64_MAX) {
        rc = nvme_errf(err, errlen, -ENXIO, "controller %u: registers read all ones (function gone or BAR not decoded)",
                       index);
        goto fail_free;
    }
    if (!(nvme_cap_css(c->cap) & NVME_CAP_CSS_NVM)) {
        rc = nvme_errf(err, errlen, -ENOTSUP, "controller %u: NVM command set not supported (CAP.CSS 0x%x)", index,
                       nvme_cap_css(c->cap));
        goto fail_free;
    }
    c->dstrd = nvme_cap_dstrd(c->cap);
    c->page_shift = NVME_PAGE_SHIFT_MIN + nvme_cap_mpsmin(c->cap);
    c->ready_timeout_ms = nvme_cap_to(c->cap) * NVME_CAP_TO_UNIT_MS;
    if (c->ready_timeout_ms == 0)
        c->ready_timeout_ms = NVME_CAP_TO_UNIT_MS;
    if ((size_t)nvme_db_cq_off(NVME_ADMIN_QID, c->dstrd) + NVME_MMIO_DWORD > bar->size) {
        rc = nvme_errf(err, errlen, -EINVAL, "controller %u: BAR0 too small for the doorbells at DSTRD %u", index,
                       c->dstrd);
        goto fail_free;
    }
    /* provisional limits for the admin queue's own PRP building (admin buffer is <= 64 KiB) */
    c->max_xfer = NVME_ADMIN_BUF_SIZE;
    uint32_t adepth = NVME_ADMIN_DEPTH;
    if (adepth > nvme_cap_mqes(c->cap) + 1u)
        adepth = nvme_cap_mqes(c->cap) + 1u;
    rc = nvme_qpair_setup(&c->admin, c, NVME_ADMIN_QID, adepth, adepth, NVME_ADMIN_TIMEOUT_MS, 1);
    if (rc) {
        nvme_errf(err, errlen, rc, "controller %u: allocating the admin queue failed: %s", index, strerror(-rc));
        goto fail_free;
    }
    c->admin.ctrl_gen = &c->admin.gen;       /* the admin queue survives resets */
    c->admin.timeout_ticks = UINT64_MAX / 2; /* admin_exec keeps per-call deadlines */
    c->admin.scan_ticks = UINT64_MAX / 2;
    c->admin.next_scan = UINT64_MAX;
    rc = nvme_dma_alloc_in(&t->dma, NVME_ADMIN_BUF_SIZE, &c->admin_buf);
    if (rc) {
        nvme_errf(err, errlen, rc, "controller %u: allocating the admin buffer failed: %s", index, strerror(-rc));
        goto fail_admin;
    }
    pthread_mutex_lock(&c->admin_lock);
    rc = ctrl_bringup(c, err, errlen);
    pthread_mutex_unlock(&c->admin_lock);
    if (rc)
        goto fail_enabled;
    nvme_log(NVME_LOG_DEBUG, "controller %u up: %u namespaces, %u I/O queues, max transfer %u bytes", index, c->nns,
             c->max_qpairs, c->max_xfer);
    *out = c;
    return 0;

fail_enabled:
    ctrl_shutdown(c);
    nvme_dma_free(c->admin_buf);
fail_admin:
    nvme_qpair_teardown(&c->admin);
fail_free:
    free(c->ns);
    free(c->qid_used);
    pthread_mutex_destroy(&c->admin_lock);
    pthread_mutex_destroy(&c->q_lock);
    pthread_mutex_destroy(&c->sync_lock);
    free(c);
    return rc;
}

static void qpair_free(struct nvme_qpair *q);

void nvme_ctrl_detach(struct nvme_ctrl *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->sync_lock);
    if (c->sync_q)
        nvme_qpair_destroy(c->sync_q);
    c->sync_q = NULL;
    if (c->sync_buf)
        nvme_dma_free(c->sync_buf);
    c->sync_buf = NULL;
    pthread_mutex_unlock(&c->sync_lock);
    unsigned leaked = 0;
    while (c->qpairs) {
        nvme_qpair_destroy(c->qpairs);
        leaked++;
    }
    if (leaked)
        nvme_log(NVME_LOG_WARN, "controller %u closed with %u I/O qpairs still open; destroyed them", c->index, leaked);
    ctrl_shutdown(c);
    nvme_dma_free(c->admin_buf);
    nvme_qpair_teardown(&c->admin);
    free(c->ns);
    free(c->qid_used);
    pthread_mutex_destroy(&c->admin_lock);
    pthread_mutex_destroy(&c->q_lock);
    pthread_mutex_destroy(&c->sync_lock);
    free(c);
}

int nvme_ctrl_reset(struct nvme_ctrl *c)
{
    if (!c)
        return -EINVAL;
    char err[NVME_ERRLEN];
    pthread_mutex_lock(&c->sync_lock);
    pthread_mutex_lock(&c->admin_lock);
    __atomic_add_fetch(&c->generation, 1, __ATOMIC_RELEASE); /* every I/O qpair is dead from here on */
    struct nvme_qpair *sq = c->sync_q;
    c->sync_q = NULL;
    c->enabled = false;
    int rc = ctrl_bringup(c, err, sizeof(err));
    pthread_mutex_unlock(&c->admin_lock);
    if (sq)
        nvme_qpair_destroy(sq); /* dead: frees without admin commands */
    pthread_mutex_unlock(&c->sync_lock);
    if (rc)
        nvme_log(NVME_LOG_ERROR, "reset: %s", err);
    else
        nvme_log(NVME_LOG_INFO, "controller %u reset", c->index);
    return rc;
}

/* ------------------------------------------------------------------------------------------------ */
/* I/O queue pairs                                                                                  */
/* ------------------------------------------------------------------------------------------------ */
int nvme_ctrl_qid_alloc(struct nvme_ctrl *c)
{
    int qid = -EBUSY;
    pthread_mutex_lock(&c->q_lock);
    for (uint32_t i = 1; i <= c->max_qpairs; i++) {
        if (!c->qid_used[i]) {
            c->qid_used[i] = 1;
            qid = (int)i;
            break;
        }
    }
    pthread_mutex_unlock(&c->q_lock);
    return qid;
}

void nvme_ctrl_qid_free(struct nvme_ctrl *c, uint16_t qid)
{
    pthread_mutex_lock(&c->q_lock);
    if (qid >= 1 && qid <= c->max_qpairs)
        c->qid_used[qid] = 0;
    pthread_mutex_unlock(&c->q_lock);
}

static int admin_simple(struct nvme_ctrl *c, struct nvme_sqe *cmd, struct nvme_cpl *cpl)
{
    pthread_mutex_lock(&c->admin_lock);
    int rc = admin_exec(c, cmd, NULL, 0, cpl, NVME_ADMIN_TIMEOUT_MS);
    pthread_mutex_unlock(&c->admin_lock);
    return rc;
}

static int delete_queue(struct nvme_ctrl *c, uint8_t opc, uint16_t qid)
{
    struct nvme_sqe cmd = {.opc = opc, .cdw10 = qid};
    struct nvme_cpl cpl;
    int rc = admin_simple(c, &cmd, &cpl);
    if (rc == 0 && !nvme_cpl_ok(&cpl)) {
        nvme_log(NVME_LOG_WARN, "controller %u: %s %u: %s", c->index, nvme_opc_name(true, opc), qid,
                 nvme_status_name(cpl.sct, cpl.sc));
        rc = -EIO;
    }
    return rc;
}

int nvme_qpair_create(struct nvme_ctrl *c, const struct nvme_qpair_opts *opts, struct nvme_qpair **out)
{
    if (!c || !out)
        return -EINVAL;
    *out = NULL;
    uint32_t depth = opts && opts->depth ? opts->depth : NVME_QPAIR_DEFAULT_DEPTH;
    uint32_t timeout = opts && opts->timeout_ms ? opts->timeout_ms : NVME_QPAIR_DEFAULT_TIMEOUT_MS;
    uint32_t batch = opts ? opts->batch : 1;
    uint32_t cq_depth = depth + (opts ? opts->cq_extra : 0);
    if (depth < NVME_QUEUE_MIN_ENTRIES || depth > nvme_ctrl_max_depth(c) || cq_depth < depth ||
        cq_depth > nvme_ctrl_max_depth(c))
        return -EINVAL;
    if (batch > depth - 1)
        batch = depth - 1;
    int qid = nvme_ctrl_qid_alloc(c);
    if (qid < 0)
        return qid;
    struct nvme_qpair *q = calloc(1, sizeof(*q));
    if (!q) {
        nvme_ctrl_qid_free(c, (uint16_t)qid);
        return -ENOMEM;
    }
    int rc = nvme_qpair_setup(q, c, (uint16_t)qid, depth, cq_depth, timeout, batch);
    if (rc) {
        free(q);
        nvme_ctrl_qid_free(c, (uint16_t)qid);
        return rc;
    }
    struct nvme_sqe cmd = {
        .opc = NVME_ADM_CREATE_CQ,
        .prp1 = nvme_dma_iova(q->mem, (const void *)q->cq),
        .cdw10 = NVME_CREATE_Q_CDW10(qid, cq_depth),
        .cdw11 = NVME_CREATE_Q_PC,
    };
    struct nvme_cpl cpl;
    rc = admin_simple(c, &cmd, &cpl);
    if (rc == 0 && !nvme_cpl_ok(&cpl)) {
        nvme_log(NVME_LOG_ERROR, "controller %u: Create I/O Completion Queue %d (depth %u): %s", c->index, qid,
                 cq_depth, nvme_status_name(cpl.sct, cpl.sc));
        rc = -EIO;
    }
    if (rc)
        goto fail;
    memset(&cmd, 0, sizeof(cmd));
    cmd.opc = NVME_ADM_CREATE_SQ;
    cmd.prp1 = nvme_dma_iova(q->mem, q->sq);
    cmd.cdw10 = NVME_CREATE_Q_CDW10(qid, depth);
    cmd.cdw11 = NVME_CREATE_Q_PC | ((uint32_t)qid << NVME_CREATE_SQ_CQID_SHIFT);
    rc = admin_simple(c, &cmd, &cpl);
    if (rc == 0 && !nvme_cpl_ok(&cpl)) {
        nvme_log(NVME_LOG_ERROR, "controller %u: Create I/O Submission Queue %d (depth %u): %s", c->index, qid, depth,
                 nvme_status_name(cpl.sct, cpl.sc));
        rc = -EIO;
    }
    if (rc) {
        delete_queue(c, NVME_ADM_DELETE_CQ, (uint16_t)qid);
        goto fail;
    }
    pthread_mutex_lock(&c->q_lock);
    q->next = c->qpairs;
    if (c->qpairs)
        c->qpairs->prev = q;
    c->qpairs = q;
    pthread_mutex_unlock(&c->q_lock);
    *out = q;
    return 0;
fail:
    nvme_qpair_teardown(q);
    free(q);
    nvme_ctrl_qid_free(c, (uint16_t)qid);
    return rc;
}

static void qpair_free(struct nvme_qpair *q)
{
    struct nvme_ctrl *c = q->ctrl;
    pthread_mutex_lock(&c->q_lock);
    if (q->prev)
        q->prev->next = q->next;
    else if (c->qpairs == q)
        c->qpairs = q->next;
    if (q->next)
        q->next->prev = q->prev;
    pthread_mutex_unlock(&c->q_lock);
    nvme_qpair_teardown(q);
    free(q);
}

int nvme_qpair_destroy(struct nvme_qpair *q)
{
    if (!q)
        return 0;
    struct nvme_ctrl *c = q->ctrl;
    int rc = 0;
    bool live = q->gen == __atomic_load_n(&c->generation, __ATOMIC_ACQUIRE) && !q->dead;
    if (live) {
        nvme_qpair_ring(q);
        rc = delete_queue(c, NVME_ADM_DELETE_SQ, q->qid);
        if (rc == 0)
            (void)nvme_qpair_poll(q, 0); /* reap "aborted due to SQ deletion" completions */
        nvme_qpair_fail_all(q, -ECANCELED);
        int rc2 = delete_queue(c, NVME_ADM_DELETE_CQ, q->qid);
        if (!rc)
            rc = rc2;
        nvme_ctrl_qid_free(c, q->qid);
    } else {
        nvme_qpair_fail_all(q, -ENXIO);
    }
    qpair_free(q);
    return rc;
}

/* ------------------------------------------------------------------------------------------------ */
/* Synchronous I/O                                                                                  */
/* ------------------------------------------------------------------------------------------------ */
int nvme_ns_io_sync(struct nvme_ctrl *c, struct nvme_ns *ns, uint8_t opc, uint64_t slba, uint32_t nlb, void *buf,
                    size_t len, struct nvme_cpl *cpl)
{
    if (!c || !ns || ns->ctrl != c || (len && !buf))
        return -EINVAL;
    if (len > c->max_xfer)
        return -E2BIG;
    struct nvme_cpl local;
    if (!cpl)
        cpl = &local;
    memset(cpl, 0, sizeof(*cpl));
    pthread_mutex_lock(&c->sync_lock);
    int rc = 0;
    if (c->sync_q && (c->sync_q->dead || c->sync_q->gen != c->generation)) {
        nvme_qpair_destroy(c->sync_q);
        c->sync_q = NULL;
    }
    if (!c->sync_q) {
        struct nvme_qpair_opts o = {.depth = NVME_SYNC_QPAIR_DEPTH, .timeout_ms = 0, .batch = 1};
        if (o.depth > nvme_ctrl_max_depth(c))
            o.depth = nvme_ctrl_max_depth(c);
        rc = nvme_qpair_create(c, &o, &c->sync_q);
    }
    if (!rc && !c->sync_buf)
        rc = nvme_dma_alloc_in(&c->target->dma, c->max_xfer, &c->sync_buf);
    if (rc)
        goto out;
    void *dbuf = buf;
    bool bounce = len && !nvme_dma_find(&c->target->dma, buf, len);
    if (bounce) {
        dbuf = c->sync_buf->vaddr;
        memcpy(dbuf, buf, len);
    }
    struct cmd_wait w = {0};
    rc = nvme_qpair_submit(c->sync_q, ns, opc, slba, nlb, dbuf, len, cmd_wait_cb, &w);
    if (rc)
        goto out;
    while (!w.done) {
        int n = nvme_qpair_poll(c->sync_q, 0);
        if (n < 0 && !w.done) {
            rc = n;
            goto out;
        }
    }
    *cpl = w.cpl;
    rc = w.cpl.err;
    if (bounce && rc == 0 && nvme_cpl_ok(cpl) && opc == NVME_CMD_READ)
        memcpy(buf, dbuf, len);
out:
    pthread_mutex_unlock(&c->sync_lock);
    return rc;
}
