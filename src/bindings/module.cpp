/* SPDX-License-Identifier: BSD-3-Clause */
// nvmelab._native: module entry point and build_info().
#include <string>

#include "bindings.h"
#include "errors.h"

namespace py = pybind11;

PYBIND11_MODULE(_native, m)
{
    m.doc() = "nvmelab native core: user-space NVMe driver, emulated controllers, engines";
    nvmelab::register_errors(m);
    nvmelab::bind_driver(m);
    nvmelab::bind_perf(m);
    nvmelab::bind_blksum(m);
    nvmelab::bind_cuda(m);
    nvmelab::bind_devices(m);
    nvmelab::bind_gpuq(m);
    nvmelab::bind_uri(m);

    m.def(
        "build_info",
        [] {
            py::dict d;
            d["version"] = NVMELAB_VERSION;
#ifdef NVMELAB_HAVE_CUDA
            d["cuda"] = true;
            d["cuda_architectures"] = std::string(NVMELAB_CUDA_ARCHS);
#else
            d["cuda"] = false;
            d["cuda_architectures"] = std::string();
#ifdef NVMELAB_CUDA_WHY
            d["cuda_reason"] = std::string(NVMELAB_CUDA_WHY); /* from the top CMakeLists.txt */
#endif
#endif
            d["io_uring"] =
                true; /* always compiled (kernel ABI); whether the kernel permits it: perf_io_uring_available() */
#ifdef NVMELAB_HAVE_BLKSUM
            d["blksum"] = true;
#else
            d["blksum"] = false;
#endif
#ifdef NVMELAB_HAVE_NBD
            d["nbd"] = true;
#else
            d["nbd"] = false;
#endif
#ifdef NVMELAB_NBD_WHY
            d["nbd_reason"] = std::string(NVMELAB_NBD_WHY); /* from src/blksum/CMakeLists.txt */
#endif
#if defined(__SANITIZE_ADDRESS__)
            d["sanitizers"] = true;
#else
            d["sanitizers"] = false;
#endif
            d["compiler"] = std::string(__VERSION__);
            return d;
        },
        "What was compiled into this build (CUDA, io_uring, blksum, NBD, compiler).");
}
