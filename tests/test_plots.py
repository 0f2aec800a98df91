# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.results.plots: figures carry the data, tooltips, rules and source labels; static export works offline."""

from __future__ import annotations

import pandas as pd
import pytest

from nvmelab.results import analysis, plots, reference
from nvmelab.studies.cpu_initiated import figures as cpu_initiated_figures
from nvmelab.studies.cuda_iosize import figures as cuda_iosize_figures
from nvmelab.studies.cuda_qdepth import figures as cuda_qdepth_figures
from nvmelab.studies.pcie_saturation import figures as pcie_saturation_figures
from nvmelab.studies.tool_comparison import figures as tool_comparison_figures


def _agg():
    df = pd.DataFrame(
        {"qdepth": [1, 1, 2, 2, 4, 4], "nqueues": [1] * 6, "iops": [1.0, 3.0, 4.0, 4.0, 8.0, 8.0], "mibs": [1.0] * 6}
    )
    return analysis.aggregate(df, by=["nqueues", "qdepth"])


def _layers(chart):
    d = chart.to_dict()
    return d.get("layer", [])


def test_scaling_lines_band_points_tooltips_roofline():
    ch = plots.scaling_lines(_agg(), "qdepth", series="nqueues", log2=True, roofline=10.0, title="t")
    d = ch.to_dict()
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in d["layer"]]
    assert marks == ["area", "line", "point", "rule", "text"]
    label = d["layer"][4]
    assert label["encoding"]["text"]["field"] == "label" and label["encoding"]["y"]["field"] == "roofline"
    pts = d["layer"][2]["encoding"]
    assert any(t["field"] == "iops_std" for t in pts["tooltip"])
    assert d["layer"][0]["encoding"]["y"]["field"] == "lo"
    data = next(iter(d["datasets"].values()))
    q1 = [r for r in data if r["qdepth"] == 1][0]
    assert (q1["lo"], q1["hi"]) == (1.0, 3.0)  # mean 2 +- population std 1
    assert d["layer"][1]["encoding"]["x"]["scale"] == {"type": "log", "base": 2}


def test_panels_beside_each_other_name_their_source():
    ch = cpu_initiated_figures.cpu_initiated(
        [("published (AiSIO)", _agg(), 10.0), ("nvmelab, emulated pm1753 (scale 64)", _agg(), 5.0)], "qdepth", log2=True
    )
    d = ch.to_dict()
    assert [c["title"] for c in d["vconcat"]] == ["published (AiSIO)", "nvmelab, emulated pm1753 (scale 64)"]


def test_source_label_names_profile_and_scale():
    lab = plots.source_label(
        {"source": "nvmelab", "target": "emu://?profile=pm1753", "profile": "pm1753", "scale": 64.0, "host": "vm"}
    )
    assert "pm1753" in lab and "scale 64" in lab
    assert plots.source_label({"source": reference.PUBLISHED}) == reference.PUBLISHED


def test_pcie_bars_stack_payload_and_overhead_with_rules():
    agg = analysis.aggregate(
        reference.published("pcie-bandwidth-saturation"), by=["iosize"], metrics=["gbps", "dcgm_gbps"]
    )
    d = pcie_saturation_figures.pcie_saturation(agg, line_rate_gbps=64.0, p2p_gbps=56.1).to_dict()
    rows = [r for ds in d["datasets"].values() for r in ds]
    parts = {r["part"] for r in rows if "part" in r}
    assert parts == {"payload (application)", "link overhead (DCGM - payload)"}
    refs = {r["reference"]: r["gbps"] for r in rows if "reference" in r}
    assert refs == {"PCIe line rate": 64.0, "P2P reference": 56.1}


def test_pcie_bars_without_dcgm_hold_payload_only():
    agg = pd.DataFrame({"iosize": [512, 4096], "gbps_mean": [1.0, 2.0], "gbps_std": [0.0, 0.0], "n": [2, 2]})
    d = pcie_saturation_figures.pcie_saturation(agg).to_dict()
    rows = [r for ds in d["datasets"].values() for r in ds]
    assert {r["part"] for r in rows} == {"payload (application)"}


def test_tool_comparison_grouped_bars():
    agg = analysis.aggregate(reference.published("tool-comparison"), by=["stack", "ncpus"])
    d = tool_comparison_figures.tool_comparison(agg, title="x").to_dict()
    bar = d["layer"][0]
    assert bar["encoding"]["xOffset"]["field"] == "stack" and bar["encoding"]["x"]["field"] == "ncpus"


def test_cuda_charts_with_published_points():
    pts = pd.DataFrame({"qdepth": [128], "iops": [41.9e6], "label": ["nqueues=1 qd=128"]})
    d = cuda_qdepth_figures.cuda_qdepth(_agg(), roofline=61.7e6, published_points=pts).to_dict()
    assert d["layer"][-1]["mark"]["shape"] == "cross"
    agg = _agg().assign(iosize=[512, 1024, 2048], gbps_mean=[1.0, 2.0, 3.0], gbps_std=[0.0, 0.0, 0.0])
    d = cuda_iosize_figures.cuda_iosize(agg, p2p_gbps=56.1).to_dict()
    assert any(layer["mark"]["type"] == "rule" for layer in d["layer"] if isinstance(layer["mark"], dict))


def test_static_export_svg_and_png(tmp_path):
    ch = plots.scaling_lines(_agg(), "qdepth", title="export")
    svg = plots.save(ch, tmp_path / "f.svg").read_text()
    assert svg.startswith("<svg") and "export" in svg
    png = plots.save(ch, tmp_path / "f.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="unsupported figure format '.gif'"):
        plots.save(ch, tmp_path / "f.gif")


def test_reference_line_is_labelled():
    ch = plots.scaling_lines(_agg(), "qdepth", roofline=10.0, roofline_label="published roofline")
    assert "published roofline" in plots.svg(ch)


def test_no_data_draws_no_empty_legend():
    empty = _agg().iloc[0:0]
    d = plots.scaling_lines(empty, "qdepth", series="nqueues").to_dict()
    assert all("field" not in layer["encoding"].get("color", {}) for layer in d["layer"])
    d = plots.scaling_lines(_agg(), "qdepth", series="nqueues").to_dict()
    assert d["layer"][1]["encoding"]["color"]["field"] == "nqueues"


def test_theme_never_cuts_labels_and_renders_svg():
    import altair as alt

    cfg = plots.scaling_lines(_agg(), "qdepth").to_dict()["config"]
    assert cfg["legend"]["labelLimit"] == 0 and cfg["axis"]["labelLimit"] == 0
    assert alt.renderers.options.get("embed_options", {}).get("renderer") == "svg"
