# SPDX-License-Identifier: BSD-3-Clause
"""Benchmark: appending a record costs the same at record 10 as at record 100,000.

nvmelab.results.records.append_records appends one line and fsyncs it under an flock; it must
not read or rewrite what the file holds. Three files are filled with 10, 1,000 and 100,000 copies
of a typical sweep record (about 1.3 KB each), then REPS single-record appends are made to them
in turn (interleaved, so that a busy moment of the host hits every size alike). Reported per
size: the median and 90th percentile wall time of one append (fsync included) and the bytes the
process read and wrote per append (/proc/self/io rchar, wchar: exact, where timings are noisy).
Goal: the median at 100,000 records is within GOAL_RATIO of the median at 10, and the bytes
written per append do not grow with the file.

Environment: NVMELAB_BENCH_RECORDS_REPS (default 40); the files live in $NVMELAB_SCRATCH or the
temporary directory (a disk, not /dev/shm: fsync is part of the cost).
"""

from __future__ import annotations

import copy
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

#: File sizes (records already in the file) compared.
SIZES = (10, 1_000, 100_000)
DEFAULT_REPS = 40
#: Median append time at the largest size over the median at the smallest, at most (a rewrite of the
#: file, as before, costs ~10,000x more at 100,000 records than at 10; fsync on a shared host is noisy).
GOAL_RATIO = 2.0


def _record() -> dict[str, Any]:
    from nvmelab.results.records import engine_record

    rec = engine_record(
        study="bench_records",
        tool="nvmelab",
        target="emu://?profile=null",
        backend="nvmelab-emu",
        rw="randread",
        iosize=4096,
        qdepth=32,
        runtime_s=1.0,
        iops=123456.0,
        mibs=482.25,
        provenance={
            "git_commit": "0" * 40,
            "host": "bench",
            "cpu_model": "bench cpu",
            "kernel": "6.1",
            "packages": {"numpy": "2", "pandas": "2"},
            "utc": "2026-01-01T00:00:00Z",
            "profile": "null",
            "scale": 1.0,
        },
    )
    rec.update(
        lat_ns={"p50": 1000, "p99": 2000, "p999": 3000, "max": 4000},
        cpu_usage=99.5,
        cpu_freqs=[2400000] * 8,
        run_key="0" * 16,
        preset="standard",
        sweeps=["qdepth"],
        host_cpu_usage=100.2,
    )
    return rec


def _io() -> tuple[int, int]:
    try:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
        return int(fields["rchar"]), int(fields["wchar"])
    except (OSError, KeyError, ValueError):
        return 0, 0


def run(outdir: str | os.PathLike) -> dict[str, Any]:
    from nvmelab.results import records

    reps = int(os.environ.get("NVMELAB_BENCH_RECORDS_REPS", DEFAULT_REPS))
    rec = _record()
    line = (records.dumps(rec) + "\n").encode()
    times: dict[int, list[float]] = {n: [] for n in SIZES}
    io: dict[int, list[tuple[int, int]]] = {n: [] for n in SIZES}
    with tempfile.TemporaryDirectory(prefix="bench-records-", dir=os.environ.get("NVMELAB_SCRATCH")) as tmp:
        paths = {n: Path(tmp) / f"n{n}.jsonl" for n in SIZES}
        for n, p in paths.items():
            with open(p, "wb") as f:
                f.write(line * n)
                f.flush()
                os.fsync(f.fileno())
        for i in range(reps):
            for n, p in paths.items():
                new = copy.deepcopy(rec)
                new["repetition"] = i
                r0, w0 = _io()
                t0 = time.perf_counter()
                records.append_records(p, [new])
                times[n].append(time.perf_counter() - t0)
                r1, w1 = _io()
                io[n].append((r1 - r0, w1 - w0))
        sizes = {n: p.stat().st_size for n, p in paths.items()}
    per_size = {}
    for n in SIZES:
        t = sorted(times[n])
        per_size[str(n)] = {
            "records_before": n,
            "file_bytes_after": sizes[n],
            "median_s": statistics.median(t),
            "p90_s": t[int(0.9 * (len(t) - 1))],
            "read_bytes_per_append": statistics.median(r for r, _ in io[n]),
            "written_bytes_per_append": statistics.median(w for _, w in io[n]),
        }
    small, large = per_size[str(SIZES[0])], per_size[str(SIZES[-1])]
    ratio = large["median_s"] / small["median_s"] if small["median_s"] else None
    flat_bytes = large["written_bytes_per_append"] <= small["written_bytes_per_append"] + 1
    return {
        "name": "records_append",
        "reps": reps,
        "record_bytes": len(line),
        "sizes": per_size,
        "median_ratio_largest_to_smallest": ratio,
        "goal": f"median append at {SIZES[-1]:,} records <= {GOAL_RATIO}x the median at {SIZES[0]}, "
        "bytes written per append independent of the file size",
        "met": bool(ratio is not None and ratio <= GOAL_RATIO and flat_bytes),
    }
