# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab perf cuda-run`: one device-initiated measurement (GPU threads drive the queues).

Not a top-level command (no COMMAND here): the perf command adds it as the `cuda-run` action.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import UsageError, records_file

ACTION = "cuda-run"
HELP = "device-initiated I/O: CUDA threads submit and complete the commands (needs a CUDA GPU)"
DESCRIPTION = (
    "Run the cuda-run engine: one CUDA block per queue (devices x queues per device), one thread per command "
    "in flight, lock-step rounds with completions matched by CID. Targets: gpu-emu://?profile=null|pm1753|"
    "pm1753-p2p&ndev=N&scale=S (the GPU-resident emulated controller; keys in src/README.md); "
    "pci://ADDR[,ADDR...]?driver=vfio-pci|uio_pci_generic (real controllers: queues and payload in pinned host "
    "memory mapped into the GPU; book/driver.md says what the system needs); emu://?mode=thread&... (the same "
    "path against the CPU emulator)."
)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        ACTION, help=HELP, description=DESCRIPTION, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument(
        "--target",
        "-t",
        default="gpu-emu://?profile=null",
        help="target URI (gpu-emu://..., pci://..., emu://?mode=thread&...)",
    )
    p.add_argument(
        "--rw", default="randread", choices=["read", "randread", "write", "randwrite"], help="access pattern"
    )
    p.add_argument("--iosize", "-s", type=int, default=512, help="bytes per I/O (a multiple of 512)")
    p.add_argument(
        "--qdepth", "-q", type=int, default=128, help="commands in flight per queue = CUDA threads per block"
    )
    p.add_argument("--nqueues", type=int, default=1, help="queues per device")
    p.add_argument("--ndevs", type=int, default=None, help="devices used (default: the URI's ndev, else 16)")
    p.add_argument("--runtime", "-r", type=float, default=5.0, help="measured seconds")
    p.add_argument("--warmup", "-w", type=float, default=1.0, help="seconds run before measuring (not counted)")
    p.add_argument("--rounds", type=int, default=0, help="instead of a timed run: exactly this many rounds per queue")
    p.add_argument("--verify", action="store_true", help="writes carry stamps; reads check them")
    p.add_argument("--timeout", type=float, default=2.0, help="seconds a completion may take before the queue fails")
    p.add_argument("--gpu", type=int, default=0, help="CUDA device ordinal")
    p.add_argument(
        "--payload",
        default="host",
        choices=["host", "gpu"],
        help="pci:// and emu://: where the data lives (gpu is refused with the reason: no DMA importer)",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default: 1 + repetition)")
    p.add_argument("--study", default="adhoc", help="study name written into the record")
    p.add_argument("--repetition", type=int, default=0, help="repetition index written into the record")
    p.add_argument(
        "--json",
        metavar="PATH",
        default=None,
        type=records_file,
        help="append the record to this JSONL file (atomically); '-' prints it to stdout",
    )
    return p


def table(rec: dict) -> str:
    """A human-readable summary of one cuda-run record."""
    prov = rec["provenance"]
    dev = prov.get("cuda_device") or {}
    rows = [
        ("target", rec["target"]),
        ("emulator", str(prov.get("emulator"))),
        ("GPU", f"{dev.get('name')} (CC {dev.get('compute_capability')}, driver {dev.get('driver_version')})"),
        ("pattern / iosize", f"{rec['rw']} / {rec['iosize']} B"),
        (
            "qdepth x nqueues x ndevs",
            f"{rec['qdepth']} x {rec['nqueues']} x {rec['ndevs']} = {rec['cuda_threads']} threads",
        ),
        ("window", f"{rec['runtime_s']:.3f} s (kernel {rec['kernel_s']:.3f} s incl. warm-up)"),
        ("IOPS", f"{rec['iops']:,.0f}"),
        ("bandwidth", f"{rec['mibs']:,.2f} MiB/s"),
        ("round time mean / max", f"{rec['round_ns']['mean'] / 1000:.1f} us / {rec['round_ns']['max'] / 1000:.1f} us"),
        ("errors", str(rec["errors"])),
    ]
    if "verify_errors" in rec:
        rows.append(("verify errors", str(rec["verify_errors"])))
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def run(args: argparse.Namespace) -> int:
    from ..engines import gpu
    from ..results.records import append_records

    if args.rounds and args.rounds < 0:
        raise UsageError(f"--rounds {args.rounds}: must be >= 0")
    # No GPU, a lost completion (TimeoutError), a CUDA failure: one line via nvmelab.cli.main.
    rec = gpu.run_cuda(
        target=args.target,
        rw=args.rw,
        iosize=args.iosize,
        qdepth=args.qdepth,
        nqueues=args.nqueues,
        ndevs=args.ndevs,
        runtime=args.runtime,
        warmup=args.warmup,
        rounds=args.rounds,
        verify=args.verify,
        timeout=args.timeout,
        gpu=args.gpu,
        seed=args.seed,
        study=args.study,
        repetition=args.repetition,
        payload=args.payload,
    )
    if args.json == "-":
        json.dump(rec, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(table(rec))
        if args.json:
            append_records(args.json, [rec])
            print(f"record appended to {args.json}")
    return 1 if rec["errors"] or rec.get("verify_errors") else 0
