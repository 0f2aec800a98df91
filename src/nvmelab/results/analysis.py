# SPDX-License-Identifier: BSD-3-Clause
"""Analysis of run records: aggregation, rooflines, saturation points, comparisons.

Every number a notebook shows is computed here from records (ours under
``data/results/`` or the published ones under ``data/reference/``):

* :func:`to_frame` flattens records (dicts) into a pandas DataFrame.
* :func:`aggregate` reduces repetitions to the arithmetic mean and the
  **population** standard deviation (ddof=0), as the published pipeline does; it refuses to
  average records of two emulated targets in one configuration (:func:`check_one_target`;
  :func:`split_targets` separates them, :func:`aggregate_per_target` aggregates each).
* :func:`roofline` is the maximum single-device result times the number of
  devices (the published method), or a given constant.
* :func:`saturation` is the smallest x whose mean reaches
  :data:`SATURATION_FRACTION` of the roofline.
* :func:`compare` sets published and reproduced means side by side.

Caveat: the functions never drop or invent rows; a configuration without records
simply has no row, and a saturation that is not reached is reported as ``None``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..driver import uri as _uri
from .records import MIB  # bytes in a MiB (records carry bandwidth as MiB/s)

log = logging.getLogger(__name__)

#: A configuration "saturates" when its mean reaches this fraction of the roofline.
SATURATION_FRACTION = 0.95
#: Bytes in a GB (bandwidth in the published text is in decimal GB/s).
GB = 1_000_000_000

#: Columns that identify a configuration in records (the independent variables).
CONFIG_COLUMNS = (
    "source",
    "study",
    "tool",
    "backend",
    "target",
    "profile",
    "scale",
    "host",
    "rw",
    "iosize",
    "qdepth",
    "nqueues",
    "ndevs",
    "ncpus",
    "governor",
    "turbo",
    "smt",
    "thr_sib",
    "stress",
)


#: Nested record fields to_frame keeps as they are (lists or dicts: per_device; the co-runner and NVML fields
#: of cuda-run, studies/cuda_pollcost/analysis.py; the cuda_match counters, studies/cuda_match/analysis.py);
#: every other nested field is dropped.
NESTED_COLUMNS = ("per_device", "corun", "nvml", "match")


def to_frame(records: Iterable[dict[str, Any]], source: str = "nvmelab") -> pd.DataFrame:
    """Flatten run records into a DataFrame, one row per record.

    Scalar fields are kept as columns; ``lat_ns`` becomes ``lat_p50_ns`` ...;
    provenance ``host``, ``profile`` and ``scale`` become columns; ``source``
    says where the rows came from (ours or published). Derived columns:
    ``gbps`` (payload bandwidth in GB/s, decimal) and, where the record has a
    ``dcgm`` byte rate, ``dcgm_gbps``.
    """
    rows = []
    for rec in records:
        row = {k: v for k, v in rec.items() if not isinstance(v, (dict, list)) or k in NESTED_COLUMNS}
        lat = rec.get("lat_ns") or {}
        for k in ("p50", "p99", "p999", "max"):
            row[f"lat_{k}_ns"] = lat.get(k)
        prov = rec.get("provenance") or {}
        for k in ("host", "profile", "scale", "cpu_model"):
            if k not in row:
                row[k] = prov.get(k)
        row.setdefault("source", source)
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    if "mibs" in df:
        df["gbps"] = df["mibs"].astype(float) * MIB / GB
    if "dcgm" in df:
        df["dcgm_gbps"] = pd.to_numeric(df["dcgm"], errors="coerce") / GB
    return df


#: Columns that identify one run of one host: a second row with the same values is a duplicate record.
RUN_IDENTITY = ("run_key", "results_host", "host")


def unique_runs(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with the first row of each run (RUN_IDENTITY) kept: duplicate records of one run (two
    sweeps that wrote one file) would otherwise count as repetitions. Says how many it dropped."""
    if "run_key" not in df.columns or df.empty:
        return df
    subset = [c for c in RUN_IDENTITY if c in df.columns]
    dup = df.duplicated(subset=subset, keep="first") & df["run_key"].notna()
    if dup.any():
        log.warning("%d duplicate record(s) of the same run ignored (the first of each kept)", int(dup.sum()))
        df = df[~dup]
    return df


def aggregate(
    df: pd.DataFrame, by: Sequence[str] | None = None, metrics: Sequence[str] = ("iops", "mibs")
) -> pd.DataFrame:
    """Mean and population std (ddof=0) of `metrics` over repetitions.

    Records of different emulated targets in one configuration are refused (check_one_target).

    `by` defaults to the configuration columns present in `df`. The result has
    one row per configuration with ``<metric>_mean``, ``<metric>_std`` and ``n``
    (number of repetitions; duplicate records of one run count once, unique_runs), sorted by `by`,
    and ``flagged``: how many of them the emulator limited (``emulator_limited``; figures draw such
    configurations marked, results.checks.flagged).
    """
    if by is None:
        by = [c for c in CONFIG_COLUMNS if c in df.columns]
    by = list(by)
    df = unique_runs(df)
    missing = [c for c in list(by) + list(metrics) if c not in df.columns]
    if missing:
        raise ValueError(f"aggregate: columns not in the data: {', '.join(missing)}")
    if df.empty:
        cols = by + [f"{m}_{s}" for m in metrics for s in ("mean", "std")] + ["n", "flagged"]
        return pd.DataFrame(columns=cols)
    check_one_target(df, by)
    g = df.groupby(by, dropna=False, sort=True)
    out = pd.DataFrame({"n": g.size()})
    lim = df["emulator_limited"].eq(True) if "emulator_limited" in df.columns else pd.Series(False, index=df.index)
    out["flagged"] = lim.groupby([df[c] for c in by], dropna=False, sort=True).sum().astype(int)
    for m in metrics:
        vals = pd.to_numeric(df[m], errors="coerce")
        gm = vals.groupby([df[c] for c in by], dropna=False, sort=True)
        out[f"{m}_mean"] = gm.mean()
        out[f"{m}_std"] = gm.std(ddof=0)
    return out.reset_index()


def _target_sans_ndev(target: str) -> str:
    """An emulated target without its device count (``ndev``), which the ``ndevs`` column carries."""
    return _uri.canonical(str(target), drop=("ndev",))


def check_one_target(df: pd.DataFrame, by: Sequence[str]) -> None:
    """Refuse to average records of different emulated targets (another profile, or model overrides
    such as a calibration A/B) in one configuration: ValueError naming them. Split first
    (split_targets) or group by ``target``."""
    if df.empty or "target" not in df.columns or "target" in by:
        return
    tgt = df["target"].astype(str)
    emu = tgt.map(_uri.is_emulated).astype(bool)
    if not emu.any():
        return
    sub = df[emu]
    norm = tgt[emu].map(_target_sans_ndev)
    keys = [sub[c] for c in by] if by else [pd.Series(0, index=sub.index)]
    counts = norm.groupby(keys, dropna=False).nunique()
    if (counts > 1).any():
        names = sorted(norm.unique())
        raise ValueError(
            f"records of {len(names)} emulated targets would be averaged together ({'; '.join(names)}): "
            "select one target (analysis.split_targets) or group by 'target'"
        )


def split_targets(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The records of each target (device count aside: see check_one_target), in name order."""
    if df.empty or "target" not in df.columns:
        return {} if df.empty else {"": df}
    norm = df["target"].astype(str).map(_target_sans_ndev)
    return {t: df[norm == t] for t in sorted(norm.unique())}


@dataclass(frozen=True)
class TargetAggregate:
    """One target's records and their aggregate (aggregate_per_target); `first` labels it
    (plots.source_label names the profile, its scale and any model overrides)."""

    target: str
    records: pd.DataFrame
    agg: pd.DataFrame

    @property
    def first(self) -> pd.Series:
        return self.records.iloc[0]

    @property
    def scale(self) -> float:
        s = self.records["scale"].dropna() if "scale" in self.records.columns else ()
        return float(s.iloc[0]) if len(s) else 1.0


def aggregate_per_target(
    df: pd.DataFrame, by: Sequence[str], metrics: Sequence[str] = ("iops", "mibs")
) -> list[TargetAggregate]:
    """aggregate() of each target's records (split_targets), in target order: records of two emulated
    targets (a calibration A/B) get one aggregate each instead of the refusal; empty `df`: []."""
    return [TargetAggregate(t, d, aggregate(d, by=by, metrics=metrics)) for t, d in split_targets(df).items()]


def main_target(per_target: Sequence[TargetAggregate], target: str) -> tuple[TargetAggregate | None, list]:
    """(the aggregate of `target` -- a study's own target, device count aside -- when it ran at scale 1, so that it
    can be drawn on the model's axes; the other targets' aggregates, for panels of their own)."""
    want = _target_sans_ndev(target)
    main = next((t for t in per_target if t.target == want and t.scale == 1.0), None)
    return main, [t for t in per_target if t is not main]


@dataclass(frozen=True)
class Roofline:
    """A ceiling for a metric, and how it was obtained (stated in notebooks)."""

    value: float
    method: str
    per_device: float | None = None
    ndevs: int | None = None

    def __float__(self) -> float:
        return float(self.value)


def roofline(
    df: pd.DataFrame | None = None,
    *,
    ndevs: int | None = None,
    metric: str = "iops",
    constant: float | None = None,
    per_device: float | None = None,
    method: str | None = None,
) -> Roofline:
    """The roofline for `ndevs` devices.

    Published method (default): the maximum `metric` of any single run with one
    device (``ndevs == 1``) times `ndevs`. With `constant`, that value is used
    as is (e.g. a link rate); with `per_device` (and `ndevs`), that capacity
    times `ndevs` (e.g. an emulated device model's cap). `method` overrides the
    description. Raises ValueError when there is no single-device run to derive
    it from.
    """
    if constant is not None:
        return Roofline(float(constant), method or "given constant")
    if per_device is not None:
        if ndevs is None or ndevs < 1:
            raise ValueError(f"roofline: per_device needs ndevs >= 1, got {ndevs}")
        return Roofline(
            float(per_device) * ndevs,
            method or f"{per_device:,.0f} per device x {ndevs} devices",
            float(per_device),
            int(ndevs),
        )
    if df is None or ndevs is None:
        raise ValueError("roofline: give records (df) and ndevs, or a constant")
    if ndevs < 1:
        raise ValueError(f"roofline: ndevs must be >= 1, got {ndevs}")
    single = df[df["ndevs"] == 1]
    if single.empty:
        raise ValueError("roofline: no single-device run (ndevs == 1) to derive the device capacity from")
    per_dev = float(pd.to_numeric(single[metric]).max())
    return Roofline(per_dev * ndevs, f"max single-device {metric} x {ndevs} devices", per_dev, int(ndevs))


def saturation(
    agg: pd.DataFrame,
    x: str,
    roof: float | Roofline,
    *,
    mean: str = "iops_mean",
    by: Sequence[str] = (),
    fraction: float = SATURATION_FRACTION,
) -> pd.DataFrame:
    """Smallest `x` whose mean reaches ``fraction * roof``, per group of `by`.

    Returns one row per group with ``saturating_x`` (None when never reached),
    ``best_x``, ``best_mean`` and ``best_fraction`` (best mean over the roofline).
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"saturation: fraction must be in (0, 1], got {fraction}")
    ceiling = float(roof)
    if ceiling <= 0:
        raise ValueError(f"saturation: roofline must be > 0, got {ceiling}")
    groups = agg.groupby(list(by), sort=True, dropna=False) if by else [((), agg)]
    rows = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(x)
        reached = g[g[mean] >= fraction * ceiling]
        best = g.loc[g[mean].idxmax()] if not g.empty else None
        row = dict(zip(by, key))
        row.update(
            saturating_x=None if reached.empty else _py(reached[x].iloc[0]),
            best_x=None if best is None else _py(best[x]),
            best_mean=None if best is None else float(best[mean]),
            best_fraction=None if best is None else float(best[mean]) / ceiling,
        )
        rows.append(row)
    out = pd.DataFrame(rows)
    if not out.empty:  # keep None (not reached) as None, not NaN
        out["saturating_x"] = pd.Series([r["saturating_x"] for r in rows], dtype=object)
    return out


def _py(v: Any) -> Any:
    """A numpy scalar as the plain Python value (for tables and glue)."""
    return v.item() if hasattr(v, "item") else v


def compare(published: pd.DataFrame, ours: pd.DataFrame, on: Sequence[str], metric: str = "iops_mean") -> pd.DataFrame:
    """Published vs reproduced means for the configurations in `on`.

    Outer join on `on`: a configuration present on one side only keeps its row
    with the other side empty. ``ratio`` is ours / published.
    """
    on = list(on)
    a = published[on + [metric]].rename(columns={metric: "published"})
    b = ours[on + [metric]].rename(columns={metric: "nvmelab"})
    out = a.merge(b, on=on, how="outer").sort_values(on).reset_index(drop=True)
    out["ratio"] = out["nvmelab"] / out["published"]
    return out


def best_configuration(agg: pd.DataFrame, mean: str = "iops_mean") -> pd.Series:
    """The configuration row with the highest mean."""
    if agg.empty:
        raise ValueError("best_configuration: no data")
    return agg.loc[agg[mean].idxmax()]


def protocol_overhead(agg: pd.DataFrame) -> pd.DataFrame:
    """PCIe link bytes over payload bytes per configuration (needs dcgm_gbps and gbps means)."""
    out = agg.copy()
    out["overhead_ratio"] = out["dcgm_gbps_mean"] / out["gbps_mean"]
    return out


def per_io_cost_ns(df: pd.DataFrame) -> pd.Series:
    """CPU time per I/O in ns, per record: measured CPU time (cpu_usage, percent of one CPU)
    over completed I/Os. Where a record has no cpu_usage, one busy core per worker thread
    (ncpus x 100 %) is assumed, as for busy-polling engines."""
    usage = (
        pd.to_numeric(df["cpu_usage"], errors="coerce")
        if "cpu_usage" in df
        else pd.Series(float("nan"), index=df.index)
    )
    usage = usage.fillna(df["ncpus"].astype(float) * 100.0)
    return usage / 100.0 * 1e9 / df["iops"].astype(float)


def relative_change(new: float, old: float) -> float:
    """(new - old) / old; the published text quotes these as percent changes."""
    if old == 0:
        return float("nan")
    return (new - old) / old


def round_sig(x: float, digits: int = 3) -> float:
    """Round to `digits` significant figures (for stable text in notebooks)."""
    if x == 0 or not np.isfinite(x):
        return x
    return float(f"{x:.{digits}g}")


# ------------------------------------------------------------ blksum_qdepth ---
# The block-image checksum study (seed 002): records of the blksum engine (nvmelab.engines.blksum).

#: Columns of a hyperfine table, as the seed prints them (time columns in seconds here).
HYPERFINE_COLUMNS = ("mean_s", "std_s", "user_s", "system_s", "min_s", "max_s")


def blksum_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and population std of runtime and MiB/s per (host, tool, digest, io, threads, qdepth);
    adds ``series`` ("psync, 2 thread(s)") and ``lo``/``hi`` (mean ∓ one std) for error bars."""
    by = [c for c in ("host", "tool", "digest", "backend", "ncpus", "qdepth", "image_bytes") if c in df.columns]
    agg = aggregate(df, by=by, metrics=("runtime_s", "mibs")).rename(columns={"backend": "io", "ncpus": "threads"})
    if not agg.empty:
        agg["series"] = agg["io"].astype(str) + ", " + agg["threads"].astype(str) + " thread(s)"
        agg["lo"] = agg["runtime_s_mean"] - agg["runtime_s_std"]
        agg["hi"] = agg["runtime_s_mean"] + agg["runtime_s_std"]
    return agg


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
    out = g["runtime_s"].agg(mean_s="mean", std_s=lambda x: x.std(ddof=1), min_s="min", max_s="max", runs="count")
    out["user_s"] = g["user_s"].mean()
    out["system_s"] = g["system_s"].mean()
    return out.reset_index()[by + list(HYPERFINE_COLUMNS) + ["runs"]]


def seed_layout(
    ours: pd.DataFrame, seed: pd.DataFrame, digest: str, *, io: str = "file", pm: str | None = None
) -> pd.DataFrame:
    """One table per digest in the seed's layout: a row per queue depth, and for each source (the
    seed's laptop and server with ``io`` = file or nbd, then each of our series) the columns mean,
    σ, user and system in seconds. ``ours`` is hyperfine_summary() of our records (one host).
    With ``pm`` (a format spec such as ".3f"), mean and σ become one text column "mean ± σ", as
    hyperfine prints them."""
    cols = ["mean_s", "std_s", "user_s", "system_s"]
    parts = {}
    for machine, g in seed[(seed["digest"] == digest) & (seed["io"] == io)].groupby("system"):
        thr = g["threads"].dropna()
        label = f"seed: {machine}, {'NBD' if io == 'nbd' else 'file'}" + (
            f", {int(thr.iloc[0])} threads" if len(thr) else ""
        )
        parts[label] = g.set_index("qdepth")[cols]
    for (io_o, thr), g in ours[ours["digest"] == digest].groupby(["io", "threads"]):
        parts[f"ours: {io_o}, {int(thr)} thread{'s' if int(thr) != 1 else ''}"] = g.set_index("qdepth")[cols]
    if not parts:
        raise ValueError(f"no seed or own rows for digest {digest!r}")
    if pm:
        for k, t in parts.items():
            t = t.copy()
            t.insert(
                0,
                "mean_pm_std_s",
                [f"{m:{pm}} ± {sd:{pm}}" if sd == sd else f"{m:{pm}}" for m, sd in zip(t["mean_s"], t["std_s"])],
            )
            parts[k] = t.drop(columns=["mean_s", "std_s"])
    table = pd.concat(parts, axis=1).sort_index()
    table.index.name = "qdepth"
    return table


def speedup_over_q1(agg: pd.DataFrame, series: Sequence[str], mean: str = "runtime_s_mean") -> pd.DataFrame:
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


def published_speedups(seed: pd.DataFrame) -> pd.DataFrame:
    """The seed's laptop/server tables (``seed`` = reference.blksum_qdepth(), seed 002) as speed-up
    over Q1."""
    ref = seed.assign(series=seed["system"] + (seed["nbd"].astype(int).map({0: " (file)", 1: " (NBD)"})))
    return speedup_over_q1(ref, ["system", "nbd", "digest"], mean="mean_s")


def blksum_speedups(agg_ours: pd.DataFrame, seed: pd.DataFrame) -> pd.DataFrame:
    """Ours (blksum_summary of our tool) and the seed's (``seed`` = reference.blksum_qdepth())
    speed-ups over Q1 in one long table: digest, qdepth, speedup, series ("ours: psync, 2 thr" /
    "seed: laptop (file)"), source."""
    ours = speedup_over_q1(agg_ours, ["digest", "io", "threads"])
    ours["series"] = "ours: " + ours["io"].astype(str) + ", " + ours["threads"].astype(str) + " thr"
    pub = published_speedups(seed)
    pub["series"] = "seed: " + pub["series"]
    cols = ["digest", "qdepth", "speedup", "series"]
    return pd.concat(
        [ours[cols].assign(source="ours"), pub[cols].assign(source="published (seed 002)")], ignore_index=True
    )


def _ratio_spread(g: pd.DataFrame, best: pd.Series, col: str, best_col: str | None = None) -> float:
    """One std of time(Q1) / time(best) from the runs: the two relative stds added in quadrature."""
    q1 = g[g["qdepth"] == 1]
    if q1.empty or f"{col}_std" not in g:
        return float("nan")
    m1, s1 = float(q1[f"{col}_mean"].iloc[0]), float(q1[f"{col}_std"].iloc[0])
    mb = float(best[best_col or f"{col}_mean"])
    sb = float(g.loc[g["qdepth"] == best["qdepth"], f"{col}_std"].iloc[0])
    return (m1 / mb) * ((s1 / m1) ** 2 + (sb / mb) ** 2) ** 0.5


def blksum_best(agg_ours: pd.DataFrame, seed: pd.DataFrame) -> pd.DataFrame:
    """The fastest queue depth per series, ours and the seed's, with its gain over Q1:
    source, digest, series, qdepth, time_s, speedup (time(Q1) / time(best)) and spread (one std of
    the gain from the runs' spread; the seed's σ is hyperfine's)."""
    rows = []
    for (digest, io, thr), g in agg_ours.groupby(["digest", "io", "threads"]):
        best = g.loc[g["runtime_s_mean"].idxmin()]
        q1 = g.loc[g["qdepth"] == 1, "runtime_s_mean"]
        rows.append(
            {
                "source": "ours",
                "digest": digest,
                "series": f"{io}, {int(thr)} thread(s)",
                "qdepth": int(best["qdepth"]),
                "time_s": float(best["runtime_s_mean"]),
                "mibs": float(best.get("mibs_mean", float("nan"))),
                "speedup": float(q1.iloc[0]) / float(best["runtime_s_mean"]) if len(q1) else float("nan"),
                "spread": _ratio_spread(g, best, "runtime_s"),
            }
        )
    for (system, io, digest), g in seed.groupby(["system", "io", "digest"]):
        best = g.loc[g["mean_s"].idxmin()]
        q1 = g.loc[g["qdepth"] == 1, "mean_s"]
        thr = best.get("threads")
        rows.append(
            {
                "source": "seed",
                "digest": digest,
                "series": f"{system}, {'NBD' if io == 'nbd' else 'file'}"
                + (f", {int(thr)} threads" if thr == thr and thr is not None else ""),
                "qdepth": int(best["qdepth"]),
                "time_s": float(best["mean_s"]),
                "mibs": float("nan"),
                "speedup": float(q1.iloc[0]) / float(best["mean_s"]) if len(q1) else float("nan"),
                "spread": _ratio_spread(g.rename(columns={"mean_s": "x_mean", "std_s": "x_std"}), best, "x", "mean_s"),
            }
        )
    return pd.DataFrame(rows)


def blksum_host_load(ours: pd.DataFrame) -> dict[str, float]:
    """What the host used beside our measured client, per read mode (percent of one CPU, medians
    over the runs): in file mode that is background; in NBD mode it is mostly the qemu-nbd the
    study started, part of the measured path, so its share is that less the file-mode background.
    Empty without host_cpu_usage in the records."""
    if "host_cpu_usage" not in ours.columns:
        return {}
    d = ours.assign(beside=ours["host_cpu_usage"] - ours["cpu_usage"]).dropna(subset=["beside"])
    out = {}
    for m, g in d.groupby(d["mode"] if "mode" in d.columns else pd.Series("file", index=d.index)):
        out[f"{m}_beside_median"] = float(g["beside"].median())
        out[f"{m}_beside_max"] = float(g["beside"].max())
        out[f"{m}_client_median"] = float(g["cpu_usage"].median())
    if "nbd_beside_median" in out and "file_beside_median" in out:
        out["nbd_server_median"] = out["nbd_beside_median"] - out["file_beside_median"]
    return out


# --------------------------------------------------------------- vram_cache ---
# The tiered-store study (seed 003): records of the tier engine (nvmelab.engines.tier.engine).

#: An array whose busiest device moved at most this multiple of the least busy one's bytes is
#: called evenly loaded (the seed's sticks were within 0.3 % of each other).
BALANCED_SPREAD = 1.10


def _fraction_value(s: Any) -> float:
    from fractions import Fraction

    return float(Fraction(str(s)))


def vram_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and population std over repetitions of the ok runs, per configuration (rw, fraction,
    config, ndevs, cache, policy); ``fraction_value`` is the budget as a number, ``lo``/``hi`` the
    effective throughput ∓ one std."""
    ok = df[df["status"] == "ok"].copy() if "status" in df.columns else df.copy()
    ok["fraction_value"] = ok["fraction"].map(_fraction_value)
    keys = ["rw", "fraction", "fraction_value", "config", "config_key", "ndevs", "cache", "policy"]
    cols = [
        c
        for c in (
            "mibs",
            "device_mibs",
            "iops",
            "runtime_s",
            "hit_ratio",
            "unused",
            "clean",
            "dirty",
            "mean_request_bytes",
        )
        if c in ok.columns
    ]
    g = ok.groupby(keys, dropna=False)[cols]
    out = g.mean().add_suffix("_mean").join(g.std(ddof=0).add_suffix("_std")).reset_index()
    out["lo"] = out["mibs_mean"] - out["mibs_std"]
    out["hi"] = out["mibs_mean"] + out["mibs_std"]
    return out


def vram_per_device(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ok run and device: config, workload, fraction, ndevs, cache, repetition, dev,
    read_mibs, write_mibs."""
    rows = []
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    for r in ok.itertuples():
        for d in r.per_device:
            rows.append(
                {
                    "config": r.config,
                    "workload": r.rw,
                    "fraction": r.fraction,
                    "ndevs": r.ndevs,
                    "cache": r.cache,
                    "repetition": r.repetition,
                    "dev": d["dev"],
                    "read_mibs": d["read_mibs"],
                    "write_mibs": d["write_mibs"],
                }
            )
    return pd.DataFrame(rows)


def vram_striping(agg: pd.DataFrame) -> pd.DataFrame:
    """Runs without a cache, with ``speedup``: effective throughput over that of one device at the
    same workload and budget."""
    nc = agg[agg["cache"] == "none"].copy()
    one = nc[nc["ndevs"] == 1].set_index(["rw", "fraction"])["mibs_mean"]
    nc["speedup"] = [r.mibs_mean / one.get((r.rw, r.fraction), float("nan")) for r in nc.itertuples()]
    return nc


def vram_device_rates(dev: pd.DataFrame, ndevs: int | None = None) -> pd.DataFrame:
    """Mean read and write MiB/s per device of the largest array (or `ndevs`), per workload,
    budget and cache."""
    top = int(dev["ndevs"].max()) if ndevs is None else ndevs
    return (
        dev[dev["ndevs"] == top]
        .groupby(["workload", "fraction", "cache", "dev"])[["read_mibs", "write_mibs"]]
        .mean()
        .reset_index()
    )


def vram_device_spread(rates: pd.DataFrame) -> pd.DataFrame:
    """Per workload, budget and cache, the load spread over the array's devices in each direction:
    busiest device's MiB/s over the least busy one's (columns read, write; from vram_device_rates)."""
    g = rates.groupby(["workload", "fraction", "cache"])
    out = g["read_mibs"].max() / g["read_mibs"].min()
    return pd.DataFrame({"read": out, "write": g["write_mibs"].max() / g["write_mibs"].min()}).reset_index()


def vram_line_states(agg: pd.DataFrame, bcache: pd.DataFrame) -> pd.DataFrame:
    """Shares of unused, clean and dirty cache lines: ours (mean over each run, a row per configuration
    and budget, labelled by workload and configuration) and the seed's bcache reading (data/reference seed003_bcache), columns who, state, share."""
    ca = agg[agg["cache"] != "none"]
    states = ca.melt(
        id_vars=["config", "rw", "fraction"],
        value_vars=["unused_mean", "clean_mean", "dirty_mean"],
        var_name="state",
        value_name="share",
    )
    states["state"] = states["state"].str.replace("_mean", "")
    states["who"] = "ours: " + states["rw"] + ", " + states["config"].str.replace("RAID-0 ", "")  # every budget
    bc = bcache[bcache["stat"].isin(["unused", "clean", "dirty"])]
    seed = pd.DataFrame({"who": "seed 003: bcache on vRAM", "state": bc["stat"], "share": bc["number"] / 100.0})
    return pd.concat([states[["who", "state", "share"]], seed], ignore_index=True)


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


def _stated(statements: pd.DataFrame, setup: str, quantity: str) -> float:
    sel = statements[(statements["setup"] == setup) & (statements["quantity"] == quantity)]
    if len(sel) != 1:
        raise KeyError(f"seed 003 {setup}/{quantity}: {len(sel)} rows match")
    return float(sel["number"].iloc[0])


def vram_seed_findings(
    agg: pd.DataFrame, dev: pd.DataFrame, disk: pd.DataFrame, statements: pd.DataFrame, bcache: pd.DataFrame
) -> dict[str, Any]:
    """Seed 003's conclusions set against our records (``vram_summary`` and ``vram_per_device`` tables).

    Returns scalars only (numbers and short verdict phrases) for the chapter's prose: the
    striping gain of the largest array over one device, the spread of per-device load, the
    cache's gain at equal memory budget per workload (with hit ratio and request size), its
    clean/dirty split, and the seed's own numbers for each claim, computed from its
    transcribed tables (data/reference/seeds/seed003_*.csv: ``disk`` = reference.seed003_disk_io(),
    ``statements`` = reference.seed003_statements(), ``bcache`` = reference.seed003_bcache()).
    Nothing here is typed in."""
    out: dict[str, Any] = {}
    nc = vram_striping(agg)
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
    out["seed_qubits"] = int(_stated(statements, "workload", "max_qubits"))
    out["seed_stick_read_min"] = float(sticks["read_bytes_s"].min()) / mib
    out["seed_stick_read_max"] = float(sticks["read_bytes_s"].max()) / mib
    out["seed_stick_spread"] = float(sticks["read_bytes_s"].max() / sticks["read_bytes_s"].min())
    # balance over the array's devices: reads and writes each, the verdict from both; per repetition too
    nc_dev = dev[dev["cache"] == "none"]
    spread = vram_device_spread(vram_device_rates(nc_dev, top))
    for k in ("read", "write"):
        out[f"stripe_spread_{k}_max"] = float(spread[k].max())
    out["stripe_spread_max"] = max(out["stripe_spread_read_max"], out["stripe_spread_write_max"])
    out["balanced_spread"] = BALANCED_SPREAD
    uneven = [k + "s" for k in ("read", "write") if out[f"stripe_spread_{k}_max"] > BALANCED_SPREAD]
    out["stripe_balance"] = (
        "not evenly loaded: " + " and ".join(uneven) + " spread more" if uneven else "evenly loaded, like the seed's"
    )
    by_rep = nc_dev.groupby("repetition") if "repetition" in nc_dev else [(0, nc_dev)]
    reps = pd.concat(vram_device_spread(vram_device_rates(g, top)) for _, g in by_rep)
    both = reps.groupby(["workload", "fraction", "cache"])[["read", "write"]]
    out["stripe_spread_rep_diff"] = round(float((both.max() - both.min()).max().max()), 12)  # between repetitions
    run = agg["mibs_std"] / agg["mibs_mean"] if "mibs_std" in agg else pd.Series([float("nan")])
    out["run_spread_max_pct"] = 100 * float(run.max())  # run to run: the largest std over mean of a configuration
    # ZFS against mdadm in the seed's own tables (whole devices only)
    zfs = whole[(whole["setup"] == "zfs-swap") & whole["device"].str.startswith("nvme")]
    out["seed_zfs_read_ratio"] = float(sticks["read_bytes_s"].mean() / zfs["read_bytes_s"].mean())
    out["seed_zfs_write_ratio"] = float(sticks["write_bytes_s"].mean() / zfs["write_bytes_s"].mean())
    out["seed_zfs_latency_ratio"] = _stated(statements, "zfs-vs-mdadm", "latency_ratio")
    out["seed_iowait_mdadm"] = _stated(statements, "mdadm-raid0-swap", "io_wait")
    out["seed_iowait_zfs"] = _stated(statements, "zfs-swap", "io_wait")
    # the cache at equal budget, per workload
    host = agg[agg["cache"] == "host"]
    cmp = host.merge(
        nc[nc["ndevs"] == host["ndevs"].max()][["rw", "fraction", "mibs_mean", "mean_request_bytes_mean"]],
        on=["rw", "fraction"],
        suffixes=("", "_nocache"),
    )
    cmp["gain"] = cmp["mibs_mean"] / cmp["mibs_mean_nocache"]
    cmp["req_ratio"] = cmp["mean_request_bytes_mean"] / cmp["mean_request_bytes_mean_nocache"]
    out["cache_gain_min"] = float(cmp["gain"].min()) if len(cmp) else None
    out["cache_gain_max"] = float(cmp["gain"].max()) if len(cmp) else None
    out["cache_change_min_pct"] = 100 * float((cmp["gain"] - 1).abs().min()) if len(cmp) else None  # vs run spread
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
    bc = bcache.set_index("stat")["number"]
    for k in ("unused", "clean", "dirty"):
        out[f"seed_bcache_{k}_pct"] = float(bc[k])
    return out


def vram_gpu_status(agg: pd.DataFrame, here_ok: bool, here_why: str) -> str:
    """One sentence on the GPU-memory cache: whether the records hold runs of it, and whether this
    host could make them (``here_ok``, ``here_why`` from nvmelab.engines.tier.gpu_available)."""
    n = int((agg["cache"] == "gpu").sum()) if "cache" in agg.columns else 0
    if n:
        return f"the records hold {n} GPU-memory cache configuration(s), shown beside the host-memory ones"
    here = f"this host has one ({here_why})" if here_ok else f"this host has none either ({here_why})"
    return "the records hold no GPU-memory cache runs: the host that made them had no usable GPU, and " + here


def most_practical_configuration(
    table: pd.DataFrame, *, threads: str = "total_cuda_threads", qdepth: str = "min_qdepth", reached: str = "reached"
) -> pd.Series:
    """Of the configurations that saturated (`reached`), the one that needs the fewest threads and,
    among those, the smallest per-queue depth (fewer commands in flight per queue); the published
    chapters call this the most practical configuration."""
    ok = table[table[reached]] if reached in table else table
    if ok.empty:
        raise ValueError("most_practical_configuration: no configuration saturated")
    return ok.sort_values([threads, qdepth], kind="stable").iloc[0]
