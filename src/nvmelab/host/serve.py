# SPDX-License-Identifier: BSD-3-Clause
"""Emulated controllers served over vfio-user, in a process of their own (``nvmelab-serve``).

    command()                   the ``nvmelab-serve`` executable (next to this Python, else PATH)
    Server(uri, dir=None)       a context manager: starts the server on ``uri`` (an ``emu://`` URI),
                                waits until every socket listens, stops it (SIGTERM) on exit
      .uri                      ``vfio-user://DIR``: every controller, for nvmelab.open / perf / studies
      .sockets                  one UNIX socket per controller, ``DIR/ctrl<i>/cntrl``
      .cpu_s                    after stop: the CPU seconds the server used (user + system, every thread)
      .stats                    after stop: what it printed of each controller's service thread at exit
                                (``stats ctrl<i> key=value ...``: sweeps, busy sweeps, commands), by ctrl

Clients: our driver (``vfio-user://DIR`` for every controller, ``vfio-user://DIR/ctrl<i>`` for one), SPDK's NVMe
driver (``trtype:VFIOUSER traddr:DIR/ctrl<i>``) and QEMU's ``vfio-user-pci`` (a guest's Linux nvme driver:
``make test-kernel``). A DMA region is mapped at the client's IOVA where it can be, else anywhere and handed to
the emulator as a translated window (QEMU's guest-physical addresses start at 0). The protocol, this IOVA rule
and what the server does not implement are described in ``src/nvme/vfio_user.h`` and src/README.md.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ..driver import uri as _uri

log = logging.getLogger(__name__)

TOOL = "nvmelab-serve"
#: Seconds a server may take to listen on every socket.
START_TIMEOUT_S = 30.0
#: Seconds a server may take to stop after SIGTERM before it is killed.
STOP_TIMEOUT_S = 10.0


def command() -> str | None:
    """The ``nvmelab-serve`` executable: next to this Python (a wheel's scripts, or the venv where
    ``make build`` copies it), else on PATH; None when neither has it."""
    here = Path(sys.executable).parent / TOOL
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which(TOOL)


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) process `pid` used so far; None when /proc does not say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def parse_stats(text: str) -> dict[int, dict[str, int]]:
    """The ``stats ctrl<i> key=value ...`` lines the server prints at exit, by controller index."""
    out: dict[int, dict[str, int]] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != "stats" or not words[1].startswith("ctrl"):
            continue
        try:
            out[int(words[1][4:])] = {k: int(v) for k, v in (w.split("=", 1) for w in words[2:])}
        except ValueError:
            log.warning("%s: unreadable stats line %r", TOOL, line)
    return out


class ServeError(RuntimeError):
    """The server did not start, or stopped with an error; the message carries its stderr."""


class Server:
    """``nvmelab-serve`` on ``uri`` for the life of a ``with`` block.

    ``dir`` holds the sockets (a fresh temporary directory when None, removed on exit). The server's
    stderr is kept and logged; a server that exits before it is ready raises :class:`ServeError` with
    its message."""

    def __init__(
        self,
        uri: str,
        dir: str | os.PathLike | None = None,
        extra: list[str] | None = None,
        cpus: list[int] | None = None,
    ):
        if not isinstance(uri, str) or _uri.kind(uri) != "emu":
            raise ValueError(f"uri={uri!r}: nvmelab serve serves emulated controllers (emu://...)")
        self.target = uri
        self._own_dir = dir is None
        self.dir = Path(tempfile.mkdtemp(prefix="nvmelab-serve.")) if dir is None else Path(dir)
        self.extra = list(extra or [])
        self.cpus = sorted(cpus) if cpus else None  # the server's CPUs (every thread of it), None: any
        self.cpu_s: float | None = None
        self.stats: dict[int, dict[str, int]] = {}
        self.sockets: list[Path] = []
        self.proc: subprocess.Popen | None = None
        self._stderr: list[str] = []
        self._reader: threading.Thread | None = None

    @property
    def uri(self) -> str:
        """``vfio-user://DIR``: every controller this server serves."""
        return f"vfio-user://{self.dir}"

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def start(self) -> Server:
        exe = command()
        if exe is None:
            raise ServeError(f"{TOOL} not found next to {sys.executable} or on PATH (run `make build`)")
        self.dir.mkdir(parents=True, exist_ok=True)
        argv = [exe, "--dir", str(self.dir), *self.extra, self.target]
        log.info("starting %s", " ".join(argv))
        cpus = self.cpus
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None  # inherited by every thread it starts
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=pin)
        self._reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._reader.start()
        ready = threading.Event()
        lines: list[str] = []

        def wait_ready() -> None:
            for line in self.proc.stdout:
                lines.append(line.rstrip("\n"))
                if line.strip() == "ready":
                    ready.set()
                    return

        t = threading.Thread(target=wait_ready, daemon=True)
        t.start()
        t.join(START_TIMEOUT_S)
        if not ready.is_set():
            self.stop()
            why = self.stderr.strip() or f"not ready within {START_TIMEOUT_S:g} s"
            raise ServeError(f"{TOOL} {self.target}: {why}")
        self.sockets = [Path(x.split(" ", 1)[1]) for x in lines if x.startswith("listening ")]
        return self

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line)
            log.debug("%s: %s", TOOL, line.rstrip())

    def stop(self) -> int | None:
        """SIGTERM, wait (kill after STOP_TIMEOUT_S); returns the exit status (None if never started)."""
        p, rc = self.proc, None
        if p is not None:
            if p.poll() is None:
                self.cpu_s = process_cpu_s(p.pid)
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop within %g s; killed", TOOL, STOP_TIMEOUT_S)
                    p.kill()
                    p.wait()
            rc = p.returncode
            if p.stdout and not p.stdout.closed:  # stop() may run twice (an explicit stop, then __exit__)
                self.stats = parse_stats(p.stdout.read())
                p.stdout.close()
            if self._reader:
                self._reader.join(1.0)
            if p.stderr and not p.stderr.closed:
                p.stderr.close()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return rc

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
