/* SPDX-License-Identifier: BSD-3-Clause */
// errors.h — the one errno / NVMe-status -> Python exception converter of nvmelab._native.
//
// Rule (every binding uses it: driver, perf, blksum, cuda, devices):
//   * a negative errno that means "bad argument" (-EINVAL, -ERANGE, -E2BIG) -> ValueError(msg);
//   * any other negative errno -> OSError(errno, msg[, filename]), which Python turns into its subclass
//     (FileNotFoundError, PermissionError, TimeoutError, BlockingIOError, ...);
//   * a positive NVMe status as the engines report it ((SCT << 8 | SC) | PERF_STATUS_DNR) ->
//     nvmelab.errors.NvmeError(sct, sc, name, dnr, what), with the specification's name of the status.
// raise_code() needs the GIL; code running without it throws ErrnoErr (throw_errno), which the
// translator registered by register_errors() converts with the same rule once the GIL is back.
#pragma once
#include <pybind11/pybind11.h>
#include <stdexcept>
#include <string>

namespace nvmelab {

struct ErrnoErr : std::runtime_error {
    int code; // negative errno or positive NVMe status
    std::string filename;
    ErrnoErr(int c, const std::string &m, const std::string &f = std::string())
        : std::runtime_error(m), code(c), filename(f)
    {
    }
};

[[noreturn]] void raise_code(int code, const std::string &msg, const std::string &filename = std::string());
[[noreturn]] inline void raise_errno(int rc, const std::string &msg, const std::string &filename = std::string())
{
    raise_code(rc < 0 ? rc : -rc, msg, filename);
}
[[noreturn]] inline void throw_errno(int rc, const std::string &what)
{
    throw ErrnoErr(rc < 0 ? rc : -rc, what);
}
void register_errors(pybind11::module_ &m);

} // namespace nvmelab
