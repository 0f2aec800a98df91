# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.book.publication: rendered tables, captioned figures, declared sources, record summaries."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from nvmelab.book import publication as pub


@pytest.mark.parametrize(
    "value,fmt,want",
    [
        (1234567, None, "1,234,567"),
        (1234567.4, None, "1,234,567"),
        (2.5, None, "2.50"),
        (0.01234, None, "0.012"),
        (123.45, None, "123.5"),
        (1234.5678, ",.2f", "1,234.57"),
        (float("nan"), None, pub.MISSING),
        (None, None, pub.MISSING),
        (True, None, "yes"),
        ("text", None, "text"),
        # never scientific notation on a page: the digits of the format, with separators
        (41869123.0, ",.3g", "41,900,000"),
        (4.19e7, ".2e", "41,900,000"),
        (1.5e-05, ".2g", "0.000015"),
    ],
)
def test_format_number(value, fmt, want) -> None:
    assert pub.format_number(value, fmt) == want


def test_values_table_prints_no_exponent() -> None:
    df = pub.values_table({"iops": 41869123.0, "share": 0.5, "runs": 12, "list": [1, 2]})
    assert list(df["value"]) == ["41,900,000", "0.5", "12"]
    assert pub.plain_number("-3.2E+3") == "-3,200" and pub.plain_number("1.5 GB/s") == "1.5 GB/s"


def test_table_units_separators_and_marker() -> None:
    df = pd.DataFrame({"qdepth": [1, 32], "iops": [1234567.0, 9876543.2], "host": ["a<b", "c"], "t": [0.5, math.nan]})
    out = pub.table(
        df, "IOPS by queue depth", name="tab-iops", units={"iops": "IO/s", "t": "s"}, columns={"qdepth": "queue depth"}
    )
    h = out._repr_html_()
    assert 'data-nvmelab-kind="table"' in h and 'data-nvmelab-name="tab-iops"' in h
    assert 'data-nvmelab-caption="IOPS by queue depth"' in h
    assert '<th class="num">queue depth</th>' in h and "iops (IO/s)" in h and "t (s)" in h
    assert ">1,234,567<" in h and ">9,876,543<" in h  # column format from its magnitude
    assert ">0.500<" in h and f">{pub.MISSING}<" in h
    assert "a&lt;b" in h  # text escaped
    assert h.index("<!--nvmelab-caption-->") < h.index("<table")  # a table's caption comes first
    assert out._repr_mimebundle_()["text/plain"] == "table: IOPS by queue depth"


def test_table_index_and_format_override() -> None:
    df = pd.DataFrame({"v": [1.23456]}, index=pd.Index(["x"], name="k"))
    h = pub.table(df, "c", index=True, formats={"v": ".4f"})._repr_html_()
    assert ">k<" in h and ">1.2346<" in h


@pytest.mark.parametrize(
    "kwargs,err",
    [
        ({"units": {"nope": "s"}}, KeyError),
        ({"name": "Bad Name"}, ValueError),
    ],
)
def test_table_rejects_bad_arguments(kwargs, err) -> None:
    with pytest.raises(err):
        pub.table(pd.DataFrame({"a": [1]}), "c", **kwargs)


def test_caption_required() -> None:
    with pytest.raises(ValueError, match="caption"):
        pub.figure("<svg></svg>", "  ")


def test_figure_wraps_chart_html() -> None:
    import altair as alt

    chart = alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_point().encode(x="x")
    h = pub.figure(chart, "Two points", name="fig-two")._repr_html_()
    assert 'data-nvmelab-kind="figure"' in h and "vegaEmbed" in h
    assert h.index("<!--nvmelab-caption-->") > h.index("vegaEmbed")  # a figure's caption comes after


def _records(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_describe_records_from_provenance(tmp_path: Path) -> None:
    prov = {"host": "vm", "git_commit": "abcdef0123456789abcd", "utc": "2026-11-22T06:00:00Z"}
    f = _records(
        tmp_path / "standard.jsonl",
        [
            {"preset": "standard", "provenance": prov},
            {
                "preset": "standard",
                "provenance": {**prov, "utc": "2026-11-23T01:00:00Z", "git_commit": "1111111111111111+dirty"},
            },
        ],
    )
    (src,) = pub.describe_records([f])
    assert src.records == 2 and src.hosts == ["vm"] and src.presets == ["standard"]
    assert src.commits == ["abcdef012345", "111111111111+dirty"]
    assert src.dates() == "2026-11-22 to 2026-11-23"
    assert not src.smoke_test
    assert src.summary() == (
        "2 records, host vm, preset standard, measured 2026-11-22 to 2026-11-23, "
        "commits abcdef012345, 111111111111+dirty"
    )


def test_describe_records_preset_from_file_name_and_smoke_flag(tmp_path: Path) -> None:
    f = _records(
        tmp_path / "quick.jsonl",
        [{"provenance": {"host": "h", "utc": "2026-01-01T00:00:00Z", "profile": "null", "scale": 1.0}}],
    )
    (src,) = pub.describe_records([f])
    assert src.presets == ["quick"] and src.smoke_test and src.emulation == ["null (scale 1)"]
    assert "commit unknown" in src.summary()


def test_describe_records_reports_the_other_load_of_unstressed_runs(tmp_path: Path) -> None:
    prov = {"host": "vm", "utc": "2026-11-25T01:00:00Z"}
    recs = [
        {"provenance": prov, "cpu_usage": 99.0, "host_cpu_usage": 100.0, "stress": 0},
        {"provenance": prov, "cpu_usage": 99.5, "host_cpu_usage": 102.5, "stress": 0},
        {"provenance": prov, "cpu_usage": 100.0, "host_cpu_usage": 99.0},  # rounding: never negative
        {"provenance": prov, "cpu_usage": 100.0, "host_cpu_usage": 200.0, "stress": 1},  # stress-ng: not counted
        {"provenance": prov, "cpu_usage": None, "host_cpu_usage": 50.0},  # engine use unknown
    ]
    (src,) = pub.describe_records([_records(tmp_path / "standard.jsonl", recs)])
    assert src.other_load == [1.0, 3.0, 0.0]
    assert src.summary().endswith("the rest of the host used a median 1.0 % of a CPU (max 3.0 %)")
    (old,) = pub.describe_records([_records(tmp_path / "old.jsonl", [{"provenance": prov}])])
    assert old.quiet() is None and "rest of the host" not in old.summary()


def test_the_device_of_a_served_or_embedded_controller_is_not_other_load(tmp_path: Path) -> None:
    prov = {"host": "vm", "utc": "2026-11-28T01:00:00Z"}
    recs = [  # study tool_costs: the server (or the in-process emulator's thread) is the run's device
        {"provenance": prov, "cpu_usage": 99.0, "host_cpu_usage": 199.0, "server_cpu_usage": 98.0, "stress": 0},
        {
            "provenance": prov,
            "cpu_usage": 99.0,
            "host_cpu_usage": 200.0,
            "process_cpu_usage": 198.0,
            "via": "in-process",
        },
        {"provenance": prov, "cpu_usage": 99.0, "host_cpu_usage": 200.0, "process_cpu_usage": 198.0},  # no device said
    ]
    (src,) = pub.describe_records([_records(tmp_path / "standard.jsonl", recs)])
    assert src.other_load == [2.0, 2.0, 101.0]


def test_describe_records_names_a_corrupt_line(tmp_path: Path) -> None:
    f = tmp_path / "standard.jsonl"
    f.write_text('{"provenance": {}}\n{not json\n')
    with pytest.raises(ValueError, match=r"standard.jsonl:2"):
        pub.describe_records([f])


def test_declare_sources_checks_files_and_is_repo_relative() -> None:
    root = pub.repo_root()
    readme = root / "data" / "reference" / "README.md"
    decl = pub.declare_sources(published=[readme], glue=False)
    assert decl == {"records": [], "published": ["data/reference/README.md"]}
    with pytest.raises(FileNotFoundError, match="does not exist"):
        pub.declare_sources(records=[root / "data" / "no-such.jsonl"], glue=False)


def test_table_grouped_header() -> None:
    a = pd.DataFrame({"mean_s": [1.5, 2.0], "std_s": [0.1, 0.2]}, index=pd.Index([1, 2], name="qdepth"))
    t = pd.concat({"seed: laptop": a, "ours": a * 2}, axis=1)
    h = pub.table(
        t, "grouped", index=True, columns={"mean_s": "mean", "std_s": "σ"}, units={"mean_s": "s"}
    )._repr_html_()
    assert '<th class="num" rowspan="2">qdepth</th>' in h
    assert '<th class="group" colspan="2">seed: laptop</th>' in h and '<th class="group" colspan="2">ours</th>' in h
    assert h.count(">mean (s)<") == 2 and h.count(">σ<") == 2
    assert '<td class="num">3.00</td>' in h  # ours' mean at Q1, own column format


def test_numbers_in_text_are_aligned_as_numbers() -> None:
    h = pub.table(pd.DataFrame({"t": ["0.763 ± 0.022", "1.262 ± 0.003"], "who": ["a", "b"]}), "c")._repr_html_()
    assert '<td class="num">0.763 ± 0.022</td>' in h and '<td class="text">a</td>' in h


def test_declarations_print_nothing_as_a_cell_s_last_expression() -> None:
    """declare_sources/declare_used return a dict that IPython shows as nothing (no dict on a page)."""
    from IPython.core.formatters import DisplayFormatter

    decl = pub.declare_sources(glue=False)
    assert decl == {"records": [], "published": []}
    assert DisplayFormatter().format(decl) == ({}, {})
    assert DisplayFormatter().format(pub.declare_used(glue=False)) == ({}, {})


def test_legend_symbols_are_drawn_at_full_strength() -> None:
    """A faint band under each line must not make the legend's symbols faint (plot_style's theme)."""
    import altair as alt

    from nvmelab.results import plot_style  # noqa: F401  (registers and enables the theme)

    df = pd.DataFrame({"x": [1, 2, 1, 2], "y": [1, 2, 2, 3], "lo": [0, 1, 1, 2], "hi": [2, 3, 3, 4], "s": list("aabb")})
    band = alt.Chart(df).mark_area(opacity=0.2).encode(x="x:Q", y="lo:Q", y2="hi:Q", color="s:N")
    line = alt.Chart(df).mark_line(point=True).encode(x="x:Q", y="y:Q", color="s:N")
    vega = alt.layer(band, line).to_dict(format="vega")
    assert vega["config"]["legend"]["symbolOpacity"] == 1
    assert not any((lg.get("encode") or {}).get("symbols") for lg in vega["legends"]), vega["legends"]


def test_environments_page_states_unsettable_variables_in_plain_words() -> None:
    """The environments page names what a host would not let a sweep set without sysfs paths or raw values."""
    from nvmelab.book import environments

    env = environments.HostEnvironment("h")
    env.uncontrolled = {
        "governor": "no cpufreq in sysfs (no scaling_governor)",
        "turbo": "no intel_pstate/no_turbo or cpufreq/boost in sysfs",
        "smt": "SMT control is notsupported on this host",
        "odd": "something else",
    }
    text = env.uncontrolled_text()
    assert text == (
        "CPU governor: the host exposes no CPU frequency control; turbo boost: the host exposes no turbo control; "
        "SMT: the host offers no SMT control; odd: something else"
    )
    assert "sysfs" not in text and "notsupported" not in text
