# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.studies.vram_cache.analysis.vram_seed_findings: seed 003's claims against our records, whichever way they go."""

from __future__ import annotations

import pandas as pd
import pytest

from nvmelab.results import reference
from nvmelab.studies.vram_cache import analysis as vram_cache


@pytest.mark.parametrize(
    "ratios,want",
    [
        ([1.2, 1.5], "faster than"),
        ([0.7, 0.9], "slower than"),
        ([0.7, 1.1], "sometimes faster, sometimes slower than"),
        ([], "not measured against"),
    ],
)
def test_verdict(ratios, want) -> None:
    assert vram_cache.verdict(ratios) == want


def _agg(cache_mibs: dict[str, float]) -> pd.DataFrame:
    rows = []
    for rw in ("circuit", "random"):
        for frac, fv in (("1/16", 1 / 16), ("1/4", 0.25)):
            for nd, mibs in ((1, 10.0), (7, 20.0 if frac == "1/4" else 12.0)):
                rows.append(
                    dict(
                        rw=rw,
                        fraction=frac,
                        fraction_value=fv,
                        config=f"x{nd}",
                        ndevs=nd,
                        cache="none",
                        mibs_mean=mibs,
                        hit_ratio_mean=float("nan"),
                        mean_request_bytes_mean=16384.0,
                        dirty_mean=float("nan"),
                        clean_mean=float("nan"),
                    )
                )
            rows.append(
                dict(
                    rw=rw,
                    fraction=frac,
                    fraction_value=fv,
                    config="x7 + host",
                    ndevs=7,
                    cache="host",
                    mibs_mean=cache_mibs[rw] * (20.0 if frac == "1/4" else 12.0),
                    hit_ratio_mean=0.2,
                    mean_request_bytes_mean=65536.0,
                    dirty_mean=0.9,
                    clean_mean=0.1,
                )
            )
    return pd.DataFrame(rows)


def _dev(spread: float, write_spread: float = 1.0) -> pd.DataFrame:
    rows = []
    for w in ("circuit", "random"):
        for d in range(7):
            rows.append(
                dict(
                    workload=w,
                    fraction="1/4",
                    ndevs=7,
                    cache="none",
                    dev=d,
                    read_mibs=10.0 * (spread if d == 0 else 1.0),
                    write_mibs=1.0 * (write_spread if d == 1 else 1.0),
                )
            )
    return pd.DataFrame(rows)


def findings(agg: pd.DataFrame, dev: pd.DataFrame) -> dict:
    return vram_cache.vram_seed_findings(
        agg, dev, reference.seed003_disk_io(), reference.seed003_statements(), reference.seed003_bcache()
    )


def test_findings_follow_the_data_either_way() -> None:
    f = findings(_agg({"circuit": 1.5, "random": 0.8}), _dev(1.02))
    assert f["ndevs"] == 7
    assert (f["stripe_gain_min"], f["stripe_gain_max"]) == pytest.approx((1.2, 2.0))
    assert f["cache_verdict_circuit"] == "faster than" and f["cache_gain_circuit_max"] == pytest.approx(1.5)
    assert f["cache_verdict_random"] == "slower than" and f["cache_gain_random_min"] == pytest.approx(0.8)
    assert f["cache_req_verdict_random"] == "larger than" and f["cache_req_random_max"] == pytest.approx(4.0)
    assert f["stripe_balance"].startswith("evenly")
    g = findings(_agg({"circuit": 0.5, "random": 1.1}), _dev(1.5))
    assert g["cache_verdict_circuit"] == "slower than" and g["cache_verdict_random"] == "faster than"
    assert g["stripe_balance"] == "not evenly loaded: reads spread more"


def test_balance_is_judged_on_reads_and_writes() -> None:
    """Even reads do not make an even array: writes spread past the bar decide it too (issue 34, item 7)."""
    f = findings(_agg({"circuit": 1.5, "random": 0.8}), _dev(1.02, write_spread=1.22))
    assert f["stripe_spread_read_max"] == pytest.approx(1.02) and f["stripe_spread_write_max"] == pytest.approx(1.22)
    assert f["stripe_spread_max"] == pytest.approx(1.22)
    assert f["stripe_balance"] == "not evenly loaded: writes spread more"
    both = findings(_agg({"circuit": 1.5, "random": 0.8}), _dev(1.5, write_spread=1.5))
    assert both["stripe_balance"] == "not evenly loaded: reads and writes spread more"
    # one repetition here: nothing differs between repetitions
    assert f["stripe_spread_rep_diff"] == 0


def test_findings_seed_side_is_computed_from_the_transcription() -> None:
    f = findings(_agg({"circuit": 1.5, "random": 0.8}), _dev(1.0))
    d = reference.seed003_disk_io()
    md0 = d[(d.setup == "mdadm-raid0-swap") & (d.device == "md0")].iloc[0]
    assert f["seed_md0_mibs"] == pytest.approx((md0.read_bytes_s + md0.write_bytes_s) / 2**20)
    assert f["seed_zfs_latency_ratio"] == reference.seed003_value("zfs-vs-mdadm", "latency_ratio")
    assert f["seed_zfs_read_ratio"] > 1 and f["seed_stick_spread"] >= 1
    assert f["seed_bcache_dirty_pct"] == reference.seed003_bcache().set_index("stat").loc["dirty", "number"]
