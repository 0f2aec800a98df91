# SPDX-License-Identifier: BSD-3-Clause
"""plots.model_curves: model lines, published points by role and our measurements, each with a legend entry."""

from __future__ import annotations

import pandas as pd
import pytest

from nvmelab.results import model_validation as mv
from nvmelab.results import plots


def _curves() -> pd.DataFrame:
    return pd.DataFrame(
        {"qdepth": [1, 2, 4] * 2, "nqueues": [1] * 3 + [2] * 3, "iops_mean": [1.0, 2.0, 3.0, 2.0, 3.0, 3.0]}
    )


def _shape_domains(spec: dict) -> list[list[str]]:
    return [
        layer["encoding"]["shape"]["scale"]["domain"] for layer in spec["layer"] if "shape" in layer.get("encoding", {})
    ]


def test_every_layer_has_a_legend_entry() -> None:
    pts = pd.DataFrame(
        {
            "qdepth": [2, 4, 4],
            "iops": [2.0, 3.0, 3.0],
            "kind": [
                plots.point_kind("calibration"),
                plots.point_kind("held_out"),
                plots.point_kind("held_out", "cap"),
            ],
            "label": ["a", "b", "c"],
        }
    )
    ours = pd.DataFrame({"qdepth": [1, 2], "nqueues": [1, 1], "iops_mean": [0.9, 1.9]})
    spec = plots.model_curves(
        _curves(), "qdepth", "iops", series="nqueues", points=pts, ours=ours, reference_lines=[("roofline", 3.0)]
    ).to_dict()
    doms = _shape_domains(spec)
    assert doms and all(d == list(plots.POINT_KINDS) for d in doms)
    line = spec["layer"][0]
    assert line["encoding"]["color"]["sort"] == ["model: 1", "model: 2"]
    assert any(layer.get("mark", {}).get("type") == "text" for layer in spec["layer"])  # the reference line is labelled


def test_no_points_no_points_legend() -> None:
    spec = plots.model_curves(_curves(), "qdepth", "iops", series="nqueues").to_dict()
    assert _shape_domains(spec) == []
    held_only = pd.DataFrame({"qdepth": [2], "iops": [2.0], "kind": [plots.point_kind("held_out")], "label": ["x"]})
    spec = plots.model_curves(_curves(), "qdepth", "iops", series="nqueues", points=held_only).to_dict()
    assert _shape_domains(spec) == [[plots.point_kind("held_out")]]


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no model curves"):
        plots.model_curves(_curves().iloc[0:0], "qdepth", "iops", series="nqueues")
    bad = pd.DataFrame({"qdepth": [2], "iops": [2.0], "kind": ["reproduced"], "label": ["x"]})
    with pytest.raises(ValueError, match="unknown point kind"):
        plots.model_curves(_curves(), "qdepth", "iops", series="nqueues", points=bad)


def test_figure_points_of_the_device_initiated_studies() -> None:
    df = mv.validate()
    studies = (("cuda_qdepth", "qdepth", "iops"), ("cuda_iosize", "iosize", "gbps"), ("cpu_initiated", "ncpus", "iops"))
    for study, x, y in studies:
        pts = mv.figure_points(df, study)
        assert set(pts["role"]) == {"calibration", "held_out"}
        assert pts[[x, y]].notna().all().all()
        # each point's kind says its role, and whether a held-out point restates a cap (not scored)
        rest = pts.merge(df[["study", "point_id", "restates"]].query("study == @study"), on="point_id")["restates"]
        assert list(pts["kind"]) == [plots.point_kind(r, s) for r, s in zip(pts["role"], rest.fillna(""))]
        assert set(pts.loc[pts["role"] == "calibration", "kind"]) == {plots.point_kind("calibration")}
    cpu = mv.figure_points(df, "cpu_initiated")
    # informative held-out points (11-16 threads with the payload in host memory, seed 004's D) are diamonds
    held = cpu[cpu["kind"] == plots.point_kind("held_out")]
    assert {"iops/upcie/c16", "headline/D"} <= set(held["point_id"])
    assert plots.point_kind("held_out", "definition") in set(cpu["kind"])


def test_cpu_model_figure_one_panel_per_backend() -> None:
    from nvmelab.results import model

    p = model.fit(mv.published_points())
    curves = pd.concat([model.cpu_curves(p, b) for b in ("upcie", "upcie-cuda")])
    pts = mv.figure_points(mv.validate(), "cpu_initiated")
    spec = plots.cpu_model(curves, pts, roofline=16 * p.dev_iops, titles={"upcie": "a", "upcie-cuda": "b"}).to_dict()
    assert [c["title"] for c in spec["vconcat"]] == ["a", "b"]
    for panel, b in zip(spec["vconcat"], ("upcie", "upcie-cuda")):
        rows = [r for layer in panel["layer"] if "data" in layer for r in spec["datasets"][layer["data"]["name"]]]
        pts_rows = [r for r in rows if "kind" in r]
        assert pts_rows and {r["backend"] for r in pts_rows} == {b}  # each panel only its backend's points
        assert {r["backend"] for r in rows if "iops_mean" in r} == {b}  # and its model line


def test_most_practical_configuration() -> None:
    from nvmelab.results import analysis

    t = pd.DataFrame(
        {
            "nqueues": [1, 2, 4, 8],
            "min_qdepth": [512, 128, 64, 64],
            "total_cuda_threads": [8192, 4096, 4096, 8192],
            "reached": [False, True, True, True],
        }
    )
    assert analysis.most_practical_configuration(t)["nqueues"] == 4  # same threads as nq=2, half the depth
    t.loc[0, "reached"] = True
    t.loc[0, "total_cuda_threads"] = 16
    assert analysis.most_practical_configuration(t)["nqueues"] == 1
    with pytest.raises(ValueError):
        analysis.most_practical_configuration(t.assign(reached=False))


def test_marks_caption_names_only_the_marks_drawn() -> None:
    pts = pd.DataFrame(
        {"kind": ["published, calibration point (fitted)", "published, at a cap (held out, not scored)"]}
    )
    c = plots.marks_caption(pts)
    assert c.startswith("Squares:") and "triangles:" in c and "diamonds" not in c and "grey" not in c
    ours = pd.DataFrame({"flagged": [0, 0]})
    assert "grey circles" in plots.marks_caption(pts, ours) and "red ring" not in plots.marks_caption(pts, ours)
    assert "red ring" in plots.marks_caption(pts, ours.assign(flagged=[0, 2]))
    assert plots.marks_caption(None) == "" and plots.marks_caption(pd.DataFrame(), None) == ""
