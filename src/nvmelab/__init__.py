# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab: CPU- and GPU-initiated NVMe I/O, a user-space driver and reproducible studies.

Entry points:
    nvmelab.open(uri)                controllers of a target (emu://, pci://), a context manager
    nvmelab.engines.perf.run(...)    one closed-loop run -> one record (see nvmelab.results.records)
    nvmelab.build_info()             what the native core was compiled with

Packages, by concern (each imports only those listed before it, and the driver nothing of ours):
    driver    open(), Target, Controller, Namespace, QPair, DmaBuffer, errors, the NVMe spec
    host      cpus, hostvars, devices, provenance, scratch (temporary files), signals (SIGTERM as Ctrl-C)
    results   records, reference, checks, status, aggregation (analysis), plot style and helpers, bench
    engines   perf, gpu, blksum, tier (what makes a measurement)
    studies   spec, runner, distributed, paths, and one folder per study (<name>/spec.toml, its analysis)
    book      how results appear in the book: publication, coverage, answer, environments
    lease     the GPU lease plan (plan, host, gpu_tests; python -m nvmelab.lease)
    cli       the `nvmelab` command
"""

from __future__ import annotations

import logging

from ._version import __version__ as __version__

logging.getLogger(__name__).addHandler(logging.NullHandler())


def build_info() -> dict:
    """What this build has: the extension's compile-time facts plus ``parts``.

    The extension's keys: ``version``, ``cuda``, ``cuda_architectures``, ``io_uring``, ``blksum``,
    ``nbd``, ``nbd_reason``, ``sanitizers``, ``compiler``. ``parts`` maps each optional part (``cuda``,
    ``io_uring``, ``blksum``, ``nbd``) to ``{"available": bool, "detail": str}``, where ``detail`` says why an absent part
    is absent (e.g. no nvcc when the build was configured, or a kernel that refuses io_uring to this
    process). io_uring is always compiled in; its entry is probed at run time (one ring set up and
    torn down). Nothing here initialises CUDA: ``_native.cuda_status()`` says whether a GPU is usable.
    """
    from . import _native

    info = dict(_native.build_info())
    info["parts"] = {
        "cuda": _cuda_part(info),
        "io_uring": _io_uring_part(info),
        "blksum": _part(
            info.get("blksum", False), "blkhash-compatible checksums (OpenSSL)", "built without src/blksum"
        ),
        "nbd": _part(
            info.get("nbd", False),
            f"blksum reads nbd:// URIs and qemu-nbd served images ({info.get('nbd_reason', 'libnbd')})",
            info.get("nbd_reason") or "built without libnbd",
        ),
    }
    return info


def _part(available: bool, detail: str, why_not: str) -> dict:
    return {"available": bool(available), "detail": detail if available else why_not}


def _cuda_part(info: dict) -> dict:
    from . import _native

    if info.get("cuda"):
        return _part(True, f"compiled for architectures {info.get('cuda_architectures') or '?'}", "")
    why = info.get("cuda_reason") or _native.cuda_status().get("reason") or "built without CUDA"
    return _part(False, "", why)


def _io_uring_part(info: dict) -> dict:
    from . import _native

    if not info.get("io_uring"):
        return _part(False, "", "built without io_uring")
    probe = getattr(_native, "perf_io_uring_available", None)
    if probe is None or probe():
        return _part(True, "the kernel lets this process set up rings", "")
    try:  # why the kernel said no: the sysctl, else a seccomp filter (containers)
        with open("/proc/sys/kernel/io_uring_disabled", encoding="ascii") as f:
            disabled = f.read().strip()
    except OSError:
        disabled = ""
    if disabled and disabled != "0":
        why = f"the kernel refuses io_uring: sysctl kernel.io_uring_disabled={disabled}"
    else:
        why = "the kernel refuses io_uring to this process (a seccomp filter, e.g. a container's, or no io_uring)"
    return _part(False, "", why + "; the psync backend still works")


def __getattr__(name: str):
    # The driver API is imported on first use so that pure-Python parts (records,
    # analysis, plots, reference) work without a compiled extension.
    if name in {"open", "NvmeError", "ClosedError", "Controller", "Namespace", "QPair", "Completion", "DmaBuffer"}:
        from . import driver

        return getattr(driver, name)
    raise AttributeError(f"module 'nvmelab' has no attribute {name!r}")
