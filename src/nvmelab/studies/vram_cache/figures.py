# SPDX-License-Identifier: BSD-3-Clause
"""The vram_cache study's figures (throughput, striping, load spread, cache and line states against the
memory budget); moved from nvmelab.results.plots, which keeps the plot style and the helpers every study
shares. Inputs are tables of the study's analysis module (nvmelab.studies.vram_cache.analysis)."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from ...results.plot_style import DASH_LEGEND, DASHES, HALF_WIDTH, fraction_axis, series_encodings
from ...results.plots import _two_per_row


def _budget_x(agg: pd.DataFrame) -> alt.X:
    return alt.X(
        "fraction_value:Q",
        scale=alt.Scale(type="log", base=2),
        title="memory budget (fraction of the state)",
        axis=fraction_axis(agg["fraction_value"].unique().tolist()),
    )


def vram_throughput(agg: pd.DataFrame) -> alt.FacetChart:
    """Effective throughput against the memory budget per configuration, one panel per workload,
    error bars one std (analysis.vram_summary)."""
    x = _budget_x(agg)
    base = alt.Chart(agg)
    enc = series_encodings("config:N", sorted(agg["config"].unique()), "configuration")
    lines = base.mark_line(point=True).encode(
        x=x,
        y=alt.Y("mibs_mean:Q", title="effective throughput (MiB/s)"),
        color=enc["color"],
        shape=enc["shape"],
        strokeDash=enc["strokeDash"],
        tooltip=[
            "config",
            "rw",
            "fraction",
            alt.Tooltip("mibs_mean:Q", format=".1f"),
            alt.Tooltip("mibs_std:Q", format=".1f"),
            alt.Tooltip("hit_ratio_mean:Q", format=".2f"),
        ],
    )
    bars = base.mark_errorbar().encode(
        x=x, y=alt.Y("lo:Q", title="effective throughput (MiB/s)"), y2="hi:Q", color=enc["color"]
    )
    return _two_per_row((lines + bars).properties(width=HALF_WIDTH, height=200), "rw:N", "workload").resolve_scale(
        y="independent"
    )


def vram_striping(nc: pd.DataFrame, fractions: Sequence[str]) -> alt.FacetChart:
    """Speed-up of RAID-0 over one device against the number of devices, a line per budget (in the
    order of `fractions`), one panel per workload (analysis.vram_striping)."""
    from fractions import Fraction

    order = sorted(fractions, key=Fraction)  # numerically: 1/64, 1/32, 1/16 ... (not as text)
    enc = series_encodings("fraction:N", order, "budget")
    chart = (
        alt.Chart(nc)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "ndevs:Q",
                title="devices",
                scale=alt.Scale(domain=[1, int(nc["ndevs"].max())]),
                axis=alt.Axis(values=sorted(nc["ndevs"].unique().tolist())),
            ),
            y=alt.Y("speedup:Q", title="effective throughput / one device"),
            color=enc["color"],
            shape=enc["shape"],
            strokeDash=enc["strokeDash"],
            tooltip=["rw", "fraction", "ndevs", alt.Tooltip("speedup:Q", format=".2f")],
        )
        .properties(width=HALF_WIDTH, height=190)
    )
    return _two_per_row(chart, "rw:N", "workload")


def vram_spread(spread: pd.DataFrame, balanced: float) -> alt.FacetChart:
    """Load spread over the array's devices (busiest over least busy, analysis.vram_device_spread)
    against the memory budget: a line per direction and cache, one panel per workload, and a rule at
    `balanced`, the spread up to which the chapter calls an array evenly loaded."""
    from fractions import Fraction

    long = spread.melt(id_vars=["workload", "fraction", "cache"], value_vars=["read", "write"], var_name="direction")
    long["fraction_value"] = [float(Fraction(f)) for f in long["fraction"]]
    long["series"] = long["direction"] + ", cache " + long["cache"]
    enc = series_encodings("series:N", sorted(long["series"].unique()), "direction, cache")
    x = _budget_x(long)
    lines = (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("value:Q", title="busiest / least busy device", scale=alt.Scale(zero=False)),
            color=enc["color"],
            shape=enc["shape"],
            strokeDash=enc["strokeDash"],
            tooltip=["workload", "fraction", "cache", "direction", alt.Tooltip("value:Q", format=".3f")],
        )
    )
    rule = alt.Chart(long).mark_rule(color="black", strokeDash=[2, 2]).encode(y=alt.datum(balanced))
    return _two_per_row((lines + rule).properties(width=HALF_WIDTH, height=200), "workload:N", "workload")


def vram_cache(agg: pd.DataFrame) -> alt.VConcatChart:
    """The cache's hit ratio (top) and the mean device request size (bottom, every configuration)
    against the memory budget (analysis.vram_summary)."""
    x = _budget_x(agg)
    configs = sorted(agg["config"].unique())
    workloads = sorted(agg["rw"].unique())
    enc = series_encodings("config:N", configs, "configuration")
    wdash = alt.StrokeDash(
        "rw:N",
        title="workload",
        scale=alt.Scale(domain=workloads, range=DASHES[: len(workloads)]),
        legend=DASH_LEGEND,
    )
    hit = (
        alt.Chart(agg[agg["cache"] != "none"])
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("hit_ratio_mean:Q", title="hit ratio", scale=alt.Scale(domain=[0, 1])),
            color=enc["color"],
            shape=enc["shape"],
            strokeDash=wdash,
            tooltip=["config", "rw", "fraction", alt.Tooltip("hit_ratio_mean:Q", format=".3f")],
        )
        .properties(width=260, height=180)
    )
    req = (
        alt.Chart(agg)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("mean_request_bytes_mean:Q", title="mean device request (bytes)"),
            color=enc["color"],
            shape=enc["shape"],
            strokeDash=wdash,
            tooltip=["config", "rw", "fraction", alt.Tooltip("mean_request_bytes_mean:Q", format=",.0f")],
        )
        .properties(width=260, height=180)
    )
    return alt.vconcat(hit, req).resolve_scale(color="shared", shape="shared", strokeDash="shared")


def vram_line_states(states: pd.DataFrame) -> alt.Chart:
    """Shares of unused, clean and dirty cache lines, ours (a bar per workload and configuration, the mean over
    its budgets) and the seed's (analysis.vram_line_states)."""
    return (
        alt.Chart(states)
        .mark_bar()
        .encode(
            y=alt.Y("who:N", title=None),
            x=alt.X("mean(share):Q", title="share of cache lines (mean over budgets)", stack="normalize"),
            color=alt.Color("state:N", scale=alt.Scale(domain=["unused", "clean", "dirty"])),
            tooltip=["who", "state", alt.Tooltip("mean(share):Q", format=".2f")],
        )
        .properties(width=300)
    )
