# SPDX-License-Identifier: BSD-3-Clause
"""The tool_comparison study's figures (grouped bars per stack and core count); moved from
nvmelab.results.plots, which keeps the plot style and the helpers every study shares."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...results.plot_style import HEIGHT, TITLES, WIDTH, auto_log
from ...results.plots import _with_band


def tool_comparison(
    agg: pd.DataFrame,
    *,
    y: str = "iops",
    stack: str = "stack",
    x: str = "ncpus",
    title: str = "",
    y_title: str | None = None,
) -> alt.LayerChart:
    """Grouped bars: `y` mean per CPU-thread count (x), one bar per stack, ±std error bars; a
    logarithmic y axis when the stacks differ by more than LOG_SPAN (auto_log)."""
    d = _with_band(agg, y)
    ylog = auto_log(d[f"{y}_mean"])
    yscale = alt.Scale(type="log") if ylog else alt.Scale()
    xe = alt.X(f"{x}:O", title=TITLES.get(x, x), axis=alt.Axis(labelAngle=0))
    off = alt.XOffset(f"{stack}:N")
    color = alt.Color(f"{stack}:N", title="Stack")
    tips = [
        alt.Tooltip(f"{stack}:N", title="Stack"),
        alt.Tooltip(f"{x}:O", title=TITLES.get(x, x)),
        alt.Tooltip(f"{y}_mean:Q", title="mean", format=",.0f"),
        alt.Tooltip(f"{y}_std:Q", title="std (population)", format=",.0f"),
        alt.Tooltip("n:Q", title="repetitions"),
    ]
    base = alt.Chart(d)
    yt = (y_title or TITLES.get(y, y)) + (" (log scale)" if ylog else "")
    if ylog:  # a log axis has no zero: bars and error bars start at a positive floor
        floor = float(d[f"{y}_mean"].min()) / 2
        d = d.assign(lo=d["lo"].clip(lower=floor), floor=floor)
        base = alt.Chart(d)
    benc = {"y2": alt.Y2("floor:Q")} if ylog else {}
    bars = base.mark_bar().encode(
        x=xe, xOffset=off, color=color, tooltip=tips, y=alt.Y(f"{y}_mean:Q", title=yt, scale=yscale), **benc
    )
    err = base.mark_rule(color="black").encode(x=xe, xOffset=off, y=alt.Y("lo:Q", scale=yscale), y2="hi:Q")
    return alt.layer(bars, err).properties(width=WIDTH + 40, height=HEIGHT, title=title)
