/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vfio_user.h — the vfio-user protocol on the wire (QEMU docs/interop/vfio-user.rst, version 0.1) and the
 * framing both of our sides use: the server (src/tools/vfu_server.c, `nvmelab-serve`) and the driver's
 * `vfio-user://` client.
 *
 * Purpose: every message layout we send or accept as a packed little-endian struct whose size and field
 * offsets are checked by static asserts, every command number, flag bit, region and IRQ index named; and
 * two calls that move one whole message (header + payload, plus file descriptors as SCM_RIGHTS) over a
 * connected SOCK_STREAM UNIX socket.
 *
 * Key items: struct vfu_hdr (16 B, opens every message); VFU_CMD_*; struct vfu_version, vfu_dma_map,
 * vfu_dma_unmap, vfu_device_info, vfu_region_info (+ vfu_cap_hdr, vfu_cap_sparse, vfu_sparse_area),
 * vfu_irq_info, vfu_irq_set, vfu_region_access; VFU_PCI_*_REGION, VFU_PCI_*_IRQ;
 * vfu_msg_send() / vfu_msg_recv() / vfu_hdr_init() / vfu_close_fds() / vfu_cmd_name().
 *
 * Framing rules (vfio_user_msg.c):
 *   - vfu_msg_send(sock, msg, len, fds, nfds, timeout_ms): msg starts with a struct vfu_hdr whose size field
 *     equals len (VFU_HDR_SIZE <= len <= VFU_MAX_MSG, else -EMSGSIZE); nfds <= VFU_MAX_FDS ride with the
 *     first byte. Returns 0 or -ETIMEDOUT, -ECONNRESET (peer gone, EPIPE included), -errno.
 *   - vfu_msg_recv(sock, buf, cap, &len, fds, &nfds, timeout_ms): reads exactly one message into buf.
 *     -ECONNRESET when the peer closed (before or inside a message), -EPROTO when the size field is
 *     smaller than the header, -EMSGSIZE when it is larger than cap or VFU_MAX_MSG, -ETIMEDOUT when the
 *     whole message did not arrive within timeout_ms (< 0: wait without limit, for callers that poll
 *     the socket themselves first). After any error the stream is out of step: close the connection.
 *     fds: room for *nfds on entry (at most VFU_MAX_FDS are ever kept), the count received on return;
 *     descriptors beyond the room, and every descriptor on an error return, are closed here. The caller
 *     owns the returned ones (received O_CLOEXEC).
 *   - Neither call checks what the payload means; the receiver checks the header's type bits and each
 *     command's minimum size and argsz (the server: vfu_server.c).
 *
 * vfio-user server (nvmelab-serve, src/tools/vfu_server.h):
 *   - Served: one PCI NVMe function per emu:// controller (vendor 1b36, device 0010, subsystem vendor
 *     1b36: the ids the emulator's Identify reports): config space (region 7, 4 KiB, class 01 08 02, a
 *     64-bit BAR0 with size probing, INTx pin A, PCI power-management, PCI Express and MSI-X capabilities,
 *     VFU_MSIX_VECTORS vectors with table and PBA in BAR0 past the doorbells) and BAR0 (region 0, size = a
 *     power of two); IRQ info: INTx 1 vector, MSI-X VFU_MSIX_VECTORS, error (AER) 1 (never signalled),
 *     others 0. Registers below 0x1000 go through REGION_READ/REGION_WRITE; the doorbells [0x1000, emulator
 *     BAR size) are a sparse-mmap area backed by the emulator's BAR memfd (passed with the GET_REGION_INFO
 *     reply, region offset 0, so the client maps the fd at area.offset); the emulator's service thread
 *     (mode=thread) polls them.
 *   - IOVA rule: each connection has an IOVA space of its own (its controller's IOMMU domain). The server
 *     maps each DMA_MAP fd (MAP_SHARED) at virtual address == IOVA where it can (MAP_FIXED_NOREPLACE), an
 *     identity window; a range it cannot place there (below 64 KiB, or taken in the server's address space:
 *     QEMU's vfio-user-pci, whose IOVAs are guest-physical addresses from 0, or another connection's) is
 *     mapped wherever mmap puts it, a translated window (iova -> va). A range overlapping another region of
 *     the same connection: EEXIST; an address, size or offset not 4 KiB aligned: EINVAL. Our client hands
 *     out IOVAs from VFU_CLIENT_IOVA_BASE up; SPDK's are its hugepage addresses.
 *   - Interrupts: SET_IRQS (ACTION_TRIGGER with DATA_EVENTFD, one fd per vector or none to unset them;
 *     DATA_NONE count 0 turns an index off; MASK/UNMASK with DATA_NONE or DATA_BOOL; TRIGGER with DATA_NONE
 *     or DATA_BOOL fires) keeps an eventfd per MSI-X vector and INTx's; completions posted to a CQ with
 *     interrupts enabled write the eventfd of its vector (vfu_irq.c in the server).
 *   - A client that disconnects (or sends a header that lies) has its controller reset as a power cycle
 *     would, its DMA regions unregistered and unmapped and its eventfds closed; the server then serves the
 *     next client.
 *   - Not implemented: DMA through regions without an fd (they would need DMA_READ/DMA_WRITE, which the
 *     server never sends: such a map is accepted and kept for its unmap, with no emulator window, so a PRP
 *     into it completes with Data Transfer Error; QEMU maps its ROMs so), GET_REGION_IO_FDS, REGION_WRITE_MULTI,
 * dirty-page logging, migration, DEVICE_FEATURE (all ENOTSUP).
 *
 * Caveats: little-endian hosts only (the wire is little-endian and fields are used as stored). The
 * protocol's own structs mirror Linux's <linux/vfio.h>; this header includes nothing from it. VFU_MAX_MSG
 * bounds every message either side accepts; both sides announce VFU_MAX_DATA_XFER as max_data_xfer_size.
 */
#ifndef NVME_VFIO_USER_H
#define NVME_VFIO_USER_H

#include <stddef.h>
#include <stdint.h>

/* Where a server listens: DIR/ctrl<i>/cntrl for controller i. The socket's name is the one SPDK's client
 * connects to inside its traddr directory (trtype:VFIOUSER traddr:DIR/ctrl<i>). */
#define VFU_CTRL_DIR    "ctrl%u"
#define VFU_SOCKET_NAME "cntrl"
#ifndef __cplusplus
#include <assert.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vfio-user layouts here assume a little-endian host");
#endif

/* ---- protocol version and limits ---- */
#define VFU_VERSION_MAJOR      0u
#define VFU_VERSION_MINOR      1u
#define VFU_HDR_SIZE           16u                         /* struct vfu_hdr */
#define VFU_MAX_DATA_XFER      (1u << 20)                  /* max_data_xfer_size we announce and accept */
#define VFU_MAX_MSG            (VFU_MAX_DATA_XFER + 4096u) /* any message, header included */
#define VFU_MAX_FDS            8u                          /* max_msg_fds we announce and accept */
#define VFU_PAGE_SIZE          4096u                       /* DMA map granule (pgsizes we announce) */
#define VFU_MAX_JSON           1024u                       /* VERSION capability string, NUL included */
#define VFU_DEFAULT_TIMEOUT_MS 5000                        /* reply timeout of our client, by default */
/* IOVAs our client hands out (bump allocator upwards): the server maps DMA regions at VA == IOVA. 32 TiB:
 * above where a process keeps its own mappings, and above AddressSanitizer's x86-64 shadow (which ends at
 * 0x10007fff7fff), so a sanitized server can place them too (the first design said 16 TiB, inside it). */
#define VFU_CLIENT_IOVA_BASE (1ull << 45)

/* ---- commands (vfu_hdr.cmd) ---- */
enum vfu_cmd {
    VFU_CMD_VERSION = 1,
    VFU_CMD_DMA_MAP = 2,
    VFU_CMD_DMA_UNMAP = 3,
    VFU_CMD_DEVICE_GET_INFO = 4,
    VFU_CMD_DEVICE_GET_REGION_INFO = 5,
    VFU_CMD_DEVICE_GET_REGION_IO_FDS = 6, /* not implemented by our server */
    VFU_CMD_DEVICE_GET_IRQ_INFO = 7,
    VFU_CMD_DEVICE_SET_IRQS = 8,
    VFU_CMD_REGION_READ = 9,
    VFU_CMD_REGION_WRITE = 10,
    VFU_CMD_DMA_READ = 11,  /* server -> client; never sent by our server */
    VFU_CMD_DMA_WRITE = 12, /* server -> client; never sent by our server */
    VFU_CMD_DEVICE_RESET = 13,
    VFU_CMD_MAX = 19, /* first number above every command the specification defines */
};

/* ---- header ---- */
#define VFU_F_TYPE_MASK    0xfu
#define VFU_F_TYPE_COMMAND 0x0u
#define VFU_F_TYPE_REPLY   0x1u
#define VFU_F_NO_REPLY     0x10u /* command: the sender wants no reply */
#define VFU_F_ERROR        0x20u /* reply: error holds an errno */

struct vfu_hdr {
    uint16_t msg_id; /* chosen by the sender of a command, echoed in its reply */
    uint16_t cmd;    /* enum vfu_cmd */
    uint32_t size;   /* whole message in bytes, this header included */
    uint32_t flags;  /* VFU_F_* */
    uint32_t error;  /* errno of a failed command (reply with VFU_F_ERROR), else 0 */
} __attribute__((packed));
static_assert(sizeof(struct vfu_hdr) == VFU_HDR_SIZE, "vfio-user header is 16 bytes");
static_assert(offsetof(struct vfu_hdr, cmd) == 2, "vfu_hdr.cmd");
static_assert(offsetof(struct vfu_hdr, size) == 4, "vfu_hdr.size");
static_assert(offsetof(struct vfu_hdr, flags) == 8, "vfu_hdr.flags");
static_assert(offsetof(struct vfu_hdr, error) == 12, "vfu_hdr.error");

/* ---- VERSION: command and reply carry the same layout, then a NUL-terminated JSON object ----
 * {"capabilities":{"max_msg_fds":N,"max_data_xfer_size":N,"pgsizes":N,"migration":{...}}}; every key
 * is optional, unknown keys are ignored. */
struct vfu_version {
    uint16_t major;
    uint16_t minor;
    /* char json[] follows */
} __attribute__((packed));
static_assert(sizeof(struct vfu_version) == 4, "VERSION payload head is 4 bytes");
static_assert(offsetof(struct vfu_version, minor) == 2, "vfu_version.minor");

/* ---- DMA_MAP (one fd with the message when the region is mappable) ---- */
#define VFU_DMA_F_READ  (1u << 0)
#define VFU_DMA_F_WRITE (1u << 1)
struct vfu_dma_map {
    uint32_t argsz;  /* sizeof(struct vfu_dma_map) */
    uint32_t flags;  /* VFU_DMA_F_* */
    uint64_t offset; /* into the fd */
    uint64_t addr;   /* IOVA */
    uint64_t size;
} __attribute__((packed));
static_assert(sizeof(struct vfu_dma_map) == 32, "DMA_MAP payload is 32 bytes");
static_assert(offsetof(struct vfu_dma_map, flags) == 4, "vfu_dma_map.flags");
static_assert(offsetof(struct vfu_dma_map, offset) == 8, "vfu_dma_map.offset");
static_assert(offsetof(struct vfu_dma_map, addr) == 16, "vfu_dma_map.addr");
static_assert(offsetof(struct vfu_dma_map, size) == 24, "vfu_dma_map.size");

/* ---- DMA_UNMAP (the reply echoes the struct) ---- */
#define VFU_DMA_UNMAP_F_DIRTY_BITMAP (1u << 0) /* not supported by our server: EINVAL */
#define VFU_DMA_UNMAP_F_ALL          (1u << 1) /* every region; addr and size must be 0 */
struct vfu_dma_unmap {
    uint32_t argsz; /* sizeof(struct vfu_dma_unmap) */
    uint32_t flags; /* VFU_DMA_UNMAP_F_* */
    uint64_t addr;
    uint64_t size;
} __attribute__((packed));
static_assert(sizeof(struct vfu_dma_unmap) == 24, "DMA_UNMAP payload is 24 bytes");
static_assert(offsetof(struct vfu_dma_unmap, flags) == 4, "vfu_dma_unmap.flags");
static_assert(offsetof(struct vfu_dma_unmap, addr) == 8, "vfu_dma_unmap.addr");
static_assert(offsetof(struct vfu_dma_unmap, size) == 16, "vfu_dma_unmap.size");

/* ---- DEVICE_GET_INFO ---- */
#define VFU_DEV_F_RESET (1u << 0)
#define VFU_DEV_F_PCI   (1u << 1)
struct vfu_device_info {
    uint32_t argsz;
    uint32_t flags; /* VFU_DEV_F_* */
    uint32_t num_regions;
    uint32_t num_irqs;
} __attribute__((packed));
static_assert(sizeof(struct vfu_device_info) == 16, "DEVICE_GET_INFO payload is 16 bytes");
static_assert(offsetof(struct vfu_device_info, flags) == 4, "vfu_device_info.flags");
static_assert(offsetof(struct vfu_device_info, num_regions) == 8, "vfu_device_info.num_regions");
static_assert(offsetof(struct vfu_device_info, num_irqs) == 12, "vfu_device_info.num_irqs");

/* ---- PCI region and IRQ indexes (VFIO's PCI numbering) ---- */
enum vfu_pci_region {
    VFU_PCI_BAR0_REGION = 0,
    VFU_PCI_BAR1_REGION = 1,
    VFU_PCI_BAR2_REGION = 2,
    VFU_PCI_BAR3_REGION = 3,
    VFU_PCI_BAR4_REGION = 4,
    VFU_PCI_BAR5_REGION = 5,
    VFU_PCI_ROM_REGION = 6,
    VFU_PCI_CONFIG_REGION = 7,
    VFU_PCI_VGA_REGION = 8,
    VFU_PCI_NUM_REGIONS = 9,
};
enum vfu_pci_irq {
    VFU_PCI_INTX_IRQ = 0,
    VFU_PCI_MSI_IRQ = 1,
    VFU_PCI_MSIX_IRQ = 2,
    VFU_PCI_ERR_IRQ = 3,
    VFU_PCI_REQ_IRQ = 4,
    VFU_PCI_NUM_IRQS = 5,
};

/* ---- DEVICE_GET_REGION_INFO ----
 * Command: the struct with argsz = the room the client has for the reply payload and index set.
 * Reply: the struct, then capabilities (cap_offset counts from the start of this struct) when argsz was
 * large enough; else argsz = the size needed and no capability (flags keep VFU_REGION_F_CAPS). A mappable
 * region comes with one fd; the client maps it at `offset` (+ a sparse area's offset). */
#define VFU_REGION_F_READ  (1u << 0)
#define VFU_REGION_F_WRITE (1u << 1)
#define VFU_REGION_F_MMAP  (1u << 2)
#define VFU_REGION_F_CAPS  (1u << 3)
struct vfu_region_info {
    uint32_t argsz;
    uint32_t flags; /* VFU_REGION_F_* */
    uint32_t index; /* enum vfu_pci_region */
    uint32_t cap_offset;
    uint64_t size;
    uint64_t offset; /* into the fd passed with the reply */
} __attribute__((packed));
static_assert(sizeof(struct vfu_region_info) == 32, "GET_REGION_INFO payload is 32 bytes");
static_assert(offsetof(struct vfu_region_info, flags) == 4, "vfu_region_info.flags");
static_assert(offsetof(struct vfu_region_info, index) == 8, "vfu_region_info.index");
static_assert(offsetof(struct vfu_region_info, cap_offset) == 12, "vfu_region_info.cap_offset");
static_assert(offsetof(struct vfu_region_info, size) == 16, "vfu_region_info.size");
static_assert(offsetof(struct vfu_region_info, offset) == 24, "vfu_region_info.offset");

#define VFU_CAP_SPARSE_MMAP         1u /* vfu_cap_hdr.id */
#define VFU_CAP_SPARSE_MMAP_VERSION 1u
struct vfu_cap_hdr {
    uint16_t id;
    uint16_t version;
    uint32_t next; /* offset of the next capability from the start of vfu_region_info, 0 = last */
} __attribute__((packed));
static_assert(sizeof(struct vfu_cap_hdr) == 8, "capability header is 8 bytes");
static_assert(offsetof(struct vfu_cap_hdr, version) == 2, "vfu_cap_hdr.version");
static_assert(offsetof(struct vfu_cap_hdr, next) == 4, "vfu_cap_hdr.next");

struct vfu_sparse_area {
    uint64_t offset; /* into the region */
    uint64_t size;
} __attribute__((packed));
static_assert(sizeof(struct vfu_sparse_area) == 16, "sparse mmap area is 16 bytes");
static_assert(offsetof(struct vfu_sparse_area, size) == 8, "vfu_sparse_area.size");

struct vfu_cap_sparse {
    struct vfu_cap_hdr hdr; /* id VFU_CAP_SPARSE_MMAP */
    uint32_t nr_areas;
    uint32_t reserved;
    /* struct vfu_sparse_area areas[nr_areas] follow */
} __attribute__((packed));
static_assert(sizeof(struct vfu_cap_sparse) == 16, "sparse mmap capability head is 16 bytes");
static_assert(offsetof(struct vfu_cap_sparse, nr_areas) == 8, "vfu_cap_sparse.nr_areas");
static_assert(offsetof(struct vfu_cap_sparse, reserved) == 12, "vfu_cap_sparse.reserved");

/* ---- DEVICE_GET_IRQ_INFO ---- */
#define VFU_IRQ_INFO_F_EVENTFD    (1u << 0)
#define VFU_IRQ_INFO_F_MASKABLE   (1u << 1)
#define VFU_IRQ_INFO_F_AUTOMASKED (1u << 2)
#define VFU_IRQ_INFO_F_NORESIZE   (1u << 3)
struct vfu_irq_info {
    uint32_t argsz;
    uint32_t flags; /* VFU_IRQ_INFO_F_* */
    uint32_t index; /* enum vfu_pci_irq */
    uint32_t count; /* vectors */
} __attribute__((packed));
static_assert(sizeof(struct vfu_irq_info) == 16, "GET_IRQ_INFO payload is 16 bytes");
static_assert(offsetof(struct vfu_irq_info, flags) == 4, "vfu_irq_info.flags");
static_assert(offsetof(struct vfu_irq_info, index) == 8, "vfu_irq_info.index");
static_assert(offsetof(struct vfu_irq_info, count) == 12, "vfu_irq_info.count");

/* ---- DEVICE_SET_IRQS (DATA_EVENTFD: `count` fds with the message; DATA_BOOL: count bytes follow) ---- */
#define VFU_IRQ_SET_DATA_NONE        (1u << 0)
#define VFU_IRQ_SET_DATA_BOOL        (1u << 1)
#define VFU_IRQ_SET_DATA_EVENTFD     (1u << 2)
#define VFU_IRQ_SET_ACTION_MASK      (1u << 3)
#define VFU_IRQ_SET_ACTION_UNMASK    (1u << 4)
#define VFU_IRQ_SET_ACTION_TRIGGER   (1u << 5)
#define VFU_IRQ_SET_DATA_TYPE_MASK   (VFU_IRQ_SET_DATA_NONE | VFU_IRQ_SET_DATA_BOOL | VFU_IRQ_SET_DATA_EVENTFD)
#define VFU_IRQ_SET_ACTION_TYPE_MASK (VFU_IRQ_SET_ACTION_MASK | VFU_IRQ_SET_ACTION_UNMASK | VFU_IRQ_SET_ACTION_TRIGGER)
struct vfu_irq_set {
    uint32_t argsz; /* this struct + the data that follows */
    uint32_t flags; /* exactly one VFU_IRQ_SET_DATA_* and one VFU_IRQ_SET_ACTION_* */
    uint32_t index; /* enum vfu_pci_irq */
    uint32_t start;
    uint32_t count;
} __attribute__((packed));
static_assert(sizeof(struct vfu_irq_set) == 20, "SET_IRQS payload head is 20 bytes");
static_assert(offsetof(struct vfu_irq_set, flags) == 4, "vfu_irq_set.flags");
static_assert(offsetof(struct vfu_irq_set, index) == 8, "vfu_irq_set.index");
static_assert(offsetof(struct vfu_irq_set, start) == 12, "vfu_irq_set.start");
static_assert(offsetof(struct vfu_irq_set, count) == 16, "vfu_irq_set.count");

/* ---- REGION_READ / REGION_WRITE ----
 * READ command: the struct; reply: the struct + count bytes. WRITE command: the struct + count bytes;
 * reply: the struct. */
struct vfu_region_access {
    uint64_t offset; /* into the region */
    uint32_t region; /* enum vfu_pci_region */
    uint32_t count;  /* data bytes */
    /* uint8_t data[] follows */
} __attribute__((packed));
static_assert(sizeof(struct vfu_region_access) == 16, "REGION_READ/WRITE payload head is 16 bytes");
static_assert(offsetof(struct vfu_region_access, region) == 8, "vfu_region_access.region");
static_assert(offsetof(struct vfu_region_access, count) == 12, "vfu_region_access.count");

/* DEVICE_RESET: no payload either way. */

/* ---- framing (vfio_user_msg.c) ---- */

/* Fill a header: size = whole message bytes, flags = VFU_F_TYPE_* (| VFU_F_ERROR with error). */
static inline void vfu_hdr_init(struct vfu_hdr *h, uint16_t msg_id, uint16_t cmd, uint32_t size, uint32_t flags,
                                uint32_t error)
{
    h->msg_id = msg_id;
    h->cmd = cmd;
    h->size = size;
    h->flags = flags;
    h->error = error;
}

/* Send one message (msg begins with its vfu_hdr, size == len) and nfds descriptors. Partial writes
 * are continued until timeout_ms (< 0: no limit) runs out. 0 or a negative errno (see the top). */
int vfu_msg_send(int sock, const void *msg, size_t len, const int *fds, unsigned nfds, int timeout_ms);

/* Receive one message into buf (cap bytes); *len = its size; fds/nfds as described at the top. */
int vfu_msg_recv(int sock, void *buf, size_t cap, size_t *len, int *fds, unsigned *nfds, int timeout_ms);

/* Close fds[0..n) that are >= 0 and set them to -1. */
void vfu_close_fds(int *fds, unsigned n);

/* "DMA_MAP", "REGION_WRITE", ...; "UNKNOWN" for numbers we do not know. */
const char *vfu_cmd_name(unsigned cmd);

#ifdef __cplusplus
}
#endif

#endif /* NVME_VFIO_USER_H */
