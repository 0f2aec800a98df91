# SPDX-License-Identifier: BSD-3-Clause
"""Lease records of two emulated targets (the calibration A/B: pm1753 as derived, and with the fitted model's
overrides) are split by target, never averaged: the analysis gives one aggregate per target, each labelled
with its profile and overrides, the cuda_qdepth notebook names each target with its records, and aggregate() still
refuses to average them when asked to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvmelab.results import analysis, plots
from nvmelab.studies import load_results
from tests.fake_study import fake_run

ROOT = Path(__file__).resolve().parents[1]
TARGET_A = "gpu-emu://?profile=pm1753&ndev=16"
TARGET_B = "gpu-emu://?profile=pm1753&lat=14131ns&qiops=3683693&ndev=16"
#: IOPS of each target's records: far apart, so that an average of the two would show.
IOPS = {TARGET_A: 1.0e6, TARGET_B: 3.0e6}


def _write_two_target_records(root: Path) -> Path:
    path = root / "cuda_qdepth" / "lease-H100" / "lease.jsonl"
    path.parent.mkdir(parents=True)
    lines = []
    for target, iops in IOPS.items():
        for qdepth in (64, 128):
            for rep in range(2):
                rec = fake_run(target="fake://x", qdepth=qdepth, nqueues=1)
                rec.update(
                    study="cuda_qdepth",
                    preset="lease",
                    target=target,
                    qdepth=qdepth,
                    nqueues=1,
                    iops=iops * (1 + 0.01 * rep),
                    run_key=json.dumps({"qdepth": qdepth, "target": target}) + f"#{rep}",
                )
                rec["provenance"].update(profile="pm1753", scale=1.0, git_commit="abc")
                lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return root


def test_two_targets_get_one_aggregate_each_labelled_with_profile_and_overrides(tmp_path):
    ours = load_results("cuda_qdepth", "lease", root=_write_two_target_records(tmp_path))
    assert len(ours) == 8
    with pytest.raises(ValueError, match="2 emulated targets would be averaged"):
        analysis.aggregate(ours, by=["nqueues", "qdepth"])  # the refusal stays where averaging would happen
    per = analysis.aggregate_per_target(ours, by=["nqueues", "qdepth"])
    assert [t.target for t in per] == sorted(analysis._target_sans_ndev(t) for t in IOPS)
    for t in per:
        want = IOPS[t.first["target"]]
        assert len(t.agg) == 2 and (t.agg["n"] == 2).all()
        assert t.agg["iops_mean"].tolist() == pytest.approx([want * 1.005] * 2)
        assert t.scale == 1.0
    labels = [plots.source_label(t.first) for t in per]
    assert len(set(labels)) == 2 and all("pm1753" in lab for lab in labels)
    assert "lat=14131ns, qiops=3683693" in labels[0] and "with" not in labels[1]
    assert analysis.aggregate_per_target(ours.iloc[0:0], by=["qdepth"]) == []
    # only model keys are overrides: the namespace's geometry and the device count are not
    geometry = {"target": "emu://?profile=pm1753&nsze=1024&lbads=12&ndev=4", "profile": "pm1753", "scale": 64.0}
    assert "with" not in plots.source_label(geometry) and "scale 64" in plots.source_label(geometry)


def test_cuda_qdepth_notebook_shows_a_panel_per_target(tmp_path, monkeypatch):
    """The notebook, fed the two-target lease records, runs to the end (it stopped on the mixed-target
    error) and names both targets: one line of records and one figure panel each."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    root = _write_two_target_records(tmp_path / "results")
    nb = nbformat.read(ROOT / "notebooks" / "cuda_qdepth.ipynb", as_version=4)
    for k, v in {"NVMELAB_RESULTS": str(root), "NVMELAB_PRESET": "lease", "NVMELAB_RUN": "never"}.items():
        monkeypatch.setenv(k, v)  # the kernel inherits this environment
    nbclient.NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    # neither target is the study's own (blocks/warps differ): the page says so and names both as other
    # targets, each with its profile and overrides
    assert (
        "4 records of our runs (nvmelab, emulated pm1753 with lat=14131ns, qiops=3683693 on gpu-emu:// (scale 1)"
        in text
    )
    assert "4 records of our runs (nvmelab, emulated pm1753 on gpu-emu:// (scale 1)" in text
    assert "ran this study's own target at scale 1" in text
