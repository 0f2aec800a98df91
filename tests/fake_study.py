# SPDX-License-Identifier: BSD-3-Clause
"""A fake study for the tests of the study runner (NOT a measurement; not part of the package).

`fake_run` has the signature of nvmelab.engines.perf.run and returns a valid record
computed from a closed-form model (Little's law with per-device and per-core
caps) plus deterministic noise. Records say ``tool="fake"`` and target
``fake://``, so they can never be mistaken for measured data. The targets ``fake://hang``,
``fake://crash`` and ``fake://error`` hang, abort the process, or raise OSError (isolation tests).

`fake_spec` writes the TOML text of a small study spec over ``fake://dev`` for those tests to run
with `fake_run`; `preset` and `sweep` build its presets; `add_study_folder` adds one as a study folder (spec.toml).

Import it as ``tests.fake_study``: the isolated executors name the run function by its module
(``tests.fake_study:fake_run``) and import it back in a child process started in the repository root.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Model constants of the fake device (arbitrary, for tests only).
FAKE_LATENCY_S = 80e-6
FAKE_DEVICE_IOPS = 1_000_000.0
FAKE_CORE_IOPS = 2_000_000.0
FAKE_NOISE = 0.01


def _hang() -> None:
    time.sleep(3600)


def _crash() -> None:
    os.abort()


def _error() -> None:
    raise OSError(5, "fake I/O error")


#: Targets that make fake_run misbehave, for the isolation tests: hang, die, or raise.
FAILURES = {"fake://hang": _hang, "fake://crash": _crash, "fake://error": _error}


def fake_iops(iosize: int, qdepth: int, nqueues: int, ndevs: int, ncpus: int) -> float:
    """The model's IOPS without noise."""
    little = qdepth * nqueues * ndevs / FAKE_LATENCY_S
    return min(little, FAKE_DEVICE_IOPS * ndevs * min(1.0, 4096 / iosize), FAKE_CORE_IOPS * ncpus)


def fake_run(
    *,
    target: str = "fake://",
    study: str = "adhoc",
    rw: str = "randread",
    iosize: int = 512,
    qdepth: int = 1,
    nqueues: int = 1,
    ndevs: int | None = None,
    ncpus: int = 1,
    thr_sib: bool | int = False,
    runtime: float = 1.0,
    warmup: float = 0.0,
    backend: str | None = None,
    sleep: float = 0.0,
    **_: Any,
) -> dict[str, Any]:
    """One fake record (see the module docstring)."""
    ndevs = int(ndevs or 1)
    if target in FAILURES:  # the isolation tests' misbehaving runs (studies/isolate.py)
        FAILURES[target]()
    if sleep:
        time.sleep(sleep)
    h = hashlib.sha256(
        json.dumps([target, iosize, qdepth, nqueues, ndevs, ncpus, thr_sib, time.monotonic_ns()], default=str).encode()
    ).digest()
    noise = 1.0 + FAKE_NOISE * (h[0] / 255.0 - 0.5)
    iops = fake_iops(iosize, qdepth, nqueues, ndevs, ncpus) * noise
    return {
        "study": study,
        "tool": "fake",
        "target": target if target.startswith("fake") else f"fake://{target}",
        "backend": backend or "fake",
        "rw": rw,
        "iosize": int(iosize),
        "qdepth": int(qdepth),
        "nqueues": int(nqueues),
        "ndevs": ndevs,
        "ncpus": int(ncpus),
        "runtime_s": float(runtime),
        "iops": iops,
        "mibs": iops * iosize / 2**20,
        "lat_ns": {"p50": 80000, "p99": 120000, "p999": 150000, "max": 200000},
        "cpu_usage": 100.0 * ncpus,
        "cpu_freqs": None,
        "governor": None,
        "turbo": None,
        "smt": None,
        "thr_sib": int(bool(thr_sib)),
        "stress": 0,
        "repetition": 0,
        "provenance": {
            "git_commit": None,
            "host": "fake",
            "cpu_model": None,
            "kernel": None,
            "packages": {},
            "utc": "1970-01-01T00:00:00Z",
        },
    }


#: The [fixed] table every fake spec starts from (`fake_spec(fixed=...)` adds keys or replaces values).
FIXED: dict[str, Any] = {"rw": "randread", "iosize": 512, "ncpus": 1, "runtime": 0.01}


def sweep(name: str, **axes: Any) -> dict[str, Any]:
    """One sweep table: its name, then each variable (a list of values is swept, a scalar fixed)."""
    return {"name": name, **axes}


def preset(*sweeps: Mapping[str, Any], **keys: Any) -> dict[str, Any]:
    """One preset table: its keys (``repetitions=...``), then its sweeps."""
    return {**keys, "sweeps": [dict(s) for s in sweeps]}


#: The standard and paper presets of a fake spec unless given: one run at qdepth 1.
ONE = preset(sweep("one", qdepth=1))


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string, for the plain text used here
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"fake_spec: no TOML for {v!r}")


def _toml_table(header: str, table: Mapping[str, Any]) -> list[str]:
    return [header, *(f"{k} = {_toml_value(v)}" for k, v in table.items())]


def fake_spec(
    study: str,
    quick: Mapping[str, Any],
    *,
    fixed: Mapping[str, Any] | None = None,
    exclude: Sequence[Mapping[str, Any]] = (),
    standard: Mapping[str, Any] = ONE,
    paper: Mapping[str, Any] = ONE,
) -> str:
    """The TOML text of a study spec: engine cpu, target fake://dev, [fixed] as FIXED updated by `fixed`,
    the `exclude` tables, and the three presets (each a `preset(...)`; standard and paper default to ONE)."""
    lines = [f"study = {_toml_value(study)}", 'engine = "cpu"', 'target = "fake://dev"']
    lines += _toml_table("[fixed]", {**FIXED, **(fixed or {})})
    for ex in exclude:
        lines += _toml_table("[[exclude]]", ex)
    for name, pre in (("quick", quick), ("standard", standard), ("paper", paper)):
        lines += _toml_table(f"[presets.{name}]", {k: v for k, v in pre.items() if k != "sweeps"})
        for sw in pre["sweeps"]:
            lines += _toml_table(f"[[presets.{name}.sweeps]]", sw)
    return "\n".join(lines) + "\n"


def add_study_folder(studies: Path, study: str, text: str) -> Path:
    """Add a study the way a contributor does: one folder ``<studies>/<study>/`` holding its ``spec.toml``
    (`text`, e.g. from `fake_spec`) and an ``__init__.py``; nothing else names the study. Returns the folder."""
    folder = studies / study
    folder.mkdir(parents=True)
    (folder / "spec.toml").write_text(text, encoding="utf-8")
    (folder / "__init__.py").write_text(f'"""The {study} study (a test\'s)."""\n', encoding="utf-8")
    return folder
