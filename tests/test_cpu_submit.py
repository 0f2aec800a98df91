# SPDX-License-Identifier: BSD-3-Clause
"""The CPU-side study (studies/cpu_submit/spec.toml): its spec, what a host lets it vary (hostvars), the
records leg that installs stress-ng, and the analysis and plot functions its chapter uses."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from nvmelab.host.hostvars import CONTROL_VARS, HostControl, controllability
from nvmelab.results import reference
from nvmelab.studies import load_spec
from nvmelab.studies.cpu_submit import analysis as cpu_submit
from nvmelab.studies.cpu_submit import figures as cpu_submit_figures

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake_sys(tmp_path):
    """A fake /sys/devices/system/cpu: 2 cores with 2 threads each, cpufreq, SMT control on."""
    root = tmp_path / "sys"
    for c in range(4):
        d = root / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text("performance\n")
        (d / "scaling_available_governors").write_text("performance powersave userspace\n")
        (d / "scaling_setspeed").write_text("<unsupported>\n")
        (d / "scaling_cur_freq").write_text("2600000\n")
        t = root / f"cpu{c}" / "topology"
        t.mkdir()
        (t / "core_id").write_text(f"{c % 2}\n")
        (t / "physical_package_id").write_text("0\n")
    (root / "online").write_text("0-3\n")
    (root / "smt").mkdir()
    (root / "smt" / "control").write_text("on\n")
    (root / "cpufreq").mkdir()
    (root / "cpufreq" / "boost").write_text("1\n")
    return root


def test_controllability_of_a_host_that_exposes_everything(fake_sys, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 0)
    c = controllability(fake_sys, stress_cmd="/usr/bin/stress-ng")
    assert list(c) == list(CONTROL_VARS)
    assert all(v["settable"] and v["why"] == "" for v in c.values()), c
    assert c["governor"]["found"] == "performance"
    assert c["governor"]["available"] == ["performance", "powersave", "userspace"] and c["fixed_freq"]["found"] == 0
    assert c["turbo"]["found"] == 1 and c["thr_sib"]["found"] == 2


def test_controllability_says_why_not(fake_sys, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    for c in range(4):
        for f in ("scaling_governor", "scaling_available_governors", "scaling_cur_freq"):
            (fake_sys / f"cpu{c}" / "cpufreq" / f).unlink()
        (fake_sys / f"cpu{c}" / "topology" / "core_id").write_text(f"{c}\n")
    (fake_sys / "smt" / "control").write_text("notsupported\n")
    c = HostControl(root=fake_sys, stress_cmd=None).controllability()
    assert "no cpufreq" in c["governor"]["why"] and c["governor"]["found"] is None
    assert c["turbo"]["why"] == "needs root"
    assert c["smt"]["why"] == "SMT control is notsupported on this host"
    assert "no siblings" in c["thr_sib"]["why"] and c["thr_sib"]["found"] == 1
    assert c["stress"]["why"] == "stress-ng is not installed"
    assert "no scaling_cur_freq" in c["freq_samples"]["why"]
    assert not any(v["settable"] for v in c.values())
    off = controllability(fake_sys, allow_changes=False, stress_cmd="/bin/true")
    assert "turned off" in off["turbo"]["why"] and off["stress"]["settable"]


def test_spec_sweeps_both_cpu_bound_paths_and_standard_fits_the_budget():
    spec = load_spec("cpu_submit")
    for preset in ("quick", "standard", "paper"):
        plan = spec.plan(preset)
        targets = {r.params["target"].split("?")[0].split("://")[0] for r in plan.runs}
        assert targets == {"emu", "file"}, (preset, targets)
        assert all("profile=null" in r.params["target"] for r in plan.runs if r.params["target"].startswith("emu"))
        assert {r.params.get("backend") for r in plan.runs if r.params["target"].startswith("file")} == {"io_uring"}
    plan = spec.plan("standard")
    assert {"stress", "qdepth", "iosize", "ncpus", "governor", "turbo", "smt"} <= set(plan.sweeps)
    host_runs = [r for r in plan.runs if set(r.params) & {"governor", "turbo", "smt"}]
    seconds = sum(r.params["runtime"] + r.params["warmup"] + 0.2 for r in plan.runs)
    assert seconds <= 6 * 60, f"standard preset would take about {seconds:.0f} s"  # even if every run can be set
    assert host_runs and all(r.params["target"].startswith("emu") for r in host_runs)


def test_records_leg_installs_stress_ng_and_book_and_test_do_not_need_it():
    make = (ROOT / "Makefile").read_text()
    line = next(ln for ln in make.splitlines() if ln.startswith("records:"))
    assert line.split(":", 1)[1].split()[0] == "check-records"
    check = make.split("check-records:", 1)[1].splitlines()[1]
    assert "--install records" in check
    for target in ("book:", "test:", "test-py:", "test-notebooks:", "test-book:", "build:", "env:"):
        line = next(ln for ln in make.splitlines() if ln.startswith(target))
        assert "records" not in line, line
    prereqs = (ROOT / "env" / "prereqs.sh").read_text()
    assert "check_records() {\n    have stress-ng || need" in prereqs


def _records_frame():
    rows = []
    for backend, base in (("nvmelab-emu", 100.0), ("io_uring", 10.0)):
        for rep in (0, 1):
            rows.append(
                dict(
                    backend=backend,
                    qdepth=128,
                    ncpus=1,
                    thr_sib=0,
                    stress=0,
                    iops=base + rep,
                    cpu_usage=100.0,
                    run_key=f"{backend}-c#{rep}",
                )
            )
            rows.append(
                dict(
                    backend=backend,
                    qdepth=128,
                    ncpus=1,
                    thr_sib=0,
                    stress=1,
                    iops=base / 2 + rep,
                    cpu_usage=100.0,
                    run_key=f"{backend}-s#{rep}",
                )
            )
            rows.append(
                dict(
                    backend=backend,
                    qdepth=8,
                    ncpus=1,
                    thr_sib=0,
                    stress=0,
                    iops=base * 0.8,
                    cpu_usage=90.0,
                    run_key=f"{backend}-q8#{rep}",
                )
            )
            rows.append(
                dict(
                    backend=backend,
                    qdepth=128,
                    ncpus=2,
                    thr_sib=0,
                    stress=0,
                    iops=base * 1.5,
                    cpu_usage=200.0,
                    run_key=f"{backend}-n2#{rep}",
                )
            )
    return pd.DataFrame(rows)


def test_sweep_change_table_per_core_and_against_the_baseline():
    df = _records_frame()
    q = cpu_submit.sweep_change_table(df[(df.stress == 0) & (df.ncpus == 1)], "qdepth", 128)
    emu = q[q.backend == "nvmelab-emu"].set_index("qdepth")
    assert emu.loc[128, "iops_mean"] == 100.5 and emu.loc[128, "change"] == 0
    assert math.isclose(emu.loc[8, "change"], 80 / 100.5 - 1)
    n = cpu_submit.sweep_change_table(df[(df.stress == 0) & (df.qdepth == 128)], "ncpus", 1)
    two = n[(n.backend == "io_uring") & (n.ncpus == 2)].iloc[0]
    assert two.iops_per_core_mean == 7.5 and math.isclose(two.change, 15 / 10.5 - 1)
    assert two.cpu_usage_mean == 200.0
    # no baseline row in a group: the change is missing, never invented
    none = cpu_submit.sweep_change_table(df[df.qdepth == 8], "qdepth", 128)
    assert none["change"].isna().all()


def test_one_factor_change_and_comparison_with_seed_004():
    df = _records_frame()
    got = cpu_submit.one_factor_change(df[df.qdepth == 128], "stress", 1, 0, fixed={"thr_sib": 0, "ncpus": 1})
    assert dict(zip(got.backend, got.change.round(6))) == {
        "io_uring": round(5.5 / 10.5 - 1, 6),
        "nvmelab-emu": round(50.5 / 100.5 - 1, 6),
    }
    control = pd.DataFrame(
        [
            {"host": "h", "variable": "governor", "found": None, "settable": False, "why": "no cpufreq in sysfs"},
            {"host": "h", "variable": "thr_sib", "found": 1, "settable": False, "why": "no siblings to use"},
            {"host": "h", "variable": "fixed_freq", "found": None, "settable": False, "why": "no userspace governor"},
        ]
    )
    sweeps = {"stress": df[(df.qdepth == 128) & (df.ncpus == 1)], "governor": df.iloc[0:0]}
    t = cpu_submit.host_variable_comparison(
        sweeps, reference.seed004_parameterisations(), reference.seed004_host_variables(), control
    ).set_index("change")
    ad = reference.seed004_parameterisations().set_index("id")["iops"]
    d_vs_c = t.loc["stress on, siblings not used (D vs C)"]
    assert math.isclose(d_vs_c.published, ad["D"] / ad["C"] - 1)
    assert math.isclose(d_vs_c["nvmelab-emu"], 50.5 / 100.5 - 1) and d_vs_c.note == ""
    gov = t.loc["powersave governor (C)"]
    hv = reference.seed004_host_variables().set_index(["condition", "id"])["iops"]
    assert math.isclose(gov.published, hv[("powersave", "C")] / ad["C"] - 1)
    assert math.isnan(gov["io_uring"]) and gov.note == "no cpufreq in sysfs"
    assert t.loc["stress on, siblings used (B vs A)"].note == "no siblings to use"
    # the fixed clock is a host variable like the others: the host's reason, not a gap of the sweep
    assert t.loc["SMT off, userspace governor at a fixed clock (C)"].note == "no userspace governor"
    no_why = cpu_submit.host_variable_comparison(
        sweeps, reference.seed004_parameterisations(), reference.seed004_host_variables(), control.iloc[:2]
    ).set_index("change")
    assert (
        no_why.loc["SMT off, userspace governor at a fixed clock (C)"].note == "no runs of this change in the records"
    )


def test_cpu_samples_host_control_and_sweep_rows():
    df = pd.DataFrame({"run_key": ["a#0", "b#0"], "iops": [1.0, 2.0]})
    recs = [
        {
            "run_key": "a#0",
            "cpu_freqs": [[2.0e6, 0.0], [3.0e6, 1.0]],
            "cpus": [0, 1],
            "host_control": {"smt": {"found": 0, "settable": False, "why": "SMT control is notsupported"}},
            "provenance": {"host": "h"},
        },
        {"run_key": "b#0", "cpu_freqs": None, "cpus": [0]},
    ]
    s = cpu_submit.with_cpu_samples(df, recs).set_index("run_key")
    assert s.loc["a#0", "freq_khz"] == 2.5e6 and s.loc["a#0", "logical_cpus"] == 2
    assert math.isnan(s.loc["b#0", "freq_khz"])
    ctl = cpu_submit.host_control_table(recs)
    assert ctl.to_dict("records") == [
        {"host": "h", "variable": "smt", "found": 0, "settable": False, "why": "SMT control is notsupported"}
    ]
    plan = load_spec("cpu_submit").plan("quick")
    key = next(r.key for r in plan.runs if "qdepth" in r.sweeps and r.params["qdepth"] == 8)
    rows = pd.DataFrame({"run_key": [key, "other#0"], "iops": [1.0, 2.0]})
    assert list(cpu_submit.sweep_rows(rows, plan, "qdepth")["run_key"]) == [key]
    assert cpu_submit.sweep_rows(rows, plan, "stress").empty
    with pytest.raises(KeyError):
        cpu_submit.sweep_rows(rows, plan, "nope")


def test_cpu_side_sweeps_plot():
    df = _records_frame()
    q = cpu_submit.sweep_change_table(df[(df.stress == 0) & (df.ncpus == 1)], "qdepth", 128)
    chart = cpu_submit_figures.cpu_side_sweeps([("qdepth", q), ("ncpus", q.iloc[0:0])])
    spec = chart.to_dict()
    assert len(spec["vconcat"]) == 1  # an empty table draws no panel
    assert "IOPS per physical core" in str(spec)


def test_polling_share():
    df = pd.DataFrame({"cpu_usage": [200.0, 90.0, None], "ncpus": [2, 1, 1]})
    share = cpu_submit.polling_share(df)
    assert share.iloc[0] == 1.0 and share.iloc[1] == 0.9 and math.isnan(share.iloc[2])
    assert 0 < cpu_submit.BUSY_POLL_MIN_SHARE <= 1


def _sweep(x: str, rows: dict) -> pd.DataFrame:
    return pd.DataFrame([{x: k, "iops_mean": v[0], "mibs_mean": v[1]} for k, v in rows.items()])


PROFILE = {"LAT_NS": 10_000.0, "QUEUE_IOPS": 4e6, "DEV_IOPS": 4e6, "DEV_BW": 16e9, "P2P_LINK_BW": 45e9}
SEED = {"peak_qdepth": 128.0, "bandwidth_512": 30.0, "bandwidth_4096": 215.0}


def _verdicts(agg: dict, **kw) -> pd.DataFrame:
    args = dict(roof=1e6, scale=64.0, ndevs=16, ncpus=2, profile=PROFILE, seed=SEED, pub_threads=2, pub_roof=64e6)
    return cpu_submit.emulated_sweep_verdicts(agg, **{**args, **kw}).set_index("sweep")


def test_emulated_sweeps_get_their_status_from_the_records_and_the_profile():
    cap, bw = 4e6 * 16 / 64, 16e9 * 16 / 64 / 2**20
    agg = {
        "qdepth": _sweep("qdepth", {8: (3e5, 0), 16: (6e5, 0), 32: (9.6e5, 0), 128: (9.6e5, 0)}),
        "ncpus": _sweep("ncpus", {1: (9.55e5, 0), 2: (9.6e5, 0)}),
        "iosize": _sweep("iosize", {512: (cap, cap * 512 / 2**20), 4096: (bw * 2**20 / 4096, bw)}),
        "ndevs": _sweep("ndevs", {n: (n * 4e6 / 64, 0) for n in (1, 2, 4, 8, 16)}),
    }
    v = _verdicts(agg)
    assert v.loc["qdepth", "ours"] == 32 and v.loc["qdepth", "published"] == 128
    assert v.loc["qdepth", "status"] == cpu_submit.DISAGREES
    # Little's law on the profile's turnaround (scaled): the depth each of the 2 queues per device needs
    assert math.isclose(v.loc["qdepth", "input"], 1e6 / 32 * 10e-6 * 64)
    assert v.loc["ncpus", "ours"] == 1 and v.loc["ncpus", "status"] == cpu_submit.DISAGREES
    assert "set by the scale" in v.loc["ncpus", "why"]
    assert v.loc["iosize", "status"] == cpu_submit.RESTATES
    assert math.isclose(v.loc["iosize", "ours"], v.loc["iosize", "input"])
    assert math.isclose(v.loc["iosize", "published"], 215 / 30)
    assert v.loc["ndevs", "status"] == cpu_submit.RESTATES and v.loc["ndevs", "ours"] < 1e-12
    # the same words from other data: a sweep that lands where the published one does, and one that bends
    agg["qdepth"] = _sweep("qdepth", {64: (5e5, 0), 128: (9.6e5, 0)})
    agg["ncpus"] = _sweep("ncpus", {1: (5e5, 0), 2: (9.6e5, 0)})
    agg["iosize"].loc[1, "mibs_mean"] *= 0.9
    agg["ndevs"].loc[4, "iops_mean"] *= 0.8
    v = _verdicts(agg)
    assert (v["status"] == cpu_submit.EMULATED).all(), v
    assert _verdicts({}).empty


def test_effect_beside_its_control_and_spread():
    rows = []
    for thr_sib, stress, base, noise in ((0, 0, 100.0, 1.0), (0, 1, 96.0, 1.0), (1, 0, 95.0, 1.0)):
        rows += [{"backend": "b", "thr_sib": thr_sib, "stress": stress, "iops": base + d} for d in (-noise, 0.0, noise)]
    df = pd.DataFrame(rows)
    ctl = ("thr_sib", 1, 0, {"stress": 0})
    e = cpu_submit.effect_beside_control(df, "stress", 1, 0, fixed={"thr_sib": 0}, control=ctl).iloc[0]
    assert math.isclose(e.change, -0.04) and math.isclose(e.control, -0.05)
    assert math.isclose(e.spread, math.sqrt(2 / 3) / 95)
    assert not e.resolved  # smaller than the identical-CPU control's change
    df.loc[(df.stress == 1), "iops"] -= 20  # now -24 %: beyond the control and the spread
    e = cpu_submit.effect_beside_control(df, "stress", 1, 0, fixed={"thr_sib": 0}, control=ctl).iloc[0]
    assert e.resolved
    no_ctl = cpu_submit.effect_beside_control(df[df.thr_sib == 0], "stress", 1, 0).iloc[0]
    assert math.isnan(no_ctl.control) and no_ctl.resolved
    assert cpu_submit.effect_beside_control(df, "turbo", 0, 1).empty


def test_published_numbers_for_the_answer_table():
    threads, roof = cpu_submit.published_threads_to_roofline("upcie")
    assert threads == 2 and math.isclose(roof, reference.headline_value("cpu-initiated", "device_iops_cap") * 16)
    gbps = cpu_submit.published_p2p_payload_gbps(4096)
    pub = reference.published("pcie-bandwidth-saturation")
    assert math.isclose(gbps, pub[pub.iosize == 4096]["gbps"].mean())
    assert set(cpu_submit.profile_inputs()) >= {"LAT_NS", "DEV_IOPS", "DEV_BW"}
