# SPDX-License-Identifier: BSD-3-Clause
"""Environment capture for run records: what ran, where, when, and on what.

`capture(target_info)` returns the `provenance` object of a record (see
nvmelab.results.records.PROVENANCE_KEYS): git commit, host, CPU model and layout,
kernel, package versions, UTC time, GPU and driver where present, the native
build, and for emulated targets the device-model profile and scale. Static parts
are read once per process; the time is taken on every call.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import logging
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from . import cpus as _cpus

log = logging.getLogger(__name__)

#: Packages whose versions go into every record (absent ones are left out).
PACKAGES = ("nvmelab", "numpy", "pandas", "altair", "pybind11", "cupy-cuda13x", "numba-cuda")
#: Seconds allowed for an external query (git, nvidia-smi, fio).
QUERY_TIMEOUT_S = 5


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    env = None
    if cmd[0] == "git":
        # Read only: `git status` would otherwise refresh the index (taking .git/index.lock and
        # rewriting .git/index) in the user's checkout, and fail a concurrent git command there.
        cmd = ["git", "--no-optional-locks", *cmd[1:]]
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


#: Paths whose changes do not make the code "dirty": the records a sweep is writing (a
#: re-measurement replaces tracked record files, so they always differ from HEAD meanwhile).
NOT_CODE = ("data/results",)


@functools.lru_cache(maxsize=4)
def git_commit(where: Path | None = None) -> str | None:
    """HEAD of the repository this package (or `where`) lives in, "+dirty" when a tracked file
    outside NOT_CODE has uncommitted changes. An installed package (pip install ., a wheel) is
    no checkout: it answers the commit captured when it was built (nvmelab._build_info, written
    by src/bindings/build_info.cmake). None when neither is known."""
    if where is None:
        built = _built_commit()
        if built is not None:
            return built
    here = Path(where) if where is not None else Path(__file__).resolve().parent
    head = _run(["git", "rev-parse", "HEAD"], cwd=here)
    if not head:
        return None
    top = _run(["git", "rev-parse", "--show-toplevel"], cwd=here)
    excludes = [f":(exclude,top){p}" for p in NOT_CODE] if top else []
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)", *excludes], cwd=here)
    return head + ("+dirty" if dirty else "")


def _built_commit() -> str | None:
    """The commit an installed package was built from; None in a checkout (no _build_info)."""
    try:
        from .. import _build_info  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(_build_info, "GIT_COMMIT", None)


@functools.lru_cache(maxsize=1)
def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


@functools.lru_cache(maxsize=1)
def packages() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    if "nvmelab" not in out:
        from .. import __version__

        out["nvmelab"] = __version__
    return out


@functools.lru_cache(maxsize=1)
def gpu() -> dict | None:
    """GPU names, driver version and the CUDA version the driver supports, from nvidia-smi; None
    where there is no NVIDIA GPU."""
    if not shutil.which("nvidia-smi"):
        return None
    out = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if not out:
        return None
    names, driver = [], None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if parts and parts[0]:
            names.append(parts[0])
            driver = parts[1] if len(parts) > 1 else driver
    if not names:
        return None
    cuda = None  # the CUDA version the driver supports ("CUDA Version : 13.0" in nvidia-smi --version)
    for line in (_run(["nvidia-smi", "--version"]) or "").splitlines():
        if line.lower().startswith("cuda version"):
            cuda = line.split(":", 1)[1].strip()
    return {"names": names, "driver": driver, "cuda": cuda}


@functools.lru_cache(maxsize=1)
def build() -> dict | None:
    try:
        from .. import build_info

        return build_info()
    except Exception as exc:  # the extension may be missing: say so rather than fail a record
        log.debug("build_info unavailable: %s", exc)
        return None


def memory_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """Total memory the kernel sees (MemTotal), in bytes; None where unreadable."""
    try:
        with open(meminfo, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@functools.lru_cache(maxsize=1)
def virtualisation(sysfs: str = "/sys/devices/system/clocksource/clocksource0") -> str:
    """What the host runs on: ``kvm`` (the KVM paravirtual clock is offered), ``hypervisor (kind
    unknown)`` (the CPU says it runs under one), ``none found``; a container runtime is added
    when systemd-detect-virt names one."""
    kinds = []
    try:
        with open(f"{sysfs}/available_clocksource", encoding="ascii") as f:
            clocks = f.read().split()
    except OSError:
        clocks = []
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            hyper = " hypervisor" in f.read()
    except OSError:
        hyper = False
    if "kvm-clock" in clocks:
        kinds.append("kvm")
    elif "xen" in clocks:
        kinds.append("xen")
    elif "hyperv_clocksource_tsc_page" in clocks:
        kinds.append("hyper-v")
    elif hyper:
        kinds.append("hypervisor (kind unknown)")
    container = _run(["systemd-detect-virt", "--container"])
    if container and container != "none":
        kinds.append(f"container ({container})")
    return ", ".join(kinds) or "none found"


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def capture(target_info: dict | None = None, **extra: Any) -> dict:
    """The provenance object of one record.

    target_info: what nvmelab._native.PerfTarget.info() returned (backend, profile,
    scale, devices); emulated targets must carry profile and scale.
    """
    topo = _cpus.topology()
    prov: dict[str, Any] = {
        "git_commit": git_commit(),
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_layout": topo.describe(),
        "memory_bytes": memory_bytes(),
        "virtualisation": virtualisation(),
        "kernel": platform.release(),
        "packages": packages(),
        "utc": utc_now(),
        "gpu": gpu(),
        "build": build(),
    }
    if target_info:
        prov["profile"] = target_info.get("profile")
        prov["scale"] = target_info.get("scale")
        prov["devices"] = target_info.get("devices")
    prov.update(extra)
    return prov
