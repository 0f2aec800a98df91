/* SPDX-License-Identifier: BSD-3-Clause */
// nvmelab._native gpuq part: gpuq_standin_run(), the CPU stand-in of the cuda-run engine
// (engine/gpuq_standin.h) on any target the driver opens, for hosts without a GPU. The GIL is released
// while it runs; Ctrl-C stops it and raises KeyboardInterrupt (no result).
#include <atomic>
#include <cerrno>
#include <cstring>
#include <pybind11/stl.h>
#include <string>
#include <vector>

#include "bindings.h"
#include "engine/gpuq_standin.h"
#include "errors.h"
#include "nvme/emu/model_keys.h"
#include "nvme/nvme_gpuq.h"
#include "nvme/nvme_gpuq_match.h"
#include "nvme/uri.h"

namespace py = pybind11;

namespace nvmelab {

void bind_gpuq(py::module_ &m)
{
    m.def(
        "bd_sample_every", [](uint32_t qdepth) { return nvme_bd_sample_every(qdepth); }, py::arg("qdepth"),
        "The per-I/O breakdown's sampling period at a queue depth (nvme/bd_sample.h): the default of the cuda-run "
        "engine's and its stand-in's sample_every, and what the perf engine's breakdown stamps on average.");
    m.def(
        "gpuq_standin_run",
        [](const std::string &uri, uint32_t nqueues, uint32_t qdepth, uint32_t iosize, double runtime, double warmup,
           uint64_t seed, int64_t sample_every_arg, double timeout, uint32_t idle_pair, const std::string &match,
           uint64_t rounds, uint32_t unordered, bool fence, bool readback) {
            char err[NVME_ERRLEN] = {0};
            if (sample_every_arg > (int64_t)UINT32_MAX)
                throw py::value_error("sample_every=" + std::to_string(sample_every_arg) + ": at most 2^32-1");
            // -1 (the default): the records' rule at this queue depth (nvme/bd_sample.h), as cuda-run's default
            const uint32_t sample_every =
                sample_every_arg < 0 ? nvme_bd_sample_every(qdepth) : static_cast<uint32_t>(sample_every_arg);
            const int mode = nvme_gpuq_match_parse(match.c_str());
            if (mode < 0)
                throw py::value_error("match='" + match + "': one of cid, positional, scan");
            if (!(timeout >= 0) || timeout > 3600.0)
                throw py::value_error("timeout=" + std::to_string(timeout) + ": seconds in 0..3600 (0: the default)");
            // the per-LBA error rule of the target (err_every/err_status), parsed by the emulators' parser
            nvme_cr_inj inj{};
            {
                nvme_uri *u = nullptr;
                if (nvme_uri_parse(uri.c_str(), &u, err, sizeof err) < 0)
                    throw py::value_error("uri '" + uri + "': " + err);
                int irc = nvme_emu_inj_from_uri("", u, &inj, err, sizeof err);
                nvme_uri_free(u);
                if (irc < 0)
                    throw py::value_error("uri '" + uri + "': " + err);
            }
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
            cfg.timeout_ns = timeout > 0 ? (uint64_t)(timeout * 1e9) : 0;
            cfg.idle_pair = idle_pair;
            cfg.match = mode;
            cfg.rounds = rounds;
            cfg.unordered = unordered;
            cfg.no_fence = !fence;
            cfg.no_readback = !readback;
            cfg.inj = inj;
            const unsigned ndevs = nvme_target_nctrl(t);
            std::vector<uint64_t> beats((size_t)ndevs * nqueues, 0);
            std::vector<uint32_t> samples;
            if (sample_every) {
                samples.assign((size_t)GPUQ_STANDIN_SAMPLE_CAP * NVME_GPUQ_NPHASES, 0);
                cfg.sample_every = sample_every;
                cfg.sample_cap = GPUQ_STANDIN_SAMPLE_CAP;
                cfg.samples = samples.data();
            }
            cfg.beats = beats.data();
            gpuq_standin_result res{};
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
            d["submitted"] = res.submitted;
            d["completed"] = res.completed;
            d["beats"] = py::list(py::cast(std::vector<uint64_t>(beats.begin(), beats.begin() + res.npairs)));
            d["sample_every"] = sample_every;
            d["sampled"] = res.sampled;
            d["round_ns_sum"] = res.round_ns_sum;
            // phases of the sampled commands, one list per phase (ns), in the order of nvme_gpuq.h
            d["phases"] = phase_lists(samples.data(), res.nsamples, NVME_GPUQ_NPHASES);
            d["match"] = nvme_gpuq_match_name(mode);
            d["looks"] = res.looks;
            d["cq_bytes"] = res.cq_bytes;
            d["stale"] = res.stale;
            d["foreign"] = res.foreign;
            d["misattributed"] = res.misattributed;
            d["expected_errors"] = res.expected_errors;
            return d;
        },
        py::arg("uri"), py::arg("nqueues"), py::arg("qdepth"), py::arg("iosize"), py::arg("runtime"),
        py::arg("warmup") = 0.0, py::arg("seed") = 1, py::arg("sample_every") = -1, py::arg("timeout") = 0.0,
        py::arg("idle_pair") = 0, py::arg("match") = "cid", py::arg("rounds") = 0, py::arg("unordered") = 0,
        py::arg("fence") = true, py::arg("readback") = true,
        "The CPU stand-in of cuda-run (engine/gpuq_standin.h): lock-step rounds of qdepth reads on nqueues queue "
        "pairs of every controller of `uri`, one CPU thread, for warmup + runtime seconds; a dict of ios, rounds, "
        "errors, first_status, window_s, ndevs, the self-checks' counts (submitted, completed, beats: rounds per "
        "pair), with sample_every (0: off, -1: nvme/bd_sample.h's rule) the sampled commands' phases (phases: submit, "
        "doorbell, device, poll, release "
        "lists in ns), and the match counters (looks, cq_bytes, stale, foreign, misattributed, expected_errors). "
        "timeout: per-completion deadline in s (0: the default). idle_pair: fault injection for tests, pair "
        "idle_pair - 1 never runs. match: cid | positional | scan; rounds > 0: exactly that many rounds per pair; "
        "unordered, fence, readback: the missing-fence model (nvme/gpuq_ctrl.h). Not a GPU measurement.");
}

} // namespace nvmelab
