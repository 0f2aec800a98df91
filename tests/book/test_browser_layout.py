# SPDX-License-Identifier: BSD-3-Clause
"""The browser layout check (browser.LAYOUT_PROBE) on pages made to fail it.

Each page holds one Vega-Lite chart in a 500 px text column, rendered by the vendored
Vega bundle the book uses. A well-behaved chart must pass; a chart wider than the
column, a legend label cut by its limit, overlapping tick labels, an empty legend, a
chart drawn to a canvas, text the book's CSS shrinks below 10 px, a short label turned on its side (its box under 10 px tall), a chart without a
numbered caption, legend entries that differ in colour only, a legend entry for a
series not drawn and a fraction printed as a long decimal must each be reported.
Needs Chromium (skipped otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path

import browser
import pytest

BUNDLE = Path(__file__).resolve().parents[2] / "book" / "_static" / "vega" / "vega-bundle.js"
COLUMN_PX = 500


def _page(tmp_path: Path, spec: dict, renderer: str = "svg", css: str = "") -> str:
    if browser.chromium_binary() is None:
        pytest.skip("no Chromium on PATH: the browser layout check cannot run (`make test-browser` installs it)")
    if not BUNDLE.is_file():
        pytest.skip(f"{BUNDLE} is missing (book/_ext/vendor_vega.py writes it)")
    html = f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="{BUNDLE.as_uri()}"></script><style>{css}</style></head>
<body><main><article class="bd-article" style="width:{COLUMN_PX}px">
<figure><div id="chart"></div><figcaption><span class="caption-number">Figure 1 </span>test</figcaption></figure>
<script>vegaEmbed('#chart', {json.dumps(spec)}, {{renderer: '{renderer}', actions: false}});</script>
</article></main></body></html>"""
    page = tmp_path / "page.html"
    page.write_text(html)
    return page.as_uri()


def _spec(**kw) -> dict:
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "width": 200,
        "height": 120,
        "data": {"values": [{"x": 1, "y": 2, "s": "a"}, {"x": 2, "y": 3, "s": "b"}]},
        "mark": "line",
        "encoding": {
            "x": {"field": "x", "type": "quantitative"},
            "y": {"field": "y", "type": "quantitative"},
            "color": {"field": "s", "type": "nominal"},
            "strokeDash": {"field": "s", "type": "nominal"},
        },
    }
    spec.update(kw)
    return spec


def _layout(url: str, shot: Path | None = None) -> list[str]:
    report = browser.open_page(url, screenshot=shot)
    assert report.rendered == report.containers == 1, report
    assert not report.problems(), report.problems()
    return report.layout


def test_a_fitting_chart_passes_and_is_screenshot(tmp_path: Path) -> None:
    shot = tmp_path / "shots" / "page.png"
    assert _layout(_page(tmp_path, _spec()), shot) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_overflowing_chart_fails(tmp_path: Path) -> None:
    problems = _layout(_page(tmp_path, _spec(width=900)))
    assert any("Figure 1: chart overflows the text column" in p for p in problems), problems


def test_the_book_css_scales_a_wide_chart_into_the_column_where_its_text_shrinks(tmp_path: Path) -> None:
    css = (Path(__file__).resolve().parents[2] / "book" / "_static" / "nvmelab.css").read_text()
    problems = _layout(_page(tmp_path, _spec(width=900), css=css))
    assert not any("overflows" in p or "wider than its container" in p for p in problems), problems
    assert problems and all(f"render below {browser.MIN_TEXT_PX} px" in p for p in problems), problems


def test_chart_wider_than_a_scrolling_container_fails(tmp_path: Path) -> None:
    css = "#chart { overflow-x: auto; width: 300px; }"
    problems = _layout(_page(tmp_path, _spec(width=450), css=css))
    assert any("wider than its container" in p for p in problems), problems


def test_cut_legend_label_fails(tmp_path: Path) -> None:
    values = [{"x": 1, "y": 2, "s": "seed: laptop (NBD disabled)"}, {"x": 2, "y": 3, "s": "ours"}]
    spec = _spec(data={"values": values}, config={"legend": {"labelLimit": 60}})
    problems = _layout(_page(tmp_path, spec))
    assert any("role-legend-label cut short" in p and "seed: lap" in p for p in problems), problems


def test_overlapping_tick_labels_fail(tmp_path: Path) -> None:
    values = [{"x": f"a rather long category name {i}", "y": i} for i in range(6)]
    spec = _spec(
        data={"values": values},
        mark="bar",
        width=120,
        encoding={
            "x": {"field": "x", "type": "nominal", "axis": {"labelAngle": 0}},
            "y": {"field": "y", "type": "quantitative"},
        },
    )
    problems = _layout(_page(tmp_path, spec))
    assert any("tick labels overlap" in p for p in problems), problems


def test_empty_legend_fails(tmp_path: Path) -> None:
    spec = _spec(
        layer=[
            {
                "mark": "line",
                "data": {"values": []},
                "encoding": {
                    "x": {"field": "x", "type": "quantitative"},
                    "y": {"field": "y", "type": "quantitative"},
                    "color": {"field": "s", "type": "nominal"},
                },
            }
        ],
        data=None,
        mark=None,
        encoding=None,
    )
    spec = {k: v for k, v in spec.items() if v is not None}
    problems = _layout(_page(tmp_path, spec))
    assert any("empty legend" in p for p in problems), problems


def test_canvas_chart_is_reported(tmp_path: Path) -> None:
    problems = _layout(_page(tmp_path, _spec(), renderer="canvas"))
    assert any("drawn to a canvas" in p for p in problems), problems


def test_table_wider_than_the_column_fails(tmp_path: Path) -> None:
    cells = "".join(f"<td>{10**11 + i:,}</td>" for i in range(12))  # numbers do not wrap
    css = (Path(__file__).resolve().parents[2] / "book" / "_static" / "nvmelab.css").read_text()
    url = _page(tmp_path, _spec(), css=css)
    page = Path(url.removeprefix("file://"))
    page.write_text(
        page.read_text().replace(
            "</article>",
            f'<div class="nvmelab-table-figure" id="t"><p class="caption"><span class="caption-number">'
            f'Table 1 </span>wide</p><table class="nvmelab-results"><tr>{cells}</tr></table></div></article>',
        )
    )
    problems = _layout(url)
    assert any(p.startswith("Table 1: table") for p in problems), problems


def test_text_shrunk_below_the_legible_size_fails(tmp_path: Path) -> None:
    css = (Path(__file__).resolve().parents[2] / "book" / "_static" / "nvmelab.css").read_text()
    problems = _layout(_page(tmp_path, _spec(width=1400), css=css))  # scaled to a third: 10 px text at ~3.5 px
    assert any(f"render below {browser.MIN_TEXT_PX} px" in p for p in problems), problems


def _bars(angle: int) -> dict:
    return _spec(
        mark="bar",
        data={"values": [{"d": "0", "y": 2}, {"d": "1", "y": 3}, {"d": "2", "y": 1}]},
        encoding={
            "x": {"field": "d", "type": "nominal", "axis": {"labelAngle": angle}},
            "y": {"field": "y", "type": "quantitative"},
        },
    )


def test_a_short_label_turned_on_its_side_fails(tmp_path: Path) -> None:
    """An 11 px one-digit tick label rotated by 270 degrees is as tall on the page as a digit is wide
    (about 6-7 px): the font-size check alone passed it (issue 34's 6.1 px text on the vram_cache page)."""
    problems = _layout(_page(tmp_path, _bars(270)))
    assert any("turned on their side" in p for p in problems), problems
    (tmp_path / "flat").mkdir()
    assert not _layout(_page(tmp_path / "flat", _bars(0))), "horizontal labels of legible size were reported"


def test_chart_without_a_numbered_caption_fails(tmp_path: Path) -> None:
    url = _page(tmp_path, _spec())
    page = Path(url.removeprefix("file://"))
    page.write_text(page.read_text().replace('<span class="caption-number">Figure 1 </span>', ""))
    problems = _layout(url)
    assert any("no numbered caption" in p for p in problems), problems


def test_legend_entries_that_differ_in_colour_only_fail(tmp_path: Path) -> None:
    spec = _spec(mark={"type": "line", "point": True})
    del spec["encoding"]["strokeDash"]
    problems = _layout(_page(tmp_path, spec))
    assert any("differ in colour only" in p for p in problems), problems
    spec["mark"] = {"type": "point", "filled": True}
    spec["encoding"]["shape"] = {"field": "s", "type": "nominal"}
    assert _layout(_page(tmp_path, spec)) == []


def test_legend_entry_for_a_series_not_drawn_fails(tmp_path: Path) -> None:
    spec = _spec(mark="point")
    spec["encoding"]["shape"] = {"field": "s", "type": "nominal"}
    spec["encoding"]["color"] = {
        "field": "s",
        "type": "nominal",
        "scale": {"domain": ["a", "b", "ghost"]},
    }
    spec["encoding"]["shape"]["scale"] = {"domain": ["a", "b", "ghost"]}
    problems = _layout(_page(tmp_path, spec))
    assert any('"ghost" names a series that is not drawn' in p for p in problems), problems


def test_fraction_printed_as_a_long_decimal_fails(tmp_path: Path) -> None:
    values = [{"x": 1 / 64, "y": 1, "s": "a"}, {"x": 1 / 4, "y": 2, "s": "a"}]
    spec = _spec(data={"values": values})
    spec["encoding"]["x"]["axis"] = {"values": [1 / 64, 1 / 4], "labelExpr": "'' + datum.value"}
    problems = _layout(_page(tmp_path, spec))
    assert any('"0.015625" is printed as a long decimal' in p for p in problems), problems


def test_dashes_on_filled_legend_symbols_do_not_tell_entries_apart(tmp_path: Path) -> None:
    spec = _spec(mark={"type": "point", "filled": True})
    del spec["encoding"]["color"]  # one colour; the dash alone names the series, on filled circles
    problems = _layout(_page(tmp_path, spec))
    assert any("look alike" in p for p in problems), problems


def test_a_printed_python_dict_is_reported_but_code_is_not(tmp_path: Path) -> None:
    """PAGE_PROBE: a dict or numpy scalar repr in an output or a paragraph is reported; the same text in a
    code cell's source is not; the page's height is measured."""
    if browser.chromium_binary() is None:
        pytest.skip("no Chromium on PATH: the browser check cannot run (`make test-browser` installs it)")
    page = tmp_path / "page.html"
    page.write_text(
        """<!DOCTYPE html><html><body><main><article class="bd-article" style="width:500px">
<div class="cell"><div class="cell_input"><pre>x = {'records': [1]}</pre></div>
<div class="cell_output"><pre>{'records': ['data/results/a.jsonl']}</pre></div></div>
<p>The mean was [np.float64(0.5)] here.</p><p>A set {1, 2} and a brace {x} are fine.</p>
<div style="height:3000px"></div></article></main></body></html>"""
    )
    report = browser.open_page(page.as_uri())
    assert len(report.reprs) == 2, report.reprs
    assert report.reprs[0].startswith("cell output:") and "records" in report.reprs[0]
    assert report.reprs[1].startswith("p:") and "np.float64" in report.reprs[1]
    assert report.height >= 3000
