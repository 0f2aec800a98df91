# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab bind ADDR --driver D`: move one named NVMe function to uio_pci_generic or vfio-pci."""

from __future__ import annotations

import argparse

from ..host import devices

COMMAND = "bind"
HELP = "bind one NVMe PCI function to uio_pci_generic or vfio-pci (refuses boot, mounted, in-use devices)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", help="PCI address, e.g. 0000:4a:00.0 (exactly one; no wildcards)")
    p.add_argument("--driver", required=True, choices=devices.DRIVERS, help="user-space driver to bind")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    f = devices.bind(args.address, args.driver, devices.Sysfs(args.root))
    extra = f", IOMMU group {f.iommu_group}" if f.iommu_group else ""
    print(f"{f.address} bound to {f.driver}{extra}")
    return 0
