# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab study`: list the studies, show a plan, run (or resume) a sweep."""

from __future__ import annotations

import argparse
import logging

from . import UsageError

COMMAND = "study"
HELP = "run a study's sweep (records under data/results/<study>/<host>/)"
DESCRIPTION = """\
Run the sweep of a study (src/nvmelab/studies/<study>/spec.toml) on a target.

  nvmelab study list
  nvmelab study plan cpu_initiated --preset standard
  nvmelab study run cpu_initiated --preset standard [--target URI]
  nvmelab study run all --preset standard --replace   (every study this host can run)

Every study, blksum_qdepth and vram_cache included, is a spec run by this runner.
Presets: quick (CI, seconds), standard (a small host, minutes), paper (the full
published grid, for real hardware: pass --target pci://... naming the allow-listed
controllers). Records are appended after every run, so an interrupted sweep
resumes where it stopped: `run` makes exactly what this host's records of the
preset lack (what a notebook does under NVMELAB_RUN=missing); --replace moves
this host's records of the preset aside first (kept as *.replaced-<utc>) and
measures the whole plan again. `all` runs every study whose engine this host
has (the device-initiated ones need a CUDA GPU) and names the others. Records
of the standard and paper presets are for publication: the sweep refuses to
start when other processes keep the host busy (--busy-ok overrides), and each
record carries host_cpu_usage, the whole host's CPU use during the run. Host
variables (governor, turbo, SMT, stress) are applied when the host allows it
and restored afterwards; runs asking for a value the host cannot be set to are
skipped and listed. A sweep locks its records file: a second sweep on the
same file is refused, naming the pid of the one running (--wait queues it
behind that one instead). SIGTERM and SIGHUP stop a sweep as Ctrl-C does.
"""

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    sub.add_parser("list", help="the studies and their presets")
    for name, help_ in (("plan", "print the runs a preset would do"), ("run", "run or resume a sweep")):
        q = sub.add_parser(name, help=help_)
        q.add_argument("study", help="study name (see `nvmelab study list`), path to a spec .toml, or `all`")
        q.add_argument(
            "--preset", default="quick", help="quick | standard | paper | lease (the GPU studies; default: quick)"
        )
        q.add_argument(
            "--target", default=None, help="target URI replacing the spec's default (emu://, pci://, file://)"
        )
        if name == "run":
            q.add_argument("--results", default=None, help="results root (default: data/results; quick: build/results)")
            q.add_argument(
                "--no-host-changes",
                action="store_true",
                help="never write sysfs; runs needing another governor/turbo/SMT are skipped",
            )
            q.add_argument("--max-runs", type=int, default=None, help="stop after this many new runs")
            q.add_argument(
                "--replace",
                action="store_true",
                help="move this host's records of the preset aside first and measure the whole plan again",
            )
            q.add_argument(
                "--busy-ok", action="store_true", help="take standard/paper records even when the host is busy"
            )
            q.add_argument(
                "--wait",
                action="store_true",
                help="when another sweep is writing the same records file, wait for it (default: refuse)",
            )
            q.add_argument("--no-progress", action="store_true", help="no progress bar")
            q.add_argument(
                "--isolate",
                type=float,
                default=None,
                metavar="SECONDS",
                help="each run in a process of its own with this time limit; a hang or crash gives a "
                "failed-point record and the sweep goes on",
            )
            q.add_argument(
                "--budget",
                type=float,
                default=None,
                metavar="SECONDS",
                help="with --isolate: start no run once less than one run's limit of this budget is left",
            )
            q.add_argument(
                "--scheduler", default=None, help="Dask scheduler address: spread runs over its workers (one per host)"
            )


def run(args: argparse.Namespace) -> int:
    from ..studies import PRESETS, HostBusyError, engine_available, ensure_quiet, list_specs, load_spec

    if args.action == "list":
        for name in list_specs():
            spec = load_spec(name)
            counts = ", ".join(f"{p}: {len(spec.plan(p).runs)} runs" for p in spec.preset_names())
            print(f"{name:18s} {spec.title}  [{spec.engine}; {counts}]")
        return 0
    names = list_specs() if args.study == "all" else [args.study]
    specs = [load_spec(n) for n in names]
    for spec in specs:
        if args.preset not in spec.presets and args.study != "all":
            raise UsageError(f"study {spec.study!r} has no preset {args.preset!r}; choose one of {', '.join(PRESETS)}")
    if args.action == "plan":
        for spec in specs:
            if args.preset not in spec.presets:
                continue
            plan = spec.plan(args.preset, target=args.target)
            for r in plan.runs:
                print(f"{r.params.get('target')}  {r.label()}")
            sweeps = ", ".join(f"{k} ({len(v)})" for k, v in plan.sweeps.items())
            print(f"{spec.study}: {len(plan.runs)} runs; sweeps: {sweeps}")
        return 0
    if args.budget is not None and args.isolate is None:
        raise UsageError("--budget needs --isolate SECONDS")
    for name in ("isolate", "budget"):
        v = getattr(args, name)
        if v is not None and not v > 0:
            raise UsageError(f"--{name} must be > 0 seconds, got {v}")
    if args.isolate is not None and args.scheduler:
        raise UsageError("--isolate and --scheduler cannot be combined")
    if args.max_runs is not None and args.max_runs < 1:
        raise UsageError(f"--max-runs must be >= 1, got {args.max_runs}")
    runnable = []
    for spec in specs:
        ok, why = engine_available(spec.engine)
        if args.preset not in spec.presets:
            print(f"not run: {spec.study}: no preset {args.preset!r}")
        elif not ok and args.study == "all":
            print(f"not run: {spec.study}: {why}")
        else:
            runnable.append(spec)
    if args.preset != "quick" and not args.busy_ok and not args.scheduler:
        try:
            ensure_quiet()
        except HostBusyError as exc:
            raise UsageError(str(exc)) from None
    for spec in runnable:
        _run_one(spec, args)
    return 0


def _run_one(spec, args: argparse.Namespace) -> None:
    from ..studies import default_results_root, run_study, set_aside

    if args.replace:
        root = args.results if args.results is not None else default_results_root(args.preset)
        moved = set_aside(root, spec.study, args.preset)
        if moved is not None:
            print(f"moved aside: {moved}")
    executor = None
    client = None
    if args.scheduler:
        from distributed import Client

        from ..studies.distributed import DaskExecutor

        client = Client(args.scheduler)
        executor = DaskExecutor(client, allow_host_changes=not args.no_host_changes)
    elif args.isolate is not None:
        from ..studies.isolate import IsolatedExecutor

        executor = IsolatedExecutor(args.isolate, args.budget)
    try:
        rep = run_study(
            spec,
            args.preset,
            target=args.target,
            results_root=args.results,
            executor=executor,
            progress=not args.no_progress,
            allow_host_changes=not args.no_host_changes,
            max_runs=args.max_runs,
            wait=args.wait,
        )
    except RuntimeError as exc:  # engine missing (e.g. no CUDA build)
        raise UsageError(str(exc)) from None
    finally:
        if client is not None:
            client.close()
    print(rep.summary())
    for path in sorted(rep.paths):
        print(f"records: {path}")
    for label, why in rep.skipped:
        print(f"skipped: {label}: {why}")
    for label, why in rep.failed:
        print(f"failed: {label}: {why}")
