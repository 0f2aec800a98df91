# SPDX-License-Identifier: BSD-3-Clause
"""Run the benchmarks: python -m tests.bench [--gpu] [--only NAME ...] [--out DIR] [--list]."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import pkgutil
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "data" / "results" / "bench"
log = logging.getLogger("tests.bench")


def discover(gpu: bool) -> dict[str, object]:
    import tests.bench as pkg

    mods = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.name.startswith("bench_"):
            continue
        mod = importlib.import_module(f"tests.bench.{info.name}")
        # a CPU bench with a GPU part (run_gpu) is also one of the GPU benches: --gpu runs that part
        if bool(getattr(mod, "GPU", False)) == gpu or (gpu and hasattr(mod, "run_gpu")):
            mods[info.name[len("bench_") :]] = mod
    return mods


def _write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    ap.add_argument("--gpu", action="store_true", help="run the GPU benchmarks instead of the CPU ones")
    ap.add_argument("--only", nargs="*", default=None, help="benchmark names (bench_NAME.py) to run")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory (a <host>/ folder is made in it)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    mods = discover(args.gpu)
    if args.list:
        for name, mod in mods.items():
            print(f"{name:24s} {(mod.__doc__ or '').strip().splitlines()[0] if mod.__doc__ else ''}")
        return 0
    if args.only:
        unknown = [n for n in args.only if n not in mods]
        if unknown:
            print(f"unknown benchmark(s): {', '.join(unknown)} (known: {', '.join(mods)})", file=sys.stderr)
            return 2
        mods = {n: mods[n] for n in args.only}
    if not mods:
        print("no benchmarks selected", file=sys.stderr)
        return 0
    from nvmelab.host import provenance
    from nvmelab.studies.paths import host_id

    outdir = args.out / host_id()  # $NVMELAB_HOST_ID (a lease names its GPU) or the hostname, as the records
    failed = 0
    summary = {}
    for name, mod in mods.items():
        log.info("bench %s ...", name)
        t0 = time.monotonic()
        try:
            result = mod.run_gpu(outdir) if args.gpu and hasattr(mod, "run_gpu") else mod.run(outdir)
        except KeyboardInterrupt:
            print("interrupted; results written so far are kept", file=sys.stderr)
            return 130
        except Exception as exc:  # one failing bench does not lose the others
            failed += 1
            log.error("bench %s failed: %s", name, exc)
            result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        result = dict(result)
        result.setdefault("bench", name)
        result["elapsed_s"] = round(time.monotonic() - t0, 2)
        result["provenance"] = provenance.capture()
        path = outdir / f"{name}.json"
        _write_json(path, result)
        summary[name] = {k: result[k] for k in ("goal", "met") if k in result}
        print(f"{name}: {json.dumps(summary[name], default=str)} -> {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
