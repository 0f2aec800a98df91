# SPDX-License-Identifier: BSD-3-Clause
"""The GPU lease plan (env/gpu-lease.sh): what each step records, what it costs, what it hands back.

A lent GPU host gives at most 30 minutes of device time, commands of at most 10 minutes, and back at
most 8 files of 16 MiB no deeper than two folders; what is not in the output folder when a command
ends is lost. So the plan runs in steps of one command each (``STEP_LIMIT_S``), the whole plan within
``PLAN_LIMIT_S``; each step writes into OUT one log, one summary JSON and ONE archive of every record
taken so far (``<study>/<host>/<preset>.jsonl`` inside), and resumes what an earlier step's archive
(or results folder) already holds:

    step 1  install; every GPU test; emulator capacity (tests/bench/bench_gpu_submit.py) and the per-I/O
            breakdown's cost on the GPU (bench_breakdown_cost.py run_gpu: both under tests.bench --gpu); the
            calibration A/B: cuda_qdepth's lease points ``AB_POINTS`` against the pm1753 profile as
            derived in profiles.c (A) and with the fitted model's overrides (B: model.emu_query)
    step 2  cuda_qdepth, preset lease (target A); cuda_match, preset lease (the three completion-matching
            modes, in and out of order)
    step 3  cuda_iosize, preset lease; vram_cache, preset lease (its GPU-memory cache runs);
            cuda_pollcost, preset lease (a co-running compute kernel with and without the I/O)

Every study point runs in a process of its own under a time limit (isolate.py): a hang or an error
costs that point only and leaves a failed-point record. A step stops starting points when its time
is used (the rest is "not started"; the next call of the same step resumes them).

    python -m nvmelab.studies.lease plan [--standin]        points and estimated seconds of every step
    python -m nvmelab.studies.lease run STEP --results DIR --budget S [--parts F] [--standin]
    python -m nvmelab.studies.lease pack STEP --results DIR --out OUT [--parts F]
    python -m nvmelab.studies.lease native-check [--want-cuda]   the installed extension (step 1)

``--standin`` (make rehearse-gpu-host): the cuda engine is replaced by its CPU stand-in
(engines/gpu_standin.py), which drives the same queue code on the CPU emulator.

The time budget (estimate(); written down in env/README.md): a point costs its warm-up and window
plus ``POINT_OVERHEAD_S`` (a fresh interpreter, imports, engine bring-up and teardown: measured by the
rehearsal, ``CUDA_INIT_S`` added for the CUDA context on the GPU host) plus one lock-step round of
the fitted model (model.round_time; microseconds); a tier point takes ``TIER_POINT_S``. A point with
a co-runner (corun > 0) adds its phase alone, ``CORUN_SHARE`` of its warm-up and window (the engine's
CRUN_CORUN_SHARE), plus ``CORUN_SIZING_S`` for sizing it.
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
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .paths import host_id
from .spec import Run, load_spec

log = logging.getLogger(__name__)

PRESET = "lease"
#: One device command (the tool allows 10 minutes; 2 are kept for the machine's start and transfers).
STEP_LIMIT_S = 480
#: The whole plan (the session's 30 minutes, less starts and transfers).
PLAN_LIMIT_S = 1440
#: Seconds an isolated point costs beyond its warm-up and window: interpreter, imports, bring-up,
#: teardown. make rehearse-gpu-host measured 0.6 s (quiet) to 2.5 s (under load) on the shared 2-core
#: development host (its summaries' seconds_per_point less 0.7 s of window), and 2.3 to 4.2 s at a load
#: average of 8-10 (env/README.md); kept at 2.5 s for the GPU host's idle 16 cores: a lease will measure
#: it, and a step that runs long leaves points "not started" rather than overrunning.
POINT_OVERHEAD_S = 2.5
#: CUDA context creation and gpu-emu's allocations per point on the GPU host (estimate; each
#: summary's seconds_per_point checks it on the first lease).
CUDA_INIT_S = 1.0
#: One vram_cache point (nqubits 21, the cache runs): the slowest cache run of
#: data/results/vram_cache/vm/standard.jsonl took 3.34 s on the 2-core host (tests/test_lease.py checks).
TIER_POINT_S = 3.5
#: The co-runner's phase alone: this share of warm-up + window (src/engine/crun_params.h CRUN_CORUN_SHARE;
#: tests/test_lease.py checks the two agree), and its sizing launches (two short ones, an estimate).
CORUN_SHARE = 0.4
CORUN_SIZING_S = 0.05
#: A point's time limit: this many times its warm-up and window, plus POINT_TIMEOUT_BASE_S.
POINT_TIMEOUT_FACTOR = 4.0
POINT_TIMEOUT_BASE_S = 20.0
#: Limit of a tier point.
TIER_TIMEOUT_S = 30.0
#: Fixed parts of the steps (env/gpu-lease.sh enforces each with `timeout`): installing the wheels,
#: the GPU tests, the capacity benchmark, packing the outputs.
INSTALL_LIMIT_S = 60
GPU_TESTS_LIMIT_S = 150
BENCH_LIMIT_S = 90
NATIVE_CHECK_LIMIT_S = 30
PACK_S = 10
#: One machine start (the device tool: minutes; the plan counts one, a warm machine serving the rest).
MACHINE_START_S = 120
#: (nqueues, qdepth) of the calibration A/B: the two calibration points of the lock-step round
#: (data/reference/model-calibration.csv: nqueues=1 at qd 128 and 512) and eight held-out ones, one repetition each
#: (cuda_qdepth's lease preset).
AB_POINTS = ((1, 128), (1, 512), (1, 64), (1, 256), (4, 128), (2, 128), (8, 128), (16, 128), (1, 32), (4, 512))
#: Target A of the A/B: the profile as profiles.c derives it (cuda_qdepth's default target).
AB_TARGET_A = "gpu-emu://?profile=pm1753"


@dataclasses.dataclass(frozen=True)
class Task:
    """One sweep of a step: a study's lease preset, a target (None: the spec's; "B": the fitted
    model's overrides), and optionally only some (nqueues, qdepth) points."""

    study: str
    target: str | None = None
    points: tuple[tuple[int, int], ...] | None = None

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


#: The study tasks of each step (step 1 also runs the tests and the benchmark: env/gpu-lease.sh).
STEPS: dict[int, tuple[Task, ...]] = {
    1: (Task("cuda_qdepth", AB_TARGET_A, AB_POINTS), Task("cuda_qdepth", "B", AB_POINTS)),
    2: (Task("cuda_qdepth", AB_TARGET_A), Task("cuda_match")),
    3: (Task("cuda_iosize"), Task("vram_cache"), Task("cuda_pollcost")),
}
#: Fixed seconds of each step besides its study points (upper bounds: the script's time limits).
STEP_FIXED_S = {
    1: INSTALL_LIMIT_S + NATIVE_CHECK_LIMIT_S + GPU_TESTS_LIMIT_S + BENCH_LIMIT_S + PACK_S,
    2: INSTALL_LIMIT_S + PACK_S,
}
STEP_FIXED_S[3] = STEP_FIXED_S[2]


@functools.cache
def _fitted() -> Any:
    """The fitted device model (model.fit reads and fits the calibration set: once per process)."""
    from ..results import model, model_validation

    return model.fit(model_validation.published_points())


def runs_of(task: Task) -> list[Run]:
    spec = load_spec(task.study)
    sel = task.select()
    runs = spec.plan(PRESET, target=task.resolved_target()).runs
    return [r for r in runs if sel is None or sel(r)]


def point_seconds(run: Run, *, gpu: bool = True) -> float:
    """Estimated seconds of one isolated point (see the module docstring)."""
    if run.engine == "tier":
        return TIER_POINT_S + POINT_OVERHEAD_S
    from ..results import model

    p = run.params
    rnd = float(model.round_time(_fitted(), int(p.get("qdepth", 1)), int(p.get("iosize", 512))))
    window = float(p.get("warmup", 0)) + float(p.get("runtime", 0))
    corun = CORUN_SHARE * window + CORUN_SIZING_S if p.get("corun") else 0.0
    return window + corun + rnd + POINT_OVERHEAD_S + (CUDA_INIT_S if gpu else 0)


def point_timeout(run: Run) -> float:
    if run.engine == "tier":
        return TIER_TIMEOUT_S
    p = run.params
    return POINT_TIMEOUT_FACTOR * (float(p.get("warmup", 0)) + float(p.get("runtime", 0))) + POINT_TIMEOUT_BASE_S


def estimate(step: int) -> dict[str, Any]:
    """Points and estimated seconds of a step (fixed parts at their limits)."""
    tasks = []
    for t in STEPS[step]:
        runs = runs_of(t)
        tasks.append(
            {"study": t.study, "target": t.target, "points": len(runs), "seconds": sum(point_seconds(r) for r in runs)}
        )
    total = STEP_FIXED_S[step] + sum(t["seconds"] for t in tasks)
    return {"step": step, "fixed_s": STEP_FIXED_S[step], "tasks": tasks, "seconds": total}


def plan_estimate() -> dict[str, Any]:
    """Every step's estimate, the plan's total (commands plus one machine start) and what breaks the
    limits (``problems``: a step over STEP_LIMIT_S, the plan over PLAN_LIMIT_S, a task without points).
    Computed from STEPS, so a study added to the plan is costed here, not by hand (tests/test_lease.py
    checks the limits and that env/README.md's table says these numbers)."""
    steps = [estimate(s) for s in sorted(STEPS)]
    commands = sum(e["seconds"] for e in steps)
    total = commands + MACHINE_START_S
    problems = [
        f"step {e['step']}: {e['seconds']:.0f} s > {STEP_LIMIT_S} s" for e in steps if e["seconds"] > STEP_LIMIT_S
    ]
    problems += [
        f"step {e['step']}: {t['study']} ({t['target']}) has no lease points"
        for e in steps
        for t in e["tasks"]
        if not t["points"]
    ]
    if total > PLAN_LIMIT_S:
        problems.append(
            f"plan: {total:.0f} s (commands {commands:.0f} s + start {MACHINE_START_S} s) > {PLAN_LIMIT_S} s"
        )
    return {
        "steps": steps,
        "commands_s": commands,
        "machine_start_s": MACHINE_START_S,
        "seconds": total,
        "problems": problems,
    }


def _append_part(parts: Path | None, part: dict[str, Any]) -> None:
    if parts is None:
        return
    parts.parent.mkdir(parents=True, exist_ok=True)
    with open(parts, "a", encoding="utf-8") as f:
        f.write(json.dumps(part, default=str) + "\n")


def run_step(step: int, results: Path, budget_s: float, *, parts: Path | None = None, standin: bool = False) -> int:
    """The study tasks of `step`, each point isolated, within `budget_s`; returns the failed-point count."""
    from .isolate import IsolatedExecutor
    from .runner import resolve_engine, run_study

    end = time.monotonic() + budget_s
    _fitted()  # before the first task's share is taken: the fit is not the first task's time
    nfailed = 0
    tasks = STEPS[step]
    for i, task in enumerate(tasks):
        spec = load_spec(task.study)
        run_fn = resolve_engine(spec.engine)
        if standin and spec.engine == "cuda":
            from ..engines.gpu_standin import run_cuda_standin

            run_fn = run_cuda_standin
        runs = runs_of(task)
        timeout = max(point_timeout(r) for r in runs) if runs else POINT_TIMEOUT_BASE_S
        # an even share of what is left, so that every task of the step gets points (what one task
        # leaves unused goes to the next); the rest is "not started" and resumes on the next call
        left = (end - time.monotonic()) / (len(tasks) - i)
        t0 = time.monotonic()
        part: dict[str, Any] = {"part": f"study {task.study}", "target": task.resolved_target() or spec.target}
        if left < timeout:
            part.update(rc=0, not_started=len(runs), detail="no time left in this step")
            _append_part(parts, part)
            continue
        ex = IsolatedExecutor(timeout, budget_s=left)
        try:
            rep = run_study(
                spec,
                PRESET,
                target=task.resolved_target(),
                run_fn=run_fn,
                results_root=results,
                executor=ex,
                progress=False,
                select=task.select(),
            )
        except Exception as exc:  # noqa: BLE001 - one task's failure must not lose the step's other parts
            log.exception("study %s failed", task.study)
            part.update(rc=1, detail=f"{type(exc).__name__}: {exc}", seconds=round(time.monotonic() - t0, 1))
            _append_part(parts, part)
            continue
        nfailed += len(rep.failed)
        secs = time.monotonic() - t0
        part.update(
            rc=0,
            seconds=round(secs, 1),
            planned=rep.planned,
            already_done=rep.already_done,
            ran=rep.ran,
            failed=[list(f) for f in rep.failed],
            skipped=[list(s) for s in rep.skipped],
            not_started=rep.not_started,
            seconds_per_point=round(secs / (rep.ran + len(rep.skipped)), 2) if rep.ran + len(rep.skipped) else None,
            estimated_seconds_per_point=round(sum(point_seconds(r, gpu=not standin) for r in runs) / len(runs), 2)
            if runs
            else None,
            summary=rep.summary(),
        )
        log.info(rep.summary())
        _append_part(parts, part)
    return nfailed


def record_files(results: Path) -> list[Path]:
    """Every file under `results` (records <study>/<host>/<preset>.jsonl, bench/<host>/*.json)."""
    return sorted(p for p in Path(results).rglob("*") if p.is_file() and not p.name.startswith(".tmp-"))


def pack(step: int, results: Path, out: Path, parts: Path | None = None, *, standin: bool = False) -> dict[str, Any]:
    """OUT/records-STEP.tar.gz (every record file under `results`, as <study>/<host>/<preset>.jsonl)
    and OUT/summary-STEP.json; returns the summary."""
    from ..host import provenance
    from ..results import records as _records

    out.mkdir(parents=True, exist_ok=True)
    files = record_files(results)
    archive = out / f"records-{step}.tar.gz"
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
        c = counts.setdefault(rel, {"records": 0, "failed": 0, "targets": {}})
        for rec in _records.iter_records(f):
            c["records"] += 1
            c["failed"] += bool(rec.get("failed"))
            c["targets"][rec.get("target")] = c["targets"].get(rec.get("target"), 0) + 1
    part_list = []
    if parts is not None and parts.exists():
        part_list = [json.loads(ln) for ln in parts.read_text().splitlines() if ln.strip()]
    summary = {
        "step": step,
        "standin": standin,
        "utc": provenance.utc_now(),
        "host": socket.gethostname(),
        "host_id": host_id(),
        "git_commit": provenance.git_commit(),
        "gpu": provenance.gpu(),
        "cuda": _cuda_status(),
        "build": provenance.build(),
        "parts": part_list,
        "records": {"archive": archive.name, "files": counts},
        "estimate": estimate(step),
        "next": f"make gpu-lease STEP={step + 1} OUT=..." if step + 1 in STEPS else "plan complete",
    }
    dst = out / f"summary-{step}.json"
    dst.with_suffix(".tmp").write_text(json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n")
    dst.with_suffix(".tmp").replace(dst)
    return summary


#: What the device tool hands back from its output folder (its README): files, bytes each, folder depth.
OUT_MAX_FILES = 8
OUT_MAX_FILE_BYTES = 16 << 20
OUT_MAX_DEPTH = 2
_OUT_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def check_out(out: Path, step: int) -> list[str]:
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
    if summary.get("step") != step:
        problems.append(f"summary-{step}.json is of step {summary.get('step')}")
    return problems


def _elf_facts(path: Path) -> dict[str, Any]:
    """Sections and DT_NEEDED libraries of a shared object (readelf), or why they were not read."""
    import shutil
    import subprocess

    if not shutil.which("readelf"):
        return {"why": "readelf not found: sections and linked libraries not read"}
    sec = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=False).stdout
    dyn = subprocess.run(["readelf", "-d", "-W", str(path)], capture_output=True, text=True, check=False).stdout
    return {
        "sections": sorted(set(re.findall(r"\]\s+(\.\S+)", sec))),
        "needed": re.findall(r"\(NEEDED\).*\[(.+?)\]", dyn),
    }


def native_check(want_cuda: bool) -> dict[str, Any]:
    """What the installed extension is (the carried wheel's build): it imports (a CUDA build too, on a
    host without a GPU driver: cudart_static loads libcuda.so.1 with dlopen when CUDA is first used, so
    the extension must not name it as a DT_NEEDED library), says what it was built with, holds the GPU
    code when CUDA is on (an .nv_fatbin section, its architectures in build_info) and, without a usable
    GPU, gives the reason the GPU parts skip with. ``problems`` lists what is wrong (empty: nothing)."""
    from .. import _native, build_info
    from ..engines import gpu

    info = build_info()
    so = Path(_native.__file__)
    elf = _elf_facts(so)
    st = gpu.status()
    problems = []
    if want_cuda and not info.get("cuda"):
        problems.append(f"built without CUDA: {info.get('parts', {}).get('cuda', {}).get('detail')}")
    if want_cuda and "sections" in elf and ".nv_fatbin" not in elf["sections"]:
        problems.append(f"{so.name} holds no GPU code (no .nv_fatbin section)")
    if any(n.startswith("libcuda.so") for n in elf.get("needed", ())):
        problems.append(f"{so.name} links the driver library itself ({elf['needed']}): no import without a GPU driver")
    if want_cuda and not st.get("compiled"):
        problems.append(f"cuda_status() says the engine is not compiled in: {st.get('reason')}")
    if st.get("devices", 0) == 0 and not st.get("reason"):
        problems.append("no GPU and no reason given (the GPU tests would skip without saying why)")
    return {"extension": so.name, "build": info, "elf": elf, "cuda_status": st, "problems": problems}


def _cuda_status() -> dict[str, Any] | None:
    try:
        from ..engines import gpu

        st = gpu.status()
        if st.get("devices", 0) > 0:
            st["device"] = gpu.device_info()
        return st
    except Exception as exc:  # noqa: BLE001 - the summary says why instead of failing the step
        return {"error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nvmelab.studies.lease", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    p = sub.add_parser("plan", help="each step's points and estimated seconds")
    p.add_argument("--standin", action="store_true")
    p = sub.add_parser("native-check", help="the installed extension: imports, CUDA code, no driver linked")
    p.add_argument("--want-cuda", action="store_true", help="the wheel was built with CUDA (a lease's always is)")
    for name in ("run", "pack"):
        q = sub.add_parser(name)
        q.add_argument("step", type=int, choices=sorted(STEPS))
        q.add_argument("--results", type=Path, required=True, help="records root (<study>/<host>/<preset>.jsonl)")
        q.add_argument("--parts", type=Path, default=None, help="JSON lines: what each part of the step did")
        q.add_argument("--standin", action="store_true", help="the CPU stand-in instead of the cuda engine")
        if name == "run":
            q.add_argument("--budget", type=float, required=True, help="seconds this step may still use")
        else:
            q.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.action == "plan":
        plan = plan_estimate()
        for e in plan["steps"]:
            tasks = "; ".join(
                f"{t['study']} {t['target'] or ''} {t['points']} points {t['seconds']:.0f} s" for t in e["tasks"]
            )
            sys.stdout.write(f"step {e['step']}: {e['seconds']:.0f} s (fixed {e['fixed_s']} s; {tasks})\n")
        sys.stdout.write(
            f"plan: {plan['seconds']:.0f} s of {PLAN_LIMIT_S} s (commands {plan['commands_s']:.0f} s + one machine "
            f"start {MACHINE_START_S} s); each step at most {STEP_LIMIT_S} s\n"
        )
        for p in plan["problems"]:
            log.error("over the limits: %s", p)
        return 1 if plan["problems"] else 0
    if args.action == "native-check":
        r = native_check(args.want_cuda)
        b = r["build"]
        log.info(
            "%s: cuda %s (architectures %s), GPU: %s; sections checked: %s",
            r["extension"],
            b.get("cuda"),
            b.get("cuda_architectures") or "-",
            r["cuda_status"].get("devices") or r["cuda_status"].get("reason"),
            r["elf"].get("why") or f"{len(r['elf']['sections'])}, linked: {', '.join(r['elf']['needed'])}",
        )
        for p in r["problems"]:
            log.error("native check: %s", p)
        return 1 if r["problems"] else 0
    os.environ.setdefault("NVMELAB_RESULTS", str(args.results))
    if args.action == "run":
        run_step(args.step, args.results, args.budget, parts=args.parts, standin=args.standin)
        return 0
    s = pack(args.step, args.results, args.out, args.parts, standin=args.standin)
    sys.stdout.write(f"{args.out}: {s['records']['archive']}, summary-{args.step}.json\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
