# SPDX-License-Identifier: BSD-3-Clause
"""The GPU lease plan (nvmelab.studies.lease, env/gpu-lease.sh): every step fits one device command and
the whole plan its budget by the cost model; the lease presets exist; the output check refuses what the
device tool would not hand back; and, after `make rehearse-gpu-host`, the rehearsal's outputs pass it."""

from __future__ import annotations

import json
import os
import statistics
import tarfile
from pathlib import Path

import pytest

from nvmelab.studies import lease, load_spec
from nvmelab.studies.spec import OPTIONAL_PRESETS

ROOT = Path(__file__).resolve().parents[1]


def test_each_step_fits_one_command_and_the_plan_its_budget():
    total = 0.0
    for step in lease.STEPS:
        e = lease.estimate(step)
        assert e["seconds"] <= lease.STEP_LIMIT_S, e
        assert all(t["points"] > 0 for t in e["tasks"]), e
        total += e["seconds"]
    assert total <= lease.PLAN_LIMIT_S


def test_lease_presets_and_the_ab_points_are_in_the_grid():
    assert "lease" in OPTIONAL_PRESETS
    for study in ("cuda_qdepth", "cuda_iosize", "vram_cache", "cuda_match"):
        assert "lease" in load_spec(study).presets
    ab = lease.runs_of(lease.STEPS[1][0])
    assert {(r.params["nqueues"], r.params["qdepth"]) for r in ab} == set(lease.AB_POINTS)
    b = lease.STEPS[1][1].resolved_target()
    assert b.startswith(lease.AB_TARGET_A + "&") and "lat=" in b and "qiops=" in b
    keys_a = {r.key for r in ab}
    assert not keys_a & {r.key for r in lease.runs_of(lease.STEPS[1][1])}  # the target is in the key
    assert keys_a <= {r.key for r in lease.runs_of(lease.STEPS[2][0])}  # step 2 resumes past A
    assert all(r.params["cache"] == "gpu" for r in lease.runs_of(lease.Task("vram_cache")))


def test_tier_point_estimate_covers_the_committed_cache_runs():
    path = ROOT / "data" / "results" / "vram_cache" / "vm" / "standard.jsonl"
    recs = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    cache = [r["runtime_s"] for r in recs if r.get("cache") == "host" and r.get("nqubits") == 21]
    assert cache and max(cache) <= lease.TIER_POINT_S, (max(cache), statistics.median(cache))


def _good_out(tmp_path: Path, step: int = 2) -> Path:
    out = tmp_path / "out"
    res = tmp_path / "res" / "cuda_qdepth" / "rehearsal"
    res.mkdir(parents=True)
    from nvmelab.studies.fake import fake_run

    rec = fake_run(target="fake://x")
    rec.update(study="cuda_qdepth", preset="lease", run_key="k#0")
    rec["provenance"]["git_commit"] = "abc"
    (res / "lease.jsonl").write_text(json.dumps(rec) + "\n")
    out.mkdir()
    with tarfile.open(out / f"records-{step}.tar.gz", "w:gz") as tar:
        tar.add(res / "lease.jsonl", arcname="cuda_qdepth/rehearsal/lease.jsonl")
    (out / f"lease-{step}.log").write_text("log\n")
    (out / f"summary-{step}.json").write_text(json.dumps({"step": step}))
    return out


def test_output_check_accepts_a_good_folder_and_names_what_is_wrong(tmp_path):
    out = _good_out(tmp_path)
    assert lease.check_out(out, 2) == []
    deep = out / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "x.txt").write_text("x")
    (out / "bad name.txt").write_text("x")
    for i in range(6):
        (out / f"f{i}").write_text("x")
    problems = " | ".join(lease.check_out(out, 2))
    assert "deeper than 2" in problems and "a name the tool" in problems and "files (the tool returns 8)" in problems
    assert "missing summary-3.json" in " ".join(lease.check_out(out, 3)) or lease.check_out(out, 3)


REHEARSAL = os.environ.get("NVMELAB_REHEARSAL_OUT")


@pytest.mark.skipif(not REHEARSAL, reason="set by make rehearse-gpu-host (NVMELAB_REHEARSAL_OUT)")
@pytest.mark.parametrize("step", sorted(lease.STEPS))
def test_rehearsal_outputs(step):
    out = Path(REHEARSAL) / f"step-{step}"
    assert lease.check_out(out, step) == []
    summary = json.loads((out / f"summary-{step}.json").read_text())
    assert summary["standin"] is True and summary["git_commit"]
    assert all(p.get("rc") == 0 for p in summary["parts"]), summary["parts"]
