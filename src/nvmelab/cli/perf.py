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
    from ..cpus import parse_cpu_list

    try:
        return parse_cpu_list(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad CPU list {text!r} (e.g. 0,2,4 or 0-3)") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="perf_command", metavar="ACTION")
    sub.required = True
    from .cuda_run import add_parser as _add_cuda_run  # `perf cuda-run` (device-initiated, cuda part)

    _add_cuda_run(sub)
    p = sub.add_parser("run", help="one measurement -> a table (and a JSON record with --json)",
                       description=DESCRIPTION, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--target", "-t", default="emu://?profile=null",
                   help="target URI: emu://..., pci://BDF[,BDF...], file:///path, blk:///dev/X")
    p.add_argument("--rw", default="randread", choices=["read", "randread", "write", "randwrite", "randrw"],
                   help="access pattern")
    p.add_argument("--rwmix", type=int, default=50, help="randrw: percentage of reads (0..100)")
    p.add_argument("--iosize", "-s", type=int, default=512, help="bytes per I/O (a multiple of the LBA size)")
    p.add_argument("--qdepth", "-q", type=int, default=128, help="I/Os in flight per queue")
    p.add_argument("--nqueues", type=int, default=1, help="queues per device per thread")
    p.add_argument("--ncpus", "-c", type=int, default=1, help="worker threads, one per logical CPU")
    p.add_argument("--thr-sib", action="store_true",
                   help="fill physical cores with their thread siblings (default: one logical CPU per core)")
    p.add_argument("--cpus", type=_cpu_list, default=None, help="explicit logical CPUs to pin to (e.g. 0,2 or 0-3)")
    p.add_argument("--ndevs", type=int, default=None, help="use the first N devices of the target (default: all)")
    p.add_argument("--backend", choices=["io_uring", "psync"], default=None,
                   help="kernel path for file:// and blk:// (default io_uring; psync needs --qdepth 1)")
    p.add_argument("--runtime", "-r", type=float, default=5.0, help="measured seconds")
    p.add_argument("--warmup", "-w", type=float, default=1.0, help="seconds run before measuring (not counted)")
    p.add_argument("--verify", action="store_true", help="stamp writes and check reads (prefills a read range first)")
    p.add_argument("--no-prefill", action="store_true", help="with --verify: check data written before this run")
    p.add_argument("--no-lat", action="store_true", help="do not sample latency (hot-path measurements)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: 1 + repetition)")
    p.add_argument("--lba-start", type=int, default=0, help="first LBA of the range on every device")
    p.add_argument("--lba-count", type=int, default=0, help="LBAs in the range (0: to the end)")
    p.add_argument("--allow-write", action="store_true", help="blk://: permit writing to the named device")
    p.add_argument("--study", default="adhoc", help="study name written into the record")
    p.add_argument("--repetition", type=int, default=0, help="repetition index written into the record")
    p.add_argument("--json", metavar="PATH", default=None, type=records_file,
                   help="append the record to this JSONL file (atomically); '-' prints it to stdout")


def run(args: argparse.Namespace) -> int:
    if args.perf_command == "cuda-run":
        from .cuda_run import run as _run_cuda

        return _run_cuda(args)
    from .. import perf
    from ..records import append_records

    if args.no_prefill and not args.verify:
        raise UsageError("--no-prefill only makes sense with --verify")
    rec = perf.run(
        target=args.target, rw=args.rw, rwmix=args.rwmix, iosize=args.iosize, qdepth=args.qdepth,
        nqueues=args.nqueues, ncpus=args.ncpus, thr_sib=args.thr_sib, cpus=args.cpus, ndevs=args.ndevs,
        backend=args.backend, runtime=args.runtime, warmup=args.warmup, verify=args.verify,
        prefill=False if args.no_prefill else None, lat=not args.no_lat, seed=args.seed,
        lba_start=args.lba_start, lba_count=args.lba_count, allow_write=args.allow_write, study=args.study,
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
    bad = rec.get("verify_errors", 0) or rec["errors"]
    return 1 if bad else 0
