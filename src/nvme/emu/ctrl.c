/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ctrl.c — the emulated controller: set open/close, BAR registers and CC,
 * fault injection, statistics, and the service thread of mode=thread.
 * Admin commands and queue objects live in admin.c, NVM commands and queue
 * service in io.c, completions in complete.c, PRPs in prp.c.
 *
 * Register semantics: CAP/VS are read-only (restored after any store);
 * CC.EN 0->1 sets CSTS.RDY only when AQA/ASQ/ACQ and CC.MPS/CSS/AMS are valid
 * (else CSTS.CFS); CC.EN 1->0 deletes every queue and clears RDY/CFS/SHST;
 * CC.SHN != 0 sets CSTS.SHST = complete.  Doorbells at 0x1000 with the
 * CAP.DSTRD stride; a write of an out-of-range value is ignored.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nvme/emu/emu_internal.h"
#include "nvme/emu/io.h"
#include "nvme/emu/ns.h"
#include "nvme/emu/prp.h"
#include "nvme/uri.h"

/* ---------------------------------------------------------------- registers in BAR memory */
static void csts_publish(struct emu_ctrl *c)
{
    emu_reg_w32(c, NVME_REG_CSTS, atomic_load_explicit(&c->csts, memory_order_acquire));
}

static void csts_set(struct emu_ctrl *c, uint32_t set, uint32_t clear)
{
    uint32_t v = atomic_load_explicit(&c->csts, memory_order_relaxed);
    atomic_store_explicit(&c->csts, (v & ~clear) | set, memory_order_release);
    csts_publish(c);
}

static void restore_ro(struct emu_ctrl *c)
{
    emu_reg_w64(c, NVME_REG_CAP, c->cap);
    emu_reg_w32(c, NVME_REG_VS, NVME_VS(1, 4, 0));
    csts_publish(c);
}

static inline uint32_t db_stride(const struct emu_ctrl *c)
{
    return NVME_DB_BASE_STRIDE << c->cfg.dstrd;
}

/* ---------------------------------------------------------------- CC */
static void ctrl_disable(struct emu_ctrl *c)
{
    emu_queues_reset(c);
    c->enabled = false;
    c->nq_set = false;
    c->nsq_alloc = c->ncq_alloc = c->cfg.nioq;
    memset(c->feat, 0, sizeof(c->feat));
    atomic_store_explicit(&c->kato, 0, memory_order_relaxed);
    c->acre = 0;
    atomic_store(&c->cfs, false);
    atomic_store(&c->iops_tat, 0);
    atomic_store(&c->bw_tat, 0);
    csts_set(c, 0, NVME_CSTS_RDY | NVME_CSTS_CFS | NVME_CSTS_SHST_MASK);
}

static void ctrl_enable(struct emu_ctrl *c, uint32_t cc)
{
    uint32_t aqa = emu_reg_r32(c, NVME_REG_AQA);
    uint64_t asq = emu_reg_r64(c, NVME_REG_ASQ), acq = emu_reg_r64(c, NVME_REG_ACQ);
    uint32_t asqs = nvme_aqa_asqs(aqa) + 1, acqs = nvme_aqa_acqs(aqa) + 1;
    bool ok = asqs >= NVME_QUEUE_MIN_ENTRIES && acqs >= NVME_QUEUE_MIN_ENTRIES && asqs <= c->cfg.mqes &&
              acqs <= c->cfg.mqes && asq && acq && !(asq & (EMU_PAGE_SIZE - 1)) && !(acq & (EMU_PAGE_SIZE - 1)) &&
              nvme_cc_mps(cc) == 0 && nvme_cc_css(cc) == NVME_CC_CSS_NVM && nvme_cc_ams(cc) == 0 &&
              emu_dma_ok(c->dma, asq, (uint64_t)asqs * NVME_SQE_SIZE) &&
              emu_dma_ok(c->dma, acq, (uint64_t)acqs * NVME_CQE_SIZE);
    if (!ok) {
        /* the host asked for something this controller cannot run: fatal status, RDY stays 0 */
        atomic_store(&c->cfs, true);
        csts_set(c, NVME_CSTS_CFS, NVME_CSTS_RDY);
        return;
    }
    struct emu_cq *cq = emu_cq_new(c, 0, acq, acqs);
    struct emu_sq *sq = cq ? emu_sq_new(c, 0, asq, asqs, cq) : NULL;
    if (!sq) {
        emu_cq_free(cq);
        atomic_store(&c->cfs, true);
        csts_set(c, NVME_CSTS_CFS, NVME_CSTS_RDY);
        return;
    }
    c->cqs[0] = cq;
    atomic_store_explicit(&c->sqs[0], sq, memory_order_release);
    c->enabled = true;
    csts_set(c, NVME_CSTS_RDY, NVME_CSTS_SHST_MASK);
}

static void cc_write(struct emu_ctrl *c, uint32_t cc)
{
    uint32_t old = c->cc;
    c->cc = cc;
    if (!nvme_cc_en(old) && nvme_cc_en(cc))
        ctrl_enable(c, cc);
    else if (nvme_cc_en(old) && !nvme_cc_en(cc))
        ctrl_disable(c);
    if (nvme_cc_shn(cc) != NVME_CC_SHN_NONE && nvme_cc_shn(old) == NVME_CC_SHN_NONE)
        csts_set(c, NVME_CSTS_SHST_COMPLETE << NVME_CSTS_SHST_SHIFT, NVME_CSTS_SHST_MASK);
}

/* ---------------------------------------------------------------- BAR ops */
/* Every entry of the host into the controller is one read-side section of the DMA windows (prp.c). */
static inline unsigned dma_shard(const struct emu_ctrl *c, uint32_t qid)
{
    return c->index * 7u + qid;
}

/* A doorbell of queue qid (idx: 2 qid for the SQ tail, 2 qid + 1 for the CQ head), inside a read-side section. */
static void db_write(struct emu_ctrl *c, uint32_t idx, uint32_t qid, uint64_t val)
{
    if (idx & 1) {
        struct emu_cq *cq = c->cqs[qid];
        if (!cq || val >= cq->size)
            return;
        cq->head = (uint32_t)val;
        emu_cq_service(c, cq);
    } else {
        struct emu_sq *sq = atomic_load_explicit(&c->sqs[qid], memory_order_acquire);
        if (!sq || val >= sq->size)
            return;
        sq->tail = (uint32_t)val;
        emu_sq_doorbell(c, sq);
    }
}

/* A register store (below the doorbells). */
static void reg_write(struct emu_ctrl *c, uint32_t off, uint64_t val)
{
    if (c->threaded)
        pthread_mutex_lock(&c->lock);
    if (off == NVME_REG_CC)
        cc_write(c, (uint32_t)val);
    restore_ro(c);
    if (c->threaded)
        pthread_mutex_unlock(&c->lock);
}

/* Keep Alive Timeout: the controller stops fetching and reports CSTS.CFS until CC.EN 1->0 */
static void ka_check(struct emu_ctrl *c)
{
    if (emu_keep_alive_expired(c)) {
        atomic_store(&c->cfs, true);
        csts_set(c, NVME_CSTS_CFS, 0);
    }
}

static void bar_write(void *ctx, uint32_t off, uint64_t val, unsigned width)
{
    struct emu_ctrl *c = ctx;
    (void)width;
    if (!c->threaded &&
        atomic_load_explicit(
            &c->kato,
            memory_order_relaxed)) /* mode=inline: the timer is looked at when the host touches the controller */
        ka_check(c);
    if (off >= NVME_REG_DBS) {
        /* a doorbell, checked before the section: mode=thread's service thread reads the words itself; beyond the
         * BAR, off the stride, beyond the queues or while disabled it is ignored */
        const uint32_t rel = off - NVME_REG_DBS, idx = rel >> c->db_shift, qid = idx >> 1;
        if (c->threaded || off >= c->memsize || (rel & c->db_mask) || qid > c->cfg.nioq || !c->enabled)
            return;
        unsigned e = emu_dma_enter(c->dma, dma_shard(c, qid));
        db_write(c, idx, qid, val);
        emu_dma_exit(c->dma, dma_shard(c, qid), e);
        return;
    }
    unsigned e = emu_dma_enter(c->dma, dma_shard(c, 0));
    reg_write(c, off, val);
    emu_dma_exit(c->dma, dma_shard(c, 0), e);
}

static void bar_idle(void *ctx, uint16_t cqid)
{
    struct emu_ctrl *c = ctx;
    if (c->threaded || cqid > c->cfg.nioq || !c->enabled)
        return;
    if (atomic_load_explicit(&c->kato, memory_order_relaxed))
        ka_check(c);
    struct emu_cq *cq = c->cqs[cqid];
    if (cq) {
        unsigned e = emu_dma_enter(c->dma, dma_shard(c, cqid));
        emu_cq_service(c, cq);
        emu_dma_exit(c->dma, dma_shard(c, cqid), e);
    }
}

static const struct nvme_bar_ops emu_bar_ops = {.write = bar_write, .idle = bar_idle};

/* ---------------------------------------------------------------- mode=thread */
static void *svc_main(void *arg)
{
    struct emu_ctrl *c = arg;
    unsigned spins = 0;
    const uint32_t dstrd = c->cfg.dstrd;
    while (!atomic_load_explicit(&c->svc_stop, memory_order_acquire)) {
        bool work = false, busy = false; /* busy: commands fetched or completed (nvme_emu_svc_stats) */
        uint64_t cmds = 0;
        pthread_mutex_lock(&c->lock); /* first: the controller's domain is switched under it (dma private) */
        struct emu_dma_dom *dom = c->dma;
        unsigned e = emu_dma_enter(dom, dma_shard(c, 0));
        if (atomic_load_explicit(&c->kato, memory_order_relaxed))
            ka_check(c);
        if (c->enabled && !atomic_load_explicit(&c->cfs, memory_order_relaxed)) {
            for (uint32_t q = 0; q <= c->cfg.nioq; q++) {
                struct emu_cq *cq = c->cqs[q];
                struct emu_sq *sq = atomic_load_explicit(&c->sqs[q], memory_order_relaxed);
                if (cq) {
                    uint32_t v = emu_reg_r32(c, nvme_db_cq_off(q, dstrd));
                    if (v != c->db_seen[2 * q + 1] && v < cq->size) {
                        c->db_seen[2 * q + 1] = v;
                        cq->head = v;
                        work = true;
                    }
                }
                if (sq) {
                    uint32_t v = emu_reg_r32(c, nvme_db_sq_off(q, dstrd));
                    if (v != c->db_seen[2 * q] && v < sq->size) {
                        c->db_seen[2 * q] = v;
                        sq->tail = v;
                    }
                    if (sq->tail != sq->head || sq->nheap) {
                        uint64_t fetched = emu_st_fetched(sq->st), before = emu_st_completed(sq->st) + fetched;
                        emu_sq_service(c, sq);
                        /* sq may be gone if an admin command deleted it */
                        struct emu_sq *again = atomic_load_explicit(&c->sqs[q], memory_order_relaxed);
                        if (again == sq && emu_st_completed(sq->st) + emu_st_fetched(sq->st) != before) {
                            work = busy = true;
                            cmds += emu_st_fetched(sq->st) - fetched;
                        }
                    }
                }
            }
        }
        emu_dma_exit(dom, dma_shard(c, 0), e);
        pthread_mutex_unlock(&c->lock);
        emu_st_add(&c->svc_sweeps, 1);
        if (busy) {
            emu_st_add(&c->svc_busy, 1);
            emu_st_add(&c->svc_cmds, cmds);
        }
        if (work) {
            spins = 0;
        } else if (++spins > EMU_SVC_IDLE_SPINS) {
            struct timespec ts = {0, EMU_SVC_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- set open / close */
static int open_backing(const struct emu_cfg *cfg, unsigned ci, unsigned nsi, uint64_t nsze, int *fd_out, char *err,
                        size_t errlen)
{
    char path[EMU_MAX_PATH + 32];
    unsigned total = 0;
    for (unsigned i = 0; i < cfg->ndev; i++)
        total += cfg->c[i].nns;
    if (total == 1)
        snprintf(path, sizeof(path), "%s", cfg->path);
    else
        snprintf(path, sizeof(path), "%s.%u.%u", cfg->path, ci, nsi + 1);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "emu: parameter 'backing': cannot open '%s': %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, errlen, "emu: parameter 'backing': '%s' is not a regular file", path);
        return -EINVAL;
    }
    if ((uint64_t)st.st_size < nsze && ftruncate(fd, (off_t)nsze)) {
        int e = errno;
        close(fd);
        snprintf(err, errlen, "emu: parameter 'backing': cannot size '%s' to %llu bytes: %s", path,
                 (unsigned long long)nsze, strerror(e));
        return -e;
    }
    *fd_out = fd;
    return 0;
}

/* BAR memory, zeroed: a memfd mapped MAP_SHARED (a vfio-user server hands the fd to its client for the
 * doorbells), anonymous memory when memfd_create is refused. NULL when neither works. */
static uint8_t *bar_mem_new(size_t size, int *fd_out)
{
    int fd = memfd_create("nvmelab-emu-bar0", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)size) == 0) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            *fd_out = fd;
            return p;
        }
    }
    if (fd >= 0)
        close(fd);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void ctrl_fini(struct emu_ctrl *c)
{
    if (c->svc_running) {
        atomic_store(&c->svc_stop, true);
        pthread_join(c->svc, NULL);
        c->svc_running = false;
    }
    if (c->sqs && c->cqs)
        emu_queues_reset(c);
    for (unsigned i = 0; i < EMU_MAX_NS; i++)
        if (c->ns[i].nsid)
            emu_ns_fini(&c->ns[i]);
    free(c->sqs);
    free(c->cqs);
    free(c->qstats);
    free(c->db_seen);
    if (c->dma && c->dma != &c->set->dma) { /* its own domain (nvme_emu_ctrl_dma_private) */
        emu_dma_dom_fini(c->dma);
        free(c->dma);
    }
    if (c->mem)
        munmap(c->mem, c->memsize);
    if (c->memfd >= 0)
        close(c->memfd);
    pthread_mutex_destroy(&c->lock);
}

static int ctrl_init(struct nvme_emu_set *set, unsigned idx, char *err, size_t errlen)
{
    struct emu_ctrl *c = &set->ctrls[idx];
    const struct emu_cfg *cfg = &set->cfg;
    c->memfd = -1; /* first: ctrl_fini runs on a controller whose init failed */
    c->set = set;
    c->dma = &set->dma;
    c->index = idx;
    c->cfg = cfg->c[idx];
    c->threaded = cfg->mode == EMU_MODE_THREAD;
    c->db_shift = (uint32_t)__builtin_ctz(db_stride(c));
    c->db_mask = db_stride(c) - 1u;
    c->fast_cfg = !cfg->model.timed && !cfg->ooo && !cfg->inj.every && cfg->inj.ooo_win < 2u;
    pthread_mutex_init(&c->lock, NULL);
    size_t dbend = NVME_REG_DBS + 2u * ((size_t)c->cfg.nioq + 1) * (NVME_DB_BASE_STRIDE << c->cfg.dstrd);
    c->memsize = (dbend + EMU_PAGE_SIZE - 1) & ~(size_t)(EMU_PAGE_SIZE - 1);
    if (c->memsize < NVME_BAR0_MIN_SIZE)
        c->memsize = NVME_BAR0_MIN_SIZE;
    c->mem = bar_mem_new(c->memsize, &c->memfd);
    c->sqs = calloc(c->cfg.nioq + 1, sizeof(*c->sqs));
    c->cqs = calloc(c->cfg.nioq + 1, sizeof(*c->cqs));
    c->qstats = calloc(c->cfg.nioq + 1, sizeof(*c->qstats));
    if (!c->mem || !c->sqs || !c->cqs || !c->qstats) {
        snprintf(err, errlen, "emu: out of memory creating controller %u", idx);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < c->cfg.nns; i++) {
        int fd = -1, r;
        if (cfg->backing == EMU_BACKING_FILE && (r = open_backing(cfg, idx, i, c->cfg.nsze, &fd, err, errlen)))
            return r;
        if ((r = emu_ns_init(&c->ns[i], i + 1, &c->cfg, fd))) {
            snprintf(err, errlen, "emu: out of memory for namespace %u of controller %u", i + 1, idx);
            return r;
        }
    }
    c->cap = NVME_CAP_MQES(c->cfg.mqes - 1) | NVME_CAP_CQR | NVME_CAP_TO(EMU_CAP_TO_UNITS) |
             NVME_CAP_DSTRD(c->cfg.dstrd) | NVME_CAP_CSS(NVME_CAP_CSS_NVM) | NVME_CAP_MPSMIN(0) | NVME_CAP_MPSMAX(0);
    c->nsq_alloc = c->ncq_alloc = c->cfg.nioq;
    c->nvec = 1; /* in-process: one vector (vector 0), as a function without MSI-X */
    restore_ro(c);
    c->bar.base = c->mem;
    c->bar.size = c->memsize;
    c->bar.ops = &emu_bar_ops;
    c->bar.ctx = c;
    if (cfg->mode == EMU_MODE_THREAD) {
        c->db_seen = calloc(2 * ((size_t)c->cfg.nioq + 1), sizeof(uint32_t));
        if (!c->db_seen) {
            snprintf(err, errlen, "emu: out of memory creating controller %u", idx);
            return -ENOMEM;
        }
        int r = pthread_create(&c->svc, NULL, svc_main, c);
        if (r) {
            snprintf(err, errlen, "emu: cannot start the service thread of controller %u: %s", idx, strerror(r));
            return -r;
        }
        c->svc_running = true;
    }
    return 0;
}

int nvme_emu_target_open_kv(const struct nvme_emu_kv *kv, size_t nkv, struct nvme_emu_set **out, char *err,
                            size_t errlen)
{
    char dummy[8];
    if (!err || !errlen)
        err = dummy, errlen = sizeof(dummy);
    if (!out || (nkv && !kv)) {
        snprintf(err, errlen, "emu: bad arguments");
        return -EINVAL;
    }
    *out = NULL;
    /* aligned: the DMA reader counters are one cache line each (sizeof is a multiple of the alignment) */
    struct nvme_emu_set *set = aligned_alloc(_Alignof(struct nvme_emu_set), sizeof(*set));
    if (set)
        memset(set, 0, sizeof(*set));
    if (!set) {
        snprintf(err, errlen, "emu: out of memory");
        return -ENOMEM;
    }
    int r = emu_parse_cfg(kv, nkv, &set->cfg, err, errlen);
    if (r) {
        free(set);
        return r;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    set->epoch_ns = (uint64_t)ts.tv_sec * EMU_NS_PER_S + (uint64_t)ts.tv_nsec;
    emu_dma_dom_init(&set->dma);
    set->ctrls = calloc(set->cfg.ndev, sizeof(*set->ctrls));
    if (!set->ctrls) {
        free(set);
        snprintf(err, errlen, "emu: out of memory");
        return -ENOMEM;
    }
    for (unsigned i = 0; i < set->cfg.ndev; i++) {
        set->n = i + 1;
        if ((r = ctrl_init(set, i, err, errlen))) {
            nvme_emu_set_close(set);
            return r;
        }
    }
    char inj[96] = ""; /* the fault model (err_every, ooo_win), when set */
    if (set->cfg.inj.every || set->cfg.inj.ooo_win > 1u)
        snprintf(inj, sizeof(inj), " ooo_win=%u err_every=%llu err_status=0x%x", set->cfg.inj.ooo_win,
                 (unsigned long long)set->cfg.inj.every, (unsigned)set->cfg.inj.status);
    snprintf(set->desc, sizeof(set->desc), "profile=%s scale=%g mode=%s ndev=%u data=%s%s%s", set->cfg.profile->name,
             set->cfg.scale, set->cfg.mode == EMU_MODE_THREAD ? "thread" : "inline", set->cfg.ndev,
             set->cfg.data ? "copy" : "none", set->cfg.ooo ? " ooo=1" : "", inj);
    *out = set;
    return 0;
}

int nvme_emu_target_open(const struct nvme_uri *u, struct nvme_emu_set **out, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen)
        err = dummy, errlen = sizeof(dummy);
    if (!u || !out) {
        snprintf(err, errlen, "emu: bad arguments");
        return -EINVAL;
    }
    if (strcmp(u->scheme, "emu") != 0) {
        snprintf(err, errlen, "emu: not an emu:// URI: scheme '%s'", u->scheme);
        return -EINVAL;
    }
    if (u->authority && u->authority[0]) {
        snprintf(err, errlen, "emu: emu:// takes no host part ('%s'); use emu://?ndev=...", u->authority);
        return -EINVAL;
    }
    if (u->path && u->path[0] && strcmp(u->path, "/") != 0) {
        snprintf(err, errlen, "emu: emu:// takes no path ('%s'); use emu://?ndev=...", u->path);
        return -EINVAL;
    }
    struct nvme_emu_kv kv[NVME_URI_MAX_PARAMS];
    for (unsigned i = 0; i < u->nparams && i < NVME_URI_MAX_PARAMS; i++) {
        kv[i].key = u->params[i].key;
        kv[i].val = u->params[i].value;
    }
    return nvme_emu_target_open_kv(kv, u->nparams, out, err, errlen);
}

void nvme_emu_set_close(struct nvme_emu_set *set)
{
    if (!set)
        return;
    for (unsigned i = 0; i < set->n; i++)
        ctrl_fini(&set->ctrls[i]);
    free(set->ctrls);
    emu_dma_dom_fini(&set->dma);
    free(set);
}

int nvme_emu_set_bar_fd(const struct nvme_emu_set *set, unsigned i)
{
    if (!set || i >= set->n || set->ctrls[i].memfd < 0)
        return -EINVAL;
    return set->ctrls[i].memfd;
}

int nvme_emu_ctrl_reset(struct nvme_emu_set *set, unsigned i)
{
    if (!set || i >= set->n)
        return -EINVAL;
    struct emu_ctrl *c = &set->ctrls[i];
    unsigned e = emu_dma_enter(c->dma, dma_shard(c, 0));
    if (c->threaded)
        pthread_mutex_lock(&c->lock);
    ctrl_disable(c); /* every queue deleted, held commands dropped, doorbells 0, RDY/CFS/SHST clear */
    c->cc = 0;
    memset(c->mem, 0, NVME_REG_DBS); /* CC, AQA, ASQ, ACQ, INTMS ... back to 0 */
    restore_ro(c);
    if (c->threaded)
        pthread_mutex_unlock(&c->lock);
    emu_dma_exit(c->dma, dma_shard(c, 0), e);
    return 0;
}

int nvme_emu_ctrl_dma_private(struct nvme_emu_set *set, unsigned i)
{
    if (!set || i >= set->n)
        return -EINVAL;
    struct emu_ctrl *c = &set->ctrls[i];
    if (c->dma != &set->dma)
        return 0; /* has one already */
    struct emu_dma_dom *d = malloc(sizeof(*d));
    if (!d)
        return -ENOMEM;
    emu_dma_dom_init(d);
    if (c->threaded) /* the service thread enters its section holding the lock: none is inside once we hold it */
        pthread_mutex_lock(&c->lock);
    int rc = c->enabled ? -EBUSY : 0; /* queues of the shared domain would be reached through the new one */
    if (!rc)
        c->dma = d;
    if (c->threaded)
        pthread_mutex_unlock(&c->lock);
    if (rc) {
        emu_dma_dom_fini(d);
        free(d);
    }
    return rc;
}

int nvme_emu_svc_stats(const struct nvme_emu_set *set, unsigned i, struct nvme_emu_svc_stats *out)
{
    if (!set || i >= set->n || !out)
        return -EINVAL;
    const struct emu_ctrl *c = &set->ctrls[i];
    *out = (struct nvme_emu_svc_stats){
        .sweeps = emu_st_get(&c->svc_sweeps), .busy = emu_st_get(&c->svc_busy), .commands = emu_st_get(&c->svc_cmds)};
    return 0;
}

int nvme_emu_set_irq_hook(struct nvme_emu_set *set, unsigned i, nvme_emu_irq_fn fn, void *ctx)
{
    if (!set || i >= set->n)
        return -EINVAL;
    struct emu_ctrl *c = &set->ctrls[i];
    if (c->threaded) /* the service thread calls the hook holding the lock: none is running once we hold it */
        pthread_mutex_lock(&c->lock);
    atomic_store_explicit(&c->irq_fn, NULL, memory_order_release);
    atomic_store_explicit(&c->irq_ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&c->irq_fn, fn, memory_order_release);
    if (c->threaded)
        pthread_mutex_unlock(&c->lock);
    return 0;
}

int nvme_emu_ctrl_set_vectors(struct nvme_emu_set *set, unsigned i, uint32_t nvec)
{
    if (!set || i >= set->n || nvec < 1 || nvec > NVME_EMU_MAX_VECTORS)
        return -EINVAL;
    set->ctrls[i].nvec = nvec;
    return 0;
}

unsigned nvme_emu_set_count(const struct nvme_emu_set *set)
{
    return set ? set->n : 0;
}

const struct nvme_bar *nvme_emu_set_bar(const struct nvme_emu_set *set, unsigned i)
{
    return set && i < set->n ? &set->ctrls[i].bar : NULL;
}

int nvme_emu_set_describe(const struct nvme_emu_set *set, char *buf, size_t len)
{
    return snprintf(buf, len, "%s", set ? set->desc : "");
}

const char *nvme_emu_set_warnings(const struct nvme_emu_set *set)
{
    return set ? set->cfg.warn : "";
}

const char *nvme_emu_set_profile(const struct nvme_emu_set *set)
{
    return set ? set->cfg.profile->name : "";
}
double nvme_emu_set_scale(const struct nvme_emu_set *set)
{
    return set ? set->cfg.scale : 0;
}

/* ---------------------------------------------------------------- faults and stats */
int nvme_emu_inject(struct nvme_emu_set *set, unsigned ctrl, const struct nvme_emu_fault *f)
{
    if (!set || ctrl >= set->n || !f)
        return -EINVAL;
    struct emu_ctrl *c = &set->ctrls[ctrl];
    switch (f->kind) {
    case NVME_EMU_FAULT_CLEAR:
        for (unsigned i = 0; i < NVME_EMU_MAX_FAULTS; i++)
            atomic_store(&c->faults[i].armed, false);
        atomic_store(&c->nfaults, 0);
        return 0;
    case NVME_EMU_FAULT_CFS:
        atomic_store(&c->cfs, true);
        csts_set(c, NVME_CSTS_CFS, 0);
        return 0;
    case NVME_EMU_FAULT_DELAY:
    case NVME_EMU_FAULT_DROP:
    case NVME_EMU_FAULT_STATUS:
        break;
    default:
        return -EINVAL;
    }
    if (f->nth == 0 || f->qid < NVME_EMU_FAULT_ANY_QUEUE || f->qid > (int32_t)c->cfg.nioq)
        return -EINVAL;
    unsigned n = atomic_load(&c->nfaults), slot = n;
    for (unsigned i = 0; i < n; i++)
        if (!atomic_load(&c->faults[i].armed)) {
            slot = i;
            break;
        }
    if (slot >= NVME_EMU_MAX_FAULTS)
        return -ENOSPC;
    struct emu_fault *e = &c->faults[slot];
    e->f = *f;
    atomic_store(&e->seen, 0);
    atomic_store_explicit(&e->armed, true, memory_order_release);
    if (slot == n)
        atomic_store_explicit(&c->nfaults, n + 1, memory_order_release);
    return 0;
}

int nvme_emu_queue_stats(const struct nvme_emu_set *set, unsigned ctrl, uint16_t sqid, struct nvme_emu_qstats *out)
{
    if (!set || ctrl >= set->n || !out || sqid > set->ctrls[ctrl].cfg.nioq)
        return -EINVAL;
    struct emu_qstats_int *s = &set->ctrls[ctrl].qstats[sqid];
    out->fetched = emu_st_fetched(s);
    out->completed = emu_st_completed(s);
    out->errors = atomic_load_explicit(&s->errors, memory_order_relaxed);
    out->cq_full_held = atomic_load_explicit(&s->cq_full_held, memory_order_relaxed);
    out->dropped = atomic_load_explicit(&s->dropped, memory_order_relaxed);
    return 0;
}

uint64_t nvme_emu_inflight(const struct nvme_emu_set *set, unsigned ctrl)
{
    if (!set || ctrl >= set->n)
        return 0;
    uint64_t n = 0;
    for (uint32_t q = 0; q <= set->ctrls[ctrl].cfg.nioq; q++)
        n += atomic_load_explicit(&set->ctrls[ctrl].qstats[q].inflight, memory_order_relaxed);
    return n;
}
