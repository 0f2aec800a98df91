# SPDX-License-Identifier: BSD-3-Clause
"""Altair figures every study shares, with the published figures' axes and series; a study's own figures
live in its folder (nvmelab.studies.<study>.figures: cpu_initiated, tool_comparison, pcie_saturation,
cuda_qdepth, cuda_iosize, cpu_submit's sweeps, blksum_qdepth, vram_cache), built on these.

Key functions (inputs are tables from nvmelab.results.analysis.aggregate):
    scaling_lines(agg, x, ...)        y vs x per series, ±std band, roofline rule, tooltips
    beside(panels)                    panels stacked, each with its own scales
    model_curves(...), cpu_model(...) the model beside the published numbers; marks_caption for their captions
    save / svg                        vl-convert export

Conventions: every chart says where its data came from in its title (a published panel and ours are
never mixed in one panel without a legend entry naming the source); emulated panels name profile and
scale (`source_label`). Charts embed their data, so they render offline.

Legibility: sizes, theme, series encodings and axis helpers live in nvmelab.results.plot_style
(re-exported here); panels are stacked (``beside``) or faceted at most two to a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd

from .plot_style import (  # noqa: F401 (re-exported: the figures' callers use plots.<name>)
    COLUMN_PX,
    DASH_LEGEND,
    DASHES,
    HALF_WIDTH,
    HEIGHT,
    LOG_SPAN,
    SHAPES,
    THEME,
    TITLES,
    WIDTH,
    auto_log,
    fraction_axis,
    fraction_label,
    series_encodings,
    source_label,
    title_lines,
)


def _with_band(agg: pd.DataFrame, y: str) -> pd.DataFrame:
    d = agg.copy()
    d["lo"] = d[f"{y}_mean"] - d[f"{y}_std"].fillna(0)
    d["hi"] = d[f"{y}_mean"] + d[f"{y}_std"].fillna(0)
    return d


def _xenc(x: str, log2: bool, ticks: Sequence | None = None) -> alt.X:
    scale = alt.Scale(type="log", base=2) if log2 else alt.Scale(zero=False)
    axis = (
        alt.Axis(values=[v.item() if hasattr(v, "item") else v for v in ticks], format="~g")
        if ticks
        else alt.Axis(format="~g")
    )
    return alt.X(f"{x}:Q", scale=scale, title=TITLES.get(x, x), axis=axis)


def scaling_lines(
    agg: pd.DataFrame,
    x: str,
    y: str = "iops",
    *,
    series: str | None = None,
    log2: bool = False,
    roofline: float | None = None,
    roofline_label: str = "roofline",
    title: str = "",
    series_title: str | None = None,
    y_title: str | None = None,
) -> alt.LayerChart:
    """Mean of `y` vs `x` (one line per `series`), ±std band, points with tooltips, roofline rule."""
    d = _with_band(agg, y)
    # no data, no series: a colour legend without entries would be an empty box
    if series and not d.empty:
        enc = series_encodings(
            f"{series}:N", sorted(d[series].dropna().unique()), series_title or TITLES.get(series, series)
        )
        color, shape, dash = enc["color"], enc["shape"], enc["strokeDash"]
    else:
        color, shape, dash = alt.value("#1f77b4"), alt.value("circle"), alt.value([1, 0])
    xe = _xenc(x, log2, sorted(d[x].dropna().unique()))
    ylog = auto_log(d[f"{y}_mean"])
    yscale = alt.Scale(type="log") if ylog else alt.Scale()
    ye = alt.Y(f"{y}_mean:Q", title=(y_title or TITLES.get(y, y)) + (" (log scale)" if ylog else ""), scale=yscale)
    tips = [
        alt.Tooltip(f"{x}:Q", title=TITLES.get(x, x)),
        alt.Tooltip(f"{y}_mean:Q", title=f"{TITLES.get(y, y)} (mean)", format=",.0f" if y == "iops" else ",.2f"),
        alt.Tooltip(f"{y}_std:Q", title="std (population)", format=",.1f"),
        alt.Tooltip("n:Q", title="repetitions"),
    ]
    if series:
        tips.insert(0, alt.Tooltip(f"{series}:N", title=series_title or TITLES.get(series, series)))
    base = alt.Chart(d)
    band = base.mark_area(opacity=0.2).encode(x=xe, y=alt.Y("lo:Q", scale=yscale), y2="hi:Q", color=color)
    line = base.mark_line().encode(x=xe, y=ye, color=color, strokeDash=dash)
    pts = base.mark_point(filled=True, size=50).encode(x=xe, y=ye, color=color, shape=shape, tooltip=tips)
    layers = [band, line, pts, *_flag_layers(d, xe, ye)]
    if roofline is not None:
        rd = pd.DataFrame({"roofline": [float(roofline)], "label": [roofline_label]})
        rule = (
            alt.Chart(rd)
            .mark_rule(strokeDash=[6, 4], color="black")
            .encode(y="roofline:Q", tooltip=[alt.Tooltip("label:N"), alt.Tooltip("roofline:Q", format=",.0f")])
        )
        # the reference line says what it is, at its right end, just above the line
        text = (
            alt.Chart(rd)
            .mark_text(align="right", baseline="bottom", dx=-4, dy=-3, fontSize=11)
            .encode(x=alt.value(WIDTH), y="roofline:Q", text="label:N")
        )
        layers += [rule, text]
    return alt.layer(*layers).properties(width=WIDTH, height=HEIGHT, title=title_lines(title))


#: The legend entry of a configuration the emulator limited (analysis.aggregate's ``flagged``).
FLAGGED = "emulator-limited"


def _flag_layers(d: pd.DataFrame, xe: Any, ye: Any) -> list:
    """A red ring around every configuration with a run the emulator limited (the caption says so; the ring's
    tooltip names the flag); no layer when nothing is flagged."""
    if d.empty or "flagged" not in d.columns or not (d["flagged"] > 0).any():
        return []
    fd = d[d["flagged"] > 0].assign(mark=FLAGGED)
    return [
        alt.Chart(fd)
        .mark_point(shape="circle", filled=False, size=260, strokeWidth=1.5, color="#d62728")
        .encode(
            x=xe,
            y=ye,
            # no legend of its own (a second legend shrank the GPU figures below legible text in the browser
            # check): the figures' captions say what the red ring marks, and its tooltip names the flag
            opacity=alt.value(1.0),
            tooltip=[alt.Tooltip("mark:N", title="flag"), alt.Tooltip("flagged:Q", title="runs flagged")],
        )
    ]


def beside(panels: Sequence[alt.TopLevelMixin], title: str = "") -> alt.VConcatChart:
    """Panels one under the other, each at full width with its own legend and independent y scale
    (published and emulated magnitudes differ). Side by side they would not fit the book's text
    column and would be scaled down to illegible text; the name is kept for existing callers."""
    return alt.vconcat(*panels, title=title).resolve_scale(
        y="independent", color="independent", shape="independent", strokeDash="independent"
    )


def _with_points(chart: alt.LayerChart, pts: pd.DataFrame | None, x: str, y: str) -> alt.LayerChart:
    """Add published numbers (from headline.csv) as labelled crosses."""
    if pts is None or pts.empty:
        return chart
    # same x scale as the lines (log2), so the crosses sit where the lines would be, also with no lines
    xenc = _xenc(x, True, sorted(pts[x].dropna().unique()))
    layer = (
        alt.Chart(pts)
        .mark_point(shape="cross", size=120, color="black", filled=True)
        .encode(
            x=xenc,
            y=f"{y}:Q",
            tooltip=[alt.Tooltip("label:N", title="published"), alt.Tooltip(f"{y}:Q", format=",.1f")],
        )
    )
    return alt.layer(*chart.layer, layer).properties(width=WIDTH, height=HEIGHT, title=chart.title)


def svg(chart: alt.TopLevelMixin) -> str:
    """The chart as SVG text (vl-convert; no browser, no network)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_json())


def save(chart: alt.TopLevelMixin, path: str | Path) -> Path:
    """Static export by suffix (.svg, .png, .html, .json); .svg/.png go through vl-convert."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".svg":
        path.write_text(svg(chart), encoding="utf-8")
    elif suffix == ".png":
        import vl_convert as vlc

        path.write_bytes(vlc.vegalite_to_png(chart.to_json(), scale=2))
    elif suffix in (".html", ".json"):
        chart.save(str(path))
    else:
        raise ValueError(f"save: unsupported figure format {suffix!r} (use .svg, .png, .html or .json)")
    return path


# ------------------------------------------------------------------ model beside published ---
#: Marker of each kind of point on a model figure (legend "Points"): what was fitted, what was
#: predicted without being fitted, and what we measured.
POINT_KINDS = {
    "published, calibration point (fitted)": "square",
    "published, held out (predicted)": "diamond",
    "published, at a cap (held out, not scored)": "triangle-up",
    "ours (measured)": "circle",
}


def model_curves(
    curves: pd.DataFrame,
    x: str,
    y: str,
    *,
    series: str,
    points: pd.DataFrame | None = None,
    ours: pd.DataFrame | None = None,
    reference_lines: Sequence[tuple[str, float]] = (),
    title: str = "",
    series_title: str | None = None,
    y_title: str | None = None,
    log2: bool = True,
) -> alt.LayerChart:
    """Model output as lines (one per `series`, legend "model: <series>"), published points marked by
    role (`points` with columns x, y, ``kind`` in POINT_KINDS, ``label``), our measurements as a third
    kind (`ours`: aggregated, columns x, ``<y>_mean``, series; drawn as points and thin lines), and
    labelled horizontal reference lines ((label, value) pairs). Every layer that is drawn has a legend
    entry; empty layers are left out, so no legend is ever empty."""
    if curves.empty:
        raise ValueError("model_curves: no model curves to draw")
    pts = pd.DataFrame() if points is None else points
    ours = pd.DataFrame() if ours is None else ours
    unknown = set(pts.get("kind", [])) - set(POINT_KINDS)
    if unknown:
        raise ValueError(f"model_curves: unknown point kind(s) {sorted(unknown)}; known: {list(POINT_KINDS)}")
    xs = sorted(set(curves[x]) | set(pts.get(x, [])) | set(ours.get(x, [])))
    xe = _xenc(x, log2, xs)
    s_title = series_title or TITLES.get(series, series)
    cd = curves.assign(**{"model": "model: " + curves[series].astype(str)})
    order = [f"model: {v}" for v in sorted(curves[series].unique())]
    enc = series_encodings("model:N", order, f"Model, by {s_title}")
    color, dash = enc["color"], enc["strokeDash"]
    yfmt = ",.0f" if y == "iops" else ",.2f"
    layers: list = [
        alt.Chart(cd)
        .mark_line(strokeWidth=1.5)
        .encode(
            x=xe,
            y=alt.Y(f"{y}_mean:Q", title=y_title or TITLES.get(y, y)),
            color=color,
            strokeDash=dash,
            tooltip=[
                alt.Tooltip("model:N", title="model"),
                alt.Tooltip(f"{x}:Q", title=TITLES.get(x, x)),
                alt.Tooltip(f"{y}_mean:Q", title=f"{TITLES.get(y, y)} (model)", format=yfmt),
            ],
        )
    ]
    kinds = [k for k in POINT_KINDS if (not pts.empty and k in set(pts["kind"]))]
    if not ours.empty:
        kinds.append("ours (measured)")
    shape = alt.Shape("kind:N", title="Points", scale=alt.Scale(domain=kinds, range=[POINT_KINDS[k] for k in kinds]))
    if not pts.empty:
        layers.append(
            alt.Chart(pts)
            .mark_point(size=110, filled=True, color="black", opacity=0.9)
            .encode(
                x=xe,
                y=f"{y}:Q",
                shape=shape,
                tooltip=[
                    alt.Tooltip("kind:N", title="point"),
                    alt.Tooltip("label:N", title="published"),
                    alt.Tooltip(f"{y}:Q", format=yfmt),
                ],
            )
        )
    if not ours.empty:
        od = ours.assign(kind="ours (measured)")
        layers.append(
            alt.Chart(od).mark_line(strokeWidth=0.8, color="gray").encode(x=xe, y=f"{y}_mean:Q", detail=f"{series}:N")
        )
        layers.append(
            alt.Chart(od)
            .mark_point(size=45, filled=True, color="gray")
            .encode(
                x=xe,
                y=f"{y}_mean:Q",
                shape=shape,
                tooltip=[
                    alt.Tooltip(f"{series}:N", title=s_title),
                    alt.Tooltip(f"{x}:Q", title=TITLES.get(x, x)),
                    alt.Tooltip(f"{y}_mean:Q", title="ours (mean)", format=yfmt),
                ],
            )
        )
        layers += _flag_layers(od, xe, alt.Y(f"{y}_mean:Q"))
    for label, value in reference_lines:
        rd = pd.DataFrame({"v": [float(value)], "label": [label]})
        layers.append(
            alt.Chart(rd)
            .mark_rule(strokeDash=[6, 4], color="black")
            .encode(y="v:Q", tooltip=[alt.Tooltip("label:N"), alt.Tooltip("v:Q", format=yfmt)])
        )
        layers.append(
            alt.Chart(rd)
            .mark_text(align="right", baseline="bottom", dx=-4, dy=-3, fontSize=11)
            .encode(x=alt.value(WIDTH), y="v:Q", text="label:N")
        )
    return (
        alt.layer(*layers)
        .resolve_scale(shape="shared")
        .properties(width=WIDTH, height=HEIGHT, title=title_lines(title))
    )


def point_kind(role: str, restates: str = "") -> str:
    """The POINT_KINDS label of a validation role (``calibration`` | ``held_out``); a held-out point
    that restates a calibration input or a definition (``restates`` not empty) has a kind of its own."""
    if role == "held_out" and restates:
        return "published, at a cap (held out, not scored)"
    return {"calibration": "published, calibration point (fitted)", "held_out": "published, held out (predicted)"}[role]


#: What each mark of a model figure is, for its caption (only the marks drawn are described).
MARK_CAPTIONS = {
    "published, calibration point (fitted)": "squares: published points the model was fitted to",
    "published, held out (predicted)": "diamonds: published points it predicts without having seen them",
    "published, at a cap (held out, not scored)": "triangles: published points at a cap, which restate a "
    "calibration input and are not scored",
    "ours (measured)": "grey circles: our GPU runs",
    "flagged": "a red ring: a run the emulator, not its device model, limited",
}


def marks_caption(points: pd.DataFrame | None, ours: pd.DataFrame | None = None) -> str:
    """The caption sentence for the marks model_curves draws from `points` and `ours` (the same arguments),
    naming only the kinds present, and the red ring only when a drawn run of ours is flagged."""
    kinds = [k for k in POINT_KINDS if points is not None and not points.empty and k in set(points["kind"])]
    drawn = ours is not None and not ours.empty
    if drawn:
        kinds.append("ours (measured)")
        if "flagged" in ours and ours["flagged"].fillna(0).astype(bool).any():
            kinds.append("flagged")
    if not kinds:
        return ""
    parts = [MARK_CAPTIONS[k] for k in kinds]
    return parts[0][0].upper() + "; ".join(parts)[1:] + "."


def cpu_model(
    curves: pd.DataFrame,
    points: pd.DataFrame,
    *,
    roofline: float,
    titles: dict[str, str],
    series: str = "backend",
) -> alt.VConcatChart:
    """The CPU-initiated model against the published points: one panel per `series` value (in the
    order of `titles`, which gives each panel's title), the model's IOPS against CPU threads as a
    line, the published points marked by kind (model_curves) and the 16-device roofline."""
    panels = [
        model_curves(
            curves[curves[series] == s],
            "ncpus",
            "iops",
            series=series,
            points=points[points[series] == s],
            reference_lines=[("16-device roofline", roofline)],
            title=title,
            series_title=TITLES.get(series, series),
            log2=False,
        )
        for s, title in titles.items()
    ]
    return beside(panels)


# ------------------------------------------------------------ facets ---
def _two_per_row(chart: alt.Chart, field: str, title: str) -> alt.FacetChart:
    """`chart` faceted by `field`, at most two panels to a row, legends under the panels (so that
    two panels and their axes fit the book's text column)."""
    return chart.facet(facet=alt.Facet(field, title=title), columns=2).configure_legend(
        orient="bottom", direction="vertical", columns=2
    )
