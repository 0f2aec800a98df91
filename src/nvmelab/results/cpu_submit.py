# SPDX-License-Identifier: BSD-3-Clause
"""The analysis of study cpu_submit: the CPU side of CPU-initiated I/O beside seed 004's host variables.

Key names: HOST_VARIABLE_CHANGES (the one-factor comparisons), sweep_change_table (one sweep: means,
IOPS per core, change against its baseline), one_factor_change, host_variable_comparison (ours beside
seed 004's), host_control_table (what the host let the sweep vary, and why not), with_cpu_samples,
freq_khz, sweep_rows, polling_share, BUSY_POLL_MIN_SHARE. Generic aggregation lives in analysis.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .analysis import aggregate

# --- the CPU side of CPU-initiated I/O (study cpu_submit; seed 004's host variables) ----------
#: Seed 004's host-variable comparisons, as (name, sweep of study cpu_submit, variable, new value,
#: old value, columns held fixed, seed 004's parameterisation ids new/old or the host-variable
#: condition). Each is a one-factor change: the published one is computed from seed 004's tables,
#: ours from the records of that sweep.
HOST_VARIABLE_CHANGES = (
    ("stress on, siblings not used (D vs C)", "stress", "stress", 1, 0, {"thr_sib": 0}, ("D", "C")),
    ("stress on, siblings used (B vs A)", "stress", "stress", 1, 0, {"thr_sib": 1}, ("B", "A")),
    ("siblings used, no stress (A vs C)", "stress", "thr_sib", 1, 0, {"stress": 0}, ("A", "C")),
    ("powersave governor (C)", "governor", "governor", "powersave", "performance", {}, "powersave"),
    ("turbo off (C)", "turbo", "turbo", 0, 1, {}, "turbo_off"),
    ("SMT off (C)", "smt", "smt", 0, 1, {}, "smt_off"),
    ("SMT off, userspace governor at a fixed clock (C)", None, "fixed_freq", None, None, {}, "smt_off_userspace_3ghz"),
)


def freq_khz(cpu_freqs: Any) -> float:
    """Mean sampled frequency over a record's CPUs (``cpu_freqs``: per CPU [mean, variance] in kHz,
    or [mean, variance] pairs as published); NaN when the record has no samples."""
    if not cpu_freqs:
        return float("nan")
    means = [f[0] for f in cpu_freqs if isinstance(f, (list, tuple)) and f and f[0] is not None]
    return float(np.mean(means)) if means else float("nan")


def with_cpu_samples(df: pd.DataFrame, records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """`df` (rows of `to_frame`) with the per-record CPU samples that `to_frame` leaves out:
    ``freq_khz`` (see :func:`freq_khz`) and ``logical_cpus`` (how many logical CPUs the run used),
    matched on ``run_key`` and ``results_host`` when present."""
    keys = [k for k in ("run_key", "results_host") if k in df.columns]
    if "run_key" not in keys:
        raise ValueError("with_cpu_samples: df has no run_key column")
    rows = [
        {
            **{k: r.get(k) for k in keys},
            "freq_khz": freq_khz(r.get("cpu_freqs")),
            "logical_cpus": len(r.get("cpus") or []) or float("nan"),
        }
        for r in records
    ]
    samples = pd.DataFrame(rows, columns=keys + ["freq_khz", "logical_cpus"]).drop_duplicates(keys)
    return df.drop(columns=[c for c in ("freq_khz", "logical_cpus") if c in df.columns]).merge(
        samples, on=keys, how="left"
    )


def sweep_change_table(
    df: pd.DataFrame,
    x: str,
    baseline: Any,
    *,
    by: Sequence[str] = ("backend",),
    metrics: Sequence[str] = ("iops", "cpu_usage", "freq_khz"),
) -> pd.DataFrame:
    """One sweep of our records: per `by` group and `x` value, the means (population std) of
    `metrics`, ``iops_per_core_mean``/``_std`` (IOPS over the run's physical cores, ``ncpus``) and
    ``change``, the relative change of ``iops_mean`` against the row whose `x` is `baseline` in the
    same group (NaN where the group has no baseline row)."""
    d = df.copy()
    d["iops_per_core"] = d["iops"].astype(float) / d["ncpus"].astype(float)
    metrics = [m for m in metrics if m in d.columns] + ["iops_per_core"]
    keys = list(by) + ([x] if x not in by else []) + (["ncpus"] if x != "ncpus" else [])
    agg = aggregate(d, by=keys, metrics=metrics)
    base = agg[agg[x].astype(str) == str(baseline)].set_index(list(by))["iops_mean"]
    ref = agg.set_index(list(by)).index.map(lambda k: base.get(k, float("nan")))
    agg["change"] = agg["iops_mean"].to_numpy() / np.asarray(ref, dtype=float) - 1
    return agg


def one_factor_change(
    df: pd.DataFrame,
    var: str,
    new: Any,
    old: Any,
    *,
    fixed: dict[str, Any] | None = None,
    by: Sequence[str] = ("backend",),
) -> pd.DataFrame:
    """Mean IOPS with `var` at `old` and at `new` (other columns in `fixed` held), per `by` group,
    and their relative ``change``; only groups that have both values appear."""
    cols = list(by) + ["old_iops", "new_iops", "change"]
    if df.empty or var not in df.columns:
        return pd.DataFrame(columns=cols)
    d = df
    for k, v in (fixed or {}).items():
        if k not in d.columns:
            return pd.DataFrame(columns=cols)
        d = d[d[k].astype(str) == str(v)]
    sel = d[var].astype(str)
    old_m = d[sel == str(old)].groupby(list(by))["iops"].mean()
    new_m = d[sel == str(new)].groupby(list(by))["iops"].mean()
    both = old_m.index.intersection(new_m.index)
    out = pd.DataFrame({"old_iops": old_m[both], "new_iops": new_m[both]})
    out["change"] = out["new_iops"] / out["old_iops"] - 1
    return out.reset_index()[cols]


def host_control_table(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """What the measuring host let the sweep vary, from the records' ``host_control`` (written by
    the runner): one row per variable and host with ``found``, ``settable`` and ``why``."""
    rows = {}
    for r in records:
        host = r.get("results_host") or (r.get("provenance") or {}).get("host")
        for var, c in (r.get("host_control") or {}).items():
            rows[(host, var)] = {
                "host": host,
                "variable": var,
                "found": c.get("found"),
                "settable": bool(c.get("settable")),
                "why": c.get("why") or "",
            }
    return pd.DataFrame(list(rows.values()), columns=["host", "variable", "found", "settable", "why"])


def host_variable_comparison(
    sweeps: dict[str, pd.DataFrame],
    seed_ad: pd.DataFrame,
    seed_hv: pd.DataFrame,
    control: pd.DataFrame,
    *,
    by: str = "backend",
) -> pd.DataFrame:
    """Seed 004's host-variable changes beside ours: one row per entry of HOST_VARIABLE_CHANGES,
    ``published`` (relative change computed from seed 004's IOPS: the A-D table, or the
    condition's table against the A-D value of C), one column of our change per `by` value, and
    ``note``: why ours is missing (the host's reason from `control`, or that the sweep has no
    such runs). `sweeps` maps a sweep name to the rows of our records in it (Plan.sweep_frame);
    `seed_ad`/`seed_hv` as nvmelab.results.reference loads them."""
    groups = sorted({g for d in sweeps.values() if by in d.columns for g in d[by].dropna().unique()})
    ad = seed_ad.set_index("id")["iops"]
    why = (
        {} if control.empty else control.drop_duplicates("variable", keep="last").set_index("variable")["why"].to_dict()
    )
    rows = []
    for name, sweep, var, new, old, fixed, seed in HOST_VARIABLE_CHANGES:
        if isinstance(seed, tuple):
            pub = ad[seed[0]] / ad[seed[1]] - 1
        else:
            hv = seed_hv[(seed_hv["condition"] == seed) & (seed_hv["id"] == "C")]
            pub = float(hv["iops"].iloc[0]) / ad["C"] - 1 if len(hv) == 1 else float("nan")
        row: dict[str, Any] = {"change": name, "published": pub}
        frame = sweeps.get(sweep) if sweep else None
        got = (
            one_factor_change(frame, var, new, old, fixed=fixed, by=[by])
            if frame is not None and new is not None
            else None
        )
        for g in groups:
            hit = got[got[by] == g] if got is not None else None
            row[g] = float(hit["change"].iloc[0]) if hit is not None and len(hit) else float("nan")
        siblings = var == "thr_sib" or fixed.get("thr_sib") == 1
        if new is None:  # no value of ours to compare: the host's reason why the sweep cannot set it
            note = why.get(var) or "no runs of this change in the records"
        elif not groups or any(np.isnan(row[g]) for g in groups):
            note = (
                why.get("thr_sib") if siblings and why.get("thr_sib") else why.get(var)
            ) or "no runs of this change in the records"
        elif siblings and why.get("thr_sib"):
            note = (
                f"{why['thr_sib']}: thr_sib=1 ran on the same CPUs as thr_sib=0, so this difference is "
                "run-to-run variation, not an effect of siblings"
            )
        else:
            note = ""
        row["note"] = note
        rows.append(row)
    return pd.DataFrame(rows, columns=["change", "published"] + list(groups) + ["note"])


def sweep_rows(df: pd.DataFrame, plan: Any, sweep: str) -> pd.DataFrame:
    """The rows of `df` that are runs of `sweep` in `plan` (an experiments Plan), matched on the
    exact run key, so a configuration that several sweeps share counts in each of them and a
    parameter a record states differently (a backend named by the engine) does not get in the way."""
    if sweep not in plan.sweeps:
        raise KeyError(f"plan has no sweep {sweep!r}; it has {', '.join(plan.sweeps)}")
    keys = {r.key for r in plan.runs if sweep in r.sweeps}
    if df.empty or "run_key" not in df.columns:
        return df.iloc[0:0]
    return df[df["run_key"].isin(keys)].reset_index(drop=True)


#: A busy-polling engine keeps each of its cores busy; a run whose measured CPU use is below this share
#: of ncpus x 100 % lost CPU time to other work on the host (a noisy neighbour, a busy hypervisor).
BUSY_POLL_MIN_SHARE = 0.9


def polling_share(df: pd.DataFrame) -> pd.Series:
    """Per run, the share of its cores the engine actually got: ``cpu_usage`` (percent of one CPU) over
    ``ncpus`` x 100 %. Meaningful for busy-polling engines (the nvmelab driver), where it should be
    close to 1; NaN where a record has no cpu_usage."""
    usage = (
        pd.to_numeric(df["cpu_usage"], errors="coerce")
        if "cpu_usage" in df
        else pd.Series(float("nan"), index=df.index)
    )
    return usage / (df["ncpus"].astype(float) * 100.0)
