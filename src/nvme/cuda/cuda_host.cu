/* SPDX-License-Identifier: BSD-3-Clause */
// cuda_host.cu — host-side pieces of libnvme_cuda that are not one engine: the one CUDA-error -> errno
// converter (the CUDA name and text go into the message), host watchdogs that poll a stream or an event
// with a deadline instead of synchronizing, device count and info, buffer sizing, gpu-emu:// URI checks,
// and the doorbell mapping of a real controller's BAR0 (cudaHostRegisterIoMemory).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <thread>

#include "nvme/cuda/cuda_api.h"
#include "nvme/cuda/gpu_emu.h"
#include "nvme/cuda/nvme_gpuq.h"

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

extern "C" int nvme_cuda_device_count(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t ce = cudaGetDeviceCount(&n);
    if (ce != cudaSuccess) {
        if (why && whylen)
            snprintf(why, whylen, "no CUDA device (%s: %s)", cudaGetErrorName(ce), cudaGetErrorString(ce));
        cudaGetLastError(); // clear the sticky-free error so later calls start clean
        return 0;
    }
    if (n <= 0 && why && whylen)
        snprintf(why, whylen, "no CUDA device");
    else if (why && whylen)
        why[0] = 0;
    return n;
}

extern "C" int nvme_cuda_device_info(int dev, nvme_cuda_devinfo *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    cudaDeviceProp p;
    cudaError_t ce = cudaGetDeviceProperties(&p, dev);
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "cudaGetDeviceProperties", err, errlen);
    snprintf(out->name, sizeof(out->name), "%s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sms = p.multiProcessorCount;
    out->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    out->mem_bytes = p.totalGlobalMem;
    out->pci_bus = p.pciBusID;
    out->pci_device = p.pciDeviceID;
    out->pci_domain = p.pciDomainID;
    cudaDriverGetVersion(&out->driver_version);
    cudaRuntimeGetVersion(&out->runtime_version);
    return 0;
}

extern "C" int nvme_cuda_rw_parse(const char *name, nvme_cuda_rw *out)
{
    static const struct {
        const char *name;
        nvme_cuda_rw rw;
    } t[] = {{"read", NVME_CUDA_READ},
             {"randread", NVME_CUDA_RANDREAD},
             {"write", NVME_CUDA_WRITE},
             {"randwrite", NVME_CUDA_RANDWRITE}};
    for (const auto &e : t)
        if (name && !strcmp(name, e.name)) {
            *out = e.rw;
            return 0;
        }
    return -EINVAL;
}

extern "C" size_t nvme_cuda_buf_size(uint32_t iosize, uint32_t qdepth, uint32_t nqueues, uint32_t ndevs,
                                     uint64_t *stride)
{
    const uint64_t page = NVME_GPUQ_PAGE_SIZE;
    const uint64_t span = ((uint64_t)iosize + page - 1u) / page * page;
    const uint64_t st = span + ((uint64_t)iosize > 2u * page ? page : 0u); // + a PRP list page when needed
    if (stride)
        *stride = st;
    return (size_t)((uint64_t)ndevs * nqueues * qdepth * st + page);
}

extern "C" int nvme_cuda_target_check(const char *target, uint32_t ndev_default, char *desc, size_t desclen, char *err,
                                      size_t errlen)
{
    gemu e{};
    int rc = gemu_parse_uri(target, ndev_default, &e, err, errlen);
    if (!rc && desc && desclen)
        gemu_describe(&e, desc, desclen);
    return rc;
}

extern "C" int nvme_cuda_map_bar(void *bar, size_t len, volatile void **dev_bar, char *err, size_t errlen)
{
    *dev_bar = NULL;
    if (!bar || !len || ((uintptr_t)bar % NVME_GPUQ_PAGE_SIZE)) {
        snprintf(err, errlen, "BAR mapping: %p (%zu bytes) is not a page-aligned region", bar, len);
        return -EINVAL;
    }
    cudaError_t ce = cudaHostRegister(bar, len, cudaHostRegisterIoMemory | cudaHostRegisterMapped);
    if (ce == cudaErrorNotSupported || ce == cudaErrorInvalidValue) {
        gemu_cuda_errno((int)ce, "cudaHostRegister(BAR0, IoMemory)", err, errlen);
        return -ENOTSUP;
    }
    if (ce != cudaSuccess)
        return gemu_cuda_errno((int)ce, "cudaHostRegister(BAR0, IoMemory)", err, errlen);
    void *d = NULL;
    ce = cudaHostGetDevicePointer(&d, bar, 0);
    if (ce != cudaSuccess) {
        int rc = gemu_cuda_errno((int)ce, "cudaHostGetDevicePointer(BAR0)", err, errlen);
        cudaHostUnregister(bar); // undo the registration made above
        return rc;
    }
    *dev_bar = d;
    return 0;
}

extern "C" int nvme_cuda_unmap_bar(void *bar, char *err, size_t errlen)
{
    cudaError_t ce = cudaHostUnregister(bar);
    return ce == cudaSuccess ? 0 : gemu_cuda_errno((int)ce, "cudaHostUnregister(BAR0)", err, errlen);
}
