# SPDX-License-Identifier: BSD-3-Clause
"""The run record: one JSON object per run and repetition, and the JSONL files that hold them.

A record is a superset of the published AiSIO records (see data/reference/README.md):

    study, tool, target, backend, rw, iosize, qdepth, nqueues, ndevs, ncpus,
    runtime_s, iops, mibs, lat_ns{p50,p99,p999,max}, cpu_usage, cpu_freqs,
    governor, turbo, smt, thr_sib, stress, repetition, provenance{...}

cpu_usage is the CPU the host-side I/O stack used over the window, in percent of one CPU (the
perf engine: the whole process for the kernel paths, whose io_uring workers do part of the I/O,
the engine threads for the user-space driver, whose emulated device runs in threads of its own).

The sweep runner adds run_key, preset, sweeps, host_control (what the host let it vary),
host_flags (a requested host value the engine saw otherwise) and host_cpu_usage: the whole
host's CPU use while the engine ran, in percent of one CPU like cpu_usage, so that
host_cpu_usage - cpu_usage is what everything else on the host used (stress-ng included):
the check that a record was taken on a quiet host.

A failed point (nvmelab.studies.isolate: a run that hung, crashed or raised in its own process)
is a record too, so that a resumed sweep does not repeat it: its parameters, iops/mibs 0, and
failed = {kind, reason, seconds}. Analyses leave it out (nvmelab.studies.runner.load_results).

Files are written atomically (temporary file in the same directory, fsync,
rename), so an interrupted run never leaves a half-written record file.
`append_records` rewrites a file with the new records added; readers never see a
partial line. `load_records` names the file and line of anything it cannot use.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

#: Required keys and the types they may hold (None allowed where listed).
SCHEMA: dict[str, tuple[type, ...]] = {
    "study": (str,),
    "tool": (str,),
    "target": (str,),
    "backend": (str,),
    "rw": (str,),
    "iosize": (int,),
    "qdepth": (int,),
    "nqueues": (int,),
    "ndevs": (int,),
    "ncpus": (int,),
    "runtime_s": (int, float),
    "iops": (int, float),
    "mibs": (int, float),
    "lat_ns": (dict, type(None)),
    "cpu_usage": (int, float, type(None)),
    "cpu_freqs": (list, type(None)),
    "governor": (str, type(None)),
    "turbo": (int, bool, type(None)),
    "smt": (int, bool, type(None)),
    "thr_sib": (int, bool),
    "stress": (int, bool),
    "repetition": (int,),
    "provenance": (dict,),
}
LAT_KEYS = ("p50", "p99", "p999", "max")
#: Provenance keys every record carries (values may be None where unknown).
PROVENANCE_KEYS = ("git_commit", "host", "cpu_model", "kernel", "packages", "utc")


#: Bytes per MiB (the records' `mibs`).
MIB = 1 << 20


def measured_fields(res: dict[str, Any]) -> dict[str, Any]:
    """The measured fields of a record from a C engine's raw result (window_s, iops,
    bytes_per_s, ios, errors, first_error), rounded as records keep them."""
    return {
        "runtime_s": round(res["window_s"], 6),
        "iops": round(res["iops"], 2),
        "mibs": round(res["bytes_per_s"] / MIB, 2),
        "ios": res["ios"],
        "errors": res["errors"],
        "first_error": res["first_error"],
    }


def engine_record(
    *,
    study: str,
    tool: str,
    target: str,
    backend: str,
    rw: str,
    iosize: int,
    qdepth: int,
    runtime_s: float,
    iops: float,
    mibs: float,
    nqueues: int = 1,
    ndevs: int = 1,
    ncpus: int = 1,
    ios: int | None = None,
    errors: int = 0,
    first_error: Any = None,
    host: dict[str, Any] | None = None,
    thr_sib: Any = 0,
    stress: Any = 0,
    repetition: int = 0,
    warmup: float = 0.0,
    seed: int | None = None,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every field of SCHEMA, in one place for all engines (perf, gpu, blksum, tier).

    `host` is the host state found before the run (nvmelab.host.cpus.host_state: governor,
    turbo, smt; None = not read). lat_ns, cpu_usage and cpu_freqs start as None: the engine
    sets what it measured, adds its own fields, then validates."""
    host = host or {}
    return {
        "study": study,
        "tool": tool,
        "target": target,
        "backend": backend,
        "rw": rw,
        "iosize": iosize,
        "qdepth": qdepth,
        "nqueues": nqueues,
        "ndevs": ndevs,
        "ncpus": ncpus,
        "runtime_s": runtime_s,
        "iops": iops,
        "mibs": mibs,
        "lat_ns": None,
        "cpu_usage": None,
        "cpu_freqs": None,
        "governor": host.get("governor"),
        "turbo": host.get("turbo"),
        "smt": host.get("smt"),
        "thr_sib": int(bool(thr_sib)),
        "stress": int(bool(stress)),
        "repetition": repetition,
        "ios": ios,
        "errors": errors,
        "first_error": first_error,
        "warmup_s": float(warmup),
        "seed": seed,
        "provenance": provenance if provenance is not None else {},
    }


class RecordError(ValueError):
    """A record or record file that cannot be used; the message names where and what."""


def validate(rec: dict[str, Any], where: str = "record") -> dict[str, Any]:
    """Check one record against SCHEMA; raise RecordError naming the first problem."""
    if not isinstance(rec, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    for key, types in SCHEMA.items():
        if key not in rec:
            raise RecordError(f"{where}: missing field {key!r}")
        val = rec[key]
        if (
            isinstance(val, bool)
            and bool not in types
            and int in types
            and key not in ("turbo", "smt", "thr_sib", "stress")
        ):
            raise RecordError(f"{where}: field {key!r} must be a number, got a boolean")
        if not isinstance(val, types):
            names = "/".join(t.__name__ for t in types)
            raise RecordError(f"{where}: field {key!r} must be {names}, got {type(val).__name__}")
    for key in ("iosize", "qdepth", "nqueues", "ndevs", "ncpus"):
        if rec[key] < 1:
            raise RecordError(f"{where}: field {key!r} must be >= 1, got {rec[key]}")
    for key in ("iops", "mibs", "runtime_s"):
        v = float(rec[key])
        if not math.isfinite(v) or v < 0:
            raise RecordError(f"{where}: field {key!r} must be a finite number >= 0, got {rec[key]}")
    if rec["lat_ns"] is not None:
        missing = [k for k in LAT_KEYS if k not in rec["lat_ns"]]
        if missing:
            raise RecordError(f"{where}: lat_ns lacks {', '.join(missing)}")
    missing = [k for k in PROVENANCE_KEYS if k not in rec["provenance"]]
    if missing:
        raise RecordError(f"{where}: provenance lacks {', '.join(missing)}")
    if rec.get("failed") is not None:
        f = rec["failed"]
        if not isinstance(f, dict) or not {"kind", "reason"} <= set(f):
            raise RecordError(f"{where}: field 'failed' must be an object with kind and reason")
        return rec  # a failed point measured nothing: no profile/scale was reported
    if rec["target"].startswith(("emu://", "gpu-emu://")):
        prov = rec["provenance"]
        if not prov.get("profile") or prov.get("scale") is None:
            raise RecordError(f"{where}: an emulated target must name its profile and scale in provenance")
    return rec


def _atomic_write(path: Path, lines: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".jsonl", dir=path.parent)
    try:
        # mkstemp creates 0600; a results file is as readable as any other file the user writes.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def dumps(rec: dict[str, Any]) -> str:
    return json.dumps(rec, sort_keys=True, separators=(",", ":"), allow_nan=False)


def write_records(path: str | os.PathLike, records: Iterable[dict[str, Any]], *, check: bool = True) -> Path:
    """Write records to `path` (JSONL), replacing it atomically."""
    path = Path(path)
    recs = list(records)
    if check:
        for i, r in enumerate(recs):
            validate(r, f"{path} record {i}")
    _atomic_write(path, (dumps(r) for r in recs))
    return path


def append_records(path: str | os.PathLike, records: Iterable[dict[str, Any]], *, check: bool = True) -> Path:
    """Add records to `path`, keeping what is there; the file is replaced atomically."""
    path = Path(path)
    new = list(records)
    if check:
        for i, r in enumerate(new):
            validate(r, f"new record {i} for {path}")
    old = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    _atomic_write(path, [ln for ln in old if ln.strip()] + [dumps(r) for r in new])
    return path


def iter_records(path: str | os.PathLike, *, check: bool = False) -> Iterator[dict[str, Any]]:
    """Yield the records of one JSONL file; a bad line raises RecordError naming file and line."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if check:
                validate(rec, f"{path}:{lineno}")
            elif not isinstance(rec, dict):
                raise RecordError(f"{path}:{lineno}: expected a JSON object")
            yield rec


def load_records(
    paths: str | os.PathLike | Iterable[str | os.PathLike], *, check: bool = False
) -> list[dict[str, Any]]:
    """Load records from a file, a directory (all *.jsonl below it), or a list of either."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[dict[str, Any]] = []
    for p in paths:
        p = Path(p)
        files = sorted(f for f in p.rglob("*.jsonl") if not f.name.startswith(".tmp-")) if p.is_dir() else [p]
        for f in files:
            out.extend(iter_records(f, check=check))
    return out
