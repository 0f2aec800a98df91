# SPDX-License-Identifier: BSD-3-Clause
"""The blksum_qdepth study's figures (checksum time and speedup against queue depth); moved from
nvmelab.results.plots, which keeps the plot style and the helpers every study shares. Inputs are tables of
the study's analysis module (nvmelab.studies.blksum_qdepth.analysis)."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from ...results.plot_style import DASH_LEGEND, DASHES, HALF_WIDTH, series_encodings
from ...results.plots import _two_per_row


def _log2_qdepth(values: Sequence) -> alt.X:
    return alt.X(
        "qdepth:Q",
        scale=alt.Scale(type="log", base=2),
        title="queue depth",
        axis=alt.Axis(values=sorted(pd.Series(values).unique().tolist()), format="~g"),
    )


def blksum_time(agg: pd.DataFrame) -> alt.FacetChart:
    """Mean checksum time against queue depth, one panel per digest, a line per I/O mode and thread
    count, error bars ``lo``..``hi`` (analysis.blksum_summary of our tool's records)."""
    x = _log2_qdepth(agg["qdepth"])
    base = alt.Chart(agg)
    enc = series_encodings("series:N", sorted(agg["series"].unique()), "I/O, threads")
    lines = base.mark_line(point=True).encode(
        x=x,
        y=alt.Y("runtime_s_mean:Q", title="time (s)"),
        color=enc["color"],
        shape=enc["shape"],
        strokeDash=enc["strokeDash"],
        tooltip=[
            "digest",
            "io",
            "threads",
            "qdepth",
            alt.Tooltip("runtime_s_mean:Q", format=".3f"),
            alt.Tooltip("runtime_s_std:Q", format=".3f"),
            alt.Tooltip("mibs_mean:Q", format=",.0f"),
        ],
    )
    bars = base.mark_errorbar().encode(x=x, y=alt.Y("lo:Q", title="time (s)"), y2="hi:Q", color=enc["color"])
    return _two_per_row((lines + bars).properties(width=HALF_WIDTH, height=220), "digest:N", "digest").resolve_scale(
        y="independent"
    )


def blksum_speedup(both: pd.DataFrame) -> alt.FacetChart:
    """Speed-up over queue depth 1 per series, ours (solid) and the seed's (dashed), one panel per
    digest (analysis.blksum_speedups)."""
    enc = series_encodings("series:N", sorted(both["series"].unique()), "series")
    sources = sorted(both["source"].unique())
    chart = (
        alt.Chart(both)
        .mark_line(point=True)
        .encode(
            x=_log2_qdepth(both["qdepth"]),
            y=alt.Y("speedup:Q", title="speed-up over Q1"),
            color=enc["color"],
            shape=enc["shape"],
            strokeDash=alt.StrokeDash(
                "source:N",
                title="source",
                scale=alt.Scale(domain=sources, range=DASHES[: len(sources)]),
                legend=DASH_LEGEND,
            ),
            detail="series:N",
            tooltip=["series", "digest", "qdepth", alt.Tooltip("speedup:Q", format=".2f")],
        )
        .properties(width=HALF_WIDTH, height=240)
    )
    return _two_per_row(chart, "digest:N", "digest")
