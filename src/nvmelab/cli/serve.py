# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab serve URI`: serve the emulated controllers of an emu:// URI over vfio-user."""

from __future__ import annotations

import argparse
import os

from ..driver import uri as _uri
from . import UsageError

COMMAND = "serve"
HELP = "serve the controllers of an emu:// URI as vfio-user PCI devices, one UNIX socket each"
DESCRIPTION = (
    "Start nvmelab-serve, a process of its own, serving every controller of URI as a vfio-user device on "
    "DIR/ctrl<i>/cntrl until SIGINT or SIGTERM (which close every connection and remove the sockets). "
    "Clients: nvmelab itself (vfio-user://DIR, or vfio-user://DIR/ctrl<i> for one controller) and SPDK's NVMe "
    "driver (-r 'trtype:VFIOUSER traddr:DIR/ctrl<i>'), and QEMU's vfio-user-pci, whose guest's Linux nvme "
    "driver binds it (make test-kernel; guest-physical DMA addresses become translated windows, interrupts are "
    "delivered by the eventfds QEMU hands over). The emulator runs with mode=thread: its service thread polls "
    "the doorbell page the client writes. "
    "Example: nvmelab serve --dir /tmp/nvl 'emu://?ndev=2&nsze=64MiB'"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("uri", help="emu:// URI of the controllers to serve, e.g. 'emu://?ndev=2&nsze=64MiB'")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--dir", help="directory for the sockets (ctrl0/cntrl, ctrl1/cntrl, ...)")
    g.add_argument("--socket", help="the socket path (one controller only)")
    p.add_argument("--timeout-ms", type=int, default=None, help="how long a client may leave a reply unread")


def run(args: argparse.Namespace) -> int:
    from ..host import serve

    if _uri.kind(args.uri) != "emu":
        raise UsageError(f"{args.uri!r}: nvmelab serve serves emulated controllers (emu://...)")
    exe = serve.command()
    if exe is None:
        raise UsageError(f"{serve.TOOL} is not built (run `make build`)")
    argv = [exe, *(["--dir", args.dir] if args.dir else ["--socket", args.socket])]
    if args.timeout_ms is not None:
        argv += ["--timeout-ms", str(args.timeout_ms)]
    argv.append(args.uri)
    # The server is a process of its own: it handles its signals, prints its sockets and its errors.
    os.execv(exe, argv)
    return 0  # not reached
