/* SPDX-License-Identifier: BSD-3-Clause */
// nvmelab._native gpuq part: gpuq_standin_run(), the CPU stand-in of the cuda-run engine
// (engine/gpuq_standin.h) on any target the driver opens, for hosts without a GPU. The GIL is released
// while it runs; Ctrl-C stops it and raises KeyboardInterrupt (no result).
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "bindings.h"
#include "engine/gpuq_standin.h"
#include "errors.h"

namespace py = pybind11;

namespace nvmelab {

void bind_gpuq(py::module_ &m)
{
    m.def(
        "gpuq_standin_run",
        [](const std::string &uri, uint32_t nqueues, uint32_t qdepth, uint32_t iosize, double runtime, double warmup,
           uint64_t seed) {
            char err[NVME_ERRLEN] = {0};
            struct nvme_target *t = nullptr;
            int rc;
            {
                py::gil_scoped_release nogil;
                rc = nvme_target_open(uri.c_str(), &t, err, sizeof err);
            }
            if (rc < 0) {
                std::string msg = err[0] ? std::string(err) : std::string(std::strerror(-rc));
                if (rc == -EINVAL)
                    throw py::value_error("uri '" + uri + "': " + msg);
                raise_errno(rc, "open '" + uri + "': " + msg);
            }
            volatile int stop = 0;
            gpuq_standin_cfg cfg{};
            cfg.nqueues = nqueues;
            cfg.qdepth = qdepth;
            cfg.iosize = iosize;
            cfg.runtime_s = runtime;
            cfg.warmup_s = warmup;
            cfg.seed = seed;
            cfg.stop = &stop;
            gpuq_standin_result res{};
            const unsigned ndevs = nvme_target_nctrl(t);
            try {
                rc = run_interruptible([&] { return gpuq_standin_run(t, &cfg, &res, err, sizeof err); },
                                       [&] { stop = 1; });
            } catch (...) {
                py::gil_scoped_release nogil;
                nvme_target_close(t);
                throw;
            }
            {
                py::gil_scoped_release nogil;
                nvme_target_close(t);
            }
            if (rc == -EINVAL)
                throw py::value_error(std::string("gpuq stand-in: ") + err);
            if (rc < 0)
                raise_errno(rc, std::string("gpuq stand-in: ") + err);
            py::dict d;
            d["ios"] = res.ios;
            d["rounds"] = res.rounds;
            d["errors"] = res.errors;
            d["first_status"] = res.first_status;
            d["window_s"] = res.window_s;
            d["ndevs"] = ndevs;
            return d;
        },
        py::arg("uri"), py::arg("nqueues"), py::arg("qdepth"), py::arg("iosize"), py::arg("runtime"),
        py::arg("warmup") = 0.0, py::arg("seed") = 1,
        "The CPU stand-in of cuda-run (engine/gpuq_standin.h): lock-step rounds of qdepth reads on nqueues queue "
        "pairs of every controller of `uri`, one CPU thread, for warmup + runtime seconds; a dict of ios, rounds, "
        "errors, first_status, window_s, ndevs. Not a GPU measurement.");
}

} // namespace nvmelab
