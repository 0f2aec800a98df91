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
