# SPDX-License-Identifier: BSD-3-Clause
"""Benchmark: nvmelab-blksum side by side with the original blkhash `blksum`, every seed configuration.

Configurations (seed 002's): dense and sparse images x null and sha256 x threads 1 and 2 x queue depths
(NVMELAB_BENCH_BLKSUM_QDS, default the seed's 1,2,4,8,16,32) x file and NBD modes, plus each tool's
defaults (no -t, no --queue-depth). Every command line carries -c, as the seed's do: the original then
reads through the page cache in NBD mode too (without it, its qemu-nbd reads with O_DIRECT and the
comparison measures the disk; nvmelab-blksum always reads through the page cache and accepts -c). In file
mode nvmelab reads the raw file, the original its pread build (or its NBD build when only that one
exists, said in the result); in NBD mode each tool serves the image with a qemu-nbd it starts itself
(`nvmelab-blksum --mode nbd`, the original's NBD build). Both are timed as whole processes (start
included), in interleaved rounds (A B, then B A), the image in the page cache; digests must agree.
Per configuration: every round's wall time, CPU time (user + system, the qemu-nbd a run starts
included) and voluntary context switches, the medians, the ratio ours/original of the wall-time
medians (and of the CPU medians), and whether the goal is met (<= 1.0 everywhere, <= 0.67 at the
defaults) or by how much it is missed. Also start-up (a 64 KiB file, median of 15 interleaved runs) and
peak memory (/usr/bin/time's maximum resident set size) at the same threads and queue depth.

The host: the rest of the host's CPU use (all CPU time less this benchmark's own children) is measured
over the whole run and written to the result ("host"); above the study runner's quiet limit the result
says that its wall-time ratios are no verdict on the goals ("quiet": false). Make it on a quiet host:
`make bench BENCH=blksum`.

The original: BLKSUM_ORIGINAL (an NBD build, or any blksum) and BLKSUM_ORIGINAL_PREAD (a -Dnbd=disabled
build), paths the user gives (the project builds no peer tool), else a `blksum` on PATH. Without any, only
nvmelab is measured and the result says how to provide one. Nothing here is a stored figure.

Rounds: 3 in file mode, 9 in NBD mode: an NBD run's wall time spreads more (two processes on the host's
CPUs: at 3 rounds on the quiet host a configuration's paired ratios ranged as widely as 1.03-1.50, so a
median of 3 could not say whether it met 1.0x); 9 rounds keep `make bench`'s blksum leg near 5 minutes.

Environment: NVMELAB_BENCH_BLKSUM_MIB (image size, default 256), NVMELAB_BENCH_BLKSUM_ROUNDS (file mode,
default 3), NVMELAB_BENCH_BLKSUM_NBD_ROUNDS (NBD mode, default 9),
NVMELAB_BENCH_BLKSUM_ONLY (a Python regular expression: only the configurations whose label it matches,
searched, e.g. 'nbd .*(defaults|sha256 -t 2 --queue-depth (1|2|4)$)'; labels read "<mode> <image> <digest>
defaults" or "<mode> <image> <digest> -t N --queue-depth N"). A filtered run is for side-by-side checks
of a few configurations: it skips start-up, memory and the profile (blksum_profile.json is not written)
and says "filtered" in the result; `make bench` runs them all.
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
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
DEFAULT_NBD_ROUNDS = 9  # NBD wall times spread more: see the module's doc
DEFAULT_QDS = (1, 2, 4, 8, 16, 32)
THREADS = (1, 2)
DIGESTS = ("null", "sha256")
GOAL_ALL = 1.0
GOAL_DEFAULTS = 0.67
STARTUP_RUNS = 15
HOST_WATCH_S = 2.0  # seconds the host is watched before the benchmark starts
HOW_TO = (
    "set BLKSUM_ORIGINAL=/path/to/blksum (and BLKSUM_ORIGINAL_PREAD for a -Dnbd=disabled build): builds of "
    "blkhash (https://gitlab.com/nirs/blkhash) made by you from its own sources"
)


def _exe(p: str | os.PathLike | None) -> str | None:
    return str(p) if p and os.path.isfile(p) and os.access(p, os.X_OK) else None


def find_originals() -> dict[str, Any]:
    """{'nbd': path|None, 'pread': path|None, 'how': text}: the original builds this run can use."""
    nbd = _exe(os.environ.get("BLKSUM_ORIGINAL"))
    pread = _exe(os.environ.get("BLKSUM_ORIGINAL_PREAD"))
    how = "environment (BLKSUM_ORIGINAL / BLKSUM_ORIGINAL_PREAD)"
    if not nbd and not pread and shutil.which("blksum"):
        nbd, how = shutil.which("blksum"), "on PATH (assumed an NBD build, as distributions ship it)"
    return {"nbd": nbd, "pread": pread, "how": how if (nbd or pread) else "absent: " + HOW_TO}


def _run(argv: list[str]) -> tuple[float, str, float, int]:
    """Wall seconds, stdout, CPU seconds (user + system of the process and the children it reaped, e.g.
    its qemu-nbd) and voluntary context switches of one run."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, msg = out.read().decode().strip(), err.read().decode(errors="replace").strip()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}): {msg[:300]}")
    return dt, text, ru.ru_utime + ru.ru_stime, ru.ru_nvcsw


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
    a = ["-c", "-d", digest]
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
    from nvmelab.host import cpus

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    size = int(os.environ.get("NVMELAB_BENCH_BLKSUM_MIB", DEFAULT_MIB)) * MIB
    rounds = {
        "file": int(os.environ.get("NVMELAB_BENCH_BLKSUM_ROUNDS", DEFAULT_ROUNDS)),
        "nbd": int(os.environ.get("NVMELAB_BENCH_BLKSUM_NBD_ROUNDS", DEFAULT_NBD_ROUNDS)),
    }
    qds = tuple(int(q) for q in os.environ.get("NVMELAB_BENCH_BLKSUM_QDS", ",".join(map(str, DEFAULT_QDS))).split(","))
    only = os.environ.get("NVMELAB_BENCH_BLKSUM_ONLY") or None
    try:
        only_re = re.compile(only) if only else None
    except re.error as e:
        raise ValueError(f"NVMELAB_BENCH_BLKSUM_ONLY={only!r}: not a regular expression ({e})") from None
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
    result["notes"].append(
        f"rounds: {rounds['file']} in file mode, {rounds['nbd']} in NBD mode (NBD wall times spread more: two "
        "processes share the CPUs; at 3 rounds a configuration's paired ratios ranged as widely as 1.03-1.50)"
    )
    if only:
        result["filtered"] = only
        result["notes"].append(f"filtered (NVMELAB_BENCH_BLKSUM_ONLY={only!r}): no start-up, memory or profile")
    before_pct = cpus.host_busy(HOST_WATCH_S)
    host0, own0, t0 = cpus.host_cpu_times(), _children_cpu_s(), time.monotonic()
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
        if not only:
            result["startup"] = _startup(ours, file_orig, small)
        configs = []
        for mode in ("file", "nbd") if nbd_ok else ("file",):
            their = file_orig if mode == "file" else orig["nbd"]
            for image in imgs:
                for digest in DIGESTS:
                    for t, q in [(None, None)] + [(t, q) for t in THREADS for q in qds]:
                        c = dict(mode=mode, image=image, digest=digest, threads=t, queue_depth=q, their=their)
                        if only_re is None or only_re.search(_label(c)):
                            configs.append(c)
        if not configs:
            raise ValueError(f"NVMELAB_BENCH_BLKSUM_ONLY={only!r} matches no configuration")
        for c in configs:
            for who in ("ours", "original"):
                c[f"{who}_s"], c[f"{who}_cpu_s"], c[f"{who}_csw"] = [], [], []
        log.info(
            "bench blksum: %d configurations, %d rounds in file mode and %d in NBD mode, images of %d MiB (%s)",
            len(configs),
            rounds["file"],
            rounds["nbd"],
            size // MIB,
            "ours and the original" if file_orig or orig["nbd"] else "ours only",
        )
        nrounds = max(rounds[c["mode"]] for c in configs)
        for r in range(nrounds):
            for c in configs:
                if r >= rounds[c["mode"]]:
                    continue
                a = _args(c["digest"], c["threads"], c["queue_depth"])
                mine = [ours, *(["--mode", "nbd"] if c["mode"] == "nbd" else []), *a, str(imgs[c["image"]])]
                pair = [("ours", mine)]
                if c["their"]:
                    pair.append(("original", [c["their"], *a, str(imgs[c["image"]])]))
                if r % 2:
                    pair.reverse()
                outs = {}
                for who, argv in pair:
                    dt, out, cpu, csw = _run(argv)
                    c[f"{who}_s"].append(dt)
                    c[f"{who}_cpu_s"].append(cpu)
                    c[f"{who}_csw"].append(csw)
                    outs[who] = out.split()[0] if out.split()[1:] else ""
                if len(set(outs.values())) != 1:
                    raise RuntimeError(f"digests differ in {c['mode']} {c['image']} {c['digest']}: {outs}")
            log.info("bench blksum: round %d/%d done", r + 1, nrounds)
        for c in configs:
            for who in ("ours", "original"):
                if c[f"{who}_s"]:
                    c[f"{who}_median_s"] = statistics.median(c[f"{who}_s"])
                    c[f"{who}_cpu_median_s"] = statistics.median(c[f"{who}_cpu_s"])
                    c[f"{who}_csw_median"] = statistics.median(c[f"{who}_csw"])
            if c["original_s"]:
                c["ratio"] = c["ours_median_s"] / c["original_median_s"]
                c["cpu_ratio"] = c["ours_cpu_median_s"] / c["original_cpu_median_s"]
                c["paired_ratios"] = [a / b for a, b in zip(c["ours_s"], c["original_s"])]
                c.update(_judge(c["ratio"], c["threads"] is None))
            c["defaults"] = c["threads"] is None
            c["original"] = c.pop("their")
        result["configs"] = configs
        if not only:
            result["memory"] = _memory(ours, orig, imgs, nbd_ok)
            from .blksum_profile import profile

            # where the CPU time goes (perf), also kept on its own for the chapter's methods section
            result["profile"] = profile(ours, imgs["dense"], nbd_ok, imgs["sparse"], orig["nbd"])
    result["host"] = _host_report(before_pct, host0, own0, t0)
    result["quiet"] = result["host"]["quiet"]
    if not only:
        # the profile on its own, for the chapter's methods section, with the host it was measured on
        profile_json = {**result["profile"], "host_load": result["host"]}
        (outdir / "blksum_profile.json").write_text(json.dumps(profile_json, indent=2) + "\n")
    if not result["quiet"]:
        result["notes"].append(
            "MEASURED ON A BUSY HOST (see host): the wall-time ratios and their met/missed are no verdict on "
            "the goals; CPU times and context switches are less affected. Run `make bench BENCH=blksum` on a "
            "quiet host."
        )
    judged = [c for c in result["configs"] if "ratio" in c]
    result["summary"] = {
        "configs": len(result["configs"]),
        "judged": len(judged),
        "met": sum(c["met"] for c in judged),
        "worst": max(judged, key=lambda c: c["ratio"] / c["goal"], default=None),
        "by_mode": {
            m: {
                "judged": len(js),
                "met": sum(c["met"] for c in js),
                "ratio_min": min(c["ratio"] for c in js),
                "ratio_max": max(c["ratio"] for c in js),
                "missed": [_label(c) + f": {c['ratio']:.2f}x, goal {c['goal']}" for c in js if not c["met"]],
            }
            for m in ("file", "nbd")
            if (js := [c for c in judged if c["mode"] == m])
        },
    }
    (outdir / "blksum.json").write_text(json.dumps(result, indent=2, default=str))
    log.info("bench blksum: %d of %d judged configurations meet the goal", result["summary"]["met"], len(judged))
    return result


def _label(c: dict[str, Any]) -> str:
    if c["threads"] is None:
        return f"{c['mode']} {c['image']} {c['digest']} defaults"
    return f"{c['mode']} {c['image']} {c['digest']} -t {c['threads']} --queue-depth {c['queue_depth']}"


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _host_report(before_pct: float | None, host0: Any, own0: float, t0: float) -> dict[str, Any]:
    """What the rest of the host used while the benchmark ran: the whole host's CPU use less this
    benchmark's own (its reaped children: the tools, their qemu-nbd, perf), in percent of one CPU; quiet
    when at most the study runner's limit, both before (a short watch) and during."""
    from nvmelab.host import cpus
    from nvmelab.studies.runner import QUIET_MAX_PERCENT

    wall = time.monotonic() - t0
    whole = cpus.host_usage(host0, cpus.host_cpu_times())
    own = 100.0 * (_children_cpu_s() - own0) / wall if wall > 0 else None
    rest = None if whole is None or own is None else round(max(whole - own, 0.0), 1)
    quiet = all(v is None or v <= QUIET_MAX_PERCENT for v in (before_pct, rest))
    return {
        "before_pct": before_pct,
        "rest_pct": rest,
        "whole_pct": whole,
        "own_pct": None if own is None else round(own, 1),
        "limit_pct": QUIET_MAX_PERCENT,
        "quiet": quiet,
        "loadavg": os.getloadavg(),
    }


def _startup(ours: str, theirs: str | None, small: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"file_bytes": small.stat().st_size, "runs": STARTUP_RUNS, "ours_s": [], "original_s": []}
    for i in range(STARTUP_RUNS):
        pair = [("ours", ours)] + ([("original", theirs)] if theirs else [])
        for who, exe in pair if i % 2 == 0 else reversed(pair):
            out[f"{who}_s"].append(_run([exe, "-c", str(small)])[0])
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
