/* SPDX-License-Identifier: BSD-3-Clause */
// nvmelab._native: each part of the project binds its own types in one file.
// module.cpp calls these in order; a part that is not compiled in binds nothing.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <pybind11/pybind11.h>
#include <thread>

namespace nvmelab {
void bind_driver(pybind11::module_ &m);  // driver.cpp: targets, controllers, namespaces, qpairs, DMA buffers, errors
void bind_perf(pybind11::module_ &m);    // perf.cpp: closed-loop engine (CPU and kernel paths)
void bind_blksum(pybind11::module_ &m);  // blksum.cpp: blkhash-compatible checksum
void bind_cuda(pybind11::module_ &m);    // cuda.cpp: device-initiated engine, gpu-emu
void bind_devices(pybind11::module_ &m); // devices.cpp: the driver's PCI in-use check
void bind_gpuq(pybind11::module_ &m);    // gpuq.cpp: the CPU stand-in of the device-initiated engine
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
} // namespace nvmelab
