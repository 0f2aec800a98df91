# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.results.bench: the committed benchmark JSON read back as the tables the tool-comparison chapter
shows, and the callgrind call-count parser of the instruction benchmark."""

from __future__ import annotations

import math

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
