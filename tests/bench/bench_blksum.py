# SPDX-License-Identifier: BSD-3-Clause
"""Benchmark: nvmelab-blksum side by side with the original blkhash `blksum`, every seed configuration.

Configurations (seed 002's): dense and sparse images x null and sha256 x threads 1 and 2 x queue depths
(NVMELAB_BENCH_BLKSUM_QDS, default 1,4,16,32) x file and NBD modes, plus each tool's defaults (no -t, no
--queue-depth). In file mode nvmelab reads the raw file, the original its pread build (or its NBD build
when only that one exists, said in the result); in NBD mode each tool serves the image with a qemu-nbd it
starts itself (`nvmelab-blksum --mode nbd`, the original's NBD build). Both are timed as whole processes
(start included), in interleaved rounds (A B, then B A), the image in the page cache; digests must agree.
Per configuration: every round's wall time, the medians, the ratio ours/original, and whether the goal
is met (<= 1.0 everywhere, <= 0.67 at the defaults) or by how much it is missed. Also start-up (a 64 KiB
file, median of 15 interleaved runs) and peak memory (/usr/bin/time's maximum resident set size) at the
same threads and queue depth.

The original: BLKSUM_ORIGINAL (an NBD build, or any blksum) and BLKSUM_ORIGINAL_PREAD (a -Dnbd=disabled
build), else build/original/{nbd,pread}/bin/blksum, else built there from BLKHASH_SRC (a blkhash source
tree) by tests/bench/build_original.sh, else a `blksum` on PATH. Without any, only nvmelab is measured
and the result says how to provide one. Nothing here is a stored figure.

Environment: NVMELAB_BENCH_BLKSUM_MIB (image size, default 256), NVMELAB_BENCH_BLKSUM_ROUNDS (default 3).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
DEFAULT_MIB = 256
DEFAULT_ROUNDS = 3
DEFAULT_QDS = (1, 4, 16, 32)
THREADS = (1, 2)
DIGESTS = ("null", "sha256")
GOAL_ALL = 1.0
GOAL_DEFAULTS = 0.67
STARTUP_RUNS = 15
HOW_TO = (
    "set BLKSUM_ORIGINAL=/path/to/blksum (and BLKSUM_ORIGINAL_PREAD for a -Dnbd=disabled build), or "
    "BLKHASH_SRC=/path/to/blkhash (git clone https://gitlab.com/nirs/blkhash) to build both into build/original"
)


def _exe(p: str | os.PathLike | None) -> str | None:
    return str(p) if p and os.path.isfile(p) and os.access(p, os.X_OK) else None


def find_originals() -> dict[str, Any]:
    """{'nbd': path|None, 'pread': path|None, 'how': text}: the original builds this run can use."""
    nbd = _exe(os.environ.get("BLKSUM_ORIGINAL"))
    pread = _exe(os.environ.get("BLKSUM_ORIGINAL_PREAD"))
    how = "environment (BLKSUM_ORIGINAL / BLKSUM_ORIGINAL_PREAD)"
    built = ROOT / "build" / "original"
    if not nbd and not pread:
        nbd, pread = _exe(built / "nbd" / "bin" / "blksum"), _exe(built / "pread" / "bin" / "blksum")
        how = f"built from source in {built}"
        if not nbd and not pread and os.environ.get("BLKHASH_SRC"):
            subprocess.run(["bash", str(ROOT / "tests/bench/build_original.sh")], cwd=ROOT, check=True)
            nbd, pread = _exe(built / "nbd" / "bin" / "blksum"), _exe(built / "pread" / "bin" / "blksum")
            how = f"built now from BLKHASH_SRC={os.environ['BLKHASH_SRC']} in {built}"
    if not nbd and not pread and shutil.which("blksum"):
        nbd, how = shutil.which("blksum"), "on PATH (assumed an NBD build, as distributions ship it)"
    return {"nbd": nbd, "pread": pread, "how": how if (nbd or pread) else "absent: " + HOW_TO}


def _run(argv: list[str]) -> tuple[float, str]:
    """Wall seconds and stdout of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}): {err.decode(errors='replace').strip()[:300]}")
    return dt, out.decode().strip()


def _peak_rss_kib(argv: list[str]) -> int | None:
    """Peak resident set of one run in KiB, as /usr/bin/time -v reports it (its %M); None without GNU
    time. (Not os.wait4 from here: a child spawned by this large Python process inherits its peak.)"""
    gnu_time = shutil.which("time", path="/usr/bin:/bin")
    if gnu_time is None:
        return None
    p = subprocess.run([gnu_time, "-f", "%M", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr.strip()[:300]}")
    return int(p.stderr.strip().splitlines()[-1])


def _args(digest: str, threads: int | None, qd: int | None) -> list[str]:
    a = ["-d", digest]
    if threads is not None:
        a += ["-t", str(threads)]
    if qd is not None:
        a += ["--queue-depth", str(qd)]
    return a


def _judge(ratio: float, defaults: bool) -> dict[str, Any]:
    goal = GOAL_DEFAULTS if defaults else GOAL_ALL
    return {"goal": goal, "met": ratio <= goal, "missed_by": None if ratio <= goal else ratio / goal - 1.0}


def run(outdir: str | os.PathLike) -> dict[str, Any]:
    from nvmelab.engines import blksum

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    size = int(os.environ.get("NVMELAB_BENCH_BLKSUM_MIB", DEFAULT_MIB)) * MIB
    rounds = int(os.environ.get("NVMELAB_BENCH_BLKSUM_ROUNDS", DEFAULT_ROUNDS))
    qds = tuple(int(q) for q in os.environ.get("NVMELAB_BENCH_BLKSUM_QDS", ",".join(map(str, DEFAULT_QDS))).split(","))
    ours = blksum.native_command()
    if ours is None:
        raise RuntimeError("nvmelab-blksum is not built (make build)")
    orig = find_originals()
    have_nbd, nbd_why = blksum.have_nbd()
    nbd_ok = have_nbd and shutil.which("qemu-nbd") is not None
    result: dict[str, Any] = {
        "name": "blksum",
        "nvmelab": ours,
        "original": orig,
        "image_bytes": size,
        "rounds": rounds,
        "cpus": os.cpu_count(),
        "timing": "whole process, wall clock; interleaved rounds, median; page cache warm",
        "goal": f"ours/original wall time <= {GOAL_ALL} in every configuration, <= {GOAL_DEFAULTS} at the defaults",
        "configs": [],
        "notes": [],
    }
    if not (orig["nbd"] or orig["pread"]):
        result["notes"].append("the original blksum is not available: only nvmelab is measured; " + HOW_TO)
    if not nbd_ok:
        result["notes"].append(
            f"NBD mode not measured: {nbd_why if not have_nbd else 'qemu-nbd not on PATH (qemu-utils)'}"
        )
    file_orig = orig["pread"] or orig["nbd"]
    if file_orig and not orig["pread"]:
        result["notes"].append("file mode compares against the original's NBD build (no pread build given)")
    with tempfile.TemporaryDirectory(prefix="bench-blksum-", dir=os.environ.get("NVMELAB_SCRATCH")) as tmp:
        imgs = {"dense": Path(tmp) / "dense.raw", "sparse": Path(tmp) / "sparse.raw"}
        blksum.make_image(imgs["dense"], size, pattern=(("d", 64),))
        blksum.make_image(imgs["sparse"], size)
        for p in imgs.values():
            subprocess.run(["cat", str(p)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        small = Path(tmp) / "small.raw"
        small.write_bytes(os.urandom(64 * 1024))
        result["startup"] = _startup(ours, file_orig, small)
        configs = []
        for mode in ("file", "nbd") if nbd_ok else ("file",):
            their = file_orig if mode == "file" else orig["nbd"]
            for image in imgs:
                for digest in DIGESTS:
                    for t, q in [(None, None)] + [(t, q) for t in THREADS for q in qds]:
                        configs.append(
                            dict(mode=mode, image=image, digest=digest, threads=t, queue_depth=q, their=their)
                        )
        for c in configs:
            c["ours_s"], c["original_s"] = [], []
        for r in range(rounds):
            for c in configs:
                a = _args(c["digest"], c["threads"], c["queue_depth"])
                mine = [ours, *(["--mode", "nbd"] if c["mode"] == "nbd" else []), *a, str(imgs[c["image"]])]
                pair = [("ours", mine)]
                if c["their"]:
                    pair.append(("original", [c["their"], *a, str(imgs[c["image"]])]))
                if r % 2:
                    pair.reverse()
                outs = {}
                for who, argv in pair:
                    dt, out = _run(argv)
                    c[f"{who}_s"].append(dt)
                    outs[who] = out.split()[0] if out.split()[1:] else ""
                if len(set(outs.values())) != 1:
                    raise RuntimeError(f"digests differ in {c['mode']} {c['image']} {c['digest']}: {outs}")
            log.info("bench blksum: round %d/%d done", r + 1, rounds)
        for c in configs:
            c["ours_median_s"] = statistics.median(c["ours_s"])
            if c["original_s"]:
                c["original_median_s"] = statistics.median(c["original_s"])
                c["ratio"] = c["ours_median_s"] / c["original_median_s"]
                c.update(_judge(c["ratio"], c["threads"] is None))
            c["defaults"] = c["threads"] is None
            c["original"] = c.pop("their")
        result["configs"] = configs
        result["memory"] = _memory(ours, orig, imgs, nbd_ok)
        from .blksum_profile import profile

        # where the CPU time goes (perf), also kept on its own for the chapter's methods section
        result["profile"] = profile(ours, imgs["dense"], nbd_ok, imgs["sparse"])
        (outdir / "blksum_profile.json").write_text(json.dumps(result["profile"], indent=2) + "\n")
    judged = [c for c in result["configs"] if "ratio" in c]
    result["summary"] = {
        "configs": len(result["configs"]),
        "judged": len(judged),
        "met": sum(c["met"] for c in judged),
        "worst": max(judged, key=lambda c: c["ratio"] / c["goal"], default=None),
    }
    (outdir / "blksum.json").write_text(json.dumps(result, indent=2, default=str))
    log.info("bench blksum: %d of %d judged configurations meet the goal", result["summary"]["met"], len(judged))
    return result


def _startup(ours: str, theirs: str | None, small: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"file_bytes": small.stat().st_size, "runs": STARTUP_RUNS, "ours_s": [], "original_s": []}
    for i in range(STARTUP_RUNS):
        pair = [("ours", ours)] + ([("original", theirs)] if theirs else [])
        for who, exe in pair if i % 2 == 0 else reversed(pair):
            out[f"{who}_s"].append(_run([exe, str(small)])[0])
    out["ours_median_s"] = statistics.median(out["ours_s"])
    if theirs:
        out["original_median_s"] = statistics.median(out["original_s"])
        out["ratio"] = out["ours_median_s"] / out["original_median_s"]
        out["goal"], out["met"] = 2.0, out["ratio"] <= 2.0
    return out


def _memory(ours: str, orig: dict, imgs: dict, nbd_ok: bool) -> list[dict[str, Any]]:
    rows = []
    for mode in ("file", "nbd") if nbd_ok else ("file",):
        theirs = (orig["pread"] or orig["nbd"]) if mode == "file" else orig["nbd"]
        for t, q in ((1, 1), (2, 16), (2, 32)):
            a = _args("sha256", t, q) + [str(imgs["dense"])]
            row = {"mode": mode, "threads": t, "queue_depth": q}
            row["ours_kib"] = _peak_rss_kib([ours, *(["--mode", "nbd"] if mode == "nbd" else []), *a])
            if row["ours_kib"] is None:
                return [{"skipped": "GNU time (/usr/bin/time, Debian package time) not found"}]
            if theirs:
                row["original_kib"] = _peak_rss_kib([theirs, *a])
                row["ratio"] = row["ours_kib"] / row["original_kib"]
                row["goal"], row["met"] = 1.5, row["ratio"] <= 1.5
            rows.append(row)
    return rows


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    import sys

    res = run(sys.argv[1] if len(sys.argv) > 1 else "data/results/bench")
    print(json.dumps(res["summary"], indent=2, default=str))
