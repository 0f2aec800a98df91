# SPDX-License-Identifier: BSD-3-Clause
"""The sweep runner: specs, resume, atomic records, host-variable policy, Ctrl-C, Dask executor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvmelab.results import records
from nvmelab.studies import HostControl, SpecError, list_specs, load_results, load_spec, parse_spec, run_study
from nvmelab.studies.runner import LocalExecutor
from tests.fake_study import fake_run, fake_spec, preset, sweep

SPEC = fake_spec(
    "t_study",
    preset(sweep("qdepth", qdepth=[1, 4], ndevs=1), sweep("ndevs", qdepth=4, ndevs=[1, 2]), repetitions=2),
    fixed={"warmup": 0.0},
    exclude=[{"smt": 0, "thr_sib": 1}],
    standard=preset(sweep("host", qdepth=4, governor=["performance", "powersave"], smt=[0, 1], thr_sib=[0, 1])),
    paper=preset(sweep("stress", qdepth=4, ncpus=1, stress=[0, 1])),
)


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "t_study.toml"
    p.write_text(SPEC)
    return load_spec(p)


@pytest.fixture
def fake_sys(tmp_path):
    """A fake /sys/devices/system/cpu: 2 CPUs, cpufreq with governors, no SMT control."""
    root = tmp_path / "sys"
    for c in (0, 1):
        d = root / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text("performance\n")
        (d / "scaling_available_governors").write_text("performance powersave\n")
        t = root / f"cpu{c}" / "topology"
        t.mkdir()
        (t / "thread_siblings_list").write_text(f"{c}\n")
    (root / "online").write_text("0-1\n")
    (root / "smt").mkdir()
    (root / "smt" / "control").write_text("notsupported\n")
    (root / "smt" / "active").write_text("0\n")
    (root / "intel_pstate").mkdir()
    (root / "intel_pstate" / "no_turbo").write_text("0\n")
    return root


def test_every_study_has_a_valid_spec_with_all_presets():
    assert set(list_specs()) >= {"cpu_initiated", "tool_comparison", "pcie_saturation", "cuda_iosize", "cuda_qdepth"}
    for name in list_specs():
        s = load_spec(name)
        for pname in ("quick", "standard", "paper"):
            plan = s.plan(pname)
            assert plan.runs, (name, pname)
            assert len({r.key for r in plan.runs}) == len(plan.runs)


def test_paper_preset_is_the_published_grid():
    plan = load_spec("cpu_initiated").plan("paper")
    grid = plan.sweeps["grid"]
    # 2 governors x 2 turbo x (SMT on: 2 sibling choices + SMT off: 1) x 2 stress x 3 qd x 2 sizes x 4 cores x 5 devs
    assert len(grid) == 2 * 2 * 3 * 2 * 3 * 2 * 4 * 5
    assert not any(p["smt"] == 0 and p["thr_sib"] == 1 for p in grid)
    assert all(r.repetition < 5 for r in plan.runs) and max(r.repetition for r in plan.runs) == 4
    q = load_spec("cuda_qdepth").plan("paper").sweeps["grid"]
    assert sorted({p["qdepth"] for p in q}) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert sorted({p["nqueues"] for p in q}) == [1, 2, 4, 8, 16]


def test_plan_union_of_sweeps_and_exclusions(spec):
    plan = spec.plan("quick")
    # qdepth sweep {1,4} x ndevs 1, ndevs sweep {1,2} at qd 4: the shared point (qd4, 1 dev) runs once
    assert len(plan.runs) == 3 * 2
    shared = [r for r in plan.runs if r.params["qdepth"] == 4 and r.params["ndevs"] == 1]
    assert shared[0].sweeps == ("qdepth", "ndevs")
    std = spec.plan("standard")
    assert not any(r.params["smt"] == 0 and r.params["thr_sib"] == 1 for r in std.runs)
    assert spec.plan("quick", target="fake://other").runs[0].params["target"] == "fake://other"


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d.pop("engine"), "missing key 'engine'"),
        (lambda d: d.update(engine="gpu9"), "engine must be one of"),
        (lambda d: d["fixed"].update(qdeep=3), "unknown key(s) qdeep"),
        (lambda d: d["presets"].pop("paper"), "presets paper missing"),
        (lambda d: d["presets"]["quick"]["sweeps"][0].update(qdepth=[]), "'qdepth' has no values"),
        (lambda d: d["presets"]["quick"]["sweeps"][0].update(stack=[1, 2]), "unknown variable 'stack'"),
        (lambda d: d.update(study="../../escape"), "study name '../../escape'"),
        (lambda d: d.update(study="/tmp/abs"), "study name '/tmp/abs'"),
        (lambda d: d.update(study="a/b"), "study name 'a/b'"),
        (lambda d: d.update(fixed="string"), "[fixed]: must be a table"),
        (lambda d: d["presets"].update(quick="string"), "presets.quick: must be a table"),
        (lambda d: d["presets"]["quick"].update(sweeps="qdepth"), "sweeps: must be a list of tables"),
        (lambda d: d["presets"]["quick"].update(repetitions="2"), "repetitions must be an integer"),
        (lambda d: d.update(engine=3), "engine must be a string"),
    ],
)
def test_bad_specs_are_named(mutate, needle):
    import tomllib

    data = tomllib.loads(SPEC)
    mutate(data)
    with pytest.raises(SpecError, match=re.escape(needle)):
        parse_spec(data, Path("x.toml"))


def test_a_huge_plan_is_refused_before_it_is_built():
    """10^8 runs (four sweep variables of 100 values) would exhaust memory: the count is computed
    and refused, naming it, without building one run."""
    import time
    import tomllib

    data = tomllib.loads(SPEC)
    data["presets"]["quick"]["sweeps"] = [
        {"name": "grid", **{k: list(range(1, 101)) for k in ("qdepth", "iosize", "ncpus", "nqueues")}}
    ]
    data["presets"]["quick"]["repetitions"] = 1
    spec = parse_spec(data, Path("x.toml"))
    t0 = time.process_time()
    with pytest.raises(SpecError, match=r"expands to 100,000,000 runs .*sweep 'grid'.* more than the 200,000"):
        spec.plan("quick")
    assert time.process_time() - t0 < 5.0  # refused up front (building the runs takes minutes)


def test_results_path_refuses_names_that_leave_the_root(tmp_path):
    from nvmelab.studies.paths import results_path

    for bad in ("../x", "/abs", "a/b", "..", ""):
        with pytest.raises(ValueError, match="cannot name a folder of the results tree"):
            results_path(tmp_path, bad, "host", "quick")
    assert results_path(tmp_path, "s", "h.example", "quick") == tmp_path / "s" / "h.example" / "quick.jsonl"


def test_unknown_study_and_preset(spec):
    with pytest.raises(SpecError, match="unknown study 'nope'"):
        load_spec("nope")
    with pytest.raises(SpecError, match="no preset 'huge'"):
        spec.plan("huge")


def test_sweep_writes_valid_records_and_resumes(spec, tmp_path):
    root = tmp_path / "results"
    calls = []

    def run_fn(**kw):
        calls.append(kw)
        return fake_run(**kw)

    rep = run_study(spec, "quick", run_fn=run_fn, results_root=root, progress=False, max_runs=4)
    assert rep.ran == 4 and rep.planned == 6 and rep.already_done == 0
    path = next(iter(rep.paths))
    assert path.parent.parent == root / "t_study" and path.name == "quick.jsonl"
    recs = records.load_records(path, check=True)
    assert len(recs) == 4 and all(r["study"] == "t_study" for r in recs)
    assert {r["repetition"] for r in recs} == {0, 1}
    rep2 = run_study(spec, "quick", run_fn=run_fn, results_root=root, progress=False)
    assert rep2.already_done == 4 and rep2.ran == 2 and len(calls) == 6
    rep3 = run_study(spec, "quick", run_fn=run_fn, results_root=root, progress=False)
    assert rep3.ran == 0 and len(calls) == 6
    df = load_results("t_study", "quick", root=root)
    assert len(df) == 6 and set(df["qdepth"]) == {1, 4}
    assert len(spec.plan("quick").sweep_frame(df, "ndevs")) == 4


def test_interrupt_keeps_finished_records_and_restores_host(spec, tmp_path, fake_sys):
    root = tmp_path / "results"
    n = {"calls": 0}

    def run_fn(**kw):
        n["calls"] += 1
        if n["calls"] == 3:
            raise KeyboardInterrupt
        return fake_run(**kw)

    host = HostControl(root=fake_sys)
    ex = LocalExecutor(host=host)
    # standard preset changes the governor to powersave for half of its runs
    with pytest.raises(KeyboardInterrupt):
        run_study(spec, "standard", run_fn=run_fn, results_root=root, progress=False, executor=ex)
    recs = records.load_records(next((root / "t_study").glob("*/standard.jsonl")))
    assert len(recs) == 2
    assert (fake_sys / "cpu0" / "cpufreq" / "scaling_governor").read_text().strip() == "performance"
    assert not list((root / "t_study").rglob(".tmp-*"))


def test_host_values_that_cannot_be_set_are_skipped_not_mislabelled(spec, tmp_path, fake_sys):
    root = tmp_path / "results"
    seen = []

    def run_fn(**kw):
        rec = fake_run(**kw)
        gov = (fake_sys / "cpu0" / "cpufreq" / "scaling_governor").read_text().strip()
        seen.append(gov)
        rec["governor"] = gov  # what the engine would record as found
        return rec

    host = HostControl(root=fake_sys)
    rep = run_study(
        spec, "standard", run_fn=run_fn, results_root=root, progress=False, executor=LocalExecutor(host=host)
    )
    # smt=1 cannot be set on this host (SMT control notsupported): those runs are skipped, with the reason
    assert rep.ran == 2 * 5 and len(rep.skipped) == 2 * 2 * 5
    assert all("could not set smt=1" in why for _, why in rep.skipped)
    assert "could not set smt=1" in rep.could_not_set()
    assert set(seen) == {"performance", "powersave"}
    recs = records.load_records(next(iter(rep.paths)))
    assert all(r["smt"] is None or r["smt"] == 0 for r in recs)
    assert not any("host_flags" in r for r in recs)
    # restored afterwards
    assert (fake_sys / "cpu1" / "cpufreq" / "scaling_governor").read_text().strip() == "performance"


def test_no_host_changes_skips_runs_needing_another_governor(spec, tmp_path, fake_sys):
    host = HostControl(root=fake_sys, allow_changes=False)
    rep = run_study(
        spec, "standard", run_fn=fake_run, results_root=tmp_path, progress=False, executor=LocalExecutor(host=host)
    )
    assert any("governor=powersave" in why and "turned off" in why for _, why in rep.skipped)
    assert all(r["sweeps"] == ["host"] for r in rep.records)


def test_stress_without_unused_cpus_is_skipped(spec, tmp_path, fake_sys):
    (fake_sys / "online").write_text("0\n")
    host = HostControl(root=fake_sys)
    rep = run_study(
        spec, "paper", run_fn=fake_run, results_root=tmp_path, progress=False, executor=LocalExecutor(host=host)
    )
    assert rep.ran == 5 and len(rep.skipped) == 5
    assert all("no unused CPUs" in why for _, why in rep.skipped)


def test_stress_runs_stress_ng_on_the_other_cpu(spec, tmp_path, fake_sys):
    import shutil

    if not shutil.which("stress-ng"):
        pytest.skip("stress-ng not installed")
    host = HostControl(root=fake_sys)
    rep = run_study(
        spec,
        "paper",
        run_fn=lambda **kw: fake_run(sleep=0.05, **kw),
        results_root=tmp_path,
        progress=False,
        executor=LocalExecutor(host=host),
    )
    assert rep.ran == 10
    assert {r["stress"] for r in rep.records} == {0, 1}
    assert any("stress-ng on CPUs [1]" in n for n in rep.notes)
    assert host._stress is None


def test_engine_refusal_is_skipped_with_reason(spec, tmp_path):
    def run_fn(**kw):
        if kw["qdepth"] == 1:
            raise ValueError("qdepth=1: not on this target")
        return fake_run(**kw)

    rep = run_study(spec, "quick", run_fn=run_fn, results_root=tmp_path, progress=False)
    assert rep.ran == 4 and len(rep.skipped) == 2
    assert "qdepth=1: not on this target" in rep.skipped[0][1]


def test_invalid_engine_record_is_an_error(spec, tmp_path):
    def bad(**kw):
        rec = fake_run(**kw)
        rec["iops"] = -1.0
        return rec

    with pytest.raises(records.RecordError, match="iops"):
        run_study(spec, "quick", run_fn=bad, results_root=tmp_path, progress=False)
    assert not list(tmp_path.rglob("*.jsonl"))


def test_dask_executor_two_workers(spec, tmp_path):
    distributed = pytest.importorskip("distributed")
    from nvmelab.studies.distributed import DaskExecutor

    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        # name workers as hosts would be named
        ex = DaskExecutor(client, host_from="worker-name")
        rep = run_study(
            spec,
            "quick",
            run_fn=lambda **kw: fake_run(sleep=0.02, **kw),
            results_root=tmp_path,
            progress=False,
            executor=ex,
        )
        assert rep.ran == 6
        hosts = sorted(p.parent.name for p in (tmp_path / "t_study").glob("*/quick.jsonl"))
        assert len(hosts) == 2  # both workers did runs, each filed under its own host folder
        assert sorted(records.load_records(tmp_path / "t_study", check=True), key=lambda r: r["run_key"]) == sorted(
            rep.records, key=lambda r: r["run_key"]
        )
        rep2 = run_study(spec, "quick", run_fn=fake_run, results_root=tmp_path, progress=False, executor=ex)
        assert rep2.ran == 0 and rep2.already_done == 6


def test_cli_study_list_and_errors(capsys):
    from nvmelab.cli import main

    assert main(["study", "list"]) == 0
    out = capsys.readouterr().out
    assert "cpu_initiated" in out and "paper:" in out
    assert main(["study", "run", "nope"]) == 2
    assert "unknown study 'nope'" in capsys.readouterr().err
    assert main(["study", "plan", "cpu_initiated", "--preset", "quick"]) == 0
    assert "6 runs" in capsys.readouterr().out


def test_study_results_reuses_recorded_runs(spec, tmp_path, monkeypatch):
    from nvmelab.studies import runner, study_results

    monkeypatch.setattr(runner, "load_spec", lambda name: spec)
    monkeypatch.setenv("NVMELAB_HOST_ID", "hostA")
    df, rep = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep is not None and rep.ran == 6 and len(df) == 6 and set(df["results_host"]) == {"hostA"}
    monkeypatch.setenv("NVMELAB_HOST_ID", "hostB")  # another host reuses hostA's records, runs nothing
    df2, rep2 = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep2 is None and len(df2) == 6
    df3, rep3 = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False, reuse=False)
    assert rep3.ran == 6 and set(df3["results_host"]) == {"hostB"}


def test_emulated_targets_get_their_device_count():
    from nvmelab.studies.spec import emu_target_for

    assert emu_target_for("emu://?profile=pm1753", 4) == "emu://?profile=pm1753&ndev=4"
    assert emu_target_for("emu://", 2) == "emu://?ndev=2"
    assert emu_target_for("emu://?ndev=16&profile=null", 4) == "emu://?ndev=16&profile=null"
    assert emu_target_for("pci://0000:4a:00.0", 4) == "pci://0000:4a:00.0"
    plan = load_spec("cpu_initiated").plan("quick")
    assert {r.params["target"] for r in plan.runs} == {"emu://?profile=pm1753&ndev=4", "emu://?profile=pm1753&ndev=1"}


def test_study_results_does_not_reuse_another_target(spec, tmp_path, monkeypatch):
    from nvmelab.studies import runner, study_results

    monkeypatch.setattr(runner, "load_spec", lambda name: spec)
    df, rep = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep.ran == 6
    df2, rep2 = study_results(
        "t_study", "quick", target="fake://elsewhere", run_fn=fake_run, results_root=tmp_path, progress=False
    )
    assert rep2 is not None and rep2.ran == 6 and set(df2["target"]) == {"fake://elsewhere"}


def test_host_readers_are_the_engines_and_take_another_sysfs_root(fake_sys):
    from nvmelab.host import cpus
    from nvmelab.host.hostvars import read_all, used_cpus

    assert read_all(fake_sys) == cpus.host_state(fake_sys) == {"governor": "performance", "turbo": 1, "smt": 0}
    (fake_sys / "intel_pstate" / "no_turbo").write_text("1\n")
    assert cpus.turbo(fake_sys) == 0
    assert used_cpus(1, 0, fake_sys) == [0] and used_cpus(2, 1, fake_sys) == [0, 1]
    with pytest.raises(ValueError, match="physical cores"):
        used_cpus(3, 0, fake_sys)


def test_run_modes_never_missing_auto(spec, tmp_path, monkeypatch):
    """NVMELAB_RUN: never shows recorded runs and measures nothing (an empty frame when there are
    none); missing runs what this host lacks; an unknown mode or preset is one clear error."""
    from nvmelab.studies import runner, study_results

    monkeypatch.setattr(runner, "load_spec", lambda name: spec)
    monkeypatch.setenv("NVMELAB_HOST_ID", "hostA")
    monkeypatch.setenv("NVMELAB_RUN", "never")
    df, rep = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep is None and df.empty and not list(tmp_path.rglob("*.jsonl"))
    df, rep = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False, mode="missing")
    assert rep.ran == 6 and len(df) == 6
    assert set(df["results_path"]) == {str(tmp_path / "t_study" / "hostA" / "quick.jsonl")}
    monkeypatch.setenv("NVMELAB_HOST_ID", "hostB")
    df, rep = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep is None and set(df["results_host"]) == {"hostA"}  # never: hostA's records, nothing measured
    monkeypatch.setenv("NVMELAB_RUN", "missing")
    df, rep = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep.ran == 6 and set(df["results_host"]) == {"hostB"}
    df, rep = study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep.ran == 0 and rep.already_done == 6 and len(df) == 6  # missing resumes: nothing left to run
    monkeypatch.setenv("NVMELAB_RUN", "sometimes")
    with pytest.raises(ValueError, match="NVMELAB_RUN"):
        study_results("t_study", "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    monkeypatch.delenv("NVMELAB_RUN")
    monkeypatch.setenv("NVMELAB_PRESET", "huge")
    with pytest.raises(ValueError, match="NVMELAB_PRESET"):
        study_results("t_study", run_fn=fake_run, results_root=tmp_path, progress=False)


def test_plan_missing_lists_unrecorded_configurations(spec):
    import pandas as pd

    plan = spec.plan("quick")
    none = plan.missing(pd.DataFrame())
    assert len(none) == 3 and set(none["repetitions"]) == {2}
    half = plan.missing(pd.DataFrame({"run_key": [plan.runs[0].key]}))
    assert len(half) == 3 and sorted(half["repetitions"]) == [1, 2, 2]
    assert plan.missing(pd.DataFrame({"run_key": [r.key for r in plan.runs]})).empty


def test_book_study_list_comes_from_the_specs():
    from nvmelab.studies.spec import book_studies

    studies = book_studies()
    own = [n for n in list_specs() if load_spec(n).chapter in ("", n)]
    assert [s for s, _, _ in studies][:1] == ["cpu_initiated"]
    assert sorted(s for s, _, _ in studies) == sorted(own)
    assert "cpu_submit" not in own and load_spec("cpu_submit").chapter == "cpu_initiated"
    labels = [lb for _, lb, _ in studies]
    assert len(set(labels)) == len(labels) and all(lb.startswith("sec-experiments-") for lb in labels)
    assert {"sec-experiments-blksum-qdepth", "sec-experiments-vram-cache"} <= set(labels)
    for name in list_specs():  # every spec runs through one runner: its engine resolves
        s = load_spec(name)
        assert (s.label and s.order > 0) or s.chapter in list_specs()
        assert all(set(r.engine_params) <= set(runner_engines()[s.engine].params) for r in s.plan("quick").runs)


def runner_engines():
    from nvmelab.studies.spec import ENGINES

    return ENGINES


def test_each_engine_resolves_or_says_why():
    from nvmelab.studies.runner import resolve_engine

    for name in ("cpu", "blksum", "tier"):
        assert callable(resolve_engine(name))


# ---------------------------------------------------------- quiet host, re-measurement ---
def test_host_usage_from_proc_stat(tmp_path):
    from nvmelab.host import cpus

    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal: busy 300, idle 700
    stat.write_text("cpu  200 0 100 600 100 0 0 0 0 0\ncpu0 1 2 3 4\n")
    a = cpus.host_cpu_times(stat)
    stat.write_text("cpu  350 0 150 650 150 0 0 0 0 0\n")  # +200 busy, +100 idle
    b = cpus.host_cpu_times(stat)
    assert (a.busy, a.total, b.busy, b.total) == (300, 1000, 500, 1300)
    assert cpus.host_usage(a, b, ncpus=2) == pytest.approx(133.3)  # 2/3 of two CPUs
    assert cpus.host_usage(b, a, ncpus=2) is None and cpus.host_usage(None, b) is None
    stat.write_text("intr 1 2 3\n")
    assert cpus.host_cpu_times(stat) is None and cpus.host_cpu_times(tmp_path / "none") is None


def test_records_carry_the_hosts_cpu_use(spec, tmp_path):
    rep = run_study(
        spec, "quick", run_fn=lambda **kw: fake_run(sleep=0.2, **kw), results_root=tmp_path, progress=False, max_runs=1
    )
    rec = rep.records[0]
    assert "host_cpu_usage" in rec
    if Path("/proc/stat").exists():
        assert isinstance(rec["host_cpu_usage"], float) and rec["host_cpu_usage"] >= 0


def test_ensure_quiet_refuses_a_busy_host(monkeypatch):
    from nvmelab.host import cpus
    from nvmelab.studies import HostBusyError, ensure_quiet

    monkeypatch.setattr(cpus, "host_busy", lambda seconds: 150.0)
    with pytest.raises(HostBusyError, match=r"other processes used 150 % of a CPU .*--busy-ok"):
        ensure_quiet(limit=10)
    monkeypatch.setattr(cpus, "host_busy", lambda seconds: 3.0)
    assert ensure_quiet(limit=10) == 3.0
    monkeypatch.setattr(cpus, "host_busy", lambda seconds: None)  # no /proc/stat: nothing to check
    assert ensure_quiet(limit=10) is None


def test_set_aside_measures_the_plan_again_and_keeps_the_old_records(spec, tmp_path):
    from nvmelab.studies import set_aside

    assert set_aside(tmp_path, "t_study", "quick") is None
    rep = run_study(spec, "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    path = next(iter(rep.paths))
    old = path.read_text()
    moved = set_aside(tmp_path, "t_study", "quick")
    assert moved is not None and moved.name.startswith("quick.jsonl.replaced-") and moved.read_text() == old
    assert not path.exists() and load_results("t_study", "quick", root=tmp_path).empty
    rep2 = run_study(spec, "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep2.already_done == 0 and rep2.ran == 6 and len(load_results("t_study", "quick", root=tmp_path)) == 6


def test_cli_study_all(capsys, monkeypatch):
    from nvmelab.cli import main
    from nvmelab.host import cpus

    assert main(["study", "plan", "all", "--preset", "standard"]) == 0
    out = capsys.readouterr().out
    for name in list_specs():
        assert f"{name}: " in out
    monkeypatch.setattr(cpus, "host_busy", lambda seconds: 180.0)
    assert main(["study", "run", "all", "--preset", "standard", "--results", "/nonexistent"]) == 2
    captured = capsys.readouterr()
    assert "host busy" in captured.err and "--busy-ok" in captured.err


def test_where_resolves_a_sweeps_records_place_once(tmp_path, monkeypatch):
    from nvmelab.studies.paths import Where, host_id

    monkeypatch.setenv("NVMELAB_RESULTS", str(tmp_path / "env-root"))
    w = Where.of("t_where", "quick")
    assert w.root == tmp_path / "env-root" and w.here() == w.path(host_id())
    assert Where.of("t_where", "quick", tmp_path).path("h1") == tmp_path / "t_where" / "h1" / "quick.jsonl"
    for h in ("h2", "h1"):
        p = Where.of("t_where", "quick", tmp_path).path(h)
        p.parent.mkdir(parents=True)
        p.write_text("")
    (tmp_path / "t_where" / "h1" / "standard.jsonl").write_text("")
    assert Where.of("t_where", "quick", tmp_path).all_hosts() == [
        tmp_path / "t_where" / h / "quick.jsonl" for h in ("h1", "h2")
    ]
