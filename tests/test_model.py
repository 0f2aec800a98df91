# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.results.model: the fit recovers known parameters, calibration and held-out points are disjoint,
validation.csv is what the code writes, and the validation goals hold on that CSV.

Also the seed 000/001 loaders the model reads (nvmelab.results.reference.cuda_*).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from nvmelab.results import model, reference

KNOWN = model.Params(
    dev_iops=4.0e6,
    dev_bw=20.0e9,
    core_rate={"upcie": 20.0e6, "upcie-cuda": 25.0e6},
    link_bw=50.0e9,
    link_ratio=1.4,
    round_lat_s=20e-6,
    round_cmd_s=300e-9,
    round_byte_s=100e-12,
)


def _synthetic(p: model.Params) -> pd.DataFrame:
    """The published points with their values replaced by what `p` predicts."""
    pts = model.published_points()
    pts["published"] = model.predict(p, pts)
    return pts


# ------------------------------------------------------------------------------- fitting ---
def test_fit_round_recovers_latency_command_and_byte_cost() -> None:
    lat, cmd, byte = 12e-6, 250e-9, 80e-12
    p = model.Params(dev_iops=1e12, dev_bw=1e15, round_lat_s=lat, round_cmd_s=cmd, round_byte_s=byte)
    pts = pd.DataFrame(
        {
            "nqueues": [1, 1, 1, 2],
            "qdepth": [8, 64, 2, 16],
            "iosize": [512, 512, 65536, 4096],
            "ndevs": [16, 16, 16, 4],
            "quantity": ["iops", "iops", "gbps", "iops"],
            "point_id": list("abcd"),
        }
    )
    iops = model.cuda_iops(p, pts.nqueues, pts.qdepth, pts.iosize, 1) * pts.ndevs
    pts["published"] = np.where(pts.quantity == "iops", iops, iops * pts.iosize / 1e9)
    got = model.fit_round(pts)
    assert got == pytest.approx((lat, cmd, byte), rel=1e-9)


def test_fit_round_refuses_capped_or_degenerate_points() -> None:
    pts = pd.DataFrame(
        {
            "nqueues": [1, 1, 1],
            "qdepth": [8, 16, 32],
            "iosize": [512] * 3,
            "ndevs": [1] * 3,
            "quantity": ["iops"] * 3,
            "published": [1e5, 2e5, 3e5],
            "point_id": list("abc"),
        }
    )
    with pytest.raises(ValueError, match="separate"):
        model.fit_round(pts)  # one I/O size: the per-byte cost cannot be told from the per-command cost
    pts.loc[2, "iosize"] = 4096
    with pytest.raises(ValueError, match="at a cap"):
        model.fit_round(pts, dev_iops=2.5e5)


def test_fit_recovers_every_parameter_from_synthetic_points() -> None:
    got = model.fit(_synthetic(KNOWN))
    for name in ("dev_iops", "dev_bw", "link_bw", "link_ratio", "round_lat_s", "round_cmd_s", "round_byte_s"):
        assert getattr(got, name) == pytest.approx(getattr(KNOWN, name), rel=1e-9), name
    assert got.core_rate == pytest.approx(KNOWN.core_rate, rel=1e-9)


def test_synthetic_points_validate_without_error() -> None:
    pts = _synthetic(KNOWN)
    p = model.fit(pts)
    cont = pts["quantity"] != "min_qdepth"  # grid answers are exact too, but compare the continuous ones
    err = (model.predict(p, pts) - pts["published"]) / pts["published"]
    assert err[cont].abs().max() < 1e-9
    assert (model.predict(p, pts)[~cont] == pts["published"][~cont]).all()


def test_round_model_shapes() -> None:
    # rate grows with queue depth, never passes the device roofline, bandwidth never passes the link
    q = model.qdepth_curves(KNOWN)
    for _, g in q.groupby("nqueues"):
        assert g.sort_values("qdepth")["iops_mean"].is_monotonic_increasing
    assert q["iops_mean"].max() <= model.NDEVS_CUDA * KNOWN.dev_iops * (1 + 1e-12)
    assert model.iosize_curves(KNOWN)["gbps_mean"].max() <= KNOWN.link_bw / 1e9 * (1 + 1e-12)


# ------------------------------------------------------------------- calibration vs held out ---
def test_calibration_and_held_out_are_disjoint_and_cover_every_point() -> None:
    pts = model.published_points()
    cal, held = model.split(pts)
    key = lambda d: set(d["study"] + "|" + d["point_id"])  # noqa: E731
    assert key(cal).isdisjoint(key(held))
    assert key(cal) | key(held) == key(pts)
    calib = model.calibration_set()
    assert key(cal) == set(calib["study"] + "|" + calib["point_id"])
    assert calib["why"].str.len().min() > 20  # every calibration point says why it can calibrate


def test_unknown_calibration_point_is_refused() -> None:
    calib = pd.concat(
        [
            model.calibration_set(),
            pd.DataFrame([{"parameter": "x", "study": "cuda_qdepth", "point_id": "iops/nq9-qd9", "why": "-"}]),
        ]
    )
    with pytest.raises(KeyError, match="nq9-qd9"):
        model.split(calib=calib)


def test_a_large_unexplained_miss_is_an_error() -> None:
    with pytest.raises(ValueError, match="no mechanism"):
        model._note("pcie_saturation", "gbps/s512", 0.4)
    assert model._note("pcie_saturation", "gbps/s512", 0.1) == ""


# -------------------------------------------------------------------------- validation.csv ---
def test_validation_csv_is_regenerated_identically(tmp_path) -> None:
    committed = reference.data_root() / model.VALIDATION_PATH
    out = model.write_validation(tmp_path / "validation.csv")
    assert out.read_bytes() == committed.read_bytes(), "run `python -m nvmelab.results.model` and commit the CSV"


def test_validation_goals_hold_on_the_csv() -> None:
    df = pd.read_csv(reference.data_root() / model.VALIDATION_PATH, keep_default_na=False, na_values=[""])
    assert list(df.columns) == model.VALIDATION_COLUMNS
    assert set(df["role"]) == {"calibration", "held_out"}
    assert (df["model_version"] == model.MODEL_VERSION).all()
    s = model.summary(df)
    assert s["n_held_out"] >= model.GOAL_MIN_HELD_OUT
    assert len(s["studies"]) >= model.GOAL_MIN_STUDIES
    assert s["median_abs_rel_error"] <= model.GOAL_MEDIAN_ERROR
    # calibration points come back as given; every large miss names what the model lacks
    assert df[df.role == "calibration"]["rel_error"].abs().max() < 1e-6
    assert s["over"]["note"].fillna("").str.len().min() > 20 if len(s["over"]) else True
    held = df[df.role == "held_out"]
    assert held["predicted"].notna().all()


# ---------------------------------------------------------------------- seed 000/001 loaders ---
def test_cuda_min_qdepth_tables() -> None:
    q = reference.cuda_min_qdepth("cuda_qdepth")
    assert q["nqueues"].tolist() == [1, 2, 4, 8, 16]
    # threads = qdepth x nqueues x 16 devices, as the seed says
    assert (q["total_cuda_threads"] == q["min_qdepth"] * q["nqueues"] * 16).all()
    assert q["reached"].tolist() == [False, True, True, True, True]
    i = reference.cuda_min_qdepth("cuda_iosize")
    assert i["iosize"].tolist() == [512 * 2**k for k in range(8)]
    assert (i["total_cuda_threads"] == i["min_qdepth"] * 16).all()
    assert i["reached"].tolist() == [False, False] + [True] * 6
    with pytest.raises(ValueError):
        reference.cuda_min_qdepth("cpu_initiated")


def test_cuda_statements_convert_printed_units() -> None:
    assert reference.cuda_value("cuda_qdepth", "iops", nqueues="1", qdepth="512") == 53.5e6
    assert reference.cuda_value("cuda_qdepth", "roofline_iops") == 61.7e6  # quoted four times, all agree
    assert reference.cuda_value("cuda_qdepth", "gain_over_nqueues1") == 47
    s = reference.cuda_statements("cuda_iosize")
    ceil = s[(s.quantity == "practical_ceiling") & s.number_high.notna()]
    assert set(ceil["number"]) == {44} and set(ceil["number_high"]) == {45}
    assert reference.cuda_value("cuda_iosize", "gbps", iosize="64", qdepth="1") == 41.7
    assert s.loc[s.quantity == "iosize_max", "iosize_bytes"].item() == 65536
    with pytest.raises(KeyError):
        reference.cuda_value("cuda_qdepth", "iops")  # several configurations: must be named
    assert reference.cuda_parameters("cuda_qdepth")["Queue depth"][-1] == 512
    # the 86.6 % is the published 53.5 M (printed to 0.05 M) over the 61 727 008 roofline
    frac = reference.cuda_value("cuda_qdepth", "fraction_of_roofline", qdepth="512")
    nq1 = reference.cuda_value("cuda_qdepth", "iops", nqueues="1", qdepth="512")
    roof = reference.headline_value("cpu-initiated", "roofline_iops")
    assert 100 * (nq1 - 0.05e6) / roof <= frac + 0.05 and frac - 0.05 <= 100 * (nq1 + 0.05e6) / roof
    assert not math.isclose(frac, 100 * nq1 / roof, abs_tol=0.05)  # the printed 53.5 M itself gives 86.7 %


def test_emu_query_carries_the_fitted_round() -> None:
    q = dict(kv.split("=") for kv in model.emu_query(KNOWN).split("&"))
    assert q["lat"] == "20000ns" and float(q["qiops"]) == pytest.approx(1 / 300e-9, rel=1e-6)
    assert float(q["bw"]) == pytest.approx(1 / 100e-12, rel=1e-6) and float(q["link"]) == 50e9
    assert float(dict(kv.split("=") for kv in model.emu_query(KNOWN, device_initiated=False).split("&"))["bw"]) == 20e9


def test_summary_table_counts() -> None:
    df = pd.DataFrame(
        {
            "study": ["a", "a", "a", "b"],
            "role": ["calibration", "held_out", "held_out", "held_out"],
            "rel_error": [0.0, 0.1, -0.5, 0.2],
        }
    )
    t = model.summary_table(df).set_index("study")
    assert t.loc["a", "held_out"] == 2 and t.loc["a", "over"] == 1 and t.loc["a", "max_abs_error"] == 0.5
    assert t.loc["all studies", "held_out"] == 3 and t.loc["all studies", "median_abs_error"] == pytest.approx(0.2)
