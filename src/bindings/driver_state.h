/* SPDX-License-Identifier: BSD-3-Clause */
// driver_state.h — the C++ state behind the driver bindings (driver*.cpp): lifetimes and locks of
// targets, controllers, queue pairs and DMA memory (the rules are at the top of driver.cpp).
// Internal to the bindings; every function here is inline so that each bind file may include it.
#pragma once
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bindings.h"
#include "errors.h"

extern "C" {
#include "nvme/emu/emu.h"
#include "nvme/nvme.h"
}

namespace nvmelab {
namespace drv {
namespace py = pybind11;

constexpr double kPollSliceS = 0.05;         // a blocking poll re-checks signals and locks this often
constexpr uint32_t kAdminTimeoutMs = 5000;   // admin_raw() default
constexpr uint32_t kDsmMaxNlb = 0xffffffffu; // one DSM range's 32-bit block count

// ---- C++ exceptions translated to Python ones (thrown without the GIL; translated with it) ----
struct ClosedErr : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct QueueFullErr : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---- DMA memory ----
struct TargetState;

struct DmaMem {
    std::shared_ptr<TargetState> ts;
    nvme_dma *d = nullptr;
    uint8_t *va = nullptr;
    size_t size = 0;
    std::atomic<int> outstanding{0};
    DmaMem(std::shared_ptr<TargetState> t, nvme_dma *dma);
    ~DmaMem();
};

struct QPairState;

struct CtrlSlot {
    std::mutex mu;                 // reset, queue creation/deletion, fault injection
    std::vector<QPairState *> qps; // live queue pairs of this controller
};

struct TargetState {
    std::shared_mutex rw; // shared: any operation; exclusive: close
    std::mutex mu;        // live_dma, t (teardown decision)
    nvme_target *t = nullptr;
    bool closed = false;
    bool is_emu = false;
    size_t live_dma = 0;
    std::string uri;
    std::vector<std::unique_ptr<CtrlSlot>> ctrls;

    ~TargetState() { final_close(); }
    void final_close()
    {
        nvme_target *victim = nullptr;
        {
            std::lock_guard<std::mutex> g(mu);
            victim = t;
            t = nullptr;
        }
        if (victim)
            nvme_target_close(victim);
    }
    void close(); // defined after QPairState
};

inline DmaMem::DmaMem(std::shared_ptr<TargetState> t, nvme_dma *dma) : ts(std::move(t)), d(dma)
{
    va = static_cast<uint8_t *>(nvme_dma_vaddr(d));
    size = nvme_dma_size(d);
    std::lock_guard<std::mutex> g(ts->mu);
    ts->live_dma++;
}

inline DmaMem::~DmaMem()
{
    nvme_dma_free(d);
    bool close_now = false;
    {
        std::lock_guard<std::mutex> g(ts->mu);
        ts->live_dma--;
        close_now = ts->closed && ts->live_dma == 0 && ts->t;
    }
    if (close_now)
        ts->final_close(); // the deferred close of a target closed while views lived
}

// A guard for one operation on an open target: shared lock, closed check.
struct Op {
    std::shared_lock<std::shared_mutex> lk;
    explicit Op(TargetState &ts, const char *what) : lk(ts.rw)
    {
        if (ts.closed || !ts.t)
            throw ClosedErr(std::string(what) + ": the target was closed");
    }
};

// ---- DMA buffer object ----
struct DmaBuffer {
    std::shared_ptr<DmaMem> mem;
    size_t nbytes = 0; // what the caller asked for (the allocation may be rounded up)

    DmaMem &get(const char *what) const
    {
        if (!mem)
            throw ClosedErr(std::string(what) + ": the DMA buffer was closed");
        return *mem;
    }
    py::array array() const
    {
        DmaMem &m = get("DmaBuffer.array");
        auto *keep = new std::shared_ptr<DmaMem>(mem);
        py::capsule base(keep, [](void *p) { delete static_cast<std::shared_ptr<DmaMem> *>(p); });
        return py::array(py::dtype::of<uint8_t>(), {static_cast<py::ssize_t>(nbytes)}, {1}, m.va, base);
    }
    void close()
    {
        if (!mem)
            return;
        int n = mem->outstanding.load();
        if (n > 0)
            throw py::buffer_error("DmaBuffer.close(): " + std::to_string(n) +
                                   " command(s) on this buffer are still outstanding; poll them first");
        mem.reset();
    }
};

// ---- queue pairs ----
struct QPairState;

struct Cmd { // one outstanding command: the callback's argument
    QPairState *qs;
    uint64_t tag;
    std::shared_ptr<DmaMem> mem; // keeps the data buffer alive while the controller may touch it
    int dsm_slot;                // DSM range slot, -1 when none
};

struct Done {
    uint64_t tag;
    nvme_cpl cpl;
};

struct QPairState {
    std::shared_ptr<TargetState> ts;
    unsigned ci = 0;
    nvme_qpair *qp = nullptr;
    uint32_t depth = 0;
    uint16_t qid = 0;
    std::atomic<bool> busy{false};
    std::vector<Done> done;                         // filled by callbacks, drained by poll()
    std::vector<std::shared_ptr<DmaMem>> graveyard; // released after the C call returns
    std::vector<std::shared_ptr<DmaMem>> zombies;   // buffers of timed-out commands, kept until destroy
    std::shared_ptr<DmaMem> dsm;                    // DSM range slots, one per possible command
    std::vector<int> dsm_free;
    std::string closed_why = "the queue pair was closed";

    ~QPairState()
    { // dropped without close(): delete the queues now
        if (!qp)
            return;
        std::unique_ptr<py::gil_scoped_release> nogil;
        if (PyGILState_Check())
            nogil = std::make_unique<py::gil_scoped_release>();
        std::shared_lock<std::shared_mutex> lk(ts->rw);
        std::lock_guard<std::mutex> g(ts->ctrls[ci]->mu);
        destroy_locked();
    }

    // Destroy with the controller mutex held by the caller; callbacks run (-ECANCELED), results dropped.
    void destroy_locked()
    {
        if (!qp)
            return;
        nvme_qpair_destroy(qp);
        qp = nullptr;
        done.clear();
        graveyard.clear();
        zombies.clear();
        dsm.reset();
        dsm_free.clear();
        auto &v = ts->ctrls[ci]->qps;
        v.erase(std::remove(v.begin(), v.end(), this), v.end());
    }
};

// Runs inside nvme_qpair_poll/destroy, GIL released: C++ state only. Buffers go to the graveyard so
// that no DMA memory (and so no deferred target close) is freed inside the C call.
inline void qpair_cb(void *arg, const nvme_cpl *cpl)
{
    auto *c = static_cast<Cmd *>(arg);
    QPairState *q = c->qs;
    q->done.push_back(Done{c->tag, *cpl});
    if (c->mem) {
        c->mem->outstanding--;
        // A timed-out command may still be executing (its CQE is owed): its memory stays alive until the
        // queues are deleted, even if the caller closes the buffer meanwhile.
        if (cpl->err == -ETIMEDOUT)
            q->zombies.push_back(std::move(c->mem));
        else
            q->graveyard.push_back(std::move(c->mem));
    }
    if (c->dsm_slot >= 0 && cpl->err != -ETIMEDOUT)
        q->dsm_free.push_back(c->dsm_slot);
    delete c;
}

inline void TargetState::close()
{
    std::unique_lock<std::shared_mutex> lk(rw);
    if (closed)
        return;
    for (auto &slot : ctrls) {
        std::lock_guard<std::mutex> g(slot->mu);
        while (!slot->qps.empty()) {
            QPairState *q = slot->qps.back();
            q->closed_why = "the queue pair was closed with its target";
            q->destroy_locked();
        }
    }
    bool close_now;
    {
        std::lock_guard<std::mutex> g(mu);
        closed = true;
        close_now = live_dma == 0 && t;
    }
    if (close_now)
        final_close();
}

// Claim a qpair for one operation; RuntimeError when another thread holds it.
struct Busy {
    QPairState &q;
    explicit Busy(QPairState &qs) : q(qs)
    {
        bool expect = false;
        if (!q.busy.compare_exchange_strong(expect, true))
            throw std::runtime_error("QPair used from two threads at once: a queue pair belongs to one thread");
    }
    ~Busy() { q.busy.store(false); }
};

// ---- Python-visible handle types ----
struct Target;
struct Ctrl {
    std::shared_ptr<TargetState> ts;
    unsigned ci;
    nvme_ctrl *get() const { return nvme_target_ctrl(ts->t, ci); }
};
struct Ns {
    std::shared_ptr<TargetState> ts;
    unsigned ci;
    uint32_t nsid;
    uint32_t lba_size;
    uint64_t nsze;
    nvme_ns *get(nvme_ctrl *c) const
    {
        nvme_ns *ns = nvme_ctrl_ns(c, nsid);
        if (!ns)
            throw py::value_error("nsid: namespace " + std::to_string(nsid) + " is no longer active");
        return ns;
    }
};
struct QPair {
    std::shared_ptr<QPairState> s;
    QPairState &live(const char *what) const
    {
        if (!s->qp)
            throw ClosedErr(std::string(what) + ": " + s->closed_why);
        return *s;
    }
};

struct Target {
    std::shared_ptr<TargetState> ts;
};

inline std::string trim(const char *p, size_t n)
{
    std::string s(p, strnlen(p, n));
    while (!s.empty() && (s.back() == ' ' || s.back() == '\0'))
        s.pop_back();
    return s;
}

inline py::tuple cpl_tuple(const nvme_cpl &c)
{
    return py::make_tuple(c.cid, c.err, c.sct, c.sc, c.dnr, c.cdw0);
}

// data pointer of an optional DmaBuffer span, with bounds checks (the Python layer checks first,
// these keep direct use of _native memory-safe)
struct Span {
    std::shared_ptr<DmaMem> mem;
    void *ptr = nullptr;
    size_t len = 0;
};

inline Span dma_span(const py::object &buf, size_t offset, size_t nbytes, const char *what)
{
    Span s;
    if (buf.is_none()) {
        if (nbytes)
            throw py::value_error(std::string(what) + ": nbytes given without a buffer");
        return s;
    }
    auto &db = buf.cast<DmaBuffer &>();
    DmaMem &m = db.get(what);
    if (offset > db.nbytes || nbytes > db.nbytes - offset)
        throw py::value_error(std::string(what) + ": offset " + std::to_string(offset) + " + " +
                              std::to_string(nbytes) + " bytes exceeds the buffer's " + std::to_string(db.nbytes) +
                              " bytes");
    if (offset % NVME_PRP_ALIGN)
        throw py::value_error("offset: " + std::to_string(offset) + " is not dword aligned");
    s.mem = db.mem;
    s.ptr = m.va + offset;
    s.len = nbytes;
    return s;
}

inline std::string emu_fault_kinds()
{
    return "status, drop, delay, cfs, none";
}

} // namespace drv

void bind_driver_qpair(pybind11::module_ &m);      // driver_qpair.cpp: QPair
void bind_driver_controller(pybind11::module_ &m); // driver_ctrl.cpp: Controller
void bind_driver_target(pybind11::module_ &m);     // driver_target.cpp: Target, DmaBuffer, Namespace
} // namespace nvmelab
