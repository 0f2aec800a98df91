# SPDX-License-Identifier: BSD-3-Clause
"""Isolated runs (nvmelab.studies.isolate): each run in its own process with a time limit; a hang,
a crash or an error costs that run only, gives a failed-point record, and stays out of the analysis."""

from __future__ import annotations

import pytest

from nvmelab.results import records
from nvmelab.studies import load_results, load_spec, run_study
from nvmelab.studies.isolate import IsolatedExecutor
from tests.fake_study import fake_run, fake_spec, preset, sweep

LIMIT_S = 15

SPEC = fake_spec(
    "t_iso",
    preset(
        sweep("grid", target=["fake://dev", "fake://hang", "fake://crash", "fake://error", "fake://other"]),
        repetitions=1,
    ),
    fixed={"ndevs": 1, "qdepth": 4, "warmup": 0.0},
    standard=preset(sweep("grid", qdepth=[1, 2, 4]), repetitions=1),
    paper=preset(sweep("grid", qdepth=[1])),
)


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "t_iso.toml"
    p.write_text(SPEC)
    return load_spec(p)


@pytest.mark.slow
def test_a_hang_a_crash_and_an_error_cost_their_point_only(spec, tmp_path):
    # the limit leaves a loaded 2-core host time to start an interpreter; the hang costs that much
    rep = run_study(
        spec, "quick", run_fn=fake_run, results_root=tmp_path, progress=False, executor=IsolatedExecutor(LIMIT_S)
    )
    assert rep.ran == 5
    assert sorted(why.split(":")[0] for _, why in rep.failed) == ["crash", "error", "timeout"], rep.failed
    recs = records.load_records(tmp_path / "t_iso")
    assert len(recs) == 5
    by_target = {r["target"]: r for r in recs}
    assert by_target["fake://hang"]["failed"]["kind"] == "timeout"
    assert "SIGABRT" in by_target["fake://crash"]["failed"]["reason"]
    assert "OSError" in by_target["fake://error"]["failed"]["reason"]
    for t in ("fake://dev", "fake://other"):
        assert "failed" not in by_target[t] and by_target[t]["iops"] > 0
    for r in recs:
        records.validate(r)
        assert r["run_key"] and r["preset"] == "quick"
    # the analysis sees the two good points only; a rerun repeats none of the five
    df = load_results("t_iso", "quick", root=tmp_path)
    assert sorted(df["target"]) == ["fake://dev", "fake://other"]
    again = run_study(
        spec, "quick", run_fn=fake_run, results_root=tmp_path, progress=False, executor=IsolatedExecutor(LIMIT_S)
    )
    assert again.ran == 0 and again.already_done == 5


def test_budget_stops_starting_runs_and_a_rerun_resumes(spec, tmp_path):
    ex = IsolatedExecutor(30, budget_s=29)
    rep = run_study(spec, "standard", run_fn=fake_run, results_root=tmp_path, progress=False, executor=ex)
    assert rep.ran == 0 and rep.not_started == 3 and "not started" in rep.summary()
    rep = run_study(
        spec, "standard", run_fn=fake_run, results_root=tmp_path, progress=False, executor=IsolatedExecutor(30)
    )
    assert rep.ran == 3 and not rep.failed


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="timeout_s"):
        IsolatedExecutor(0)
    with pytest.raises(ValueError, match="module-level"):
        list(IsolatedExecutor(1).execute([object()], lambda **kw: {}, 1))  # type: ignore[list-item]


# ------------------------------------------------------------------ BatchExecutor: one process, isolation to mop up
@pytest.mark.slow
def test_batch_runs_in_one_process_and_isolates_only_what_follows_a_hang_or_a_death(spec, tmp_path):
    """The five points of the quick grid in one batch child: dev (good), hang (the child is ended at its
    limit: a timeout record), then crash, error and other run isolated (each in a process of its own), with
    the same outcomes as IsolatedExecutor gives them."""
    from nvmelab.studies.isolate import BatchExecutor

    ex = BatchExecutor(timeout_of=lambda run: LIMIT_S)
    rep = run_study(spec, "quick", run_fn=fake_run, results_root=tmp_path, progress=False, executor=ex)
    assert rep.ran == 5
    assert sorted(why.split(":")[0] for _, why in rep.failed) == ["crash", "error", "timeout"], rep.failed
    # the hang ended the batch process: the three runs after it went through the isolated mop-up
    assert ex.isolated == 3 and any("no result within" in e for e in ex.events), (ex.isolated, ex.events)
    by_target = {r["target"]: r for r in records.load_records(tmp_path / "t_iso")}
    assert by_target["fake://hang"]["failed"]["kind"] == "timeout"
    assert "SIGABRT" in by_target["fake://crash"]["failed"]["reason"]
    for t in ("fake://dev", "fake://other"):
        assert "failed" not in by_target[t] and by_target[t]["iops"] > 0


def test_batch_runs_good_points_in_one_process_and_calls_after_for_each(spec, tmp_path):
    from nvmelab.studies.isolate import BatchExecutor

    ticks = []
    ex = BatchExecutor(timeout_of=lambda run: 30, after=lambda: ticks.append(1))
    rep = run_study(spec, "standard", run_fn=fake_run, results_root=tmp_path, progress=False, executor=ex)
    assert rep.ran == 3 and not rep.failed and ex.isolated == 0 and not ex.events
    assert len(ticks) == 3  # after each outcome, once the runner has written it


def test_batch_starts_a_point_only_when_its_estimate_fits_the_deadline(spec, tmp_path):
    """A point whose estimated cost passes the deadline is not started (counted, and a rerun resumes it); the
    estimate, not the time limit, decides."""
    import time

    from nvmelab.studies.isolate import BatchExecutor

    cost = {1: 0.1, 2: 0.1, 4: 1e6}  # the qdepth 4 point would never fit
    ex = BatchExecutor(
        timeout_of=lambda run: 1e6, deadline=time.monotonic() + 60, cost_of=lambda r: cost[r.params["qdepth"]]
    )
    rep = run_study(spec, "standard", run_fn=fake_run, results_root=tmp_path, progress=False, executor=ex)
    assert rep.ran == 2 and rep.not_started == 1, rep.summary()
    rep = run_study(
        spec, "standard", run_fn=fake_run, results_root=tmp_path, progress=False, executor=BatchExecutor(lambda r: 30)
    )
    assert rep.ran == 1 and rep.already_done == 2
