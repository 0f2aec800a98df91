# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.studies.tool_costs.analysis: the seeds' tools measured here, against the published tool comparison."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from nvmelab.results import reference
from nvmelab.studies.tool_costs import analysis as tool_costs


def _records(rates: dict[str, float], iosize: int = 512, qdepth: int = 128) -> pd.DataFrame:
    rows = []
    for stack, iops in rates.items():
        for rep, f in enumerate((0.9, 1.1)):
            rows.append(
                dict(
                    stack=stack,
                    iosize=iosize,
                    qdepth=qdepth,
                    ncpus=1,
                    iops=iops * f,
                    cpu_usage=99.0,
                    server_cpu_usage=30.0 + rep,
                    repetition=rep,
                    run_key=f"{stack}-{iosize}-{qdepth}-{rep}",
                )
            )
    return pd.DataFrame(rows)


def test_summary_means_and_costs_per_stack() -> None:
    s = tool_costs.summary(_records({tool_costs.BDEVPERF: 1e6, tool_costs.NVMELAB: 4e6}))
    row = s.set_index("stack").loc[tool_costs.BDEVPERF]
    assert row["iops_mean"] == pytest.approx(1e6) and row["n"] == 2
    assert row["ns_per_io_mean"] == pytest.approx((1e9 / 0.9e6 + 1e9 / 1.1e6) / 2)
    assert list(s["stack"]) == [tool_costs.BDEVPERF, tool_costs.NVMELAB]  # the order of STACKS
    assert tool_costs.server_headroom(s) == pytest.approx(30.5)
    assert tool_costs.summary(pd.DataFrame()).empty


def test_ratios_set_ours_beside_the_published_records() -> None:
    rates = {tool_costs.BDEVPERF: 1e6, tool_costs.SPDK_PERF: 1.5e6, tool_costs.NVMELAB: 3e6}
    r = tool_costs.ratios(tool_costs.summary(_records(rates))).set_index("comparison")
    pub = reference.published("tool-comparison")
    one = pub[pub["ncpus"] == 1].groupby("stack")["iops"].mean()
    lean = tool_costs.COMPARISONS[1][0]
    assert r.loc[lean, "ours"] == pytest.approx(3.0)
    assert r.loc[lean, "published"] == pytest.approx(one[tool_costs.PUB_LEANEST] / one[tool_costs.PUB_BDEVPERF])
    hist = tool_costs.COMPARISONS[3][0]  # no -L runs in these records, and none published
    assert math.isnan(r.loc[hist, "ours"]) and math.isnan(r.loc[hist, "published"])
    other = tool_costs.COMPARISONS[4][0]  # published only
    assert math.isnan(r.loc[other, "ours"]) and r.loc[other, "published"] > 1


def test_cores_for_the_roofline_round_up_and_name_the_published_need() -> None:
    s = tool_costs.summary(_records({tool_costs.BDEVPERF: 1e6, tool_costs.NVMELAB_INPROC: 5e6}))
    c = tool_costs.cores_for_roofline(s).set_index("stack")
    roof = tool_costs.roofline_iops()
    assert c.loc[tool_costs.BDEVPERF, "cores"] == math.ceil(roof * s.iloc[0]["ns_per_io_mean"] / 1e9)
    assert "seed 004: 8 cores" in c.loc[tool_costs.BDEVPERF, "published"]
    assert c.loc[tool_costs.NVMELAB_INPROC, "published"] == "–"
    assert tool_costs.cores_for_roofline(s, qdepth=32).empty


def test_server_paced_and_pair_ratios() -> None:
    df = _records({tool_costs.SPDK_PERF: 2e6, tool_costs.SPDK_PERF_L: 1e6, tool_costs.NVMELAB: 4e6})
    df["server_busy_fraction"] = df["stack"].map({tool_costs.NVMELAB: 0.9}).fillna(0.1)
    s = tool_costs.summary(df)
    paced = tool_costs.server_paced(s)
    assert list(paced["stack"]) == [tool_costs.NVMELAB]
    assert paced["server_busy_fraction_mean"].iloc[0] == pytest.approx(0.9)
    r = tool_costs.pair_ratios(s, tool_costs.SPDK_PERF, tool_costs.SPDK_PERF_L)
    assert list(r["ratio"]) == [pytest.approx(2.0)] and list(r["qdepth"]) == [128]
    assert tool_costs.pair_ratios(s, tool_costs.SPDK_PERF, tool_costs.BDEVPERF).empty
    assert tool_costs.server_paced(tool_costs.summary(_records({tool_costs.BDEVPERF: 1e6}))).empty


def test_pivot_orders_stacks_and_configurations() -> None:
    df = pd.concat(
        [
            _records({tool_costs.NVMELAB: 4e6, tool_costs.BDEVPERF: 1e6}, iosize=4096, qdepth=32),
            _records({tool_costs.NVMELAB: 5e6, tool_costs.BDEVPERF: 2e6}, iosize=512, qdepth=128),
            _records({tool_costs.BDEVPERF: 3e6}, iosize=512, qdepth=1),
        ]
    )
    t = tool_costs.pivot(tool_costs.summary(df), "iops_mean")
    assert list(t.index) == [tool_costs.BDEVPERF, tool_costs.NVMELAB]
    assert list(t.columns) == [("512 B", "QD 1"), ("512 B", "QD 128"), ("4,096 B", "QD 32")]
    assert t.loc[tool_costs.NVMELAB, ("512 B", "QD 128")] == pytest.approx(5e6)
    assert math.isnan(t.loc[tool_costs.NVMELAB, ("512 B", "QD 1")])
    assert tool_costs.pivot(pd.DataFrame(), "iops_mean").empty
