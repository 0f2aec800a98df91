// driver.cpp — nvmelab._native bindings of the C driver (src/nvme/nvme.h): targets, controllers,
// namespaces, queue pairs, DMA buffers, status names. The friendly Python API lives in
// src/nvmelab/driver.py and src/nvmelab/qpair.py; this layer keeps memory safety and lifetimes:
//
//   * TargetState owns the nvme_target. Every operation takes its shared lock (GIL released) and checks
//     `closed`; close() takes the exclusive lock, destroys the queue pairs, and closes the target once no
//     DMA memory is alive (DMA is always freed before the target, never the other way round).
//   * DmaMem owns one nvme_dma. It is held by the DmaBuffer object, by every numpy view of it (capsule
//     base) and by every outstanding command on it, so memory is freed only after the last user.
//   * QPairState owns one nvme_qpair. A busy flag detects use from two threads at once (RuntimeError).
//     Completion callbacks run inside nvme_qpair_poll with the GIL released and touch only C++ state.
//   * Lock order: target rw-lock -> controller mutex -> qpair busy flag. No lock is held while waiting
//     for the GIL, so acquiring these locks with the GIL held cannot deadlock.
#include "bindings.h"
#include "errors.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "nvme/emu/emu.h"
#include "nvme/nvme.h"
}

namespace py = pybind11;

namespace nvmelab {
namespace {

constexpr double kPollSliceS = 0.05;        // a blocking poll re-checks signals and locks this often
constexpr uint32_t kAdminTimeoutMs = 5000;  // admin_raw() default
constexpr uint32_t kDsmMaxNlb = 0xffffffffu;  // one DSM range's 32-bit block count

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
    std::mutex mu;                   // reset, queue creation/deletion, fault injection
    std::vector<QPairState *> qps;   // live queue pairs of this controller
};

struct TargetState {
    std::shared_mutex rw;            // shared: any operation; exclusive: close
    std::mutex mu;                   // live_dma, t (teardown decision)
    nvme_target *t = nullptr;
    bool closed = false;
    bool is_emu = false;
    size_t live_dma = 0;
    std::string uri;
    std::vector<std::unique_ptr<CtrlSlot>> ctrls;

    ~TargetState() { final_close(); }
    void final_close() {
        nvme_target *victim = nullptr;
        {
            std::lock_guard<std::mutex> g(mu);
            victim = t;
            t = nullptr;
        }
        if (victim) nvme_target_close(victim);
    }
    void close();   // defined after QPairState
};

DmaMem::DmaMem(std::shared_ptr<TargetState> t, nvme_dma *dma) : ts(std::move(t)), d(dma) {
    va = static_cast<uint8_t *>(nvme_dma_vaddr(d));
    size = nvme_dma_size(d);
    std::lock_guard<std::mutex> g(ts->mu);
    ts->live_dma++;
}

DmaMem::~DmaMem() {
    nvme_dma_free(d);
    bool close_now = false;
    {
        std::lock_guard<std::mutex> g(ts->mu);
        ts->live_dma--;
        close_now = ts->closed && ts->live_dma == 0 && ts->t;
    }
    if (close_now) ts->final_close();   // the deferred close of a target closed while views lived
}

// A guard for one operation on an open target: shared lock, closed check.
struct Op {
    std::shared_lock<std::shared_mutex> lk;
    explicit Op(TargetState &ts, const char *what) : lk(ts.rw) {
        if (ts.closed || !ts.t) throw ClosedErr(std::string(what) + ": the target was closed");
    }
};

// ---- DMA buffer object ----
struct DmaBuffer {
    std::shared_ptr<DmaMem> mem;
    size_t nbytes = 0;   // what the caller asked for (the allocation may be rounded up)

    DmaMem &get(const char *what) const {
        if (!mem) throw ClosedErr(std::string(what) + ": the DMA buffer was closed");
        return *mem;
    }
    py::array array() const {
        DmaMem &m = get("DmaBuffer.array");
        auto *keep = new std::shared_ptr<DmaMem>(mem);
        py::capsule base(keep, [](void *p) { delete static_cast<std::shared_ptr<DmaMem> *>(p); });
        return py::array(py::dtype::of<uint8_t>(), {static_cast<py::ssize_t>(nbytes)}, {1}, m.va, base);
    }
    void close() {
        if (!mem) return;
        int n = mem->outstanding.load();
        if (n > 0)
            throw py::buffer_error("DmaBuffer.close(): " + std::to_string(n) +
                                   " command(s) on this buffer are still outstanding; poll them first");
        mem.reset();
    }
};

// ---- queue pairs ----
struct QPairState;

struct Cmd {              // one outstanding command: the callback's argument
    QPairState *qs;
    uint64_t tag;
    std::shared_ptr<DmaMem> mem;   // keeps the data buffer alive while the controller may touch it
    int dsm_slot;                  // DSM range slot, -1 when none
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

    ~QPairState() {   // dropped without close(): delete the queues now
        if (!qp) return;
        std::unique_ptr<py::gil_scoped_release> nogil;
        if (PyGILState_Check()) nogil = std::make_unique<py::gil_scoped_release>();
        std::shared_lock<std::shared_mutex> lk(ts->rw);
        std::lock_guard<std::mutex> g(ts->ctrls[ci]->mu);
        destroy_locked();
    }

    // Destroy with the controller mutex held by the caller; callbacks run (-ECANCELED), results dropped.
    void destroy_locked() {
        if (!qp) return;
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
void qpair_cb(void *arg, const nvme_cpl *cpl) {
    auto *c = static_cast<Cmd *>(arg);
    QPairState *q = c->qs;
    q->done.push_back(Done{c->tag, *cpl});
    if (c->mem) {
        c->mem->outstanding--;
        // A timed-out command may still be executing (its CQE is owed): its memory stays alive until the
        // queues are deleted, even if the caller closes the buffer meanwhile.
        if (cpl->err == -ETIMEDOUT) q->zombies.push_back(std::move(c->mem));
        else q->graveyard.push_back(std::move(c->mem));
    }
    if (c->dsm_slot >= 0 && cpl->err != -ETIMEDOUT) q->dsm_free.push_back(c->dsm_slot);
    delete c;
}

void TargetState::close() {
    std::unique_lock<std::shared_mutex> lk(rw);
    if (closed) return;
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
    if (close_now) final_close();
}

// Claim a qpair for one operation; RuntimeError when another thread holds it.
struct Busy {
    QPairState &q;
    explicit Busy(QPairState &qs) : q(qs) {
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
    nvme_ns *get(nvme_ctrl *c) const {
        nvme_ns *ns = nvme_ctrl_ns(c, nsid);
        if (!ns) throw py::value_error("nsid: namespace " + std::to_string(nsid) + " is no longer active");
        return ns;
    }
};
struct QPair {
    std::shared_ptr<QPairState> s;
    QPairState &live(const char *what) const {
        if (!s->qp) throw ClosedErr(std::string(what) + ": " + s->closed_why);
        return *s;
    }
};

struct Target {
    std::shared_ptr<TargetState> ts;
};

std::string trim(const char *p, size_t n) {
    std::string s(p, strnlen(p, n));
    while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
    return s;
}

py::tuple cpl_tuple(const nvme_cpl &c) {
    return py::make_tuple(c.cid, c.err, c.sct, c.sc, c.dnr, c.cdw0);
}

// data pointer of an optional DmaBuffer span, with bounds checks (the Python layer checks first,
// these keep direct use of _native memory-safe)
struct Span {
    std::shared_ptr<DmaMem> mem;
    void *ptr = nullptr;
    size_t len = 0;
};

Span dma_span(const py::object &buf, size_t offset, size_t nbytes, const char *what) {
    Span s;
    if (buf.is_none()) {
        if (nbytes) throw py::value_error(std::string(what) + ": nbytes given without a buffer");
        return s;
    }
    auto &db = buf.cast<DmaBuffer &>();
    DmaMem &m = db.get(what);
    if (offset > db.nbytes || nbytes > db.nbytes - offset)
        throw py::value_error(std::string(what) + ": offset " + std::to_string(offset) + " + " +
                              std::to_string(nbytes) + " bytes exceeds the buffer's " +
                              std::to_string(db.nbytes) + " bytes");
    if (offset % NVME_PRP_ALIGN)
        throw py::value_error("offset: " + std::to_string(offset) + " is not dword aligned");
    s.mem = db.mem;
    s.ptr = m.va + offset;
    s.len = nbytes;
    return s;
}

std::string emu_fault_kinds() { return "status, drop, delay, cfs, none"; }

}  // namespace

void bind_driver(py::module_ &m) {
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ClosedErr &e) {
            py::object cls = py::module_::import("nvmelab.errors").attr("ClosedError");
            PyErr_SetString(cls.ptr(), e.what());
        } catch (const QueueFullErr &e) {
            py::object args = py::make_tuple(EBUSY, e.what());
            PyErr_SetObject(PyExc_BlockingIOError, args.ptr());
        }   // ErrnoErr: the one converter (errors.cpp)
    });

    m.def("status_name", [](int sct, int sc) { return std::string(nvme_status_name(sct & 0x7, sc & 0xff)); },
          py::arg("sct"), py::arg("sc"), "The NVMe specification's name of a status (SCT, SC).");

    py::module_ spec = m.def_submodule("spec", "Constants from src/nvme/spec.h");
    spec.attr("OPC_FLUSH") = int(NVME_CMD_FLUSH);
    spec.attr("OPC_WRITE") = int(NVME_CMD_WRITE);
    spec.attr("OPC_READ") = int(NVME_CMD_READ);
    spec.attr("OPC_WRITE_ZEROES") = int(NVME_CMD_WRITE_ZEROES);
    spec.attr("OPC_DSM") = int(NVME_CMD_DSM);
    spec.attr("ADM_DELETE_SQ") = int(NVME_ADM_DELETE_SQ);
    spec.attr("ADM_CREATE_SQ") = int(NVME_ADM_CREATE_SQ);
    spec.attr("ADM_DELETE_CQ") = int(NVME_ADM_DELETE_CQ);
    spec.attr("ADM_CREATE_CQ") = int(NVME_ADM_CREATE_CQ);
    spec.attr("ADM_IDENTIFY") = int(NVME_ADM_IDENTIFY);
    spec.attr("ADM_GET_FEATURES") = int(NVME_ADM_GET_FEATURES);
    spec.attr("ADM_SET_FEATURES") = int(NVME_ADM_SET_FEATURES);
    spec.attr("SQE_SIZE") = NVME_SQE_SIZE;
    spec.attr("NLB_MAX") = NVME_NLB_MAX;
    spec.attr("PRP_ALIGN") = NVME_PRP_ALIGN;
    spec.attr("PAGE_SIZE_MIN") = NVME_PAGE_SIZE_MIN;
    spec.attr("ADMIN_BUF_SIZE") = NVME_ADMIN_BUF_SIZE;
    spec.attr("DSM_MAX_NLB") = kDsmMaxNlb;
    spec.def("opc_name", [](bool admin, int opc) { return std::string(nvme_opc_name(admin, opc & 0xff)); },
             py::arg("admin"), py::arg("opc"));

    // ---- DmaBuffer ----
    py::class_<DmaBuffer>(m, "DmaBuffer",
                          "DMA memory of a target. `.array` is a numpy uint8 view of it (no copy); "
                          "`np.asarray(buf)` gives the same. close() retires the buffer (BufferError while "
                          "commands on it are outstanding); leaving a with-block retires it even then. The "
                          "memory returns to the driver once no numpy view and no outstanding command "
                          "uses it.")
        .def_property_readonly("array", &DmaBuffer::array, "numpy uint8 array over the buffer (no copy)")
        .def("__array__", [](const DmaBuffer &b, py::object dtype, py::object copy) -> py::object {
                 py::object a = b.array();
                 if (!dtype.is_none()) a = a.attr("astype")(dtype, py::arg("copy") = !copy.is_none() && copy.cast<bool>());
                 else if (!copy.is_none() && copy.cast<bool>()) a = a.attr("copy")();
                 return a;
             }, py::arg("dtype") = py::none(), py::arg("copy") = py::none())
        .def_property_readonly("nbytes", [](const DmaBuffer &b) { return b.nbytes; })
        .def_property_readonly("size", [](const DmaBuffer &b) { return b.nbytes; })
        .def("__len__", [](const DmaBuffer &b) { return b.nbytes; })
        .def_property_readonly("closed", [](const DmaBuffer &b) { return !b.mem; })
        .def_property_readonly("outstanding", [](const DmaBuffer &b) { return b.mem ? b.mem->outstanding.load() : 0; },
                               "commands on this buffer not yet reaped by poll()")
        .def("iova", [](const DmaBuffer &b, size_t offset) {
                 DmaMem &m = b.get("DmaBuffer.iova");
                 if (offset >= b.nbytes) throw py::value_error("offset: " + std::to_string(offset) + " is outside the buffer");
                 return nvme_dma_iova(m.d, m.va + offset);
             }, py::arg("offset") = 0, "bus address the controller uses for byte `offset` of the buffer")
        .def("close", &DmaBuffer::close)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](DmaBuffer &b, py::args) {
            // Leaving a with-block retires the buffer even with commands outstanding (e.g. while an
            // exception unwinds): those commands keep the memory alive until they complete or their
            // queue pair is closed. An explicit close() raises BufferError instead.
            b.mem.reset();
        })
        .def("__repr__", [](const DmaBuffer &b) {
            return b.mem ? "<nvmelab.DmaBuffer " + std::to_string(b.nbytes) + " bytes>"
                         : std::string("<nvmelab.DmaBuffer (closed)>");
        });

    // ---- Namespace ----
    py::class_<Ns>(m, "Namespace")
        .def_readonly("nsid", &Ns::nsid)
        .def_readonly("lba_size", &Ns::lba_size)
        .def_readonly("nsze", &Ns::nsze);

    // ---- QPair ----
    py::class_<QPair>(m, "QPair")
        .def_property_readonly("closed", [](const QPair &q) { return q.s->qp == nullptr; })
        .def_property_readonly("qid", [](const QPair &q) { return q.live("QPair.qid").qid; })
        .def_property_readonly("depth", [](const QPair &q) { return q.s->depth; })
        .def_property_readonly("outstanding", [](const QPair &q) {
            QPairState &s = q.live("QPair.outstanding");
            return nvme_qpair_outstanding(s.qp);
        })
        .def("submit", [](QPair &q, Ns &ns, int opc, uint64_t slba, uint32_t nlb, py::object buf, size_t offset,
                          size_t nbytes, uint64_t tag) {
            Span sp = dma_span(buf, offset, nbytes, "buf");
            if (q.s->ts != ns.ts || q.s->ci != ns.ci)
                throw py::value_error("ns: the namespace belongs to another controller");
            py::gil_scoped_release nogil;
            Op op(*q.s->ts, "QPair.submit");
            QPairState &s = q.live("QPair.submit");
            Busy busy(s);
            nvme_ctrl *c = nvme_target_ctrl(s.ts->t, s.ci);
            nvme_ns *nsp = ns.get(c);
            auto *cmd = new Cmd{&s, tag, sp.mem, -1};
            void *ptr = sp.ptr;
            size_t len = sp.len;
            uint32_t n = nlb;
            nvme_dsm_range *range = nullptr;
            if (opc == NVME_CMD_DSM) {
                if (!s.dsm) {
                    nvme_dma *d = nullptr;
                    int rc = nvme_dma_alloc(s.ts->t, size_t(s.depth) * sizeof(nvme_dsm_range), &d);
                    if (rc < 0) { delete cmd; throw_errno(rc, "QPair.submit: DMA memory for DSM ranges"); }
                    s.dsm = std::make_shared<DmaMem>(s.ts, d);
                    for (int i = int(s.depth) - 1; i >= 0; --i) s.dsm_free.push_back(i);
                }
                if (s.dsm_free.empty()) { delete cmd; throw QueueFullErr("queue full: no DSM range slot free; poll() first"); }
                cmd->dsm_slot = s.dsm_free.back();
                s.dsm_free.pop_back();
                range = reinterpret_cast<nvme_dsm_range *>(s.dsm->va) + cmd->dsm_slot;
                range->cattr = 0;
                range->nlb = nlb;
                range->slba = slba;
                ptr = range;
                len = sizeof(*range);
                n = 1;
            }
            if (cmd->mem) cmd->mem->outstanding++;
            int rc = nvme_qpair_submit(s.qp, nsp, uint8_t(opc), slba, n, ptr, len, qpair_cb, cmd);
            if (rc < 0) {
                if (cmd->mem) cmd->mem->outstanding--;
                if (cmd->dsm_slot >= 0) s.dsm_free.push_back(cmd->dsm_slot);
                delete cmd;
                std::string what = std::string(nvme_opc_name(false, uint8_t(opc))) + " nsid=" +
                                   std::to_string(ns.nsid) + " slba=" + std::to_string(slba) +
                                   " nlb=" + std::to_string(nlb);
                if (rc == -EBUSY)
                    throw QueueFullErr("queue full: " + std::to_string(nvme_qpair_outstanding(s.qp)) +
                                       " commands outstanding (depth " + std::to_string(s.depth) +
                                       " holds depth-1); poll() first");
                if (rc == -E2BIG)
                    throw py::value_error("nlb: " + what + " exceeds the largest transfer (" +
                                          std::to_string(nvme_ctrl_max_xfer(c)) + " bytes)");
                if (rc == -ERANGE) throw py::value_error("slba: " + what + " is beyond the namespace");
                if (rc == -EINVAL) throw py::value_error("submit: the driver refused " + what + " (invalid argument)");
                throw_errno(rc, "submit " + what);
            }
        }, py::arg("ns"), py::arg("opc"), py::arg("slba"), py::arg("nlb"), py::arg("buf"), py::arg("offset"),
           py::arg("nbytes"), py::arg("tag"))
        .def("submit_raw", [](QPair &q, py::bytes sqe, py::object buf, size_t offset, size_t nbytes, uint64_t tag) {
            std::string raw = sqe;
            if (raw.size() != sizeof(nvme_sqe))
                throw py::value_error("sqe: expected " + std::to_string(sizeof(nvme_sqe)) + " bytes");
            nvme_sqe e;
            std::memcpy(&e, raw.data(), sizeof e);
            Span sp = dma_span(buf, offset, nbytes, "buf");
            py::gil_scoped_release nogil;
            Op op(*q.s->ts, "QPair.submit_raw");
            QPairState &s = q.live("QPair.submit_raw");
            Busy busy(s);
            auto *cmd = new Cmd{&s, tag, sp.mem, -1};
            if (cmd->mem) cmd->mem->outstanding++;
            int rc = nvme_qpair_submit_raw(s.qp, &e, sp.ptr, sp.len, qpair_cb, cmd);
            if (rc < 0) {
                if (cmd->mem) cmd->mem->outstanding--;
                delete cmd;
                if (rc == -EBUSY) throw QueueFullErr("queue full: poll() first");
                if (rc == -E2BIG) throw py::value_error("nbytes: exceeds the largest transfer");
                if (rc == -EINVAL) throw py::value_error("submit_raw: the driver refused the command (invalid argument)");
                throw_errno(rc, "submit_raw");
            }
        }, py::arg("sqe"), py::arg("buf"), py::arg("offset"), py::arg("nbytes"), py::arg("tag"))
        .def("ring", [](QPair &q) {
            py::gil_scoped_release nogil;
            Op op(*q.s->ts, "QPair.ring");
            QPairState &s = q.live("QPair.ring");
            Busy busy(s);
            nvme_qpair_ring(s.qp);
        })
        .def("poll", [](QPair &q, uint32_t max, double timeout_s) {
            auto t0 = std::chrono::steady_clock::now();
            std::vector<Done> got;
            for (;;) {
                bool more_time;
                {
                    py::gil_scoped_release nogil;
                    Op op(*q.s->ts, "QPair.poll");
                    QPairState &s = q.live("QPair.poll");
                    Busy busy(s);
                    auto slice_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(kPollSliceS);
                    for (;;) {
                        uint32_t want = max ? max - uint32_t(got.size() + s.done.size()) : 0;
                        int rc = nvme_qpair_poll(s.qp, want);
                        s.graveyard.clear();
                        for (auto &d : s.done) got.push_back(d);
                        s.done.clear();
                        if (rc < 0 && rc != -ENXIO) throw_errno(rc, "QPair.poll");
                        if (rc == -ENXIO) break;
                        auto now = std::chrono::steady_clock::now();
                        double el = std::chrono::duration<double>(now - t0).count();
                        if (!got.empty() || (max && got.size() >= max) || el >= timeout_s ||
                            nvme_qpair_outstanding(s.qp) == 0)
                            break;
                        if (now >= slice_end) break;
                        std::this_thread::yield();
                    }
                    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    more_time = got.empty() && el < timeout_s && nvme_qpair_outstanding(s.qp) > 0;
                }
                if (!more_time) break;
                if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            }
            py::list out;
            for (auto &d : got)
                out.append(py::make_tuple(d.tag, d.cpl.cid, d.cpl.err, d.cpl.sct, d.cpl.sc, d.cpl.dnr, d.cpl.cdw0));
            return out;
        }, py::arg("max") = 0, py::arg("timeout") = 0.0,
           "reap completions: list of (tag, cid, err, sct, sc, dnr, cdw0); wait up to timeout seconds for one")
        .def("close", [](QPair &q) {
            std::shared_ptr<QPairState> s = q.s;
            py::gil_scoped_release nogil;
            std::shared_lock<std::shared_mutex> lk(s->ts->rw);
            if (!s->qp) return;
            Busy busy(*s);
            std::lock_guard<std::mutex> g(s->ts->ctrls[s->ci]->mu);
            s->destroy_locked();
        });

    // ---- Controller ----
    py::class_<Ctrl>(m, "Controller")
        .def_readonly("index", &Ctrl::ci)
        .def_property_readonly("closed", [](const Ctrl &c) { return c.ts->closed; })
        .def("identify", [](Ctrl &c) {
            nvme_id_ctrl id;
            uint32_t mdts, maxx, page, maxq, maxd, vs;
            uint64_t cap;
            {
                py::gil_scoped_release nogil;
                Op op(*c.ts, "Controller.identify");
                std::lock_guard<std::mutex> g(c.ts->ctrls[c.ci]->mu);
                nvme_ctrl *p = c.get();
                std::memcpy(&id, nvme_ctrl_id(p), sizeof id);
                mdts = nvme_ctrl_mdts_bytes(p);
                maxx = nvme_ctrl_max_xfer(p);
                page = nvme_ctrl_page_size(p);
                maxq = nvme_ctrl_max_qpairs(p);
                maxd = nvme_ctrl_max_depth(p);
                vs = nvme_ctrl_vs(p);
                cap = nvme_ctrl_cap(p);
            }
            py::dict d;
            d["vid"] = id.vid;
            d["ssvid"] = id.ssvid;
            d["sn"] = trim(id.sn, NVME_SN_LEN);
            d["mn"] = trim(id.mn, NVME_MN_LEN);
            d["fr"] = trim(id.fr, NVME_FR_LEN);
            d["rab"] = id.rab;
            d["cmic"] = id.cmic;
            d["mdts"] = id.mdts;
            d["cntlid"] = id.cntlid;
            d["ver"] = id.ver;
            d["oacs"] = id.oacs;
            d["sqes"] = id.sqes;
            d["cqes"] = id.cqes;
            d["maxcmd"] = id.maxcmd;
            d["nn"] = id.nn;
            d["oncs"] = id.oncs;
            d["vwc"] = id.vwc;
            d["sgls"] = id.sgls;
            d["subnqn"] = trim(id.subnqn, sizeof id.subnqn);
            d["mdts_bytes"] = mdts;
            d["max_transfer"] = maxx;
            d["page_size"] = page;
            d["max_qpairs"] = maxq;
            d["max_depth"] = maxd;
            d["cap"] = cap;
            d["vs"] = std::to_string(nvme_vs_mjr(vs)) + "." + std::to_string(nvme_vs_mnr(vs)) + "." +
                      std::to_string(nvme_vs_ter(vs));
            d["dstrd"] = nvme_cap_dstrd(cap);
            return d;
        }, "Identify Controller fields and what the driver derived from them")
        .def_property_readonly("mdts_bytes", [](Ctrl &c) {
            py::gil_scoped_release nogil;
            Op op(*c.ts, "Controller.mdts_bytes");
            return nvme_ctrl_mdts_bytes(c.get());
        })
        .def_property_readonly("max_transfer", [](Ctrl &c) {
            py::gil_scoped_release nogil;
            Op op(*c.ts, "Controller.max_transfer");
            return nvme_ctrl_max_xfer(c.get());
        })
        .def("nsids", [](Ctrl &c) {
            std::vector<uint32_t> v;
            py::gil_scoped_release nogil;
            Op op(*c.ts, "Controller.nsids");
            std::lock_guard<std::mutex> g(c.ts->ctrls[c.ci]->mu);
            nvme_ctrl *p = c.get();
            for (uint32_t i = 0, n = nvme_ctrl_nns(p); i < n; ++i) v.push_back(nvme_ns_id(nvme_ctrl_ns_at(p, i)));
            return v;
        })
        .def("ns", [](Ctrl &c, uint32_t nsid) {
            Ns ns{c.ts, c.ci, nsid, 0, 0};
            std::string active;
            {
                py::gil_scoped_release nogil;
                Op op(*c.ts, "Controller.namespace");
                std::lock_guard<std::mutex> g(c.ts->ctrls[c.ci]->mu);
                nvme_ctrl *p = c.get();
                nvme_ns *n = nvme_ctrl_ns(p, nsid);
                if (n) {
                    ns.lba_size = nvme_ns_lba_size(n);
                    ns.nsze = nvme_ns_nsze(n);
                    return ns;
                }
                for (uint32_t i = 0, k = nvme_ctrl_nns(p); i < k; ++i)
                    active += (i ? ", " : "") + std::to_string(nvme_ns_id(nvme_ctrl_ns_at(p, i)));
            }
            throw py::value_error("nsid: " + std::to_string(nsid) + " is not an active namespace (active: [" +
                                  active + "])");
        }, py::arg("nsid"))
        .def("reset", [](Ctrl &c) {
            py::gil_scoped_release nogil;
            Op op(*c.ts, "Controller.reset");
            CtrlSlot &slot = *c.ts->ctrls[c.ci];
            std::lock_guard<std::mutex> g(slot.mu);
            // claim every queue pair first: a reset under a thread that is polling would be a race
            std::vector<QPairState *> claimed;
            for (QPairState *q : slot.qps) {
                bool expect = false;
                if (!q->busy.compare_exchange_strong(expect, true)) {
                    for (QPairState *r : claimed) r->busy.store(false);
                    throw std::runtime_error("Controller.reset: queue pair " + std::to_string(q->qid) +
                                             " is in use by another thread");
                }
                claimed.push_back(q);
            }
            int rc = nvme_ctrl_reset(c.get());
            std::vector<QPairState *> qs = slot.qps;
            for (QPairState *q : qs) {
                q->closed_why = "the queue pair was closed by a controller reset";
                q->destroy_locked();
                q->busy.store(false);
            }
            if (rc < 0) throw_errno(rc, "Controller.reset");
        }, "controller reset and bring-up again; the controller's queue pairs are closed")
        .def("io", [](Ctrl &c, Ns &ns, int opc, uint64_t slba, uint32_t nlb, py::object buf, size_t offset,
                      size_t nbytes) {
            // buf: None, a DmaBuffer, or any contiguous buffer (writable for Read); nvme_ns_io_sync bounces
            Span sp;
            py::buffer_info info;
            bool have_info = false;
            if (!buf.is_none() && py::isinstance<DmaBuffer>(buf)) {
                sp = dma_span(buf, offset, nbytes, "buf");
            } else if (!buf.is_none()) {
                info = py::reinterpret_borrow<py::buffer>(buf).request(opc == NVME_CMD_READ);
                have_info = true;
                size_t total = size_t(info.size) * size_t(info.itemsize);
                if (offset > total || nbytes > total - offset)
                    throw py::value_error("buf: offset " + std::to_string(offset) + " + " + std::to_string(nbytes) +
                                          " bytes exceeds the buffer's " + std::to_string(total) + " bytes");
                sp.ptr = static_cast<uint8_t *>(info.ptr) + offset;
                sp.len = nbytes;
            } else if (nbytes) {
                throw py::value_error("buf: nbytes given without a buffer");
            }
            (void)have_info;
            if (ns.ts != c.ts || ns.ci != c.ci) throw py::value_error("ns: the namespace belongs to another controller");
            nvme_cpl cpl{};
            int rc;
            {
                py::gil_scoped_release nogil;
                Op op(*c.ts, "Namespace I/O");
                std::lock_guard<std::mutex> g(c.ts->ctrls[c.ci]->mu);
                nvme_ctrl *p = c.get();
                nvme_ns *n = ns.get(p);
                if (opc == NVME_CMD_DSM) {
                    nvme_dsm_range r{0, nlb, slba};
                    rc = nvme_ns_io_sync(p, n, uint8_t(opc), slba, 1, &r, sizeof r, &cpl);
                } else {
                    rc = nvme_ns_io_sync(p, n, uint8_t(opc), slba, nlb, sp.ptr, sp.len, &cpl);
                }
            }
            if (rc < 0) {
                std::string what = std::string(nvme_opc_name(false, uint8_t(opc))) + " nsid=" +
                                   std::to_string(ns.nsid) + " slba=" + std::to_string(slba) +
                                   " nlb=" + std::to_string(nlb);
                if (rc == -E2BIG) throw py::value_error("nlb: " + what + " exceeds the largest transfer");
                if (rc == -ERANGE) throw py::value_error("slba: " + what + " is beyond the namespace");
                if (rc == -EINVAL) throw py::value_error("the driver refused " + what + " (invalid argument)");
                cpl.err = rc;   // system errors travel like a completion's, named by the caller
            }
            return py::make_tuple(cpl.err, cpl.sct, cpl.sc, cpl.dnr, cpl.cdw0);
        }, py::arg("ns"), py::arg("opc"), py::arg("slba"), py::arg("nlb"), py::arg("buf"), py::arg("offset"),
           py::arg("nbytes"), "one synchronous command: (err, sct, sc, dnr, cdw0)")
        .def("admin_raw", [](Ctrl &c, py::bytes sqe, py::object buf, size_t offset, size_t nbytes, uint32_t timeout_ms) {
            std::string raw = sqe;
            if (raw.size() != sizeof(nvme_sqe)) throw py::value_error("sqe: expected 64 bytes");
            nvme_sqe e;
            std::memcpy(&e, raw.data(), sizeof e);
            Span sp = dma_span(buf, offset, nbytes, "buf");
            if (sp.len > NVME_ADMIN_BUF_SIZE)
                throw py::value_error("nbytes: admin data is limited to " + std::to_string(NVME_ADMIN_BUF_SIZE) + " bytes");
            nvme_cpl cpl{};
            {
                py::gil_scoped_release nogil;
                Op op(*c.ts, "Controller.admin_raw");
                int rc = nvme_ctrl_admin(c.get(), &e, sp.ptr, sp.len, &cpl, timeout_ms ? timeout_ms : kAdminTimeoutMs);
                if (rc < 0) cpl.err = rc;
            }
            return cpl_tuple(cpl);
        }, py::arg("sqe"), py::arg("buf"), py::arg("offset"), py::arg("nbytes"), py::arg("timeout_ms") = 0)
        .def("qpair", [](Ctrl &c, uint32_t depth, uint32_t timeout_ms, uint32_t batch) {
            auto s = std::make_shared<QPairState>();
            s->ts = c.ts;
            s->ci = c.ci;
            {
                py::gil_scoped_release nogil;
                Op op(*c.ts, "Controller.qpair");
                CtrlSlot &slot = *c.ts->ctrls[c.ci];
                std::lock_guard<std::mutex> g(slot.mu);
                nvme_ctrl *p = c.get();
                uint32_t maxd = nvme_ctrl_max_depth(p);
                if (depth < NVME_QUEUE_MIN_ENTRIES || depth > maxd)
                    throw py::value_error("depth: " + std::to_string(depth) + " is outside 2.." + std::to_string(maxd) +
                                          " (CAP.MQES+1 of this controller)");
                nvme_qpair_opts o{depth, timeout_ms, batch};
                int rc = nvme_qpair_create(p, &o, &s->qp);
                if (rc == -EBUSY)
                    throw_errno(rc, "Controller.qpair: no I/O queue identifier left (" +
                                        std::to_string(nvme_ctrl_max_qpairs(p)) + " queue pairs granted)");
                if (rc < 0) throw_errno(rc, "Controller.qpair: creating the I/O queues failed");
                s->depth = nvme_qpair_depth(s->qp);
                s->qid = nvme_qpair_qid(s->qp);
                slot.qps.push_back(s.get());
            }
            return QPair{s};
        }, py::arg("depth"), py::arg("timeout_ms"), py::arg("batch"))
        .def("emu_inject", [](Ctrl &c, const std::string &kind, uint32_t nth, uint8_t sct, uint8_t sc,
                              uint32_t delay_ms, int32_t qid, uint32_t count, bool dnr) {
            nvme_emu_fault f{};
            if (kind == "status") f.kind = NVME_EMU_FAULT_STATUS;
            else if (kind == "drop") f.kind = NVME_EMU_FAULT_DROP;
            else if (kind == "delay") f.kind = NVME_EMU_FAULT_DELAY;
            else if (kind == "cfs") f.kind = NVME_EMU_FAULT_CFS;
            else if (kind == "none" || kind == "clear") f.kind = NVME_EMU_FAULT_CLEAR;
            else throw py::value_error("kind: '" + kind + "' is not a fault kind (" + emu_fault_kinds() + ")");
            f.qid = qid;
            f.nth = nth;
            f.count = count;
            f.delay_ms = delay_ms;
            f.sct = sct;
            f.sc = sc;
            f.dnr = dnr;
            py::gil_scoped_release nogil;
            Op op(*c.ts, "Controller.emu_inject");
            if (!c.ts->is_emu) throw py::value_error("emu_inject: fault injection needs an emu:// target");
            auto *set = static_cast<nvme_emu_set *>(nvme_target_backend(c.ts->t));
            int rc = nvme_emu_inject(set, c.ci, &f);
            if (rc == -EINVAL) throw py::value_error("emu_inject: the emulator refused the fault (bad kind, qid or nth)");
            if (rc < 0) throw_errno(rc, "emu_inject");
        }, py::arg("kind"), py::arg("nth") = 1, py::arg("sct") = 0, py::arg("sc") = 0, py::arg("delay_ms") = 0,
           py::arg("qid") = NVME_EMU_FAULT_ANY_QUEUE, py::arg("count") = 1, py::arg("dnr") = false);

    // ---- Target ----
    py::class_<Target>(m, "Target")
        .def(py::init([](const std::string &uri) {
                 auto ts = std::make_shared<TargetState>();
                 ts->uri = uri;
                 char err[NVME_ERRLEN] = {0};
                 int rc;
                 {
                     py::gil_scoped_release nogil;
                     rc = nvme_target_open(uri.c_str(), &ts->t, err, sizeof err);
                 }
                 if (rc < 0) {
                     std::string msg = err[0] ? std::string(err) : std::string(std::strerror(-rc));
                     if (rc == -EINVAL) throw py::value_error("uri '" + uri + "': " + msg);
                     throw_errno(rc, "open '" + uri + "': " + msg);
                 }
                 const char *scheme = nvme_target_scheme(ts->t);
                 ts->is_emu = scheme && std::strcmp(scheme, "emu") == 0;
                 for (unsigned i = 0, n = nvme_target_nctrl(ts->t); i < n; ++i)
                     ts->ctrls.push_back(std::make_unique<CtrlSlot>());
                 return Target{ts};
             }), py::arg("uri"))
        .def_property_readonly("closed", [](const Target &t) { return t.ts->closed; })
        .def_property_readonly("uri", [](const Target &t) { return t.ts->uri; })
        .def_property_readonly("nctrl", [](const Target &t) { return t.ts->ctrls.size(); })
        .def("ctrl", [](Target &t, unsigned i) {
            if (i >= t.ts->ctrls.size()) throw py::index_error("controller index out of range");
            return Ctrl{t.ts, i};
        })
        .def("alloc", [](Target &t, size_t nbytes) {
            if (nbytes == 0) throw py::value_error("nbytes: 0; a DMA buffer needs at least one byte");
            DmaBuffer b;
            b.nbytes = nbytes;
            {
                py::gil_scoped_release nogil;
                Op op(*t.ts, "Target.alloc");
                nvme_dma *d = nullptr;
                int rc = nvme_dma_alloc(t.ts->t, nbytes, &d);
                if (rc == -ENOMEM) throw std::bad_alloc();
                if (rc == -EINVAL) throw py::value_error("nbytes: " + std::to_string(nbytes) + " is not a valid DMA size");
                if (rc < 0) throw_errno(rc, "Target.alloc(" + std::to_string(nbytes) + ")");
                b.mem = std::make_shared<DmaMem>(t.ts, d);
            }
            return b;
        }, py::arg("nbytes"))
        .def("close", [](Target &t) {
            py::gil_scoped_release nogil;
            t.ts->close();
        });
}

}  // namespace nvmelab
