# SPDX-License-Identifier: BSD-3-Clause
"""cuda-run's run parameters come from one table (src/engine/crun_params.h), on every host (issue 23).

No GPU needed: the table is plain C built in every configuration; the poll discipline and the occupancy margin
are run parameters with bounds, checked by the engine's own check and recorded in every record.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from nvmelab.engines import gpu

nat = pytest.importorskip("nvmelab._native")


def test_table_is_exported_with_the_new_parameters():
    names = [p["name"] for p in gpu.params()]
    assert names[:4] == ["rw", "iosize", "qdepth", "nqueues"]
    assert {"poll", "occupancy", "timeout", "readback"} <= set(names)
    assert gpu.default("poll") == "backoff:2048" and gpu.default("occupancy") == 95
    assert gpu.default("qdepth") == 128 and gpu.default("timeout") == 2.0


@pytest.mark.parametrize("good", ["spin", "backoff:1", "backoff:2048", "backoff:1000000"])
def test_poll_discipline_values(good):
    nat.crun_params_check(poll=good)


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"poll": "backoff:0"}, "poll="),
        ({"poll": "backoff:1000001"}, "poll="),
        ({"poll": "backoff:"}, "poll="),
        ({"poll": "sleep"}, "poll="),
        ({"poll": 5}, "poll="),
        ({"occupancy": 0}, "occupancy=0"),
        ({"occupancy": 101}, "occupancy=101"),
        ({"qdepth": 1025}, "qdepth=1025"),
        ({"iosize": 1000}, "iosize=1000"),
        ({"timeout": float("inf")}, "timeout="),
        ({"readback": True, "verify": True}, "readback"),
        ({"colour": 1}, "unknown cuda-run parameter 'colour'"),
        ({"qdepth": True}, "qdepth="),
    ],
)
def test_bad_values_name_the_parameter(kw, word):
    with pytest.raises(ValueError, match=word):
        nat.crun_params_check(**kw)
    if "colour" not in kw:
        with pytest.raises(ValueError, match=word.split("=")[0]):
            gpu.run_cuda(target="gpu-emu://?profile=null", runtime=0.1, warmup=0, **kw)


def test_runtime_is_not_checked_with_rounds():
    nat.crun_params_check(rounds=3, runtime=0)
    with pytest.raises(ValueError, match="runtime="):
        nat.crun_params_check(runtime=0)


def test_record_carries_poll_occupancy_and_the_emulator_verdict():
    from tests.test_cuda import _fake_result, record_kw

    emu = {
        "fetched": 10,
        "completed": 10,
        "errors": 0,
        "dropped": 0,
        "cq_full_held": 0,
        "idle_sweeps": 1,
        "late_ns_mean": 0.0,
        "late_ns_max": 0,
        "sq_wait_mean": 40.0,
        "sq_wait_max": 128,
        "sq_left_frac": 0.5,
        "warps_serving": 16,
        "busy_max": 0.95,
        "busy_mean": 0.5,
        "headroom": 1 / 0.95,
        "limited": True,
    }
    args = dict(
        **record_kw(target="gpu-emu://?profile=null", warmup=0),
    )
    rec = gpu.make_record(_fake_result(emulator=emu, poll="spin", occupancy_permille=951), **args)
    assert rec["poll"] == "spin" and rec["occupancy"] == {"limit_pct": 95, "used_pct": 95.1}
    assert rec["emulator_limited"] is True and rec["emulator_headroom"] == pytest.approx(1.0526, rel=1e-3)
    assert rec["emulator_counters"]["sq_wait_max"] == 128
    rec = gpu.make_record(_fake_result(emulator=None), **dict(args, target="pci://0000:01:00.0"))
    assert rec["emulator_limited"] is None and rec["poll"] == "backoff:2048"


def test_cli_options_come_from_the_table():
    out = subprocess.run(
        [sys.executable, "-m", "nvmelab", "perf", "cuda-run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in ("--poll", "--occupancy", "--lba-count", "--readback", "--timeout"):
        assert name in out
    bad = subprocess.run(
        [sys.executable, "-m", "nvmelab", "perf", "cuda-run", "--occupancy", "0", "--rounds", "1"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "occupancy=0" in bad.stderr and bad.stderr.count("\n") <= 2


# ------------------------------------------------------------------------------------------ GPU (lease)
@pytest.mark.gpu
@pytest.mark.parametrize("poll", ["spin", "backoff:256"])
def test_poll_discipline_runs_and_is_recorded(poll):
    rec = gpu.run_cuda(target="gpu-emu://?ndev=1&profile=null", qdepth=64, rounds=50, poll=poll)
    assert rec["poll"] == poll and rec["errors"] == 0
    assert 0 < rec["occupancy"]["used_pct"] <= 95 and rec["occupancy"]["limit_pct"] == 95


@pytest.mark.gpu
def test_occupancy_margin_refuses_a_run_that_fills_the_gpu():
    with pytest.raises(ValueError, match="occupancy=1%"):  # -E2BIG
        gpu.run_cuda(target="gpu-emu://?ndev=64&profile=null", qdepth=1024, nqueues=64, rounds=1, occupancy=1)


@pytest.mark.gpu
@pytest.mark.parametrize("iosize", [512, 1024, 4096, 131072])
def test_emulator_reports_its_headroom_and_fetch_lag(iosize):
    # profile=null reports its own numbers too; every size path (lane per command up to 1 KiB, warp with
    # prefetched PRP entries above) moves data that verifies
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=2&profile=null&nsze=64MiB",
        rw="write",
        iosize=iosize,
        qdepth=64,
        nqueues=2,
        rounds=4,
        verify=True,
        readback=True,
    )
    assert rec["verify_errors"] == 0
    em = rec["emulator_counters"]
    assert em["warps_serving"] == 4 and 0 < em["busy_max"] <= 1 and em["busy_mean"] <= em["busy_max"]
    assert rec["emulator_headroom"] == pytest.approx(1 / em["busy_max"])
    assert em["sq_wait_max"] >= 1 and 0 <= em["sq_left_frac"] < 1
    assert isinstance(rec["emulator_limited"], bool)


@pytest.mark.gpu
def test_host_memory_sqs_use_the_read_back_and_the_poller_warp():
    rec = gpu.run_cuda(target="emu://?ndev=1&mode=thread&nsze=64MiB", qdepth=96, rounds=5, timeout=5.0)
    assert rec["sq_readback"] is True and rec["errors"] == 0 and rec["queue_rounds"] == [5]
