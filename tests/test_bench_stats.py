# SPDX-License-Identifier: BSD-3-Clause
"""The kernel-path benchmark's statistics (paired ratios, bootstrap interval, efficiency);
the benchmark itself runs under `make bench`, not here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def kp():
    sys.path.insert(0, str(ROOT))
    try:
        from tests.bench import bench_kernel_path
    finally:
        sys.path.remove(str(ROOT))
    return bench_kernel_path


def _runs(ours, theirs, cpu=50.0):
    return {
        4: {
            "nvmelab": [{"iops": x, "cpu_usage": cpu} for x in ours],
            "fio": [{"iops": x, "cpu_usage": cpu} for x in theirs],
        }
    }


def test_pairs_are_matched_by_round(kp):
    s = kp.summarize(_runs([110, 90, 100], [100, 100, 100]))["4"]
    assert s["paired_ratios"] == pytest.approx([1.1, 0.9, 1.0])
    assert s["pairs_won"] == 2  # a tie counts as not slower
    assert s["ratio"] == pytest.approx(1.0)
    lo, hi = s["paired_ratio_ci95"]
    assert lo <= 1.0 <= hi and lo >= 0.9 and hi <= 1.1


def test_a_consistent_loss_has_an_interval_below_one(kp):
    s = kp.summarize(_runs([95, 96, 94, 95, 97, 93], [100] * 6))["4"]
    assert s["paired_ratio_ci95"][1] < 1.0
    assert s["pairs_won"] == 0


def test_efficiency_uses_busy_cpu_time(kp):
    runs = _runs([100], [100])
    runs[4]["fio"][0]["cpu_usage"] = 100.0  # same IOPS, twice the CPU
    s = kp.summarize(runs)["4"]
    assert s["efficiency_ratio"] == pytest.approx(2.0)
    assert s["paired_ratio_ci95"] is None  # one pair: no interval


def test_o_direct_probe_names_a_missing_directory(kp, tmp_path):
    assert "does not exist" in kp._o_direct_ok(str(tmp_path / "nope"))


def test_o_direct_probe_accepts_a_directory_that_supports_it(kp, tmp_path):
    # the temp dir may or may not support O_DIRECT (tmpfs before Linux 6.6 does not); the probe
    # must answer None or a reason naming the directory, never raise
    why = kp._o_direct_ok(str(tmp_path))
    assert why is None or str(tmp_path) in why


# ---------------------------------------------------------------------------- the breakdown-cost benchmark
@pytest.fixture(scope="module")
def bdc():
    sys.path.insert(0, str(ROOT))
    try:
        from tests.bench import _native_bench, bench_breakdown_cost
    finally:
        sys.path.remove(str(ROOT))
    return bench_breakdown_cost, _native_bench


def _ab(bench, off_ns, on_ns):
    """ab_timing over scripted runs: round r gives off_ns[r] and on_ns[r] (in whichever order it asks)."""
    it = {False: iter(off_ns), True: iter(on_ns)}
    return bench.ab_timing(lambda on: {"ns_per_io": next(it[on]), "sample_every": 64, "samples": 10}, len(off_ns))


def test_breakdown_ab_verdicts(bdc):
    """The timed A/B judges 2 % only when its rounds agree: a tight 1 % cost is met, a tight 3 % one is not,
    a spread wider than the goal (or fewer than MIN_ROUNDS rounds) gives no verdict, whatever the median."""
    bench, _ = bdc
    met = _ab(bench, [100.0] * 5, [101.0, 101.0, 101.2, 100.9, 101.0])
    assert met["verdict"] == "met" and met["cost"] == pytest.approx(0.01, abs=1e-3)
    assert met["ns_per_io_min"] == {"off": 100.0, "on": 100.9}
    assert _ab(bench, [100.0] * 5, [103.0] * 5)["verdict"] == "not met"
    wide = _ab(bench, [100.0] * 5, [90.0, 101.0, 101.0, 101.0, 130.0])
    assert wide["ratio_median"] == pytest.approx(1.01) and "too wide" in wide["verdict"]
    assert "too few" in _ab(bench, [100.0] * 2, [101.0] * 2)["verdict"]


def test_clock_reads_counted_once_per_call_from_outside_the_clock(bdc):
    """callgrind's caller tree: calls into clock_gettime from the program count, glibc's own chain
    (clock_gettime -> __clock_gettime64) does not count twice."""
    _, nb = bdc
    tree = "\n".join(
        [
            "  1,000 (10x)  < ???:now_ns (10x) []",
            "    200 (3x)  < ???:worker_main (3x) []",
            "  1,200  *  ./time/clock_gettime.c:clock_gettime@@GLIBC_2.17 [libc.so.6]",
            "",
            "  1,100 (13x)  < ./time/clock_gettime.c:clock_gettime@@GLIBC_2.17 (13x) []",
            "  1,100  *  ./time/clock_gettime.c:__clock_gettime64 [libc.so.6]",
        ]
    )
    assert nb._clock_reads(tree) == 13
