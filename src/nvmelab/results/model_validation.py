# SPDX-License-Identifier: BSD-3-Clause
"""Validation of nvmelab.results.model that can fail: held-out points that are informative only,
each published fact counted once, beside two null baselines.

Every published point of the modelled kinds is a row with metadata (``published_points()``):
``family`` (what it tests), ``fact`` (rows that are one published fact share it: the six saturating
depths of seed 001 are one fact, qd x size constant; a decline over six core counts is one), ``restates``
(empty for an informative point; otherwise the calibration input or definition it restates, e.g. a
16-device rate at the roofline restates 16 x the calibrated device cap) and ``depends_on`` (the
calibration inputs and definitions its prediction uses). Scored: held-out rows with ``restates``
empty, one error per fact (the row of the fact with the largest |error|).

Baselines, fitted to the same calibration points: ``roofline`` (caps only: devices, cores, link; a GPU
queue adds no limit) and ``little`` (caps plus Little's law with one constant latency, the median of
N / X over the round calibration points). There is no leave-one-out: the model is fitted to its named
calibration points only, which are never scored, so leaving a scored fact out of the fit changes nothing;
and each parameter has a single calibration point (the round: three for three terms), so none can be
left out either. One definition of a hit: ``is_hit(rel_error)``, |error| <= EXPLAIN_ABOVE.

Key functions: published_points(), validate(), is_hit(e), fact_table(df), headline(df), family_table(df),
bound_checks(p), min_qdepth_table(p, study), figure_points(df, study), not_predicted(), write_validation(). Run
``python -m nvmelab.results.model_validation`` to (re)write data/results/model/validation.csv and the
emulator profile data/results/model/pm1753-profile.csv.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from . import analysis, reference
from .model import (
    CPU_QDEPTH,
    MODEL_VERSION,
    NDEVS_CUDA,
    PROFILE_PATH,
    Params,
    calibration_set,
    cpu_iops,
    fit,
    gpu_iops,
    model_min_qdepth,
    profile_rows,
    sweep,
)
from .status import CALIBRATION, MODEL_HIT, MODEL_MISS

#: The one definition of a hit: a scored fact within this |relative error| is a model hit, beyond it a
#: model miss (``is_hit``), and a miss must name the mechanism the model is conjectured to lack.
EXPLAIN_ABOVE = 0.25
#: Where validate() writes by default (relative to the data folder).
VALIDATION_PATH = Path("results") / "model" / "validation.csv"
VALIDATION_COLUMNS = [
    "study",
    "point_id",
    "role",
    "family",
    "fact",
    "restates",
    "depends_on",
    "quantity",
    "unit",
    "published",
    "predicted",
    "rel_error",
    "roofline",
    "little",
    "model_version",
    "note",
]
#: Published rates within this of a model cap are "at the cap": they restate it.
AT_CAP = 0.02
_NCPUS_HEADLINE = 8
_STRESS_D = "D: siblings not used; stress on"
_ROOF = "definition: 16-device roofline = 16 x dev_iops"

#: Why a scored fact can miss by more than EXPLAIN_ABOVE, by family: (the mechanism the model is conjectured to
#: lack, the experiment that would decide it). Conjectures: no published point tests any of them.
MISSING_MECHANISMS = {
    "GPU: saturating depth per queue count": (
        "a device-level limit on commands in flight: two queues of half the depth hold as many commands per device "
        "as one full-depth queue, which the seed shows below the roofline, while the model lets the two queues' "
        "rounds overlap freely and saturates one sweep step early",
        "the rate of two queues per device at the depth just below their published saturating depth (the seed "
        "gives none), or a sweep of commands in flight per device at a fixed total split over 1, 2 and 4 queues",
    ),
    "GPU: saturating depth per I/O size": (
        "a per-command cost on the GPU side that grows with the I/O size: the model charges the byte cost once "
        "per round (the last command's transfer) and saturates one step early, while the CPU-initiated P2P "
        "records show that the device does not serialise one queue's transfers",
        "the one-queue rate at each I/O size and depth with the GPU threads timed per command (submit to "
        "completion seen), which separates the device's transfer from the thread's own handling",
    ),
    "CPU: stress on the unused CPUs": (
        "contention: stress-ng on the sibling threads slows the I/O threads, and the model has no contention term",
        "the same run with the stress pinned to other cores than the I/O threads' siblings, beside its unstressed "
        "control and their run-to-run spread",
    ),
    "CPU: 11-16 cores, payload in host memory": (
        "host-memory contention beyond ten cores: the rate falls with more cores only when the payload goes to "
        "host memory, not when it goes to GPU memory over the same queues, so the device is not the cause",
        "the same sweep with the payload buffers on the other socket's memory, or with memory-bandwidth counters "
        "read during the runs",
    ),
}


# --------------------------------------------------------------------------- the points ---
def _pt(study, point_id, quantity, unit, value, source, family, *, restates="", depends_on="", fact="", **config):
    return dict(
        study=study,
        point_id=point_id,
        quantity=quantity,
        unit=unit,
        published=float(value),
        source=source,
        family=family,
        fact=fact or f"{study}/{point_id}",
        restates=restates,
        depends_on=depends_on,
        **config,
    )


def _cpu_points() -> list[dict]:
    rows: list[dict] = []
    cpu = reference.published("cpu-initiated-upcie")
    src = reference.PUBLISHED_FILES["cpu-initiated-upcie"]
    roof = 16 * reference.headline_value("cpu-initiated", "device_iops_cap")
    means = cpu.groupby(["backend", "ncpus"])["iops"].mean()
    cfg = dict(ndevs=16, qdepth=CPU_QDEPTH, iosize=512, thr_sib=0, stress=0)
    for (b, n), v in means.items():
        at_cap = abs(v / roof - 1) <= AT_CAP
        fam, fact, rest = "CPU: rate at the roofline", "", _ROOF if at_cap else ""
        if n == 1:
            fam = "calibration"
        elif b == "upcie" and not at_cap:
            fam, fact = "CPU: 11-16 cores, payload in host memory", "cpu_initiated/iops/upcie/c11-16"
        rows.append(
            _pt(
                "cpu_initiated", f"iops/{b}/c{n}", "iops", "IOPS", v, src, fam, restates=rest, fact=fact,
                depends_on="dev_iops; core_rate", backend=b, ncpus=int(n), **cfg,
            )
        )  # fmt: skip
    for b, g in means.groupby(level="backend"):
        ok = [n for (_, n), v in g.items() if v >= analysis.SATURATION_FRACTION * roof]
        rows.append(
            _pt(
                "cpu_initiated", f"min_cores/{b}", "min_ncpus", "cores", min(ok), src,
                "CPU: cores to reach the roofline", depends_on=f"core_rate:{b}; dev_iops; queue_cmd (a queue per core per device)",
                backend=b, **cfg,
            )
        )  # fmt: skip
    hv = lambda q, c=None: reference.headline_value("cpu-initiated", q, c)  # noqa: E731
    rows.append(_pt("cpu_initiated", "device_iops_cap", "iops", "IOPS", hv("device_iops_cap"), "headline.csv",
                    "calibration", backend="upcie", ndevs=1, iosize=512))  # fmt: skip
    rows.append(_pt("cpu_initiated", "bandwidth/4096B-plateau", "gib_s", "GiB/s", hv("bandwidth", "4096B plateau (approx)"),
                    "headline.csv", "calibration", backend="upcie", ndevs=16, iosize=4096))  # fmt: skip
    rows.append(_pt("cpu_initiated", "bandwidth/512B", "gib_s", "GiB/s", hv("bandwidth", "512B (approx)"), "headline.csv",
                    "CPU: rate at the roofline", restates=_ROOF, backend="upcie", ndevs=16, iosize=512,
                    ncpus=_NCPUS_HEADLINE, qdepth=CPU_QDEPTH))  # fmt: skip
    h = reference.headline()
    for cfg_name in ("A: siblings used; stress off; qd128; 512B; 8 cores; 16 devs", "B: siblings used; stress on",
                     "C: siblings not used; stress off", _STRESS_D):  # fmt: skip
        if not ((h["experiment"] == "cpu-initiated") & (h["config"] == cfg_name)).any():
            raise KeyError(f"headline.csv: no cpu-initiated row {cfg_name!r}")
        d = cfg_name == _STRESS_D
        rows.append(
            _pt(
                "cpu_initiated", f"headline/{cfg_name[0]}", "iops", "IOPS", hv("iops", cfg_name), "headline.csv",
                "CPU: stress on the unused CPUs" if d else "CPU: rate at the roofline", restates="" if d else _ROOF,
                depends_on="dev_iops; core_rate", backend="upcie", ncpus=_NCPUS_HEADLINE, ndevs=16, qdepth=CPU_QDEPTH,
                iosize=512, thr_sib=int(cfg_name[0] in "AB"), stress=int(cfg_name[0] in "BD"),
            )
        )  # fmt: skip
    return rows


def _pcie_points() -> list[dict]:
    rows: list[dict] = []
    pc = reference.published("pcie-bandwidth-saturation")
    src = reference.PUBLISHED_FILES["pcie-bandwidth-saturation"]
    for s, g in pc.groupby("iosize"):
        kw = dict(backend="upcie-cuda", ncpus=1, ndevs=int(g["ndevs"].iloc[0]), qdepth=CPU_QDEPTH, iosize=int(s))
        gb, link = g["gbps"].mean(), g["dcgm_gbps"].mean()
        cal = s == 4096
        rest = "definition: 4 x dev_iops x size" if s == 512 else "calibrated link_bw"
        rows.append(_pt("pcie_saturation", f"gbps/s{s}", "gbps", "GB/s", g["gbps"].mean(), src,
                        "calibration" if cal else "P2P: payload at a cap", restates="" if cal else rest, **kw))  # fmt: skip
        if cal:
            rows.append(_pt("pcie_saturation", f"link_gbps/s{s}", "link_gbps", "GB/s", g["dcgm_gbps"].mean(), src,
                            "calibration", **kw))  # fmt: skip
        rows.append(
            _pt(
                "pcie_saturation", f"link_ratio/s{s}", "ratio", "link B / payload B", link / gb, src,
                "P2P: link bytes per payload byte", restates="calibrated link_ratio" if s >= 4096 else "",
                depends_on="link_ratio", **kw,
            )
        )  # fmt: skip
    return rows


def _gpu_points() -> list[dict]:
    rows: list[dict] = []
    s0, s1 = "seeds/seed000_statements.csv", "seeds/seed001_statements.csv"
    at_cap = "GPU: rate at a cap"
    for nq, qd in ((1, 128), (1, 512), (2, 128)):
        cal = nq == 1
        rows.append(
            _pt(
                "cuda_qdepth", f"iops/nq{nq}-qd{qd}", "iops", "IOPS",
                reference.cuda_value("cuda_qdepth", "iops", nqueues=str(nq), qdepth=str(qd)), s0,
                "calibration" if cal else at_cap, restates="" if cal else _ROOF,
                nqueues=nq, qdepth=qd, iosize=512, ndevs=NDEVS_CUDA,
            )
        )  # fmt: skip
    rows.append(_pt("cuda_qdepth", "iops/nq>=2-plateau", "iops", "IOPS",
                    reference.cuda_value("cuda_qdepth", "iops", nqueues=">=2", qdepth=""), s0, at_cap, restates=_ROOF,
                    iosize=512, ndevs=NDEVS_CUDA))  # fmt: skip
    rows.append(_pt("cuda_qdepth", "gain/nq2-vs-nq1-qd128", "gain_pct", "%",
                    reference.cuda_value("cuda_qdepth", "gain_over_nqueues1", nqueues="2", qdepth="128"), s0, at_cap,
                    restates=_ROOF + " over calibration point iops/nq1-qd128", qdepth=128, iosize=512,
                    ndevs=NDEVS_CUDA))  # fmt: skip
    mq = reference.cuda_min_qdepth("cuda_qdepth")
    for r in mq[mq["reached"]].itertuples():
        rows.append(
            _pt(
                "cuda_qdepth", f"min_qdepth/nq{r.nqueues}", "min_qdepth", "qdepth", r.min_qdepth,
                "seeds/seed000_min_qdepth.csv", "GPU: saturating depth per queue count",
                depends_on="round (nq=1 points); round_cost; dev_iops; definition: 95 % of the roofline",
                nqueues=r.nqueues, iosize=512, ndevs=NDEVS_CUDA,
            )
        )  # fmt: skip
    st = reference.cuda_statements("cuda_iosize")
    for r in st[st["quantity"] == "gbps"].itertuples():
        s, qd = int(r.iosize_bytes), int(r.qdepth)
        cal = (s, qd) == (65536, 1)
        rows.append(
            _pt(
                "cuda_iosize", f"gbps/s{s}-qd{qd}", "gbps", "GB/s", r.number, s1, "calibration" if cal else at_cap,
                restates="" if cal else (
                    "calibration point cuda_qdepth iops/nq1-qd128 (the same configuration)" if s == 512
                    else "calibrated link_bw (at the link cap)"),
                nqueues=1, qdepth=qd, iosize=s, ndevs=NDEVS_CUDA,
            )
        )  # fmt: skip
    ceil = st[(st["quantity"] == "practical_ceiling") & st["number_high"].notna()].iloc[0]
    rows.append(_pt("cuda_iosize", "gbps/practical-ceiling", "gbps", "GB/s", (ceil.number + ceil.number_high) / 2, s1,
                    at_cap, restates="calibrated link_bw", nqueues=1, ndevs=NDEVS_CUDA))  # fmt: skip
    mi = reference.cuda_min_qdepth("cuda_iosize")
    for r in mi[mi["reached"]].itertuples():
        rows.append(
            _pt(
                "cuda_iosize", f"min_qdepth/s{r.iosize}", "min_qdepth", "qdepth", r.min_qdepth,
                "seeds/seed001_min_qdepth.csv", "GPU: saturating depth per I/O size",
                fact="cuda_iosize/min_qdepth: qd x size constant",
                depends_on="round (incl. gbps/s65536-qd1); link_bw; definition: 95 % of link_bw",
                nqueues=1, iosize=r.iosize, ndevs=NDEVS_CUDA,
            )
        )  # fmt: skip
    return rows


def published_points() -> pd.DataFrame:
    """Every published point of the modelled kinds, one row each, with its metadata (module docstring)
    and configuration (backend, ncpus, ndevs, nqueues, qdepth, iosize, thr_sib, stress)."""
    df = pd.DataFrame(_cpu_points() + _pcie_points() + _gpu_points())
    dup = df[df.duplicated(["study", "point_id"])]
    if not dup.empty:
        raise ValueError(f"published_points: duplicate point ids {dup.point_id.tolist()}")
    return df


def split(points: pd.DataFrame | None = None, calib: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(calibration points, held-out points): every point named in the calibration file, and all others."""
    points = published_points() if points is None else points
    calib = calibration_set() if calib is None else calib
    key = points["study"] + "|" + points["point_id"]
    want = set(calib["study"] + "|" + calib["point_id"])
    missing = want - set(key)
    if missing:
        raise KeyError(f"calibration file names points that do not exist: {sorted(missing)}")
    return points[key.isin(want)].copy(), points[~key.isin(want)].copy()


# ---------------------------------------------------------------------------- predictors ---
Gpu = Callable[..., np.ndarray]


def predictors(p: Params, little_s: float) -> dict[str, tuple[Gpu, Gpu]]:
    """(gpu(nq, qd, size), cpu(backend, ncpus, ndevs, size)) per predictor: the model and the baselines."""

    def roof_gpu(nq, qd, s):
        s = np.asarray(s, float)
        return np.minimum(NDEVS_CUDA * np.minimum(p.dev_iops, p.dev_bw / s), p.link_bw / s) + 0 * np.asarray(qd, float)

    def roof_cpu(b, n, d, s):
        x = np.minimum(d * np.minimum(p.dev_iops, p.dev_bw / s), n * p.core_rate[b])
        return np.minimum(x, p.link_bw / s) if b == "upcie-cuda" else x

    return {
        "model": (lambda nq, qd, s: gpu_iops(p, nq, qd, s), lambda b, n, d, s: cpu_iops(p, b, n, d, s)),
        "roofline": (roof_gpu, roof_cpu),
        "little": (
            lambda nq, qd, s: np.minimum(roof_gpu(nq, qd, s), NDEVS_CUDA * np.asarray(nq * qd, float) / little_s),
            lambda b, n, d, s: np.minimum(roof_cpu(b, n, d, s), n * d * CPU_QDEPTH / little_s),
        ),
    }


def little_latency(points: pd.DataFrame, calib: pd.DataFrame) -> float:
    """The constant latency of the Little's-law baseline: median N / X over the round calibration points."""
    ids = calib.loc[calib["parameter"] == "round", ["study", "point_id"]]
    r = points.merge(ids, on=["study", "point_id"])
    x = np.where(r["quantity"] == "iops", r["published"], r["published"] * 1e9 / r["iosize"])
    return float(np.median(r["ndevs"] * r["nqueues"] * r["qdepth"] / x))


def _min_qd(gpu: Gpu, nq, s, ceiling_iops: float, qds) -> float:
    qd = np.asarray(sorted(qds), float)
    ok = gpu(nq, qd, s) >= analysis.SATURATION_FRACTION * ceiling_iops * (1 - 1e-12)
    return float(qd[ok][0]) if ok.any() else float("nan")


def predict(p: Params, points: pd.DataFrame, gpu: Gpu | None = None, cpu: Gpu | None = None) -> pd.Series:
    """Each point's value (same unit as ``published``) from `gpu`/`cpu` (default: the model's)."""
    gpu = gpu or (lambda nq, qd, s: gpu_iops(p, nq, qd, s))
    cpu = cpu or (lambda b, n, d, s: cpu_iops(p, b, n, d, s))
    roof = NDEVS_CUDA * p.dev_iops
    out = []
    for r in points.itertuples():
        pid = r.point_id
        if pid == "device_iops_cap":
            v = p.dev_iops
        elif pid == "bandwidth/4096B-plateau":
            v = r.ndevs * p.dev_bw / 2**30
        elif r.quantity == "min_ncpus":
            ok = [
                n for n in range(1, 17) if cpu(r.backend, n, r.ndevs, r.iosize) >= analysis.SATURATION_FRACTION * roof
            ]
            v = float(ok[0]) if ok else float("nan")
        elif r.quantity == "ratio":
            v = p.link_ratio
        elif r.study in ("cpu_initiated", "pcie_saturation"):
            ncpus = _NCPUS_HEADLINE if np.isnan(r.ncpus) else r.ncpus
            x = float(cpu(r.backend, ncpus, r.ndevs, r.iosize))
            v = {"iops": x, "gib_s": x * r.iosize / 2**30, "gbps": x * r.iosize / 1e9,
                 "link_gbps": x * r.iosize / 1e9 * p.link_ratio}[r.quantity]  # fmt: skip
        elif r.quantity == "min_qdepth":
            st = r.study
            qds, _, _ = sweep(st)
            v = _min_qd(gpu, r.nqueues, r.iosize, roof if st == "cuda_qdepth" else p.link_bw / r.iosize, qds)
        elif pid == "iops/nq>=2-plateau":
            qds, nqs, _ = sweep("cuda_qdepth")
            v = float(np.mean([gpu(n, max(qds), r.iosize) for n in nqs if n >= 2]))
        elif pid == "gain/nq2-vs-nq1-qd128":
            v = 100 * (float(gpu(2, r.qdepth, r.iosize)) / float(gpu(1, r.qdepth, r.iosize)) - 1)
        elif pid == "gbps/practical-ceiling":
            qds, _, sizes = sweep("cuda_iosize")
            v = max(float(gpu(1, q, s)) * s / 1e9 for q in qds for s in sizes)
        else:
            x = float(gpu(r.nqueues, r.qdepth, r.iosize))
            v = x if r.quantity == "iops" else x * r.iosize / 1e9
        out.append(v)
    return pd.Series(out, index=points.index, dtype=float)


# ------------------------------------------------------------------------------ validate ---
def _err(pred: pd.Series, pub: pd.Series) -> pd.Series:
    e = (pred - pub) / pub
    return e.where(pred.notna(), np.inf)  # "not reached in the sweep" where the publication reached it: a miss


def informative(df: pd.DataFrame) -> pd.DataFrame:
    """The scored rows: held out and restating nothing."""
    return df[(df["role"] == "held_out") & (df["restates"].fillna("") == "")]


def validate(points: pd.DataFrame | None = None, calib: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per published point: role, metadata, published, the model's prediction and signed
    relative error, and the two baselines' predictions."""
    points = published_points() if points is None else points
    calib = calibration_set() if calib is None else calib
    p = fit(points, calib)
    cal, held = split(points, calib)
    cal["role"], held["role"] = "calibration", "held_out"
    cal["restates"] = ""
    df = pd.concat([cal, held], ignore_index=True)
    pr = predictors(p, little_latency(points, calib))
    df["predicted"] = predict(p, df)
    df["rel_error"] = _err(df["predicted"], df["published"])
    for name in ("roofline", "little"):
        df[name] = predict(p, df, *pr[name])
    df["model_version"] = MODEL_VERSION
    df["note"] = ""
    for fam, (text, _) in MISSING_MECHANISMS.items():
        sel = df.index.isin(informative(df).index) & (df["family"] == fam) & ~is_hit(df["rel_error"])
        df.loc[sel, "note"] = "conjecture: " + text
    df = df.sort_values(["study", "role", "point_id"], key=lambda c: c.map(_natural) if c.name == "point_id" else c)
    return df[VALIDATION_COLUMNS].reset_index(drop=True)


def _natural(s: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))


def is_hit(rel_error):
    """The one definition of a model hit: |relative error| <= EXPLAIN_ABOVE (a scalar or a Series; NaN
    and infinite errors, e.g. "not reached" where the publication reached it, are misses)."""
    e = pd.Series(rel_error, dtype=float) if not np.isscalar(rel_error) else pd.Series([rel_error], dtype=float)
    hit = e.abs().le(EXPLAIN_ABOVE) & np.isfinite(e)
    if np.isscalar(rel_error):
        return bool(hit.iloc[0])
    return hit.set_axis(rel_error.index) if isinstance(rel_error, pd.Series) else hit.to_numpy()


def status(rel_error) -> str:
    """'model hit' or 'model miss' (the book's status words) for one scored fact's error."""
    return MODEL_HIT if is_hit(rel_error) else MODEL_MISS


def fact_errors(df: pd.DataFrame) -> pd.DataFrame:
    """One row per scored fact: family, fact, rows, published values, and the signed relative error of
    the model and of each baseline (for a fact of several rows, its row with the largest |error|)."""
    inf = informative(df).copy()
    for c in ("roofline", "little"):
        inf[f"{c}_error"] = _err(inf[c], inf["published"])
    rows = []
    for (fam, fact), g in inf.groupby(["family", "fact"], sort=False):
        worst = lambda c, g=g: g[c].iloc[int(np.argmax(g[c].abs().to_numpy()))]  # noqa: E731
        rows.append({"family": fam, "fact": fact, "rows": len(g), "published": g["published"].tolist(),
                     "model": worst("rel_error"), "roofline": worst("roofline_error"),
                     "little": worst("little_error")})  # fmt: skip
    return pd.DataFrame(rows)


def fact_table(df: pd.DataFrame) -> pd.DataFrame:
    """The scored facts for a rendered table, one row per fact: fact, family, the model's, Little's and the
    roofline's signed error, the model's status (``status``), and for a miss the conjectured mechanism and
    the experiment that would decide it."""
    f = fact_errors(df)
    out = f[["fact", "family", "model", "little", "roofline"]].copy()
    out["status"] = [status(e) for e in out["model"]]
    mech = [MISSING_MECHANISMS.get(fam, ("", "")) if st == MODEL_MISS else ("", "")
            for fam, st in zip(out["family"], out["status"])]  # fmt: skip
    out["conjecture"] = [m[0] for m in mech]
    out["would_decide"] = [m[1] for m in mech]
    return out.reset_index(drop=True)


def headline(df: pd.DataFrame) -> dict[str, int]:
    """The model against a constant-latency Little's law on the scored facts: how many facts, how many each
    predictor hits (``is_hit``), how many facts only the model hits and only Little hits, and how many facts
    every predictor (model, Little, roofline) scores the same."""
    f = fact_errors(df)
    m, li, ro = (is_hit(f[c]) for c in ("model", "little", "roofline"))
    return {
        "facts": len(f),
        "model_hits": int(m.sum()),
        "little_hits": int(li.sum()),
        "roofline_hits": int(ro.sum()),
        "model_only": int((m & ~li).sum()),
        "little_only": int((li & ~m).sum()),
        "all_same": int(((m == li) & (m == ro)).sum()),
        "gpu_facts": int(f["family"].str.startswith("GPU").sum()),
        "gpu_model_hits": int(m[f["family"].str.startswith("GPU")].sum()),
        "gpu_little_hits": int(li[f["family"].str.startswith("GPU")].sum()),
    }


#: The mechanisms the model's prose rests on, each a conjecture: (mechanism, what rests on it, the experiment
#: that would decide it). The model's round cost is one of them; the others are what its misses lack.
CONJECTURES = [
    (
        "a fixed device cost per lock-step round that more queues do not hide (the model's round cost)",
        "the saturating depth of sixteen queues, the calibration point it is fitted to, and the four- and "
        "eight-queue depths it then gets",
        "a sweep at a fixed number of commands in flight per device split over more and more queues: a per-round "
        "cost makes the rate fall as each queue's rounds get shorter; no such rate is published",
    ),
    *[(f"{m} (misses: {fam})", "the model's misses in this family", d) for fam, (m, d) in MISSING_MECHANISMS.items()],
]


def conjectures() -> pd.DataFrame:
    """CONJECTURES as a table (mechanism, rests_on, would_decide)."""
    return pd.DataFrame(CONJECTURES, columns=["mechanism", "rests_on", "would_decide"])


def family_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per family of scored facts: how many facts, how many the model and each baseline hit (``is_hit``),
    and the largest |error| of each."""
    f = fact_errors(df)
    rows = []
    for fam, g in f.groupby("family", sort=False):
        row = {"family": fam, "facts": len(g)}
        for c in ("model", "little", "roofline"):
            row[f"{c}_hits"] = int(is_hit(g[c]).sum())
            row[f"{c}_max_abs_error"] = float(g[c].abs().max())
        rows.append(row)
    return pd.DataFrame(rows)


def bound_checks(p: Params) -> pd.DataFrame:
    """The published "not reached" entries of the min-QD tables (a bound, not a number), beside
    whether the model also stays below the saturation fraction over the whole published sweep."""
    rows = []
    for study, key in (("cuda_qdepth", "nqueues"), ("cuda_iosize", "iosize")):
        pub = reference.cuda_min_qdepth(study)
        mod = model_min_qdepth(p, study).set_index(key)["saturating_x"]
        for r in pub[~pub["reached"]].itertuples():
            m = mod.get(getattr(r, key))
            rows.append({"study": study, key: getattr(r, key), "published": f"> {r.min_qdepth}",
                         "model": "not reached" if m is None else str(m), "agrees": m is None})  # fmt: skip
    return pd.DataFrame(rows)


def min_qdepth_table(p: Params, study: str, validation: pd.DataFrame | None = None) -> pd.DataFrame:
    """Published min-QD table beside the model's, with total CUDA threads; bounds as text. With `validation`
    (validate()'s frame) a ``status`` column says what each row is: "calibration input", the status of the
    scored fact the row belongs to ("model hit"/"model miss": the six depths of seed 001 are one fact and share
    its status), or for a published bound ("not reached") whether the model stays below it too."""
    key = "nqueues" if study == "cuda_qdepth" else "iosize"
    pub = reference.cuda_min_qdepth(study)
    mod = model_min_qdepth(p, study).set_index(key)["saturating_x"]
    per = (lambda r: r.nqueues * NDEVS_CUDA) if study == "cuda_qdepth" else (lambda r: NDEVS_CUDA)
    facts = None
    if validation is not None:
        fe = fact_errors(validation).set_index("fact")["model"]
        v = validation[(validation["study"] == study) & (validation["quantity"] == "min_qdepth")].set_index("point_id")
        facts = {pid: (CALIBRATION if r.role == "calibration" else status(fe.get(r.fact, np.inf)))
                 for pid, r in v.iterrows()}  # fmt: skip
    rows = []
    for r in pub.itertuples():
        m = mod.get(getattr(r, key))
        row = {
            key: getattr(r, key),
            "published_min_qdepth": (str(r.min_qdepth) if r.reached else f"> {r.min_qdepth}"),
            "published_threads": (str(r.total_cuda_threads) if r.reached else f"> {r.total_cuda_threads}"),
            "model_min_qdepth": "not reached" if m is None else str(m),
            "model_threads": "–" if m is None else str(int(m) * per(r)),
            "rel_error": (float("nan") if (m is None or not r.reached) else (m - r.min_qdepth) / r.min_qdepth),
        }
        if facts is not None:
            pid = f"min_qdepth/nq{r.nqueues}" if study == "cuda_qdepth" else f"min_qdepth/s{r.iosize}"
            bound = "a bound, not scored: the model stays below it too" if m is None else "a bound the model breaks"
            row["status"] = facts.get(pid, "") if r.reached else bound
        rows.append(row)
    return pd.DataFrame(rows)


def not_predicted() -> pd.DataFrame:
    """Published points of the same kinds that the model does not predict, and why."""
    h = reference.headline()
    cpu = h[(h["experiment"] == "cpu-initiated") & (h["quantity"] == "iops") & (h["config"].str.len() < 30)]
    rows = [
        {
            "study": "cpu_initiated",
            "point": f"headline: {c}",
            "why": "CPU frequency or SMT setting; the per-core rate is calibrated at the performance governor with "
            "turbo and SMT on, and the model has no frequency term",
        }
        for c in cpu["config"]
        if not c.startswith(("B:", "C:", "D:"))
    ]
    rows.append(
        {
            "study": "tool_comparison",
            "point": "all 20 stack x thread-count means",
            "why": "each stack has its own per-core rate and 1-4 CPU threads with their siblings; only the xnvmeperf "
            "rates are the model's submitter, and their one-core points would be calibration inputs",
        }
    )
    return pd.DataFrame(rows)


#: Which validation points each study's figure draws, and on which axes (x, y).
_FIGURE_AXES = {
    "cpu_initiated": ("ncpus", "iops"),
    "cuda_qdepth": ("qdepth", "iops"),
    "cuda_iosize": ("iosize", "gbps"),
    "pcie_saturation": ("iosize", "gbps"),
}


def figure_points(df: pd.DataFrame, study: str) -> pd.DataFrame:
    """The published points of `study` that sit on its model figure (a rate at one configuration),
    with x, y, ``role``, ``kind`` (plots.POINT_KINDS) and ``label``; min-QD points and derived
    numbers go to the tables instead."""
    from .plots import point_kind

    x, y = _FIGURE_AXES[study]
    pts = published_points()
    v = df[(df["study"] == study) & (df["quantity"] == y)].merge(
        pts[["study", "point_id", "nqueues", "qdepth", "iosize", "ncpus", "backend", "source"]],
        on=["study", "point_id"],
    )
    v = v[v[x].notna() & v["qdepth"].notna()].copy()
    v[y] = v["published"]
    v["kind"] = [point_kind(r, s) for r, s in zip(v["role"], v["restates"].fillna(""))]
    v["label"] = [
        f"{pid} ({src}): {val:,.0f} {u}" if abs(val) >= 1000 else f"{pid} ({src}): {val:.4g} {u}"
        for pid, src, val, u in zip(v.point_id, v.source, v.published, v.unit)
    ]
    cols = ["nqueues", "qdepth", "iosize", "ncpus", "backend", "role", "kind", "label", "point_id"]
    cols = list(dict.fromkeys([x, y, *cols]))
    return v[cols].reset_index(drop=True)


# ------------------------------------------------------------------------------------ CLI ---
def _write_csv(df: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    df.to_csv(tmp, index=False, float_format="%.6g", lineterminator="\n")
    tmp.replace(path)
    return path


def load_validation() -> pd.DataFrame:
    """The committed validation (data/results/model/validation.csv, which `make book` rewrites first): what a
    chapter shows, read from the file its footer links; the same frame as validate() (tests/test_model.py)."""
    df = pd.read_csv(reference.data_root() / VALIDATION_PATH, keep_default_na=False, na_values=[""])
    for c in ("restates", "depends_on", "note"):
        df[c] = df[c].fillna("")
    return df


def write_validation(path: str | Path | None = None) -> Path:
    """Fit, validate and write the CSV (6 significant digits, errors to 6 decimals: the same bytes every time)."""
    df = validate()
    df["rel_error"] = df["rel_error"].round(6) + 0.0  # + 0.0 turns -0 into 0
    return _write_csv(df, Path(path) if path else reference.data_root() / VALIDATION_PATH)


def write_profile(path: str | Path | None = None) -> Path:
    """The pm1753 emulator profile from the fitted parameters (read by src/nvme/emu/calibration.cmake)."""
    p = fit(published_points())
    return _write_csv(profile_rows(p), Path(path) if path else reference.data_root() / PROFILE_PATH)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nvmelab.results.model_validation", description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="validation CSV to write (default: data/results/model/validation.csv)")
    ap.add_argument("--profile", help="profile CSV to write (default: data/results/model/pm1753-profile.csv)")
    args = ap.parse_args(argv)
    path = write_validation(args.out)
    write_profile(args.profile)
    t = family_table(pd.read_csv(path, keep_default_na=False, na_values=[""]))
    sys.stdout.write(f"{path}: {int(t['facts'].sum())} informative facts in {len(t)} families\n")
    sys.stdout.write(t.to_string(index=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def study_table(df: pd.DataFrame, study: str) -> pd.DataFrame:
    """The validation rows of one study, for a rendered table (point, role, what it restates, published,
    model, error in %)."""
    cols = ["point_id", "role", "restates", "quantity", "unit", "published", "predicted", "rel_error"]
    t = df[df["study"] == study][cols].copy()
    t["restates"] = t["restates"].fillna("")
    t["rel_error"] = t["rel_error"] * 100
    return t.reset_index(drop=True)
