# SPDX-License-Identifier: BSD-3-Clause
"""The GPU lease plan (nvmelab.studies.lease, env/gpu-lease.sh): every step fits one device command and
the whole plan its budget by the cost model; the lease presets exist; the output check refuses what the
device tool would not hand back; and, after `make rehearse-gpu-host`, the rehearsal's outputs pass it."""

from __future__ import annotations

import json
import os
import re
import statistics
import tarfile
from pathlib import Path

import pytest

from nvmelab.studies import lease, load_spec
from nvmelab.studies.spec import OPTIONAL_PRESETS

ROOT = Path(__file__).resolve().parents[1]


def test_each_step_fits_one_command_and_the_plan_its_budget():
    # the plan's cost model is code: a study added to STEPS is costed here and must still fit
    plan = lease.plan_estimate()
    assert plan["problems"] == [], plan["problems"]
    assert [e["step"] for e in plan["steps"]] == sorted(lease.STEPS)
    for e in plan["steps"]:
        assert e["seconds"] <= lease.STEP_LIMIT_S <= 8 * 60, e
        assert all(t["points"] > 0 for t in e["tasks"]), e
    assert plan["seconds"] == plan["commands_s"] + lease.MACHINE_START_S
    assert plan["seconds"] <= lease.PLAN_LIMIT_S <= 24 * 60


def test_plan_estimate_names_a_step_over_its_limit(monkeypatch):
    monkeypatch.setitem(lease.STEP_FIXED_S, 2, lease.STEP_LIMIT_S)  # e.g. a long study added to step 2
    problems = lease.plan_estimate()["problems"]
    assert any(p.startswith("step 2: ") for p in problems), problems


def test_readme_states_the_plans_computed_estimate():
    """env/README.md's plan table says what plan_estimate() computes (rounded to the second): a change
    of the plan or of the cost model that is not written down fails here."""
    text = (ROOT / "env" / "README.md").read_text()
    plan = lease.plan_estimate()
    for e in plan["steps"]:
        row = re.search(rf"^\| {e['step']} \| GPU host \|.*\| ≤ (\d+) s \|$", text, re.M)
        assert row, f"no row of step {e['step']} in env/README.md"
        assert int(row.group(1)) == round(e["seconds"]), (e["step"], row.group(1), e["seconds"])
    total = re.search(r"the plan's estimate is (\d+) s", text)
    assert total and int(total.group(1)) == round(plan["seconds"]), (total and total.group(1), plan["seconds"])


def test_script_time_limits_are_the_cost_models():
    """env/gpu-lease.sh enforces the fixed parts' limits that the cost model counts: the same numbers."""
    sh = dict(re.findall(r"^([A-Z_]+_S)=(\d+)$", (ROOT / "env" / "gpu-lease.sh").read_text(), re.M))
    assert sh, "no limits found in env/gpu-lease.sh"
    for name, value in sh.items():
        assert int(value) == getattr(lease, name), name


def test_rehearsal_budget_lets_every_task_of_a_step_start():
    """run_step gives each task an even share of the step's study seconds and skips a task whose share is below
    its point timeout: the rehearsal's cap (env/gpu-lease.sh) must leave every task of every step a share that
    starts a point, or the rehearsal stops exercising that study (it did, for cuda_iosize and vram_cache, when
    cuda_pollcost joined step 3 under a 60 s cap)."""
    m = re.search(
        r"NVMELAB_LEASE_STUDY_S=\$\{NVMELAB_LEASE_STUDY_S:-(\d+)\}", (ROOT / "env" / "gpu-lease.sh").read_text()
    )
    assert m, "the rehearsal's study-seconds cap is not in env/gpu-lease.sh"
    cap = int(m.group(1))
    for step, tasks in lease.STEPS.items():
        for task in tasks:
            need = max(lease.point_timeout(r) for r in lease.runs_of(task))
            assert cap / len(tasks) >= need, (step, task.study, cap / len(tasks), need)


def test_installed_extension_imports_without_a_gpu_driver_and_holds_its_cuda_code():
    """The dev build's extension through the lease's check: it imported (no libcuda.so.1 needed: this
    host has no GPU driver), a CUDA build holds GPU code (.nv_fatbin) and links no driver library."""
    import nvmelab

    cuda = bool(nvmelab.build_info().get("cuda"))
    r = lease.native_check(want_cuda=cuda)
    assert r["problems"] == [], r["problems"]
    if cuda and "sections" in r["elf"]:
        assert ".nv_fatbin" in r["elf"]["sections"]
        assert not any(n.startswith("libcuda.so") for n in r["elf"]["needed"])
    if r["cuda_status"]["devices"] == 0:
        assert r["cuda_status"]["reason"]


def test_lease_presets_and_the_ab_points_are_in_the_grid():
    assert "lease" in OPTIONAL_PRESETS
    for study in ("cuda_qdepth", "cuda_iosize", "vram_cache", "cuda_pollcost", "cuda_match"):
        assert "lease" in load_spec(study).presets
    ab = lease.runs_of(lease.STEPS[1][0])
    assert {(r.params["nqueues"], r.params["qdepth"]) for r in ab} == set(lease.AB_POINTS)
    b = lease.STEPS[1][1].resolved_target()
    assert b.startswith(lease.AB_TARGET_A + "&") and "lat=" in b and "qiops=" in b
    keys_a = {r.key for r in ab}
    assert not keys_a & {r.key for r in lease.runs_of(lease.STEPS[1][1])}  # the target is in the key
    assert keys_a <= {r.key for r in lease.runs_of(lease.STEPS[2][0])}  # step 2 resumes past A
    assert all(r.params["cache"] == "gpu" for r in lease.runs_of(lease.Task("vram_cache")))


def test_pollcost_points_pay_for_their_corunner_and_the_share_is_the_engines():
    """cuda_pollcost rides in step 3; a point with a co-runner is estimated longer by its phase alone, and
    the cost model's share is the engine's (CRUN_CORUN_SHARE, via the extension)."""
    assert any(t.study == "cuda_pollcost" for t in lease.STEPS[3])
    runs = lease.runs_of(lease.Task("cuda_pollcost"))
    on = [r for r in runs if r.params.get("corun")]
    off = [r for r in runs if not r.params.get("corun")]
    assert on and off and {r.params["qdepth"] for r in on} == {r.params["qdepth"] for r in off}
    window = float(on[0].params["warmup"]) + float(on[0].params["runtime"])
    extra = lease.point_seconds(on[0]) - lease.point_seconds(
        next(r for r in off if r.params["qdepth"] == on[0].params["qdepth"])
    )
    assert extra == pytest.approx(lease.CORUN_SHARE * window + lease.CORUN_SIZING_S)
    nat = pytest.importorskip("nvmelab._native")
    assert nat.CRUN_CORUN_SHARE == pytest.approx(lease.CORUN_SHARE)


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
    if step == 1:
        assert any(p["part"] == "native-check" for p in summary["parts"]), summary["parts"]
    if os.environ.get("NVMELAB_REHEARSAL_CUDA") == "ON":  # the wheel a lease carries: CUDA compiled in
        assert summary["build"]["cuda"] is True, summary["build"]
        assert summary["cuda"]["compiled"] is True and summary["cuda"]["devices"] == 0 and summary["cuda"]["reason"]
