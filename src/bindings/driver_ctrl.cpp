/* SPDX-License-Identifier: BSD-3-Clause */
// driver_ctrl.cpp — nvmelab._native: the Controller class (state and rules: driver_state.h, driver.cpp).
#include "driver_state.h"

namespace py = pybind11;

namespace nvmelab {
using namespace drv;

void bind_driver_controller(py::module_ &m)
{
    // ---- Controller ----
    py::class_<Ctrl>(m, "Controller")
        .def_readonly("index", &Ctrl::ci)
        .def_property_readonly("closed", [](const Ctrl &c) { return c.ts->closed; })
        .def(
            "identify",
            [](Ctrl &c) {
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
            },
            "Identify Controller fields and what the driver derived from them")
        .def_property_readonly("mdts_bytes",
                               [](Ctrl &c) {
                                   py::gil_scoped_release nogil;
                                   Op op(*c.ts, "Controller.mdts_bytes");
                                   return nvme_ctrl_mdts_bytes(c.get());
                               })
        .def_property_readonly("max_transfer",
                               [](Ctrl &c) {
                                   py::gil_scoped_release nogil;
                                   Op op(*c.ts, "Controller.max_transfer");
                                   return nvme_ctrl_max_xfer(c.get());
                               })
        .def("nsids",
             [](Ctrl &c) {
                 std::vector<uint32_t> v;
                 py::gil_scoped_release nogil;
                 Op op(*c.ts, "Controller.nsids");
                 std::lock_guard<std::mutex> g(c.ts->ctrls[c.ci]->mu);
                 nvme_ctrl *p = c.get();
                 for (uint32_t i = 0, n = nvme_ctrl_nns(p); i < n; ++i)
                     v.push_back(nvme_ns_id(nvme_ctrl_ns_at(p, i)));
                 return v;
             })
        .def(
            "ns",
            [](Ctrl &c, uint32_t nsid) {
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
            },
            py::arg("nsid"))
        .def(
            "reset",
            [](Ctrl &c) {
                py::gil_scoped_release nogil;
                Op op(*c.ts, "Controller.reset");
                CtrlSlot &slot = *c.ts->ctrls[c.ci];
                std::lock_guard<std::mutex> g(slot.mu);
                // claim every queue pair first: a reset under a thread that is polling would be a race
                std::vector<QPairState *> claimed;
                for (QPairState *q : slot.qps) {
                    bool expect = false;
                    if (!q->busy.compare_exchange_strong(expect, true)) {
                        for (QPairState *r : claimed)
                            r->busy.store(false);
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
                if (rc < 0)
                    throw_errno(rc, "Controller.reset");
            },
            "controller reset and bring-up again; the controller's queue pairs are closed")
        .def(
            "io",
            [](Ctrl &c, Ns &ns, int opc, uint64_t slba, uint32_t nlb, py::object buf, size_t offset, size_t nbytes) {
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
                if (ns.ts != c.ts || ns.ci != c.ci)
                    throw py::value_error("ns: the namespace belongs to another controller");
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
                    std::string what = std::string(nvme_opc_name(false, uint8_t(opc))) +
                                       " nsid=" + std::to_string(ns.nsid) + " slba=" + std::to_string(slba) +
                                       " nlb=" + std::to_string(nlb);
                    if (rc == -E2BIG)
                        throw py::value_error("nlb: " + what + " exceeds the largest transfer");
                    if (rc == -ERANGE)
                        throw py::value_error("slba: " + what + " is beyond the namespace");
                    if (rc == -EINVAL)
                        throw py::value_error("the driver refused " + what + " (invalid argument)");
                    cpl.err = rc; // system errors travel like a completion's, named by the caller
                }
                return py::make_tuple(cpl.err, cpl.sct, cpl.sc, cpl.dnr, cpl.cdw0);
            },
            py::arg("ns"), py::arg("opc"), py::arg("slba"), py::arg("nlb"), py::arg("buf"), py::arg("offset"),
            py::arg("nbytes"), "one synchronous command: (err, sct, sc, dnr, cdw0)")
        .def(
            "admin_raw",
            [](Ctrl &c, py::bytes sqe, py::object buf, size_t offset, size_t nbytes, uint32_t timeout_ms) {
                std::string raw = sqe;
                if (raw.size() != sizeof(nvme_sqe))
                    throw py::value_error("sqe: expected 64 bytes");
                nvme_sqe e;
                std::memcpy(&e, raw.data(), sizeof e);
                Span sp = dma_span(buf, offset, nbytes, "buf");
                if (sp.len > NVME_ADMIN_BUF_SIZE)
                    throw py::value_error("nbytes: admin data is limited to " + std::to_string(NVME_ADMIN_BUF_SIZE) +
                                          " bytes");
                nvme_cpl cpl{};
                char why[256] = "";
                {
                    py::gil_scoped_release nogil;
                    Op op(*c.ts, "Controller.admin_raw");
                    int rc = nvme_ctrl_admin_err(c.get(), &e, sp.ptr, sp.len, &cpl,
                                                 timeout_ms ? timeout_ms : kAdminTimeoutMs, why, sizeof why);
                    // the driver's IOMMU refused the SQE's own PRPs: the command never reached the controller
                    if (why[0] && (rc == -EFAULT || rc == -EINVAL || rc == -E2BIG))
                        throw py::value_error(std::string("admin_raw: refused: ") + why);
                    if (rc < 0)
                        cpl.err = rc;
                }
                return cpl_tuple(cpl);
            },
            py::arg("sqe"), py::arg("buf"), py::arg("offset"), py::arg("nbytes"), py::arg("timeout_ms") = 0)
        .def(
            "qpair",
            [](Ctrl &c, uint32_t depth, uint32_t timeout_ms, uint32_t batch) {
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
                        throw py::value_error("depth: " + std::to_string(depth) + " is outside 2.." +
                                              std::to_string(maxd) + " (CAP.MQES+1 of this controller)");
                    nvme_qpair_opts o{depth, timeout_ms, batch, 0}; /* CQ as deep as the SQ */
                    int rc = nvme_qpair_create(p, &o, &s->qp);
                    if (rc == -EBUSY)
                        throw_errno(rc, "Controller.qpair: no I/O queue identifier left (" +
                                            std::to_string(nvme_ctrl_max_qpairs(p)) + " queue pairs granted)");
                    if (rc < 0)
                        throw_errno(rc, "Controller.qpair: creating the I/O queues failed");
                    s->depth = nvme_qpair_depth(s->qp);
                    s->qid = nvme_qpair_qid(s->qp);
                    slot.qps.push_back(s.get());
                }
                return QPair{s};
            },
            py::arg("depth"), py::arg("timeout_ms"), py::arg("batch"))
        .def(
            "emu_inject",
            [](Ctrl &c, const std::string &kind, uint32_t nth, uint8_t sct, uint8_t sc, uint32_t delay_ms, int32_t qid,
               uint32_t count, bool dnr) {
                nvme_emu_fault f{};
                if (kind == "status")
                    f.kind = NVME_EMU_FAULT_STATUS;
                else if (kind == "drop")
                    f.kind = NVME_EMU_FAULT_DROP;
                else if (kind == "delay")
                    f.kind = NVME_EMU_FAULT_DELAY;
                else if (kind == "cfs")
                    f.kind = NVME_EMU_FAULT_CFS;
                else if (kind == "none" || kind == "clear")
                    f.kind = NVME_EMU_FAULT_CLEAR;
                else
                    throw py::value_error("kind: '" + kind + "' is not a fault kind (" + emu_fault_kinds() + ")");
                f.qid = qid;
                f.nth = nth;
                f.count = count;
                f.delay_ms = delay_ms;
                f.sct = sct;
                f.sc = sc;
                f.dnr = dnr;
                py::gil_scoped_release nogil;
                Op op(*c.ts, "Controller.emu_inject");
                if (!c.ts->is_emu)
                    throw py::value_error("emu_inject: fault injection needs an emu:// target");
                auto *set = static_cast<nvme_emu_set *>(nvme_target_backend(c.ts->t));
                int rc = nvme_emu_inject(set, c.ci, &f);
                if (rc == -EINVAL)
                    throw py::value_error("emu_inject: the emulator refused the fault (bad kind, qid or nth)");
                if (rc < 0)
                    throw_errno(rc, "emu_inject");
            },
            py::arg("kind"), py::arg("nth") = 1, py::arg("sct") = 0, py::arg("sc") = 0, py::arg("delay_ms") = 0,
            py::arg("qid") = NVME_EMU_FAULT_ANY_QUEUE, py::arg("count") = 1, py::arg("dnr") = false);
}

} // namespace nvmelab
