# SPDX-License-Identifier: BSD-3-Clause
# nvmelab QEMU guest: the knobs of `make test-qemu` (sourced by run.sh).
# Everything here can be overridden from the environment, e.g.
#   NVMELAB_QEMU_MEM=2G NVMELAB_QEMU_LEGS=uio make test-qemu

# Kernel: the Debian metapackage is resolved to its versioned image package.
QEMU_KERNEL_META=${QEMU_KERNEL_META:-linux-image-amd64}
# Guest memory and CPUs (TCG on 2 host cores: 2 vCPUs give the multi-queue tests real concurrency).
QEMU_MEM=${NVMELAB_QEMU_MEM:-1G}
QEMU_SMP=${NVMELAB_QEMU_SMP:-2}
# Legs to run: uio (IOMMU off, uio_pci_generic + hugepages + pagemap), vfio (intel-iommu, vfio-pci + IOVA).
QEMU_LEGS=${NVMELAB_QEMU_LEGS:-"uio vfio"}
# Hard limit for one guest run (seconds); the guest powers itself off well before.
QEMU_TIMEOUT_S=${NVMELAB_QEMU_TIMEOUT_S:-480}
# Accelerator: auto = KVM when /dev/kvm opens and actually runs a guest, else TCG.
QEMU_ACCEL=${NVMELAB_QEMU_ACCEL:-auto}
# Hugepages (2 MiB) reserved in the uio leg.
QEMU_HUGEPAGES=${NVMELAB_QEMU_HUGEPAGES:-96}

# NVMe controllers. PCI slots are fixed so the guest knows the addresses.
#   A: 512 B LBA, one namespace, MDTS 2^5 pages (128 KiB)   -> driven by the user-space driver
#   B: 4 KiB LBA, two namespaces, MDTS 2^3 pages (32 KiB)   -> driven by the user-space driver
#   C: 512 B LBA, kernel nvme driver, named by root= on the kernel command line (the boot device)
#   D: 512 B LBA, kernel nvme driver, ext2 mounted on it during the refusal tests
CTRL_A_SLOT=04; CTRL_A_MDTS=5; CTRL_A_LBA=512;  CTRL_A_MIB=64
CTRL_B_SLOT=05; CTRL_B_MDTS=3; CTRL_B_LBA=4096; CTRL_B_MIB=64; CTRL_B_NS2_MIB=16
CTRL_C_SLOT=06; CTRL_C_MDTS=7; CTRL_C_LBA=512;  CTRL_C_MIB=8
CTRL_D_SLOT=07; CTRL_D_MDTS=7; CTRL_D_LBA=512;  CTRL_D_MIB=8
# Number of I/O queue pairs each QEMU controller offers.
CTRL_MAX_IOQPAIRS=8
