# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab unbind ADDR`: release one named NVMe function; the kernel's nvme driver takes it back."""

from __future__ import annotations

import argparse

from ..host import devices

COMMAND = "unbind"
HELP = "release one NVMe PCI function from its driver and let the kernel re-probe it (refuses in-use devices)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", help="PCI address, e.g. 0000:4a:00.0 (exactly one; no wildcards)")
    p.add_argument("--no-probe", action="store_true", help="leave the function without a driver")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    f = devices.unbind(args.address, reprobe=not args.no_probe, fs=devices.Sysfs(args.root))
    print(
        f"{f.address} released; now {f.driver or 'unbound'}"
        + (f" ({', '.join(f.block_devices)})" if f.block_devices else "")
    )
    return 0
