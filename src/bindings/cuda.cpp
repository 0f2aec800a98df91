/* SPDX-License-Identifier: BSD-3-Clause */
// cuda.cpp — bindings of device-initiated I/O (src/nvme/cuda/cuda_api.h): CUDA device discovery, the
// cuda-run engine over gpu-emu://. Always present: cuda_device_count() and cuda_status() answer 0 and a
// reason in a build without CUDA or on a host without a GPU. The engine runs with the GIL released on a
// helper thread; Ctrl-C sets the engine's stop flag, waits for the kernels to end, then raises.
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <pybind11/stl.h>
#include <string>
#include <thread>
#include <vector>

#include "bindings.h"
#include "errors.h"

#ifdef NVMELAB_HAVE_CUDA
#include "nvme/cuda/cuda_api.h"
#include "nvme/spec.h"
#endif

namespace py = pybind11;

namespace nvmelab {
namespace {

#ifdef NVMELAB_HAVE_CUDA
constexpr int CUDA_SIGNAL_POLL_MS = 50;
constexpr size_t CUDA_ERR_LEN = 1024;

[[noreturn]] void cuda_raise(int rc, const std::string &msg)
{
    raise_errno(rc, msg); // the one converter (errors.h)
}

const char *state_name(uint32_t s)
{
    switch (s) {
    case 0:
        return "ok";
    case 1:
        return "timeout";
    case 2:
        return "bad_cid";
    case 3:
        return "bad_sqid";
    case 4:
        return "nvme_error";
    case 5:
        return "verify";
    default:
        return "unknown";
    }
}

py::dict devinfo_dict(const nvme_cuda_devinfo &g)
{
    py::dict d;
    d["name"] = std::string(g.name);
    d["compute_capability"] = std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor);
    d["sms"] = g.sms;
    d["max_threads_per_sm"] = g.max_threads_per_sm;
    d["mem_bytes"] = g.mem_bytes;
    d["driver_version"] = g.driver_version;
    d["runtime_version"] = g.runtime_version;
    char bdf[32];
    snprintf(bdf, sizeof(bdf), "%04x:%02x:%02x.0", g.pci_domain, g.pci_bus, g.pci_device);
    d["pci"] = std::string(bdf);
    return d;
}

py::dict result_dict(const nvme_cuda_run_result &r, const std::vector<uint64_t> &rounds)
{
    py::dict d;
    d["window_s"] = r.window_s;
    d["kernel_s"] = r.kernel_s;
    d["ios"] = r.ios;
    d["ios_total"] = r.ios_total;
    d["iops"] = r.iops;
    d["bytes_per_s"] = r.bytes_per_s;
    d["errors"] = r.errors;
    d["verify_errors"] = r.verify_errors;
    d["round_ns_mean"] = r.round_ns_mean;
    d["round_ns_max"] = r.round_ns_max;
    d["threads"] = r.threads;
    d["emu_blocks"] = r.emu_blocks;
    d["emu_warps"] = r.emu_warps;
    d["ndevs"] = r.ndevs;
    d["profile"] = std::string(r.profile);
    d["scale"] = r.scale;
    d["ooo"] = r.ooo;
    d["target_desc"] = std::string(r.target_desc);
    d["gpu"] = devinfo_dict(r.gpu);
    d["queue_rounds"] = rounds;
    d["buf_offset"] = r.buf_offset;
    d["buf_stride"] = r.buf_stride;
    d["payload"] = std::string(r.payload);
    if (r.emu.valid) { // the GPU-resident emulator's own counters: was the emulator the bottleneck?
        py::dict e;
        e["fetched"] = r.emu.fetched;
        e["completed"] = r.emu.completed;
        e["errors"] = r.emu.errors;
        e["dropped"] = r.emu.dropped;
        e["cq_full_held"] = r.emu.cq_full_held;
        e["idle_sweeps"] = r.emu.idle_sweeps;
        e["late_ns_mean"] = r.emu.late_ns_mean;
        e["late_ns_max"] = r.emu.late_ns_max;
        d["emulator"] = e;
    } else {
        d["emulator"] = py::none();
    }
    if (r.first_error.valid) {
        const nvme_cuda_cmd_error &e = r.first_error;
        py::dict fe;
        fe["dev"] = e.dev;
        fe["queue"] = e.queue;
        fe["state"] = state_name(e.state);
        fe["sct"] = e.sct;
        fe["sc"] = e.sc;
        fe["dnr"] = e.dnr;
        fe["name"] = e.state == 4 ? std::string(nvme_status_name(e.sct, e.sc)) : std::string(state_name(e.state));
        fe["lba"] = e.lba;
        d["first_error"] = fe;
    } else {
        d["first_error"] = py::none();
    }
    return d;
}

py::dict cuda_run(const std::string &target, const std::string &rw, uint32_t iosize, uint32_t qdepth, uint32_t nqueues,
                  uint32_t ndevs, double runtime, double warmup, uint64_t rounds, uint64_t seed, uint64_t lba_count,
                  uint64_t timeout_ns, bool verify, bool readback, int gpu, uint64_t buf, uint64_t buf_len,
                  const std::string &payload)
{
    nvme_cuda_run_params p;
    std::memset(&p, 0, sizeof(p));
    if (nvme_cuda_rw_parse(rw.c_str(), &p.rw))
        throw py::value_error("rw='" + rw + "': cuda-run patterns are read, randread, write, randwrite");
    p.target = target.c_str();
    p.iosize = iosize;
    p.qdepth = qdepth;
    p.nqueues = nqueues;
    p.ndevs = ndevs;
    p.runtime_s = runtime;
    p.warmup_s = warmup;
    p.rounds = rounds;
    p.seed = seed;
    p.lba_count = lba_count;
    p.timeout_ns = timeout_ns;
    p.verify = verify;
    p.readback = readback;
    p.gpu = gpu;
    p.buf = reinterpret_cast<void *>(static_cast<uintptr_t>(buf));
    p.buf_len = static_cast<size_t>(buf_len);
    p.payload = payload.c_str();
    nvme_cuda_run_result res;
    std::vector<uint64_t> qr((size_t)(ndevs ? ndevs : 64) * nqueues, 0);
    char err[CUDA_ERR_LEN] = {0};
    volatile int stop = 0;
    int rc = run_interruptible([&] { return nvme_cuda_run(&p, &res, qr.data(), qr.size(), &stop, err, sizeof(err)); },
                               [&] { stop = 1; }, CUDA_SIGNAL_POLL_MS);
    if (rc)
        cuda_raise(rc, err[0] ? err : std::string(std::strerror(-rc)));
    qr.resize(res.ndevs * (size_t)nqueues);
    return result_dict(res, qr);
}
#endif

} // namespace

void bind_cuda(py::module_ &m)
{
    m.def(
        "cuda_device_count",
        [] {
#ifdef NVMELAB_HAVE_CUDA
            char why[256];
            return nvme_cuda_device_count(why, sizeof(why));
#else
            return 0;
#endif
        },
        "Number of usable CUDA devices; 0 without CUDA support or GPU (cuda_status() says why).");

    m.def(
        "cuda_status",
        [] {
            py::dict d;
#ifdef NVMELAB_HAVE_CUDA
            char why[256] = {0};
            int n = nvme_cuda_device_count(why, sizeof(why));
            d["compiled"] = true;
            d["devices"] = n;
            d["reason"] = n > 0 ? std::string() : std::string(why);
#else
            d["compiled"] = false;
            d["devices"] = 0;
            d["reason"] = std::string("nvmelab was built without CUDA (no nvcc at build time)");
#endif
            return d;
        },
        "{'compiled': bool, 'devices': int, 'reason': str}: whether device-initiated I/O can run here, and why not.");

#ifdef NVMELAB_HAVE_CUDA
    m.def(
        "cuda_device_info",
        [](int gpu) {
            nvme_cuda_devinfo g;
            char err[CUDA_ERR_LEN] = {0};
            int rc = nvme_cuda_device_info(gpu, &g, err, sizeof(err));
            if (rc)
                cuda_raise(rc, err);
            return devinfo_dict(g);
        },
        py::arg("gpu") = 0, "Name, compute capability, SMs, memory, driver/runtime versions, PCI address of a GPU.");

    m.def("cuda_run", &cuda_run, py::arg("target"), py::arg("rw") = "randread", py::arg("iosize") = 512,
          py::arg("qdepth") = 128, py::arg("nqueues") = 1, py::arg("ndevs") = 0, py::arg("runtime") = 5.0,
          py::arg("warmup") = 1.0, py::arg("rounds") = 0, py::arg("seed") = 1, py::arg("lba_count") = 0,
          py::arg("timeout_ns") = 0, py::arg("verify") = false, py::arg("readback") = false, py::arg("gpu") = 0,
          py::arg("buf") = 0, py::arg("buf_len") = 0, py::arg("payload") = "host",
          "One cuda-run measurement (device-initiated I/O on gpu-emu://, pci:// or emu://?mode=thread); returns\n"
          "the raw result dict. payload (pci://, emu://): host (pinned host memory) or gpu (refused, see message).\n"
          "rounds > 0: every queue does exactly that many rounds (no timing window). buf/buf_len: a caller-owned\n"
          "GPU buffer (device pointer, e.g. from __cuda_array_interface__) that receives the I/O.");
    m.def(
        "cuda_target_check",
        [](const std::string &target, uint32_t ndevs) {
            char desc[NVME_CUDA_DESC_LEN] = {0}, err[CUDA_ERR_LEN] = {0};
            int rc = nvme_cuda_target_check(target.c_str(), ndevs ? ndevs : 16u, desc, sizeof(desc), err, sizeof(err));
            if (rc)
                cuda_raise(rc, err);
            return std::string(desc);
        },
        py::arg("target"), py::arg("ndevs") = 0,
        "Parse and check a gpu-emu:// URI without a GPU; returns its settings ('profile=... scale=...').");
    m.def(
        "cuda_buf_size",
        [](uint32_t iosize, uint32_t qdepth, uint32_t nqueues, uint32_t ndevs) {
            uint64_t stride = 0;
            size_t n = nvme_cuda_buf_size(iosize, qdepth, nqueues, ndevs, &stride);
            return py::make_tuple(n, stride);
        },
        py::arg("iosize"), py::arg("qdepth"), py::arg("nqueues"), py::arg("ndevs"),
        "(bytes, stride) a caller-provided cuda_run buffer needs for this shape.");
#else
    m.def(
        "cuda_run",
        [](py::args, py::kwargs) -> py::dict {
            throw std::runtime_error("cuda-run: nvmelab was built without CUDA (no nvcc at build time)");
        },
        "Unavailable: this build has no CUDA support.");
#endif
}

} // namespace nvmelab
