/* SPDX-License-Identifier: BSD-3-Clause */
/* vfu_pci.c — the PCI config space of a served NVMe function (vfu_server.h): header type 0, class 01 08 02,
 * a 64-bit non-prefetchable memory BAR0 with size probing, INTx pin A, and a capability list of PCI power
 * management (D0 only), PCI Express (v2 endpoint, x1 2.5 GT/s) and MSI-X (VFU_MSIX_VECTORS vectors, table
 * and PBA in BAR0; its vectors signalled through SET_IRQS's eventfds, vfu_irq.c). Extended config space (0x100
 * on) reads as zero: no extended capability. */
#include <stdint.h>
#include <string.h>

#include "tools/vfu_server.h"

/* header offsets (PCI Local Bus 3.0, type 0) */
#define CFG_VENDOR_ID  0x00u
#define CFG_DEVICE_ID  0x02u
#define CFG_COMMAND    0x04u
#define CFG_STATUS     0x06u
#define CFG_REVISION   0x08u
#define CFG_CLASS      0x09u /* prog-if, subclass, class: 3 bytes */
#define CFG_CACHE_LINE 0x0cu
#define CFG_BAR0       0x10u
#define CFG_BAR1       0x14u
#define CFG_SSVID      0x2cu
#define CFG_SSID       0x2eu
#define CFG_CAP_PTR    0x34u
#define CFG_INT_LINE   0x3cu
#define CFG_INT_PIN    0x3du
/* command register bits a driver may set: memory space, bus master, parity, SERR, INTx disable */
#define CFG_CMD_WMASK   0x0546u
#define CFG_STATUS_CAPS 0x0010u /* capability list present */
#define CFG_BAR_MEM64   0x4u    /* memory BAR, 64-bit, not prefetchable */
#define CFG_BAR_FLAGS   0xfu
#define CFG_INT_PIN_A   1u
/* capabilities */
#define CAP_PM_OFF             0x40u
#define CAP_PM_ID              0x01u
#define CAP_PM_PMC             0x0003u /* version 3, no PME, D0 only */
#define CAP_PM_PMCSR_NSR       0x0008u /* No_Soft_Reset: D3hot -> D0 keeps state */
#define CAP_PM_PMCSR_PS        0x0003u /* power state field (writable; only D0 is real) */
#define CAP_PCIE_OFF           0x50u
#define CAP_PCIE_ID            0x10u
#define CAP_PCIE_FLAGS         0x0002u     /* capability version 2, device/port type 0: PCI Express endpoint */
#define CAP_PCIE_LINKCAP       0x00000011u /* max link speed 2.5 GT/s, max width x1 */
#define CAP_PCIE_LINKSTA       0x0011u     /* current speed 2.5 GT/s, width x1 */
#define CAP_PCIE_DEVCTL_WMASK  0x7fffu     /* every device-control bit but Initiate FLR */
#define CAP_PCIE_LINKCTL_WMASK 0x00ffu
#define CAP_PCIE_DEVCTL        0x08u /* offsets inside the PCIe capability */
#define CAP_PCIE_LINKCAP_OFF   0x0cu
#define CAP_PCIE_LINKCTL       0x10u
#define CAP_PCIE_LINKSTA_OFF   0x12u
#define CAP_PCIE_DEVCTL2       0x28u
#define CAP_MSIX_OFF           0x90u /* after the 60-byte PCI Express capability */
#define CAP_MSIX_ID            0x11u
#define CAP_MSIX_CTRL_WMASK    0xc000u /* MSI-X Enable, Function Mask */
#define CAP_MSIX_CTRL          0x02u
#define CAP_MSIX_TABLE         0x04u /* offset | BIR 0 */
#define CAP_MSIX_PBA           0x08u

static void put16(uint8_t *p, uint32_t off, uint16_t v)
{
    memcpy(p + off, &v, sizeof(v));
}
static void put32(uint8_t *p, uint32_t off, uint32_t v)
{
    memcpy(p + off, &v, sizeof(v));
}

void vfu_pci_cfg_init(struct vfu_pci_cfg *c, uint64_t bar0_size, uint64_t msix_off, uint16_t vid, uint16_t ssvid)
{
    memset(c, 0, sizeof(*c));
    uint8_t *v = c->v, *w = c->wmask;
    put16(v, CFG_VENDOR_ID, vid);
    put16(v, CFG_DEVICE_ID, (uint16_t)VFU_PCI_DEVICE_ID);
    put16(w, CFG_COMMAND, CFG_CMD_WMASK);
    put16(v, CFG_STATUS, CFG_STATUS_CAPS);
    v[CFG_REVISION] = 0;
    v[CFG_CLASS] = (uint8_t)(VFU_NVME_CLASS & 0xffu);
    v[CFG_CLASS + 1] = (uint8_t)((VFU_NVME_CLASS >> 8) & 0xffu);
    v[CFG_CLASS + 2] = (uint8_t)((VFU_NVME_CLASS >> 16) & 0xffu);
    w[CFG_CACHE_LINE] = 0xff;
    /* BAR0/BAR1: one 64-bit BAR; the address bits below the size are read-only zero, so writing all-ones
     * reads back the size mask */
    uint64_t mask = ~(bar0_size - 1) & ~(uint64_t)CFG_BAR_FLAGS;
    put32(v, CFG_BAR0, CFG_BAR_MEM64);
    put32(w, CFG_BAR0, (uint32_t)mask);
    put32(w, CFG_BAR1, (uint32_t)(mask >> 32));
    put16(v, CFG_SSVID, ssvid);
    put16(v, CFG_SSID, 0);
    v[CFG_CAP_PTR] = CAP_PM_OFF;
    w[CFG_INT_LINE] = 0xff;
    v[CFG_INT_PIN] = CFG_INT_PIN_A;
    /* power management */
    v[CAP_PM_OFF] = CAP_PM_ID;
    v[CAP_PM_OFF + 1] = CAP_PCIE_OFF;
    put16(v, CAP_PM_OFF + 2, CAP_PM_PMC);
    put16(v, CAP_PM_OFF + 4, CAP_PM_PMCSR_NSR);
    put16(w, CAP_PM_OFF + 4, CAP_PM_PMCSR_PS);
    /* PCI Express */
    v[CAP_PCIE_OFF] = CAP_PCIE_ID;
    v[CAP_PCIE_OFF + 1] = CAP_MSIX_OFF;
    put16(v, CAP_PCIE_OFF + 2, CAP_PCIE_FLAGS);
    put16(w, CAP_PCIE_OFF + CAP_PCIE_DEVCTL, CAP_PCIE_DEVCTL_WMASK);
    put32(v, CAP_PCIE_OFF + CAP_PCIE_LINKCAP_OFF, CAP_PCIE_LINKCAP);
    put16(w, CAP_PCIE_OFF + CAP_PCIE_LINKCTL, CAP_PCIE_LINKCTL_WMASK);
    put16(v, CAP_PCIE_OFF + CAP_PCIE_LINKSTA_OFF, CAP_PCIE_LINKSTA);
    put16(w, CAP_PCIE_OFF + CAP_PCIE_DEVCTL2, 0xffffu);
    /* MSI-X: Table Size is N - 1; table and PBA in BAR0 (BIR 0, offsets 8-byte aligned) */
    v[CAP_MSIX_OFF] = CAP_MSIX_ID;
    v[CAP_MSIX_OFF + 1] = 0;
    put16(v, CAP_MSIX_OFF + CAP_MSIX_CTRL, (uint16_t)(VFU_MSIX_VECTORS - 1u));
    put16(w, CAP_MSIX_OFF + CAP_MSIX_CTRL, CAP_MSIX_CTRL_WMASK);
    put32(v, CAP_MSIX_OFF + CAP_MSIX_TABLE, (uint32_t)msix_off);
    put32(v, CAP_MSIX_OFF + CAP_MSIX_PBA, (uint32_t)(msix_off + VFU_MSIX_TABLE_SIZE));
}

void vfu_pci_cfg_read(const struct vfu_pci_cfg *c, uint32_t off, void *buf, uint32_t count)
{
    memcpy(buf, c->v + off, count);
}

void vfu_pci_cfg_write(struct vfu_pci_cfg *c, uint32_t off, const void *buf, uint32_t count)
{
    const uint8_t *b = buf;
    for (uint32_t i = 0; i < count; i++) {
        uint8_t m = c->wmask[off + i];
        c->v[off + i] = (uint8_t)((c->v[off + i] & ~m) | (b[i] & m));
    }
}
