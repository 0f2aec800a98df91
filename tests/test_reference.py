# SPDX-License-Identifier: BSD-3-Clause
"""Published reference data (nvmelab.results.reference) and the headline numbers recomputed from records."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest

from nvmelab.results import analysis, reference
from nvmelab.studies.pcie_saturation import figures as pcie_saturation_figures
from nvmelab.studies.tool_comparison import figures as tool_comparison_figures


@pytest.mark.parametrize(
    "name, rows, configs",
    [
        ("cpu-initiated-upcie", 160, 32),
        ("tool-comparison", 100, 20),
        ("pcie-bandwidth-saturation", 15, 3),
    ],
)
def test_published_records_load_with_five_repetitions(name, rows, configs):
    df = reference.published(name)
    assert len(df) == rows
    assert set(df["source"]) == {reference.PUBLISHED}
    agg = analysis.aggregate(df, by=["tool", "backend", "ncpus", "ndevs", "iosize"])
    assert len(agg) == configs
    assert set(agg["n"]) == {5}
    assert sorted(df["repetition"].unique()) == [0, 1, 2, 3, 4]


def test_unknown_published_set_is_named():
    with pytest.raises(ValueError, match="unknown published data set 'nope'"):
        reference.published("nope")


def test_pcie_headline_regenerated_from_records():
    """45.2 GB/s payload, 57.8 GB/s on the link, ratio 1.28 — from the published records."""
    agg = analysis.aggregate(
        reference.published("pcie-bandwidth-saturation"), by=["iosize"], metrics=["gbps", "dcgm_gbps"]
    )
    big = agg[agg["iosize"] >= 4096]
    payload = reference.headline_value("pcie-saturation", "payload_bandwidth")
    link = reference.headline_value("pcie-saturation", "observed_pcie_rx")
    ratio = reference.headline_value("pcie-saturation", "protocol_overhead_ratio")
    assert big["gbps_mean"].round(1).tolist() == [payload, payload]
    assert round(big.loc[big["iosize"] == 4096, "dcgm_gbps_mean"].item(), 1) == link
    assert analysis.protocol_overhead(big)["overhead_ratio"].round(2).tolist() == [ratio, ratio]


def test_cpu_initiated_roofline_matches_headline():
    """The plot roofline is the single-device cap x 16, and the records' best mean reaches it."""
    cap = reference.headline_value("cpu-initiated", "device_iops_cap")
    roof = reference.headline_value("cpu-initiated", "roofline_iops")
    assert analysis.roofline(constant=cap * 16).value == roof
    agg = analysis.aggregate(reference.published("cpu-initiated-upcie"), by=["backend", "ncpus"])
    best = analysis.best_configuration(agg)
    assert best["iops_mean"] == pytest.approx(roof, rel=1e-3)


def _raw_means(fname: str, keys: tuple[str, ...], metric: str):
    """Means and population std straight from the JSONL file, without pandas (an independent check)."""
    groups: dict = {}
    for line in (reference.reference_dir() / fname).read_text().splitlines():
        rec = json.loads(line)
        groups.setdefault(tuple(rec[k] for k in keys), []).append(float(rec[metric]))
    return {k: (statistics.fmean(v), statistics.pstdev(v)) for k, v in groups.items()}


def test_tool_comparison_figure_regenerated_exactly():
    """The figure's bars are the means of the published records (same values as a plain recomputation)."""
    agg = analysis.aggregate(reference.published("tool-comparison"), by=["tool", "backend", "ncpus", "stack"])
    raw = _raw_means("tool-comparison.jsonl", ("tool", "backend", "ncpus"), "iops")
    assert len(agg) == len(raw) == 20
    for r in agg.itertuples():
        mean, std = raw[(r.tool, r.backend, r.ncpus)]
        assert r.iops_mean == pytest.approx(mean, rel=1e-12)
        assert r.iops_std == pytest.approx(std, rel=1e-9, abs=1e-6)
    chart = tool_comparison_figures.tool_comparison(agg).to_dict()
    data = next(iter(chart["datasets"].values()))
    assert sorted(d["iops_mean"] for d in data) == pytest.approx(sorted(m for m, _ in raw.values()), rel=1e-12)
    # the ranking of the published figure at every core count
    for n in (1, 2, 3, 4):
        order = agg[agg["ncpus"] == n].sort_values("iops_mean")["stack"].tolist()
        assert order[:3] == ["bdevperf (SPDK driver)", "spdk_nvme_perf (SPDK driver)", "xnvmeperf + spdk"]


def test_pcie_figure_regenerated_exactly():
    agg = analysis.aggregate(
        reference.published("pcie-bandwidth-saturation"), by=["iosize"], metrics=["gbps", "dcgm_gbps"]
    )
    raw = _raw_means("pcie-bandwidth-saturation.jsonl", ("iosize",), "mibs")
    for r in agg.itertuples():
        assert r.gbps_mean == pytest.approx(raw[(r.iosize,)][0] * analysis.MIB / analysis.GB, rel=1e-12)
    chart = pcie_saturation_figures.pcie_saturation(agg, line_rate_gbps=64.0, p2p_gbps=56.1).to_dict()
    payload = [d["gbps"] for ds in chart["datasets"].values() for d in ds if d.get("part", "").startswith("payload")]
    assert sorted(payload) == pytest.approx(sorted(agg["gbps_mean"]), rel=1e-12)


def test_headline_table_and_values():
    h = reference.headline()
    assert {"experiment", "quantity", "config", "value", "unit", "source"} <= set(h.columns)
    assert reference.headline_value("cuda-qdepth", "iops", "nqueues=1 qd=512") == 53_500_000
    with pytest.raises(KeyError):
        reference.headline_value("cuda-qdepth", "iops")  # several rows: config required


def test_blksum_seed_tables():
    b = reference.blksum_qdepth()
    assert len(b) == 48
    assert set(b["digest"]) == {"null", "sha256"}  # "null" is a digest name, not a missing value
    assert b.groupby(["system", "nbd", "digest"]).size().eq(6).all()
    row = b[(b.system == "server") & (b.nbd == 0) & (b.digest == "sha256") & (b.qdepth == 1)].iloc[0]
    assert (row.mean_s, row.std_s) == (6.332, 0.008)
    assert pd.isna(b[b.digest == "null"]["threads"]).all()


def test_data_root_names_a_bad_nvmelab_data(monkeypatch, tmp_path):
    """NVMELAB_DATA must name a data folder (with reference/ in it): one clear error otherwise."""
    monkeypatch.setenv("NVMELAB_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no reference/ folder"):
        reference.data_root()
    (tmp_path / "reference").mkdir()
    assert reference.data_root() == tmp_path and not reference.installed_data()


def test_polling_cost_rows_quote_their_value():
    """data/reference/aisio-polling-cost.csv: every number stands in its own quote, with its source and section."""
    df = reference.polling_cost()
    assert set(df["experiment"]) == {"cuda-qdepth", "cuda-iosize"}
    raw = pd.read_csv(reference.reference_dir() / reference.POLLING_COST_FILE, dtype=str, keep_default_na=False)
    for r in raw.itertuples():
        assert r.value in r.quote, f"{r.quantity}: {r.value} is not in its quote {r.quote!r}"
        assert r.source.startswith("xnvme/aisio @ ") and r.source.endswith(".md"), r.source
        assert r.section and r.unit
    # one row per quantity and configuration
    assert not raw.duplicated(["experiment", "quantity", "nqueues", "qdepth", "iosize"]).any()
    sm = reference.polling_cost("cuda-qdepth").query("quantity == 'sm_active_depth_mean'")
    assert list(sm["nqueues"]) == sorted(sm["nqueues"]) and sm["value"].is_monotonic_increasing
    with pytest.raises(KeyError, match="no rows"):
        reference.polling_cost("nope")
