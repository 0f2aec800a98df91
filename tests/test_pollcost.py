# SPDX-License-Identifier: BSD-3-Clause
"""What polling costs the GPU (issue 24 part 4): the record's ``corun`` field from the engine's raw times
(engines/gpu_corun.py), NVML's SM activity with a stand-in pynvml and without one (host/nvml.py), the
``corun`` run parameter of the engine table, the CPU stand-in's co-runner end to end, and (GPU) the
co-runner beside the cuda-run engine on gpu-emu://."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pandas as pd
import pytest

from nvmelab.engines import gpu_corun
from nvmelab.host import nvml
from nvmelab.results import records

RAW = {
    "blocks": 528,
    "threads_per_block": 256,
    "launches": 10,
    "iters": 1000,
    "flop_per_launch": 2.0 * 8 * 1000 * 528 * 256,
    "alone_s": 0.02,
    "loaded_s": 0.025,
    "resident": True,
    "overlap": True,
}


def test_corun_field_ratio_and_cost_from_the_raw_times():
    f = gpu_corun.corun_field(RAW, 4)
    flop = RAW["flop_per_launch"] * RAW["launches"]
    assert f["ran"] and f["valid"] and f["why_invalid"] is None and f["kind"] == "gpu-fma"
    assert f["flop"] == flop and f["threads"] == 528 * 256
    assert f["alone_flops"] == pytest.approx(flop / 0.02) and f["loaded_flops"] == pytest.approx(flop / 0.025)
    assert f["ratio"] == pytest.approx(0.8) and f["cost"] == pytest.approx(0.2)
    assert gpu_corun.corun_field(None, 0) == {"per_sm": 0, "ran": False} == gpu_corun.off()


@pytest.mark.parametrize(
    "change, why",
    [
        ({"overlap": False}, "ended after the I/O kernel"),
        ({"resident": False}, "before every I/O block"),
        ({"loaded_s": 0.0}, "non-positive time"),
    ],
)
def test_corun_field_marks_a_phase_not_wholly_under_the_io_load(change, why):
    f = gpu_corun.corun_field({**RAW, **change}, 4)
    assert f["valid"] is False and why in f["why_invalid"]
    if "loaded_s" in change:
        assert f["ratio"] is None and f["cost"] is None


def test_corun_field_refuses_a_missing_engine_result():
    with pytest.raises(ValueError, match="corun=4: the engine reported no co-runner"):
        gpu_corun.corun_field(None, 4)


# ------------------------------------------------------------------------------------------ NVML
class _Get:
    def __init__(self):
        self.version = self.numMetrics = 0
        self.sample1 = self.sample2 = None
        self.metrics = [SimpleNamespace(metricId=0, value=0.0) for _ in range(4)]


class FakeNvml:
    """pynvml's names, with SM activity `sm` (GPM) and utilisation `busy`; gpm=False: a pre-Hopper GPU."""

    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_GPM_METRIC_SM_UTIL = 2
    NVML_GPM_METRIC_SM_OCCUPANCY = 3
    c_nvmlGpmMetricsGet_t = _Get

    def __init__(self, *, gpm=True, fail_init=False, sm=37.5, occ=12.5, busy=100, bytes_only=False):
        self.gpm, self.fail_init, self.sm, self.occ, self.busy = gpm, fail_init, sm, occ, busy
        self.bytes_only = bytes_only
        self.freed = self.shutdown = 0
        self.by_pci = None

    def nvmlInit(self):  # noqa: N802 - pynvml's names
        if self.fail_init:
            raise RuntimeError("Driver Not Loaded")

    def nvmlShutdown(self):  # noqa: N802
        self.shutdown += 1

    def nvmlDeviceGetHandleByPciBusId(self, pci):  # noqa: N802
        if self.bytes_only and not isinstance(pci, bytes):
            raise TypeError("bytes or integer address expected instead of str instance")
        self.by_pci = pci
        return "h"

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return "h"

    def nvmlGpmQueryDeviceSupport(self, h):  # noqa: N802
        return SimpleNamespace(isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self):  # noqa: N802
        return SimpleNamespace(t=None)

    def nvmlGpmSampleFree(self, s):  # noqa: N802
        self.freed += 1

    def nvmlGpmSampleGet(self, h, s):  # noqa: N802
        s.t = time.monotonic_ns()

    def nvmlGpmMetricsGet(self, get):  # noqa: N802
        assert get.sample1.t < get.sample2.t and get.numMetrics == 2
        vals = {self.NVML_GPM_METRIC_SM_UTIL: self.sm, self.NVML_GPM_METRIC_SM_OCCUPANCY: self.occ}
        for m in get.metrics[: get.numMetrics]:
            m.value = vals[m.metricId]

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        return SimpleNamespace(gpu=self.busy, memory=0)


def _sample(fake, secs=0.3, interval=0.02, pci="0000:19:00.0"):
    with nvml.SmSampler(pci=pci, interval_s=interval, nvml=fake) as s:
        t0 = time.monotonic_ns()
        time.sleep(secs)
        t1 = time.monotonic_ns()
    return s, t0, t1


def test_sampler_reads_gpm_sm_activity_inside_the_window_only():
    fake = FakeNvml()
    s, t0, t1 = _sample(fake)
    w = s.window(t0, t1)
    assert w["readable"] and w["source"] == "nvml-gpm" and w["samples"] >= 3
    assert w["sm_active_pct"]["p50"] == 37.5 and w["sm_occupancy_pct"]["max"] == 12.5
    assert w["gpu_busy_pct"]["mean"] == 100 and fake.by_pci == "0000:19:00.0"
    assert fake.freed == 2 and fake.shutdown == 1  # both GPM samples freed, NVML shut down
    # a window before the first interval holds no sample, and says so
    early = s.window(t0 - 10**9, t0 - 10**8)
    assert not early["readable"] and "sample interval" in early["reason"]


def test_sampler_takes_an_older_pynvml_that_wants_bytes():
    fake = FakeNvml(bytes_only=True)
    s, t0, t1 = _sample(fake)
    assert s.window(t0, t1)["readable"] and fake.by_pci == b"0000:19:00.0"


def test_sampler_without_gpm_keeps_utilisation_and_says_why_there_is_no_sm_activity():
    s, t0, t1 = _sample(FakeNvml(gpm=False))
    w = s.window(t0, t1)
    assert w["readable"] and w["source"] == "nvml-utilization" and w["sm_active_pct"] is None
    assert "GPM" in w["gpm_reason"] and w["gpu_busy_pct"]["p50"] == 100


def test_sampler_degrades_with_one_reason_when_nvml_is_not_readable(monkeypatch):
    s, t0, t1 = _sample(FakeNvml(fail_init=True))
    w = s.window(t0, t1)
    assert not w["readable"] and w["source"] is None and "NVML unavailable: Driver Not Loaded" in w["reason"]
    monkeypatch.setattr(nvml, "load", lambda: (None, "pynvml (nvidia-ml-py) is not installed: test"))
    with nvml.SmSampler() as s2:
        pass
    w2 = s2.window(t0, t1)
    assert not w2["readable"] and "not installed" in w2["reason"]
    # a run of fixed rounds has no window
    s3, _, _ = _sample(FakeNvml(), secs=0.05)
    assert "no measured window" in s3.window(0, 0)["reason"]


# ------------------------------------------------------------------------------------------ engine table
def test_corun_is_a_table_parameter_with_its_rules():
    nat = pytest.importorskip("nvmelab._native")
    info = {p["name"]: p for p in nat.CRUN_PARAMS}["corun"]
    assert info["default"] == 0 and info["min"] == 0 and info["max"] == 32
    nat.crun_params_check(corun=4)
    with pytest.raises(ValueError, match="corun=33"):
        nat.crun_params_check(corun=33)
    with pytest.raises(ValueError, match="corun=4: needs a timed run"):
        nat.crun_params_check(corun=4, rounds=3)


def test_make_record_carries_the_corunner_and_nvml_fields():
    """The GPU engine's record path without a GPU: a raw result as the binding returns it."""
    from nvmelab.engines import gpu
    from tests.test_cuda import _fake_result, record_kw

    args = record_kw(target="gpu-emu://?profile=null", qdepth=64, warmup=0.2)
    w = {"readable": False, "reason": "NVML unavailable: test", "sm_active_pct": None}
    rec = gpu.make_record(_fake_result(corun=dict(RAW), nvml=w), **args, corun=4)
    assert rec["corun"]["ratio"] == pytest.approx(0.8) and rec["corun"]["per_sm"] == 4
    assert rec["nvml"] == w
    rec = gpu.make_record(_fake_result(corun=None), **args)
    assert rec["corun"] == gpu_corun.off() and rec["nvml"] is None
    with pytest.raises(ValueError, match="no co-runner"):
        gpu.make_record(_fake_result(corun=None), **args, corun=4)


# ------------------------------------------------------------------------------------------ stand-in
def test_standin_with_a_corunner_gives_a_valid_record_with_both_fields():
    from nvmelab.engines import gpu_standin

    rec = gpu_standin.run_cuda_standin(
        target="gpu-emu://?profile=null&ndev=1", qdepth=8, runtime=0.2, warmup=0.05, corun=4
    )
    records.validate(rec)
    co = rec["corun"]
    assert co["ran"] and co["kind"] == gpu_corun.KIND_CPU and co["per_sm"] == 4
    assert (
        co["alone_s"] > 0
        and co["loaded_s"] > 0
        and co["ratio"] == pytest.approx(co["alone_s"] / co["loaded_s"], rel=1e-4)
    )
    assert co["launches"] >= gpu_corun.CPU_MIN_LAUNCHES and co["resident"]
    assert set(rec["nvml"]) >= {"readable", "reason", "sm_active_pct", "source"}
    off = gpu_standin.run_cuda_standin(target="gpu-emu://?profile=null&ndev=1", qdepth=8, runtime=0.05, warmup=0.01)
    assert off["corun"] == gpu_corun.off()


# ------------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
def test_corunner_beside_the_engine_on_gpu_emu():
    from nvmelab.engines import gpu

    ok, why = gpu.available()
    if not ok:
        pytest.skip(why)
    rec = gpu.run_cuda(
        target="gpu-emu://?profile=pm1753&ndev=4", qdepth=64, nqueues=1, ndevs=4, runtime=0.5, warmup=0.2, corun=4
    )
    co = rec["corun"]
    assert (
        co["ran"] and co["kind"] == gpu_corun.KIND_GPU and co["blocks"] == 4 * rec["provenance"]["cuda_device"]["sms"]
    )
    assert co["resident"] and co["overlap"] and co["valid"], co
    assert 0 < co["ratio"] <= 1.2  # the I/O load cannot speed the co-runner up beyond noise
    assert rec["nvml"] is not None and (rec["nvml"]["readable"] or rec["nvml"]["reason"])
    assert (
        gpu.run_cuda(target="gpu-emu://?profile=pm1753&ndev=2", ndevs=2, qdepth=8, runtime=0.2, warmup=0.05)["corun"]
        == gpu_corun.off()
    )


# ------------------------------------------------------------------------------------------ analysis
def _rec(qdepth, per_sm, ratio=None, sm=None, **extra):
    co = gpu_corun.off()
    if per_sm:
        co = gpu_corun.corun_field({**RAW, "loaded_s": RAW["alone_s"] / ratio}, per_sm)
    nv = {"readable": sm is not None, "sm_active_pct": {"p50": sm} if sm is not None else None}
    return {"qdepth": qdepth, "nqueues": 1, "ndevs": 16, "corun": co, "nvml": nv, **extra}


def test_pollcost_table_per_queue_depth_leaves_out_what_did_not_run_under_load_and_counts_flagged_runs():
    from nvmelab.results import analysis
    from nvmelab.studies.cuda_pollcost import analysis as pollcost

    recs = [
        _rec(16, 0, sm=20.0),
        _rec(16, 0, sm=30.0),
        _rec(16, 4, ratio=0.9),
        _rec(16, 4, ratio=0.7),
        _rec(256, 0, sm=None),  # NVML not readable: counted as a run, no SM activity
        _rec(256, 4, ratio=0.5),
        {**_rec(256, 4, ratio=0.1), "corun": {**gpu_corun.corun_field({**RAW, "overlap": False}, 4)}},
        _rec(256, 4, ratio=0.2, emulator_limited=True),
        _rec(256, 4, ratio=0.3, standin=True),
    ]
    t = pollcost.table(analysis.to_frame(recs)).set_index("qdepth")
    assert list(t.index) == [16, 256] and t.loc[16, "io_threads"] == 16 * 16
    assert t.loc[16, "corun_runs"] == 2 and t.loc[16, "ratio_mean"] == pytest.approx(0.8)
    assert t.loc[16, "cost_mean"] == pytest.approx(0.2) and t.loc[16, "ratio_min"] == pytest.approx(0.7)
    assert t.loc[16, "sm_active_p50"] == pytest.approx(25.0) and t.loc[16, "alone_runs"] == 2
    # a run the emulator limited is kept (its ratio is the polling's cost at that run's I/O rate) and counted
    assert t.loc[256, "corun_runs"] == 2 and t.loc[256, "ratio_mean"] == pytest.approx(0.35)
    assert t.loc[256, "flagged"] == 1 and t.loc[16, "flagged"] == 0
    assert t.loc[256, "left_out"] == 2 and pd.isna(t.loc[256, "sm_active_p50"])
    assert pollcost.table(analysis.to_frame([])).empty


def test_published_sm_activity_beside_ours_only_at_the_queue_count_we_ran():
    from nvmelab.results import analysis, reference
    from nvmelab.studies.cuda_pollcost import analysis as pollcost

    recs = [_rec(16, 0, sm=20.0), _rec(256, 0, sm=40.0), _rec(16, 4, ratio=0.9), _rec(256, 4, ratio=0.6)]
    b = pollcost.published_beside_ours(pollcost.table(analysis.to_frame(recs))).set_index("nqueues")
    pub = reference.polling_cost("cuda-qdepth").query("quantity == 'sm_active_depth_mean'").set_index("nqueues")
    assert list(b.index) == list(pub.index) and b["published_sm_active"].tolist() == pub["value"].tolist()
    assert b.loc[1, "ours_sm_active"] == pytest.approx(30.0)
    assert b.loc[1, "ours_cost_min"] == pytest.approx(0.1) and b.loc[1, "ours_cost_max"] == pytest.approx(0.4)
    assert b.drop(index=1)[["ours_sm_active", "ours_cost_min"]].isna().all().all()
    empty = pollcost.published_beside_ours(pollcost.table(analysis.to_frame([])))
    assert empty["ours_sm_active"].isna().all() and len(empty) == len(b)


def test_published_value_reads_one_stated_number():
    from nvmelab.results import reference
    from nvmelab.studies.cuda_pollcost import analysis as pollcost

    pub = reference.polling_cost("cuda-qdepth")
    row = pub[pub["quantity"] == "sm_active"].iloc[0]
    got = pollcost.published_value(pub, "sm_active", nqueues=row["nqueues"], qdepth=row["qdepth"])
    assert got == float(row["value"])
    with pytest.raises(IndexError):
        pollcost.published_value(pub, "no such quantity")
