# SPDX-License-Identifier: BSD-3-Clause
"""Runs of a sweep in a child process under time limits: a hang or a crash costs that run only.

    IsolatedExecutor(timeout_s, budget_s=None)   an executor for runner.run_study(executor=...): each run in a
                                                 process of its own (nvmelab study run --isolate SECONDS
                                                 [--budget SECONDS])
    BatchExecutor(timeout_of, deadline, cost_of) the runs in ONE child process, each under its own time limit;
                                                 when that child hangs or dies, the rest run isolated (the
                                                 GPU lease plan: a fresh interpreter and CUDA context per run
                                                 cost more than the run itself)
    failed_record(run, kind, reason, seconds)    the record of a run that gave none (kept out of figures)
    python -m nvmelab.studies.isolate REQ OUT    the child: one run from REQ (JSON), its Outcome to OUT
    python -m nvmelab.studies.isolate --batch REQ FD   the batch child: runs from REQ, one JSON line per event to FD

Why: a device-initiated run can hang the GPU's queues; after a watchdog timeout the process that
hung may block in its next CUDA call (cudaFree), and one exception used to end a whole sweep. Here
the parent never touches the engine: each run is a fresh interpreter (``python -m
nvmelab.studies.isolate``) that calls runner.execute_run exactly as the in-process executor does and
writes its Outcome as JSON. The parent waits at most ``timeout_s``; then it ends the child's whole
process group (SIGTERM, SIGKILL after ``KILL_GRACE_S``) and moves on without waiting for a child
that cannot die (a process stuck in the driver).

A run that produced no record gives a *failed-point record* instead: every field of the schema
taken from the run's parameters, ``iops``/``mibs`` 0, and ``failed = {kind, reason, seconds}``
(kind: ``timeout``, ``crash`` = the child died, ``error`` = the engine raised something other than
the ValueError of a refused parameter, which stays a skip as in the runner). The runner appends it
like any record, so the sweep resumes past it (a hang is not retried on resume: move the file aside
to retry), and runner.load_results leaves it out of what the notebooks and figures see.

``budget_s``: no run starts when less than ``timeout_s`` of the budget is left; ``left`` then says
how many runs of the plan were not started (a later call resumes them).

BatchExecutor: the child writes a line ``{"start": i}`` before run i and ``{"done": i, ...}`` (the Outcome, or
``error``) after it, to a pipe. The parent gives run i ``timeout_of(run)`` seconds from its start line; past
that, or when the child dies, the run gets a failed-point record and every run after it goes through
IsolatedExecutor. A run whose engine raised anything but a refused parameter also ends the child (its CUDA
context may be unusable: a hung kernel blocks the next cudaFree), and the rest run isolated. ``deadline``
(time.monotonic() of the parent) with ``cost_of(run)``, the run's estimated seconds: a run starts only when
its estimate fits before the deadline, in the child as in the isolated mop-up; ``left`` counts the rest.

Caveats: the engine function must be a module-level function (it is named, not pickled); host
variables are applied in the child, so a killed child cannot restore them: the default is
``allow_host_changes=False`` (runs asking for another governor/turbo/SMT are skipped, as in the runner).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..driver import uri as _uri
from ..results import records as _records
from .paths import Where, host_id
from .spec import Run

log = logging.getLogger(__name__)

#: Seconds between SIGTERM and SIGKILL for a child past its time limit, and then the most the parent
#: waits for it to go before leaving it behind.
KILL_GRACE_S = 5.0
#: Kinds of failed points.
FAILED_KINDS = ("timeout", "crash", "error")


def _fn_name(fn: Any) -> str:
    """'module:function' of a module-level function, checked to import back to the same object."""
    mod, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not mod or "." in name or "<" in name:
        raise ValueError(f"isolated runs need a module-level engine function, got {fn!r}")
    if getattr(importlib.import_module(mod), name, None) is not fn:
        raise ValueError(f"isolated runs: {mod}.{name} does not import back to the engine function")
    return f"{mod}:{name}"


def _resolve(name: str) -> Any:
    mod, fn = name.split(":", 1)
    return getattr(importlib.import_module(mod), fn)


def failed_record(run: Run, kind: str, reason: str, seconds: float) -> dict[str, Any]:
    """A valid record of a run that produced none: the run's parameters, no rate, and why."""
    if kind not in FAILED_KINDS:
        raise ValueError(f"failed point kind {kind!r}: one of {', '.join(FAILED_KINDS)}")
    from ..host import provenance

    p = run.params
    target = str(p.get("target", ""))
    try:
        profile = _uri.get(target, "profile")
    except ValueError:  # the run may have failed on its target: a record all the same
        profile = None
    rec = _records.engine_record(
        study=run.study,
        tool=f"nvmelab-{run.engine}",
        target=target,
        backend=f"nvmelab-{run.engine}",
        rw=str(p.get("rw", "randread")),
        iosize=int(p.get("iosize", 1) or 1),
        qdepth=int(p.get("qdepth", 1) or 1),
        nqueues=int(p.get("nqueues", 1) or 1),
        ndevs=int(p.get("ndevs", 1) or 1),
        ncpus=int(p.get("ncpus", 1) or 1),
        runtime_s=0.0,
        iops=0.0,
        mibs=0.0,
        repetition=run.repetition,
        provenance=provenance.capture({"profile": profile, "scale": None, "devices": p.get("ndevs")}),
    )
    rec.update(
        run_key=run.key,
        preset=run.preset,
        sweeps=list(run.sweeps),
        failed={"kind": kind, "reason": reason[-2000:], "seconds": round(seconds, 3)},
    )
    _records.validate(rec, f"failed-point record of {run.label()}")
    return rec


@dataclasses.dataclass
class IsolatedExecutor:
    """Runs each run in a child process with a time limit (see the module docstring)."""

    timeout_s: float
    budget_s: float | None = None
    allow_host_changes: bool = False
    left: int = 0
    failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s={self.timeout_s}: must be > 0 seconds")
        if self.budget_s is not None and not self.budget_s > 0:
            raise ValueError(f"budget_s={self.budget_s}: must be > 0 seconds")

    def done_paths(self, where: Where) -> list[Path]:
        return [where.here()]

    def execute(self, runs: list[Run], run_fn: Any, file_mib: int) -> Iterator[Any]:
        from .runner import Outcome

        fn = _fn_name(run_fn)
        end = None if self.budget_s is None else time.monotonic() + self.budget_s
        for i, run in enumerate(runs):
            if end is not None and end - time.monotonic() < self.timeout_s:
                self.left = len(runs) - i
                log.warning(
                    "time budget of %.0f s used: %d runs not started (run again to resume)", self.budget_s, self.left
                )
                return
            t0 = time.monotonic()
            outcome = self._one(run, fn, file_mib)
            if outcome is None:
                continue
            kind, reason, data = outcome
            if kind is None:
                yield Outcome(run, data["record"], data["skipped"], data["notes"], host_id(), data["seconds"])
            else:
                seconds = time.monotonic() - t0
                self.failed.append((run.label(), f"{kind}: {reason}"))
                log.error("run %s failed (%s after %.1f s): %s", run.label(), kind, seconds, reason)
                yield Outcome(run, failed_record(run, kind, reason, seconds), None, [], host_id(), seconds)

    def _one(self, run: Run, fn: str, file_mib: int) -> tuple[str | None, str, dict] | None:
        with tempfile.TemporaryDirectory(prefix="nvmelab-isolate-") as tmp:
            req, out = Path(tmp) / "run.json", Path(tmp) / "outcome.json"
            req.write_text(
                json.dumps(
                    {
                        "run": dataclasses.asdict(run),
                        "run_fn": fn,
                        "file_mib": file_mib,
                        "allow_host_changes": self.allow_host_changes,
                    }
                )
            )
            child = subprocess.Popen(
                [sys.executable, "-m", "nvmelab.studies.isolate", str(req), str(out)], start_new_session=True
            )
            try:
                rc = child.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                end_process_group(child)
                return "timeout", f"no result within {self.timeout_s:g} s (process group ended)", {}
            except KeyboardInterrupt:
                end_process_group(child)
                raise
            if out.exists():
                data = json.loads(out.read_text())
                if data.get("error"):
                    return "error", data["error"], {}
                return None, "", data
            how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
            return "crash", f"the run's process ended with {how} and no result", {}


@dataclasses.dataclass
class BatchExecutor:
    """Runs every run in one child process, each under its own limit; isolation only to mop up (module docstring)."""

    timeout_of: Any  # Callable[[Run], float]: a run's time limit from its start, seconds
    deadline: float | None = None  # time.monotonic(): no run starts whose estimate does not fit before it
    cost_of: Any = None  # Callable[[Run], float]: a run's estimated seconds (None: its time limit)
    after: Any = None  # called after each outcome was taken (and written) by the runner: e.g. repack the lease's OUT
    allow_host_changes: bool = False
    left: int = 0
    failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    isolated: int = 0  # runs that went through the isolated mop-up
    events: list[str] = dataclasses.field(default_factory=list)  # why the batch child ended early, if it did

    def done_paths(self, where: Where) -> list[Path]:
        return [where.here()]

    def _tick(self) -> None:
        if self.after is not None:
            self.after()

    def _cost(self, run: Run) -> float:
        return float(self.cost_of(run) if self.cost_of is not None else self.timeout_of(run))

    def _fits(self, run: Run) -> bool:
        return self.deadline is None or time.monotonic() + self._cost(run) <= self.deadline

    def execute(self, runs: list[Run], run_fn: Any, file_mib: int) -> Iterator[Any]:
        from .runner import Outcome

        fn = _fn_name(run_fn)
        i = 0
        if runs:
            i = yield from self._batch(runs, fn, file_mib)
        # the mop-up: what the batch child did not get to, each run in a process of its own
        while i < len(runs):
            run = runs[i]
            if not self._fits(run):
                self.left = len(runs) - i
                log.warning("time budget used: %d runs not started (run again to resume)", self.left)
                return
            iso = IsolatedExecutor(self.timeout_of(run), allow_host_changes=self.allow_host_changes)
            t0 = time.monotonic()
            outcome = iso._one(run, fn, file_mib)
            self.isolated += 1
            i += 1
            kind, reason, data = outcome
            if kind is None:
                yield Outcome(run, data["record"], data["skipped"], data["notes"], host_id(), data["seconds"])
                self._tick()
            else:
                yield self._failed(run, kind, reason, time.monotonic() - t0)
                self._tick()

    def _failed(self, run: Run, kind: str, reason: str, seconds: float) -> Any:
        from .runner import Outcome

        self.failed.append((run.label(), f"{kind}: {reason}"))
        log.error("run %s failed (%s after %.1f s): %s", run.label(), kind, seconds, reason)
        return Outcome(run, failed_record(run, kind, reason, seconds), None, [], host_id(), seconds)

    def _batch(self, runs: list[Run], fn: str, file_mib: int) -> Iterator[Any]:
        """Run runs[0:] in one child until it ends; yields Outcomes, returns the index of the first run it did not
        finish (len(runs) when it finished them all or the deadline stopped it: then ``left`` is set)."""
        import select

        from .runner import Outcome

        with tempfile.TemporaryDirectory(prefix="nvmelab-batch-") as tmp:
            req = Path(tmp) / "runs.json"
            costs = [self._cost(r) for r in runs]
            # the child's deadline on its own clock: the parent's seconds left now (monotonic clocks are per boot,
            # so the same in both processes, but passing seconds keeps the child honest about what it was told)
            left_s = None if self.deadline is None else self.deadline - time.monotonic()
            req.write_text(
                json.dumps(
                    {
                        "runs": [dataclasses.asdict(r) for r in runs],
                        "costs": costs,
                        "deadline": None if left_s is None else time.monotonic() + left_s,
                        "run_fn": fn,
                        "file_mib": file_mib,
                        "allow_host_changes": self.allow_host_changes,
                    }
                )
            )
            rfd, wfd = os.pipe()
            child = subprocess.Popen(
                [sys.executable, "-m", "nvmelab.studies.isolate", "--batch", str(req), str(wfd)],
                start_new_session=True,
                pass_fds=(wfd,),
            )
            os.close(wfd)
            buf = b""
            current, started = None, 0.0
            done = 0
            try:
                with os.fdopen(rfd, "rb", buffering=0) as pipe:
                    while True:
                        limit = None if current is None else started + self.timeout_of(runs[current])
                        wait = 1.0 if limit is None else max(0.0, min(1.0, limit - time.monotonic()))
                        ready, _, _ = select.select([pipe], [], [], wait)
                        if ready:
                            chunk = pipe.read(65536)
                            if not chunk:  # the child closed its end: it ended
                                break
                            buf += chunk
                            while b"\n" in buf:
                                line, buf = buf.split(b"\n", 1)
                                ev = json.loads(line)
                                if "start" in ev:
                                    current, started = int(ev["start"]), time.monotonic()
                                elif "done" in ev:
                                    k = int(ev["done"])
                                    run, secs = runs[k], time.monotonic() - started
                                    current, done = None, k + 1
                                    if ev.get("error"):
                                        yield self._failed(run, "error", ev["error"], secs)
                                        self._tick()
                                    else:
                                        yield Outcome(
                                            run, ev["record"], ev["skipped"], ev["notes"], host_id(), ev["seconds"]
                                        )
                                        self._tick()
                                elif "not_started" in ev:
                                    self.left = int(ev["not_started"])
                                    log.warning(
                                        "time budget used: %d runs not started (run again to resume)", self.left
                                    )
                                    done = len(runs)
                            continue
                        if limit is not None and time.monotonic() >= limit:
                            run = runs[current]
                            end_process_group(child)
                            self.events.append(f"run {run.label()}: no result within {self.timeout_of(run):g} s")
                            yield self._failed(
                                run,
                                "timeout",
                                f"no result within {self.timeout_of(run):g} s (batch process ended; the rest run isolated)",
                                time.monotonic() - started,
                            )
                            self._tick()
                            return current + 1
            except KeyboardInterrupt:
                end_process_group(child)
                raise
            rc = child.wait()
            if current is not None:  # it died inside a run
                run = runs[current]
                how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
                self.events.append(f"run {run.label()}: the batch process ended with {how}")
                yield self._failed(
                    run,
                    "crash",
                    f"the batch process ended with {how} in this run (the rest run isolated)",
                    time.monotonic() - started,
                )
                self._tick()
                return current + 1
            if done < len(runs) and not self.left:
                self.events.append(f"the batch process ended after {done} of {len(runs)} runs (exit {rc})")
            return done


def end_process_group(child: subprocess.Popen) -> None:
    """SIGTERM the child's process group, SIGKILL after KILL_GRACE_S; never wait for it longer (the lease's parts
    end their children with it too)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
    log.error("process %d did not end after SIGKILL (stuck in the kernel?): left behind", child.pid)


def child_main(req_path: str, out_path: str) -> int:
    """The child: run one run with runner.execute_run; write {record, skipped, notes, seconds} or {error}."""
    from ..host.hostvars import HostControl
    from .runner import execute_run

    req = json.loads(Path(req_path).read_text())
    r = req["run"]
    run = Run(r["study"], r["preset"], r["params"], r["repetition"], tuple(r["sweeps"]), r["engine"])
    host = HostControl(allow_changes=bool(req["allow_host_changes"]))
    try:
        out = execute_run(run, _resolve(req["run_fn"]), host, file_mib=int(req["file_mib"]))
        data = {"record": out.record, "skipped": out.skipped, "notes": out.notes, "seconds": out.seconds}
    except Exception as exc:  # noqa: BLE001 - any failure of the run is this point's failure, reported
        data = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        host.close()
    tmp = Path(out_path).with_suffix(".tmp")
    tmp.write_text(json.dumps(data, default=str))
    tmp.replace(out_path)
    return 0


def batch_main(req_path: str, fd: str) -> int:
    """The batch child: the runs of REQ in order, one JSON line per event to file descriptor FD. Before each run,
    it checks that the run's estimated cost fits before the deadline (else it reports how many were not started
    and ends); a run whose engine raised (not a refused parameter) is reported and ends this process."""
    from ..host.hostvars import HostControl
    from .runner import execute_run

    req = json.loads(Path(req_path).read_text())
    fn = _resolve(req["run_fn"])
    host = HostControl(allow_changes=bool(req["allow_host_changes"]))
    out = os.fdopen(int(fd), "w", buffering=1)

    def say(ev: dict) -> None:
        out.write(json.dumps(ev, default=str) + "\n")
        out.flush()

    try:
        runs = req["runs"]
        for i, r in enumerate(runs):
            if req["deadline"] is not None and time.monotonic() + float(req["costs"][i]) > float(req["deadline"]):
                say({"not_started": len(runs) - i})
                return 0
            run = Run(r["study"], r["preset"], r["params"], r["repetition"], tuple(r["sweeps"]), r["engine"])
            say({"start": i})
            try:
                o = execute_run(run, fn, host, file_mib=int(req["file_mib"]))
            except Exception as exc:  # noqa: BLE001 - reported as this run's failure; the process may be unusable
                say({"done": i, "error": f"{type(exc).__name__}: {exc}"})
                return 1
            say({"done": i, "record": o.record, "skipped": o.skipped, "notes": o.notes, "seconds": o.seconds})
    finally:
        host.close()
        out.close()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if sys.argv[1:2] == ["--batch"]:
        raise SystemExit(batch_main(*sys.argv[2:4]))
    raise SystemExit(child_main(*sys.argv[1:3]))
