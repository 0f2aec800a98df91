# SPDX-License-Identifier: BSD-3-Clause
"""The GPU lease plan (nvmelab.lease.plan, env/gpu-lease.sh): every step fits one device command and
the whole plan its budget by the cost model; the lease presets exist; the output check refuses what the
device tool would not hand back; and, after `make rehearse-gpu-host`, the rehearsal's outputs pass it."""

from __future__ import annotations

import json
import os
import re
import tarfile
from pathlib import Path

import pytest

from nvmelab.lease import plan as lease
from nvmelab.studies import load_spec
from nvmelab.studies.spec import OPTIONAL_PRESETS

ROOT = Path(__file__).resolve().parents[1]


def test_two_calls_fit_the_lease_with_margin():
    """start + call 1 + warm gap + call 2 + give-back within the lease's 900 s; each call's parts (the cost model:
    install and fixed parts at their limits, studies by the model) within its limit less the margin; each limit
    within one command's. The cost model is code: a study added to CALLS is costed here and must still fit."""
    plan = lease.plan_estimate()
    assert plan["problems"] == [], plan["problems"]
    assert sorted(lease.CALLS) == [1, 2] and [c["call"] for c in plan["calls"]] == [1, 2]
    assert (
        plan["seconds"]
        == lease.MACHINE_START_S
        + lease.CALLS[1].limit_s
        + lease.WARM_GAP_S
        + lease.CALLS[2].limit_s
        + lease.GIVE_BACK_S
    )
    assert plan["seconds"] <= lease.BUDGET_S == 900
    assert lease.CALLS[1].limit_s <= 330 and lease.CALLS[2].limit_s <= 270
    for c in plan["calls"]:
        assert c["seconds"] <= c["limit_s"] - lease.CALL_MARGIN_S, c
        assert all(p.get("points", 1) > 0 for p in c["parts"]), c
    # the rehearsal's estimate (no CUDA context per study) fits too
    assert lease.plan_estimate(gpu=False)["problems"] == []


def test_plan_command_ends_with_the_budget_line(capsys):
    assert lease.main(["plan"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.match(r"^plan: \d+ s of 900 s ", last), last


def test_plan_estimate_names_a_call_over_its_limit(monkeypatch):
    big = lease.Call(2, 100, lease.CALLS[2].parts)  # e.g. call 2 given too little time for its parts
    monkeypatch.setitem(lease.CALLS, 2, big)
    problems = lease.plan_estimate()["problems"]
    assert any(p.startswith("call 2: parts ") for p in problems), problems


def test_call_1_holds_what_must_come_back_first_and_call_2_the_rest():
    kinds1 = [p.kind for p in lease.CALLS[1].parts]
    assert kinds1[:4] == ["probe", "native-check", "gpu-tests", "bench"]
    studies1 = [p.task for p in lease.CALLS[1].parts if p.kind == "study"]
    assert studies1 == [lease.Task("cuda_qdepth", lease.AB_TARGET_A)]  # the whole grid, nothing selected
    studies2 = {p.task.study for p in lease.CALLS[2].parts if p.kind == "study"}
    assert studies2 == {"cuda_iosize", "cuda_match", "cuda_pollcost", "cuda_qdepth"}
    assert all(p.task.study != "vram_cache" for c in lease.CALLS.values() for p in c.parts if p.task)
    emu = next(p.task for p in lease.CALLS[2].parts if p.name == "cuda_qdepth-emu")
    runs = lease.runs_of(emu)
    assert runs and all(r.params["target"].startswith("emu://?mode=thread") for r in runs)
    assert all(r.params["ndevs"] == 4 and "ndev=4" in r.params["target"] for r in runs)


def test_script_constants_are_the_plans():
    """env/gpu-lease.sh's call seconds and install limit are the plan's: the same numbers."""
    sh = dict(re.findall(r"^([A-Z0-9_]+_S)=(\d+)$", (ROOT / "env" / "gpu-lease.sh").read_text(), re.M))
    assert sh == {
        "CALL1_S": str(lease.CALLS[1].limit_s),
        "CALL2_S": str(lease.CALLS[2].limit_s),
        "INSTALL_LIMIT_S": str(lease.INSTALL_LIMIT_S),
    }, sh


def test_readme_gives_the_device_calls_and_the_plans_numbers():
    """README's "On a GPU host" and env/README.md give the two device command lines with their carry list, and
    env/README.md's table states what plan_estimate() computes (rounded to the second)."""
    readme = (ROOT / "README.md").read_text()
    for n in (1, 2):
        assert f"bash env/gpu-lease.sh {n} $OUT" in readme
    assert '"build/lease/wheel", "env/wheelhouse"' in readme
    text = (ROOT / "env" / "README.md").read_text()
    plan = lease.plan_estimate()
    for c in plan["calls"]:
        row = re.search(rf"^\| {c['call']} \| GPU host \|.*\| ≤ (\d+) s of (\d+) s \|$", text, re.M)
        assert row, f"no row of call {c['call']} in env/README.md"
        assert int(row.group(1)) == round(c["seconds"]) and int(row.group(2)) == c["limit_s"], row.group(0)
    total = re.search(r"lease takes (\d+) s of its 900", text)
    assert total and int(total.group(1)) == round(plan["seconds"]), (total and total.group(1), plan["seconds"])


def test_no_lease_grid_point_is_one_the_gpu_refuses():
    """(16 queues, qdepth 512) needs more than the occupancy limit beside the emulator on an H100/H200."""
    runs = lease.runs_of(lease.Task("cuda_qdepth", lease.AB_TARGET_A))
    pts = {(r.params["nqueues"], r.params["qdepth"]) for r in runs}
    assert (16, 512) not in pts and len(pts) == 39
    assert all(r.params.get("poll") == "spin" for r in runs)  # as the published tool polls


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
    for study in ("cuda_qdepth", "cuda_iosize", "cuda_pollcost", "cuda_match"):
        assert "lease" in load_spec(study).presets
    assert "lease" not in load_spec("vram_cache").presets  # it left the lease (its GPU part: a later one)
    ab_b = next(p.task for p in lease.CALLS[2].parts if p.name == "cuda_qdepth-ab")
    grid = lease.runs_of(lease.Task("cuda_qdepth", lease.AB_TARGET_A))
    b_runs = lease.runs_of(ab_b)
    assert {(r.params["nqueues"], r.params["qdepth"]) for r in b_runs} == set(lease.AB_POINTS)
    assert set(lease.AB_POINTS) <= {(r.params["nqueues"], r.params["qdepth"]) for r in grid}  # A: call 1's grid
    b = ab_b.resolved_target()
    assert b.startswith(lease.AB_TARGET_A + "&") and "lat=" in b and "qiops=" in b
    assert not {r.key for r in b_runs} & {r.key for r in grid}  # the target is in the key


def test_pollcost_points_pay_for_their_corunner_and_the_share_is_the_engines():
    """A point with a co-runner is estimated longer by its phase alone, and the cost model's share is the
    engine's (CRUN_CORUN_SHARE, via the extension)."""
    assert any(p.task and p.task.study == "cuda_pollcost" for p in lease.CALLS[2].parts)
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


def _good_out(tmp_path: Path, step: int = 2) -> Path:
    out = tmp_path / "out"
    res = tmp_path / "res" / "cuda_qdepth" / "rehearsal"
    res.mkdir(parents=True)
    from tests.fake_study import fake_run

    rec = fake_run(target="fake://x")
    rec.update(study="cuda_qdepth", preset="lease", run_key="k#0")
    rec["provenance"]["git_commit"] = "abc"
    (res / "lease.jsonl").write_text(json.dumps(rec) + "\n")
    out.mkdir()
    with tarfile.open(out / f"records-{step}.tar.gz", "w:gz") as tar:
        tar.add(res / "lease.jsonl", arcname="cuda_qdepth/rehearsal/lease.jsonl")
    (out / f"lease-{step}.log").write_text("log\n")
    (out / f"summary-{step}.json").write_text(json.dumps({"call": step}))
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


def _call(tmp_path: Path, number: int, only: str, *, kill_after: int = 0) -> tuple[int, Path]:
    """`lease call` with the stand-in, as the device command runs it after the install (a subprocess)."""
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    env = {**os.environ, "NVMELAB_HOST_ID": "t", "NVMELAB_LEASE_ROOT": str(ROOT)}
    if kill_after:
        env["NVMELAB_LEASE_KILL_AFTER"] = str(kill_after)
    cmd = [sys.executable, "-m", "nvmelab.lease", "call", str(number), "--results", str(tmp_path / "res"),
           "--out", str(out), "--parts", str(tmp_path / "parts.jsonl"), "--started", str(time.time()), "--standin",
           "--only", only]  # fmt: skip
    rc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600).returncode
    return rc, out


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_call_killed_after_any_part_returns_everything_up_to_that_part(tmp_path, k):
    """SIGKILL right after the k-th part (NVMELAB_LEASE_KILL_AFTER, the tests' fault injection): OUT already
    holds the summary and the archive with every part up to k, and every record those parts took."""
    pytest.importorskip("nvmelab._native")
    only = ["bench-breakdown", "cuda_qdepth-emu", "cuda_qdepth-ab"]  # in the call's order
    rc, out = _call(tmp_path, 2, ",".join(only), kill_after=k)
    assert rc == -9  # killed, as the device tool's limit would
    summary = json.loads((out / "summary-2.json").read_text())
    assert [p["part"] for p in summary["parts"]] == only[:k]
    with tarfile.open(out / "records-2.tar.gz") as tar:
        recs = [
            json.loads(ln)
            for m in tar.getmembers()
            if m.name.endswith(".jsonl")
            for ln in tar.extractfile(m).read().decode().splitlines()
        ]
    targets = [r["target"] for r in recs]
    want = {1: 0, 2: 5, 3: 15}[k]  # the bench (no records), five emu:// points, then ten A/B points
    assert len(recs) == want, targets
    assert sum(t.startswith("emu://") for t in targets) == min(want, 5)
    parts = {p["part"]: p for p in summary["parts"]}
    if k >= 2:
        assert parts["cuda_qdepth-emu"]["ran"] == 5 and parts["cuda_qdepth-emu"]["not_started"] == 0


def test_call_refuses_a_part_it_does_not_have(tmp_path):
    rc, _ = _call(tmp_path, 1, "no-such-part")
    assert rc == 2


REHEARSAL = os.environ.get("NVMELAB_REHEARSAL_OUT")


@pytest.mark.skipif(not REHEARSAL, reason="set by make rehearse-gpu-host (NVMELAB_REHEARSAL_OUT)")
@pytest.mark.parametrize("number", sorted(lease.CALLS))
def test_rehearsal_outputs(number):
    """What the device tool would hand back from each call: within its limits, valid records with their
    commit, every part done, and every point of every lease study run (a record, or a failed-point record),
    none left "not started" within the rehearsal's budget."""
    out = Path(REHEARSAL) / f"call-{number}"
    assert lease.check_out(out, number) == []
    summary = json.loads((out / f"summary-{number}.json").read_text())
    assert summary["standin"] is True and summary["git_commit"]
    assert all(p.get("rc") == 0 for p in summary["parts"]), summary["parts"]
    names = [p["part"] for p in summary["parts"]]
    assert names == ["install"] + [p.name for p in lease.CALLS[number].parts], names
    for p in summary["parts"]:
        if p["kind"] == "study":
            assert p["not_started"] == 0 and not p["skipped"], p
            assert p["ran"] + p["already_done"] == p["planned"] == p["points"], p
    if number == 1:
        tests = next(p for p in summary["parts"] if p["part"] == "gpu-tests")
        assert sum(tests["tests"].values()) > 0 and not tests["tests"]["hung"], tests
        with tarfile.open(out / "records-1.tar.gz") as tar:
            names = tar.getnames()
        assert "lease/gpu-tests-1.xml" in names and "lease/probe-1.json" in names, names
    if os.environ.get("NVMELAB_REHEARSAL_CUDA") == "ON":  # the wheel a lease carries: CUDA compiled in
        assert summary["build"]["cuda"] is True, summary["build"]
        assert summary["cuda"]["compiled"] is True and summary["cuda"]["devices"] == 0 and summary["cuda"]["reason"]
