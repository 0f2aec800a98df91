# SPDX-License-Identifier: BSD-3-Clause
"""Runs that prove themselves (issue 24): the self-checks and the per-I/O time breakdown of the records
(nvmelab.results.checks), through the CPU stand-in of the cuda-run engine and the CPU perf engine, and the
loader that leaves a record with a failed check out of the figures. The anchors' failure cases: a kernel
(a block) that never ran, and a lost completion ending in the watchdog (tests/c/test_cuda_queue_host.c has
the C side of the stand-in's watchdog)."""

from __future__ import annotations

import copy

import pytest

from nvmelab import _native
from nvmelab.engines import gpu, gpu_standin, perf
from nvmelab.results import checks, records
from nvmelab.studies import load_results

STANDIN = dict(target="gpu-emu://?profile=null&ndev=2", iosize=4096, qdepth=16, nqueues=2, runtime=0.15, warmup=0.02)


# ------------------------------------------------------------------------------------------ the checks
def test_each_check_can_fail():
    assert checks.completions(100, 100)["ok"] is True
    bad = checks.completions(100, 99)
    assert bad["ok"] is False and bad["value"] == 99 and bad["expect"] == 100
    assert checks.completions(None, 5)["ok"] is None
    assert checks.kernel_ran([3, 1], 2)["ok"] is True
    idle = checks.kernel_ran([3, 0, 2], 3)
    assert idle["ok"] is False and "block 1 never ran" in idle["detail"]
    assert checks.kernel_ran([3], 2)["ok"] is False  # a block that did not even report
    assert checks.payload(True, 0, 10)["ok"] is True
    assert checks.payload(True, 4, 10)["ok"] is False
    assert checks.payload(True, 0, 0)["ok"] is False  # verify on, nothing verified
    assert checks.payload(False, 0)["ok"] is None
    assert checks.littles_law(1e6, 1000.0, 1)["ok"] is True
    low = checks.littles_law(1e6, 1000.0, 4)  # a quarter of the slots busy: counts or clock wrong
    assert low["ok"] is False and low["value"] == 0.25
    assert checks.littles_law(1e6, 2000.0, 1)["ok"] is False  # more in flight than there are slots
    assert checks.littles_law(1e6, None, 1)["ok"] is None
    # the window's edges: 0.1 s commands in a 1 s window may put the ratio 0.1 beyond the bounds
    assert checks.littles_law(1e3, 1e8, 90)["ok"] is False
    edge = checks.littles_law(1e3, 1e8, 90, window_s=1.0)
    assert edge["ok"] is True and edge["expect"] == pytest.approx([checks.LITTLE_MIN - 0.1, checks.LITTLE_MAX + 0.1])
    assert checks.emulator_headroom(True, 1.02)["ok"] is False
    assert checks.emulator_headroom(False, 3.0)["ok"] is True
    assert checks.emulator_headroom(None, None)["ok"] is None


def test_attach_and_excluded():
    rec = checks.attach({}, {"a": checks.check(True, 1, 1, ""), "b": checks.check(None, None, None, "")})
    assert rec["checks_ok"] is True and checks.excluded(rec) is None
    rec = checks.attach({}, {"a": checks.check(True, 1, 1, ""), "b": checks.check(False, 0, 1, "")})
    assert rec["checks_ok"] is False and checks.failed_checks(rec) == ["b"]
    assert checks.excluded(rec) == checks.EXCLUDED_CHECKS
    assert checks.excluded({"failed": {"kind": "hang", "reason": "x"}}) == checks.EXCLUDED_FAILED
    # a run the emulator limited is flagged (drawn marked), not left out, and its flag fails no checks_ok
    assert checks.excluded({"checks_ok": True, "emulator_limited": True}) is None
    assert checks.flagged({"checks_ok": True, "emulator_limited": True}) == checks.EXCLUDED_LIMITED
    rec = checks.attach(
        {}, {"a": checks.check(True, 1, 1, ""), "emulator_headroom": checks.check(False, 0.9, None, "")}
    )
    assert rec["checks_ok"] is True and checks.failed_checks(rec) == []


def test_breakdown_percentiles_and_off():
    phases = [list(range(101)), [7] * 101, [0] * 101, list(range(100, -1, -1)), [1000] * 100 + [10**6]]
    bd = checks.breakdown(8, "clock_gettime", phases)
    assert bd["sample_every"] == 8 and bd["samples"] == 101 and bd["clock"] == "clock_gettime"
    assert bd["submit_ns"] == {"p50": 50, "p99": 99} and bd["doorbell_ns"] == {"p50": 7, "p99": 7}
    assert bd["release_ns"]["p50"] == 1000 and bd["release_ns"]["p99"] == 1000
    off = checks.breakdown(0, "globaltimer", None)
    assert off["samples"] == 0 and all(off[f"{p}_ns"] is None for p in checks.PHASES)
    with pytest.raises(ValueError, match="clock"):
        checks.breakdown(1, "sundial", phases)
    with pytest.raises(ValueError, match="phases"):
        checks.breakdown(1, "tsc", phases[:3])


# ------------------------------------------------------------------------------------------ stand-in records
def test_standin_record_proves_itself_and_carries_the_breakdown():
    rec = gpu_standin.run_cuda_standin(**STANDIN, sample_every=4)
    records.validate(rec)
    c = rec["checks"]
    assert set(c) == {"completions", "kernel_ran", "payload", "littles_law", "emulator_headroom"}
    assert rec["checks_ok"] is True, c
    assert c["completions"]["ok"] and c["completions"]["value"] == c["completions"]["expect"] == rec["ios"]
    assert c["kernel_ran"]["ok"] and c["kernel_ran"]["value"] == 4  # 2 devices x 2 queues
    assert c["payload"]["ok"] is None  # the CPU emulator's namespace holds no known pattern
    assert checks.LITTLE_MIN <= c["littles_law"]["value"] <= checks.LITTLE_MAX
    bd = rec["breakdown"]
    assert bd["sample_every"] == 4 and bd["clock"] == "clock_gettime"
    # one in 4 of the window, up to the store's capacity (GPUQ_STANDIN_SAMPLE_CAP)
    assert 0 < bd["samples"] and (bd["samples"] == 1 << 16 or abs(bd["samples"] - rec["ios"] / 4) <= 4 * 16)
    for p in checks.PHASES:
        assert 0 <= bd[f"{p}_ns"]["p50"] <= bd[f"{p}_ns"]["p99"]
    # the device answers after the doorbell: something of the command's life is after T2
    assert bd["device_ns"]["p99"] + bd["poll_ns"]["p99"] > 0


def test_standin_breakdown_on_by_default_at_the_rule_and_switched_off_by_zero():
    """sample_every defaults to the rule the perf engine and the CUDA kernel share (nvme/bd_sample.h); 0 switches
    the breakdown off and the record says so (sample_every 0, null phases) instead of dropping the field."""
    rec = gpu_standin.run_cuda_standin(**STANDIN)
    assert rec["breakdown"]["sample_every"] == _native.bd_sample_every(STANDIN["qdepth"]) > 1
    assert rec["breakdown"]["samples"] > 0 and rec["breakdown"]["submit_ns"]["p50"] >= 0
    assert rec["checks_ok"] is True
    off = gpu_standin.run_cuda_standin(**STANDIN, sample_every=0)
    assert off["breakdown"]["sample_every"] == 0 and off["breakdown"]["samples"] == 0
    assert off["breakdown"]["submit_ns"] is None and off["checks_ok"] is True
    assert off["breakdown"]["off"] == "sample_every=0" and rec["breakdown"]["off"] is None


@pytest.mark.parametrize("every", [10, 16])
def test_standin_stamps_exactly_one_command_in_n(every):
    """The stand-in stamps the commands whose running number is a multiple of N (nvme_bd_sampled): with a fixed
    number of rounds the count is exact, on the remainder path (10) and the mask path (16)."""
    kw = {**STANDIN, "target": "gpu-emu://?profile=null&ndev=1", "nqueues": 1, "qdepth": 24}
    rec = gpu_standin.run_cuda_standin(**kw, sample_every=every, rounds=5)
    n = 5 * 24
    assert rec["ios"] == n and rec["breakdown"]["samples"] == -(-n // every)


def test_a_kernel_that_never_ran_is_marked_and_left_out(tmp_path):
    # the anchor: a run whose kernel did not run reported a rate. Here block (pair) 1 never runs: the
    # record is still written, with the kernel_ran check failed, and the loader leaves it out; a run the
    # emulator limited stays in (flagged: the figures draw it marked)
    bad = gpu_standin.run_cuda_standin(**STANDIN, idle_pair=2, study="t_chk")
    kr = bad["checks"]["kernel_ran"]
    assert kr["ok"] is False and kr["value"] == 3 and kr["expect"] == 4 and "block 1 never ran" in kr["detail"]
    assert bad["checks_ok"] is False
    good = gpu_standin.run_cuda_standin(**STANDIN, study="t_chk", repetition=1)
    limited = dict(copy.deepcopy(good), repetition=2, emulator_limited=True)
    f = tmp_path / "t_chk" / "h" / "quick.jsonl"
    records.write_records(f, [bad, good, limited])
    assert len(records.load_records(f)) == 3  # kept in the file, marked
    df = load_results("t_chk", "quick", root=tmp_path)
    assert sorted(df["repetition"]) == [1, 2]
    assert list(df.loc[df["repetition"] == 2, "emulator_limited"]) == [True]


def test_a_lost_completion_ends_in_the_watchdog():
    # emu:// has no URI key that drops completions; the stand-in's own fault injection (the doorbell rung
    # short) is in the C test. Here a deadline shorter than any completion of the delay profile must raise
    # TimeoutError naming the lost completion, and give no record
    with pytest.raises(TimeoutError, match="did not arrive within"):
        gpu_standin.run_cuda_standin(
            target="gpu-emu://?profile=null&ndev=1&lat=50ms", qdepth=4, nqueues=1, runtime=0.1, warmup=0, timeout=0.001
        )


# ------------------------------------------------------------------------------------------ device records
def test_device_record_with_an_idle_block_fails_its_check():
    # gpu.make_record is the one builder of device-initiated records (the stand-in's too): the GPU's counts
    # go through the same checks
    from tests.test_cuda import _fake_result, record_kw  # the engine's raw result, as the binding returns it

    kw = record_kw(study="s")
    counts = dict(submitted=1500, completed=1500, beats=[2, 2], blocks=2, in_flight=256)
    rec = gpu.make_record(_fake_result(**counts, round_ns_mean=0.25e9), **kw)  # 1000 IOPS x 0.25 s ~ 256
    assert rec["checks_ok"] is True and rec["checks"]["littles_law"]["value"] == pytest.approx(
        1000 * 0.25 / 256, abs=1e-4
    )
    rec = gpu.make_record(_fake_result(**counts, round_ns_mean=250000.0), **kw)
    assert checks.failed_checks(rec) == ["littles_law"]  # 1000 IOPS and 0.25 ms rounds: 256 cannot be in flight
    rec = gpu.make_record(_fake_result(submitted=1500, completed=1500, beats=[2, 0], blocks=2), **kw)
    assert rec["checks_ok"] is False and checks.failed_checks(rec) == ["kernel_ran"]
    rec = gpu.make_record(_fake_result(submitted=1500, completed=1499, beats=[2, 2], blocks=2), **kw)
    assert checks.failed_checks(rec) == ["completions"]
    from nvmelab.cli.cuda_run import table

    assert "FAILED: completions (CQEs matched 1499 of 1500" in table(rec)


@pytest.mark.gpu
def test_gpu_record_proves_itself_and_carries_the_breakdown():
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=2&profile=null&nsze=4MiB&fill=stamp",
        rw="randread",
        iosize=4096,
        qdepth=32,
        nqueues=2,
        ndevs=2,
        rounds=20,
        verify=True,
        sample_every=8,
    )
    c = rec["checks"]
    assert rec["checks_ok"] is True, checks.failed_checks(rec)
    assert c["completions"]["value"] == c["completions"]["expect"] == 20 * 32 * 4
    assert c["kernel_ran"]["value"] == 4 and c["payload"]["ok"] is True
    bd = rec["breakdown"]
    assert bd["clock"] == "globaltimer" and bd["samples"] == 20 * 32 * 4 // 8
    assert bd["device_ns"]["p50"] + bd["poll_ns"]["p50"] > 0


@pytest.mark.gpu
def test_gpu_lost_completion_gives_no_record():
    with pytest.raises(TimeoutError, match="did not arrive"):
        gpu.run_cuda(
            target="gpu-emu://?ndev=1&profile=null&drop=3",
            rw="randread",
            qdepth=8,
            ndevs=1,
            rounds=5,
            timeout=0.2,
            sample_every=1,
        )


# ------------------------------------------------------------------------------------------ CPU perf records
def test_perf_record_carries_the_checks():
    # QD 1 too: there a timed command's own clock reads are a large part of an I/O on `null`, so a sample of
    # one in N > 1 would read slower than the untimed ones and fail Little's law (perf.h's sampling rule)
    for qd in (1, 8):
        rec = perf.run(target="emu://?profile=null", rw="randread", iosize=512, qdepth=qd, runtime=0.2, warmup=0.05)
        c = rec["checks"]
        assert rec["checks_ok"] is True, (qd, checks.failed_checks(rec))
        assert c["completions"]["ok"] is True and c["kernel_ran"]["ok"] is None and c["payload"]["ok"] is None
        assert checks.LITTLE_MIN <= c["littles_law"]["value"] <= checks.LITTLE_MAX
        if qd == 1:  # the one-slot pass (perf_internal.h c->one): every command timed, the breakdown stamped
            lat = rec["lat_ns"]
            assert lat["sample_every"] == 1 and abs(lat["count"] - rec["ios"]) <= 2, (lat, rec["ios"])
            assert rec["breakdown"]["sample_every"] == _native.bd_sample_every(1) and rec["breakdown"]["samples"] > 0
    v = perf.run(
        target="emu://?profile=null&nsze=4MiB", rw="randread", iosize=4096, qdepth=4, runtime=0.1, warmup=0, verify=True
    )
    assert v["checks"]["payload"]["ok"] is True and v["checks"]["payload"]["value"] == 0


def test_a_corunner_run_is_not_held_to_littles_law():
    """With a co-runner the GPU (here the stand-in's CPU) is shared for part of the kernel only, so the rounds are
    not steady: the first lease's co-run records failed the check by 16-27 % and were left out of the figures."""
    rec = gpu_standin.run_cuda_standin(**{**STANDIN, "corun": 1})
    ll = rec["checks"]["littles_law"]
    assert ll["ok"] is None and "co-runner" in ll["detail"], ll
