# SPDX-License-Identifier: BSD-3-Clause
"""The look every figure of the book shares: sizes, the Altair theme, series encodings and axis helpers.

Key names: COLUMN_PX, WIDTH, HEIGHT, HALF_WIDTH (sizes that fit the book's text column); TITLES (axis
titles by column); SHAPES, DASHES, DASH_LEGEND (how series differ besides colour); THEME (registered
and enabled on import); source_label(row) (where a panel's data came from); auto_log(values),
fraction_label(value), fraction_axis(values), series_encodings(field, domain, title).

Legibility (what the book's browser test, tests/book/browser.py, checks on every page): a
chart fits the book's text column (``COLUMN_PX``) without being scaled down, so its text
renders at the theme's sizes (never below 10 px); panels are stacked or faceted at most two
to a row; a series differs from the others in colour AND in shape or dash
(``series_encodings``); an axis whose values span more than ``LOG_SPAN`` is logarithmic
(``auto_log``); budgets and other fractions print as fractions (``fraction_axis``).
The figures themselves are in nvmelab.results.plots.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import altair as alt
import pandas as pd

from ..driver import uri as _uri

#: Width (CSS pixels) of the book's text column at its default window (1280 px): a chart wider
#: than this is scaled down by the book's CSS and its text shrinks below the legible size.
COLUMN_PX = 740
#: Figure size (pixels) of one panel: with its axes and a legend on the right it fits the column.
WIDTH = 360
HEIGHT = 240
#: Width of one of two panels in a row (legends below the panels).
HALF_WIDTH = 270
#: Legend of a dash-only encoding: a black line segment per entry, so the dash shows.
DASH_LEGEND = alt.Legend(
    symbolType="stroke",
    symbolSize=400,
    symbolStrokeWidth=2,
    symbolStrokeColor="black",
    symbolFillColor="transparent",
)
#: Values spanning more than this factor get a logarithmic axis (auto_log).
LOG_SPAN = 10.0
#: Point shapes and dash patterns given to series in order (series_encodings): with the colours, no two series
#: look alike (twelve shapes: Vega's named symbols, then a star and a hexagon as SVG paths).
_STAR = "M0,-1L0.24,-0.31L0.95,-0.31L0.38,0.12L0.59,0.81L0,0.38L-0.59,0.81L-0.38,0.12L-0.95,-0.31L-0.24,-0.31Z"
SHAPES = ["circle", "square", "diamond", "triangle-up", "cross", "triangle-down", "triangle-right", "triangle-left"]
SHAPES += ["wedge", "arrow", _STAR, "M1,0L0.5,0.87L-0.5,0.87L-1,0L-0.5,-0.87L0.5,-0.87Z"]
DASHES = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [12, 4], [3, 5], [10, 2, 2, 2, 2, 2], [1, 3]]
#: Axis titles by column, as in the published figures.
TITLES = {
    "qdepth": "Queue depth",
    "iosize": "I/O size (bytes)",
    "ncpus": "CPU threads",
    "ndevs": "Devices",
    "nqueues": "Queues per device",
    "iops": "IOPS",
    "mibs": "Bandwidth (MiB/s)",
    "gbps": "Bandwidth (GB/s)",
    "stress": "Stress on unused CPUs",
    "stack": "Stack",
    "ns_per_io": "CPU time per I/O (ns)",
}


#: Chart settings for every figure (an Altair theme, enabled on import): labels are never cut
#: short (Vega's label limits off), overlapping axis labels are thinned out, charts render as
#: SVG (so the book's browser test can measure them) without the export menu.
THEME = "nvmelab"


@alt.theme.register(THEME, enable=True)
def _theme() -> alt.theme.ThemeConfig:
    return {
        "config": {
            # symbolOpacity: a legend symbol drawn at full strength, not at the opacity of the first layer that
            # uses the scale (a 20 % band under each line made every symbol of its legend faint)
            "legend": {"labelLimit": 0, "titleLimit": 0, "labelFontSize": 11, "titleFontSize": 12, "symbolOpacity": 1},
            "axis": {"labelLimit": 0, "titleLimit": 0, "labelOverlap": True, "labelFontSize": 11, "titleFontSize": 12},
            "header": {"labelLimit": 0, "titleLimit": 0, "labelFontSize": 12, "titleFontSize": 12},
            "title": {"limit": 0, "fontSize": 13},
            "text": {"fontSize": 11},
        }
    }


alt.renderers.set_embed_options(renderer="svg", actions=False)


#: Characters of a chart title's line: Vega-Lite does not wrap titles, and a longer line widens the chart past
#: the text column, where the browser check finds its labels scaled below legible size.
TITLE_LINE_CHARS = 64


def title_lines(title: str | Sequence[str]) -> str | list[str]:
    """A chart title as lines of at most TITLE_LINE_CHARS, broken after ", " or ": " (a list, one line each;
    a title given as lines has each of them broken so); a short title as it is."""
    if not isinstance(title, str):
        return [
            ln for part in title for ln in ([title_lines(part)] if len(part) <= TITLE_LINE_CHARS else title_lines(part))
        ]
    if len(title) <= TITLE_LINE_CHARS:
        return title
    lines, line = [], ""
    for part in re.split(r"(?<=[,:]) ", title):
        if line and len(line) + 1 + len(part) > TITLE_LINE_CHARS:
            lines.append(line)
            line = part
        else:
            line = f"{line} {part}" if line else part
    return lines + [line] if line else lines


def source_label(row: pd.Series | dict) -> str:
    """A panel or legend label naming where data came from; emulated targets give profile and scale."""
    src = row.get("source", "nvmelab")
    tgt = str(row.get("target", "") or "")
    if _uri.is_emulated(tgt):
        scale = row.get("scale")
        sc = f"{float(scale):g}" if scale is not None and scale == scale else "?"
        model = ("lat", "lat_sigma", "iops", "qiops", "bw", "link", "fetch")  # emu/model_keys.c, emu/params.c
        try:
            params = _uri.parse(tgt).params
        except ValueError:  # a record's target the grammar refuses: name no overrides
            params = ()
        keys = [f"{k}={v}" for k, v in params if k in model]
        named = dict(params).get("profile")  # the URI's word over the engine's
        prof = (named if named else f"{row.get('profile')}") + (f" with {', '.join(keys)}" if keys else "")
        where = f"{_uri.kind(tgt)}://"  # gpu-emu:// (on the GPU) or emu:// (host memory, CPU threads)
        # the host's records folder (a GPU lease names its GPU there), else the hostname in the provenance
        host = row.get("results_host") or row.get("host") or "this host"
        return f"nvmelab, emulated {prof} on {where} (scale {sc}), {host}"
    if src != "nvmelab":
        return str(src)
    return f"nvmelab on {tgt or 'target'} ({row.get('host', 'this host')})"


def auto_log(values: Sequence | pd.Series) -> bool:
    """True when the positive `values` span more than LOG_SPAN (max / min): such an axis is drawn
    logarithmic, so that the smaller series are not flattened against zero."""
    v = [float(x) for x in pd.Series(values).dropna() if float(x) > 0]
    return bool(v) and max(v) / min(v) > LOG_SPAN


def fraction_label(value: float) -> str:
    """A fraction as a book prints it: 1/64, 1/4, 1, 3/8; other numbers as they are."""
    from fractions import Fraction

    f = Fraction(float(value)).limit_denominator(4096)
    if f.denominator == 1 or abs(float(f) - float(value)) > 1e-12:
        return f"{float(value):g}"
    return f"{f.numerator}/{f.denominator}"


def fraction_axis(values: Sequence, **kw) -> alt.Axis:
    """An axis whose tick labels print `values` as fractions (1/64 rather than 0.015625)."""
    ticks = sorted({float(v) for v in values})
    expr = " : ".join(f"datum.value == {v!r} ? '{fraction_label(v)}'" for v in ticks) + " : format(datum.value, '~g')"
    return alt.Axis(values=ticks, labelExpr=expr, **kw)


def series_encodings(field: str, domain: Sequence, title: str) -> dict:
    """Colour, point shape and dash of a series field, in the order of `domain`, sharing one legend:
    every series differs from every other in colour and in shape and dash."""
    dom = [v.item() if hasattr(v, "item") else v for v in domain]
    n = len(dom)
    shapes = [SHAPES[i % len(SHAPES)] for i in range(n)]
    dashes = [DASHES[i % len(DASHES)] for i in range(n)]
    return {
        "color": alt.Color(field, title=title, scale=alt.Scale(domain=dom), sort=dom),
        "shape": alt.Shape(field, title=title, scale=alt.Scale(domain=dom, range=shapes), sort=dom),
        "strokeDash": alt.StrokeDash(field, title=title, scale=alt.Scale(domain=dom, range=dashes), sort=dom),
    }
