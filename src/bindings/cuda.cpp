/* SPDX-License-Identifier: BSD-3-Clause */
// cuda.cpp — bindings of device-initiated I/O (src/engine/cuda/cuda_api.h): CUDA device discovery, the
// cuda-run engine over gpu-emu://. Always present: cuda_device_count() and cuda_status() answer 0 and a
// reason in a build without CUDA or on a host without a GPU. The engine runs with the GIL released on a
// helper thread; Ctrl-C sets the engine's stop flag, waits for the kernels to end, then raises.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <pybind11/stl.h>
#include <string>
#include <thread>
#include <vector>

#include "bindings.h"
#include "engine/crun_params.h"
#include "errors.h"

#ifdef NVMELAB_HAVE_CUDA
#include "engine/cuda/cuda_api.h"
#include "nvme/spec.h"
#endif

namespace py = pybind11;

namespace nvmelab {
namespace {

constexpr double NS_PER_S = 1e9;
constexpr size_t CUDA_CHECK_ERR_LEN = 512;
// ---- cuda-run's run parameters: the engine table (engine/crun_params.h), with or without CUDA
struct CrunArgs {
    nvme_cuda_run_params p;
    std::string target, payload = "host";
};

// Keyword parsing derived from the table; target, payload, buf and buf_len are the only other keywords.
CrunArgs crun_from_kwargs(const py::kwargs &kw, bool need_target)
{
    CrunArgs a;
    crun_params_defaults(&a.p);
    for (auto item : kw) {
        const std::string k = py::str(item.first);
        py::handle v = item.second;
        const std::string bad = k + "=" + std::string(py::repr(v)) + ": bad value";
        try {
            if (k == "target") {
                a.target = v.cast<std::string>();
                continue;
            }
            if (k == "payload") {
                a.payload = v.cast<std::string>();
                continue;
            }
            if (k == "buf") {
                a.p.buf = reinterpret_cast<void *>(static_cast<uintptr_t>(v.cast<uint64_t>()));
                continue;
            }
            if (k == "buf_len") {
                a.p.buf_len = static_cast<size_t>(v.cast<uint64_t>());
                continue;
            }
        } catch (const py::cast_error &) {
            throw py::value_error(bad);
        }
        const int i = crun_param_find(k.c_str());
        if (i < 0) {
            std::string known;
            for (size_t j = 0; j < CRUN_NPARAMS; j++)
                known += std::string(j ? ", " : "") + crun_param_info(j)->name;
            throw py::value_error("unknown cuda-run parameter '" + k + "' (known: " + known +
                                  ", target, payload, buf, buf_len)");
        }
        const crun_param_type t = crun_param_info((size_t)i)->type;
        if (v.is_none() || (PyBool_Check(v.ptr()) && t != CRUN_PT_BOOL))
            throw py::value_error(bad);
        try {
#define CPARSE_U32(field)  a.p.field = v.cast<uint32_t>()
#define CPARSE_U64(field)  a.p.field = v.cast<uint64_t>()
#define CPARSE_BOOL(field) a.p.field = v.cast<bool>()
#define CPARSE_SECONDS(field)                                                                                          \
    do {                                                                                                               \
        double s_ = v.cast<double>();                                                                                  \
        if (!std::isfinite(s_) || s_ < 0) /* bounds: crun_params_check */                                              \
            throw py::value_error(k + "=" + std::string(py::repr(v)) + ": must be a finite number of seconds >= 0");   \
        a.p.field = static_cast<uint64_t>(s_ * NS_PER_S);                                                              \
    } while (0)
#define CPARSE_PATTERN(field)                                                                                          \
    do {                                                                                                               \
        std::string n_ = v.cast<std::string>();                                                                        \
        if (nvme_cuda_rw_parse(n_.c_str(), &a.p.field))                                                                \
            throw py::value_error(k + "='" + n_ + "': cuda-run patterns are read, randread, write, randwrite");        \
    } while (0)
#define CPARSE_POLL(field)                                                                                             \
    do {                                                                                                               \
        std::string n_ = v.cast<std::string>();                                                                        \
        if (crun_poll_parse(n_.c_str(), &a.p.field))                                                                   \
            throw py::value_error(k + "='" + n_ + "': must be spin or backoff:MAX_NS (1.." +                           \
                                  std::to_string(CRUN_POLL_MAX_NS) + ")");                                             \
    } while (0)
#define CPARSE_MATCH(field)                                                                                            \
    do {                                                                                                               \
        std::string n_ = v.cast<std::string>();                                                                        \
        const int m_ = nvme_gpuq_match_parse(n_.c_str());                                                              \
        if (m_ < 0)                                                                                                    \
            throw py::value_error(k + "='" + n_ + "': must be cid, positional or scan");                               \
        a.p.field = static_cast<uint32_t>(m_);                                                                         \
    } while (0)
#define X(name, type, field, lo, hi, def, doc)                                                                         \
    if (k == #name)                                                                                                    \
        CPARSE_##type(field);
            CRUN_PARAMS(X)
#undef X
        } catch (const py::cast_error &) {
            throw py::value_error(bad);
        }
    }
    if (need_target && a.target.empty())
        throw py::value_error("target: missing");
    char err[CUDA_CHECK_ERR_LEN] = "";
    if (crun_params_check(&a.p, err, sizeof(err))) // the one check of the table
        throw py::value_error(err);
    return a;
}

// The table as Python sees it: nvmelab._native.CRUN_PARAMS (nvmelab.engines.gpu.params(), the CLI).
py::list crun_params_list()
{
    py::list out;
    for (size_t i = 0; i < CRUN_NPARAMS; i++) {
        const struct crun_param_info *p = crun_param_info(i);
        py::dict d;
        d["name"] = p->name;
        d["doc"] = p->doc;
        d["min"] = py::none();
        d["max"] = py::none();
        switch (p->type) {
        case CRUN_PT_U32:
        case CRUN_PT_U64:
            d["type"] = "int";
            d["default"] = static_cast<unsigned long long>(p->def);
            d["min"] = static_cast<unsigned long long>(p->lo);
            if (p->type == CRUN_PT_U32)
                d["max"] = static_cast<unsigned long long>(p->hi);
            break;
        case CRUN_PT_BOOL:
            d["type"] = "bool";
            d["default"] = p->def != 0;
            break;
        case CRUN_PT_SECONDS:
            d["type"] = "seconds";
            d["default"] = p->def;
            d["min"] = p->lo;
            d["max"] = p->hi;
            break;
        case CRUN_PT_PATTERN:
            d["type"] = "pattern";
            d["default"] = std::string(nvme_cuda_rw_name(static_cast<nvme_cuda_rw>(static_cast<int>(p->def))));
            break;
        case CRUN_PT_POLL: {
            char buf[CRUN_POLL_TEXT_LEN];
            crun_poll_format(static_cast<uint32_t>(p->def), buf, sizeof(buf));
            d["type"] = "poll";
            d["default"] = std::string(buf);
            break;
        }
        case CRUN_PT_MATCH:
            d["type"] = "match";
            d["default"] = std::string(nvme_gpuq_match_name(static_cast<int>(p->def)));
            break;
        }
        out.append(d);
    }
    return out;
}

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
    case 6:
        return "sq_readback";
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
    d["match_looks"] = r.match_looks;
    d["match_cq_bytes"] = r.match_cq_bytes;
    d["match_stale"] = r.match_stale;
    d["match_foreign"] = r.match_foreign;
    d["misattributed"] = r.misattributed;
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
    d["poll"] = std::string(r.poll);
    d["occupancy_pct"] = r.occupancy_pct;
    d["occupancy_permille"] = r.occupancy_permille;
    d["sq_readback"] = r.sq_readback;
    d["fence"] = std::string(r.fence);          // doorbell fences: "gpu" or "sys" scope
    d["round_publish_ns"] = r.round_publish_ns; // mapped round counters written at most this often
    d["window_t0_ns"] = r.window_t0_ns;         // the window on the steady clock (time.monotonic_ns), for NVML
    d["window_t1_ns"] = r.window_t1_ns;
    if (r.corun.valid) { // the co-running compute kernel (corun=): raw times, the ratio is made in Python
        const nvme_cuda_corun_result &c = r.corun;
        py::dict co;
        co["blocks"] = c.blocks;
        co["threads_per_block"] = c.threads_per_block;
        co["launches"] = c.launches;
        co["iters"] = c.iters;
        co["flop_per_launch"] = c.flop_per_launch;
        co["alone_s"] = c.alone_s;
        co["loaded_s"] = c.loaded_s;
        co["resident"] = c.resident;
        co["overlap"] = c.overlap;
        d["corun"] = co;
    } else {
        d["corun"] = py::none();
    }
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
        e["sq_wait_mean"] = r.emu.sq_wait_mean; // fetch lag: SQEs behind the doorbell per look
        e["sq_wait_max"] = r.emu.sq_wait_max;
        e["sq_left_frac"] = r.emu.sq_left_frac;             // share of them left for a later sweep
        e["fetch_late_ns_mean"] = r.emu.fetch_late_ns_mean; // SQ backlog beyond the model's pacing, per SQE
        e["timed"] = r.emu.timed;
        e["warps_serving"] = r.emu.warps_serving;
        e["busy_max"] = r.emu.busy_max; // busy fraction of the busiest warp
        e["busy_mean"] = r.emu.busy_mean;
        e["headroom"] = r.emu.headroom; // 1 / busy_max
        e["limited"] = r.emu.limited;   // the emulator, not the model, set the rate
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

py::dict cuda_run(py::kwargs kw)
{
    CrunArgs a = crun_from_kwargs(kw, true);
    nvme_cuda_run_params &p = a.p;
    p.target = a.target.c_str();
    p.payload = a.payload.c_str();
    nvme_cuda_run_result res;
    std::vector<uint64_t> qr((size_t)(p.ndevs ? p.ndevs : CRUN_MAX_NDEVS) * p.nqueues, 0);
    std::vector<uint64_t> beats(qr.size(), 0);
    std::vector<uint32_t> samples(p.sample_every ? (size_t)CRUN_SAMPLE_CAP * NVME_GPUQ_NPHASES : 0u);
    p.beats = beats.data();
    p.samples = samples.empty() ? nullptr : samples.data();
    p.sample_cap = samples.empty() ? 0u : CRUN_SAMPLE_CAP;
    char err[CUDA_ERR_LEN] = {0};
    volatile int stop = 0;
    int rc = run_interruptible([&] { return nvme_cuda_run(&p, &res, qr.data(), qr.size(), &stop, err, sizeof(err)); },
                               [&] { stop = 1; }, CUDA_SIGNAL_POLL_MS);
    if (rc)
        cuda_raise(rc, err[0] ? err : std::string(std::strerror(-rc)));
    qr.resize(res.ndevs * (size_t)p.nqueues);
    beats.resize(qr.size());
    py::dict d = result_dict(res, qr);
    // self-checks and breakdown (nvmelab.results.checks): counts, one heartbeat per block, the sampled phases
    d["submitted"] = res.submitted;
    d["completed"] = res.completed;
    d["beats"] = beats;
    d["blocks"] = qr.size();
    d["in_flight"] = (uint64_t)qr.size() * p.qdepth; // every block's round is in flight at once
    d["sample_every"] = p.sample_every;
    d["sampled"] = res.sampled;
    d["clock"] = "globaltimer";
    d["phases"] = phase_lists(samples.data(), res.nsamples, NVME_GPUQ_NPHASES);
    return d;
}
#endif

} // namespace

void bind_cuda(py::module_ &m)
{
    m.attr("CRUN_PARAMS") = crun_params_list();
    m.attr("CRUN_DEFAULT_NDEVS") = CRUN_DEFAULT_NDEVS; // gpu-emu:// without ndev (crun_params.h)
    m.attr("CRUN_CORUN_SHARE") = CRUN_CORUN_SHARE;     // the co-runner's work: share of warmup + runtime
    m.def(
        "crun_params_check", [](py::kwargs kw) { (void)crun_from_kwargs(kw, false); },
        "Check cuda-run parameters against the engine table alone (no target, no GPU): ValueError naming one.");
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

    m.def("cuda_run", &cuda_run,
          "One cuda-run measurement (device-initiated I/O on gpu-emu://, pci:// or emu://?mode=thread); returns\n"
          "the raw result dict. Keywords: target, the engine table's parameters (CRUN_PARAMS), payload (pci://,\n"
          "emu://: host, or gpu which is refused with the reason), buf/buf_len (a caller-owned GPU buffer, device\n"
          "pointer e.g. from __cuda_array_interface__, that receives the I/O).");
    m.def(
        "cuda_target_check",
        [](const std::string &target, uint32_t ndevs) {
            char desc[NVME_CUDA_DESC_LEN] = {0}, err[CUDA_ERR_LEN] = {0};
            int rc = nvme_cuda_target_check(target.c_str(), ndevs ? ndevs : CRUN_DEFAULT_NDEVS, desc, sizeof(desc), err,
                                            sizeof(err));
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
