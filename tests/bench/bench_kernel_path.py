"""Kernel path: nvmelab's io_uring backend vs `fio --ioengine=io_uring` on the same file.

4 KiB random reads with O_DIRECT at QD 1, 4, 16, 64, 128, one thread pinned to
the same CPU, registered file and buffers on both sides, latency recorded on both
sides (fio always does). For every round the QDs are visited in order and at each
QD the two tools run back to back (interleaved), so both see the same host and
device state; which tool goes first alternates from round to round, so a drift in
the host (page cache of a virtual disk's backing file, other load) does not favour
the tool that always runs second. Ratio per QD = mean nvmelab IOPS / mean fio IOPS. Goal >= 1.0x.
Environment: NVMELAB_BENCH_DIR (where the data file goes; default the temp dir —
it must support O_DIRECT), NVMELAB_BENCH_FILE_MIB (default 256),
NVMELAB_BENCH_ROUNDS (default 2), NVMELAB_BENCH_RUNTIME (s, default 2).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from . import _native_bench as nb

GOAL_RATIO = 1.0
QDEPTHS = (1, 4, 16, 64, 128)
IOSIZE = 4096
MIB = 1 << 20


def run(outdir: str | os.PathLike) -> dict[str, Any]:
    from nvmelab import cpus, perf

    rounds = int(os.environ.get("NVMELAB_BENCH_ROUNDS", "2"))
    runtime = float(os.environ.get("NVMELAB_BENCH_RUNTIME", "2"))
    size = int(os.environ.get("NVMELAB_BENCH_FILE_MIB", "256")) * MIB
    cpu = cpus.cpumask(1)[0]
    base = os.environ.get("NVMELAB_BENCH_DIR") or tempfile.gettempdir()
    runs: dict[int, dict[str, list]] = {qd: {"nvmelab": [], "fio": []} for qd in QDEPTHS}
    with tempfile.TemporaryDirectory(dir=base) as td:
        path = Path(td) / "kernel-path.bin"
        perf.make_file(path, size)
        def ours(qd: int) -> None:
            rec = perf.run(f"file://{path}", backend="io_uring", rw="randread", iosize=IOSIZE, qdepth=qd,
                           cpus=[cpu], runtime=runtime, warmup=0.5, study="bench")
            runs[qd]["nvmelab"].append({"iops": rec["iops"], "cpu_usage": rec["cpu_usage"],
                                        "lat_ns_p50": rec["lat_ns"]["p50"], "lat_ns_mean": rec["lat_ns"]["mean"]})

        def theirs(qd: int) -> None:
            runs[qd]["fio"].append(nb.fio([
                "--name=kpath", f"--filename={path}", "--ioengine=io_uring", "--direct=1", "--rw=randread",
                f"--bs={IOSIZE}", f"--iodepth={qd}", "--registerfiles=1", "--fixedbufs=1", "--time_based",
                f"--runtime={runtime}", "--ramp_time=0.5", f"--cpus_allowed={cpu}", "--thread",
                "--norandommap", "--randrepeat=0"]))

        for rnd in range(rounds):
            order = (ours, theirs) if rnd % 2 == 0 else (theirs, ours)
            for qd in QDEPTHS:
                for step in order:
                    step(qd)
    per_qd = {}
    for qd in QDEPTHS:
        ours = nb.mean([r["iops"] for r in runs[qd]["nvmelab"]])
        theirs = nb.mean([r["iops"] for r in runs[qd]["fio"]])
        per_qd[str(qd)] = {"nvmelab_iops": ours, "fio_iops": theirs, "ratio": ours / theirs if theirs else None}
    ratios = [v["ratio"] for v in per_qd.values() if v["ratio"] is not None]
    return {
        "goal": {"ratio_vs_fio_io_uring_min": GOAL_RATIO},
        "met": bool(ratios) and min(ratios) >= GOAL_RATIO,
        "met_per_qd": {qd: v["ratio"] is not None and v["ratio"] >= GOAL_RATIO for qd, v in per_qd.items()},
        "per_qdepth": per_qd,
        "runs": {str(k): v for k, v in runs.items()},
        "loadavg_1_5_15": os.getloadavg(),
        "params": {"iosize": IOSIZE, "qdepths": list(QDEPTHS), "rounds": rounds, "runtime_s": runtime,
                   "file_bytes": size, "dir": base, "cpu": cpu},
    }
