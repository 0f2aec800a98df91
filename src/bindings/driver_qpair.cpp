/* SPDX-License-Identifier: BSD-3-Clause */
// driver_qpair.cpp — nvmelab._native: the QPair class (state and rules: driver_state.h, driver.cpp).
#include "driver_state.h"

namespace py = pybind11;

namespace nvmelab {
using namespace drv;

void bind_driver_qpair(py::module_ &m)
{
    // ---- QPair ----
    py::class_<QPair>(m, "QPair")
        .def_property_readonly("closed", [](const QPair &q) { return q.s->qp == nullptr; })
        .def_property_readonly("qid", [](const QPair &q) { return q.live("QPair.qid").qid; })
        .def_property_readonly("depth", [](const QPair &q) { return q.s->depth; })
        .def_property_readonly("outstanding",
                               [](const QPair &q) {
                                   QPairState &s = q.live("QPair.outstanding");
                                   return nvme_qpair_outstanding(s.qp);
                               })
        .def_property_readonly("memory",
                               [](const QPair &q) {
                                   QPairState &s = q.live("QPair.memory");
                                   nvme_qpair_mem m;
                                   nvme_qpair_mem_info(s.qp, &m);
                                   py::dict d;
                                   d["sq"] = py::make_tuple(m.sq, m.sq_bytes);
                                   d["cq"] = py::make_tuple(m.cq, m.cq_bytes);
                                   d["prp_lists"] = py::make_tuple(m.prp_lists, m.prp_lists_bytes);
                                   return d;
                               })
        .def(
            "submit",
            [](QPair &q, Ns &ns, int opc, uint64_t slba, uint32_t nlb, py::object buf, size_t offset, size_t nbytes,
               uint64_t tag) {
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
                        if (rc < 0) {
                            delete cmd;
                            throw_errno(rc, "QPair.submit: DMA memory for DSM ranges");
                        }
                        nvme_dma_mark_internal(d); // the driver's range slots: no raw PRP may point at them
                        s.dsm = std::make_shared<DmaMem>(s.ts, d);
                        for (int i = int(s.depth) - 1; i >= 0; --i)
                            s.dsm_free.push_back(i);
                    }
                    if (s.dsm_free.empty()) {
                        delete cmd;
                        throw QueueFullErr("queue full: no DSM range slot free; poll() first");
                    }
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
                if (cmd->mem)
                    cmd->mem->outstanding++;
                int rc = nvme_qpair_submit(s.qp, nsp, uint8_t(opc), slba, n, ptr, len, qpair_cb, cmd);
                if (rc < 0) {
                    if (cmd->mem)
                        cmd->mem->outstanding--;
                    if (cmd->dsm_slot >= 0)
                        s.dsm_free.push_back(cmd->dsm_slot);
                    delete cmd;
                    std::string what = std::string(nvme_opc_name(false, uint8_t(opc))) +
                                       " nsid=" + std::to_string(ns.nsid) + " slba=" + std::to_string(slba) +
                                       " nlb=" + std::to_string(nlb);
                    if (rc == -EBUSY)
                        throw QueueFullErr("queue full: " + std::to_string(nvme_qpair_outstanding(s.qp)) +
                                           " commands outstanding (depth " + std::to_string(s.depth) +
                                           " holds depth-1); poll() first");
                    if (rc == -E2BIG)
                        throw py::value_error("nlb: " + what + " exceeds the largest transfer (" +
                                              std::to_string(nvme_ctrl_max_xfer(c)) + " bytes)");
                    if (rc == -ERANGE)
                        throw py::value_error("slba: " + what + " is beyond the namespace");
                    if (rc == -EINVAL)
                        throw py::value_error("submit: the driver refused " + what + " (invalid argument)");
                    throw_errno(rc, "submit " + what);
                }
            },
            py::arg("ns"), py::arg("opc"), py::arg("slba"), py::arg("nlb"), py::arg("buf"), py::arg("offset"),
            py::arg("nbytes"), py::arg("tag"))
        .def(
            "submit_raw",
            [](QPair &q, py::bytes sqe, py::object buf, size_t offset, size_t nbytes, uint64_t tag) {
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
                if (cmd->mem)
                    cmd->mem->outstanding++;
                char why[256] = "";
                int rc = nvme_qpair_submit_raw_err(s.qp, &e, sp.ptr, sp.len, qpair_cb, cmd, why, sizeof why);
                if (rc < 0) {
                    if (cmd->mem)
                        cmd->mem->outstanding--;
                    delete cmd;
                    if (rc == -EBUSY)
                        throw QueueFullErr("queue full: poll() first");
                    // the driver's IOMMU and the transfer limit: the command is refused, the queue as it was
                    if (rc == -E2BIG || rc == -EINVAL || rc == -EFAULT)
                        throw py::value_error(std::string("submit_raw: refused: ") + why);
                    throw_errno(rc, "submit_raw");
                }
            },
            py::arg("sqe"), py::arg("buf"), py::arg("offset"), py::arg("nbytes"), py::arg("tag"))
        .def("ring",
             [](QPair &q) {
                 py::gil_scoped_release nogil;
                 Op op(*q.s->ts, "QPair.ring");
                 QPairState &s = q.live("QPair.ring");
                 Busy busy(s);
                 nvme_qpair_ring(s.qp);
             })
        .def(
            "poll",
            [](QPair &q, uint32_t max, double timeout_s) {
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
                            for (auto &d : s.done)
                                got.push_back(d);
                            s.done.clear();
                            if (rc < 0 && rc != -ENXIO)
                                throw_errno(rc, "QPair.poll");
                            if (rc == -ENXIO)
                                break;
                            auto now = std::chrono::steady_clock::now();
                            double el = std::chrono::duration<double>(now - t0).count();
                            if (!got.empty() || (max && got.size() >= max) || el >= timeout_s ||
                                nvme_qpair_outstanding(s.qp) == 0)
                                break;
                            if (now >= slice_end)
                                break;
                            std::this_thread::yield();
                        }
                        double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                        more_time = got.empty() && el < timeout_s && nvme_qpair_outstanding(s.qp) > 0;
                    }
                    if (!more_time)
                        break;
                    if (PyErr_CheckSignals() != 0)
                        throw py::error_already_set();
                }
                py::list out;
                for (auto &d : got)
                    out.append(py::make_tuple(d.tag, d.cpl.cid, d.cpl.err, d.cpl.sct, d.cpl.sc, d.cpl.dnr, d.cpl.cdw0));
                return out;
            },
            py::arg("max") = 0, py::arg("timeout") = 0.0,
            "reap completions: list of (tag, cid, err, sct, sc, dnr, cdw0); wait up to timeout seconds for one")
        .def("close", [](QPair &q) {
            std::shared_ptr<QPairState> s = q.s;
            py::gil_scoped_release nogil;
            std::shared_lock<std::shared_mutex> lk(s->ts->rw);
            if (!s->qp)
                return;
            Busy busy(*s);
            std::lock_guard<std::mutex> g(s->ts->ctrls[s->ci]->mu);
            s->destroy_locked();
        });
}

} // namespace nvmelab
