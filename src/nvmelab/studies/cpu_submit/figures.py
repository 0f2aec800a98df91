# SPDX-License-Identifier: BSD-3-Clause
"""The cpu_submit study's figures (the CPU-side sweeps beside each other); moved from nvmelab.results.plots,
which keeps the plot style and the helpers every study shares."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from ...results.plot_style import TITLES
from ...results.plots import beside, scaling_lines


def cpu_side_sweeps(
    tables: Sequence[tuple[str, pd.DataFrame]], *, y: str = "iops_per_core", series: str = "backend", title: str = ""
) -> alt.HConcatChart:
    """The CPU-side sweeps (study cpu_submit) beside each other: one panel per (x column, table of
    cpu_submit.sweep_change_table), `y` (default IOPS per physical core) against x, one line per `series`;
    queue depth and I/O size on a log2 axis."""
    y_title = "IOPS per physical core" if y == "iops_per_core" else TITLES.get(y, y)
    charts = [
        scaling_lines(
            agg,
            x,
            y,
            series=series,
            log2=x in ("qdepth", "iosize"),
            y_title=y_title,
            series_title="Path",
            title=f"{y_title} vs {TITLES.get(x, x).lower()}",
        )
        for x, agg in tables
        if agg is not None and not agg.empty
    ]
    return beside(charts, title)
