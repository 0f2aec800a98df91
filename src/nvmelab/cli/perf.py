# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab perf run`: one closed-loop run on any target, a human table, optionally a JSON record."""

from __future__ import annotations

import argparse
import json
import sys

from . import UsageError, records_file

COMMAND = "perf"
HELP = "closed-loop I/O engine (CPU-initiated): run one measurement on a target"
DESCRIPTION = (
    "Drive a target with pinned worker threads keeping a fixed queue depth in flight, and report "
    "IOPS, bandwidth, latency percentiles and CPU usage. Targets: emu://?profile=null|pm1753&scale=S "
    "(emulated controllers), pci://BDF (real controllers), file:///path and blk:///dev/X (kernel paths)."
)


def _cpu_list(text: str) -> list[int]:
    from ..host.cpus import parse_cpu_list

    try:
        return parse_cpu_list(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad CPU list {text!r} (e.g. 0,2,4 or 0-3)") from None


#: Short spellings of engine options; the options themselves come from the parameter table.
_SHORT = {"iosize": "-s", "qdepth": "-q", "runtime": "-r", "warmup": "-w"}
#: Table parameters the CLI spells its own way: nthreads is --ncpus/--cpus, lat is --no-lat, bd is --no-bd.
_OWN = {"nthreads", "lat", "bd"}
#: Options whose CLI default is None (decided by perf.run: all devices, 1 + repetition).
_NONE_DEFAULT = {"ndevs", "seed"}


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    """One option per run parameter of the engine's table (src/engine/perf_params.h)."""
    from ..engines import perf

    for prm in perf.params():
        name = prm["name"]
        if name in _OWN:
            continue
        flags = ["--" + name.replace("_", "-")] + ([_SHORT[name]] if name in _SHORT else [])
        rng = "" if prm["min"] is None else f" [{prm['min']}..{'' if prm['max'] is None else prm['max']}]"
        kw: dict = {"help": prm["doc"] + rng, "default": None if name in _NONE_DEFAULT else prm["default"]}
        if prm["type"] == "bool":
            p.add_argument(*flags, action="store_true", help=prm["doc"])
            continue
        if prm["type"] == "pattern":
            kw["choices"] = list(perf.PATTERNS)
        else:
            kw["type"] = float if prm["type"] == "seconds" else int
        p.add_argument(*flags, **kw)
    p.add_argument("--no-lat", action="store_true", help="do not sample latency (hot-path measurements)")
    p.add_argument(
        "--no-bd", action="store_true", help="no per-I/O time breakdown (latency still sampled; its cost measured)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="perf_command", metavar="ACTION")
    sub.required = True
    from .cuda_run import add_parser as _add_cuda_run  # `perf cuda-run` (device-initiated, cuda part)

    _add_cuda_run(sub)
    sub.add_parser(
        "params",
        help="the engine's run parameters (type, range, default, meaning) as a Markdown table",
        description="Print the run parameter table of the engine (src/engine/perf_params.h).",
    )
    p = sub.add_parser(
        "run",
        help="one measurement -> a table (and a JSON record with --json)",
        description=DESCRIPTION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--target",
        "-t",
        default="emu://?profile=null",
        help="target URI: emu://..., pci://BDF[,BDF...], file:///path, blk:///dev/X",
    )
    _add_engine_options(p)
    p.add_argument("--ncpus", "-c", type=int, default=1, help="worker threads, one per logical CPU")
    p.add_argument(
        "--thr-sib",
        action="store_true",
        help="fill physical cores with their thread siblings (default: one logical CPU per core)",
    )
    p.add_argument("--cpus", type=_cpu_list, default=None, help="explicit logical CPUs to pin to (e.g. 0,2 or 0-3)")
    p.add_argument(
        "--backend",
        choices=["io_uring", "psync"],
        default=None,
        help="kernel path for file:// and blk:// (default io_uring; psync needs --qdepth 1)",
    )
    p.add_argument("--no-prefill", action="store_true", help="with --verify: check data written before this run")
    p.add_argument("--allow-write", action="store_true", help="blk://: permit writing to the named device")
    p.add_argument("--study", default="adhoc", help="study name written into the record")
    p.add_argument("--repetition", type=int, default=0, help="repetition index written into the record")
    p.add_argument(
        "--json",
        metavar="PATH",
        default=None,
        type=records_file,
        help="append the record to this JSONL file (atomically); '-' prints it to stdout",
    )


def run(args: argparse.Namespace) -> int:
    if args.perf_command == "cuda-run":
        from .cuda_run import run as _run_cuda

        return _run_cuda(args)
    from ..engines import perf
    from ..results.checks import failed_checks
    from ..results.records import append_records, check_path

    if args.perf_command == "params":
        print(perf.params_markdown())
        return 0
    if args.no_prefill and not args.verify:
        raise UsageError("--no-prefill only makes sense with --verify")
    if args.json and args.json != "-":
        check_path(args.json)  # a link or a FIFO is refused before the run, not after it
    table = {prm["name"]: getattr(args, prm["name"]) for prm in perf.params() if prm["name"] not in _OWN}
    rec = perf.run(
        target=args.target,
        **table,  # every option made from the engine's table (_add_engine_options), as given
        lat=not args.no_lat,
        bd=not args.no_bd,
        ncpus=args.ncpus,
        thr_sib=args.thr_sib,
        cpus=args.cpus,
        backend=args.backend,
        prefill=False if args.no_prefill else None,
        allow_write=args.allow_write,
        study=args.study,
        repetition=args.repetition,
    )
    if args.json == "-":
        json.dump(rec, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(perf.table(rec))
        if args.json:
            append_records(args.json, [rec])
            print(f"record appended to {args.json}")
    failed = failed_checks(rec)
    if failed:  # the record is kept, marked (checks_ok false); the run is no measurement to go on
        why = "; ".join(f"{k}: {rec['checks'][k]['detail']}" for k in failed)
        print(f"nvmelab perf: self-check failed ({why}); the record is marked checks_ok=false", file=sys.stderr)
        return 1
    bad = rec.get("verify_errors", 0) or rec["errors"]
    return 1 if bad else 0
