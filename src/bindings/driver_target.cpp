/* SPDX-License-Identifier: BSD-3-Clause */
// driver_target.cpp — nvmelab._native: the Target, DmaBuffer and Namespace classes (state and rules: driver_state.h,
// driver.cpp).
#include "bindings.h"
#include "driver_state.h"

namespace py = pybind11;

namespace nvmelab {
using namespace drv;

void bind_driver_target(py::module_ &m)
{
    // ---- DmaBuffer ----
    py::class_<DmaBuffer>(m, "DmaBuffer",
                          "DMA memory of a target. `.array` is a numpy uint8 view of it (no copy); "
                          "`np.asarray(buf)` gives the same. close() retires the buffer (BufferError while "
                          "commands on it are outstanding); leaving a with-block retires it even then. The "
                          "memory returns to the driver once no numpy view and no outstanding command "
                          "uses it.")
        .def_property_readonly("array", &DmaBuffer::array, "numpy uint8 array over the buffer (no copy)")
        .def(
            "__array__",
            [](const DmaBuffer &b, py::object dtype, py::object copy) -> py::object {
                py::object a = b.array();
                if (!dtype.is_none())
                    a = a.attr("astype")(dtype, py::arg("copy") = !copy.is_none() && copy.cast<bool>());
                else if (!copy.is_none() && copy.cast<bool>())
                    a = a.attr("copy")();
                return a;
            },
            py::arg("dtype") = py::none(), py::arg("copy") = py::none())
        .def_property_readonly("nbytes", [](const DmaBuffer &b) { return b.nbytes; })
        .def_property_readonly("size", [](const DmaBuffer &b) { return b.nbytes; })
        .def("__len__", [](const DmaBuffer &b) { return b.nbytes; })
        .def_property_readonly("closed", [](const DmaBuffer &b) { return !b.mem; })
        .def_property_readonly(
            "outstanding", [](const DmaBuffer &b) { return b.mem ? b.mem->outstanding.load() : 0; },
            "commands on this buffer not yet reaped by poll()")
        .def(
            "iova",
            [](const DmaBuffer &b, size_t offset) {
                DmaMem &m = b.get("DmaBuffer.iova");
                if (offset >= b.nbytes)
                    throw py::value_error("offset: " + std::to_string(offset) + " is outside the buffer");
                return nvme_dma_iova(m.d, m.va + offset);
            },
            py::arg("offset") = 0, "bus address the controller uses for byte `offset` of the buffer")
        .def("close", &DmaBuffer::close)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__",
             [](DmaBuffer &b, py::args) {
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

    // ---- Target ----
    py::class_<Target>(m, "Target")
        .def(py::init([](const py::object &uri_arg) {
                 const std::string uri = nvmelab::uri_text(uri_arg);
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
                     if (rc == -EINVAL)
                         throw py::value_error("uri '" + uri + "': " + msg);
                     throw_errno(rc, "open '" + uri + "': " + msg);
                 }
                 const char *scheme = nvme_target_scheme(ts->t);
                 ts->is_emu = scheme && std::strcmp(scheme, "emu") == 0;
                 for (unsigned i = 0, n = nvme_target_nctrl(ts->t); i < n; ++i)
                     ts->ctrls.push_back(std::make_unique<CtrlSlot>());
                 return Target{ts};
             }),
             py::arg("uri"))
        .def_property_readonly("closed", [](const Target &t) { return t.ts->closed; })
        .def_property_readonly("uri", [](const Target &t) { return t.ts->uri; })
        .def_property_readonly("nctrl", [](const Target &t) { return t.ts->ctrls.size(); })
        .def("ctrl",
             [](Target &t, unsigned i) {
                 if (i >= t.ts->ctrls.size())
                     throw py::index_error("controller index out of range");
                 return Ctrl{t.ts, i};
             })
        .def(
            "alloc",
            [](Target &t, size_t nbytes) {
                if (nbytes == 0)
                    throw py::value_error("nbytes: 0; a DMA buffer needs at least one byte");
                DmaBuffer b;
                b.nbytes = nbytes;
                {
                    py::gil_scoped_release nogil;
                    Op op(*t.ts, "Target.alloc");
                    nvme_dma *d = nullptr;
                    int rc = nvme_dma_alloc(t.ts->t, nbytes, &d);
                    if (rc == -ENOMEM)
                        throw std::bad_alloc();
                    if (rc == -EINVAL)
                        throw py::value_error("nbytes: " + std::to_string(nbytes) + " is not a valid DMA size");
                    if (rc < 0)
                        throw_errno(rc, "Target.alloc(" + std::to_string(nbytes) + ")");
                    b.mem = std::make_shared<DmaMem>(t.ts, d);
                }
                return b;
            },
            py::arg("nbytes"))
        .def("close", [](Target &t) {
            py::gil_scoped_release nogil;
            t.ts->close();
        });
}

} // namespace nvmelab
