# SPDX-License-Identifier: BSD-3-Clause
"""The cuda_iosize study's figures (bandwidth against I/O size per queue depth, the P2P rule); moved from
nvmelab.results.plots, which keeps the plot style and the helpers every study shares."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...results.plots import _with_points, scaling_lines


def cuda_iosize(
    agg: pd.DataFrame, *, p2p_gbps: float | None = None, title: str = "", published_points: pd.DataFrame | None = None
) -> alt.LayerChart:
    """Bandwidth (GB/s) vs I/O size (log2), one line per queue depth; P2P reference rule."""
    ch = scaling_lines(
        agg,
        "iosize",
        "gbps",
        series="qdepth",
        log2=True,
        roofline=p2p_gbps,
        roofline_label="P2P reference",
        title=title,
    )
    return _with_points(ch, published_points, "iosize", "gbps")
