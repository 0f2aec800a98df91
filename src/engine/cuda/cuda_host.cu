/* SPDX-License-Identifier: BSD-3-Clause */
// cuda_host.cu — host-side pieces of the cuda-run engine that are not the run itself: device count and
// info, pattern names, buffer sizing, gpu-emu:// URI checks, and the doorbell mapping of a real
// controller's BAR0 (cudaHostRegisterIoMemory). The CUDA-error -> errno converter and the watchdogs live
// one layer down, with the GPU emulator (nvme/emu/gpu/gemu_host.cu).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <thread>

#include "engine/cuda/cuda_api.h"
#include "nvme/emu/gpu/gpu_emu.h"
#include "nvme/nvme_gpuq.h"

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
