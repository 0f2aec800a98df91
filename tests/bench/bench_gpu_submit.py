# SPDX-License-Identifier: BSD-3-Clause
"""Device-initiated submission rate: cuda-run against gpu-emu at 512 B (GPU only: make bench-gpu).

Two goals from issue 6, both measured here and nowhere else:
  * rate: the best IOPS over a grid of (nqueues, qdepth) against gpu-emu `null` (16 devices, no device
    model, data=none) -- goal: twice the published 16-device roofline on one H100 (issue 6);
  * efficiency: gpu-emu `pm1753` (16 devices, unscaled) with at most 4096 CUDA threads -- goal >= 97 %
    of the IOPS the model allows (the published roofline, 16 device caps).
Both references are read from data/reference/headline.csv.
Every figure comes from the runs made by run(); the GPU is named in each record's provenance.
Environment: NVMELAB_BENCH_GPU_RUNTIME (seconds per run, default 2), NVMELAB_BENCH_GPU_REPS (default 3),
NVMELAB_BENCH_GPU_STANDIN=1 (the CPU stand-in instead of the GPU: make rehearse-gpu-host, no GPU figure).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

GPU = True

IOSIZE = 512
NDEVS = 16


def _roofline() -> float:
    from nvmelab.results import reference

    return reference.headline_value("cpu-initiated", "roofline_iops")


MODEL_IOPS = _roofline()  # pm1753 device cap x 16 devices, as published
RATE_GOAL_IOPS = 2 * MODEL_IOPS  # issue 6: twice the published roofline
MODEL_FRACTION_GOAL = 0.97
MAX_THREADS_EFFICIENCY = 4096
#: (nqueues, qdepth) tried for the rate goal.
RATE_GRID = [(nq, qd) for nq in (1, 2, 4, 8, 16) for qd in (64, 128, 256, 512)]
#: (nqueues, qdepth) with nqueues * qdepth * 16 <= 4096 threads, for the efficiency goal.
EFFICIENCY_GRID = [(2, 128), (4, 64), (1, 256), (8, 32)]
NULL_TARGET = f"gpu-emu://?ndev={NDEVS}&profile=null&data=none&blocks=16&warps=16"
PM1753_TARGET = f"gpu-emu://?ndev={NDEVS}&profile=pm1753&data=none&blocks=16&warps=16"


def _engine():
    """gpu.run_cuda, or its CPU stand-in when NVMELAB_BENCH_GPU_STANDIN=1 (make rehearse-gpu-host)."""
    if os.environ.get("NVMELAB_BENCH_GPU_STANDIN") == "1":
        from nvmelab.engines.gpu_standin import run_cuda_standin

        return run_cuda_standin
    from nvmelab.engines import gpu

    return gpu.run_cuda


def _best(target: str, grid: list[tuple[int, int]], runtime: float, reps: int) -> dict[str, Any]:
    run_cuda = _engine()
    rows = []
    for nq, qd in grid:
        iops = []
        for rep in range(reps):
            try:
                rec = run_cuda(
                    target=target,
                    rw="randread",
                    iosize=IOSIZE,
                    qdepth=qd,
                    nqueues=nq,
                    ndevs=NDEVS,
                    runtime=runtime,
                    warmup=min(1.0, runtime / 2),
                    repetition=rep,
                    study="bench-gpu",
                )
            except ValueError as exc:  # does not fit with the emulator on this GPU: say so, go on
                rows.append({"nqueues": nq, "qdepth": qd, "skipped": str(exc)})
                break
            iops.append(rec["iops"])
        if iops:
            rows.append(
                {
                    "nqueues": nq,
                    "qdepth": qd,
                    "threads": nq * qd * NDEVS,
                    "iops_mean": sum(iops) / len(iops),
                    "iops": iops,
                    "gpu": rec["provenance"].get("cuda_device", {}).get("name"),
                }
            )
    done = [r for r in rows if "iops_mean" in r]
    best = max(done, key=lambda r: r["iops_mean"]) if done else None
    return {"rows": rows, "best": best}


def run(outdir: str | os.PathLike) -> dict[str, Any]:
    from nvmelab.engines import gpu

    standin = os.environ.get("NVMELAB_BENCH_GPU_STANDIN") == "1"
    ok, why = gpu.available()
    if not ok and not standin:
        raise RuntimeError(f"no GPU: {why}")
    runtime = float(os.environ.get("NVMELAB_BENCH_GPU_RUNTIME", "2"))
    reps = int(os.environ.get("NVMELAB_BENCH_GPU_REPS", "3"))
    rate = _best(NULL_TARGET, RATE_GRID, runtime, reps)
    eff = _best(PM1753_TARGET, EFFICIENCY_GRID, runtime, reps)
    best_rate = rate["best"]["iops_mean"] if rate["best"] else 0.0
    best_eff = eff["best"]["iops_mean"] if eff["best"] else 0.0
    Path(outdir).mkdir(parents=True, exist_ok=True)
    return {
        "standin": standin,  # the CPU stand-in's rates: the steps work, nothing about a GPU
        "gpu": gpu.device_info() if ok else None,
        "rate": {**rate, "goal_iops": RATE_GOAL_IOPS, "met": best_rate >= RATE_GOAL_IOPS, "target": NULL_TARGET},
        "efficiency": {
            **eff,
            "model_iops": MODEL_IOPS,
            "fraction": best_eff / MODEL_IOPS,
            "goal_fraction": MODEL_FRACTION_GOAL,
            "max_threads": MAX_THREADS_EFFICIENCY,
            "met": best_eff >= MODEL_FRACTION_GOAL * MODEL_IOPS,
            "target": PM1753_TARGET,
        },
        "met": best_rate >= RATE_GOAL_IOPS and best_eff >= MODEL_FRACTION_GOAL * MODEL_IOPS,
    }
