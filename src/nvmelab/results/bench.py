# SPDX-License-Identifier: BSD-3-Clause
"""The CPU benchmarks' results (data/results/bench/<host>/, written by `make bench`) as tables.

Key functions:
    bench_hosts()                 hosts that have benchmark results
    load(name, host)              one benchmark's JSON (instructions, driver_hotpath, kernel_path, ...)
    instruction_table(host)       instructions per I/O by part (engine, driver, emulator), QD, devices and
                                  latency sampling, with the doorbells per I/O (tests/bench/bench_instructions.py)
    cpu_per_io(host)              nvmelab (driver + emulated null controller) and fio's null engine on one
                                  core: ns per I/O, both latency settings (bench_driver_hotpath.py)
    published_per_thread()        the published stacks' one-core rates as ns per I/O (tool comparison)
    real_controller_estimate(host)  what one nvmelab thread would spend per I/O on a real controller

Caveats: the emulator's figures are the emulated controller's, never a drive's; the benchmarks ran on
whatever host wrote them (the JSON says when it was shared with other jobs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from .reference import data_root, host_io_costs, published

#: The queue depth the budgets and the published comparison use.
BUDGET_QD = 128


def bench_dir() -> Path:
    return data_root() / "results" / "bench"


def bench_hosts() -> list[str]:
    """Hosts with benchmark results, sorted."""
    d = bench_dir()
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def _host(host: str | None, name: str | None = None) -> str:
    """`host`, checked; None: the first host (sorted, GPU lease hosts last) holding `name`'s results (a lease's
    host holds only the GPU benchmarks' results)."""
    hosts = bench_hosts()
    if host is None:
        if not hosts:
            raise FileNotFoundError(f"no benchmark results under {bench_dir()}: run `make bench`")
        having = [h for h in hosts if name is not None and (bench_dir() / h / f"{name}.json").exists()]
        # a lease host's results are the GPU parts (run_gpu) of benchmarks that may share the CPU's name
        having.sort(key=lambda h: h.startswith("lease-"))
        return (having or hosts)[0]
    if host not in hosts:
        raise FileNotFoundError(f"no benchmark results for host {host!r} under {bench_dir()} (have: {hosts})")
    return host


def load(name: str, host: str | None = None) -> dict[str, Any]:
    """One benchmark's JSON, e.g. ``load("instructions")``; FileNotFoundError names what is missing."""
    path = bench_dir() / _host(host, name) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `make bench` (tests/bench/bench_{name}.py)")
    res = json.loads(path.read_text())
    if "error" in res:
        raise ValueError(f"{path}: the benchmark failed: {res['error']}")
    return res


def instruction_table(host: str | None = None) -> pd.DataFrame:
    """Instructions per I/O of engine, driver and emulator (and in total) by devices, QD and latency
    sampling, from callgrind (deterministic: the host's load does not change them)."""
    rows = load("instructions", host)["instructions_per_io"]
    df = pd.DataFrame(rows).drop(columns=["ios"], errors="ignore")
    df["lat"] = df["lat"].map({True: "on", False: "off"})
    cols = ["ndev", "qdepth", "lat", "total", "emulator", "driver", "engine"]
    cols += [c for c in ("doorbells",) if c in df]
    return df[cols].sort_values(["ndev", "lat", "qdepth"], ascending=[True, False, True]).reset_index(drop=True)


def cpu_per_io(host: str | None = None) -> pd.DataFrame:
    """nvmelab on the emulated null controller against fio's null engine, one core, QD 128, 512 B: median
    ns per I/O (one busy thread each, so wall time per I/O = CPU time per I/O) at each latency setting,
    and the median of the paired (same round) IOPS ratios."""
    res = load("driver_hotpath", host)
    rows = []
    for setting, v in res["vs_fio_null"].items():
        rows.append(
            {
                "latency": setting.replace("lat_", ""),
                "nvmelab_ns_per_io": v["nvmelab_ns_per_io_median"],
                "fio_null_ns_per_io": v["fio_null_ns_per_io_median"],
                "iops_ratio": v["paired_ratio_median"],
                "rounds": len(v["paired_ratios"]),
            }
        )
    return pd.DataFrame(rows)


def published_per_thread() -> pd.DataFrame:
    """The published stacks at one core (16 devices, QD 128, 512 B): mean IOPS and ns per I/O."""
    pub = published("tool-comparison")
    one = pub[pub["ncpus"] == pub["ncpus"].min()]
    agg = one.groupby("stack", as_index=False)["iops"].mean()
    agg["ns_per_io"] = 1e9 / agg["iops"]
    return agg.sort_values("ns_per_io").reset_index(drop=True)


def real_controller_estimate(host: str | None = None) -> pd.DataFrame:
    """What one nvmelab thread would spend per I/O on a real controller at QD 128 with latency sampling
    on, in ns, as low/high bounds with where each part comes from:

    * host software: the measured time per I/O on the emulator times the share of the instructions that
      are not the emulator's (engine + driver), i.e. assuming the parts retire instructions at the same
      rate; the emulator's own share (its data copy included) is what a drive does instead;
    * doorbells: the measured doorbell writes per I/O times the spacing of back-to-back uncached MMIO
      writes from the literature (they are posted: this bounds the core's cost from above);
    * completion-queue cache misses: not measurable on the emulator (its CQ is in the thread's cache);
      SPDK's one-thread rate on real drives is the published envelope that includes them.
    """
    instr = load("instructions", host)["instructions_per_io"]
    row = next(r for r in instr if r["ndev"] == 1 and r["qdepth"] == BUDGET_QD and r["lat"])
    share = (row["driver"] + row["engine"]) / row["total"]
    t = cpu_per_io(host).set_index("latency").loc["on", "nvmelab_ns_per_io"]
    lit = host_io_costs()
    mmio = lit.loc["mmio_write_spacing"]
    spdk = lit.loc["spdk_one_thread_iops"]
    db = row.get("doorbells")
    rows = [
        {
            "part": "host software (engine + driver), measured on the emulator",
            "low_ns": t * share,
            "high_ns": t * share,
            "source": f"{t:.1f} ns per I/O x {share:.0%} of the instructions (bench JSON)",
        },
        {
            "part": "MMIO doorbell writes",
            "low_ns": None if db is None else db * mmio["low"],
            "high_ns": None if db is None else db * mmio["high"],
            "source": f"{db} doorbells per I/O x {mmio['low']:.0f}-{mmio['high']:.0f} ns ({mmio['source']})",
        },
        {
            "part": "whole per-I/O cost of SPDK on real drives (envelope incl. CQ misses)",
            "low_ns": 1e9 / spdk["high"],
            "high_ns": 1e9 / spdk["low"],
            "source": f"1 / {spdk['low'] / 1e6:.2f} M IOPS ({spdk['source']})",
        },
    ]
    return pd.DataFrame(rows)
