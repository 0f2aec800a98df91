# SPDX-License-Identifier: BSD-3-Clause
"""The tier engine: one configuration of the vram_cache study, run once, one record.

The study itself (configurations, presets, resume) is ``src/nvmelab/studies/vram_cache/spec.toml``, run by
the sweep runner like every study; this module is the engine its spec names (spec.ENGINES["tier"]).

A run pages the state-vector workload of :mod:`nvmelab.engines.tier.workload` through a volume of
``ndevs`` devices (one device, or RAID-0 over several) at a memory budget of ``fraction`` of the
state: without a cache (a working buffer of the budget, one request per page, as swap pages), or
with a write-back cache of the budget in host or GPU memory. It opens a fresh target, writes the
seeded initial state straight to the volume, resets the counters, runs the workload plus the final
write-back (the timed part), then reads the state back and compares its SHA-256 with an in-memory
run of the same workload (``checksum_ok``). A GPU-memory cache on a host without cupy and a CUDA
device raises ValueError (the runner records the run as skipped, with the reason; never a number).

Record keys beyond the schema: ``mibs`` is the effective throughput (pages the workload touched x
page size / run time), ``device_mibs`` and ``per_device`` the bytes the devices moved, ``iops`` the
device commands per second, ``hit_ratio``, ``unused``/``clean``/``dirty`` (averaged over the run)
and ``*_end`` (at its end, before the flush) the cache's, ``loadavg`` the host load when the run
started, ``config`` a label ("RAID-0 x7 + host cache (lru)") and ``config_key`` the configuration.

Key functions:
    run(study=..., rw=..., fraction=..., ndevs=..., cache=..., ...) -> dict    one record
    config_label(ndevs, cache, policy) -> str
"""

from __future__ import annotations

import logging
import os
import time
from fractions import Fraction
from typing import Any

from ...driver import uri as _uri
from ...host import cpus as _cpus
from ...host import provenance as _prov
from ...results.records import MIB, engine_record
from . import workload as W
from .cache import Cache, GpuUnavailable, gpu_available
from .volume import Volume

log = logging.getLogger(__name__)

STUDY = "vram_cache"
TOOL = "nvmelab-tier"
#: State size at or below which the final state is compared with an in-memory run.
VERIFY_MAX_QUBITS = 26
#: Smallest memory budget in pages (a gate on a far qubit holds 2 pages; the cache needs room to evict).
MIN_BUDGET_PAGES = 4
#: The seed's array: 7 NVMe sticks.
SEED_NDEVS = 7
#: Fixed knobs of the workload (not study parameters).
SERPENTINE = True
WRITE_FRACTION = 0.5
WORKLOADS = ("circuit", "random")
CACHES = ("none", "host", "gpu")


def fraction_of(s: str) -> Fraction:
    """A memory budget "1/16" as a Fraction in (0, 1]; a clear error otherwise."""
    try:
        f = Fraction(s)
    except (ValueError, ZeroDivisionError, TypeError):
        raise ValueError(f"fraction: {s!r} is not a fraction like '1/16'") from None
    if not 0 < f <= 1:
        raise ValueError(f"fraction: {s!r} must be in (0, 1]")
    return f


def config_label(ndevs: int, cache: str = "none", policy: str = "lru") -> str:
    vol = "single device" if ndevs == 1 else f"RAID-0 x{ndevs}"
    return vol if cache == "none" else f"{vol} + {cache} cache ({policy})"


def config_key(rw: str, fraction: str, ndevs: int, cache: str = "none", policy: str = "lru") -> str:
    layout = "single" if ndevs == 1 else "raid0"
    return f"{rw}/{fraction}/{layout}{ndevs}/{cache}/{policy}"


def target_uri(target: str, state: W.StateLayout, chunk: int) -> str:
    """An emulated target sized for the state (``nsze``, 4 KiB blocks); other targets as given."""
    if _uri.kind(target) != "emu" or _uri.get(target, "nsze") is not None:
        return target
    nsze = -(-state.nbytes // chunk) * chunk + chunk
    return _uri.with_params(target, nsze=nsze, lbads=4096)


# -- references (in-memory runs), cached per process --
_REF: dict = {}


def _apply(pager: Any, state: W.StateLayout, rw: str, depth: int, accesses: int, seed: int) -> int:
    if rw == "circuit":
        gates = W.random_circuit(state.nqubits, depth, seed)
        return W.run_circuit(pager, state, gates, serpentine=SERPENTINE)
    steps = W.random_mix(state.npages, accesses, WRITE_FRACTION, seed)
    return W.run_mix(pager, state, steps)[0]


def reference_checksum(state: W.StateLayout, rw: str, depth: int, accesses: int, seed: int) -> str | None:
    """SHA-256 of the final state of an in-memory run of the workload, or None when too large."""
    if state.nqubits > VERIFY_MAX_QUBITS:
        return None
    key = (state, rw, depth, accesses, seed, WRITE_FRACTION)
    if key not in _REF:
        ref = W.MemoryPager(state)
        W.init_state(ref, state, seed)
        _apply(ref, state, rw, depth, accesses, seed)
        _REF[key] = W.checksum(ref.lines)
    return _REF[key]


def emu_info(uri: str) -> dict:
    """Profile, scale and device model of an emulated URI as the native layer resolves them."""
    from ... import _native

    if _uri.kind(uri) != "emu":
        return {"profile": None, "scale": None, "model": None}
    from ...driver.errors import check_uri

    t = _native.PerfTarget(check_uri(uri), "", False, False)
    try:
        info = dict(t.info())
    finally:
        t.close()
    return {"profile": info.get("profile"), "scale": info.get("scale"), "model": info.get("model")}


def run(
    *,
    study: str = STUDY,
    target: str = "emu://?profile=pm1753",
    rw: str = "circuit",
    fraction: str = "1/16",
    ndevs: int = 1,
    cache: str = "none",
    policy: str = "lru",
    nqubits: int = 19,
    dtype: str = "complex64",
    page: int = 16384,
    depth: int = 4,
    accesses: int = 512,
    chunk: int = 64 * 1024,
    qdepth: int = 32,
    readahead: int = 4,
    coalesce: int = 1 << 20,
    seed: int = 1,
    allow_write: bool = False,
) -> dict:
    """Run one configuration once and return its record (see the module docstring)."""
    if rw not in WORKLOADS:
        raise ValueError(f"rw: {rw!r} is not one of {', '.join(WORKLOADS)}")
    if cache not in CACHES:
        raise ValueError(f"cache: {cache!r} is not one of {', '.join(CACHES)}")
    ndevs = int(ndevs)
    if ndevs < 1:
        raise ValueError(f"ndevs: {ndevs} must be >= 1")
    state = W.StateLayout(int(nqubits), dtype, int(page))
    budget = int(state.nbytes * fraction_of(fraction))
    if budget // state.page < MIN_BUDGET_PAGES:
        raise ValueError(
            f"fraction: {fraction} of a {state.nbytes}-byte state is {budget // state.page} page(s) of "
            f"{state.page} bytes; a budget needs at least {MIN_BUDGET_PAGES}"
        )
    uri = target_uri(target, state, chunk)
    if _uri.kind(uri) != "emu" and not allow_write:
        raise ValueError(
            f"target {uri!r}: the study overwrites namespace 1 of the devices it uses; "
            "set allow_write = true in the run's parameters to permit it"
        )
    if cache == "gpu":
        ok, why = gpu_available()
        if not ok:
            raise ValueError(f"GPU-memory cache: {why}")
    layout = "single" if ndevs == 1 else "raid0"
    info = emu_info(uri)
    prov = _prov.capture({"profile": info.get("profile"), "scale": info.get("scale")})
    prov["emu_model"] = info.get("model")
    rec = engine_record(
        study=study,
        tool=TOOL,
        target=uri,
        backend="nvmelab-emu" if _uri.kind(uri) == "emu" else "nvmelab-pci",
        rw=rw,
        iosize=state.page,
        qdepth=qdepth,
        ndevs=ndevs,
        runtime_s=0.0,  # set below, with iops and mibs, once the workload has run
        iops=0.0,
        mibs=0.0,
        host=_cpus.host_state(),
        seed=seed,
        provenance=prov,
    )
    rec.update(
        {
            "config": config_label(ndevs, cache, policy),
            "config_key": config_key(rw, fraction, ndevs, cache, policy),
            "layout": layout,
            "chunk": chunk if layout == "raid0" else 0,
            "cache": cache,
            "policy": policy if cache != "none" else None,
            "fraction": fraction,
            "budget_bytes": budget,
            "state_bytes": state.nbytes,
            "nqubits": state.nqubits,
            "dtype": state.dtype,
            "page": state.page,
            "depth": depth if rw == "circuit" else None,
            "accesses": accesses if rw == "random" else None,
            "loadavg": list(os.getloadavg()),
            "readahead": readahead if cache != "none" else 0,
            "coalesce": coalesce if cache != "none" else state.page,
            "writeback_percent": None,
        }
    )
    import nvmelab

    with nvmelab.open(uri) as t:
        with Volume.open(t, layout=layout, ndevs=ndevs, chunk=chunk, qdepth=qdepth) as vol:
            W.write_initial_state(vol, state, seed)
            if cache == "none":
                pager: Any = W.DirectPager(vol, state, budget)
            else:
                try:
                    pager = Cache(
                        vol,
                        budget,
                        state.page,
                        dtype=state.np_dtype,
                        policy=policy,
                        readahead=readahead,
                        coalesce=coalesce,
                        memory=cache,
                    )
                except GpuUnavailable as exc:
                    raise ValueError(str(exc)) from None
            try:
                vol.reset_stats()
                t0 = time.perf_counter()
                c0 = time.process_time()
                touched = _apply(pager, state, rw, depth, accesses, seed)
                t_work = time.perf_counter() - t0
                end_state = pager.fractions() if isinstance(pager, Cache) else None
                mean_state = pager.mean_fractions() if isinstance(pager, Cache) else None
                pager.flush()
                runtime = time.perf_counter() - t0
                cpu_s = time.process_time() - c0
                devstats = [s.as_dict() for s in vol.stats]
                pstats = pager.stats()
                final = W.read_state(vol, state)
            finally:
                close = getattr(pager, "close", None)
                if close:
                    close()
    got = W.checksum(final)
    want = reference_checksum(state, rw, depth, accesses, seed)
    cmds = sum(d["reads"] + d["writes"] for d in devstats)
    dev_bytes = sum(d["read_bytes"] + d["write_bytes"] for d in devstats)
    per_dev = [
        dict(d, dev=i, read_mibs=d["read_bytes"] / MIB / runtime, write_mibs=d["write_bytes"] / MIB / runtime)
        for i, d in enumerate(devstats)
    ]
    rec.update(
        status="ok",
        runtime_s=runtime,
        workload_s=t_work,
        flush_s=runtime - t_work,
        iops=cmds / runtime,
        ios=cmds,
        cpu_usage=round(cpu_s / runtime * 100.0, 1),  # this process: the pager and the emulated devices
        mibs=touched * state.page / MIB / runtime,
        pages_touched=touched,
        device_commands=cmds,
        device_bytes=dev_bytes,
        device_mibs=dev_bytes / MIB / runtime,
        mean_request_bytes=dev_bytes / cmds if cmds else 0.0,
        per_device=per_dev,
        pager=pstats,
        checksum=got,
        reference_checksum=want,
        checksum_ok=None if want is None else got == want,
    )
    if rec["checksum_ok"] is False:
        log.error("%s: the final state differs from the in-memory run", rec["config_key"])
    if isinstance(pager, Cache):
        # line state averaged over the run (sampled after every batch) and at its end, before the flush
        rec.update(
            hit_ratio=pstats["hit_ratio"],
            unused=mean_state["unused"],
            clean=mean_state["clean"],
            dirty=mean_state["dirty"],
            unused_end=end_state["unused"],
            clean_end=end_state["clean"],
            dirty_end=end_state["dirty"],
        )
    return rec
