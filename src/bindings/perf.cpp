/* SPDX-License-Identifier: BSD-3-Clause */
// nvmelab._native perf part: the closed-loop engine (perf.h) on every target.
//
// PerfTarget(uri, backend=None, allow_write=False, need_write=False) opens a target;
// .info() describes it, .check(**cfg) validates a configuration without I/O,
// .run(**cfg) / .fill(**cfg) drive it. The GIL is released while the engine runs on
// its own native thread; the calling thread checks for signals every
// SIGNAL_POLL_MS, and on Ctrl-C sets the engine's stop flag, waits for the workers
// to drain and close their queues, and re-raises KeyboardInterrupt (no result).
#include "engine/perf.h"

#include <atomic>
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
#include "engine/kio.h"
#include "engine/perf_params.h"
#include "errors.h"

namespace py = pybind11;

namespace nvmelab {
namespace {

constexpr int SIGNAL_POLL_MS = 50;
constexpr double NS_PER_S = 1e9;

// A run's configuration: perf_config filled from the parameter table (perf_params.h) plus the CPU list.
struct Cfg {
    perf_config c{};
    std::vector<int> cpus;

    perf_config to_c(int *stop) const
    {
        if (!cpus.empty() && cpus.size() != c.nthreads)
            throw py::value_error("cpus: " + std::to_string(cpus.size()) + " CPU ids given for " +
                                  std::to_string(c.nthreads) + " threads");
        perf_config out = c;
        out.cpus = cpus.empty() ? nullptr : cpus.data();
        out.stop = stop;
        return out;
    }
};

// The per-I/O breakdown in the record layout of issue 24 (perf.h): the phases' p50/p99 in ns, null where
// nothing was stamped (sample_every 0: the breakdown off, "off" says by what; null when on).
py::dict breakdown_dict(const perf_result &r, const perf_config &c)
{
    static const char *const names[PERF_BD_NPHASES] = {"submit_ns", "doorbell_ns", "device_ns", "poll_ns",
                                                       "release_ns"};
    py::dict b;
    const uint64_t n = r.bd[PERF_BD_SUBMIT].count;
    b["sample_every"] = r.bd_sample_every;
    b["samples"] = r.bd_sample_every ? n : 0;
    b["clock"] = "clock_gettime";
    if (r.bd_sample_every)
        b["off"] = py::none();
    else
        b["off"] = c.lat ? "bd=0" : "lat=0 (no timed command to stamp)";
    for (uint32_t p = 0; p < PERF_BD_NPHASES; p++) {
        if (!r.bd_sample_every || !n) {
            b[names[p]] = py::none();
            continue;
        }
        py::dict q;
        q["p50"] = stats_hist_percentile(&r.bd[p], 50.0);
        q["p99"] = stats_hist_percentile(&r.bd[p], 99.0);
        b[names[p]] = q;
    }
    return b;
}

py::dict result_dict(const perf_result &r, const perf_config &c)
{
    py::dict d;
    d["ios"] = r.ios;
    d["reads"] = r.reads;
    d["writes"] = r.writes;
    d["bytes"] = r.bytes;
    d["errors"] = r.errors;
    d["iops"] = r.iops;
    d["bytes_per_s"] = r.bytes_per_s;
    d["window_s"] = r.window_s;
    d["cpu_s"] = r.cpu_s;
    d["proc_cpu_s"] = r.proc_cpu_s;
    py::list dev;
    for (uint32_t i = 0; i < r.ndevs; i++)
        dev.append(r.dev_ios[i]);
    d["dev_ios"] = dev;
    py::list thr;
    for (uint32_t i = 0; i < r.nthreads; i++) {
        const perf_thread_result &t = r.thr[i];
        py::dict td;
        td["cpu"] = t.cpu;
        td["cpu_last"] = t.cpu_last;
        td["affinity"] = std::string(t.affinity);
        td["nchans"] = t.nchans;
        td["ios"] = t.ios;
        td["errors"] = t.errors;
        td["polls"] = t.polls;
        td["empty_polls"] = t.empty_polls;
        td["window_s"] = t.window_s;
        td["cpu_s"] = t.cpu_s;
        thr.append(td);
    }
    d["threads"] = thr;
    if (c.lat && r.lat.count) {
        py::dict l;
        l["count"] = r.lat.count;
        l["sample_every"] = r.lat_sample_every; // one command in this many is timed, on average
        l["min"] = r.lat.min_ns;
        l["mean"] = static_cast<double>(r.lat.sum_ns) / static_cast<double>(r.lat.count);
        l["p50"] = stats_hist_percentile(&r.lat, 50.0);
        l["p90"] = stats_hist_percentile(&r.lat, 90.0);
        l["p99"] = stats_hist_percentile(&r.lat, 99.0);
        l["p999"] = stats_hist_percentile(&r.lat, 99.9);
        l["max"] = r.lat.max_ns;
        py::list buckets; // non-empty buckets: [low_ns, high_ns, count]
        for (uint32_t i = 0; i < STATS_NBUCKETS; i++)
            if (r.lat.bucket[i])
                buckets.append(py::make_tuple(stats_bucket_low(i),
                                              i == STATS_NBUCKETS - 1 ? r.lat.max_ns : stats_bucket_high(i),
                                              r.lat.bucket[i]));
        l["buckets"] = buckets;
        d["lat"] = l;
    } else {
        d["lat"] = py::none();
    }
    d["breakdown"] = breakdown_dict(r, c);
    d["verify_errors"] = r.verify_errors;
    if (r.verify_errors) {
        py::dict b;
        b["dev"] = r.first_bad_dev;
        b["lba"] = r.first_bad_lba;
        d["first_bad"] = b;
    } else {
        d["first_bad"] = py::none();
    }
    if (r.first_err < 0) {
        py::dict e;
        e["errno"] = -r.first_err;
        e["message"] = std::string(std::strerror(-r.first_err));
        d["first_error"] = e;
    } else if (r.first_err > 0) {
        py::dict e;
        e["sct"] = (r.first_err >> 8) & 0xff;
        e["sc"] = r.first_err & 0xff;
        e["dnr"] = (r.first_err & PERF_STATUS_DNR) != 0;
        d["first_error"] = e;
    } else {
        d["first_error"] = py::none();
    }
    return d;
}

class PerfTarget {
  public:
    PerfTarget(const std::string &uri, const std::string &backend, bool allow_write, bool need_write) : uri_(uri)
    {
        perf_target_opts o{};
        o.backend = backend.empty() ? nullptr : backend.c_str();
        o.allow_write = allow_write;
        o.need_write = need_write;
        char err[PERF_ERRLEN] = "";
        int rc;
        {
            py::gil_scoped_release nogil;
            rc = perf_target_open(uri.c_str(), &o, &t_, err, sizeof(err));
        }
        if (rc)
            raise_errno(rc, err[0] ? err : uri + ": " + std::strerror(-rc));
    }
    ~PerfTarget() { close(); }

    void close()
    {
        if (t_) {
            perf_target_close(t_);
            t_ = nullptr;
        }
    }

    perf_target *get()
    {
        if (!t_)
            throw py::value_error(uri_ + ": target is closed");
        return t_;
    }

    py::dict info()
    {
        perf_target *t = get();
        py::dict d;
        d["uri"] = uri_;
        d["backend"] = std::string(t->backend);
        d["ndevs"] = t->ndevs;
        d["profile"] = t->profile[0] ? py::object(py::str(t->profile)) : py::object(py::none());
        d["scale"] = t->profile[0] ? py::object(py::float_(t->scale)) : py::object(py::none());
        if (t->profile[0]) {
            py::dict md; // the profile at this scale; URI overrides not reflected
            md["lat_ns"] = t->model.lat_ns;
            md["dev_iops"] = t->model.dev_iops;
            md["queue_iops"] = t->model.queue_iops;
            md["dev_bw"] = t->model.dev_bw;
            d["model"] = md;
        } else {
            d["model"] = py::none();
        }
        py::list devs;
        for (uint32_t i = 0; i < t->ndevs; i++) {
            py::dict dv;
            dv["lba_size"] = t->dev[i].lba_size;
            dv["nlbas"] = t->dev[i].nlbas;
            dv["nsid"] = t->dev[i].nsid;
            dv["max_qdepth"] = t->dev[i].max_qdepth;
            dv["max_io_bytes"] = t->dev[i].max_io_bytes;
            devs.append(dv);
        }
        d["devices"] = devs;
        return d;
    }

    void check(const Cfg &cfg)
    {
        perf_config c = cfg.to_c(nullptr);
        char err[PERF_ERRLEN] = "";
        int rc = perf_config_check(get(), &c, err, sizeof(err));
        if (rc)
            raise_errno(rc, err);
    }

    py::dict run(const Cfg &cfg, bool fill)
    {
        perf_target *t = get();
        int stop = 0; // written with __atomic_store_n, read by the workers with __atomic_load_n
        perf_config c = cfg.to_c(&stop);
        auto res = std::make_unique<perf_result>();
        char err[PERF_ERRLEN] = "";
        int rc = run_interruptible(
            [&] {
                return fill ? perf_fill(t, &c, res.get(), err, sizeof(err))
                            : perf_run(t, &c, res.get(), err, sizeof(err));
            },
            [&] { __atomic_store_n(&stop, 1, __ATOMIC_RELEASE); }, SIGNAL_POLL_MS);
        if (rc)
            raise_errno(rc, err[0] ? err : std::string(std::strerror(-rc)));
        return result_dict(*res, c);
    }

    void write_lba(uint32_t dev, uint64_t lba, const py::bytes &data)
    {
        std::string buf = data;
        char err[PERF_ERRLEN] = "";
        int rc;
        {
            py::gil_scoped_release nogil;
            rc = perf_target_write_sync(get(), dev, lba, buf.data(), buf.size(), err, sizeof(err));
        }
        if (rc)
            raise_errno(rc, err);
    }

  private:
    std::string uri_;
    perf_target *t_ = nullptr;
};

// Keyword parsing derived from the parameter table: each name, its type, its range (perf_params.h).
Cfg cfg_from_kwargs(const py::kwargs &kw)
{
    Cfg cfg;
    perf_params_defaults(&cfg.c);
    for (auto item : kw) {
        std::string k = py::str(item.first);
        py::handle v = item.second;
        if (k == "cpus") {
            try {
                cfg.cpus = v.is_none() ? std::vector<int>{} : v.cast<std::vector<int>>();
            } catch (const py::cast_error &) {
                throw py::value_error("cpus: bad value " + std::string(py::repr(v)) + " (a list of CPU ids)");
            }
            continue;
        }
        if (perf_param_find(k.c_str()) < 0) {
            std::string known;
            for (size_t i = 0; i < PERF_NPARAMS; i++)
                known += std::string(i ? ", " : "") + perf_param_info(i)->name;
            throw py::value_error("unknown engine parameter '" + k + "' (known: " + known + ", cpus)");
        }
        if (v.is_none() || (PyBool_Check(v.ptr()) && perf_param_info(perf_param_find(k.c_str()))->type != PERF_PT_BOOL))
            throw py::value_error(k + "=" + std::string(py::repr(v)) + ": bad value");
        try {
#define PARSE_U32(field, lo, hi)  cfg.c.field = v.cast<uint32_t>()
#define PARSE_U64(field, lo, hi)  cfg.c.field = v.cast<uint64_t>()
#define PARSE_BOOL(field, lo, hi) cfg.c.field = v.cast<bool>()
#define PARSE_SECONDS(field, lo, hi)                                                                                   \
    do {                                                                                                               \
        double s_ = v.cast<double>();                                                                                  \
        if (!(s_ >= (lo) && s_ <= (hi))) /* named with the value as given (NaN and negatives included) */              \
            throw py::value_error(k + "=" + std::string(py::repr(v)) + ": must be " + std::to_string(lo) + ".." +      \
                                  std::to_string(hi) + " seconds");                                                    \
        cfg.c.field = static_cast<uint64_t>(s_ * NS_PER_S);                                                            \
    } while (0)
#define PARSE_PATTERN(field, lo, hi)                                                                                   \
    do {                                                                                                               \
        std::string n_ = v.cast<std::string>();                                                                        \
        if (perf_pattern_parse(n_.c_str(), &cfg.c.field))                                                              \
            throw py::value_error(k + "='" + n_ + "': unknown pattern (read, randread, write, randwrite, randrw)");    \
    } while (0)
#define X(name, type, field, lo, hi, def, doc)                                                                         \
    if (k == #name)                                                                                                    \
        PARSE_##type(field, lo, hi);
            PERF_PARAMS(X)
#undef X
        } catch (const py::cast_error &) {
            throw py::value_error(k + "=" + std::string(py::repr(v)) + ": bad value");
        }
    }
    char err[PERF_ERRLEN] = "";
    if (perf_params_check(&cfg.c, err, sizeof(err))) // the one range check (perf_params.h)
        throw py::value_error(err);
    return cfg;
}

// The table as Python sees it: nvmelab._native.PERF_PARAMS (nvmelab.engines.perf.PARAMS, the CLI, the docs).
py::list params_list()
{
    py::list out;
    for (size_t i = 0; i < PERF_NPARAMS; i++) {
        const struct perf_param_info *p = perf_param_info(i);
        py::dict d;
        d["name"] = p->name;
        d["doc"] = p->doc;
        switch (p->type) {
        case PERF_PT_U32:
        case PERF_PT_U64:
            d["type"] = "int";
            d["default"] = static_cast<unsigned long long>(p->def);
            d["min"] = static_cast<unsigned long long>(p->lo);
            d["max"] = p->type == PERF_PT_U64 ? py::object(py::none())
                                              : py::object(py::int_(static_cast<unsigned long long>(p->hi)));
            break;
        case PERF_PT_BOOL:
            d["type"] = "bool";
            d["default"] = p->def != 0;
            d["min"] = py::none();
            d["max"] = py::none();
            break;
        case PERF_PT_SECONDS:
            d["type"] = "seconds";
            d["default"] = p->def;
            d["min"] = p->lo;
            d["max"] = p->hi;
            break;
        case PERF_PT_PATTERN:
            d["type"] = "pattern";
            d["default"] = std::string(perf_pattern_name(static_cast<enum perf_pattern>(static_cast<int>(p->def))));
            d["min"] = py::none();
            d["max"] = py::none();
            break;
        }
        out.append(d);
    }
    return out;
}

} // namespace

void bind_perf(py::module_ &m)
{
    m.attr("PERF_PARAMS") = params_list();
    m.def(
        "perf_params_check", [](py::kwargs kw) { (void)cfg_from_kwargs(kw); },
        "Check run parameters against the table alone (no target): ValueError naming the parameter.");
    py::class_<PerfTarget>(m, "PerfTarget",
                           "A target opened for the closed-loop engine (file://, blk://, emu://, pci://).")
        .def(py::init([](const py::object &uri, const std::string &backend, bool allow_write, bool need_write) {
                 return new PerfTarget(nvmelab::uri_text(uri), backend, allow_write, need_write);
             }),
             py::arg("uri"), py::arg("backend") = "", py::arg("allow_write") = false, py::arg("need_write") = false)
        .def("info", &PerfTarget::info, "Backend, devices (LBA size, capacity, limits), profile and scale.")
        .def(
            "check", [](PerfTarget &t, py::kwargs kw) { t.check(cfg_from_kwargs(kw)); },
            "Validate engine parameters against this target without any I/O (ValueError names the parameter).")
        .def(
            "run", [](PerfTarget &t, py::kwargs kw) { return t.run(cfg_from_kwargs(kw), false); },
            "One timed run: rw, rwmix, iosize, qdepth, nqueues, nthreads, cpus, ndevs, runtime, warmup, "
            "lba_start, lba_count, align, batch, seed, verify, lat. Returns a dict of raw results.")
        .def(
            "fill", [](PerfTarget &t, py::kwargs kw) { return t.run(cfg_from_kwargs(kw), true); },
            "Write the verify stamp over the LBA range once (untimed).")
        .def("write_lba", &PerfTarget::write_lba, py::arg("dev"), py::arg("lba"), py::arg("data"),
             "Write whole LBAs synchronously outside any run (fault injection for tests).")
        .def("close", &PerfTarget::close)
        .def(
            "__enter__", [](PerfTarget &t) -> PerfTarget & { return t; }, py::return_value_policy::reference)
        .def("__exit__", [](PerfTarget &t, py::args) { t.close(); });
    m.def("perf_io_uring_available", &kio_io_uring_available, "True when io_uring works in this build and kernel.");
    m.attr("PERF_STAMP_BYTES") = PERF_STAMP_BYTES;
    m.attr("PERF_MAX_THREADS") = PERF_MAX_THREADS;
}

} // namespace nvmelab
