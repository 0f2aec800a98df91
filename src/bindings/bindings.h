// nvmelab._native: each part of the project binds its own types in one file.
// module.cpp calls these in order; a part that is not compiled in binds nothing.
#pragma once
#include <pybind11/pybind11.h>

namespace nvmelab {
void bind_driver(pybind11::module_ &m);   // driver.cpp: targets, controllers, namespaces, qpairs, DMA buffers, errors
void bind_perf(pybind11::module_ &m);     // perf.cpp: closed-loop engine (CPU and kernel paths)
void bind_blksum(pybind11::module_ &m);   // blksum.cpp: blkhash-compatible checksum
void bind_cuda(pybind11::module_ &m);     // cuda.cpp: device-initiated engine, gpu-emu
}  // namespace nvmelab
