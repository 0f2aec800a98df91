# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.results.analysis: population std, rooflines, saturation, comparisons."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nvmelab.results import analysis


def _df():
    return pd.DataFrame(
        {
            "qdepth": [1, 1, 2, 2, 4, 4, 8, 8],
            "ndevs": [1] * 8,
            "iops": [10.0, 12.0, 20.0, 22.0, 30.0, 30.0, 31.0, 33.0],
            "mibs": [1.0] * 8,
        }
    )


def test_aggregate_uses_population_std():
    agg = analysis.aggregate(_df(), by=["qdepth"])
    assert agg["iops_mean"].tolist() == [11.0, 21.0, 30.0, 32.0]
    assert agg["iops_std"].tolist() == [1.0, 1.0, 0.0, 1.0]  # ddof=0; ddof=1 would give sqrt(2)
    assert agg["n"].tolist() == [2, 2, 2, 2]
    vals = np.array([10.0, 12.0])
    assert agg["iops_std"].iloc[0] == pytest.approx(vals.std(ddof=0))


def test_aggregate_names_missing_columns():
    with pytest.raises(ValueError, match="columns not in the data: nope"):
        analysis.aggregate(_df(), by=["nope"])


def test_roofline_published_method_and_constant():
    r = analysis.roofline(_df(), ndevs=16)
    assert r.value == 33.0 * 16 and r.per_device == 33.0 and "single-device" in r.method
    assert analysis.roofline(constant=64.0).value == 64.0
    r = analysis.roofline(per_device=10.0, ndevs=4, method="model cap")
    assert (r.value, r.per_device, r.ndevs, r.method) == (40.0, 10.0, 4, "model cap")
    with pytest.raises(ValueError, match="no single-device run"):
        analysis.roofline(_df().assign(ndevs=2), ndevs=16)


def test_saturation_smallest_x_reaching_the_named_fraction():
    agg = analysis.aggregate(_df(), by=["qdepth"])
    assert analysis.SATURATION_FRACTION == 0.95
    s = analysis.saturation(agg, "qdepth", 32.0)
    assert s["saturating_x"].item() == 8  # 30 < 0.95 * 32 = 30.4, 32 reaches it
    s = analysis.saturation(agg, "qdepth", 31.0)
    assert s["saturating_x"].item() == 4  # 30 >= 29.45
    none = analysis.saturation(agg, "qdepth", 100.0)
    assert none["saturating_x"].item() is None and none["best_x"].item() == 8
    assert none["best_fraction"].item() == pytest.approx(0.32)


def test_saturation_per_group():
    df = pd.concat([_df().assign(nq=1), _df().assign(nq=2, iops=lambda d: d.iops * 2)])
    agg = analysis.aggregate(df, by=["nq", "qdepth"])
    s = analysis.saturation(agg, "qdepth", 40.0, by=["nq"])
    assert s.set_index("nq")["saturating_x"].to_dict() == {1: None, 2: 2}


def test_compare_outer_join_and_ratio():
    pub = pd.DataFrame({"q": [1, 2], "iops_mean": [10.0, 20.0]})
    ours = pd.DataFrame({"q": [2, 4], "iops_mean": [10.0, 5.0]})
    c = analysis.compare(pub, ours, on=["q"])
    assert c["q"].tolist() == [1, 2, 4]
    assert c.loc[c.q == 2, "ratio"].item() == 0.5
    assert pd.isna(c.loc[c.q == 1, "nvmelab"]).item()


def test_to_frame_flattens_latency_and_provenance():
    rec = {
        "iops": 1.0,
        "mibs": 1.0,
        "target": "emu://?profile=null",
        "lat_ns": {"p50": 5, "p99": 6, "p999": 7, "max": 8},
        "provenance": {"host": "h", "profile": "null", "scale": 1.0},
    }
    df = analysis.to_frame([rec])
    assert df.loc[0, "lat_p99_ns"] == 6 and df.loc[0, "profile"] == "null" and df.loc[0, "host"] == "h"
    assert df.loc[0, "gbps"] == pytest.approx(1048576 / 1e9)


def test_aggregate_refuses_two_emulated_targets_in_one_configuration():
    """Records of two gpu-emu profiles (or a calibration A/B) must never be averaged together."""
    from nvmelab.results.analysis import aggregate, split_targets

    df = pd.DataFrame(
        {
            "target": ["gpu-emu://?profile=pm1753&ndev=16", "gpu-emu://?profile=null&ndev=16"],
            "qdepth": [1, 1],
            "iops": [1.0, 2.0],
            "mibs": [1.0, 2.0],
        }
    )
    with pytest.raises(ValueError, match="2 emulated targets would be averaged"):
        aggregate(df, by=["qdepth"])
    assert len(aggregate(df, by=["qdepth", "target"])) == 2
    parts = split_targets(df)
    assert sorted(parts) == ["gpu-emu://?profile=null", "gpu-emu://?profile=pm1753"]
    assert len(aggregate(parts["gpu-emu://?profile=null"], by=["qdepth"])) == 1
    # the device count is its own column: targets that differ only in ndev= are one target
    df.loc[1, "target"] = "gpu-emu://?profile=pm1753&ndev=4"
    assert len(aggregate(df, by=["qdepth"])) == 1
