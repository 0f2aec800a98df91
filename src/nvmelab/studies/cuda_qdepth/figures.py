# SPDX-License-Identifier: BSD-3-Clause
"""The cuda_qdepth study's figures (IOPS against queue depth per queue count, published points as crosses);
moved from nvmelab.results.plots, which keeps the plot style and the helpers every study shares."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...results.plots import _with_points, scaling_lines


def cuda_qdepth(
    agg: pd.DataFrame, *, roofline: float | None = None, title: str = "", published_points: pd.DataFrame | None = None
) -> alt.LayerChart:
    """IOPS vs queue depth (log2), one line per nqueues; published points as crosses when given."""
    ch = scaling_lines(agg, "qdepth", "iops", series="nqueues", log2=True, roofline=roofline, title=title)
    return _with_points(ch, published_points, "qdepth", "iops")
