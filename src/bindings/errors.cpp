/* SPDX-License-Identifier: BSD-3-Clause */
// nvmelab._native: the one errno / NVMe-status -> Python exception converter (see errors.h).
#include "errors.h"

#include <cerrno>

extern "C" {
#include "engine/backend.h"
#include "nvme/nvme.h"
}

namespace py = pybind11;

namespace nvmelab {

namespace {
// Set the Python error for code (the GIL is held).
void set_error(int code, const std::string &msg, const std::string &filename)
{
    if (code > 0) { // NVMe status
        int sct = (code >> 8) & 0x7, sc = code & 0xff;
        bool dnr = (code & PERF_STATUS_DNR) != 0;
        py::object cls = py::module_::import("nvmelab.errors").attr("NvmeError");
        py::object exc = cls(sct, sc, std::string(nvme_status_name((uint8_t)sct, (uint8_t)sc)), dnr, msg);
        PyErr_SetObject(cls.ptr(), exc.ptr());
        return;
    }
    int e = -code;
    if (e == EINVAL || e == ERANGE || e == E2BIG) {
        PyErr_SetString(PyExc_ValueError, msg.c_str());
        return;
    }
    // OSError(errno, msg[, filename]) picks the subclass (FileNotFoundError, TimeoutError, ...)
    py::object exc = filename.empty() ? py::module_::import("builtins").attr("OSError")(e, msg)
                                      : py::module_::import("builtins").attr("OSError")(e, msg, filename);
    PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(exc.ptr())), exc.ptr());
}
} // namespace

void raise_code(int code, const std::string &msg, const std::string &filename)
{
    set_error(code, msg, filename);
    throw py::error_already_set();
}

void register_errors(py::module_ &m)
{
    m.def(
        "_raise_code", [](int code, const std::string &msg) { raise_code(code, msg); }, py::arg("code"), py::arg("msg"),
        "Raise what the one converter makes of code (tests).");
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const ErrnoErr &e) {
            set_error(e.code, e.what(), e.filename);
        }
    });
}

} // namespace nvmelab
