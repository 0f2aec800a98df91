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


#: Short spellings of engine options; the options themselves come from the parameter table.
_SHORT = {"iosize": "-s", "qdepth": "-q", "runtime": "-r", "warmup": "-w"}
#: Options whose CLI default is None (decided by run_cuda: the target's devices, 1 + repetition).
_NONE_DEFAULT = {"ndevs", "seed"}


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    """One option per run parameter of cuda-run's table (src/engine/crun_params.h)."""
    from ..engines import gpu

    for prm in gpu.params():
        name = prm["name"]
        flags = ["--" + name.replace("_", "-")] + ([_SHORT[name]] if name in _SHORT else [])
        rng = "" if prm["min"] is None else f" [{prm['min']}..{'' if prm['max'] is None else prm['max']}]"
        if prm["type"] == "bool":
            p.add_argument(*flags, action="store_true", help=prm["doc"])
            continue
        kw: dict = {
            "help": (prm["doc"] + rng).replace("%", "%%"),
            "default": None if name in _NONE_DEFAULT else prm["default"],
        }
        if prm["type"] == "pattern":
            kw["choices"] = list(gpu.PATTERNS)
        elif prm["type"] == "match":
            kw["choices"] = ["cid", "positional", "scan"]
        elif prm["type"] == "poll":
            kw["type"] = str
        else:
            kw["type"] = float if prm["type"] == "seconds" else int
        p.add_argument(*flags, **kw)


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
    _add_engine_options(p)
    p.add_argument(
        "--payload",
        default="host",
        choices=["host", "gpu"],
        help="pci:// and emu://: where the data lives (gpu is refused with the reason: no DMA importer)",
    )
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
        ("poll / occupancy", f"{rec.get('poll')} / {(rec.get('occupancy') or {}).get('used_pct')} % used"),
    ]
    if rec.get("emulator_counters"):
        em = rec["emulator_counters"]
        rows.append(
            (
                "emulator",
                f"busiest warp {em.get('busy_max', 0):.0%} busy, headroom {rec.get('emulator_headroom') or 0:.1f}x"
                + (" (LIMITED: the emulator set the rate)" if rec.get("emulator_limited") else ""),
            )
        )
    if "verify_errors" in rec:
        rows.append(("verify errors", str(rec["verify_errors"])))
    if "checks" in rec:  # nvmelab.results.checks: a failed one keeps the record out of the figures
        bad = [f"{k} ({c['detail']})" for k, c in rec["checks"].items() if c.get("ok") is False]
        rows.append(("self-checks", "all passed" if not bad else "FAILED: " + "; ".join(bad)))
    bd = rec.get("breakdown") or {}
    if bd.get("samples"):
        rows.append(
            (
                f"breakdown p50 (1 in {bd['sample_every']})",
                ", ".join(
                    f"{p} {bd[p + '_ns']['p50'] / 1000:.2f} us"
                    for p in ("submit", "doorbell", "device", "poll", "release")
                ),
            )
        )
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def run(args: argparse.Namespace) -> int:
    from ..engines import gpu
    from ..results.records import append_records, check_path

    if args.rounds and args.rounds < 0:
        raise UsageError(f"--rounds {args.rounds}: must be >= 0")
    if args.json and args.json != "-":
        check_path(args.json)  # a link or a FIFO is refused before the run, not after it
    # No GPU, a lost completion (TimeoutError), a CUDA failure: one line via nvmelab.cli.main.
    table = {prm["name"]: getattr(args, prm["name"]) for prm in gpu.params()}
    if not table["ndevs"]:
        table["ndevs"] = None  # the target's devices
    rec = gpu.run_cuda(
        target=args.target,
        study=args.study,
        repetition=args.repetition,
        payload=args.payload,
        **table,
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
