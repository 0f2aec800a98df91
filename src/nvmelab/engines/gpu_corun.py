# SPDX-License-Identifier: BSD-3-Clause
"""What polling costs the GPU: the ``corun`` field of a cuda-run record, and the CPU stand-in's co-runner.

The cuda-run engine's run parameter ``corun`` (blocks per SM, src/engine/crun_params.h) runs a compute
kernel beside the I/O (src/engine/cuda/crun_corun.h): the same launches of an FMA kernel timed alone,
before any I/O kernel is on the GPU, and again under the I/O load. ``corun_field`` turns the engine's raw
times into the record's field:

    {"per_sm": corun, "ran": true, "kind": "gpu-fma", "blocks": corun x SMs, "threads": ..., "launches": ...,
     "iters": ..., "flop": ..., "alone_s": ..., "loaded_s": ..., "alone_flops": ..., "loaded_flops": ...,
     "ratio": loaded_flops / alone_flops, "cost": 1 - ratio, "resident": true, "overlap": true,
     "valid": true, "why_invalid": null}

``valid`` is False (with the reason) when the loaded launches did not all run under the I/O load: they
started before every engine block was polling (``resident``) or ended after the engine (``overlap``), or a
time is not positive. Such a record is kept; the chapter leaves its ratio out. A run without a
co-runner says ``{"per_sm": 0, "ran": false}``.

The CPU stand-in (engines/gpu_standin.py) has no GPU: ``CpuCorun`` is its co-runner, a NumPy FMA loop
on a host thread timed alone and beside the stand-in's polling thread, through the same field
(``kind: "cpu-standin"``). It proves the record path on a host without a GPU and is never a GPU figure.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np

#: kinds of co-runner
KIND_GPU = "gpu-fma"
KIND_CPU = "cpu-standin"
#: The stand-in co-runner: float32 elements per array, seconds one batch should take alone.
CPU_ELEMENTS = 1 << 16
CPU_BATCH_S = 0.002
CPU_MIN_LAUNCHES = 4


def off() -> dict[str, Any]:
    """The field of a run without a co-runner."""
    return {"per_sm": 0, "ran": False}


def corun_field(raw: dict[str, Any] | None, per_sm: int, kind: str = KIND_GPU) -> dict[str, Any]:
    """The record's ``corun`` field from the engine's raw co-runner result (see the module docstring).

    raw: launches, flop_per_launch, alone_s, loaded_s, resident, overlap (and blocks, threads_per_block,
    iters where the engine has them). ValueError when per_sm > 0 and raw is missing: a run asked for a
    co-runner and the engine did not report one."""
    if not per_sm:
        return off()
    if raw is None:
        raise ValueError(f"corun={per_sm}: the engine reported no co-runner result")
    launches = int(raw["launches"])
    flop = float(raw["flop_per_launch"]) * launches
    alone_s, loaded_s = float(raw["alone_s"]), float(raw["loaded_s"])
    ok_times = all(math.isfinite(x) and x > 0 for x in (alone_s, loaded_s, flop))
    alone = flop / alone_s if ok_times else None
    loaded = flop / loaded_s if ok_times else None
    ratio = loaded / alone if ok_times else None
    why = None
    if not ok_times:
        why = f"non-positive time or work (alone {alone_s} s, loaded {loaded_s} s, {flop} flop)"
    elif not raw.get("resident", True):
        why = "the co-runner started before every I/O block had completed a round"
    elif not raw.get("overlap", False):
        why = "the co-runner ended after the I/O kernel: part of it ran without the I/O load"
    out = {
        "per_sm": int(per_sm),
        "ran": True,
        "kind": kind,
        "blocks": raw.get("blocks"),
        "threads": (raw["blocks"] * raw["threads_per_block"]) if raw.get("threads_per_block") else None,
        "launches": launches,
        "iters": raw.get("iters"),
        "flop": flop,
        "alone_s": round(alone_s, 9),
        "loaded_s": round(loaded_s, 9),
        "alone_flops": alone,
        "loaded_flops": loaded,
        "ratio": None if ratio is None else round(ratio, 6),
        "cost": None if ratio is None else round(1.0 - ratio, 6),
        "resident": bool(raw.get("resident", True)),
        "overlap": bool(raw.get("overlap", False)),
        "valid": why is None,
        "why_invalid": why,
    }
    return out


# ------------------------------------------------------------------------------------------ stand-in
class CpuCorun:
    """The stand-in's co-runner: ``a = a * m + c`` over CPU_ELEMENTS float32 per batch (NumPy releases
    the GIL), sized like the GPU's (share of warmup + runtime alone), then run on a thread beside the
    stand-in's I/O. ``start()`` before the I/O call, ``finish(io_end)`` after it (io_end: time.monotonic()
    when the I/O call returned) -> the raw result corun_field takes."""

    def __init__(self, per_sm: int, warmup: float, runtime: float, share: float) -> None:
        self.per_sm = int(per_sm)
        self._a = np.full(CPU_ELEMENTS, 0.5, dtype=np.float32)
        self._m, self._c = np.float32(0.9999999), np.float32(1e-7)
        self._batch(64)  # first touch
        t0 = time.perf_counter()
        self._batch(16)
        per_iter = max((time.perf_counter() - t0) / 16, 1e-9)
        self.iters = max(1, round(CPU_BATCH_S / per_iter))
        target = share * (float(warmup) + float(runtime))
        self.launches = max(CPU_MIN_LAUNCHES, math.ceil(target / (per_iter * self.iters)))
        t0 = time.perf_counter()
        for _ in range(self.launches):
            self._batch(self.iters)
        self.alone_s = time.perf_counter() - t0
        self._thread: threading.Thread | None = None
        self._loaded = (0.0, 0.0)

    def _batch(self, iters: int) -> None:
        a = self._a
        for _ in range(iters):
            np.multiply(a, self._m, out=a)
            np.add(a, self._c, out=a)

    def _run(self) -> None:
        t0 = time.monotonic()
        for _ in range(self.launches):
            self._batch(self.iters)
        self._loaded = (t0, time.monotonic())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="standin-corun", daemon=True)
        self._thread.start()

    def finish(self, io_start: float, io_end: float) -> dict[str, Any]:
        assert self._thread is not None, "start() first"
        self._thread.join()
        t0, t1 = self._loaded
        return {
            "launches": self.launches,
            "iters": self.iters,
            "flop_per_launch": 2.0 * CPU_ELEMENTS * self.iters,
            "alone_s": self.alone_s,
            "loaded_s": t1 - t0,
            "resident": t0 >= io_start,
            "overlap": t1 <= io_end,
        }
