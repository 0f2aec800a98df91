# SPDX-License-Identifier: BSD-3-Clause
"""The analysis of study cpu_submit: the CPU side of CPU-initiated I/O beside seed 004's host variables.

Key names: HOST_VARIABLE_CHANGES (the one-factor comparisons), sweep_change_table (one sweep: means,
IOPS per core, change against its baseline), one_factor_change, host_variable_comparison (ours beside
seed 004's), host_control_table (what the host let the sweep vary, and why not), with_cpu_samples,
freq_khz, sweep_rows, polling_share, BUSY_POLL_MIN_SHARE, effect_beside_control (a change stated beside
its control and its run-to-run spread). Generic aggregation lives in analysis.py.

The emulated sweeps of study cpu_initiated: emulated_sweep_verdicts (each sweep's status word, derived
from the records and the profile's inputs, profile_inputs). Published numbers the book's answer table
quotes: published_threads_to_roofline, published_p2p_payload_gbps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...results import status
from ...results.analysis import aggregate, roofline, saturation
from ...results.model import PROFILE_PATH
from ...results.reference import data_root, headline_value, published

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
            note = f"{why['thr_sib']}: both sides ran on the same CPUs, so this is run-to-run variation"
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


# --- what the emulated sweeps of study cpu_initiated are (issue 34) ---------------------------
#: The status words of the book's one vocabulary that the emulated sweeps can take.
EMULATED = status.EMULATED
DISAGREES = status.EMU_DISAGREES
RESTATES = status.EMU_RESTATES
#: An emulated value restates an input when it is within this share of a profile input (x ndevs / scale).
RESTATE_TOLERANCE = 0.02


def profile_inputs() -> dict[str, float]:
    """The pm1753 emulator profile's nominal inputs (data/results/model/pm1753-profile.csv): name -> value
    (LAT_NS, QUEUE_IOPS, DEV_IOPS, DEV_BW, P2P_LINK_BW)."""
    rows = pd.read_csv(data_root() / PROFILE_PATH)
    return {str(n): float(v) for n, v in zip(rows["name"], rows["value"])}


def _near(value: float, target: float, tol: float = RESTATE_TOLERANCE) -> bool:
    return bool(target) and abs(value / target - 1) <= tol


def emulated_sweep_verdicts(
    agg: dict[str, pd.DataFrame],
    *,
    roof: float,
    scale: float,
    ndevs: int,
    ncpus: int,
    profile: dict[str, float],
    seed: dict[str, float],
    pub_threads: int | None,
    pub_roof: float,
) -> pd.DataFrame:
    """One row per emulated one-factor sweep of study cpu_initiated (`agg`: sweep name -> aggregate
    with ``iops_mean``/``mibs_mean``): ``sweep``, ``quantity``, ``ours``, ``published``, ``status`` (a
    word of the book's vocabulary, derived here) and ``why``, plus ``input`` (the profile-derived value
    the emulated one is compared with, NaN where none). `roof`: the emulated roofline (IOPS) of the
    centre point (`ndevs` devices, `ncpus` threads); `profile`: profile_inputs(); `seed`: seed 004's
    ``peak_qdepth``, ``bandwidth_512`` and ``bandwidth_4096``; `pub_threads`: the fewest published
    CPU threads that reach the roofline `pub_roof` (IOPS). Rules: queue depth and threads disagree when
    the emulated saturation point differs from the published one; I/O size and devices restate an input
    when every emulated value is within RESTATE_TOLERANCE of a profile input x devices / scale."""
    rows = []
    lat_s = profile["LAT_NS"] * 1e-9 * scale
    if "qdepth" in agg and not agg["qdepth"].empty:
        sat = _saturating(agg["qdepth"], "qdepth", roof)
        need = roof / (ndevs * ncpus) * lat_s  # Little's law: the depth one queue needs at the profile's turnaround
        ours = sat if sat is not None else float("nan")
        status = EMULATED if ours == seed["peak_qdepth"] else DISAGREES
        rows.append(
            dict(
                sweep="qdepth",
                quantity="smallest queue depth reaching the saturation fraction",
                ours=ours,
                published=seed["peak_qdepth"],
                input=need,
                status=status,
                why=(
                    f"the profile's turnaround ({lat_s * 1e6:,.0f} µs at scale {scale:g}) with {ncpus} "
                    f"queue{'s' if ncpus != 1 else ''} per device asks each queue for a depth of {need:.1f} "
                    "(Little's law)"
                ),
            )
        )
    if "ncpus" in agg and not agg["ncpus"].empty:
        sat = _saturating(agg["ncpus"], "ncpus", roof)
        rows.append(
            dict(
                sweep="ncpus",
                quantity="fewest CPU threads reaching the saturation fraction",
                ours=float("nan") if sat is None else sat,
                published=pub_threads,
                input=roof,
                status=EMULATED if sat is not None and sat == pub_threads else DISAGREES,
                why=(
                    f"set by the scale: at {scale:g} one thread has {roof:,.0f} IOPS to issue, the published "
                    f"{ndevs} devices {pub_roof:,.0f}; the CPU's cost per command is not scaled"
                ),
            )
        )
    if "iosize" in agg and {512, 4096} <= set(agg["iosize"]["iosize"]):
        bw = agg["iosize"].set_index("iosize")["mibs_mean"]
        bw_in = profile["DEV_BW"] * ndevs / scale / 2**20
        iops_in = profile["DEV_IOPS"] * ndevs / scale * 512 / 2**20
        restated = _near(float(bw[4096]), bw_in) and _near(float(bw[512]), iops_in)
        rows.append(
            dict(
                sweep="iosize",
                quantity="bandwidth at 4096 B over bandwidth at 512 B",
                ours=float(bw[4096] / bw[512]),
                published=seed["bandwidth_4096"] / seed["bandwidth_512"],
                input=bw_in / iops_in,
                status=RESTATES if restated else EMULATED,
                why=(
                    f"the ends are the profile's bandwidth ({bw_in:,.0f} MiB/s) and command cap at 512 B "
                    f"({iops_in:,.1f} MiB/s), {ndevs} devices over the scale"
                ),
            )
        )
    if "ndevs" in agg and not agg["ndevs"].empty:
        d = agg["ndevs"].sort_values("ndevs")
        cap = profile["DEV_IOPS"] / scale
        per_dev = d["iops_mean"].to_numpy(float) / d["ndevs"].to_numpy(float)
        worst = float(np.max(np.abs(per_dev / cap - 1)))
        rows.append(
            dict(
                sweep="ndevs",
                quantity="largest departure of IOPS per device from the profile's cap",
                ours=worst,
                published=float("nan"),
                input=cap,
                status=RESTATES if worst <= RESTATE_TOLERANCE else EMULATED,
                why=f"each device is a copy of the cap ({cap:,.0f} IOPS), so n devices give n caps",
            )
        )
    return pd.DataFrame(rows, columns=["sweep", "quantity", "ours", "published", "input", "status", "why"])


def _saturating(agg: pd.DataFrame, x: str, roof: float) -> Any:
    """The smallest `x` whose ``iops_mean`` reaches the saturation fraction of `roof` (None if none)."""
    return saturation(agg, x, roof).saturating_x[0]


def effect_beside_control(
    df: pd.DataFrame,
    var: str,
    new: Any,
    old: Any,
    *,
    fixed: dict[str, Any] | None = None,
    control: tuple[str, Any, Any, dict[str, Any]] | None = None,
    by: Sequence[str] = ("backend",),
) -> pd.DataFrame:
    """A one-factor change stated beside its control and its run-to-run spread, per `by` group:
    ``change`` (`var` from `old` to `new`, `fixed` held), ``control`` (the change of the `control`
    comparison, ``(var, new, old, fixed)``, e.g. thread siblings on a host without them, where both
    sides ran on the same CPUs; NaN without one), ``spread`` (the largest population standard deviation
    over the mean among the configurations compared) and ``resolved``: the change is larger than the
    control's change and than twice the spread. Only groups with both sides of the change appear."""
    cols = list(by) + ["change", "control", "spread", "resolved"]
    got = one_factor_change(df, var, new, old, fixed=fixed, by=by)
    if got.empty:
        return pd.DataFrame(columns=cols)
    ctl = one_factor_change(df, control[0], control[1], control[2], fixed=control[3], by=by) if control else None
    keys = sorted({k for k in [var] + list(fixed or {}) + ([control[0], *control[3]] if control else []) if k in df})
    g = df.groupby(list(by) + keys)["iops"]
    rel = (g.std(ddof=0) / g.mean()).groupby(level=list(range(len(by)))).max()
    rows = []
    for r in got.itertuples(index=False):
        key = tuple(getattr(r, b) for b in by)
        c = float("nan")
        if ctl is not None:
            hit = ctl[(ctl[list(by)] == pd.Series(key, index=list(by))).all(axis=1)]
            c = float(hit["change"].iloc[0]) if len(hit) else float("nan")
        s = float(rel.get(key if len(by) > 1 else key[0], float("nan")))
        floor = max(abs(c) if c == c else 0.0, 2 * s if s == s else 0.0)
        rows.append(
            {**dict(zip(by, key)), "change": r.change, "control": c, "spread": s, "resolved": abs(r.change) > floor}
        )
    return pd.DataFrame(rows, columns=cols)


# --- published numbers the answer table quotes ------------------------------------------------
def published_threads_to_roofline(backend: str = "upcie") -> tuple[int | None, float]:
    """The fewest CPU threads whose mean reaches the saturation fraction of the 16-device roofline in the
    published records (data/reference/cpu-initiated-upcie.jsonl; xnvmeperf, QD 128, 512 B), for
    `backend` (``upcie``: payload in host memory; ``upcie-cuda``: in GPU memory), and that roofline
    (IOPS: the published device cap x 16)."""
    pub = published("cpu-initiated-upcie")
    roof = roofline(constant=headline_value("cpu-initiated", "device_iops_cap") * int(pub["ndevs"].iloc[0]))
    sat = saturation(aggregate(pub, by=["backend", "ncpus"]), "ncpus", roof, by=["backend"]).set_index("backend")
    x = sat.loc[backend, "saturating_x"]
    return (None if x is None else int(x)), roof.value


def published_p2p_payload_gbps(iosize: int = 4096) -> float:
    """The published payload bandwidth (GB/s, mean of the repetitions) into GPU memory at `iosize` with
    one CPU thread and 4 devices at QD 128 (data/reference/pcie-bandwidth-saturation.jsonl)."""
    agg = aggregate(published("pcie-bandwidth-saturation"), by=["iosize"], metrics=["gbps"]).set_index("iosize")
    return float(agg.loc[iosize, "gbps_mean"])
