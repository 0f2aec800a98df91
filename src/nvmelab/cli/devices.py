# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab devices`: the NVMe PCI functions of this host, their drivers, block devices and state."""

from __future__ import annotations

import argparse
import json

from ..host import devices

COMMAND = "devices"
HELP = "list NVMe PCI functions with driver, IOMMU group, block devices and whether they are in use"
DESCRIPTION = (
    HELP + ". A function is 'busy' when it is the boot device, mounted, swap, stacked under "
    "device-mapper/md, or open by a process; `nvmelab bind` refuses busy functions."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object per function")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)  # tests: a fake sysfs tree


def run(args: argparse.Namespace) -> int:
    fns = devices.list_functions(devices.Sysfs(args.root))
    if args.json:
        for f in fns:
            print(json.dumps(f.as_dict()))
        return 0
    if not fns:
        print("no NVMe PCI functions")
        return 0
    print(f"{'address':<13} {'id':<10} {'driver':<16} {'iommu':<6} {'numa':>4}  {'block devices':<24} state")
    for f in fns:
        state = "free" if f.free else "busy: " + "; ".join(f.busy)
        print(
            f"{f.address:<13} {f.vendor + ':' + f.device:<10} {f.driver or '-':<16} {f.iommu_group or '-':<6} "
            f"{f.numa_node:>4}  {','.join(f.block_devices) or '-':<24} {state}"
        )
    return 0
