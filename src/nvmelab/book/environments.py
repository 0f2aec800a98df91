# SPDX-License-Identifier: BSD-3-Clause
"""The environments that produced the committed results, read from record provenance.

Every record under ``data/results/<study>/<host>/`` carries a ``provenance`` object
(see :mod:`nvmelab.results.records`). This module groups those records by host and
summarises, per host, what the book's environments chapter shows: CPU, kernel,
GPU and driver, package versions, the git commits and time span of the runs, the
studies and targets measured, and — for emulated targets — the profile and scale.

Key functions:
    host_environments(records)   records -> list of HostEnvironment (one per host)
    collect(results_dir)         load every committed record below a folder and summarise it
    result_files(results_dir)    the JSONL files that `collect` reads (for build dependencies)

Caveat: nothing here is measured; it only reports what the records say. A field
that no record of a host names is shown as unknown, never guessed. Records that
disagree within one host (two kernels, say) are all listed.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..driver import uri as _uri
from ..results.records import load_records, validate

#: Shown where no record of a host names a value.
UNKNOWN = "unknown"
#: Package versions listed per host, in this order, when the records name them.
KEY_PACKAGES = ("nvmelab", "numpy", "pandas", "altair", "cupy", "python")


#: The host variables of the CPU-side sweeps as a reader names them (the records' keys are short).
VARIABLE_NAMES = {
    "governor": "CPU governor",
    "fixed_freq": "fixed clock",
    "freq_samples": "clock samples",
    "turbo": "turbo boost",
    "smt": "SMT",
    "thr_sib": "thread siblings",
    "stress": "load on unused CPUs",
}
#: A record's reason (kernel interface names, raw sysfs values) -> the same fact in plain words.
_PLAIN_REASONS = (
    (
        re.compile(r"no cpufreq|scaling_governor|no userspace governor", re.I),
        "the host exposes no CPU frequency control",
    ),
    (re.compile(r"scaling_cur_freq", re.I), "the host exposes no CPU clock to sample"),
    (re.compile(r"no_turbo|cpufreq/boost", re.I), "the host exposes no turbo control"),
    (re.compile(r"SMT control is (notsupported|notimplemented|forceoff)", re.I), "the host offers no SMT control"),
    (re.compile(r"no siblings", re.I), "one logical CPU per core, so no siblings to use"),
    (re.compile(r"stress-ng is not installed", re.I), "stress-ng is not installed"),
)


def plain_reason(why: str) -> str:
    """A record's reason for an unsettable variable in plain words (unknown reasons as recorded)."""
    for pattern, plain in _PLAIN_REASONS:
        if pattern.search(why):
            return plain
    return why.replace("notsupported", "not supported")


@dataclasses.dataclass
class HostEnvironment:
    """What the records of one host say about it."""

    host: str
    records: int = 0
    cpu_models: list[str] = dataclasses.field(default_factory=list)
    kernels: list[str] = dataclasses.field(default_factory=list)
    gpus: list[str] = dataclasses.field(default_factory=list)
    gpu_drivers: list[str] = dataclasses.field(default_factory=list)
    git_commits: list[str] = dataclasses.field(default_factory=list)
    packages: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    studies: dict[str, int] = dataclasses.field(default_factory=dict)
    targets: dict[str, int] = dataclasses.field(default_factory=dict)
    #: "profile @ scale" of emulated targets, with their record counts
    emulation: dict[str, int] = dataclasses.field(default_factory=dict)
    first_utc: str | None = None
    last_utc: str | None = None
    #: logical CPUs and threads per core (provenance.cpu_layout), memory in bytes and what the
    #: host runs on (provenance.memory_bytes, .virtualisation), as the records give them
    logical_cpus: list[int] = dataclasses.field(default_factory=list)
    threads_per_core: list[int] = dataclasses.field(default_factory=list)
    memory: list[int] = dataclasses.field(default_factory=list)
    virtualisation: list[str] = dataclasses.field(default_factory=list)
    #: host variable -> why the host did not let a sweep set it (the records' host_control)
    uncontrolled: dict[str, str] = dataclasses.field(default_factory=dict)
    #: provenance field (memory_bytes, virtualisation) -> study -> records without it (older records)
    predating: dict[str, Counter] = dataclasses.field(default_factory=dict)
    #: (CPU model, CPU layout, kernel) of the records with / without each such field
    machine_with: dict[str, set] = dataclasses.field(default_factory=dict)
    machine_without: dict[str, set] = dataclasses.field(default_factory=dict)

    def cpus(self) -> str:
        """'2 logical CPUs, 1 per core' as the records' CPU layout says, else unknown."""
        if not self.logical_cpus:
            return UNKNOWN
        n = " / ".join(str(v) for v in self.logical_cpus)
        per = " / ".join(str(v) for v in self.threads_per_core) or "?"
        return f"{n} logical CPUs, {per} per core"

    def memory_text(self) -> str:
        return self._with_predating(" / ".join(f"{m / 2**30:.1f} GiB" for m in self.memory), "memory_bytes")

    def virtualisation_text(self) -> str:
        return self._with_predating(" / ".join(self.virtualisation), "virtualisation")

    def _with_predating(self, known: str, field: str) -> str:
        """`known`, and which records predate `field` (per study), with what their provenance shares with
        the records that carry it; never a bare 'not recorded'."""
        old = self.predating.get(field)
        if not old:
            return known or UNKNOWN
        n = sum(old.values())
        which = ", ".join(f"{c} of {s}" for s, c in sorted(old.items()))
        if not known:
            return f"not recorded: all {n} records of this host ({which}) predate the field"
        without, with_ = self.machine_without.get(field, set()), self.machine_with.get(field, set())
        same_cpu = {m[:2] for m in without} <= {m[:2] for m in with_}
        kernels = sorted({m[2] for m in without} - {m[2] for m in with_})
        tail = "; same CPU model and CPU layout as the records that carry it" if same_cpu else ""
        tail += f", kernel {' / '.join(kernels)}" if kernels and same_cpu else ""
        return f"{known} ({n} older records predate the field: {which}{tail})"

    def uncontrolled_text(self) -> str:
        """The host variables a sweep could not set, grouped by the reason in plain words ('CPU governor,
        fixed clock, turbo boost: the host exposes no CPU frequency control; SMT: ...'), or 'none'.
        The records' own reasons (sysfs paths and values) stay in the records."""
        by_reason: dict[str, list[str]] = {}
        for var, why in self.uncontrolled.items():
            by_reason.setdefault(plain_reason(why), []).append(VARIABLE_NAMES.get(var, var.replace("_", " ")))
        return "; ".join(f"{', '.join(names)}: {why}" for why, names in by_reason.items()) or "none"

    def cpu_model(self) -> str:
        return " / ".join(self.cpu_models) or UNKNOWN

    def kernel(self) -> str:
        return " / ".join(self.kernels) or UNKNOWN

    def gpu(self) -> str:
        if not self.gpus:
            return "none recorded"
        drv = f" (driver {' / '.join(self.gpu_drivers)})" if self.gpu_drivers else ""
        return " / ".join(self.gpus) + drv

    def span(self) -> str:
        if not self.first_utc:
            return UNKNOWN
        return self.first_utc if self.first_utc == self.last_utc else f"{self.first_utc} – {self.last_utc}"


def _text(value: Any) -> str | None:
    """A provenance value as display text; None for absent/empty values."""
    if value is None or value == "" or value == [] or value == {}:
        return None
    if isinstance(value, dict):
        # e.g. {"name": "NVIDIA H100", "driver": "550.54"}: show the name-like part
        for key in ("name", "model", "product"):
            if value.get(key):
                return str(value[key])
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple)):
        parts = [p for p in (_text(v) for v in value) if p]
        return ", ".join(parts) or None
    return str(value)


def _add(seen: list[str], value: Any) -> None:
    text = _text(value)
    if text and text not in seen:
        seen.append(text)


def _gpu_fields(prov: dict[str, Any]) -> tuple[Any, Any]:
    """(gpu, driver) from provenance, whichever spelling the writer used."""
    gpu = prov.get("gpu")
    driver = prov.get("gpu_driver") or prov.get("driver") or prov.get("cuda_driver")
    if isinstance(gpu, dict):
        driver = driver or gpu.get("driver") or gpu.get("driver_version")
        names = gpu.get("names") or ([gpu["name"]] if gpu.get("name") else [])
        gpu = " / ".join(str(n) for n in names) or None
    return gpu, driver


def host_environments(records: Iterable[dict[str, Any]]) -> list[HostEnvironment]:
    """Group records by host and summarise each host (sorted by host name). The host is the records' folder
    (``results_host``, which collect() adds: data/results/<study>/<host>/), else ``provenance.host``: two
    machines may share a hostname (the GPU lease's host and the development VM were both ``vm``), the folder
    names the machine the records were filed for."""
    hosts: dict[str, HostEnvironment] = {}
    counters: dict[str, tuple[Counter, Counter, Counter]] = {}
    for rec in records:
        prov = rec.get("provenance") or {}
        name = _text(rec.get("results_host")) or _text(prov.get("host")) or UNKNOWN
        env = hosts.setdefault(name, HostEnvironment(host=name))
        studies, targets, emulation = counters.setdefault(name, (Counter(), Counter(), Counter()))
        env.records += 1
        _add(env.cpu_models, prov.get("cpu_model"))
        _add(env.kernels, prov.get("kernel"))
        layout = prov.get("cpu_layout") or {}
        if isinstance(layout, dict):
            for key, seen in (("logical", env.logical_cpus), ("threads_per_core", env.threads_per_core)):
                if isinstance(layout.get(key), int) and layout[key] not in seen:
                    seen.append(layout[key])
        if isinstance(prov.get("memory_bytes"), int) and prov["memory_bytes"] not in env.memory:
            env.memory.append(prov["memory_bytes"])
        _add(env.virtualisation, prov.get("virtualisation"))
        machine = (_text(prov.get("cpu_model")), repr(sorted(layout.items())) if isinstance(layout, dict) else None,
                   _text(prov.get("kernel")))  # fmt: skip
        for fld in ("memory_bytes", "virtualisation"):
            if _text(prov.get(fld)) is None:
                env.predating.setdefault(fld, Counter())[str(rec.get("study", UNKNOWN))] += 1
                env.machine_without.setdefault(fld, set()).add(machine)
            else:
                env.machine_with.setdefault(fld, set()).add(machine)
        for var, c in (rec.get("host_control") or {}).items():
            if isinstance(c, dict) and c.get("settable") is False and var not in env.uncontrolled:
                env.uncontrolled[var] = str(c.get("why") or "not settable")
        gpu, driver = _gpu_fields(prov)
        _add(env.gpus, gpu)
        _add(env.gpu_drivers, driver)
        commit = _text(prov.get("git_commit"))
        if commit:
            _add(env.git_commits, commit[:12])
        pkgs = prov.get("packages")
        if isinstance(pkgs, dict):
            for pkg, ver in pkgs.items():
                seen = env.packages.setdefault(str(pkg), [])
                _add(seen, ver)
        studies[str(rec.get("study", UNKNOWN))] += 1
        target = str(rec.get("target", UNKNOWN))
        scheme = f"{k}://" if (k := _uri.kind(target)) else target
        targets[scheme] += 1
        if prov.get("profile"):
            emulation[f"{prov['profile']} @ scale {prov.get('scale')}"] += 1
        utc = _text(prov.get("utc"))
        if utc:
            env.first_utc = min(env.first_utc or utc, utc)
            env.last_utc = max(env.last_utc or utc, utc)
    for name, env in hosts.items():
        studies, targets, emulation = counters[name]
        env.studies = dict(sorted(studies.items()))
        env.targets = dict(sorted(targets.items()))
        env.emulation = dict(sorted(emulation.items()))
    return [hosts[k] for k in sorted(hosts)]


def result_files(results_dir: str | os.PathLike) -> list[Path]:
    """The committed record files below `results_dir` (sorted; temporary files skipped)."""
    root = Path(results_dir)
    if not root.is_dir():
        return []
    return sorted(f for f in root.rglob("*.jsonl") if not f.name.startswith(".tmp-"))


def collect(results_dir: str | os.PathLike) -> list[HostEnvironment]:
    """Load and validate every record below `results_dir`, then summarise by host.

    A corrupt or invalid record raises :class:`nvmelab.results.records.RecordError` naming
    the file and line; an absent or empty folder gives an empty list.
    """
    records: list[dict[str, Any]] = []
    for path in result_files(results_dir):
        for i, rec in enumerate(load_records(path)):
            records.append({**validate(rec, f"{path} record {i}"), "results_host": path.parent.name})
    return host_environments(records)


def package_versions(env: HostEnvironment) -> str:
    """The key package versions of a host as one line, e.g. ``nvmelab 0.1.0, numpy 2.1``."""
    keys = [k for k in KEY_PACKAGES if k in env.packages] or sorted(env.packages)
    return ", ".join(f"{k} {' / '.join(env.packages[k])}" for k in keys if env.packages[k]) or UNKNOWN
