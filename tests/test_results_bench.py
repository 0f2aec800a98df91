# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.results.bench: the committed benchmark JSON read back as the tables the tool-comparison chapter
shows, and the callgrind call-count parser of the instruction benchmark."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from nvmelab.results import bench
from tests.bench import _native_bench as nb


def test_instruction_table_has_every_case() -> None:
    t = bench.instruction_table()
    assert set(t["qdepth"]) >= {1, 16, 128, 1024}
    assert set(t["lat"]) == {"on", "off"}
    assert set(t["ndev"]) == {1, 16}
    parts = t["emulator"] + t["driver"] + t["engine"]
    assert ((parts - t["total"]).abs() <= 0.5).all()  # the three parts add up to the total


def test_cpu_per_io_both_latency_settings() -> None:
    t = bench.cpu_per_io()
    assert set(t["latency"]) == {"on", "off"}
    assert (t["nvmelab_ns_per_io"] > 0).all() and (t["fio_null_ns_per_io"] > 0).all()


def test_published_per_thread_is_one_over_iops() -> None:
    t = bench.published_per_thread()
    assert (t["ns_per_io"] * t["iops"]).round(3).eq(1e9).all()
    assert t["ns_per_io"].is_monotonic_increasing


def test_real_controller_estimate_bounds() -> None:
    t = bench.real_controller_estimate()
    assert len(t) == 3
    for _, r in t.iterrows():
        if r["low_ns"] is not None and not math.isnan(r["low_ns"]):
            assert 0 < r["low_ns"] <= r["high_ns"]


def test_unknown_host_named() -> None:
    with pytest.raises(FileNotFoundError, match="no-such-host"):
        bench.load("instructions", "no-such-host")


def test_calls_parser() -> None:
    tree = (
        "10 (1%)  < ???:nvme_qpair_sq_event (2,707x) [/x]\n"
        "5 (1%)  < ???:nvme_qpair_poll (13x) [/x]\n"
        "3 (1%)  *  ???:bar_write [/x]\n"
        "\n"
        "7 (1%)  *  ???:other [/x]\n"
    )
    assert nb._calls(tree, "bar_write") == 2720
    assert nb._calls(tree, "other") == 0


def test_annotate_events_parser() -> None:
    """callgrind_annotate --show=Ir,D1mr,D1mw,DLmr,DLmw: "0" and "." columns print without a percentage, and one
    function on two lines (two source files) is summed."""
    ann = (
        "--------------------------------------------------------------------------------\n"
        "1,000 (100.0%) 40 (100.0%) 20 (100.0%) 8 (100.0%) 4 (100.0%)  PROGRAM TOTALS\n"
        "  600 (60.00%) 10 (25.00%)  .            0            2 (50.0%)  ???:emu_sq_service [/x]\n"
        "  100 (10.00%)  5 (12.50%)  0            .            .           /a/b.h:emu_sq_service\n"
        "   42 ( 4.20%)  0          16 (80.00%)   0           16 (400%)   ./s/memset.S:__memset_avx2_unaligned_erms [/l]\n"
    )
    totals, funcs = nb._annotate_events(ann)
    assert totals == {"Ir": 1000, "D1mr": 40, "D1mw": 20, "DLmr": 8, "DLmw": 4}
    assert funcs["emu_sq_service"] == {"Ir": 700, "D1mr": 15, "D1mw": 0, "DLmr": 0, "DLmw": 2}
    assert funcs["__memset_avx2_unaligned_erms"]["D1mw"] == 16


def test_cache_misses_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_instructions.cache_misses: one row per (devices, data) case and the 16-over-1 growth per I/O,
    with and without the emulated DMA, computed from the rows (here made-up counts, no valgrind)."""
    from tests.bench import bench_instructions as bi

    def ev(l2: float) -> dict[str, float]:
        return {"Ir": 100.0, "D1mr": 1.0, "D1mw": 1.0, "DLmr": l2 / 2, "DLmw": l2 / 2}

    def fake(exe, uri, qd, lat, ms):  # noqa: ANN001, ANN202
        many = "ndev=16" in uri
        dma = 0.0 if "data=none" in uri else (8.0 if many else 0.0)
        rest = 3.0 if many else 0.0
        parts = {
            "engine": ev(1.0 * rest / 3),
            "driver": ev(2.0 * rest / 3),
            "emulator": ev(dma),
            "emulated_dma": ev(dma),
        }
        parts["per_io"] = ev(rest + dma)
        parts["without_emulated_dma"] = ev(rest)
        return {"per_io": parts, "ios": [10, 20]}

    monkeypatch.setattr(bi.nb, "engine_cache_split", fake)
    r = bi.cache_misses(Path("unused"))
    assert [(x["ndev"], x["data"]) for x in r["rows"]] == [(1, "zeros"), (16, "zeros"), (1, "none"), (16, "none")]
    g = r["ndev16_extra_misses_per_io"]
    assert g["l2"] == 11.0 and g["l2_without_emulated_dma"] == 3.0 and g["l2_data_none"] == 3.0
    assert g["l2_by_part"] == {"engine": 1.0, "driver": 2.0, "emulator": 8.0, "emulated_dma": 8.0}
    assert g["d1"] == 0.0


def test_missed_says_by_how_much_and_why() -> None:
    """bench_instructions.missed: nothing for goals met; for each one missed, the margin and the profile
    (made-up rows: QD 1 costs 5x QD 128, and 16 devices +14 % with most extra misses the emulated DMA)."""
    from tests.bench import bench_instructions as bi

    def row(ndev, qd, lat, emu, drv, eng):  # noqa: ANN001, ANN202
        return {
            "ndev": ndev,
            "qdepth": qd,
            "lat": lat,
            "emulator": emu,
            "driver": drv,
            "engine": eng,
            "total": emu + drv + eng,
        }

    rows = [
        row(1, 128, True, 150, 60, 40),
        row(1, 128, False, 150, 60, 30),
        row(1, 1, True, 400, 350, 500),
        row(1, 1, False, 400, 350, 300),
    ]
    measured = {
        "driver_instr_per_io": 60,
        "engine_instr_per_io": 40,
        "emulator_instr_per_cmd": 150,
        "qd1_over_qd128_total": 5.0,
        "ndev16_time_per_io_growth": 0.14,
        "ndev16_time_per_io_growth_data_none": 0.12,
        "ndev16_over_ndev1_instr_total": 1.0,
    }
    misses = {
        "ndev16_extra_misses_per_io": {
            "l2": 11.0,
            "l2_data_none": 0.5,
            "l2_by_part": {"emulated_dma": 8.0},
            "d1_data_none": 3.0,
            "d1_by_part_data_none": {"engine": 0.5, "driver": 2.0, "emulator": 0.5},
        }
    }
    all_met = {"driver": True, "engine": True, "emulator": True, "qd1_vs_qd128": True, "ndev16_time": True}
    assert bi.missed(rows, all_met, measured, misses) == {}
    m = bi.missed(rows, {**all_met, "qd1_vs_qd128": False, "ndev16_time": False}, measured, misses)
    assert set(m) == {"qd1_vs_qd128", "ndev16_time"}
    q = m["qd1_vs_qd128"]
    assert q["missed_by"] == pytest.approx(5.0 / 1.6 - 1, abs=1e-4) and q["instr_for_the_goal_at_qd1"] == 400.0
    assert q["extra_instr_per_io_at_qd1"] == {"emulator": 250, "driver": 290, "engine": 460}
    assert q["of_the_engine_timing_every_command"] == 200
    n = m["ndev16_time"]
    assert n["missed_by_points"] == pytest.approx(0.11) and n["of_them_emulated_dma"] == 8.0
    assert n["with_no_data_moved"] == 0.5 and n["time_growth_no_data_moved"] == 0.12
    assert n["extra_l1d_misses_per_io_no_data_moved"] == 3.0 and n["l1d_by_part_no_data_moved"]["driver"] == 2.0
    m = bi.missed(rows, {**all_met, "driver": False}, {**measured, "driver_instr_per_io": 70}, misses)
    assert m == {"driver": {"measured": 70, "goal": 64, "missed_by": pytest.approx(70 / 64 - 1, abs=1e-4)}}
