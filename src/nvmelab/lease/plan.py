# SPDX-License-Identifier: BSD-3-Clause
"""The GPU lease plan (env/gpu-lease.sh): two device calls that fit one lease, the most valuable records first.

A lent GPU host gives **900 s of device time in all** (machine starts, the 30 s a machine stays warm after a
call, every command and the hand-back counted), commands of at most 10 minutes, and back at most 8 files of
16 MiB no deeper than two folders; what is not in the output folder when a command ends is lost. So the
plan is two calls, each one line ``bash env/gpu-lease.sh N $OUT`` (``CALLS``):

    call 1  install; probe (GPU, persistence mode, clocks, one bare CUDA init timed); the installed extension
            checked; every GPU test (per-test outcomes, a junit file, a per-test timeout); the emulator's
            capacity (tests/bench bench_gpu_submit); the whole cuda_qdepth grid -- what must come back even
            if call 2 never happens
    call 2  (issued while the machine is still warm) cuda_iosize; cuda_match; cuda_pollcost; the per-I/O
            breakdown's cost on the GPU (bench_breakdown_cost run_gpu); a few cuda_qdepth points on the
            CPU-resident emu:// target (GPU threads writing host-memory rings over PCIe); the calibration A/B
            (cuda_qdepth's ``AB_POINTS`` with the fitted model's overrides) if time is left

**One time knob per call**: the call's seconds (``CALLS[n].limit_s``, or ``NVMELAB_LEASE_CALL_S``). Each fixed
part's limit is its nominal one scaled by seconds / limit_s and never past the call's deadline; the studies
share what is left. After **every** part (and every ``REPACK_S`` within a study) OUT/records-N.tar.gz and
OUT/summary-N.json are rewritten, so a call killed at any moment returns everything measured so far.

**Points in one process** (isolate.BatchExecutor): a study's points run in one child process, each under its
own time limit; if that child hangs or dies, the rest run isolated, one process each. A point starts only
when its *estimated* cost fits before the deadline; every point of the plan ends with a record, a
failed-point record naming why, or counted "not started" (the next call of the same number resumes).

    python -m nvmelab.lease plan [--standin]     the two calls, their parts and estimates, the budget
    python -m nvmelab.lease call N --out OUT --results DIR --started EPOCH [--seconds S] [--only P,..]
    python -m nvmelab.lease pack N --results DIR --out OUT [--parts F]
    python -m nvmelab.lease native-check [--want-cuda]   the installed extension

``--standin`` (make rehearse-gpu-host): the cuda engine is replaced by its CPU stand-in
(engines/gpu_standin.py), which drives the same queue code on the CPU emulator.

The cost model (estimate()): a study point costs its warm-up and window plus ``POINT_OVERHEAD_S`` (bring-up
and teardown in a warm process: the rehearsal measured 0.05 s on the stand-in, the GPU's is a guess the
first lease's summaries check: ``seconds_per_point`` beside ``estimated_seconds_per_point``) plus one
lock-step round of the fitted device model (model.round_time); a co-runner point (corun > 0) adds its phase
alone (``CORUN_SHARE`` of warm-up and window) and ``CORUN_SIZING_S``; each study part adds one batch process
(``BATCH_START_S``: interpreter and imports) and, on the GPU, one CUDA context (``CUDA_INIT_S``). Fixed parts
count at their limits; packing costs ``PACK_S`` per part.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import os
import re
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..studies.paths import host_id
from ..studies.spec import Run, load_spec
from .host import native_check, probe

log = logging.getLogger(__name__)

PRESET = "lease"
#: The device tool (its README): device time of a session in all, one command at most, a machine's start.
BUDGET_S = 900
COMMAND_LIMIT_S = 600
MACHINE_START_S = 120
#: Between the calls (the machine stays warm this long after a call) and after the last one (the hand-back).
WARM_GAP_S = 30
GIVE_BACK_S = 30
#: Each call's parts must fit its limit less this (transfers, the log, a slow start of the interpreter).
CALL_MARGIN_S = 30
#: Installing the carried wheels (env/gpu-lease.sh: the only part run before Python can run ours).
INSTALL_LIMIT_S = 45
#: Rewriting OUT's archive and summary after a part; within a study, at most this often.
PACK_S = 2
REPACK_S = 15.0
#: A fixed part with less than this left before the deadline is not started (its line says so).
MIN_PART_S = 5.0
#: Seconds a point costs beyond its warm-up and window in a warm process (bring-up, teardown). The
#: rehearsal measured 0.05 s on the CPU stand-in (0.75 s per 0.7 s window); on the GPU, gpu-emu's
#: allocations and the two kernels' launches: a guess the first lease's seconds_per_point checks.
POINT_OVERHEAD_S = 0.3
#: One batch process per study part: interpreter, imports, the engine's module (measured in the rehearsal).
BATCH_START_S = 3.0
#: CUDA context creation in a batch process on the GPU host (estimate; the probe times a bare cuInit).
CUDA_INIT_S = 1.0
#: The co-runner's phase alone: this share of warm-up + window (src/engine/crun_params.h CRUN_CORUN_SHARE;
#: tests/test_lease.py checks the two agree), and its sizing launches (two short ones, an estimate).
CORUN_SHARE = 0.4
CORUN_SIZING_S = 0.05
#: A point's time limit from its start: this many times its warm-up and window, plus POINT_TIMEOUT_BASE_S
#: (the engine's own watchdog ends a stalled kernel after its 2 s completion timeout + 5 s grace).
POINT_TIMEOUT_FACTOR = 3.0
POINT_TIMEOUT_BASE_S = 10.0
#: The GPU tests: each under this limit (pytest-timeout dumps every thread's stack, the runner moves on).
GPU_TEST_TIMEOUT_S = 30
#: (nqueues, qdepth) of the calibration A/B: the two calibration points of the lock-step round
#: (data/reference/model-calibration.csv: nqueues=1 at qd 128 and 512) and eight held-out ones. Target A is
#: cuda_qdepth's own grid (call 1); target B the same points with the fitted model's overrides (call 2).
AB_POINTS = ((1, 128), (1, 512), (1, 64), (1, 256), (4, 128), (2, 128), (8, 128), (16, 128), (1, 32), (4, 512))
#: Target A of the A/B: the profile as profiles.c derives it (cuda_qdepth's default target).
AB_TARGET_A = "gpu-emu://?profile=pm1753&blocks=16&warps=16"
#: GPU threads driving queues in host memory, served by the CPU emulator's service threads (one per
#: controller): the shape of the published set-up (rings in host memory, reached over PCIe), with no device
#: model (profile=null), so the rate is the path's. Four devices: four service threads beside the host's own.
EMU_TARGET = "emu://?mode=thread&profile=null"
EMU_POINTS = ((1, 1), (1, 16), (1, 64), (1, 128), (4, 32))


@dataclasses.dataclass(frozen=True)
class Task:
    """One sweep: a study's lease preset, a target (None: the spec's; "B": the fitted model's overrides), optionally
    only some (nqueues, qdepth) points, and parameter overrides (pairs) applied to every point."""

    study: str
    target: str | None = None
    points: tuple[tuple[int, int], ...] | None = None
    params: tuple[tuple[str, Any], ...] = ()

    def resolved_target(self) -> str | None:
        if self.target != "B":
            return self.target
        from ..results import model

        return f"{AB_TARGET_A}&{model.emu_query(_fitted())}"

    def select(self) -> Callable[[Run], bool] | None:
        if self.points is None:
            return None
        pts = set(self.points)
        return lambda r: (int(r.params.get("nqueues", 0)), int(r.params.get("qdepth", 0))) in pts

    def label(self) -> str:
        t = self.target or ""
        return f"{self.study}{' ' + t if t else ''}"


@dataclasses.dataclass(frozen=True)
class Part:
    """One part of a call: a fixed part (``kind`` probe, native-check, gpu-tests or bench, with its nominal
    limit) or a study (``task``), whose time is what the call has left."""

    name: str
    kind: str
    limit_s: float = 0.0
    task: Task | None = None
    bench: str | None = None


@dataclasses.dataclass(frozen=True)
class Call:
    number: int
    limit_s: int
    parts: tuple[Part, ...]


CALLS: dict[int, Call] = {
    1: Call(
        1,
        330,
        (
            Part("probe", "probe", 15),
            Part("native-check", "native-check", 15),
            Part("gpu-tests", "gpu-tests", 120),
            Part("bench-capacity", "bench", 35, bench="gpu_submit"),
            Part("cuda_qdepth", "study", task=Task("cuda_qdepth", AB_TARGET_A)),
        ),
    ),
    2: Call(
        2,
        270,
        (
            Part("cuda_iosize", "study", task=Task("cuda_iosize")),
            Part("cuda_match", "study", task=Task("cuda_match")),
            Part("cuda_pollcost", "study", task=Task("cuda_pollcost")),
            Part("bench-breakdown", "bench", 25, bench="breakdown_cost"),
            Part("cuda_qdepth-emu", "study", task=Task("cuda_qdepth", EMU_TARGET, EMU_POINTS, (("ndevs", 4),))),
            Part("cuda_qdepth-ab", "study", task=Task("cuda_qdepth", "B", AB_POINTS)),
        ),
    ),
}


@functools.cache
def _fitted() -> Any:
    """The fitted device model (model.fit reads and fits the calibration set: once per process)."""
    from ..results import model, model_validation

    return model.fit(model_validation.published_points())


def runs_of(task: Task) -> list[Run]:
    spec = load_spec(task.study)
    sel = task.select()
    runs = spec.plan(PRESET, target=task.resolved_target(), overrides=dict(task.params)).runs
    return [r for r in runs if sel is None or sel(r)]


def point_seconds(run: Run, *, gpu: bool = True) -> float:
    """Estimated seconds of one point in a warm batch process (see the module docstring)."""
    from ..results import model

    p = run.params
    rnd = float(model.round_time(_fitted(), int(p.get("qdepth", 1)), int(p.get("iosize", 512))))
    window = float(p.get("warmup", 0)) + float(p.get("runtime", 0))
    corun = CORUN_SHARE * window + CORUN_SIZING_S if p.get("corun") else 0.0
    return window + corun + rnd + POINT_OVERHEAD_S


def point_timeout(run: Run) -> float:
    p = run.params
    window = float(p.get("warmup", 0)) + float(p.get("runtime", 0))
    return POINT_TIMEOUT_FACTOR * window + POINT_TIMEOUT_BASE_S + (CUDA_INIT_S + BATCH_START_S)


def study_seconds(task: Task, *, gpu: bool = True) -> tuple[int, float]:
    """(points, estimated seconds) of a study part: its points, one batch process, one CUDA context."""
    runs = runs_of(task)
    return len(runs), BATCH_START_S + (CUDA_INIT_S if gpu else 0.0) + sum(point_seconds(r, gpu=gpu) for r in runs)


def estimate(number: int, *, gpu: bool = True) -> dict[str, Any]:
    """A call's parts and estimated seconds: install and fixed parts at their limits, studies by the model,
    PACK_S per part."""
    call = CALLS[number]
    parts = [{"part": "install", "kind": "install", "seconds": float(INSTALL_LIMIT_S)}]
    for p in call.parts:
        if p.kind == "study":
            n, secs = study_seconds(p.task, gpu=gpu)
            parts.append({"part": p.name, "kind": "study", "study": p.task.study, "points": n, "seconds": secs})
        else:
            parts.append({"part": p.name, "kind": p.kind, "seconds": float(p.limit_s)})
    total = sum(p["seconds"] for p in parts) + PACK_S * len(parts)
    return {"call": number, "limit_s": call.limit_s, "parts": parts, "seconds": total}


def plan_estimate(*, gpu: bool = True) -> dict[str, Any]:
    """Both calls' estimates and the lease's budget: MACHINE_START_S + call 1's limit + WARM_GAP_S + call 2's
    limit + GIVE_BACK_S within BUDGET_S, each call's parts within its limit less CALL_MARGIN_S, each limit
    within one command's. ``problems`` lists what breaks them (tests/test_lease.py: none may)."""
    calls = [estimate(n, gpu=gpu) for n in sorted(CALLS)]
    lease_s = MACHINE_START_S + sum(c["limit_s"] for c in calls) + WARM_GAP_S * (len(calls) - 1) + GIVE_BACK_S
    problems = []
    for c in calls:
        if c["seconds"] > c["limit_s"] - CALL_MARGIN_S:
            problems.append(f"call {c['call']}: parts {c['seconds']:.0f} s > {c['limit_s']} - {CALL_MARGIN_S} s")
        if c["limit_s"] > COMMAND_LIMIT_S:
            problems.append(f"call {c['call']}: limit {c['limit_s']} s > one command's {COMMAND_LIMIT_S} s")
        problems += [f"call {c['call']}: {p['part']} has no lease points" for p in c["parts"] if p.get("points") == 0]
    if lease_s > BUDGET_S:
        problems.append(f"lease: {lease_s} s > {BUDGET_S} s")
    return {"calls": calls, "seconds": lease_s, "problems": problems}


def format_plan(plan: dict[str, Any]) -> str:
    lines = []
    for c in plan["calls"]:
        lines.append(f"call {c['call']}: {c['seconds']:.0f} s of its {c['limit_s']} s (margin {CALL_MARGIN_S} s)")
        for p in c["parts"]:
            pts = f", {p['points']} points" if "points" in p else ""
            lines.append(f"  {p['part']:<18} {p['kind']:<13} {p['seconds']:6.0f} s{pts}")
    calls = " + ".join(f"call {c['call']} {c['limit_s']} s" for c in plan["calls"])
    lines.append(
        f"plan: {plan['seconds']:.0f} s of {BUDGET_S} s (start {MACHINE_START_S} s + {calls} + warm gap "
        f"{WARM_GAP_S} s + give-back {GIVE_BACK_S} s)"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ a call
def _append_part(parts: Path | None, part: dict[str, Any]) -> None:
    if parts is None:
        return
    parts.parent.mkdir(parents=True, exist_ok=True)
    with open(parts, "a", encoding="utf-8") as f:
        f.write(json.dumps(part, default=str) + "\n")


def _sub(
    cmd: list[str], limit: float, *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[int, str]:
    """Run cmd under a time limit in its own process group, its output into ours; (exit code, detail)."""
    from ..studies.isolate import end_process_group

    sys.stdout.flush()
    sys.stderr.flush()
    child = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True)
    try:
        rc = child.wait(timeout=limit)
        return rc, f"exit {rc}"
    except subprocess.TimeoutExpired:
        end_process_group(child)
        return 124, f"time limit of {limit:.0f} s reached"


def _repo_root() -> Path:
    """The checkout the lease runs from (tests/, env/): $NVMELAB_LEASE_ROOT, else the working directory."""
    return Path(os.environ.get("NVMELAB_LEASE_ROOT") or os.getcwd())


def gpu_test_files(root: Path) -> list[str]:
    """Every test file with a `gpu` mark, and numba's CUDA simulator's file."""
    files = sorted(str(p.relative_to(root)) for p in (root / "tests").glob("test_*.py") if "mark.gpu" in p.read_text())
    sim = "tests/test_cuda_numba_sim.py"
    return files + ([sim] if sim not in files and (root / sim).exists() else [])


@dataclasses.dataclass
class _CallState:
    number: int
    results: Path
    out: Path
    parts: Path | None
    standin: bool
    deadline: float  # time.monotonic()
    scale: float
    last_pack: float = 0.0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def pack(self) -> None:
        pack(self.number, self.results, self.out, self.parts, standin=self.standin)
        self.last_pack = time.monotonic()

    def tick(self) -> None:
        if time.monotonic() - self.last_pack >= REPACK_S:
            self.pack()


def _study_part(st: _CallState, part: Part) -> dict[str, Any]:
    from ..studies.isolate import BatchExecutor
    from ..studies.runner import resolve_engine, run_study

    task = part.task
    spec = load_spec(task.study)
    run_fn = resolve_engine(spec.engine)
    if st.standin and spec.engine == "cuda":
        from ..engines.gpu_standin import run_cuda_standin

        run_fn = run_cuda_standin
    runs = runs_of(task)
    gpu = not st.standin
    out: dict[str, Any] = {"target": task.resolved_target() or spec.target, "points": len(runs)}
    overhead = BATCH_START_S + (CUDA_INIT_S if gpu else 0.0)
    ex = BatchExecutor(
        timeout_of=point_timeout,
        deadline=st.deadline,
        cost_of=lambda r: point_seconds(r, gpu=gpu),
        after=st.tick,
    )
    if st.left() < overhead + min((point_seconds(r, gpu=gpu) for r in runs), default=0.0):
        out.update(rc=0, not_started=len(runs), detail="no time left in this call")
        return out
    t0 = time.monotonic()
    rep = run_study(
        spec,
        PRESET,
        target=task.resolved_target(),
        run_fn=run_fn,
        results_root=st.results,
        executor=ex,
        progress=False,
        select=task.select(),
        overrides=dict(task.params),
    )
    secs = time.monotonic() - t0
    n = rep.ran + len(rep.skipped)
    out.update(
        rc=0,
        seconds=round(secs, 1),
        planned=rep.planned,
        already_done=rep.already_done,
        ran=rep.ran,
        failed=[list(f) for f in rep.failed],
        skipped=[list(s) for s in rep.skipped],
        not_started=rep.not_started,
        isolated=ex.isolated,
        batch_events=ex.events,
        seconds_per_point=round(secs / n, 3) if n else None,
        estimated_seconds_per_point=round(sum(point_seconds(r, gpu=gpu) for r in runs) / len(runs), 3)
        if runs
        else None,
        summary=rep.summary(),
    )
    log.info(rep.summary())
    return out


def _fixed_part(st: _CallState, part: Part, limit: float) -> dict[str, Any]:
    root = _repo_root()
    py = sys.executable
    work = st.results / "lease"
    if part.kind == "probe":
        res = probe(work / f"probe-{st.number}.json")
        gpus = res.get("nvidia_smi") or []
        return {"rc": 0, "detail": f"{len(gpus)} GPU(s); cuda init {res.get('cuda_init')}", "probe": res}
    if part.kind == "native-check":
        want = [] if st.standin and os.environ.get("NVMELAB_LEASE_CUDA") != "ON" else ["--want-cuda"]
        rc, detail = _sub(
            [py, "-m", "nvmelab.lease", "native-check", *want, "--json", str(work / "native-check.json")], limit
        )
        return {"rc": rc, "detail": detail}
    if part.kind == "gpu-tests":
        from .gpu_tests import run_gpu_tests

        env = {"NUMBA_ENABLE_CUDASIM": "1"} if st.standin else {}
        files = gpu_test_files(root) + (["tests/test_gpu_standin.py"] if st.standin else [])
        res = run_gpu_tests(
            files,
            limit_s=limit,
            per_test_s=GPU_TEST_TIMEOUT_S,
            junit=work / f"gpu-tests-{st.number}.xml",
            events=work / f"gpu-tests-{st.number}.json",
            marker=None if st.standin else "gpu",
            env=env,
            cwd=root,
        )
        return {"rc": res["rc"], "detail": res["detail"], "tests": res["counts"]}
    if part.kind == "bench":
        env = {
            "NVMELAB_BENCH_GPU_RUNTIME": os.environ.get("NVMELAB_BENCH_GPU_RUNTIME", "0.3"),
            "NVMELAB_BENCH_GPU_REPS": "1",
            "NVMELAB_BENCH_GPU_STANDIN": "1" if st.standin else "0",
        }
        rc, detail = _sub(
            [py, "-m", "tests.bench", "--gpu", "--only", part.bench, "--out", str(st.results / "bench")],
            limit,
            env=env,
            cwd=root,
        )
        return {"rc": rc, "detail": detail}
    raise ValueError(f"part {part.name}: unknown kind {part.kind!r}")


#: Fault injection for tests/test_lease.py: SIGKILL this process after the K-th part's pack (1-based).
_KILL_AFTER_ENV = "NVMELAB_LEASE_KILL_AFTER"


def run_call(
    number: int,
    results: Path,
    out: Path,
    *,
    started: float,
    seconds: float | None = None,
    parts: Path | None = None,
    standin: bool = False,
    only: list[str] | None = None,
) -> int:
    """Run call `number`'s parts in order within `seconds` from `started` (time.time() of the call's start:
    the install before us counts), packing OUT after every part; returns the count of failed parts."""
    call = CALLS[number]
    seconds = float(seconds or call.limit_s)
    elapsed = max(0.0, time.time() - started)
    st = _CallState(
        number,
        Path(results),
        Path(out),
        parts,
        standin,
        time.monotonic() + seconds - elapsed - PACK_S,
        seconds / call.limit_s,
    )
    known = [p.name for p in call.parts]
    if only:
        bad = [o for o in only if o not in known]
        if bad:
            raise ValueError(f"--only {','.join(bad)}: call {number} has the parts {', '.join(known)}")
    _fitted()  # before the first study's time is taken
    nfailed = 0
    kill_after = int(os.environ.get(_KILL_AFTER_ENV, "0") or 0)
    done = 0
    for part in call.parts:
        if only and part.name not in only:
            continue
        t0 = time.monotonic()
        entry: dict[str, Any] = {"part": part.name, "kind": part.kind}
        if part.kind == "study":
            log.info("== %s (%s): %.0f s left in call %d", part.name, part.task.label(), st.left(), number)
            try:
                entry.update(_study_part(st, part))
            except Exception as exc:  # noqa: BLE001 - one part's failure must not lose the call's other parts
                log.exception("part %s failed", part.name)
                entry.update(rc=1, detail=f"{type(exc).__name__}: {exc}")
        else:
            limit = min(part.limit_s * st.scale, st.left())
            if limit < MIN_PART_S:
                entry.update(rc=0, not_started=True, detail=f"no time left ({st.left():.0f} s)")
            else:
                log.info("== %s (limit %.0f s)", part.name, limit)
                try:
                    entry.update(_fixed_part(st, part, limit))
                except Exception as exc:  # noqa: BLE001
                    log.exception("part %s failed", part.name)
                    entry.update(rc=1, detail=f"{type(exc).__name__}: {exc}")
                entry["limit_s"] = round(limit, 1)
        entry.setdefault("seconds", round(time.monotonic() - t0, 1))
        nfailed += entry.get("rc") not in (0, None)
        log.info(
            "== %s: %s after %.1f s", part.name, entry.get("detail") or entry.get("summary") or "done", entry["seconds"]
        )
        _append_part(parts, entry)
        st.pack()
        done += 1
        if kill_after and done >= kill_after:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
    return nfailed


def record_files(results: Path) -> list[Path]:
    """Every file under `results` (records <study>/<host>/<preset>.jsonl, bench/<host>/*.json, lease/*), less
    hidden ones (a sweep's lock file, a temporary file being written)."""
    return sorted(p for p in Path(results).rglob("*") if p.is_file() and not p.name.startswith("."))  # no locks, no tmp


def pack(number: int, results: Path, out: Path, parts: Path | None = None, *, standin: bool = False) -> dict[str, Any]:
    """OUT/records-N.tar.gz (every file under `results`: records as <study>/<host>/<preset>.jsonl, bench JSON,
    the lease's own files under lease/) and OUT/summary-N.json, each written whole then renamed over the last;
    returns the summary. Touches no GPU: the CUDA facts come from the native-check part's JSON."""
    from ..host import provenance
    from ..results import records as _records

    out.mkdir(parents=True, exist_ok=True)
    files = record_files(results)
    archive = out / f"records-{number}.tar.gz"
    tmp = archive.with_name(f".{archive.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for f in files:
            tar.add(f, arcname=str(f.relative_to(results)))
    tmp.replace(archive)
    counts: dict[str, dict[str, Any]] = {}
    for f in files:
        rel = str(f.relative_to(results))
        if f.suffix != ".jsonl":
            counts[rel] = {"bytes": f.stat().st_size}
            continue
        c = counts.setdefault(rel, {"records": 0, "failed": 0, "flagged": 0, "targets": {}})
        for rec in _records.iter_records(f):
            c["records"] += 1
            c["failed"] += bool(rec.get("failed"))
            c["flagged"] += rec.get("emulator_limited") is True
            c["targets"][rec.get("target")] = c["targets"].get(rec.get("target"), 0) + 1
    part_list = []
    if parts is not None and parts.exists():
        part_list = [json.loads(ln) for ln in parts.read_text().splitlines() if ln.strip()]
    nc = results / "lease" / "native-check.json"
    native = json.loads(nc.read_text()) if nc.exists() else None
    summary = {
        "call": number,
        "standin": standin,
        "utc": provenance.utc_now(),
        "host": socket.gethostname(),
        "host_id": host_id(),
        "git_commit": provenance.git_commit(),
        "gpu": provenance.gpu(),
        "cuda": (native or {}).get("cuda_status"),
        "build": provenance.build(),
        "parts": part_list,
        "records": {"archive": archive.name, "files": counts},
        "estimate": estimate(number, gpu=not standin),
        "next": f"bash env/gpu-lease.sh {number + 1} $OUT"
        if number + 1 in CALLS
        else "plan complete: give the machine back",
    }
    dst = out / f"summary-{number}.json"
    dst.with_suffix(".tmp").write_text(json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n")
    dst.with_suffix(".tmp").replace(dst)
    return summary


#: What the device tool hands back from its output folder (its README): files, bytes each, folder depth.
OUT_MAX_FILES = 8
OUT_MAX_FILE_BYTES = 16 << 20
OUT_MAX_DEPTH = 2
_OUT_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def check_out(out: Path, step: int) -> list[str]:
    # `step`: the call's number (its outputs are lease-N.log, summary-N.json, records-N.tar.gz)
    """What is wrong with one step's output folder (empty when nothing): the device tool's limits, the
    three outputs, and an archive of valid records filed as <study>/<host>/<preset>.jsonl."""
    from ..results import records as _records

    out = Path(out)
    problems = []
    files = [p for p in out.rglob("*") if p.is_file()]
    if len(files) > OUT_MAX_FILES:
        problems.append(f"{len(files)} files (the tool returns {OUT_MAX_FILES})")
    for p in out.rglob("*"):
        rel = p.relative_to(out)
        if any(not _OUT_NAME.match(part) for part in rel.parts):
            problems.append(f"{rel}: a name the tool does not return")
        if p.is_file() and len(rel.parts) - 1 > OUT_MAX_DEPTH:
            problems.append(f"{rel}: deeper than {OUT_MAX_DEPTH} folders")
        if p.is_file() and p.stat().st_size > OUT_MAX_FILE_BYTES:
            problems.append(f"{rel}: {p.stat().st_size} bytes (at most {OUT_MAX_FILE_BYTES})")
    want = {f"lease-{step}.log", f"summary-{step}.json", f"records-{step}.tar.gz"}
    missing = sorted(want - {p.name for p in files})
    if missing:
        return problems + [f"missing {', '.join(missing)}"]
    summary = json.loads((out / f"summary-{step}.json").read_text())
    nrec = 0
    with tarfile.open(out / f"records-{step}.tar.gz") as tar:
        for m in tar.getmembers():
            if not m.isfile() or not m.name.endswith(".jsonl"):
                continue
            parts = Path(m.name).parts
            if len(parts) != 3 or parts[2] != f"{Path(parts[2]).stem}.jsonl":
                problems.append(f"archive member {m.name}: not <study>/<host>/<preset>.jsonl")
                continue
            for i, line in enumerate(tar.extractfile(m).read().decode().splitlines()):
                rec = json.loads(line)
                try:
                    _records.validate(rec, f"{m.name}:{i + 1}")
                except _records.RecordError as exc:
                    problems.append(str(exc))
                if rec.get("study") != parts[0] or rec.get("preset") != Path(parts[2]).stem:
                    problems.append(f"{m.name}:{i + 1}: a record of {rec.get('study')}/{rec.get('preset')}")
                if not rec.get("provenance", {}).get("git_commit"):
                    problems.append(f"{m.name}:{i + 1}: no commit in provenance")
                nrec += 1
    if not nrec:
        problems.append(f"records-{step}.tar.gz holds no records")
    if summary.get("call") != step:
        problems.append(f"summary-{step}.json is of call {summary.get('call')}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nvmelab.lease", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    p = sub.add_parser("plan", help="both calls' parts, estimates and the lease's budget")
    p.add_argument("--standin", action="store_true", help="the rehearsal's estimates (no CUDA context)")
    p = sub.add_parser("native-check", help="the installed extension: imports, CUDA code, no driver linked")
    p.add_argument("--want-cuda", action="store_true", help="the wheel was built with CUDA (a lease's always is)")
    p.add_argument("--json", type=Path, default=None, help="also write the check's result here")
    for name in ("call", "pack"):
        q = sub.add_parser(name)
        q.add_argument("number", type=int, choices=sorted(CALLS))
        q.add_argument("--results", type=Path, required=True, help="records root (<study>/<host>/<preset>.jsonl)")
        q.add_argument("--out", type=Path, required=True, help="the device tool's output folder")
        q.add_argument("--parts", type=Path, default=None, help="JSON lines: what each part of the call did")
        q.add_argument("--standin", action="store_true", help="the CPU stand-in instead of the cuda engine")
        if name == "call":
            q.add_argument("--started", type=float, required=True, help="time.time() when the call began")
            q.add_argument("--seconds", type=float, default=None, help="the call's time (default: CALLS[N].limit_s)")
            q.add_argument("--only", default=None, help="comma-separated part names: run only these")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.action == "plan":
        plan = plan_estimate(gpu=not args.standin)
        sys.stdout.write(format_plan(plan) + "\n")
        for pr in plan["problems"]:
            log.error("over the limits: %s", pr)
        return 1 if plan["problems"] else 0
    if args.action == "native-check":
        r = native_check(args.want_cuda)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(r, indent=1, default=str) + "\n")
        b = r["build"]
        log.info(
            "%s: cuda %s (architectures %s), GPU: %s; sections checked: %s",
            r["extension"],
            b.get("cuda"),
            b.get("cuda_architectures") or "-",
            r["cuda_status"].get("devices") or r["cuda_status"].get("reason"),
            r["elf"].get("why") or f"{len(r['elf']['sections'])}, linked: {', '.join(r['elf']['needed'])}",
        )
        for pr in r["problems"]:
            log.error("native check: %s", pr)
        return 1 if r["problems"] else 0
    os.environ.setdefault("NVMELAB_RESULTS", str(args.results))
    if args.action == "call":
        only = [o for o in (args.only or "").split(",") if o]
        try:
            run_call(
                args.number,
                args.results,
                args.out,
                started=args.started,
                seconds=args.seconds,
                parts=args.parts,
                standin=args.standin,
                only=only or None,
            )
        except ValueError as exc:
            log.error("%s", exc)
            return 2
        return 0
    s = pack(args.number, args.results, args.out, args.parts, standin=args.standin)
    sys.stdout.write(f"{args.out}: {s['records']['archive']}, summary-{args.number}.json\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
