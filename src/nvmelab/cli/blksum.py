# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab blksum [IMAGE]`: blkhash-compatible checksum of an image (file, block device, pipe)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import stat
import sys

from ..driver import uri as _uri
from . import UsageError

log = logging.getLogger(__name__)

COMMAND = "blksum"
HELP = "blkhash-compatible parallel checksum of a disk image, block device or pipe"
DESCRIPTION = (
    "Compute the blkhash digest of IMAGE (a file, a block device, '-' for stdin, or nothing when "
    "stdin is a pipe) with hash threads in C and up to QUEUE_DEPTH reads in flight. Holes are "
    "skipped, zero blocks use a precomputed hash; the digest does not depend on threads, queue "
    "depth, read size or I/O mode. Prints '<hexdigest>  <image>' like the original tool. "
    "Example: nvmelab blksum -d sha256 -t 4 -q 16 --io io_uring disk.raw"
)

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kKmMgG]?)(i?[bB])?\s*$")
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30}


def parse_size(text: str) -> int:
    """'262144', '256k', '256KiB', '1m', '1MiB' -> bytes (binary units)."""
    m = _SIZE_RE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 262144, 256k, 1MiB)")
    return int(m.group(1)) << _SHIFT[m.group(2).lower()]


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..engines import blksum

    p.add_argument(
        "image",
        nargs="?",
        help="image path (raw or qcow2), block device, '-' for stdin (default: stdin if a pipe), an NBD URI, "
        "or a target URI such as 'emu://?nsze=64MiB' (read through the user-space driver)",
    )
    p.add_argument(
        "--mode",
        choices=blksum.READ_MODES,
        default="auto",
        help="auto (default): an nbd:// URI with libnbd, a qcow2 file with the direct reader, else raw; "
        "nbd: serve the file with qemu-nbd; qcow2: the direct reader; file: the raw bytes",
    )
    p.add_argument("--nsid", type=_positive, default=None, help="namespace of a target URI (default: the first)")
    p.add_argument(
        "-d",
        "--digest",
        default=blksum.DEFAULT_DIGEST,
        help=f"digest name (default {blksum.DEFAULT_DIGEST}; 'null' times the I/O only)",
    )
    p.add_argument(
        "-t", "--threads", type=_positive, default=None, help="hash threads (default: the CPUs this process may use)"
    )
    p.add_argument(
        "-q",
        "--queue-depth",
        type=_positive,
        default=blksum.DEFAULT_QUEUE_DEPTH,
        help=f"chunks in flight (default {blksum.DEFAULT_QUEUE_DEPTH})",
    )
    p.add_argument(
        "--read-size",
        type=parse_size,
        default=blksum.DEFAULT_READ_SIZE,
        help=f"bytes per read, a multiple of 64 KiB (default {blksum.DEFAULT_READ_SIZE // 1024}k)",
    )
    p.add_argument(
        "--io",
        choices=blksum.IO_MODES,
        default="psync",
        help="kernel I/O path: psync (pread) or io_uring (default psync)",
    )
    p.add_argument("-p", "--progress", action="store_true", help="show progress on stderr")
    p.add_argument("-l", "--list-digests", action="store_true", help="list the digest names and exit")
    p.add_argument("--json", action="store_true", help="print one JSON object with the digest and timing")


def _human(n: float) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{int(n)} B"


class _Progress:
    """A one-line progress display on stderr (the CLI's own output, not library logging)."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if total:
            text = f"\r{100.0 * done / total:5.1f}%  {_human(done)} / {_human(total)}"
        else:
            text = f"\r{_human(done)}"
        sys.stderr.write(text + "   ")
        sys.stderr.flush()
        self.shown = True

    def end(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


#: qemu serves a raw file in whole sectors of this many bytes.
QEMU_SECTOR = 512


def _warn_if_padded(path: str) -> None:
    """qemu-nbd serves a raw file padded with zeros to a multiple of 512 bytes, and mode nbd hashes that (as the
    original blksum does): one warning saying so, as nvmelab-blksum gives."""
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            qcow2 = f.read(4) == b"QFI\xfb"
    except OSError:
        return  # the run names the problem
    if stat.S_ISREG(st.st_mode) and st.st_size % QEMU_SECTOR and not qcow2:
        log.warning(
            "%s: its size, %d bytes, is not a multiple of %d: qemu-nbd serves it padded with zeros to %d bytes, "
            "and that is what is hashed (as the original blksum does; --mode file hashes the file's own bytes)",
            path,
            st.st_size,
            QEMU_SECTOR,
            -(-st.st_size // QEMU_SECTOR) * QEMU_SECTOR,
        )


def _run_or_signal(fn, *args, **kwargs):
    """fn(...), where a signal that cut its wait short (connecting to an NBD server ends with EINTR and a
    ValueError or OSError) is what stopped the run, not the error it left: the signal's handler runs before
    that error goes on (pthread_sigmask calls the pending handlers), so SIGTERM and Ctrl-C end the command
    with one line and 128 + n (nvmelab.cli), as they do nvmelab-blksum."""
    try:
        return fn(*args, **kwargs)
    except (OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_BLOCK, [])
        raise


def run(args: argparse.Namespace) -> int:
    from ..engines import blksum

    if args.list_digests:
        try:
            for name in blksum.digests():
                print(name)
            sys.stdout.flush()
        except BrokenPipeError:  # e.g. piped into head
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    image = args.image
    if image is None:
        if sys.stdin.isatty():
            raise UsageError("no image given and stdin is a terminal (give a path, or pipe data in)")
        image = "-"
    if args.read_size < blksum.BLOCK_SIZE or args.read_size % blksum.BLOCK_SIZE:
        raise UsageError(f"--read-size must be a positive multiple of 64 KiB, got {args.read_size}")
    if args.mode == "nbd" and not _uri.kind(image):
        _warn_if_padded(image)
    progress = _Progress() if args.progress else None
    try:  # an OSError names the image (its filename) in nvmelab.cli.main's one-line message
        res = _run_or_signal(
            blksum.run,
            image,
            args.digest,
            threads=args.threads,
            queue_depth=args.queue_depth,
            io=args.io,
            read_size=args.read_size,
            progress=progress,
            nsid=args.nsid or 0,
            mode=args.mode,
        )
    finally:
        if progress:
            progress.end()
    if args.json:
        d = res.as_dict()
        d.pop("extra", None)
        print(json.dumps(d, sort_keys=True))
    else:
        print(res.line())
    return 0
