# SPDX-License-Identifier: BSD-3-Clause
"""A tiered NVMe store for paging: striped volumes, a write-back page cache, a paging workload.

Modules:
    volume    Volume (raid0 | single | linear over namespaces of one target), Request, TierIOError
    cache     Cache (write-back, LRU/CLOCK, read-ahead, coalesced write-back; host or GPU memory)
    workload  the state-vector paging workload (gates on qubits, random page mix) and its pagers
    engine    one run of the vram_cache study (spec src/nvmelab/studies/vram_cache/spec.toml), one record
"""

from __future__ import annotations

from .cache import Cache, GpuUnavailable, gpu_available
from .volume import Request, TierIOError, Volume

__all__ = ["Volume", "Request", "TierIOError", "Cache", "GpuUnavailable", "gpu_available"]
