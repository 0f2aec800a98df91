"""The vram-cache study (sec-experiments-vram-cache): configurations, one run, sweeps, records.

At a fixed memory budget (a fraction of the state vector), compare how the paging workload of
:mod:`nvmelab.tier.workload` runs on

* one device, and RAID-0 over 2, 4 and 7 devices, without a cache (a working buffer of the budget,
  one request per page, as swap pages);
* RAID-0 over the most devices with a write-back cache of the budget in host memory;
* the same with the cache in GPU memory, when cupy and a CUDA device are present; otherwise the
  configuration is recorded with ``status="not run"`` and the reason (never a number).

Every run opens a fresh emulated target (profile and scale named in the record), writes the
seeded initial state straight to the volume, resets the counters, runs the workload plus the final
write-back (the timed part), then reads the state back and compares its SHA-256 with an
in-memory run of the same workload (``checksum_ok``).

Record keys beyond the schema: ``mibs`` is the effective throughput (pages the workload touched x
page size / run time), ``device_mibs`` and ``per_device`` the bytes the devices moved, ``iops`` the
device commands per second, ``hit_ratio`` and ``unused/clean/dirty`` (mean over the run; ``*_end``
at its end, before the flush) the cache's, ``loadavg`` the host load when the run started.

Key functions:
    plan(preset, **overrides) -> StudyPlan     the preset's sizes and configurations
    run_one(config, sp, ...) -> dict           one record (nvmelab.records schema + tier keys)
    sweep(preset, ...) -> Path                 run (or resume) the sweep; the records file
    load(path) -> DataFrame                    records as a flat frame (one row per run)
    per_device(df) -> DataFrame                one row per run and device (read/write MiB/s)
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Optional


from .. import provenance as _prov
from .. import records
from . import workload as W
from .cache import Cache, GpuUnavailable, gpu_available
from .volume import Volume

log = logging.getLogger(__name__)

STUDY = "vram_cache"
TOOL = "nvmelab-tier"
MIB = 1 << 20
#: State size at or below which the final state is compared with an in-memory run.
VERIFY_MAX_QUBITS = 26
#: Smallest memory budget in pages (a gate on a far qubit holds 2 pages; the cache needs room to evict).
MIN_BUDGET_PAGES = 4
#: The seed's array: 7 NVMe sticks.
SEED_NDEVS = 7

PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"nqubits": 19, "depth": 4, "mix_accesses": 512, "fractions": ("1/16", "1/4"),
              "ndevs": (1, 2, 4, 7), "policies": ("lru",), "reps": 1},
    "standard": {"nqubits": 21, "depth": 6, "mix_accesses": 2048,
                 "fractions": ("1/64", "1/32", "1/16", "1/8", "1/4"), "ndevs": (1, 2, 4, 7),
                 "policies": ("lru", "clock"), "reps": 2},
    "paper": {"nqubits": 24, "depth": 16, "mix_accesses": 8192,
              "fractions": ("1/64", "1/32", "1/16", "1/8", "1/4"), "ndevs": (1, 2, 4, 7),
              "policies": ("lru", "clock"), "reps": 3},
}


@dataclass(frozen=True)
class Config:
    """One configuration: the volume, the pager and the workload."""

    workload: str               # "circuit" | "random"
    fraction: str               # memory budget as a fraction of the state, e.g. "1/16"
    ndevs: int
    cache: str = "none"         # "none" | "host" | "gpu"
    policy: str = "lru"

    @property
    def layout(self) -> str:
        return "single" if self.ndevs == 1 else "raid0"

    @property
    def label(self) -> str:
        vol = "single device" if self.ndevs == 1 else f"RAID-0 x{self.ndevs}"
        if self.cache == "none":
            return vol
        return f"{vol} + {self.cache} cache ({self.policy})"

    @property
    def key(self) -> str:
        return f"{self.workload}/{self.fraction}/{self.layout}{self.ndevs}/{self.cache}/{self.policy}"


@dataclass(frozen=True)
class StudyPlan:
    preset: str
    state: W.StateLayout
    depth: int
    mix_accesses: int
    reps: int
    configs: tuple
    profile: str = "pm1753"
    scale: Optional[float] = None     # None: the profile's default
    chunk: int = 64 * 1024
    qdepth: int = 32
    readahead: int = 4
    coalesce: int = 1 << 20
    seed: int = 1
    serpentine: bool = True
    write_fraction: float = 0.5
    extra_uri: str = ""
    #: a real target (``pci://...``) instead of the emulated one; its first ``ndevs`` controllers
    #: are used and their namespace 1 is OVERWRITTEN, so runs need ``allow_write=True``.
    target: Optional[str] = None
    allow_write: bool = False

    def uri(self, ndevs: int) -> str:
        if self.target:
            return self.target
        nsze = -(-self.state.nbytes // self.chunk) * self.chunk + self.chunk
        u = f"emu://?ndev={ndevs}&nsze={nsze}&lbads=4096&profile={self.profile}"
        if self.scale is not None:
            u += f"&scale={self.scale:g}"
        return u + (f"&{self.extra_uri}" if self.extra_uri else "")


def preset_name(preset: Optional[str] = None) -> str:
    """The preset: the argument, else $NVMELAB_PRESET, else quick; unknown names are an error."""
    name = preset or os.environ.get("NVMELAB_PRESET") or "quick"
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r} (one of {', '.join(PRESETS)})")
    return name


def fraction_of(s: str) -> Fraction:
    try:
        f = Fraction(s)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"fraction: {s!r} is not a fraction like '1/16'") from None
    if not 0 < f <= 1:
        raise ValueError(f"fraction: {s!r} must be in (0, 1]")
    return f


def plan(preset: Optional[str] = None, *, nqubits: Optional[int] = None, depth: Optional[int] = None,
         fractions: Optional[Iterable[str]] = None, ndevs: Optional[Iterable[int]] = None,
         policies: Optional[Iterable[str]] = None, workloads: Iterable[str] = ("circuit", "random"),
         reps: Optional[int] = None, dtype: str = "complex64", page: int = 16384, **kw: Any) -> StudyPlan:
    """The configurations of a preset, with any field overridden (see :class:`StudyPlan`)."""
    name = preset_name(preset)
    p = dict(PRESETS[name])
    nq = nqubits or p["nqubits"]
    fr = tuple(fractions or p["fractions"])
    for f in fr:
        fraction_of(f)
    devs = tuple(ndevs or p["ndevs"])
    pols = tuple(policies or p["policies"])
    wls = tuple(workloads)
    for w in wls:
        if w not in ("circuit", "random"):
            raise ValueError(f"workloads: {w!r} is not 'circuit' or 'random'")
    state = W.StateLayout(nq, dtype, page)
    for f in fr:
        pages = int(state.nbytes * fraction_of(f)) // state.page
        if pages < MIN_BUDGET_PAGES:
            raise ValueError(f"fractions: {f} of a {state.nbytes}-byte state is {pages} page(s) of {state.page} "
                             f"bytes; a budget needs at least {MIN_BUDGET_PAGES} (use more qubits or smaller pages)")
    top = max(devs)
    configs = []
    for w in wls:
        for f in fr:
            configs += [Config(w, f, n) for n in devs]
            configs += [Config(w, f, top, "host", pol) for pol in pols]
            configs += [Config(w, f, top, "gpu", pol) for pol in pols]
    sp = StudyPlan(preset=name, state=state, depth=depth or p["depth"],
                   mix_accesses=p["mix_accesses"], reps=reps or p["reps"], configs=tuple(configs))
    return replace(sp, **kw) if kw else sp


# -- references (in-memory runs), cached per process --
_REF: dict = {}


def reference_checksum(sp: StudyPlan, workload: str) -> Optional[str]:
    """SHA-256 of the final state of an in-memory run of the workload, or None when too large."""
    if sp.state.nqubits > VERIFY_MAX_QUBITS:
        return None
    key = (sp.state, workload, sp.depth, sp.mix_accesses, sp.seed, sp.write_fraction)
    if key not in _REF:
        ref = W.MemoryPager(sp.state)
        W.init_state(ref, sp.state, sp.seed)
        _apply(ref, sp, workload)
        _REF[key] = W.checksum(ref.lines)
    return _REF[key]


def _apply(pager: Any, sp: StudyPlan, workload: str) -> int:
    if workload == "circuit":
        gates = W.random_circuit(sp.state.nqubits, sp.depth, sp.seed)
        return W.run_circuit(pager, sp.state, gates, serpentine=sp.serpentine)
    steps = W.random_mix(sp.state.npages, sp.mix_accesses, sp.write_fraction, sp.seed)
    return W.run_mix(pager, sp.state, steps)[0]


def emu_info(uri: str) -> dict:
    """Profile and scale of an emulated URI, as the native layer resolves them ({} for real targets)."""
    from .. import _native

    if not uri.startswith("emu://"):
        return {"profile": None, "scale": None, "model": None}
    t = _native.PerfTarget(uri, "", False, False)
    try:
        info = dict(t.info())
    finally:
        t.close()
    return {"profile": info.get("profile"), "scale": info.get("scale"), "model": info.get("model")}


def _base_record(cfg: Config, sp: StudyPlan, uri: str, rep: int, info: dict) -> dict:
    budget = int(sp.state.nbytes * fraction_of(cfg.fraction))
    prov = _prov.capture({"profile": info.get("profile"), "scale": info.get("scale")})
    prov["emu_model"] = info.get("model")
    return {
        "study": STUDY, "tool": TOOL, "target": uri,
        "backend": "nvmelab-emu" if uri.startswith("emu://") else "nvmelab-pci",
        "rw": cfg.workload, "iosize": sp.state.page, "qdepth": sp.qdepth, "nqueues": 1,
        "ndevs": cfg.ndevs, "ncpus": 1, "runtime_s": 0.0, "iops": 0.0, "mibs": 0.0, "lat_ns": None,
        "cpu_usage": None, "cpu_freqs": None, "governor": None, "turbo": None, "smt": None,
        "thr_sib": False, "stress": False, "repetition": rep, "provenance": prov,
        # tier keys
        "preset": sp.preset, "plan_id": plan_id(sp), "config": cfg.label, "config_key": cfg.key, "layout": cfg.layout,
        "chunk": sp.chunk if cfg.layout == "raid0" else 0, "cache": cfg.cache,
        "policy": cfg.policy if cfg.cache != "none" else None,
        "fraction": cfg.fraction, "budget_bytes": budget, "state_bytes": sp.state.nbytes,
        "nqubits": sp.state.nqubits, "dtype": sp.state.dtype, "page": sp.state.page,
        "depth": sp.depth if cfg.workload == "circuit" else None,
        "accesses": sp.mix_accesses if cfg.workload == "random" else None,
        "loadavg": list(os.getloadavg()), "seed": sp.seed, "readahead": sp.readahead if cfg.cache != "none" else 0,
        "coalesce": sp.coalesce if cfg.cache != "none" else sp.state.page, "writeback_percent": None,
    }


def run_one(cfg: Config, sp: StudyPlan, rep: int = 0) -> dict:
    """Run one configuration once and return its record (status "ok", or "not run" with a reason)."""
    uri = sp.uri(cfg.ndevs)
    if not uri.startswith("emu://") and not sp.allow_write:
        raise ValueError(f"target {uri!r}: the study overwrites namespace 1 of the devices it uses; "
                         "pass allow_write=True (CLI: --allow-write) to permit it")
    info = emu_info(uri)
    rec = _base_record(cfg, sp, uri, rep, info)
    if cfg.cache == "gpu":
        ok, why = gpu_available()
        if not ok:
            rec.update(status="not run", reason=f"GPU-memory cache: {why}")
            return rec
    import nvmelab

    budget = rec["budget_bytes"]
    with nvmelab.open(uri) as t:
        with Volume.open(t, layout=cfg.layout, ndevs=cfg.ndevs, chunk=sp.chunk, qdepth=sp.qdepth) as vol:
            W.write_initial_state(vol, sp.state, sp.seed)
            if cfg.cache == "none":
                pager: Any = W.DirectPager(vol, sp.state, budget)
            else:
                try:
                    pager = Cache(vol, budget, sp.state.page, dtype=sp.state.np_dtype, policy=cfg.policy,
                                  readahead=sp.readahead, coalesce=sp.coalesce, memory=cfg.cache)
                except GpuUnavailable as exc:
                    rec.update(status="not run", reason=str(exc))
                    return rec
            try:
                vol.reset_stats()
                t0 = time.perf_counter()
                touched = _apply(pager, sp, cfg.workload)
                t_work = time.perf_counter() - t0
                end_state = pager.fractions() if isinstance(pager, Cache) else None
                mean_state = pager.mean_fractions() if isinstance(pager, Cache) else None
                pager.flush()
                runtime = time.perf_counter() - t0
                devstats = [s.as_dict() for s in vol.stats]
                pstats = pager.stats()
                final = W.read_state(vol, sp.state)
            finally:
                close = getattr(pager, "close", None)
                if close:
                    close()
    got = W.checksum(final)
    want = reference_checksum(sp, cfg.workload)
    cmds = sum(d["reads"] + d["writes"] for d in devstats)
    dev_bytes = sum(d["read_bytes"] + d["write_bytes"] for d in devstats)
    per_dev = [dict(d, dev=i, read_mibs=d["read_bytes"] / MIB / runtime, write_mibs=d["write_bytes"] / MIB / runtime)
               for i, d in enumerate(devstats)]
    rec.update(
        status="ok", runtime_s=runtime, workload_s=t_work, flush_s=runtime - t_work,
        iops=cmds / runtime, mibs=touched * sp.state.page / MIB / runtime,
        pages_touched=touched, device_commands=cmds, device_bytes=dev_bytes,
        device_mibs=dev_bytes / MIB / runtime, mean_request_bytes=dev_bytes / cmds if cmds else 0.0,
        per_device=per_dev, pager=pstats, checksum=got, reference_checksum=want,
        checksum_ok=None if want is None else got == want,
    )
    if isinstance(pager, Cache):
        # line state averaged over the run (sampled after every batch) and at its end, before the flush
        rec.update(hit_ratio=pstats["hit_ratio"], unused=mean_state["unused"], clean=mean_state["clean"],
                   dirty=mean_state["dirty"], unused_end=end_state["unused"], clean_end=end_state["clean"],
                   dirty_end=end_state["dirty"])
    return rec


def results_path(preset: str, root: Optional[Path] = None) -> Path:
    """data/results/vram_cache/<host>/<preset>.jsonl, rooted as every study's results are
    (experiments.runner.default_results_root: NVMELAB_RESULTS, build/results for the quick preset)."""
    from ..experiments import host_id
    from ..experiments import runner

    if root is None:
        root = runner.default_results_root(preset)
    return runner.results_path(root, STUDY, host_id(), preset)


def plan_id(sp: StudyPlan) -> str:
    """A short id of everything that shapes a run's result except the configuration itself and the
    repetition: records with the same id and configuration key are repetitions of one point."""
    import hashlib

    parts = (sp.state.nqubits, sp.state.dtype, sp.state.page, sp.depth, sp.mix_accesses, sp.profile, sp.scale,
             sp.chunk, sp.qdepth, sp.readahead, sp.coalesce, sp.seed, sp.serpentine, sp.write_fraction, sp.extra_uri)
    if sp.target:
        parts += (sp.target,)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def sweep(preset: Optional[str] = None, *, study_plan: Optional[StudyPlan] = None,
          path: Optional[Path] = None, progress: Any = None) -> Path:
    """Run every configuration and repetition not yet in the records file; return the file.

    Each finished run is appended atomically, so an interrupted sweep keeps its finished runs and
    a rerun resumes. A run whose checksum differs from the in-memory reference is recorded (with
    ``checksum_ok`` false) and the sweep raises after recording it.
    """
    sp = study_plan or plan(preset)
    path = Path(path) if path else results_path(sp.preset)
    pid = plan_id(sp)
    done: set = set()
    if path.exists():
        for r in records.load_records(path):
            if r.get("plan_id") == pid:
                done.add((r.get("config_key"), r.get("repetition")))
    bad = []
    for rep in range(sp.reps):
        for cfg in sp.configs:
            if (cfg.key, rep) in done:
                continue
            rec = run_one(cfg, sp, rep)
            records.append_records(path, [rec])
            if progress:
                progress(rec)
            if rec.get("checksum_ok") is False:
                bad.append(cfg.key)
    if bad:
        raise RuntimeError(f"final state differs from the in-memory reference for: {', '.join(bad)}")
    return path


def load(path: Path) -> Any:
    """The records of a file as a pandas DataFrame (one row per run; per_device kept as lists)."""
    import pandas as pd

    recs = records.load_records(path)
    rows = []
    for r in recs:
        row = {k: v for k, v in r.items() if k not in ("provenance", "pager")}
        prov = r.get("provenance") or {}
        row["profile"] = prov.get("profile")
        row["scale"] = prov.get("scale")
        row["host"] = prov.get("host")
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df["fraction_value"] = df["fraction"].map(lambda s: float(Fraction(s)))
    return df


def summary(df: Any) -> Any:
    """Mean and population std over repetitions of the ok runs, per configuration."""
    ok = df[df["status"] == "ok"]
    keys = ["rw", "fraction", "fraction_value", "config", "config_key", "ndevs", "cache", "policy"]
    cols = [c for c in ("mibs", "device_mibs", "iops", "runtime_s", "hit_ratio", "unused", "clean", "dirty",
                        "mean_request_bytes") if c in ok.columns]
    g = ok.groupby(keys, dropna=False)[cols]
    mean = g.mean().add_suffix("_mean")
    std = g.std(ddof=0).add_suffix("_std")
    return mean.join(std).reset_index()


def per_device(df: Any) -> Any:
    """One row per run and device: read_mibs, write_mibs (runs with status ok)."""
    import pandas as pd

    rows = []
    for r in df[df["status"] == "ok"].itertuples():
        for d in r.per_device:
            rows.append({"config": r.config, "workload": r.rw, "fraction": r.fraction, "ndevs": r.ndevs,
                         "cache": r.cache, "repetition": r.repetition, "dev": d["dev"],
                         "read_mibs": d["read_mibs"], "write_mibs": d["write_mibs"]})
    return pd.DataFrame(rows)


#: An array whose busiest device moved at most this multiple of the least busy one's bytes is
#: called evenly loaded (the seed's sticks were within 0.3 % of each other).
BALANCED_SPREAD = 1.10


def verdict(ratios: Any, better: str = "faster than", worse: str = "slower than") -> str:
    """``better`` when every ratio is above 1, ``worse`` when every one is below, else a mixed phrase."""
    r = [float(x) for x in ratios]
    if not r:
        return "not measured against"
    if all(x > 1 for x in r):
        return better
    if all(x < 1 for x in r):
        return worse
    return f"sometimes {better.split()[0]}, sometimes {worse.split()[0]} {better.split(' ', 1)[1]}".strip()


def seed_findings(agg: Any, dev: Any) -> dict[str, Any]:
    """Seed 003's conclusions set against our records (``summary`` and ``per_device`` tables).

    Returns scalars only (numbers and short verdict phrases) for the chapter's prose: the
    striping gain of the largest array over one device, the spread of per-device load, the
    cache's gain at equal memory budget per workload (with hit ratio and request size), its
    clean/dirty split, and the seed's own numbers for each claim, computed from its
    transcribed tables (data/reference/seeds/seed003_*.csv). Nothing here is typed in."""
    from .. import reference

    out: dict[str, Any] = {}
    nc = agg[agg["cache"] == "none"].copy()
    one = nc[nc["ndevs"] == 1].set_index(["rw", "fraction"])["mibs_mean"]
    nc["speedup"] = [r.mibs_mean / one.get((r.rw, r.fraction), float("nan")) for r in nc.itertuples()]
    top = int(nc["ndevs"].max())
    big = nc[nc["ndevs"] == top]
    out["ndevs"] = top
    out["stripe_gain_min"] = float(big["speedup"].min())
    out["stripe_gain_max"] = float(big["speedup"].max())
    for w, g in big.groupby("rw"):
        g = g.sort_values("fraction_value")
        out[f"stripe_gain_{w}_small"] = float(g["speedup"].iloc[0])
        out[f"stripe_gain_{w}_large"] = float(g["speedup"].iloc[-1])
        out[f"stripe_budget_{w}_small"] = str(g["fraction"].iloc[0])
        out[f"stripe_budget_{w}_large"] = str(g["fraction"].iloc[-1])
    # the seed: one SATA SSD against the mdadm array (MiB/s; Glances' M is binary)
    disk = reference.seed003_disk_io()
    whole = disk[~disk["partition"]]
    sata = whole[(whole["setup"] == "sata-ssd-swap") & (whole["device"] == "sdb")].iloc[0]
    md0 = whole[(whole["setup"] == "mdadm-raid0-swap") & (whole["device"] == "md0")].iloc[0]
    mib = float(1 << 20)
    out["seed_sata_mibs"] = float(sata["read_bytes_s"] + sata["write_bytes_s"]) / mib
    out["seed_md0_mibs"] = float(md0["read_bytes_s"] + md0["write_bytes_s"]) / mib
    out["seed_md0_over_sata"] = out["seed_md0_mibs"] / out["seed_sata_mibs"]
    # balance over the array's devices
    sticks = whole[(whole["setup"] == "mdadm-raid0-swap") & whole["device"].str.startswith("nvme")]
    out["seed_sticks"] = int(len(sticks))
    out["seed_qubits"] = int(reference.seed003_value("workload", "max_qubits"))
    out["seed_stick_read_min"] = float(sticks["read_bytes_s"].min()) / mib
    out["seed_stick_read_max"] = float(sticks["read_bytes_s"].max()) / mib
    out["seed_stick_spread"] = float(sticks["read_bytes_s"].max() / sticks["read_bytes_s"].min())
    d = dev[(dev["ndevs"] == top) & (dev["cache"] == "none")]
    per = d.groupby(["workload", "fraction", "dev"])["read_mibs"].mean().reset_index()
    spread = per.groupby(["workload", "fraction"])["read_mibs"].agg(lambda x: x.max() / x.min() if x.min() > 0
                                                                  else float("nan"))
    out["stripe_spread_max"] = float(spread.max())
    out["balanced_spread"] = BALANCED_SPREAD
    out["stripe_balance"] = ("evenly loaded, like the seed's" if out["stripe_spread_max"] <= BALANCED_SPREAD
                             else "less evenly loaded than the seed's")
    # ZFS against mdadm in the seed's own tables (whole devices only)
    zfs = whole[(whole["setup"] == "zfs-swap") & whole["device"].str.startswith("nvme")]
    out["seed_zfs_read_ratio"] = float(sticks["read_bytes_s"].mean() / zfs["read_bytes_s"].mean())
    out["seed_zfs_write_ratio"] = float(sticks["write_bytes_s"].mean() / zfs["write_bytes_s"].mean())
    out["seed_zfs_latency_ratio"] = reference.seed003_value("zfs-vs-mdadm", "latency_ratio")
    out["seed_iowait_mdadm"] = reference.seed003_value("mdadm-raid0-swap", "io_wait")
    out["seed_iowait_zfs"] = reference.seed003_value("zfs-swap", "io_wait")
    # the cache at equal budget, per workload
    host = agg[agg["cache"] == "host"]
    cmp = host.merge(nc[nc["ndevs"] == host["ndevs"].max()][["rw", "fraction", "mibs_mean",
                                                            "mean_request_bytes_mean"]],
                     on=["rw", "fraction"], suffixes=("", "_nocache"))
    cmp["gain"] = cmp["mibs_mean"] / cmp["mibs_mean_nocache"]
    cmp["req_ratio"] = cmp["mean_request_bytes_mean"] / cmp["mean_request_bytes_mean_nocache"]
    out["cache_gain_min"] = float(cmp["gain"].min()) if len(cmp) else None
    out["cache_gain_max"] = float(cmp["gain"].max()) if len(cmp) else None
    out["workloads"] = sorted(cmp["rw"].unique())
    for w, g in cmp.groupby("rw"):
        out[f"cache_verdict_{w}"] = verdict(g["gain"])
        out[f"cache_gain_{w}_min"] = float(g["gain"].min())
        out[f"cache_gain_{w}_max"] = float(g["gain"].max())
        best = g.loc[g["gain"].idxmax()]
        out[f"cache_best_budget_{w}"] = str(best["fraction"])
        out[f"cache_hit_{w}_min"] = float(g["hit_ratio_mean"].min())
        out[f"cache_hit_{w}_max"] = float(g["hit_ratio_mean"].max())
        out[f"cache_req_{w}_min"] = float(g["req_ratio"].min())
        out[f"cache_req_{w}_max"] = float(g["req_ratio"].max())
        out[f"cache_req_verdict_{w}"] = verdict(g["req_ratio"], "larger than", "smaller than")
        out[f"cache_dirty_{w}_pct"] = 100 * float(g["dirty_mean"].mean())
        out[f"cache_clean_{w}_pct"] = 100 * float(g["clean_mean"].mean())
    bc = reference.seed003_bcache().set_index("stat")["number"]
    for k in ("unused", "clean", "dirty"):
        out[f"seed_bcache_{k}_pct"] = float(bc[k])
    return out
