# SPDX-License-Identifier: BSD-3-Clause
"""The cpu_initiated study's figures (the published CPU-initiated line plots, a panel per source); moved from
nvmelab.results.plots, which keeps the plot style and the helpers every study shares."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from ...results.plots import beside, scaling_lines


def cpu_initiated(
    panels: Sequence[tuple[str, pd.DataFrame, float | None]],
    x: str,
    *,
    y: str = "iops",
    series: str | None = None,
    log2: bool = False,
    title: str = "",
) -> alt.HConcatChart:
    """The CPU-initiated line plots: one panel per (label, aggregated data, roofline); `series`
    colours the lines of the panels whose data has that column (e.g. the published backends)."""
    charts = [
        scaling_lines(
            agg, x, y, series=series if series in agg.columns else None, log2=log2, roofline=roof, title=label
        )
        for label, agg, roof in panels
        if agg is not None and not agg.empty
    ]
    return beside(charts, title)
