/* SPDX-License-Identifier: BSD-3-Clause */
// nvmelab._native: each part of the project binds its own types in one file.
// module.cpp calls these in order; a part that is not compiled in binds nothing.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <pybind11/pybind11.h>
#include <string>
#include <thread>

namespace nvmelab {
void bind_driver(pybind11::module_ &m);  // driver.cpp: targets, controllers, namespaces, qpairs, DMA buffers, errors
void bind_perf(pybind11::module_ &m);    // perf.cpp: closed-loop engine (CPU and kernel paths)
void bind_blksum(pybind11::module_ &m);  // blksum.cpp: blkhash-compatible checksum
void bind_cuda(pybind11::module_ &m);    // cuda.cpp: device-initiated engine, gpu-emu
void bind_devices(pybind11::module_ &m); // devices.cpp: the driver's PCI in-use check
void bind_gpuq(pybind11::module_ &m);    // gpuq.cpp: the CPU stand-in of the device-initiated engine
void bind_uri(pybind11::module_ &m);     // uri.cpp: the driver's target-URI parser
} // namespace nvmelab

namespace nvmelab {
/* Run a blocking native job (returns an int status) on a worker thread while the calling thread waits
 * with the GIL released, checking for Python signals every poll_ms. On a signal (Ctrl-C), `cancel()` asks
 * the job to stop, the job is waited for, and the pending Python exception is raised: no partial result
 * ever reaches Python. Used by the engines (perf, cuda) whose runs last seconds. */
template <class Job, class Cancel> int run_interruptible(Job &&job, Cancel &&cancel, int poll_ms = 100)
{
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int rc = 0;
    std::thread runner([&] {
        int r = job();
        std::lock_guard<std::mutex> g(mu);
        rc = r;
        done = true;
        cv.notify_all();
    });
    bool interrupted = false;
    for (;;) {
        {
            pybind11::gil_scoped_release nogil;
            std::unique_lock<std::mutex> lk(mu);
            cv.wait_for(lk, std::chrono::milliseconds(poll_ms), [&] { return done; });
            if (done)
                break;
        }
        if (PyErr_CheckSignals() != 0) {
            interrupted = true;
            cancel();
            pybind11::gil_scoped_release nogil;
            std::unique_lock<std::mutex> lk(mu);
            cv.wait(lk, [&] { return done; });
            break;
        }
    }
    {
        pybind11::gil_scoped_release nogil;
        runner.join();
    }
    if (interrupted)
        throw pybind11::error_already_set(); // KeyboardInterrupt (or what the handler raised)
    return rc;
}

/* The per-I/O breakdown's samples (n rows of nphases phase values, row-major, as the engines store them)
 * as one list of ints per phase, the shape nvmelab.results.checks.breakdown takes. */
inline pybind11::list phase_lists(const uint32_t *samples, uint32_t n, uint32_t nphases)
{
    pybind11::list out;
    for (uint32_t ph = 0; ph < nphases; ph++) {
        pybind11::list col;
        for (uint32_t k = 0; k < n; k++)
            col.append(samples[(size_t)k * nphases + ph]);
        out.append(col);
    }
    return out;
}

/* The text of a target URI argument: a str of valid UTF-8 without NUL, else one ValueError/TypeError
 * naming the problem (instead of a pybind11 signature dump, or a URI silently cut at the NUL). */
inline std::string uri_text(const pybind11::handle &h, const char *what = "uri")
{
    if (!PyUnicode_Check(h.ptr()))
        throw pybind11::type_error(std::string(what) + ": expected a str, got " +
                                   std::string(Py_TYPE(h.ptr())->tp_name));
    Py_ssize_t n = 0;
    const char *p = PyUnicode_AsUTF8AndSize(h.ptr(), &n);
    if (!p) {
        PyErr_Clear();
        throw pybind11::value_error(std::string(what) +
                                    ": not valid text (it holds characters that cannot be encoded as UTF-8, "
                                    "e.g. undecodable bytes from a file name)");
    }
    std::string s(p, size_t(n));
    size_t nul = s.find('\0');
    if (nul != std::string::npos)
        throw pybind11::value_error(std::string(what) + ": contains a NUL character at offset " + std::to_string(nul) +
                                    " ('" + s.substr(0, nul) + "' before it)");
    return s;
}
} // namespace nvmelab
