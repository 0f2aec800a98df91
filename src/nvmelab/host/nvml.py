# SPDX-License-Identifier: BSD-3-Clause
"""SM activity of a GPU while something runs on it, from NVML (nvidia-ml-py's ``pynvml``), where readable.

    with SmSampler(pci="0000:19:00.0") as s:
        res = run_something()                       # e.g. the cuda-run engine, GIL released
    rec["nvml"] = s.window(res["window_t0_ns"], res["window_t1_ns"])

A thread samples every ``interval_s`` on the steady clock (``time.monotonic_ns``, the clock the cuda-run
engine reports its measured window in) and ``window()`` keeps the sample intervals that lie wholly inside
the window. Three NVML readings, each None where this GPU or driver does not give it:

- ``sm_active_pct``: GPM metric SM_UTIL (Hopper and later): the share of SM cycles with at least one warp
  resident over the interval between two GPM samples. This is the "SM activity" a polling kernel costs.
- ``sm_occupancy_pct``: GPM metric SM_OCCUPANCY: resident warps as a share of the SMs' warp slots.
- ``gpu_busy_pct``: nvmlDeviceGetUtilizationRates().gpu, the share of time *any* kernel ran. A persistent
  polling kernel holds it at 100 whatever it costs; recorded so that nobody mistakes it for SM activity.

Nothing here raises for NVML's sake: without pynvml, without a driver, without GPM support or with a
reading that fails, the summary says ``readable: false`` (or the metric is None) with the reason, one line.
``nvml=`` takes a stand-in module with pynvml's names (tests/test_nvml.py drives the code with one).
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

#: Seconds between two samples (GPM metrics are computed between consecutive samples).
INTERVAL_S = 0.1
#: GPM metric ids of nvml.h, used when the module lacks the names (older nvidia-ml-py).
GPM_SM_UTIL = 2
GPM_SM_OCCUPANCY = 3
GPM_METRICS_GET_VERSION = 1


def load() -> tuple[ModuleType | None, str]:
    """(pynvml, "") or (None, why it is not importable)."""
    try:
        import pynvml
    except ImportError as exc:
        return None, f"pynvml (nvidia-ml-py) is not installed: {exc}"
    return pynvml, ""


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "mean": round(statistics.fmean(values), 2),
        "p50": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


class SmSampler:
    """Context manager: NVML samples of one GPU (by PCI bus id, else NVML index) in a thread."""

    def __init__(
        self, pci: str | None = None, index: int = 0, *, interval_s: float = INTERVAL_S, nvml: Any = None
    ) -> None:
        self.pci, self.index, self.interval_s = pci, index, interval_s
        self._nvml = nvml
        self.reason: str | None = None  # why nothing (or nothing more) could be read
        self.gpm_reason: str | None = None  # why the GPM metrics are missing
        self.source: str | None = None
        self._gpm: list[tuple[int, int, float, float]] = []  # (t_prev, t, sm_util, sm_occupancy)
        self._busy: list[tuple[int, float]] = []  # (t, gpu utilisation %)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: Any = None
        self._samples: list[Any] = []
        self._inited = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> SmSampler:
        nv = self._nvml
        if nv is None:
            nv, why = load()
            if nv is None:
                self.reason = why
                return self
            self._nvml = nv
        try:
            nv.nvmlInit()
            self._inited = True
            if self.pci:
                try:
                    self._handle = nv.nvmlDeviceGetHandleByPciBusId(self.pci)
                except TypeError:  # older nvidia-ml-py: bytes, not str
                    self._handle = nv.nvmlDeviceGetHandleByPciBusId(self.pci.encode())
            else:
                self._handle = nv.nvmlDeviceGetHandleByIndex(self.index)
        except Exception as exc:  # noqa: BLE001 - pynvml.NVMLError and its subclasses; never fatal
            self.reason = f"NVML unavailable: {exc}"
            return self
        self.source = "nvml-utilization"
        try:
            if not int(nv.nvmlGpmQueryDeviceSupport(self._handle).isSupportedDevice):
                self.gpm_reason = "this GPU has no GPM metrics (SM activity needs Hopper or later)"
            else:
                self._samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
                self.source = "nvml-gpm"
        except Exception as exc:  # noqa: BLE001
            self.gpm_reason = f"GPM unavailable: {exc}"
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        nv = self._nvml
        for s in self._samples:
            try:
                nv.nvmlGpmSampleFree(s)
            except Exception:  # noqa: BLE001
                log.debug("nvmlGpmSampleFree failed", exc_info=True)
        self._samples = []
        if self._inited:
            try:
                nv.nvmlShutdown()
            except Exception:  # noqa: BLE001
                log.debug("nvmlShutdown failed", exc_info=True)
            self._inited = False

    # ------------------------------------------------------------------ sampling
    def _gpm_metrics(self, first: Any, second: Any) -> tuple[float, float]:
        nv = self._nvml
        get = nv.c_nvmlGpmMetricsGet_t()
        get.version = getattr(nv, "NVML_GPM_METRICS_GET_VERSION", GPM_METRICS_GET_VERSION)
        get.numMetrics = 2
        get.sample1, get.sample2 = first, second
        get.metrics[0].metricId = getattr(nv, "NVML_GPM_METRIC_SM_UTIL", GPM_SM_UTIL)
        get.metrics[1].metricId = getattr(nv, "NVML_GPM_METRIC_SM_OCCUPANCY", GPM_SM_OCCUPANCY)
        nv.nvmlGpmMetricsGet(get)
        return float(get.metrics[0].value), float(get.metrics[1].value)

    def _loop(self) -> None:
        nv = self._nvml
        prev_t, cur = None, 0
        while True:
            t = time.monotonic_ns()
            if self._samples:
                try:
                    nv.nvmlGpmSampleGet(self._handle, self._samples[cur])
                    if prev_t is not None:
                        util, occ = self._gpm_metrics(self._samples[1 - cur], self._samples[cur])
                        self._gpm.append((prev_t, t, util, occ))
                    prev_t, cur = t, 1 - cur
                except Exception as exc:  # noqa: BLE001
                    self.gpm_reason = f"GPM sample failed: {exc}"
                    self._samples_failed()
            try:
                self._busy.append((t, float(nv.nvmlDeviceGetUtilizationRates(self._handle).gpu)))
            except Exception as exc:  # noqa: BLE001
                self.reason = f"nvmlDeviceGetUtilizationRates failed: {exc}"
                if not self._samples:
                    return
            if self._stop.wait(self.interval_s):
                return

    def _samples_failed(self) -> None:
        """Stop GPM sampling after a failure (the samples are freed at exit)."""
        for s in self._samples:
            try:
                self._nvml.nvmlGpmSampleFree(s)
            except Exception:  # noqa: BLE001
                log.debug("nvmlGpmSampleFree failed", exc_info=True)
        self._samples = []

    # ------------------------------------------------------------------ summary
    def window(self, t0_ns: int | None, t1_ns: int | None) -> dict[str, Any]:
        """The readings inside [t0_ns, t1_ns] (steady clock); see the module docstring for the fields."""
        out: dict[str, Any] = {
            "readable": False,
            "source": self.source,
            "reason": self.reason,
            "interval_s": self.interval_s,
            "samples": 0,
            "sm_active_pct": None,
            "sm_occupancy_pct": None,
            "gpu_busy_pct": None,
            "gpm_reason": self.gpm_reason,
        }
        if self.source is None:
            return out
        if not t0_ns or not t1_ns or t1_ns <= t0_ns:
            out["reason"] = "no measured window (a run of fixed rounds): nothing to attribute the samples to"
            return out
        gpm = [g for g in self._gpm if g[0] >= t0_ns and g[1] <= t1_ns]
        busy = [b[1] for b in self._busy if t0_ns <= b[0] <= t1_ns]
        out.update(
            samples=len(gpm) if self.source == "nvml-gpm" else len(busy),
            sm_active_pct=_stats([g[2] for g in gpm]),
            sm_occupancy_pct=_stats([g[3] for g in gpm]),
            gpu_busy_pct=_stats(busy),
        )
        out["readable"] = out["samples"] > 0
        if not out["readable"] and not out["reason"]:
            out["reason"] = (
                f"no {self.interval_s} s sample interval lies inside the {(t1_ns - t0_ns) / 1e9:.3g} s window"
            )
        return out
