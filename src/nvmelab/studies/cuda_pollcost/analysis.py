# SPDX-License-Identifier: BSD-3-Clause
"""What polling costs the GPU, from cuda-run records (study cuda_pollcost, shown in cuda_qdepth's chapter).

Each record of the study is one queue depth with (``corun.per_sm`` > 0) or without a co-running compute
kernel (engines/gpu_corun.py builds the field, src/engine/cuda/crun_corun.h measures it). ``table``
gives, per queue depth: the CUDA threads the I/O keeps polling (qdepth x nqueues x devices, the seeds'
rule), the co-runner's rate under the I/O load as a share of its rate alone (mean and spread over the
valid repetitions), and NVML's SM activity of the I/O alone (GPM SM_UTIL over the measured window,
median of the corun = 0 records where it was readable). Left out, and counted: records whose co-runner
did not run wholly under the I/O load (``corun.valid`` false), stand-in records. Runs the emulator limited
stay in and are counted (``flagged``): the co-runner's ratio is still the polling's cost at the I/O rate
that run had.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

COLUMNS = [
    "qdepth",
    "io_threads",
    "corun_runs",
    "ratio_mean",
    "ratio_min",
    "ratio_max",
    "cost_mean",
    "alone_runs",
    "sm_active_p50",
    "left_out",
    "flagged",
]


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def points(df: pd.DataFrame) -> pd.DataFrame:
    """One row per record: qdepth, io_threads, per_sm, ratio (None unless valid), sm_active (the window's
    GPM median, None where unreadable), usable (False: left out, with `why`)."""
    rows = []
    for _, r in df.iterrows():
        co = r.get("corun") if isinstance(r.get("corun"), dict) else {}
        per_sm = int(co.get("per_sm") or 0)
        why = None
        if r.get("standin") is True:
            why = "stand-in record"
        elif per_sm and not co.get("valid"):
            why = co.get("why_invalid") or "co-runner not valid"
        sm = _get(r.get("nvml"), "sm_active_pct", "p50") if _get(r.get("nvml"), "readable") else None
        rows.append(
            {
                "qdepth": int(r["qdepth"]),
                "io_threads": int(r["qdepth"]) * int(r["nqueues"]) * int(r["ndevs"]),
                "per_sm": per_sm,
                "ratio": co.get("ratio") if per_sm and why is None else None,
                "sm_active": sm if not per_sm and why is None else None,
                "usable": why is None,
                "why": why,
                "flagged": r.get("emulator_limited") is True,
            }
        )
    cols = ["qdepth", "io_threads", "per_sm", "ratio", "sm_active", "usable", "why", "flagged"]
    return pd.DataFrame(rows, columns=cols)


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Per queue depth (see the module docstring); empty with COLUMNS when there is no record."""
    if df is None or df.empty:
        return pd.DataFrame(columns=COLUMNS)
    pts = points(df)
    out = []
    for qd, g in pts.groupby("qdepth", sort=True):
        ratios = [float(x) for x in g["ratio"] if x is not None and math.isfinite(float(x))]
        sms = [float(x) for x in g["sm_active"] if x is not None]
        out.append(
            {
                "qdepth": int(qd),
                "io_threads": int(g["io_threads"].iloc[0]),
                "corun_runs": len(ratios),
                "ratio_mean": sum(ratios) / len(ratios) if ratios else None,
                "ratio_min": min(ratios) if ratios else None,
                "ratio_max": max(ratios) if ratios else None,
                "cost_mean": 1.0 - sum(ratios) / len(ratios) if ratios else None,
                "alone_runs": int(((g["per_sm"] == 0) & g["usable"]).sum()),
                "sm_active_p50": float(pd.Series(sms).median()) if sms else None,
                "left_out": int((~g["usable"]).sum()),
                "flagged": int((g["flagged"] & g["usable"]).sum()),
            }
        )
    return pd.DataFrame(out, columns=COLUMNS)


PUBLISHED_COLUMNS = ["nqueues", "blocks", "published_sm_active", "ours_sm_active", "ours_cost_min", "ours_cost_max"]


def published_beside_ours(ours: pd.DataFrame) -> pd.DataFrame:
    """The published pages' SM activity per queue count (DCGM field 1002, the mean over the depth sweep, a
    revision of xnvme/aisio later than 02b6c63: reference.polling_cost) beside what our runs measured at the
    same queue count: NVML's SM activity of the I/O alone (median over the depths, ``sm_active_p50`` of
    ``table``) and the co-runner's lost rate (smallest and largest ``cost_mean`` over the depths). Our study
    runs one queue per device only: the other rows have no measurement of ours (None)."""
    from ...results import reference

    pub = reference.polling_cost("cuda-qdepth")
    sm = pub[pub["quantity"] == "sm_active_depth_mean"].set_index("nqueues")["value"]
    blocks = pub[pub["quantity"] == "blocks"].set_index("nqueues")["value"]
    have = ours is not None and not ours.empty
    rows = []
    for nq in sm.index:
        mine = int(nq) == 1 and have
        costs = ours["cost_mean"].dropna().astype(float) if mine else pd.Series(dtype=float)
        sms = ours["sm_active_p50"].dropna().astype(float) if mine else pd.Series(dtype=float)
        rows.append(
            {
                "nqueues": int(nq),
                "blocks": int(blocks[nq]),
                "published_sm_active": float(sm[nq]),
                "ours_sm_active": float(sms.median()) if not sms.empty else None,
                "ours_cost_min": float(costs.min()) if not costs.empty else None,
                "ours_cost_max": float(costs.max()) if not costs.empty else None,
            }
        )
    return pd.DataFrame(rows, columns=PUBLISHED_COLUMNS)


def published_value(pub: pd.DataFrame, quantity: str, **where: Any) -> float:
    """One number the published polling-cost set states (results.reference.polling_cost's frame): the row of
    `quantity` whose columns equal `where` (nqueues=2, qdepth=128, ...); IndexError when none does."""
    sel = pub[pub["quantity"] == quantity]
    for k, v in where.items():
        sel = sel[sel[k] == v]
    return float(sel["value"].iloc[0])
