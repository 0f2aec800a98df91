# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab hugepages [N]`: reserve N hugepages (DMA memory of the uio path) and report what the kernel gave."""

from __future__ import annotations

import argparse

from ..host import devices

COMMAND = "hugepages"
HELP = "reserve N hugepages (2M or 1G) for pci:// DMA memory and report the kernel's counts"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("count", nargs="?", type=int, help="hugepages to reserve (omit to only report)")
    p.add_argument("--size", default="2M", choices=sorted(devices.HUGEPAGE_SIZES_KB), help="hugepage size")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    print(devices.hugepages(args.count, args.size, devices.Sysfs(args.root)))
    return 0
