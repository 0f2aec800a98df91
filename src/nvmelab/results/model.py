# SPDX-License-Identifier: BSD-3-Clause
"""One device model, two submitters: the physics of a PM1753-like device fitted once to named
published points, driven either by CPU threads that keep their queues full or by GPU queues that
work in lock-step rounds.

Device physics (``Params``; each number fitted by code from the calibration points that
data/reference/model-calibration.csv names, with the reason each can calibrate it):

    dev_iops        the device's command rate cap (IOPS)
    dev_bw          the device's payload bandwidth cap (bytes/s)
    lat_s           a queue's fixed turnaround: first command in to last completion out (s)
    queue_cmd_s     per-command fetch cost of ONE submission queue (s): a queue's commands are
                    fetched one after the other, so one queue never runs faster than 1 / queue_cmd_s
    byte_s          per payload byte of a command's own latency (s/byte): the transfer of the
                    round's last command (the device's bandwidth cap is dev_bw, shared by its queues)
    round_cost_s    device time a lock-step round costs on top of its commands (s): the per-round
                    arbitration/fetch/doorbell work that more queues do not hide
    link_bw         the device-to-GPU link's payload cap, shared by all devices (bytes/s)
    link_ratio      link bytes per payload byte on that link

Submitters:

    CPU (``cpu_iops``): ``ncpus`` threads, each with ``nqueues`` queues on every device (the
    published set-up: a queue per core per device), each queue kept full at ``qdepth``. A queue runs
    min(1 / queue_cmd_s, qdepth / (lat_s + queue_cmd_s + size x byte_s));
    a device min(dev_iops, dev_bw / size, the sum of its queues); all together min(ndevs x device,
    ncpus x core_rate[backend], link_bw / size when the payload goes to GPU memory). A full queue pays
    no round cost: its next commands are waiting while the current ones are served.
    GPU (``gpu_iops``): a queue submits qdepth commands and waits for all of them: a round takes
    T = lat_s + qdepth x queue_cmd_s + size x byte_s; a device runs
    min(dev_iops_eff(qdepth), dev_bw / size, nqueues x qdepth / T) with
    dev_iops_eff(qdepth) = 1 / (1 / dev_iops + round_cost_s / qdepth), and all devices together are
    capped by link_bw / size. ``core_rate`` (CPU IOPS per core and backend) belongs to the CPU
    submitter, not to the device.

``lockstep(p)`` is the one place that hands the GPU discipline's parameters to the GPU emulator;
``profile_rows(p)`` the pm1753 emulator profile (written to data/results/model/pm1753-profile.csv,
read by src/nvme/emu/calibration.cmake). Validation: nvmelab.results.model_validation.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import analysis, reference

#: Bumped whenever the equations or the calibration set change.
MODEL_VERSION = "devsub-2"
#: The calibration file, in data/reference/.
CALIBRATION_FILE = "model-calibration.csv"
#: The published device-initiated server.
NDEVS_CUDA = 16
#: Queue depth of every published CPU-initiated point (seed 004's optimum; the records).
CPU_QDEPTH = 128
#: The grid the round cost is searched over (seconds, log-spaced).
_ROUND_COST_GRID = np.geomspace(1e-9, 1e-5, 801)


# ------------------------------------------------------------------------------ parameters ---
@dataclass(frozen=True)
class Params:
    dev_iops: float
    dev_bw: float
    core_rate: dict = field(default_factory=dict)
    link_bw: float = float("inf")
    link_ratio: float = 1.0
    lat_s: float = 0.0
    queue_cmd_s: float = 0.0
    byte_s: float = 0.0
    round_cost_s: float = 0.0

    def as_frame(self) -> pd.DataFrame:
        """One row per parameter, with its unit, for a table."""
        rows = [
            ("dev_iops", self.dev_iops / 1e6, "M IOPS"),
            ("dev_bw", self.dev_bw / 1e9, "GB/s"),
            ("lat", self.lat_s * 1e6, "µs"),
            ("queue_cmd", self.queue_cmd_s * 1e9, "ns per command"),
            ("byte", self.byte_s * 1e12, "ps per byte"),
            ("round_cost", self.round_cost_s * 1e9, "ns per lock-step round"),
            ("link_bw", self.link_bw / 1e9, "GB/s"),
            ("link_ratio", self.link_ratio, "link bytes per payload byte"),
        ]
        rows += [(f"core_rate[{b}]", v / 1e6, "M IOPS per core") for b, v in sorted(self.core_rate.items())]
        return pd.DataFrame(rows, columns=["parameter", "value", "unit"])


def _a(*v):
    return (np.asarray(x, float) for x in v)


def round_time(p: Params, qdepth, iosize):
    """Seconds per lock-step round of one queue (GPU submitter): turnaround, the queue's fetches, the
    last command's transfer."""
    return p.lat_s + np.asarray(qdepth, float) * p.queue_cmd_s + np.asarray(iosize, float) * p.byte_s


def dev_iops_eff(p: Params, qdepth):
    """A device's command cap when every command comes in lock-step rounds of `qdepth`."""
    return 1.0 / (1.0 / p.dev_iops + p.round_cost_s / np.asarray(qdepth, float))


def gpu_iops(p: Params, nqueues, qdepth, iosize, ndevs: int = NDEVS_CUDA):
    """Device-initiated (GPU lock-step) IOPS of `ndevs` devices (numpy-broadcast over the arguments)."""
    nq, qd, s = _a(nqueues, qdepth, iosize)
    per_dev = np.minimum(np.minimum(dev_iops_eff(p, qd), p.dev_bw / s), nq * qd / round_time(p, qd, s))
    return np.minimum(ndevs * per_dev, p.link_bw / s)


def cpu_iops(p: Params, backend: str, ncpus, ndevs, iosize, qdepth=CPU_QDEPTH, nqueues=1):
    """CPU-initiated IOPS: ``ncpus`` threads, ``nqueues`` full queues each on every device."""
    if backend not in p.core_rate:
        raise KeyError(f"cpu_iops: no per-core rate for backend {backend!r}; calibrated: {sorted(p.core_rate)}")
    n, d, s, qd, nq = _a(ncpus, ndevs, iosize, qdepth, nqueues)
    per_q = np.minimum(1.0 / p.queue_cmd_s, qd / round_time(p, 1, s))
    per_dev = np.minimum(np.minimum(p.dev_iops, p.dev_bw / s), n * nq * per_q)
    x = np.minimum(d * per_dev, n * p.core_rate[backend])
    if backend == "upcie-cuda":  # payload into GPU memory: through the shared link
        x = np.minimum(x, p.link_bw / s)
    return x


def lockstep(p: Params) -> dict[str, float]:
    """The GPU (lock-step) discipline's device parameters, nominal, for the GPU emulator: the one
    place they are handed over (names as the emulator's URI keys where it has one)."""
    return {
        "lat_ns": p.lat_s * 1e9,
        "queue_iops": 1.0 / p.queue_cmd_s,
        "byte_ns": p.byte_s * 1e9,
        "dev_iops": p.dev_iops,
        "dev_bw": p.dev_bw,
        "round_cost_ns": p.round_cost_s * 1e9,
        "link_bw": p.link_bw,
    }


# ----------------------------------------------------------------------------- calibration ---
def calibration_set() -> pd.DataFrame:
    """The calibration file: parameter, study, point_id, why."""
    return pd.read_csv(reference.reference_dir() / CALIBRATION_FILE, dtype=str)


def _one(points: pd.DataFrame, calib: pd.DataFrame, parameter: str) -> pd.DataFrame:
    ids = calib.loc[calib["parameter"] == parameter, ["study", "point_id"]]
    sel = points.merge(ids, on=["study", "point_id"])
    if sel.empty:
        raise KeyError(f"fit: no calibration point for {parameter!r}")
    return sel


def fit_round(
    points: pd.DataFrame, dev_iops: float = float("inf"), link_bw: float = float("inf")
) -> tuple[float, float, float]:
    """Least squares of the one-queue round time T = lat + qdepth x cmd + size x byte over
    device-initiated points (columns nqueues, qdepth, iosize, ndevs, quantity iops|gbps, published).
    Each point's round time is ndevs x nqueues x qdepth / IOPS. Needs three points that separate the
    terms; refuses points at or above a cap (their rate says nothing about the round)."""
    rows, t = [], []
    for r in points.itertuples():
        iops = r.published if r.quantity == "iops" else r.published * 1e9 / r.iosize
        if iops >= 0.999 * min(r.ndevs * dev_iops, link_bw / r.iosize):
            raise ValueError(f"fit_round: {r.point_id} is at a cap, it cannot calibrate the round")
        t.append(r.ndevs * r.nqueues * r.qdepth / iops)
        rows.append([1.0, r.qdepth, r.iosize])
    a = np.array(rows, float)
    if np.linalg.matrix_rank(a) < 3:
        raise ValueError("fit_round: the points do not separate latency, per-command and per-byte cost")
    sol, *_ = np.linalg.lstsq(a, np.array(t), rcond=None)
    if (sol < 0).any():
        raise ValueError(f"fit_round: negative round cost {sol}; the points contradict the round model")
    return float(sol[0]), float(sol[1]), float(sol[2])


@functools.cache
def sweep(study: str) -> tuple[list[int], list[int], list[int]]:
    """(queue depths, queue counts, I/O sizes) of a device-initiated seed's published sweep."""
    pr = reference.cuda_parameters(study)
    return pr["Queue depth"], pr.get("Number of queues", [1]), pr.get("I/O size", [512])


def gpu_min_qdepth(p: Params, nqueues, iosize, qdepths: Sequence[int], ceiling_iops: float) -> float:
    """Smallest queue depth of `qdepths` whose GPU rate reaches SATURATION_FRACTION of `ceiling_iops`
    (16 devices); NaN when none does."""
    qd = np.asarray(sorted(qdepths), float)
    x = gpu_iops(p, nqueues, qd, iosize)
    ok = x >= analysis.SATURATION_FRACTION * ceiling_iops * (1 - 1e-12)
    return float(qd[ok][0]) if ok.any() else float("nan")


def fit_round_cost(p: Params, facts: pd.DataFrame) -> float:
    """The round cost: the middle (geometric) of the interval of values for which the model's smallest
    saturating depth equals every published one in `facts` (rows with nqueues, iosize, published min
    queue depth, of seed 000's sweep); where no value matches them all, the middle of those matching
    the most."""
    if facts.empty:
        raise KeyError("fit_round_cost: no saturating-depth point to calibrate the round cost")
    qds, _, _ = sweep("cuda_qdepth")
    roof = NDEVS_CUDA * p.dev_iops
    hits = np.zeros(len(_ROUND_COST_GRID), int)
    for i, c in enumerate(_ROUND_COST_GRID):
        q = Params(**{**p.__dict__, "round_cost_s": float(c)})
        hits[i] = sum(gpu_min_qdepth(q, r.nqueues, r.iosize, qds, roof) == r.published for r in facts.itertuples())
    best = _ROUND_COST_GRID[hits == hits.max()]
    return float(np.sqrt(best.min() * best.max()))


def fit(points: pd.DataFrame, calib: pd.DataFrame | None = None) -> Params:
    """The parameters, each from its named calibration points (see the module docstring).
    `points`: the published points (nvmelab.results.model_validation.published_points())."""
    calib = calibration_set() if calib is None else calib
    dev_iops = float(_one(points, calib, "dev_iops")["published"].iloc[0])
    plateau = _one(points, calib, "dev_bw").iloc[0]
    dev_bw = plateau["published"] * 2**30 / plateau["ndevs"]
    core = {}
    for prm in sorted(p for p in calib["parameter"] if p.startswith("core_rate:")):
        r = _one(points, calib, prm).iloc[0]
        core[prm.split(":", 1)[1]] = float(r["published"] / r["ncpus"])
    link = _one(points, calib, "link_bw").iloc[0]
    link_bw = float(link["published"] * 1e9)
    lr = _one(points, calib, "link_ratio").iloc[0]
    link_ratio = float(lr["published"] * 1e9 / link_bw)
    lat, cmd, byte = fit_round(_one(points, calib, "round"), dev_iops, link_bw)
    p = Params(dev_iops, dev_bw, core, link_bw, link_ratio, lat, cmd, byte, 0.0)
    return Params(**{**p.__dict__, "round_cost_s": fit_round_cost(p, _one(points, calib, "round_cost"))})


# ------------------------------------------------------------------------------ curves ---
def qdepth_curves(p: Params) -> pd.DataFrame:
    """Model IOPS vs queue depth per nqueues over seed 000's sweep (16 devices, 512 B, GPU rounds)."""
    qds, nqs, sizes = sweep("cuda_qdepth")
    g = pd.DataFrame([(nq, qd) for nq in nqs for qd in qds], columns=["nqueues", "qdepth"])
    g["iosize"] = sizes[0]
    g["iops_mean"] = gpu_iops(p, g.nqueues, g.qdepth, g.iosize)
    g["gbps_mean"] = g.iops_mean * g.iosize / 1e9
    return g


def iosize_curves(p: Params) -> pd.DataFrame:
    """Model bandwidth (GB/s) vs I/O size per queue depth over seed 001's sweep (16 devices, nqueues=1)."""
    qds, _, sizes = sweep("cuda_iosize")
    g = pd.DataFrame([(qd, s) for qd in qds for s in sizes], columns=["qdepth", "iosize"])
    g["nqueues"] = 1
    g["iops_mean"] = gpu_iops(p, 1, g.qdepth, g.iosize)
    g["gbps_mean"] = g.iops_mean * g.iosize / 1e9
    return g


def cpu_curves(p: Params, backend: str = "upcie", ndevs: int = 16) -> pd.DataFrame:
    """Model IOPS vs cores (1-16) for the published CPU-initiated set-up (QD 128, 512 B, a queue per
    core per device)."""
    g = pd.DataFrame({"ncpus": range(1, 17)})
    g["iops_mean"] = cpu_iops(p, backend, g.ncpus, ndevs, 512)
    g["backend"] = backend
    return g


def ceilings(p: Params) -> dict[str, float]:
    """What each device-initiated study's saturation is measured against: the 16-device roofline
    (IOPS) and the link's payload cap (GB/s)."""
    return {"cuda_qdepth": NDEVS_CUDA * p.dev_iops, "cuda_iosize": p.link_bw / 1e9}


def model_min_qdepth(p: Params, study: str, fraction: float = analysis.SATURATION_FRACTION) -> pd.DataFrame:
    """The model's smallest queue depth of the published sweep reaching `fraction` of the ceiling
    (analysis.saturation on the model curves); ``saturating_x`` None: not reached in the sweep."""
    if study == "cuda_qdepth":
        return analysis.saturation(qdepth_curves(p), "qdepth", ceilings(p)[study], by=["nqueues"], fraction=fraction)
    return analysis.saturation(
        iosize_curves(p), "qdepth", ceilings(p)[study], mean="gbps_mean", by=["iosize"], fraction=fraction
    )


def pcie_curves(p: Params, sizes: Sequence[int] | None = None) -> pd.DataFrame:
    """Model payload (and link) bandwidth vs I/O size for the PCIe saturation set-up (CPU-initiated,
    upcie-cuda, 4 devices, 1 core, QD 128); `sizes` default: powers of two over the published sizes."""
    pc = reference.published("pcie-bandwidth-saturation")
    if sizes is None:
        lo, hi = int(pc["iosize"].min()), int(pc["iosize"].max())
        sizes = [1 << k for k in range(lo.bit_length() - 1, (2 * hi).bit_length())]
    ndevs, ncpus = int(pc["ndevs"].iloc[0]), int(pc["ncpus"].iloc[0])
    g = pd.DataFrame({"iosize": list(sizes)})
    g["iops_mean"] = cpu_iops(p, "upcie-cuda", ncpus, ndevs, g.iosize)
    g["gbps_mean"] = g.iops_mean * g.iosize / 1e9
    g["link_gbps_mean"] = g.gbps_mean * p.link_ratio
    g["series"] = f"{ndevs} devices, {ncpus} core"
    return g


# ------------------------------------------------------------------- the emulator's profile ---
#: Where the generated emulator profile goes (relative to the data folder); calibration.cmake reads it.
PROFILE_PATH = "results/model/pm1753-profile.csv"


def profile_rows(p: Params, calib: pd.DataFrame | None = None) -> pd.DataFrame:
    """The pm1753 emulator profile (nominal values) from the fitted parameters: name (the C macro
    suffix), value, unit, and the published points that fed it. The emulator runs the CPU
    discipline: per-queue fetch cost, device caps, the fixed turnaround as its latency; a full queue
    pays no round cost, so the profile has none (``lockstep()`` hands it to the GPU emulator). The
    emulator's latency is fixed per command: LAT_NS is lat_s plus the transfer of a 512 B command."""
    calib = calibration_set() if calib is None else calib

    def src(*params: str) -> str:
        c = calib[calib["parameter"].isin(params)]
        return "; ".join(f"{s}:{i}" for s, i in zip(c["study"], c["point_id"]))

    rows = [
        ("LAT_NS", (p.lat_s + 512 * p.byte_s) * 1e9, "ns", src("round")),
        ("QUEUE_IOPS", 1.0 / p.queue_cmd_s, "commands/s", src("round")),
        ("DEV_IOPS", p.dev_iops, "commands/s", src("dev_iops")),
        ("DEV_BW", p.dev_bw, "bytes/s", src("dev_bw")),
        ("P2P_LINK_BW", p.link_bw, "bytes/s", src("link_bw")),
    ]
    return pd.DataFrame(rows, columns=["name", "value", "unit", "points"]).assign(model_version=MODEL_VERSION)


def emu_query(p: Params) -> str:
    """The ``emu://`` URI overrides (nominal, before ``scale``) equal to the fitted parameters; the
    pm1753 profile is built from the same numbers, so this is for variants (one parameter changed)."""
    r = profile_rows(p).set_index("name")["value"]
    return f"lat={r['LAT_NS']:.0f}ns&qiops={r['QUEUE_IOPS']:.0f}&iops={r['DEV_IOPS']:.0f}&bw={r['DEV_BW']:.0f}"
