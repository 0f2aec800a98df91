# SPDX-License-Identifier: BSD-3-Clause
"""Study specifications: one TOML file per study, expanded into a list of runs.

A spec (``<study>/spec.toml``, one folder per study) names the study, its engine and default target,
the fixed parameters, exclusions, and presets. A preset (``quick``, ``standard``,
``paper``) overrides fixed parameters and lists one or more *sweeps*; each sweep
is the Cartesian product of its variables' values. The runs of a preset are the
union of its sweeps (a configuration shared by two sweeps runs once) minus the
exclusions, times the repetitions.

Key names:
    load_spec(name_or_path) -> StudySpec;  list_specs() -> names
    StudySpec.plan(preset, target=None) -> Plan (runs, in a stable order)
    Plan.sweep_frame(df, sweep) -> the rows of df that belong to one sweep

Parameters a run may carry (anything else is an error naming the key):
    engine parameters  those of the spec's engine (``ENGINES[engine].params``): for
                       cpu and cuda every row of the engine's C table (perf_params.h,
                       crun_params.h: the module's ``params()``) plus its Python-only
                       keys (the module's ``PYTHON_PARAMS``: target, backend, ncpus, ...);
                       stacks hands up its PYTHON_PARAMS only (tool, via, ...; no C table);
                       blksum and tier name their own (image and digest; volume, cache
                       and workload)
    host variables     governor, turbo, smt, stress (applied by hostvars; a
                       variable a preset does not name is recorded as found)
Book keys: ``label`` (the chapter's label) and ``order`` (its place among the
study chapters); book/conf.py reads the study list from the specs (book_studies).
``chapter`` names the study whose chapter shows this one's records when it has no
chapter of its own (cpu_submit is shown in cpu_initiated's).
A variable's values may be inline tables; such a value is a bundle of
parameters set together (e.g. a stack = target + backend + qdepth).
Strings may use ``{scratch}`` (the scratch folder for file targets).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from ..driver import uri as _uri

#: Most runs a preset may expand to (the paper grid of cpu_initiated has 14,640): a larger plan is
#: refused before it is built, since every run is held in memory (and a sweep that long is a typo).
MAX_PLAN_RUNS = 200_000
#: What a study name may be: it becomes a folder of the results tree (no '/', no '..', not absolute).
STUDY_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: Host variables (seed 004) the runner applies around a run.
HOST_VARS = ("governor", "fixed_freq", "turbo", "smt", "stress")
#: Preset-level settings that are not run parameters.
SETTINGS = ("repetitions",)
#: Presets every spec defines.
PRESETS = ("quick", "standard", "paper")
#: Presets only some specs define: ``lease``, the device-initiated grids sized to fit a GPU lease
#: (env/gpu-lease.sh; nvmelab.lease.plan holds the plan and its time budget).
OPTIONAL_PRESETS = ("lease",)
#: Repetitions per configuration unless a spec says otherwise (as published).
DEFAULT_REPETITIONS = 5


@dataclass(frozen=True)
class Engine:
    """An engine the runner can call: ``module.function(study=..., **params)`` returns one record.

    ``params`` are the run parameters it takes: ``own`` for an engine without a C table; for one with a
    table (``table=True``) the module hands them up, every row of ``module.params()`` (the C table, from
    nvmelab._native) and the keys of ``module.PYTHON_PARAMS`` (what Python resolves before the engine),
    so a new table row can be swept from a spec with no edit here. ``cleanup`` (optional) names a function
    of the module the runner calls once a sweep ends (the blksum engine deletes its generated image)."""

    module: str
    function: str
    own: tuple[str, ...] = ()
    cleanup: str | None = None
    table: bool = False

    @property
    def params(self) -> tuple[str, ...]:
        return _table_params(self.module) if self.table else self.own


@functools.cache
def _table_params(module: str) -> tuple[str, ...]:
    """The run parameters an engine module hands up: its Python-only keys, then its C table's rows."""
    mod = importlib.import_module(module)
    return (*mod.PYTHON_PARAMS, *(p["name"] for p in mod.params()))


#: Engines by name.
ENGINES = {
    "cpu": Engine("nvmelab.engines.perf", "run", table=True),
    "cuda": Engine("nvmelab.engines.gpu", "run_cuda", table=True),
    "stacks": Engine("nvmelab.engines.stacks", "run", table=True),
    "blksum": Engine(
        "nvmelab.engines.blksum",
        "study_run",
        ("target", "tool", "digest", "backend", "ncpus", "qdepth", "iosize", "image_mib", "mode"),
        cleanup="study_cleanup",
    ),
    "tier": Engine(
        "nvmelab.engines.tier.engine",
        "run",
        (
            "target",
            "rw",
            "fraction",
            "ndevs",
            "cache",
            "policy",
            "nqubits",
            "dtype",
            "page",
            "depth",
            "accesses",
            "chunk",
            "qdepth",
            "readahead",
            "coalesce",
            "seed",
            "allow_write",
        ),
    ),
}


def known_params(engine: str) -> set[str]:
    """The parameters a run of `engine` may carry: the engine's own and the host variables."""
    return set(ENGINES[engine].params) | set(HOST_VARS)


class SpecError(ValueError):
    """A study spec that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Run:
    """One run of a sweep: parameters, repetition, and the key used to resume."""

    study: str
    preset: str
    params: dict[str, Any]
    repetition: int
    sweeps: tuple[str, ...]
    engine: str = "cpu"

    @property
    def config_key(self) -> str:
        return json.dumps(self.params, sort_keys=True, separators=(",", ":"))

    @property
    def key(self) -> str:
        return f"{self.config_key}#{self.repetition}"

    @property
    def engine_params(self) -> dict[str, Any]:
        names = ENGINES[self.engine].params
        return {k: v for k, v in self.params.items() if k in names}

    @property
    def host_params(self) -> dict[str, Any]:
        return {k: v for k, v in self.params.items() if k in HOST_VARS}

    def label(self) -> str:
        p = self.params
        keys = [
            k
            for k in (
                "tool",
                "backend",
                "digest",
                "rw",
                "fraction",
                "cache",
                "policy",
                "iosize",
                "qdepth",
                "nqueues",
                "ncpus",
                "ndevs",
                "thr_sib",
                "governor",
                "turbo",
                "smt",
                "stress",
            )
            if k in p
        ]
        return " ".join(f"{k}={p[k]}" for k in keys) + f" rep={self.repetition}"


@dataclass
class Plan:
    """The expanded runs of one preset, plus what the notebooks need to select sweeps."""

    spec: StudySpec
    preset: str
    runs: list[Run]
    sweeps: dict[str, list[dict[str, Any]]]  # sweep name -> its configurations (params)

    def sweep_frame(self, df: pd.DataFrame, sweep: str) -> pd.DataFrame:
        """Rows of `df` whose varied parameters match a configuration of `sweep`.

        Matching uses the parameters that appear as columns in `df` and are
        scalars (bundles are compared through their members).
        """
        if sweep not in self.sweeps:
            raise KeyError(f"{self.spec.study}/{self.preset} has no sweep {sweep!r}; it has {', '.join(self.sweeps)}")
        configs = pd.DataFrame(self.sweeps[sweep])
        cols = [c for c in configs.columns if c in df.columns and c not in ("runtime", "warmup", "target")]
        if df.empty or not cols:
            return df.iloc[0:0]
        keys = configs[cols].drop_duplicates()
        left = df.copy()
        for c in cols:  # compare as text so 1 == 1.0 and None/NaN line up
            left[f"__{c}"] = left[c].map(_norm)
            keys[f"__{c}"] = keys[c].map(_norm)
        merged = left.merge(keys[[f"__{c}" for c in cols]], on=[f"__{c}" for c in cols], how="inner")
        return merged.drop(columns=[f"__{c}" for c in cols])

    def missing(self, df: pd.DataFrame) -> pd.DataFrame:
        """The configurations of this plan with no record in `df` (matched by run key), one row
        each: their parameters, ``repetitions`` missing, and ``sweeps``."""
        have = set(df["run_key"]) if "run_key" in df.columns else set()
        rows: dict[str, dict[str, Any]] = {}
        for r in self.runs:
            if r.key in have:
                continue
            row = rows.setdefault(r.config_key, dict(r.params, repetitions=0, sweeps=", ".join(r.sweeps)))
            row["repetitions"] += 1
        return pd.DataFrame(list(rows.values()))


def _norm(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "None"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


@dataclass
class StudySpec:
    """A parsed study spec (see the module docstring for the file format)."""

    study: str
    title: str
    engine: str
    target: str
    source: str
    fixed: dict[str, Any]
    exclude: list[dict[str, Any]]
    presets: dict[str, dict[str, Any]]
    path: Path | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    order: int = 0
    chapter: str = ""

    def preset_names(self) -> list[str]:
        return list(self.presets)

    def plan(
        self,
        preset: str,
        target: str | None = None,
        scratch: str | None = None,
        overrides: dict[str, Any] | None = None,
    ) -> Plan:
        """Expand `preset` into runs; `target` replaces the spec's default target (a sweep value
        that names its own target, like a file-backed stack, keeps its own); `overrides` replaces fixed
        parameters of every run (e.g. ndevs for another target: a part of a lease), checked like the spec's own."""
        if preset not in self.presets:
            raise SpecError(f"study {self.study!r} has no preset {preset!r}; choose one of {', '.join(self.presets)}")
        pre = self.presets[preset]
        base = dict(self.fixed)
        base.update(pre.get("fixed", {}))
        reps = int(pre.get("repetitions", base.pop("repetitions", DEFAULT_REPETITIONS)))
        base.pop("repetitions", None)
        if reps < 1:
            raise SpecError(f"{self.where}: preset {preset!r}: repetitions must be >= 1, got {reps}")
        for k, v in (overrides or {}).items():
            if k not in known_params(self.engine) or k == "target":
                raise SpecError(f"{self.where}: override {k!r} is not a parameter of engine {self.engine!r}")
            base[k] = v
        if target is not None:
            base["target"] = target  # replaces the default; a bundle naming its own target keeps it
        base.setdefault("target", self.target)
        self._check_plan_size(preset, pre, reps)
        configs: dict[str, dict[str, Any]] = {}
        member: dict[str, list[str]] = {}
        sweeps: dict[str, list[dict[str, Any]]] = {}
        for sw in pre.get("sweeps", [{"name": "all"}]):
            name = sw.get("name", "all")
            variables = {k: v for k, v in sw.items() if k != "name"}
            names = list(variables)
            values = [v if isinstance(v, list) else [v] for v in variables.values()]
            sweeps[name] = []
            for combo in itertools.product(*values):
                params = dict(base)
                for k, v in zip(names, combo):
                    if isinstance(v, dict):
                        params.update(v)
                    else:
                        params[k] = v
                params = {k: _expand(v, scratch) for k, v in params.items()}
                params["target"] = emu_target_for(params["target"], params.get("ndevs"))
                if self._excluded(params, pre.get("exclude", ())):
                    continue
                sweeps[name].append(params)
                ck = json.dumps(params, sort_keys=True)
                if ck not in configs:
                    configs[ck] = params
                    member[ck] = []
                member[ck].append(name)
        runs = [
            Run(self.study, preset, p, rep, tuple(member[ck]), self.engine)
            for ck, p in configs.items()
            for rep in range(reps)
        ]
        return Plan(self, preset, runs, sweeps)

    def _check_plan_size(self, preset: str, pre: dict[str, Any], reps: int) -> None:
        """Refuse a preset whose runs would exceed MAX_PLAN_RUNS before expanding it (the product
        of each sweep's value counts, times the repetitions: an upper bound, computed, not built)."""
        sizes = {}
        for j, sw in enumerate(pre.get("sweeps", [{"name": "all"}])):
            n = 1
            for k, v in sw.items():
                if k != "name":
                    n *= len(v) if isinstance(v, list) else 1
            sizes[sw.get("name", "all") if j == 0 else sw.get("name", f"sweeps[{j}]")] = n
        total = sum(sizes.values()) * reps
        if total > MAX_PLAN_RUNS:
            big = max(sizes, key=lambda k: sizes[k])
            raise SpecError(
                f"{self.where}: preset {preset!r} expands to {total:,} runs ({reps} repetition(s) of "
                f"{sum(sizes.values()):,} configurations; sweep {big!r} alone has {sizes[big]:,}), more than "
                f"the {MAX_PLAN_RUNS:,} a plan may hold: split the sweep or reduce its values"
            )

    def _excluded(self, params: dict[str, Any], preset_exclude: Any = ()) -> bool:
        """A combination the spec (every preset) or the preset itself leaves out."""
        return any(
            all(k in params and params[k] == v for k, v in ex.items()) for ex in (*self.exclude, *preset_exclude)
        )

    @property
    def where(self) -> str:
        return str(self.path) if self.path else f"spec {self.study}"


def emu_target_for(target: str, ndevs: Any) -> str:
    """An emulated target sized for the run: ``emu://?profile=x`` with ndevs=4 becomes
    ``emu://?profile=x&ndev=4`` (the emulator creates as many controllers as ``ndev`` says).
    A URI that already names ``ndev``, and every other scheme, is left as it is."""
    if ndevs is None or not _uri.is_emulated(str(target)) or _uri.get(target, "ndev") is not None:
        return target
    return _uri.with_params(target, ndev=int(ndevs))


def _expand(v: Any, scratch: str | None) -> Any:
    if isinstance(v, str) and "{scratch}" in v:
        if scratch is None:
            from .paths import scratch_dir

            scratch = str(scratch_dir())
        return v.replace("{scratch}", scratch)
    return v


def _check_table(where: str, table: Any) -> dict[str, Any]:
    """`table`, when it is a TOML table; else a SpecError naming where and what was given."""
    if not isinstance(table, dict):
        raise SpecError(f"{where}: must be a table ({{...}} or a [section]), got {type(table).__name__} {table!r}")
    return table


def _check_list(where: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise SpecError(f"{where}: must be a list of tables ([[...]]), got {type(value).__name__} {value!r}")
    return value


def check_study_name(where: str, name: Any) -> str:
    """`name` when it can be a study's folder in the results tree (STUDY_NAME_RE), else a SpecError."""
    if not isinstance(name, str) or not STUDY_NAME_RE.fullmatch(name):
        raise SpecError(
            f"{where}: study name {name!r} must be letters, digits, '_' or '-' (at most 64, not starting "
            "with '_' or '-'): it names the study's folder under the results root"
        )
    return name


def _check_keys(where: str, table: dict[str, Any], allowed: set[str]) -> None:
    _check_table(where, table)
    bad = sorted(set(table) - allowed)
    if bad:
        raise SpecError(f"{where}: unknown key(s) {', '.join(bad)}; allowed: {', '.join(sorted(allowed))}")


def parse_spec(data: dict[str, Any], path: Path | None = None) -> StudySpec:
    """Validate a spec's TOML tables and build a StudySpec."""
    where = str(path) if path else "spec"
    for key in ("study", "engine", "target", "presets"):
        if key not in data:
            raise SpecError(f"{where}: missing key {key!r}")
    check_study_name(where, data["study"])
    for key in ("engine", "target", "title", "source", "notes", "label", "chapter"):
        if key in data and not isinstance(data[key], str):
            raise SpecError(f"{where}: {key} must be a string, got {type(data[key]).__name__} {data[key]!r}")
    _check_keys(
        where,
        data,
        {
            "study",
            "title",
            "engine",
            "target",
            "source",
            "fixed",
            "exclude",
            "presets",
            "notes",
            "extra",
            "label",
            "order",
            "chapter",
        },
    )
    if data["engine"] not in ENGINES:
        raise SpecError(f"{where}: engine must be one of {', '.join(ENGINES)}, got {data['engine']!r}")
    KNOWN = known_params(data["engine"])  # noqa: N806 (the parameters of this spec's engine)
    fixed = data.get("fixed", {})
    _check_keys(f"{where} [fixed]", fixed, KNOWN | set(SETTINGS))
    exclude = _check_list(f"{where} exclude", data.get("exclude", []))
    for i, ex in enumerate(exclude):
        _check_keys(f"{where} exclude[{i}]", ex, KNOWN)
    presets = _check_table(f"{where} presets", data["presets"])
    _check_table(f"{where} extra", data.get("extra", {}))
    missing = [p for p in PRESETS if p not in presets]
    if missing:
        raise SpecError(f"{where}: presets {', '.join(missing)} missing (every spec defines {', '.join(PRESETS)})")
    for pname, pre in presets.items():
        pw = f"{where} presets.{pname}"
        _check_keys(pw, pre, {"fixed", "sweeps", "repetitions", "notes", "exclude"})
        _check_keys(f"{pw}.fixed", pre.get("fixed", {}), KNOWN)
        for i, ex in enumerate(_check_list(f"{pw}.exclude", pre.get("exclude", []))):
            _check_keys(f"{pw}.exclude[{i}]", ex, KNOWN)
        reps = pre.get("repetitions", 1)
        if not isinstance(reps, int) or isinstance(reps, bool):
            raise SpecError(f"{pw}: repetitions must be an integer, got {type(reps).__name__} {reps!r}")
        for j, sw in enumerate(_check_list(f"{pw}.sweeps", pre.get("sweeps", []))):
            _check_table(f"{pw}.sweeps[{j}]", sw)
            for k, v in sw.items():
                if k == "name":
                    continue
                if isinstance(v, list) and not v:
                    raise SpecError(f"{pw}.sweeps[{j}]: variable {k!r} has no values")
                items = v if isinstance(v, list) else [v]
                bundles = [isinstance(item, dict) for item in items]
                if k not in KNOWN and not all(bundles):
                    raise SpecError(
                        f"{pw}.sweeps[{j}]: unknown variable {k!r} (a name that is not a parameter "
                        f"must hold tables of parameters); parameters: {', '.join(sorted(KNOWN))}"
                    )
                for item in items:
                    if isinstance(item, dict):
                        _check_keys(f"{pw}.sweeps[{j}].{k}", item, KNOWN)
    return StudySpec(
        study=data["study"],
        title=data.get("title", data["study"]),
        engine=data["engine"],
        target=data["target"],
        source=data.get("source", ""),
        fixed=fixed,
        exclude=exclude,
        presets=presets,
        path=path,
        notes=data.get("notes", ""),
        extra=data.get("extra", {}),
        label=data.get("label", ""),
        order=int(data.get("order", 0)),
        chapter=data.get("chapter", ""),
    )


#: A study's spec file, in its folder under nvmelab/studies/ (``<study>/spec.toml``).
SPEC_FILE = "spec.toml"


def studies_dir():
    """The folder that holds one folder per study (its ``spec.toml``, analysis and figures): adding a study
    means adding a folder here; nothing else lists the studies."""
    return resources.files("nvmelab.studies")


def list_specs() -> list[str]:
    """Names of the studies that have a spec: the folders of studies_dir() holding a spec.toml."""
    return sorted(p.name for p in studies_dir().iterdir() if p.is_dir() and (p / SPEC_FILE).is_file())


def book_studies() -> list[tuple[str, str, str]]:
    """(study, chapter label, chapter title) of every spec, in book order (``order``, then the
    name): the study chapters of the book (book/conf.py). A spec whose ``chapter`` names another
    study has no chapter of its own and is left out; that study must exist."""
    specs = [load_spec(n) for n in list_specs()]
    names = {s.study for s in specs}
    for s in specs:
        if s.chapter and s.chapter not in names:
            raise SpecError(
                f"{s.path or s.study}: chapter {s.chapter!r} is not a study (studies: {', '.join(sorted(names))})"
            )
    specs = [s for s in specs if not s.chapter or s.chapter == s.study]
    return [
        (s.study, s.label or f"sec-experiments-{s.study.replace('_', '-')}", s.title)
        for s in sorted(specs, key=lambda s: (s.order, s.study))
    ]


def _read_text(p: Any) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{p}: not UTF-8 text (byte {exc.start + 1}: {exc.reason})") from None


def load_spec(name_or_path: str | Path) -> StudySpec:
    """Load a spec by study name (``cpu_initiated``) or by path to a TOML file."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        if p.is_dir():
            raise SpecError(f"study spec {p}: is a directory (name a .toml file or a study)")
        if not p.is_file():
            raise FileNotFoundError(f"study spec {p} does not exist")
        path = p
        text = _read_text(p)
    else:
        name = str(name_or_path).replace("-", "_")
        res = studies_dir() / name / SPEC_FILE
        if not name.isidentifier() or not res.is_file():
            raise SpecError(f"unknown study {name_or_path!r}; known: {', '.join(list_specs())}")
        path = Path(str(res))
        text = _read_text(res)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc})") from None
    return parse_spec(data, path)
