# SPDX-License-Identifier: BSD-3-Clause
"""The completion-matching study (cuda_match): records' ``match`` blocks as a table, and its figure.

    df = matching.frame(records)          one row per record: mode, order, qdepth, nqueues and the counters
    tab = matching.summary(df)            per (order, mode, qdepth): looks and CQ bytes per completion,
                                          misattributed commands per 1000, stale and foreign CQEs per completion
    chart = matching.chart(tab, title)    CQ bytes per completion and misattributed per 1000, by mode and order

A record's ``match`` block (nvmelab.engines.gpu.match_block) comes from the GPU engine or from the CPU
stand-in (``standin: true``); ``order`` is read from the target's ``ooo_win`` key (``in order`` without it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import altair as alt
import pandas as pd

from ...driver import uri as _uri

#: Matching modes in the order the figure and tables show them (src/nvme/nvme_gpuq_match.h).
MODES = ("cid", "positional", "scan")
#: Misattributed commands are shown per this many completions.
PER = 1000


def order_of(target: str) -> str:
    """``in order`` or ``out of order (window W)`` from a target URI's ooo_win key."""
    win = int(_uri.get(str(target), "ooo_win", "0"))
    return f"out of order (window {win})" if win > 1 else "in order"


def frame(records: Iterable[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """One row per record (dicts, or analysis.to_frame's rows, which keep the block) that carries a ``match``
    block; failed points and records without the block are left out."""
    if isinstance(records, pd.DataFrame):
        records = records.to_dict("records")
    rows = []
    for r in records:
        m = r.get("match")
        if not isinstance(m, dict) or (isinstance(r.get("failed"), dict) and r.get("failed")):
            continue
        rows.append(
            {
                "mode": m["mode"],
                "order": order_of(r["target"]),
                "qdepth": int(r["qdepth"]),
                "nqueues": int(r["nqueues"]),
                "completions": int(m["completions"]),
                "looks_per_completion": m["looks_per_completion"],
                "cq_bytes_per_completion": m["cq_bytes_per_completion"],
                "stale": int(m["stale"]),
                "foreign": int(m["foreign"]),
                "misattributed": int(m["misattributed"]),
                "standin": bool(r.get("standin")),
            }
        )
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Counters summed per (order, mode, qdepth) and turned into rates per completion."""
    w = df.assign(
        looks=df.looks_per_completion.astype(float) * df.completions,
        cq_bytes=df.cq_bytes_per_completion.astype(float) * df.completions,
    )
    s = w.groupby(["order", "mode", "qdepth"], sort=False)[
        ["completions", "looks", "cq_bytes", "stale", "foreign", "misattributed"]
    ].sum()
    s["looks_per_completion"] = s.looks / s.completions
    s["cq_bytes_per_completion"] = s.cq_bytes / s.completions
    s["misattributed_per_k"] = s.misattributed / s.completions * PER
    s["foreign_per_completion"] = s.foreign / s.completions
    out = s.reset_index()
    out["mode"] = pd.Categorical(out["mode"], categories=list(MODES), ordered=True)
    return out.sort_values(["order", "mode", "qdepth"]).reset_index(drop=True)


def chart(tab: pd.DataFrame, title: str) -> alt.VConcatChart:
    """Two panels, no colour legend (mode on the y axis, order and queue depth in the panel grid):
    CQ bytes read per completion, and commands handed another command's status per 1000."""
    t = tab.assign(mode=tab["mode"].astype(str), qd=[f"qd {q}" for q in tab.qdepth])
    panels = []
    for field, label in (
        ("cq_bytes_per_completion", "CQ bytes read per completion"),
        ("misattributed_per_k", f"misattributed per {PER} commands"),
    ):
        panels.append(
            alt.Chart(t)
            .mark_bar()
            .encode(
                y=alt.Y("mode:N", title=None, sort=list(MODES)),
                x=alt.X(f"{field}:Q", title=label),
                row=alt.Row("qd:N", title=None, sort=sorted(set(t.qd), key=lambda s: int(s.split()[1]))),
                column=alt.Column("order:N", title=None),
                tooltip=["mode", "order", "qdepth", alt.Tooltip(f"{field}:Q", format=".3g")],
            )
            .properties(width=170, height=60)
        )
    return alt.vconcat(*panels, title=title)


def findings(tab: pd.DataFrame) -> dict[str, Any]:
    """What a ``summary`` table shows, for the chapter's sentence: commands and misattributed commands in order,
    positional reap's misattributed per PER out of order (smallest and largest over the depths), those of cid and
    scan out of order, and scan's CQ bytes per completion over cid's (smallest and largest over the depths, in
    order)."""
    t = tab.assign(mode=tab["mode"].astype(str))
    ino, ooo = t[t["order"] == "in order"], t[t["order"] != "in order"]
    pos = ooo[ooo["mode"] == "positional"]["misattributed_per_k"]
    cid = ino[ino["mode"] == "cid"].set_index("qdepth")["cq_bytes_per_completion"]
    scan = ino[ino["mode"] == "scan"].set_index("qdepth")["cq_bytes_per_completion"]
    ratio = (scan / cid).dropna()
    return {
        "inorder_commands": int(ino["completions"].sum()),
        "inorder_misattributed": int(ino["misattributed"].sum()),
        "ooo_positional_per_k_min": float(pos.min()) if not pos.empty else float("nan"),
        "ooo_positional_per_k_max": float(pos.max()) if not pos.empty else float("nan"),
        "ooo_id_misattributed": int(ooo[ooo["mode"] != "positional"]["misattributed"].sum()),
        "scan_over_cid_min": float(ratio.min()) if not ratio.empty else float("nan"),
        "scan_over_cid_max": float(ratio.max()) if not ratio.empty else float("nan"),
        "qdepths": sorted(int(q) for q in t["qdepth"].unique()),
    }
