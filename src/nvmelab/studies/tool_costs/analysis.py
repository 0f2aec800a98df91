# SPDX-License-Identifier: BSD-3-Clause
"""The seeds' own tools measured here (study ``tool_costs``): what each I/O stack's core costs per I/O.

Every stack drove the same emulated controller (profile ``null``), served over vfio-user on a core of its own
(engines/stacks.py), so a stack's rate is what its own core manages and its cost per I/O is
``ncpus / IOPS`` (every stack polls: its core is busy for the whole run).

Key functions:
    summary(df)                   per stack, I/O size and queue depth: IOPS, ns per I/O (mean, population std),
                                  the stack's measured CPU use and the server's, repetitions
    ratios(summ, iosize, qdepth)  our ratios between stacks beside the published ones at one thread
    cores_for_roofline(summ)      per stack: the cores its measured cost per I/O needs for the sixteen-drive
                                  roofline (61.7 M IOPS), beside what the published runs needed
    server_headroom(summ)         the highest share of its core the server used (or of its sweeps that found
                                  work) in any configuration
    server_paced(summ)            the configurations whose server found work on SERVER_BUSY_FLAG of its sweeps
    pair_ratios(summ, a, b)       stack a's IOPS over stack b's in every configuration both ran
    pivot(summ, value)            one value per stack and configuration, for a compact table

The published tool comparison ran on real drives and another CPU; what is compared is ratios between stacks
and orders of magnitude, never one host's nanoseconds against another's.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from ...results import analysis, reference

#: Our stacks as the tables name them (engines.stacks.stack_label), in the order they are shown.
STACKS = (
    "spdk_nvme_perf (spdk, vfio-user)",
    "spdk_nvme_perf -L (spdk, vfio-user)",
    "bdevperf (spdk, vfio-user)",
    "nvmelab (nvmelab, vfio-user)",
    "nvmelab (nvmelab-emu, in-process)",
)
SPDK_PERF, SPDK_PERF_L, BDEVPERF, NVMELAB, NVMELAB_INPROC = STACKS
#: The published stacks (reference.published("tool-comparison")["stack"]).
PUB_SPDK_PERF = "spdk_nvme_perf (SPDK driver)"
PUB_BDEVPERF = "bdevperf (SPDK driver)"
PUB_XNVME_SPDK = "xnvmeperf + spdk"
PUB_LEANEST = "xnvmeperf + upcie"
#: The comparisons: (what is compared, our numerator and denominator, the published ones or None).
COMPARISONS = (
    ("SPDK's perf tool against its bdev layer, same driver", SPDK_PERF, BDEVPERF, PUB_SPDK_PERF, PUB_BDEVPERF),
    ("the leanest stack against bdevperf", NVMELAB, BDEVPERF, PUB_LEANEST, PUB_BDEVPERF),
    ("the leanest stack against spdk_nvme_perf", NVMELAB, SPDK_PERF, PUB_LEANEST, PUB_SPDK_PERF),
    ("spdk_nvme_perf without against with its latency histogram (-L)", SPDK_PERF, SPDK_PERF_L, None, None),
    ("another tool on SPDK's driver against spdk_nvme_perf", None, None, PUB_XNVME_SPDK, PUB_SPDK_PERF),
    ("our driver in process against over vfio-user", NVMELAB_INPROC, NVMELAB, None, None),
)
NS_PER_S = 1e9
#: A configuration whose server found a command on at least this share of its sweeps rarely waited for the
#: stack: the server may have set the pace there, so the stack's rate is a lower bound (its cost an upper one).
SERVER_BUSY_FLAG = 0.5


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and population std over repetitions per stack, I/O size and queue depth (IOPS, ns per I/O, the
    stack's CPU use and the server's, in percent of one CPU, and the share of the server's service-thread sweeps
    that found work)."""
    if df.empty:
        return pd.DataFrame()
    nan = pd.Series(math.nan, index=df.index)
    df = df.assign(
        ns_per_io=NS_PER_S * df["ncpus"].astype(float) / df["iops"].astype(float),
        cpu_usage=pd.to_numeric(df["cpu_usage"], errors="coerce"),
        server_cpu_usage=pd.to_numeric(df.get("server_cpu_usage", nan), errors="coerce"),
        server_busy_fraction=pd.to_numeric(df.get("server_busy_fraction", nan), errors="coerce"),
    )
    out = analysis.aggregate(
        df,
        by=["stack", "iosize", "qdepth"],
        metrics=["iops", "ns_per_io", "cpu_usage", "server_cpu_usage", "server_busy_fraction"],
    )
    order = {s: i for i, s in enumerate(STACKS)}
    return out.sort_values(["iosize", "qdepth", "stack"], key=lambda c: c.map(order) if c.name == "stack" else c)


def _ours(summ: pd.DataFrame, stack: str | None, iosize: int, qdepth: int) -> float:
    if stack is None:
        return math.nan
    sel = summ[(summ["stack"] == stack) & (summ["iosize"] == iosize) & (summ["qdepth"] == qdepth)]
    return float(sel["iops_mean"].iloc[0]) if not sel.empty else math.nan


def _published_one_thread() -> pd.Series:
    pub = analysis.aggregate(reference.published("tool-comparison"), by=["stack", "ncpus"])
    one = pub[pub["ncpus"] == pub["ncpus"].min()]
    return one.set_index("stack")["iops_mean"]


def ratios(summ: pd.DataFrame, iosize: int = 512, qdepth: int = 128) -> pd.DataFrame:
    """One row per comparison: our IOPS ratio (same core count, so also the inverse ratio of the costs per I/O)
    at `iosize`/`qdepth`, and the published one at one thread (512 B, QD 128, 16 drives); NaN where a side has
    no such pair."""
    pub = _published_one_thread()
    rows = []
    for what, a, b, pa, pb in COMPARISONS:
        ours = _ours(summ, a, iosize, qdepth) / _ours(summ, b, iosize, qdepth) if a else math.nan
        published = float(pub[pa] / pub[pb]) if pa and pa in pub and pb in pub else math.nan
        rows.append({"comparison": what, "ours": ours, "published": published})
    return pd.DataFrame(rows)


def roofline_iops() -> float:
    """The sixteen-drive roofline of 512 B random reads (headline.csv: the published plot constant)."""
    return reference.headline_value("cpu-initiated", "roofline_iops")


#: What the published runs needed for the roofline, per stack of ours that stands for it: (the published
#: stack, where that number comes from).
PUBLISHED_FOR = {BDEVPERF: PUB_BDEVPERF, SPDK_PERF: PUB_SPDK_PERF, NVMELAB: PUB_LEANEST}


#: The headline row of seed 004 whose configuration names the cores bdevperf needed for the roofline.
SEED004_BEST = "A: siblings used; stress off; qd128; 512B; 8 cores; 16 devs"


def _published_threads_to(stack: str, roof: float) -> str:
    pub = analysis.aggregate(reference.published("tool-comparison"), by=["stack", "ncpus"])
    sel = pub[(pub["stack"] == stack) & (pub["iops_mean"] >= analysis.SATURATION_FRACTION * roof)]
    if sel.empty:
        top = pub[pub["stack"] == stack].sort_values("ncpus").iloc[-1]
        text = f"not reached with {int(top['ncpus'])} threads ({top['iops_mean'] / 1e6:.1f} M)"
    else:
        text = f"{int(sel['ncpus'].min())} threads"
    if stack == PUB_BDEVPERF:  # seed 004's search ran bdevperf on more cores than the tool comparison did
        cores = re.search(r"(\d+) cores", SEED004_BEST)
        iops = reference.headline_value("cpu-initiated", "iops", SEED004_BEST)
        text += f"; seed 004: {cores.group(1)} cores with their siblings gave {iops / 1e6:.1f} M"
    return text


def cores_for_roofline(summ: pd.DataFrame, iosize: int = 512, qdepth: int = 128) -> pd.DataFrame:
    """Per stack: the cost per I/O measured here at `iosize`/`qdepth`, the cores that cost needs for the
    roofline on this host's CPU (rounded up; perfect scaling assumed, so a lower bound), and what the
    published runs of the corresponding stack needed (tool-comparison records, one thread = one core with its
    sibling; saturation = analysis.SATURATION_FRACTION of the roofline)."""
    roof = roofline_iops()
    sel = summ[(summ["iosize"] == iosize) & (summ["qdepth"] == qdepth)]
    rows = []
    for r in sel.itertuples():
        need = roof * r.ns_per_io_mean / NS_PER_S
        pub = PUBLISHED_FOR.get(r.stack)
        rows.append(
            {
                "stack": r.stack,
                "ns_per_io": r.ns_per_io_mean,
                "cores": math.ceil(need),
                "published": f"{pub}: {_published_threads_to(pub, roof)}" if pub else "–",
            }
        )
    return pd.DataFrame(rows)


def server_headroom(summ: pd.DataFrame, column: str = "server_cpu_usage_mean") -> float:
    """The largest mean over any configuration of a server reading: its CPU use (percent of one CPU) or, with
    ``column="server_busy_fraction_mean"``, the share of its sweeps that found work; NaN without readings."""
    col = summ.get(column)
    return float(col.max()) if col is not None and col.notna().any() else math.nan


def server_paced(summ: pd.DataFrame) -> pd.DataFrame:
    """The configurations (stack, iosize, qdepth, share of sweeps with work) whose server found a command on at
    least SERVER_BUSY_FLAG of its sweeps: there it may have set the pace."""
    col = "server_busy_fraction_mean"
    if summ.empty or col not in summ:
        return pd.DataFrame(columns=["stack", "iosize", "qdepth", col])
    return summ[summ[col] >= SERVER_BUSY_FLAG][["stack", "iosize", "qdepth", col]].reset_index(drop=True)


def at(summ: pd.DataFrame, iosize: int, qdepth: int) -> pd.DataFrame:
    """The rows of one configuration."""
    return summ[(summ["iosize"] == iosize) & (summ["qdepth"] == qdepth)]


def pair_ratios(summ: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Stack `a`'s mean IOPS over stack `b`'s, per I/O size and queue depth both ran (columns iosize, qdepth,
    ratio)."""
    if summ.empty:
        return pd.DataFrame(columns=["iosize", "qdepth", "ratio"])
    key = ["iosize", "qdepth"]
    x = summ[summ["stack"] == a].set_index(key)["iops_mean"]
    y = summ[summ["stack"] == b].set_index(key)["iops_mean"]
    r = (x / y).dropna()
    return r.rename("ratio").reset_index()


def pivot(summ: pd.DataFrame, value: str) -> pd.DataFrame:
    """One value per stack (rows, in STACKS order) and configuration (two-level columns: I/O size, queue depth),
    for a compact table; stacks without that value anywhere are left out."""
    if summ.empty:
        return pd.DataFrame()
    d = summ.assign(size=summ["iosize"].map(lambda b: f"{b:,} B"), qd=summ["qdepth"].map(lambda q: f"QD {q}"))
    t = d.pivot(index="stack", columns=["size", "qd"], values=value).dropna(how="all")
    cols = sorted(t.columns, key=lambda c: (int(c[0][:-2].replace(",", "")), int(c[1][3:])))
    order = [s for s in STACKS if s in t.index] + [s for s in t.index if s not in STACKS]
    return t.loc[order, cols]
