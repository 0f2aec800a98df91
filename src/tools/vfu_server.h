/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vfu_server.h — the vfio-user server of `nvmelab-serve`: the controllers of an emu:// target served as
 * PCI NVMe functions over UNIX sockets (protocol: nvme/vfio_user.h, whose doc block says what is served
 * and what is not).
 *
 * Two layers:
 *   - struct vfu_dev: one served controller and the state of its one client (negotiated version, DMA
 *     maps, config space). vfu_dev_handle() takes one received message and produces the reply, with no
 *     socket involved (the fuzz harness and the tests drive it directly); vfu_dev_disconnect() undoes
 *     everything a client did (controller reset as a power cycle, DMA windows unmapped, state back to
 *     power-on). vfu_dev_serve() runs the receive/handle/send loop on one connected socket.
 *   - struct vfu_server: an emu:// URI opened with mode=thread, one listening socket and one thread per
 *     controller, each serving one client at a time (a second client waits in the listen backlog until
 *     the first one leaves).
 *
 * Key functions: vfu_dev_open/close/handle/disconnect/serve; vfu_server_open/start/stop/close, vfu_server_path.
 *
 * Caveats:
 *   - The emu:// target must run mode=thread (its service thread polls the doorbell page the client
 *     writes); vfu_server_open adds mode=thread when absent and refuses mode=inline.
 *   - DMA maps (the IOVA rule): every client has an IOVA space of its own (its controller's own IOMMU domain,
 *     nvme_emu_ctrl_dma_private, as every vfio container has). A region is mapped into this process at
 *     VA == IOVA when that placement is possible (our driver's and SPDK's IOVAs are their own addresses) and
 *     registered as an identity window; when it is not (an IOVA below VFU_MIN_IOVA, or the range taken here:
 *     QEMU's guest-physical addresses from 0, or the same IOVAs mapped by another connection) it is mapped
 *     wherever mmap puts it and registered as a translated window (iova -> va, nvme_emu_ctrl_dma_map_at).
 *     A DMA_MAP overlapping a region of the same client is refused with EEXIST; another client's regions
 *     are no concern (QEMU remaps guest memory on each of its devices' connections in its own order).
 *   - Every DMA region is mapped readable and writable (the emulator's IOMMU has no per-direction
 *     permission); an fd that cannot be mapped so is refused (EACCES). A client that shrinks its file
 *     under a live mapping can make this process take SIGBUS: clients are trusted that far.
 *   - Interrupts (vfu_irq.c): SET_IRQS gives an eventfd per MSI-X vector (or INTx's one); whenever the
 *     emulator posts completions to a CQ with interrupts enabled it calls this server's hook with the CQ's
 *     vector, which writes that eventfd (MSI-X when the client turned that index on, else INTx, automasked
 *     as VFIO's). Mask/unmask (DATA_NONE, DATA_BOOL) are honoured; an interrupt raised while its vector is
 *     masked or has no eventfd is kept pending and delivered at the unmask or when an eventfd comes, and
 *     the PBA reads those pending bits. The MSI-X table's own Mask bits are kept but not consulted (QEMU
 *     emulates the table itself and masks in its own MSI-X core). A client that sets no eventfd (our
 *     driver, SPDK) polls: nothing is signalled. Reset and the client's departure close every eventfd.
 *   - Functions return 0 or a negative errno; vfu_server_open writes one message into err.
 */
#ifndef NVMELAB_TOOLS_VFU_SERVER_H
#define NVMELAB_TOOLS_VFU_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/vfio_user.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nvme_emu_set;

#define VFU_CFG_SIZE      4096u     /* config space region (PCI Express: extended space, all zero past 0x100) */
#define VFU_MAX_DMA_MAPS  1024u     /* DMA regions one client may have mapped at once (ENOSPC beyond) */
#define VFU_MIN_IOVA      0x10000u  /* DMA maps below are never placed at VA == IOVA (translated): mmap_min_addr */
#define VFU_POLL_MS       100       /* how often blocked server threads look at the stop flag */
#define VFU_PCI_DEVICE_ID 0x0010u   /* with the emulator's vendor id (NVME_EMU_VID): QEMU's NVMe function */
#define VFU_NVME_CLASS    0x010802u /* mass storage, NVM, NVMe I/O controller */

/* The reply vfu_dev_handle() produced: len == 0 when none is to be sent (VFU_F_NO_REPLY). msg points
 * into the device (valid until the next call); fds are the device's own (never closed by the caller). */
struct vfu_reply {
    const void *msg;
    size_t len;
    const int *fds;
    unsigned nfds;
};

struct vfu_dev;

/* Serve controller ctrl of set (which must run mode=thread and outlive the device). -EINVAL, -ENOMEM. */
int vfu_dev_open(struct nvme_emu_set *set, unsigned ctrl, struct vfu_dev **out);
/* vfu_dev_disconnect(), then free. NULL is a no-op. */
void vfu_dev_close(struct vfu_dev *d);

/* Handle one message of len bytes (header included) that came with fds[0..nfds); every fd is closed
 * here, whatever the outcome (a DMA region stays mapped without it). Returns 0 with the reply (an
 * error reply for a bad command, unknown number, bad size, region or offset) in *out, or -EPROTO when the
 * message is malformed beyond a reply (header size field disagreeing with len or below the header, a
 * reply-type message from the client): the connection is then to be closed. */
int vfu_dev_handle(struct vfu_dev *d, const void *msg, size_t len, int *fds, unsigned nfds, struct vfu_reply *out);

/* The client went away: controller reset (queues deleted, commands dropped, registers at reset values),
 * every DMA region of this client unregistered (nvme_emu_dma_unmap, which waits for the command path)
 * and unmapped, config space and version state back to power-on. */
void vfu_dev_disconnect(struct vfu_dev *d);

/* Receive, handle, reply on connected socket conn until the client closes it, sends something
 * malformed, a reply cannot be sent within timeout_ms, or *stop becomes true (looked at every
 * VFU_POLL_MS). Then vfu_dev_disconnect(); conn is left open for the caller. Returns 0 on a clean end
 * (peer closed or stop), else the negative errno that ended it. */
int vfu_dev_serve(struct vfu_dev *d, int conn, int timeout_ms, const atomic_bool *stop);

/* Mapped DMA regions of the current client (tests). */
unsigned vfu_dev_dma_count(const struct vfu_dev *d);

/* ---- the server ---- */
struct vfu_server;

/* Open the emu:// target uri (mode=thread added when absent) and create one listening socket per
 * controller: with dir, DIR/ctrl<i>/cntrl (the directory made when absent and removed at close when empty:
 * SPDK's client takes traddr = DIR/ctrl<i> and connects to traddr/cntrl); else socket_path (only for one
 * controller). An existing socket file at
 * a path is replaced; any other file there is refused. -EINVAL (bad URI or arguments),
 * -errno of socket/bind/listen; err names what was wrong. */
int vfu_server_open(const char *uri, const char *dir, const char *socket_path, int timeout_ms, struct vfu_server **out,
                    char *err, size_t errlen);
unsigned vfu_server_count(const struct vfu_server *s);
const char *vfu_server_path(const struct vfu_server *s, unsigned i);
/* The emu:// set being served (tests: fault injection, statistics). */
struct nvme_emu_set *vfu_server_set(const struct vfu_server *s);
/* Start one serving thread per socket. -errno of pthread_create; vfu_server_close() then stops the ones started. */
int vfu_server_start(struct vfu_server *s, char *err, size_t errlen);
/* Stop every serving thread and close every connection (each client disconnected as above); the sockets and
 * the emu:// target stay until vfu_server_close (which stops first when this was not called). NULL: no-op. */
void vfu_server_stop(struct vfu_server *s);
/* Stop every thread, close every connection (each client disconnected as above), unlink every socket,
 * close the emu:// target, free. NULL is a no-op. */
void vfu_server_close(struct vfu_server *s);

/* ---- config space (vfu_pci.c) ---- */
struct vfu_pci_cfg {
    uint8_t v[VFU_CFG_SIZE];     /* what reads return */
    uint8_t wmask[VFU_CFG_SIZE]; /* bits a write may change */
};
/* MSI-X: VFU_MSIX_VECTORS vectors (the most an 11-bit Table Size allows), table and PBA in BAR0 past the
 * emulator's registers and doorbells. The table is kept (reads return what was written, Mask bits set at
 * reset); vectors are signalled through the eventfds of SET_IRQS (vfu_irq.c), the PBA reads their pending bits. */
#define VFU_MSIX_VECTORS    2048u
#define VFU_MSIX_ENTRY      16u /* bytes of one table entry */
#define VFU_MSIX_TABLE_SIZE (VFU_MSIX_VECTORS * VFU_MSIX_ENTRY)
#define VFU_MSIX_PBA_SIZE   (VFU_MSIX_VECTORS / 8u)
/* Power-on config space of an NVMe function with a 64-bit memory BAR0 of bar0_size (a power of two), its
 * MSI-X table at BAR0 offset msix_off and its PBA right after the table. */
void vfu_pci_cfg_init(struct vfu_pci_cfg *c, uint64_t bar0_size, uint64_t msix_off, uint16_t vid, uint16_t ssvid);
/* Read/write count bytes at off (the caller checked off + count <= VFU_CFG_SIZE). Writes keep read-only
 * bits, so writing all-ones to BAR0 reads back its size mask. */
void vfu_pci_cfg_read(const struct vfu_pci_cfg *c, uint32_t off, void *buf, uint32_t count);
void vfu_pci_cfg_write(struct vfu_pci_cfg *c, uint32_t off, const void *buf, uint32_t count);

/* ---- interrupts (vfu_irq.c) ---- */
struct vfu_irq_vec {
    int fd;       /* eventfd the client gave, -1: none */
    bool masked;  /* VFIO mask (INTx: automasked once delivered) */
    bool pending; /* raised while masked or without eventfd: delivered at unmask / when an eventfd comes */
};
struct vfu_irqs {
    pthread_mutex_t lock;  /* the emulator's hook (service thread) against SET_IRQS (connection thread) */
    bool intx_on, msix_on; /* index turned on by an eventfd trigger, off by DATA_NONE count 0 */
    struct vfu_irq_vec intx;
    struct vfu_irq_vec msix[VFU_MSIX_VECTORS];
};
void vfu_irqs_init(struct vfu_irqs *q);
/* Every eventfd closed, both indexes off, masks and pending bits cleared. */
void vfu_irqs_reset(struct vfu_irqs *q);
void vfu_irqs_destroy(struct vfu_irqs *q);
/* One SET_IRQS the caller checked (index INTx or MSI-X, vectors in range, fds present only with DATA_EVENTFD and
 * then count of them or none, data holding count bools with DATA_BOOL, count 0 only as DATA_NONE|TRIGGER). The
 * fds kept are set to -1 in fds[]. 0 or a positive errno for the error reply (ENOTSUP: an eventfd for mask or
 * unmask). */
int vfu_irqs_set(struct vfu_irqs *q, const struct vfu_irq_set *s, const uint8_t *data, int *fds, unsigned nfds);
/* The emulator's hook: the CQ of vector iv got completions. */
void vfu_irqs_raise(struct vfu_irqs *q, uint16_t iv);
/* The PBA's 64 pending bits of vectors first..first+63. */
uint64_t vfu_irqs_pba(struct vfu_irqs *q, uint32_t first);

/* ---- VERSION's JSON (vfu_json.c) ---- */
struct vfu_caps {
    uint64_t max_msg_fds;        /* VFU_MAX_FDS when absent */
    uint64_t max_data_xfer_size; /* VFU_MAX_DATA_XFER when absent */
    uint64_t pgsizes;            /* VFU_PAGE_SIZE when absent */
};
/* Parse the capability object of a VERSION message: s[0..n) is the JSON text (a trailing NUL inside n is
 * allowed; n == 0 means no JSON: defaults). Strict JSON; unknown keys are skipped whatever their value;
 * the known ones must be non-negative integers. 0 or -EINVAL. */
int vfu_json_caps(const char *s, size_t n, struct vfu_caps *out);

#ifdef __cplusplus
}
#endif

#endif /* NVMELAB_TOOLS_VFU_SERVER_H */
