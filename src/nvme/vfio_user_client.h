/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vfio_user_client.h — the vfio-user:// backend: NVMe controllers served by a vfio-user server (ours,
 * `nvmelab-serve`, or any other, e.g. SPDK's nvmf_tgt with a VFIOUSER transport) driven by this driver.
 *
 *   vfio-user:///abs/path/ctrl0.sock[?timeout_ms=N]   one controller: one UNIX socket
 *   vfio-user:///abs/dir[?timeout_ms=N]               every DIR/ctrl<i>.sock, i = 0, 1, ... in order
 *
 * Purpose: one connection per controller (the protocol's one client per device). Bring-up per socket:
 * connect, VERSION (major 0), DEVICE_GET_INFO (a PCI device), config space (region 7: an NVMe class
 * code; memory space and bus mastering enabled), BAR0 (region 0: its size and the sparse-mmap areas of
 * the doorbells). The controller is then a struct nvme_bar (bar.h) like any other: base is an
 * anonymous window of BAR0's size with the server's doorbell page mapped shared over its area; the
 * bar's ops send register accesses below the doorbells as REGION_READ / REGION_WRITE, and doorbell
 * stores land in the shared page, which the server polls (REGION_WRITE only when the server offered no
 * mmap area). DMA: each object of the target (dma.h, NVME_DMA_VFIO_USER) is one memfd handed to every
 * connection with DMA_MAP at its IOVA, and taken back with DMA_UNMAP before its memory is released.
 *
 * Key functions: nvme_vfu_open / nvme_vfu_close / nvme_vfu_count / nvme_vfu_bar (target.c's backend),
 * nvme_vfu_dma_map / nvme_vfu_dma_unmap (the DMA domain's fd hooks).
 *
 * Caveats: every request waits for its reply at most timeout_ms (default VFU_DEFAULT_TIMEOUT_MS,
 * vfio_user.h); a
 * request and its reply are one critical section per connection (admin and DMA allocation may come
 * from different threads). A server that closed the socket makes requests fail with -ENXIO, one that
 * stalled with -ETIMEDOUT; after either the connection is marked broken and every later request fails
 * at once with the same code (register reads then return all-ones, as a PCI function that is gone).
 * Register accesses through the bar ops cannot return an error: their failures go to nvme_log, one line
 * per connection naming the socket and the command. Interrupts are not used (the driver polls).
 * Every connection maps every DMA object (nvme_vfu_dma_map). nvmelab-serve keeps one address space for
 * the DMA maps of all its controllers (VA == IOVA) and shares a map that several connections make of the
 * same memory; two client processes on one server collide there, since every client hands out IOVAs from
 * NVME_VFU_IOVA_BASE: one client process per nvmelab-serve at a time.
 */
#ifndef NVME_VFIO_USER_CLIENT_H
#define NVME_VFIO_USER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "nvme/bar.h"
#include "nvme/uri.h"

#define NVME_VFU_SCHEME    "vfio-user"
#define NVME_VFU_MAX_CTRLS 64u /* sockets one directory may hold (ctrl0.sock .. ctrl63.sock) */

struct nvme_vfu_set; /* the connections of one vfio-user:// target */

/* Connect to every socket u names and check each is an NVMe controller; err names the socket and what
 * was wrong on refusal (-EINVAL bad URI, -ENOENT no such socket, -ECONNREFUSED nobody listening,
 * -EPROTO not a vfio-user server, -ENODEV not a PCI NVMe device, -ETIMEDOUT, -ENXIO). */
int nvme_vfu_open(const struct nvme_uri *u, struct nvme_vfu_set **out, char *err, size_t errlen);
/* Unmaps the doorbell windows and closes the sockets (void * so it fits target.backend_close). Call
 * after every controller is detached and every DMA object released. */
void nvme_vfu_close(void *set);
unsigned nvme_vfu_count(const struct nvme_vfu_set *s);
const struct nvme_bar *nvme_vfu_bar(const struct nvme_vfu_set *s, unsigned i);
/* The socket path of controller i ("" when out of range). */
const char *nvme_vfu_path(const struct nvme_vfu_set *s, unsigned i);

/* DMA_MAP [iova, iova + len) backed by fd (offset 0) on every connection; on a failure the maps already
 * made are undone. DMA_UNMAP on every connection (first error returned, all tried; a broken connection is
 * skipped: its server dropped the maps with the client). ctx is the set. */
int nvme_vfu_dma_map(void *set, int fd, uint64_t iova, size_t len);
int nvme_vfu_dma_unmap(void *set, uint64_t iova, size_t len);

#endif /* NVME_VFIO_USER_CLIENT_H */
