"""nvmelab: CPU- and GPU-initiated NVMe I/O, a user-space driver and reproducible studies.

Entry points:
    nvmelab.open(uri)        controllers of a target (emu://, pci://), a context manager
    nvmelab.perf.run(...)    one closed-loop run -> one record (see nvmelab.records)
    nvmelab.build_info()     what the native core was compiled with
"""
from __future__ import annotations

import logging

from ._version import __version__

logging.getLogger(__name__).addHandler(logging.NullHandler())


def build_info() -> dict:
    """What the native extension was compiled with (CUDA, io_uring, blksum, compiler)."""
    from . import _native

    return dict(_native.build_info())


def __getattr__(name: str):
    # The driver API is imported on first use so that pure-Python parts (records,
    # analysis, plots, reference) work without a compiled extension.
    if name in {"open", "NvmeError", "ClosedError", "Controller", "Namespace", "QPair", "Completion", "DmaBuffer"}:
        from . import driver

        return getattr(driver, name)
    raise AttributeError(f"module 'nvmelab' has no attribute {name!r}")
