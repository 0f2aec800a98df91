# SPDX-License-Identifier: BSD-3-Clause
"""One-off migration (issue 14): blksum_qdepth and vram_cache records to the sweep runner's keys.

Before issue 14 the two studies had their own sweep code (blksum_study.py, tier/study.py) with
their own resume keys. Now they are specs run by the runner, which resumes on ``run_key`` (the
run's parameters as JSON + "#" + repetition) and lists a run's ``sweeps``. This script gives each
committed record of the ``standard`` preset the key of the run of today's plan it is, and nothing
else: every measured field stays as it was. vram_cache records with ``status`` "not run" (the
GPU-memory cache on a host without a GPU) carried no measurement; they are dropped, since the
runner now skips such runs with the reason instead of recording them.

Run once from the repository root (idempotent: a record that already has the new key is kept):
    PYTHONPATH=src python data/results/migrations/i14_study_specs.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nvmelab.results import records
from nvmelab.studies import load_spec

ROOT = Path(__file__).resolve().parents[3]


def _index(study: str, preset: str, fields: tuple[str, ...]) -> dict:
    plan = load_spec(study).plan(preset)
    out = {}
    for run in plan.runs:
        key = tuple(run.params.get(f) for f in fields) + (run.repetition,)
        if key in out:
            raise SystemExit(f"{study}: two runs share {key}")
        out[key] = run
    return out


def blksum(path: Path) -> list[dict]:
    fields = ("tool", "digest", "backend", "ncpus", "qdepth", "image_mib")
    runs = _index("blksum_qdepth", "standard", fields)
    out = []
    for rec in records.load_records(path):
        threads = rec["ncpus"]
        online = (rec.get("provenance") or {}).get("ncpus_online")
        ncpus = "all" if threads == online else threads
        backend = rec["backend"] if rec["tool"] != "blksum" else "psync"
        key = (
            rec["tool"],
            rec["digest"],
            backend,
            ncpus,
            rec["qdepth"],
            rec["image_bytes"] // (1 << 20),
            rec["repetition"],
        )
        run = runs.get(key)
        if run is None:
            raise SystemExit(f"{path}: no run of today's standard plan for {key}")
        out.append(dict(rec, run_key=run.key, sweeps=list(run.sweeps), preset="standard"))
    return out


def vram(path: Path) -> list[dict]:
    fields = (
        "rw",
        "fraction",
        "ndevs",
        "cache",
        "policy",
        "nqubits",
        "depth",
        "accesses",
        "page",
        "chunk",
        "qdepth",
        "seed",
    )
    runs = _index("vram_cache", "standard", fields)
    out = []
    for rec in records.load_records(path):
        if rec.get("status") != "ok":
            continue
        spec_depth = 6 if rec["rw"] == "random" else rec["depth"]  # the plan carries both knobs;
        spec_acc = 2048 if rec["rw"] == "circuit" else rec["accesses"]  # a record names the one it used
        key = (
            rec["rw"],
            rec["fraction"],
            rec["ndevs"],
            rec["cache"],
            rec["policy"],
            rec["nqubits"],
            spec_depth,
            spec_acc,
            rec["page"],
            65536 if rec["layout"] == "single" else rec["chunk"],
            rec["qdepth"],
            rec["seed"],
            rec["repetition"],
        )
        run = runs.get(key)
        if run is None:
            raise SystemExit(f"{path}: no run of today's standard plan for {key}")
        out.append(dict(rec, run_key=run.key, sweeps=list(run.sweeps)))
    return out


def main() -> int:
    for study, fn in (("blksum_qdepth", blksum), ("vram_cache", vram)):
        path = ROOT / "data" / "results" / study / "vm" / "standard.jsonl"
        new = fn(path)
        keys = [r["run_key"] for r in new]
        if len(set(keys)) != len(keys):
            raise SystemExit(f"{path}: two records map to one run")
        tmp = path.with_name(".tmp-migrate.jsonl")
        tmp.write_text("".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in new))
        for r in records.load_records(tmp):
            records.validate(r, str(tmp))
        tmp.replace(path)
        print(f"{path.relative_to(ROOT)}: {len(new)} records keyed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
