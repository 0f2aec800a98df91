/* SPDX-License-Identifier: BSD-3-Clause */
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
#include "driver_state.h"

namespace py = pybind11;

namespace nvmelab {
using namespace drv;

void bind_driver(py::module_ &m)
{
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const ClosedErr &e) {
            py::object cls = py::module_::import("nvmelab.errors").attr("ClosedError");
            PyErr_SetString(cls.ptr(), e.what());
        } catch (const QueueFullErr &e) {
            py::object args = py::make_tuple(EBUSY, e.what());
            PyErr_SetObject(PyExc_BlockingIOError, args.ptr());
        } // ErrnoErr: the one converter (errors.cpp)
    });

    m.def(
        "status_name", [](int sct, int sc) { return std::string(nvme_status_name(sct & 0x7, sc & 0xff)); },
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
    spec.def(
        "opc_name", [](bool admin, int opc) { return std::string(nvme_opc_name(admin, opc & 0xff)); }, py::arg("admin"),
        py::arg("opc"));

    bind_driver_target(m);
    bind_driver_qpair(m);
    bind_driver_controller(m);
}

} // namespace nvmelab
