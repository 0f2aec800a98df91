/* SPDX-License-Identifier: BSD-3-Clause */
// gemu_host.cu — host helpers of the GPU parts, one layer below the engine so that the GPU emulator and the
// cuda-run engine share them: the one CUDA-error -> errno converter (the CUDA name and text go into the
// message) and host watchdogs that poll a stream or an event with a deadline instead of synchronizing.
// Declared in gpu_emu.h.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
#include <thread>

#include "nvme/emu/gpu/gpu_emu.h"

#define CUDA_HOST_POLL std::chrono::microseconds(200) // watchdog poll interval

int gemu_cuda_errno(int cuda_err, const char *what, char *err, size_t errlen)
{
    cudaError_t e = (cudaError_t)cuda_err;
    if (err && errlen)
        snprintf(err, errlen, "%s: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
    switch (e) {
    case cudaSuccess:
        return 0;
    case cudaErrorMemoryAllocation:
        return -ENOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
        return -ENODEV;
    default:
        return -EIO;
    }
}

uint64_t gemu_steady_ns(void)
{
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// One watchdog for streams and events: query until done, an error, or the deadline.
template <typename Q>
static int cuda_host_wait(Q query, uint64_t deadline_ns, const char *what, char *err, size_t errlen)
{
    for (;;) {
        cudaError_t ce = query();
        if (ce == cudaSuccess)
            return 0;
        if (ce != cudaErrorNotReady)
            return gemu_cuda_errno((int)ce, what, err, errlen);
        if (gemu_steady_ns() >= deadline_ns) {
            if (err && errlen)
                snprintf(err, errlen, "%s: still running at its deadline (watchdog); its memory is not freed", what);
            return -ETIMEDOUT;
        }
        std::this_thread::sleep_for(CUDA_HOST_POLL);
    }
}

int gemu_wait_stream(void *stream, uint64_t deadline_ns, const char *what, char *err, size_t errlen)
{
    return cuda_host_wait([&] { return cudaStreamQuery((cudaStream_t)stream); }, deadline_ns, what, err, errlen);
}

int gemu_wait_event(void *event, uint64_t deadline_ns, const char *what, char *err, size_t errlen)
{
    return cuda_host_wait([&] { return cudaEventQuery((cudaEvent_t)event); }, deadline_ns, what, err, errlen);
}
