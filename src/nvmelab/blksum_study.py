"""The blksum queue-depth study (sec-experiments-blksum-qdepth): sweep, records, speed-ups.

Sweep: queue depth x digest x I/O mode x hash threads (the machine's best and 1) on
one generated image with data, zeros and holes, REPS runs per point. The image is
made in the scratch folder (memory-backed where possible), read once to warm the
page cache (the seed's runs read a cached image too), and deleted afterwards.
One record per run (nvmelab.records schema, see nvmelab.blksum.to_record) is
appended atomically after each point, so an interrupted sweep keeps every finished
point and a rerun resumes where it stopped.

Key functions:
    plan(preset) -> StudyPlan              the points and sizes of a preset
    sweep(preset, ...) -> Path             run (or resume) the sweep; the records file
    load(preset) -> DataFrame              our records (analysis.to_frame layout)
    summary(df) -> DataFrame               mean and population std of runtime per point
    speedup_over_q1(agg, ...) -> DataFrame time(Q1) / time(Q) per series
    published_speedups() -> DataFrame      the same for the seed's tables (data/reference)
    original_blksum() -> str | None        path of an original `blksum` binary, if any

Timing: ``runtime_s`` is the C core's own wall time from start to final digest
(no interpreter start-up); the original tool, when present, is timed as a whole
process like hyperfine does, so its ratio to ours includes its process start.
``user_s`` and ``system_s`` are the CPU time of the run (all threads; getrusage of
this process around the call, or of the child for the original tool), the two other
columns of hyperfine's tables.
"""
from __future__ import annotations

import logging
import os
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import pandas as pd

from . import analysis, blksum, records

log = logging.getLogger(__name__)

STUDY = blksum.STUDY
QUEUE_DEPTHS = (1, 2, 4, 8, 16, 32)
DIGESTS = ("null", "sha256")
#: Image size (MiB) and runs per point of each preset.
PRESETS: dict[str, dict[str, int]] = {
    "quick": {"image_mib": 64, "reps": 2},
    "standard": {"image_mib": 2048, "reps": 10},
    "paper": {"image_mib": 6144, "reps": 10},
}
#: Tool label of the original blkhash `blksum` in records.
ORIGINAL_TOOL = "blksum"


@dataclass(frozen=True)
class Point:
    digest: str
    io: str
    threads: int
    queue_depth: int

    @property
    def key(self) -> str:
        return f"{self.digest}/{self.io}/t{self.threads}/q{self.queue_depth}"


@dataclass(frozen=True)
class StudyPlan:
    preset: str
    image_bytes: int
    reps: int
    points: tuple[Point, ...]
    read_size: int = blksum.DEFAULT_READ_SIZE


def preset_name(preset: Optional[str] = None) -> str:
    """The preset: the argument, else $NVMELAB_PRESET, else quick; unknown names are an error."""
    name = preset or os.environ.get("NVMELAB_PRESET") or "quick"
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r} (one of {', '.join(PRESETS)})")
    return name


def thread_counts() -> tuple[int, ...]:
    """The machine's best thread count (all usable CPUs) and 1."""
    best = blksum.default_threads()
    return (best, 1) if best > 1 else (1,)


def io_modes() -> tuple[str, ...]:
    return tuple(m for m in blksum.IO_MODES if m == "psync" or blksum.have_io_uring())


def plan(preset: Optional[str] = None, *, image_mib: Optional[int] = None, reps: Optional[int] = None,
         queue_depths: Iterable[int] = QUEUE_DEPTHS, digests: Iterable[str] = DIGESTS,
         ios: Optional[Iterable[str]] = None, threads: Optional[Iterable[int]] = None) -> StudyPlan:
    name = preset_name(preset)
    p = PRESETS[name]
    image_mib = p["image_mib"] if image_mib is None else int(image_mib)
    reps = p["reps"] if reps is None else int(reps)
    if image_mib < 1 or reps < 1:
        raise ValueError(f"image_mib and reps must be >= 1, got {image_mib} and {reps}")
    pts = tuple(Point(d, io, t, q) for d in digests for io in (ios or io_modes())
                for t in (threads or thread_counts()) for q in queue_depths)
    return StudyPlan(name, image_mib * blksum.MIB, reps, pts)


def results_file(preset: str, root: Optional[Path] = None) -> Path:
    from .experiments.runner import default_results_root, host_id, results_path

    return results_path(Path(root) if root else default_results_root(preset), STUDY, host_id(), preset)


def original_blksum() -> Optional[str]:
    """The original blkhash `blksum` on PATH, or None."""
    return shutil.which("blksum")


def _done(path: Path) -> dict[str, int]:
    """Runs already recorded per point key (for resuming)."""
    if not path.exists():
        return {}
    out: dict[str, int] = {}
    for rec in records.iter_records(path):
        k = rec.get("run_key")
        if k:
            out[k] = out.get(k, 0) + 1
    return out


def _cpu_times(who: int = resource.RUSAGE_SELF) -> tuple[float, float]:
    ru = resource.getrusage(who)
    return ru.ru_utime, ru.ru_stime


def _time_original(exe: str, image: Path, pt: Point) -> tuple[float, float, float]:
    """(wall, user, system) seconds of one whole run of the original tool."""
    u0, s0 = _cpu_times(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([exe, "-d", pt.digest, "-t", str(pt.threads), "--queue-depth", str(pt.queue_depth),
                        str(image)], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    u1, s1 = _cpu_times(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{exe} failed ({p.returncode}): {p.stderr.strip()[:200]}")
    return dt, u1 - u0, s1 - s0


def sweep(preset: Optional[str] = None, *, root: Optional[Path] = None, study_plan: Optional[StudyPlan] = None,
          scratch: Optional[Path] = None, with_original: bool = True) -> Path:
    """Run (or resume) the sweep; returns the records file. The image is deleted afterwards."""
    sp = study_plan or plan(preset)
    out = results_file(sp.preset, root)
    done = _done(out)
    exe = original_blksum() if with_original else None
    todo = [pt for pt in sp.points if done.get(f"{sp.preset}/{sp.image_bytes}/{pt.key}", 0) < sp.reps]
    todo_orig = []
    if exe:
        todo_orig = [pt for pt in sp.points if pt.io == "psync"
                     and done.get(f"{sp.preset}/{sp.image_bytes}/original/{pt.key}", 0) < sp.reps]
    if not todo and not todo_orig:
        log.info("%s/%s: all %d points recorded in %s", STUDY, sp.preset, len(sp.points), out)
        return out
    if scratch is None:
        from .experiments.runner import scratch_dir

        scratch = scratch_dir()
    image = Path(scratch) / f"blksum_qdepth-{os.getpid()}.raw"
    log.info("%s/%s: %d points x %d runs on a %d MiB image (%s)", STUDY, sp.preset, len(todo), sp.reps,
             sp.image_bytes // blksum.MIB, image)
    prov = blksum.provenance()
    try:
        desc = blksum.make_image(image, sp.image_bytes)
        blksum.run(image, "null", threads=1, queue_depth=blksum.DEFAULT_QUEUE_DEPTH)  # warm the page cache
        desc["image_kind"] = "generated: data, written zeros, holes"
        ref_digest: dict[str, str] = {}
        for pt in todo:
            key = f"{sp.preset}/{sp.image_bytes}/{pt.key}"
            recs = []
            for rep in range(done.get(key, 0), sp.reps):
                u0, s0 = _cpu_times()
                res = blksum.run(image, pt.digest, threads=pt.threads, queue_depth=pt.queue_depth, io=pt.io,
                                 read_size=sp.read_size)
                u1, s1 = _cpu_times()
                if ref_digest.setdefault(pt.digest, res.hexdigest) != res.hexdigest:
                    raise RuntimeError(f"digest changed with the configuration at {pt.key}")
                recs.append(blksum.to_record(res, repetition=rep, image=desc, prov=prov, preset=sp.preset,
                                             run_key=key, target_note="page-cache warm",
                                             loadavg_1m=os.getloadavg()[0], user_s=u1 - u0, system_s=s1 - s0))
            records.append_records(out, recs)
        for pt in todo_orig:
            key = f"{sp.preset}/{sp.image_bytes}/original/{pt.key}"
            recs = []
            for rep in range(done.get(key, 0), sp.reps):
                dt, user_s, system_s = _time_original(exe, image, pt)
                recs.append({
                    "study": STUDY, "tool": ORIGINAL_TOOL, "target": "file://" + str(image), "backend": "original",
                    "rw": "read", "iosize": sp.read_size, "qdepth": pt.queue_depth, "nqueues": 1, "ndevs": 1,
                    "ncpus": pt.threads, "runtime_s": dt, "iops": 0.0, "mibs": sp.image_bytes / blksum.MIB / dt,
                    "lat_ns": None, "cpu_usage": None, "cpu_freqs": None, "governor": None, "turbo": None,
                    "smt": None, "thr_sib": False, "stress": False, "repetition": rep, "provenance": prov,
                    "digest": pt.digest, "preset": sp.preset, "run_key": key, "timing": "whole process",
                    "executable": exe, "user_s": user_s, "system_s": system_s, **desc})
            records.append_records(out, recs)
    finally:
        image.unlink(missing_ok=True)
    return out


def load(preset: Optional[str] = None, root: Optional[Path] = None) -> pd.DataFrame:
    """Our blksum_qdepth records of a preset (this and other hosts) as a DataFrame."""
    from .experiments.runner import load_results

    name = preset_name(preset)
    return load_results(STUDY, name, root=root)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and population std of runtime and MiB/s per (host, tool, digest, io, threads, qdepth)."""
    by = [c for c in ("host", "tool", "digest", "backend", "ncpus", "qdepth", "image_bytes") if c in df.columns]
    agg = analysis.aggregate(df, by=by, metrics=("runtime_s", "mibs"))
    return agg.rename(columns={"backend": "io", "ncpus": "threads"})


#: Columns of a hyperfine table, as the seed prints them (time columns in seconds here).
HYPERFINE_COLUMNS = ("mean_s", "std_s", "user_s", "system_s", "min_s", "max_s")


def hyperfine_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Our runs summarised the way hyperfine prints a benchmark, per (tool, digest, io, threads,
    qdepth): mean, σ (sample standard deviation, ddof=1, as hyperfine's), mean user and system
    CPU time, min, max and the number of runs. Records without CPU times give NaN there."""
    d = df.rename(columns={"backend": "io", "ncpus": "threads"}).copy()
    for c in ("user_s", "system_s"):
        if c not in d.columns:
            d[c] = float("nan")
    by = [c for c in ("host", "tool", "digest", "io", "threads", "qdepth") if c in d.columns]
    g = d.groupby(by, dropna=False)
    out = g["runtime_s"].agg(mean_s="mean", std_s=lambda x: x.std(ddof=1), min_s="min", max_s="max",
                             runs="count")
    out["user_s"] = g["user_s"].mean()
    out["system_s"] = g["system_s"].mean()
    return out.reset_index()[by + list(HYPERFINE_COLUMNS) + ["runs"]]


def seed_layout(ours: pd.DataFrame, seed: pd.DataFrame, digest: str, *, io: str = "file",
                pm: str | None = None) -> pd.DataFrame:
    """One table per digest in the seed's layout: a row per queue depth, and for each source (the
    seed's laptop and server with ``io`` = file or nbd, then each of our series) the columns mean,
    σ, user and system in seconds. ``ours`` is hyperfine_summary() of our records (one host).
    With ``pm`` (a format spec such as ".3f"), mean and σ become one text column "mean ± σ", as
    hyperfine prints them."""
    cols = ["mean_s", "std_s", "user_s", "system_s"]
    parts = {}
    for machine, g in seed[(seed["digest"] == digest) & (seed["io"] == io)].groupby("system"):
        thr = g["threads"].dropna()
        label = f"seed: {machine}, {'NBD' if io == 'nbd' else 'file'}" + (f", {int(thr.iloc[0])} threads"
                                                                          if len(thr) else "")
        parts[label] = g.set_index("qdepth")[cols]
    for (io_o, thr), g in ours[ours["digest"] == digest].groupby(["io", "threads"]):
        parts[f"ours: {io_o}, {int(thr)} thread{'s' if int(thr) != 1 else ''}"] = g.set_index("qdepth")[cols]
    if not parts:
        raise ValueError(f"no seed or own rows for digest {digest!r}")
    if pm:
        for k, t in parts.items():
            t = t.copy()
            t.insert(0, "mean_pm_std_s", [f"{m:{pm}} ± {sd:{pm}}" if sd == sd else f"{m:{pm}}"
                                          for m, sd in zip(t["mean_s"], t["std_s"])])
            parts[k] = t.drop(columns=["mean_s", "std_s"])
    table = pd.concat(parts, axis=1).sort_index()
    table.index.name = "qdepth"
    return table


def speedup_over_q1(agg: pd.DataFrame, series: Iterable[str], mean: str = "runtime_s_mean") -> pd.DataFrame:
    """time(Q=1) / time(Q) within each series (Q1 itself is 1.0); rows without a Q1 point are dropped."""
    series = list(series)
    rows = []
    for _, g in agg.groupby(series, dropna=False):
        q1 = g.loc[g["qdepth"] == 1, mean]
        if q1.empty:
            continue
        g = g.copy()
        g["speedup"] = float(q1.iloc[0]) / g[mean]
        rows.append(g)
    return pd.concat(rows, ignore_index=True) if rows else agg.assign(speedup=pd.Series(dtype=float))


def published_speedups() -> pd.DataFrame:
    """The seed's laptop/server tables (data/reference/blksum-qdepth.csv) as speed-up over Q1."""
    from .reference import blksum_qdepth

    ref = blksum_qdepth()
    ref = ref.assign(series=ref["system"] + (ref["nbd"].astype(int).map({0: " (file)", 1: " (NBD)"})))
    return speedup_over_q1(ref, ["system", "nbd", "digest"], mean="mean_s")
