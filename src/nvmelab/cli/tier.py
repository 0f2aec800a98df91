"""`nvmelab tier`: the vram_cache study from the command line (one run, or the whole sweep)."""
from __future__ import annotations

import argparse
import json
import sys

from . import UsageError

COMMAND = "tier"
HELP = "NVMe RAID-0 + page cache under a paging workload (the vram_cache study)"
DESCRIPTION = """\
Page a state vector through a striped volume of emulated NVMe devices, with or without a
write-back cache, and report throughput, per-device rates and cache statistics.

  nvmelab tier run --workload circuit --fraction 1/16 --ndevs 7 --cache host
  nvmelab tier sweep --preset standard

`run` prints one JSON record; `sweep` runs (or resumes) the study's configurations and
prints where the records are. Every run checks the final state against an in-memory run.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    for name, help_ in (("run", "one configuration, one record (JSON on stdout)"),
                        ("sweep", "every configuration of a preset; records appended to a JSONL file")):
        q = sub.add_parser(name, help=help_)
        q.add_argument("--preset", default=None, help="quick | standard | paper (default: $NVMELAB_PRESET or quick)")
        q.add_argument("--nqubits", type=int, default=None, help="state size in qubits (complex64)")
        q.add_argument("--depth", type=int, default=None, help="circuit depth (gates)")
        q.add_argument("--profile", default="pm1753", help="emulated device model (default pm1753)")
        q.add_argument("--scale", type=float, default=None, help="device-model scale (default: the profile's)")
        q.add_argument("--qdepth", type=int, default=32, help="queue entries per device (default 32)")
        q.add_argument("--chunk", type=int, default=64 * 1024, help="RAID-0 chunk in bytes (default 65536)")
        q.add_argument("--readahead", type=int, default=4, help="read-ahead pages per miss (default 4)")
        q.add_argument("--target", default=None,
                       help="a real target (pci://...) instead of emu://; its namespace 1 is overwritten")
        q.add_argument("--allow-write", action="store_true", help="permit overwriting the devices of --target")
    r = sub.choices["run"]
    r.add_argument("--workload", choices=("circuit", "random"), default="circuit")
    r.add_argument("--fraction", default="1/16", help="memory budget as a fraction of the state (default 1/16)")
    r.add_argument("--ndevs", type=int, default=7, help="devices (1 = single device, else RAID-0)")
    r.add_argument("--cache", choices=("none", "host", "gpu"), default="host")
    r.add_argument("--policy", choices=("lru", "clock"), default="lru")
    s = sub.choices["sweep"]
    s.add_argument("--out", default=None, help="records file (default data/results/vram_cache/<host>/<preset>.jsonl)")


def run(args: argparse.Namespace) -> int:
    from ..tier import study

    kw = {"profile": args.profile, "scale": args.scale, "qdepth": args.qdepth, "chunk": args.chunk,
          "readahead": args.readahead, "target": args.target, "allow_write": args.allow_write}
    if args.action == "run":
        if args.ndevs < 1:
            raise UsageError(f"--ndevs: {args.ndevs} must be >= 1")
        sp = study.plan(args.preset, nqubits=args.nqubits, depth=args.depth, fractions=(args.fraction,),
                        ndevs=(args.ndevs,), policies=(args.policy,), workloads=(args.workload,), **kw)
        cfg = study.Config(args.workload, args.fraction, args.ndevs, args.cache, args.policy)
        rec = study.run_one(cfg, sp)
        rec.pop("provenance", None)
        json.dump(rec, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        if rec.get("checksum_ok") is False:
            print("nvmelab tier: the final state differs from the in-memory run", file=sys.stderr)
            return 1
        return 0
    sp = study.plan(args.preset, nqubits=args.nqubits, depth=args.depth, **kw)

    def progress(rec: dict) -> None:
        extra = f" {rec['mibs']:.1f} MiB/s" if rec["status"] == "ok" else f" ({rec.get('reason')})"
        print(f"{rec['config_key']} rep {rec['repetition']}: {rec['status']}{extra}", file=sys.stderr)

    path = study.sweep(study_plan=sp, path=args.out, progress=progress)
    print(path)
    return 0
