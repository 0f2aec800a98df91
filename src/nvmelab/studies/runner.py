# SPDX-License-Identifier: BSD-3-Clause
"""The sweep runner: runs a study's plan, one record per run and repetition.

Key functions:
    run_study(study, preset, target=None, run_fn=None, ...) -> SweepReport
    execute_run(run, run_fn, host, ...) -> Outcome     one run, host variables around it
    load_results(study, preset=None) -> DataFrame      our records of a study, all hosts
    results_path(root, study, host, preset)            data/results/<study>/<host>/<preset>.jsonl
    study_results(study, preset, ...) -> (df, report)  what a notebook shows: records and/or a run
    preset_name(preset=None) / run_mode(mode=None)     $NVMELAB_PRESET and $NVMELAB_RUN, checked
    ensure_quiet(limit, seconds)                       refuse to take records on a busy host
    set_aside(root, study, preset) -> Path | None      move this host's records aside (a re-measurement)

Presets and run modes (one mechanism for every study):
* ``NVMELAB_PRESET`` (quick | standard | paper) picks the sweep; ``quick`` is a smoke test (CI,
  nbval) whose records go under build/results and are never published.
* ``NVMELAB_RUN`` says whether a notebook may measure (study_results):
    auto     use the recorded runs of the preset when any host has them, else run here (default)
    never    only recorded runs, never measure (the book: it publishes the committed records)
    missing  run (resume) what this host has not recorded yet, then show this host's records

Behaviour:
* Records are appended (nvmelab.results.records.append_records: one line, fsync, under
  an flock) right after each run, so an interrupted sweep (Ctrl-C, SIGTERM, SIGHUP,
  crash, full disk) loses no finished record; rerunning resumes: runs whose key is
  already recorded are skipped. A sweep holds the sweep lock of its records file
  (records.sweep_lock): a second sweep on the same file is refused, or waits (``wait``).
* Whatever ends a sweep, guard.SweepGuard gives back what it holds: stress-ng stopped,
  host variables restored, generated scratch files removed, locks released.
* The run function is injectable (tests pass a fake one); by default it is the
  spec's engine (``nvmelab.engines.perf.run`` or ``nvmelab.engines.gpu.run_cuda``).
* Host variables (hostvars.HostControl) are applied when the host allows it and
  restored in ``finally`` (also on Ctrl-C). A run whose requested host value
  cannot be set is skipped and listed in the report; never mislabelled.
* Progress: tqdm with an ETA; the expected duration is logged up front.
* `executor` may be a DaskExecutor (distributed.py) to spread runs over hosts.
* ``executor=isolate.IsolatedExecutor(timeout_s)``: each run in a process of its own under a time limit;
  a run that hangs, crashes or raises gives a failed-point record (``failed``, counted in the report),
  which load_results leaves out.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..driver import uri as _uri
from ..host import cpus as _cpus
from ..host.hostvars import HostControl, used_cpus
from ..host.signals import signal_name
from ..results import records as _records
from .guard import SweepGuard
from .paths import Where, default_results_root, host_id, results_path, scratch_dir  # noqa: F401 (re-exported)
from .spec import ENGINES, OPTIONAL_PRESETS, PRESETS, Plan, Run, StudySpec, load_spec

log = logging.getLogger(__name__)

RunFn = Callable[..., dict]
#: Per-run overhead (open, bring-up, teardown) assumed for the up-front estimate, seconds.
EST_OVERHEAD_S = 0.2
#: Size of a scratch file created for file:// targets unless the spec says otherwise.
DEFAULT_FILE_MIB = 64
#: Values of $NVMELAB_RUN (see the module docstring).
RUN_MODES = ("auto", "never", "missing")
#: The preset a notebook uses when neither its parameter nor $NVMELAB_PRESET names one.
DEFAULT_PRESET = "standard"
#: CPU use of the rest of the host (percent of one CPU) above which ensure_quiet refuses.
QUIET_MAX_PERCENT = 10.0
#: Seconds ensure_quiet watches the host.
QUIET_WINDOW_S = 2.0


class HostBusyError(RuntimeError):
    """The host is not quiet enough to take records meant for publication."""


def ensure_quiet(limit: float = QUIET_MAX_PERCENT, seconds: float = QUIET_WINDOW_S) -> float | None:
    """Watch the host's CPU use for `seconds`; raise HostBusyError above `limit` (percent of one
    CPU). Returns the use measured (None where /proc/stat cannot be read: nothing is checked)."""
    used = _cpus.host_busy(seconds)
    if used is not None and used > limit:
        raise HostBusyError(
            f"host busy: other processes used {used:.0f} % of a CPU over {seconds:g} s (limit {limit:g} %); "
            "records for the book need a quiet host: stop the other work, or pass --busy-ok to take them anyway"
        )
    log.info("host quiet: %.1f %% of a CPU used over %g s", used or 0.0, seconds)
    return used


def set_aside(root: str | Path, study: str, preset: str) -> Path | None:
    """Move this host's records of `study`/`preset` to ``<preset>.jsonl.replaced-<utc>`` next to
    them (git ignores those), so the next run measures every run of the plan afresh; the old
    file is kept, never deleted. Returns its new path, or None when there was none."""
    path = Where(Path(root), study, preset).here()
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = path.with_name(f"{path.name}.replaced-{stamp}")
    with _records.sweep_lock(path):  # never from under a sweep that is writing it
        path.rename(dest)
    log.info("%s: moved aside to %s", path, dest.name)
    return dest


def preset_name(preset: str | None = None) -> str:
    """The preset: the argument, else $NVMELAB_PRESET, else standard; an unknown name is an error."""
    name = preset or os.environ.get("NVMELAB_PRESET") or DEFAULT_PRESET
    if name not in PRESETS + OPTIONAL_PRESETS:
        names = ", ".join(PRESETS + OPTIONAL_PRESETS)
        raise ValueError(f"unknown preset {name!r} (NVMELAB_PRESET); choose one of {names}")
    return name


def run_mode(mode: str | None = None) -> str:
    """The run mode: the argument, else $NVMELAB_RUN, else auto; an unknown value is an error."""
    name = mode or os.environ.get("NVMELAB_RUN") or "auto"
    if name not in RUN_MODES:
        raise ValueError(f"unknown run mode {name!r} (NVMELAB_RUN); choose one of {', '.join(RUN_MODES)}")
    return name


def resolve_engine(name: str) -> RunFn:
    """The run function of an engine name ('cpu', 'cuda', 'blksum', 'tier'); a clear error when it
    does not exist."""
    modname, fn = ENGINES[name].module, ENGINES[name].function
    try:
        mod = importlib.import_module(modname)
    except ImportError as exc:
        raise RuntimeError(f"engine {name!r}: cannot import {modname} ({exc})") from None
    run = getattr(mod, fn, None)
    if run is None:
        raise RuntimeError(f"engine {name!r}: {modname}.{fn} is not available in this build")
    return run


def _engine_cleanup(name: str) -> None:
    """Call the engine's cleanup function, if it has one (after a sweep, also on errors)."""
    eng = ENGINES[name]
    if not eng.cleanup:
        return
    try:
        fn = getattr(importlib.import_module(eng.module), eng.cleanup)
    except (ImportError, AttributeError):
        return
    fn()


def done_keys(paths: Iterable[Path]) -> set[str]:
    keys: set[str] = set()
    for p in paths:
        if p.exists():
            for rec in _records.iter_records(p):
                if "run_key" in rec:
                    keys.add(rec["run_key"])
    return keys


@dataclass
class Outcome:
    """What one run produced: a record, or the reason it was skipped; notes on host variables."""

    run: Run
    record: dict[str, Any] | None
    skipped: str | None
    notes: list[str]
    host: str
    seconds: float = 0.0


def _prepare_target(target: str, file_mib: int) -> None:
    """Create the data file of a file:// target when it does not exist (real data, no holes). A URI the
    engine will refuse (no absolute path, not the grammar) is left to the engine to name."""
    if _uri.kind(target) != "file":
        return
    try:
        u = _uri.parse(target)
    except ValueError:
        return
    if u.authority or not u.path.startswith("/"):
        return
    path = Path(u.path)
    if path.exists():
        return
    from ..engines import perf

    path.parent.mkdir(parents=True, exist_ok=True)
    log.info("creating %s (%d MiB) for the file target", path, file_mib)
    perf.make_file(str(path), file_mib * 1024 * 1024)


def _expected_seconds(run: Run) -> float | None:
    """How long a run should take (runtime + warmup), None when its spec does not say."""
    if run.params.get("runtime") is None:
        return None
    return float(run.params["runtime"]) + float(run.params.get("warmup", 0) or 0)


def execute_run(run: Run, run_fn: RunFn, host: HostControl, *, file_mib: int = DEFAULT_FILE_MIB) -> Outcome:
    """One run: host variables, optional stress, the engine, the record annotated with its key."""
    t0 = time.monotonic()
    me = host_id()
    ok, notes = host.apply(run.host_params)
    if not ok:
        return Outcome(run, None, "; ".join(n for n in notes if n.startswith("could not")), notes, me)
    stress = int(run.params.get("stress", 0) or 0)
    try:
        if stress:
            try:
                cpus = used_cpus(int(run.params.get("ncpus", 1)), int(run.params.get("thr_sib", 0)), host.root)
            except ValueError as exc:
                return Outcome(run, None, f"could not set stress=1: {exc}", notes, me)
            started, note = host.start_stress(cpus, _expected_seconds(run))
            notes.append(note)
            if not started:
                return Outcome(run, None, f"could not set stress=1: {note}", notes, me)
        _prepare_target(str(run.params.get("target", "")), file_mib)
        before = _cpus.host_cpu_times()
        try:
            rec = dict(run_fn(study=run.study, **run.engine_params))
        except ValueError as exc:  # a parameter this host or target cannot take: skip it, say why
            return Outcome(run, None, f"engine refused the run: {exc}", notes, me)
        host_usage = _cpus.host_usage(before, _cpus.host_cpu_times())
        if stress and not host.stress_running():  # its --timeout ran out: the label stress=1 would be untrue
            return Outcome(run, None, "could not set stress=1: stress-ng ended before the run did", notes, me)
    finally:
        host.stop_stress()
    rec["study"] = run.study
    rec["repetition"] = run.repetition
    rec["stress"] = stress
    rec["run_key"] = run.key
    rec["preset"] = run.preset
    rec["sweeps"] = list(run.sweeps)
    rec["host_control"] = host.controllability()  # what this host let the sweep vary, and why not
    rec["host_cpu_usage"] = host_usage  # the whole host during the run (records.py): was it quiet?
    flags = []
    for var in ("governor", "turbo", "smt"):
        want = run.params.get(var)
        if want is not None and rec.get(var) is not None and str(rec[var]) != str(want):
            flags.append(f"{var}: requested {want}, engine recorded {rec[var]}")
    if flags:
        rec["host_flags"] = flags
        notes.extend(flags)
        log.warning("run %s: %s", run.label(), "; ".join(flags))
    _records.validate(rec, f"record of run {run.label()}")
    return Outcome(run, rec, None, notes, me, time.monotonic() - t0)


@dataclass
class SweepReport:
    """What a sweep did: counts, the records written, what was skipped and why."""

    study: str
    preset: str
    root: Path
    planned: int
    already_done: int
    ran: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    paths: set[Path] = field(default_factory=set)
    interrupted: bool = False
    failed: list[tuple[str, str]] = field(default_factory=list)  # (run label, why): failed-point records
    not_started: int = 0  # runs left when an isolated sweep's time budget was used (a rerun resumes them)

    def could_not_set(self) -> list[str]:
        """The distinct host values that could not be set (from skipped runs)."""
        seen: list[str] = []
        for _, why in self.skipped:
            for part in why.split("; "):
                head = part.split(" (host has")[0].split(":")[0]
                if head not in seen:
                    seen.append(head)
        return seen

    def summary(self) -> str:
        s = (
            f"{self.study}/{self.preset}: {self.planned} runs planned, {self.already_done} already recorded, "
            f"{self.ran} run now, {len(self.skipped)} skipped"
        )
        if self.failed:
            s += f", {len(self.failed)} failed (failed-point records)"
        if self.not_started:
            s += f", {self.not_started} not started (time budget used; run again to resume)"
        if self.interrupted:
            s += " (interrupted)"
        if self.skipped:
            s += "; " + "; ".join(self.could_not_set())
        return s


class LocalExecutor:
    """Runs one run at a time in this process, host variables applied here."""

    def __init__(self, allow_host_changes: bool = True, host: HostControl | None = None):
        self.host = host or HostControl(allow_changes=allow_host_changes)

    def execute(self, runs: list[Run], run_fn: RunFn, file_mib: int) -> Iterator[Outcome]:
        try:
            for run in runs:
                yield execute_run(run, run_fn, self.host, file_mib=file_mib)
        finally:
            self.host.close()

    def done_paths(self, where: Where) -> list[Path]:
        return [where.here()]


def run_study(
    study: str | StudySpec,
    preset: str = "quick",
    *,
    target: str | None = None,
    run_fn: RunFn | None = None,
    results_root: str | Path | None = None,
    executor: Any = None,
    progress: bool = True,
    allow_host_changes: bool = True,
    max_runs: int | None = None,
    select: Callable[[Run], bool] | None = None,
    wait: bool = False,
    overrides: dict[str, Any] | None = None,
) -> SweepReport:
    """Run (or resume) a study's preset; returns a SweepReport.

    `target` replaces the spec's default target URI. `run_fn` replaces the
    engine (signature of nvmelab.engines.perf.run, returning one record). `max_runs`
    stops after that many new runs (for tests and partial sweeps). `select` keeps only the runs
    of the plan it returns true for (a part of a grid, e.g. a lease's calibration points). `wait`:
    when another sweep holds the records file, wait for it rather than refuse (RecordsBusyError).
    `overrides`: fixed parameters replaced in every run (StudySpec.plan).
    """
    spec = study if isinstance(study, StudySpec) else load_spec(study)
    plan: Plan = spec.plan(preset, target=target, overrides=overrides)
    where = Where.of(spec.study, preset, results_root)
    if run_fn is None:
        run_fn = resolve_engine(spec.engine)
    executor = executor or LocalExecutor(allow_host_changes)
    with SweepGuard(wait=wait) as guard:
        guard.lock(executor.done_paths(where))  # before reading what is done
        return _sweep(spec, where, plan, run_fn, executor, guard, max_runs, progress, select)


def _sweep(
    spec: StudySpec,
    where: Where,
    plan: Plan,
    run_fn: RunFn,
    executor: Any,
    guard: SweepGuard,
    max_runs: int | None,
    progress: bool,
    select: Callable[[Run], bool] | None = None,
) -> SweepReport:
    """The body of run_study, under its guard."""
    done = done_keys(executor.done_paths(where))
    runs = [r for r in plan.runs if select(r)] if select is not None else plan.runs
    pending = [r for r in runs if r.key not in done]
    rep = SweepReport(spec.study, where.preset, where.root, len(runs), len(runs) - len(pending))
    if max_runs is not None:
        pending = pending[:max_runs]
    per_run = sum(float(r.params.get("runtime", 0) or 0) + float(r.params.get("warmup", 0) or 0) for r in pending)
    log.info(
        "%s/%s: %d runs to do (%d recorded); about %.0f s",
        spec.study,
        where.preset,
        len(pending),
        rep.already_done,
        per_run + len(pending) * EST_OVERHEAD_S,
    )
    file_mib = int(spec.extra.get("file_mib", DEFAULT_FILE_MIB))
    from tqdm import tqdm

    bar = tqdm(total=len(pending), desc=f"{spec.study}/{where.preset}", unit="run", disable=not progress, leave=False)
    try:
        for out in guard.closing(executor.execute(pending, run_fn, file_mib)):
            rep.notes.extend(n for n in out.notes if n not in rep.notes)
            if out.record is None:
                rep.skipped.append((out.run.label(), out.skipped or "skipped"))
                log.warning("skipped %s: %s", out.run.label(), out.skipped)
            else:
                path = where.path(out.host)
                guard.lock([path])  # a host folder the executor had no records in yet (Dask)
                _records.append_records(path, [out.record])
                rep.paths.add(path)
                rep.records.append(out.record)
                rep.ran += 1
                if out.record.get("failed"):
                    rep.failed.append(
                        (out.run.label(), f"{out.record['failed']['kind']}: {out.record['failed']['reason']}")
                    )
            bar.update(1)
            bar.set_postfix_str(out.run.label()[:60], refresh=False)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (host.signals.Terminated)
        rep.interrupted = True
        log.warning(
            "interrupted (%s): %d records written this time are kept; rerun to resume", signal_name(exc), rep.ran
        )
        raise
    finally:
        bar.close()
        _engine_cleanup(spec.engine)
        rep.not_started = int(getattr(executor, "left", 0))
    log.info(rep.summary())
    return rep


def load_results(study: str, preset: str | None = None, root: str | Path | None = None) -> pd.DataFrame:
    """Our records of `study` (all hosts; one preset or all) as a DataFrame (analysis.to_frame).
    Left out (results.checks.excluded), and counted in the log: failed-point records (isolate.py: a run
    that hung, crashed or raised), records whose self-checks failed (checks_ok false: kept in the file,
    marked). Runs the emulator limited (emulator_limited true) stay in: figures draw them marked (checks.flagged)."""
    from ..results.analysis import to_frame
    from ..results.checks import excluded

    root = Path(root) if root is not None else default_results_root(preset or "standard")
    base = root / study
    if not base.is_dir():
        return to_frame([])
    pattern = f"*/{preset}.jsonl" if preset else "*/*.jsonl"
    files = sorted(p for p in base.glob(pattern) if not p.name.startswith(".tmp-"))
    recs, left_out = [], {}
    for f in files:
        for rec in _records.unique_records(_records.iter_records(f, check=True), str(f)):
            why = excluded(rec)
            if why:
                left_out[why] = left_out.get(why, 0) + 1
                continue
            rec["results_host"] = f.parent.name  # the folder it is filed under
            recs.append(rec)
    for why, n in left_out.items():
        log.info("%s: %d records left out of the figures (%s)", study, n, why)
    return to_frame(recs)


#: The preset a GPU lease records (nvmelab.lease.plan): short windows, one repetition.
LEASE_PRESET = "lease"


def load_gpu_results(
    study: str, preset: str | None = None, root: str | Path | None = None
) -> tuple[pd.DataFrame, str, list[Path]]:
    """A device-initiated study's records: the preset's when any host has them, else a GPU lease's (preset
    ``lease``: the plan's short windows and one repetition, taken on a lent GPU host within its minutes).
    Returns (records as load_results gives them, the preset they are of, their files for
    publication.declare_sources)."""
    preset = preset_name(preset)
    df = pd.DataFrame()
    for pr in dict.fromkeys((preset, LEASE_PRESET)):
        df = load_results(study, pr, root)
        if not df.empty:
            where = Where.of(study, pr, root)
            return df, pr, sorted({where.path(h) for h in df["results_host"]})
    return df, preset, []


def study_results(
    study: str | StudySpec,
    preset: str | None = None,
    *,
    target: str | None = None,
    reuse: bool = True,
    run_fn: RunFn | None = None,
    results_root: str | Path | None = None,
    progress: bool = True,
    mode: str | None = None,
) -> tuple[pd.DataFrame, SweepReport | None]:
    """The records a notebook shows for `study`/`preset`, from one host.

    `preset` None: $NVMELAB_PRESET (preset_name). `mode` None: $NVMELAB_RUN (run_mode):
    auto (default): when records of this preset and target exist (committed under data/results,
    or from an earlier run; matched by run key, so a different target or changed parameters do
    not count), use them without running: this host's if it has any, else those of the host with
    the most records; when there are none, run the sweep here. ``reuse=False`` is the same as
    mode missing. never: recorded runs only (an empty frame when there are none); nothing runs.
    missing: run (resume) what this host has not recorded, then return this host's records.
    Returns (records as a DataFrame, the SweepReport or None when nothing ran). Every frame
    carries ``results_path`` (the records file of each row) for publication.declare_sources.
    """
    preset = preset_name(preset)
    mode = run_mode(mode)
    if not reuse and mode == "auto":
        mode = "missing"
    spec = study if isinstance(study, StudySpec) else load_spec(study)
    where = Where.of(spec.study, preset, results_root)
    root = where.root
    keys = {r.key for r in spec.plan(preset, target=target).runs}

    def of_plan(df: pd.DataFrame) -> pd.DataFrame:  # only records of this plan (same target, parameters)
        return df[df["run_key"].isin(keys)] if "run_key" in df else df.iloc[0:0]

    def with_path(df: pd.DataFrame) -> pd.DataFrame:
        df = df.reset_index(drop=True)
        df["results_path"] = [str(where.path(h)) for h in df.get("results_host", [])]
        return df

    if mode in ("auto", "never"):
        df = of_plan(load_results(spec.study, preset, root))
        if not df.empty:
            counts = df["results_host"].value_counts()
            me = host_id()
            host = me if me in counts.index else sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
            return with_path(df[df["results_host"] == host]), None
        if mode == "never":
            log.warning(
                "%s/%s: no records of this plan under %s and NVMELAB_RUN=never: nothing is measured",
                spec.study,
                preset,
                root,
            )
            return with_path(df), None
    rep = run_study(spec, preset, target=target, run_fn=run_fn, results_root=root, progress=progress)
    df = of_plan(load_results(spec.study, preset, root))
    if not df.empty:
        df = df[df["results_host"] == host_id()]
    return with_path(df), rep


def engine_available(name: str) -> tuple[bool, str]:
    """(True, "") when the engine can run on this host, else (False, why): the GPU notebooks
    use it to say plainly why our GPU runs are missing."""
    try:
        resolve_engine(name)
    except RuntimeError as exc:
        return False, str(exc)
    if name == "cuda":
        try:
            from .. import _native

            n = _native.cuda_device_count() if hasattr(_native, "cuda_device_count") else 0
        except Exception as exc:  # noqa: BLE001 - any failure means: no usable GPU
            return False, f"CUDA runtime unavailable: {exc}"
        if n <= 0:
            return False, "no CUDA GPU on this host"
    return True, ""
