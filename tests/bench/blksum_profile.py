# SPDX-License-Identifier: BSD-3-Clause
"""Where nvmelab-blksum's time goes: perf samples of whole runs, sorted into hash, zero detection, buffer
zeroing, copies, page-cache lookup, I/O submission, thread hand-offs, the NBD server and the rest.

Used by bench_blksum (make bench) and on its own: python -m tests.bench.blksum_profile [OUT.json].
Samples are CPU time (perf record's cpu-clock at PERF_FREQ Hz, children followed, so the qemu-nbd a run
starts is counted, as its own part: the server is part of the NBD path's cost, not background), so the
shares are a split of the CPU the run used, not of its wall time; they depend little on other load on
the host. Without perf (linux-perf) the profile is skipped with the reason.

The NBD path is also profiled side by side ("nbd_paths"): nvmelab-blksum now, nvmelab-blksum as it was
at BEFORE_REV (the revision before the NBD path was optimised, built here from git history against this
build's engine library; skipped with the reason where the history or libnbd's headers are missing), and
the original's NBD build, on the same dense image, each as a whole process through a qemu-nbd it starts
itself: per tool, CPU seconds (the tool and its qemu-nbd), voluntary context switches and wall time
(medians of NBD_ROUNDS interleaved runs), and the perf split of one run between the client and the
server and into the parts above."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

PERF_FREQ = 2000
#: (category, test on (command, shared object, symbol)); the first that matches takes the sample.
CATEGORIES: list[tuple[str, Any]] = [
    ("NBD server (qemu-nbd)", lambda c, d, s: c.startswith("qemu-nbd") or c.startswith("qemu")),
    ("hash (OpenSSL)", lambda c, d, s: "libcrypto" in d),
    # libnbd zeroes every read buffer before the read unless told not to (nbd_set_pread_initialize)
    ("buffer zeroing (memset)", lambda c, d, s: "memset" in s and "libc" in d),
    # the hash threads' own loop (hash.c): is_zero() is inlined into blksum_hash_blocks()
    (
        "zero detection (hash threads' own code)",
        lambda c, d, s: (
            d.startswith("nvmelab-blksum")
            and s in ("blksum_hash_blocks", "is_zero", "blksum_worker_main", "hash_chunk", "worker_main")
        ),
    ),
    (
        "copies into the buffers",
        lambda c, d, s: re.search(r"copy_to_iter|copy_user|copyout|rep_movs|memcpy|skb_copy", s) is not None,
    ),
    (
        "page-cache lookup",
        lambda c, d, s: d == "[kernel.kallsyms]" and re.search(r"filemap|folio|workingset|xas_|pagecache", s),
    ),
    (
        "thread hand-offs (locks, wake-ups, scheduling)",
        lambda c, d, s: re.search(r"futex|pthread_|sched|switch|wake|_raw_spin|__lll", s) is not None,
    ),
    (
        "I/O submission (system calls, libnbd, sockets)",
        lambda c, d, s: (
            "libnbd" in d
            or (d == "[kernel.kallsyms]" and re.search(r"syscall|sys_|vfs_|read|sock|unix|tcp|skb|poll|entry", s))
        ),
    ),
    ("other", lambda c, d, s: True),
]
LINE = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+(\S+)\s+\[[.k]\]\s+(.*?)\s*$")


def categorise(report: str) -> dict[str, float]:
    """perf report --sort comm,dso,sym text -> percent of samples per category."""
    out = {name: 0.0 for name, _ in CATEGORIES}
    for line in report.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        pct, comm, dso, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        for name, test in CATEGORIES:
            if test(comm, dso, sym):
                out[name] += pct
                break
    return {k: round(v, 2) for k, v in out.items()}


def client_share(report: str) -> float:
    """perf report --sort comm,dso,sym text -> percent of samples outside the NBD server."""
    return round(
        sum(float(m.group(1)) for m in map(LINE.match, report.splitlines()) if m and not m.group(2).startswith("qemu")),
        2,
    )


def profile_run(argv: list[str]) -> dict[str, Any]:
    """perf record of one run; the categorised split of its samples."""
    with tempfile.TemporaryDirectory(prefix="blksum-perf-") as tmp:
        data = Path(tmp) / "perf.data"
        subprocess.run(
            ["perf", "record", "-q", "-F", str(PERF_FREQ), "-o", str(data), "--", *argv],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        rep = subprocess.run(
            ["perf", "report", "-i", str(data), "--no-children", "--sort", "comm,dso,sym", "--stdio", "-q"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    return {"argv": argv, "shares_pct": categorise(rep), "client_pct": client_share(rep)}


#: The revision before the last round of work on the NBD path. The first round (from 9824fdd: libnbd's
#: buffer zeroing, qemu-nbd's stop) and the second (from f985703: hash threads sharing a chunk, the reader
#: woken by the hash threads, reads on the wire to our own qemu-nbd capped, qemu-nbd started before libnbd
#: is loaded) are described in docs/lab-record.md (checksum study); the third (from c0affc3: the reader hashing while it has
#: nothing to read, aio=io_uring for a raw image) is measured against this revision.
BEFORE_REV = "c0affc3"
NBD_ROUNDS = 3
#: (digest, hash threads, queue depth) of the side-by-side NBD profile (sha256 -t 2 Q1 was the worst
#: configuration of the second round)
NBD_CONFIGS = (("null", 1, 1), ("null", 1, 16), ("sha256", 1, 16), ("sha256", 2, 1), ("sha256", 2, 16))


def build_before(rev: str, workdir: Path) -> tuple[str | None, str]:
    """nvmelab-blksum as its sources were at git revision rev, compiled against this build's engine and
    driver libraries (the same compiler, -O2, libnbd loaded as at rev); (path, how) or (None, why not)."""
    from ._native_bench import LIBENGINE, LIBNVME, ROOT

    if not (LIBENGINE.exists() and LIBNVME.exists()):
        return None, f"{LIBENGINE} is missing (make build)"
    src = workdir / f"rev-{rev}"
    src.mkdir(parents=True, exist_ok=True)
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src/blksum"], capture_output=True)
    if arch.returncode != 0:
        return None, f"git archive {rev}: {arch.stderr.decode(errors='replace').strip()[:200]}"
    subprocess.run(["tar", "-x", "-C", str(src)], input=arch.stdout, check=True)
    nbd = subprocess.run(["pkg-config", "--cflags", "libnbd"], capture_output=True, text=True)
    if nbd.returncode != 0:
        return None, "libnbd's headers not found by pkg-config (libnbd-dev)"
    exe = workdir / f"nvmelab-blksum-{rev}"
    sources = sorted(str(f) for f in (src / "src" / "blksum").glob("*.c"))
    cmd = [os.environ.get("CC", "cc"), "-O2", "-std=gnu11", "-D_GNU_SOURCE", "-DNVMELAB_HAVE_NBD=1"]
    cmd += [f"-I{src / 'src'}", f"-I{ROOT / 'src'}", *nbd.stdout.split(), *sources, str(LIBENGINE), str(LIBNVME)]
    cmd += ["-lcrypto", "-lpthread", "-ldl", "-lm", "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"building nvmelab-blksum at {rev}: {p.stderr.strip()[:300]}"
    return str(exe), f"src/blksum at {rev}, built against this build's engine library"


def nbd_paths(tools: dict[str, list[str]], image: Path) -> list[dict[str, Any]]:
    """The side-by-side NBD profile (module doc): one row per tool and configuration."""
    from .bench_blksum import _run

    rows = []
    for digest, threads, qd in NBD_CONFIGS:
        args = ["-c", "-d", digest, "-t", str(threads), "--queue-depth", str(qd), str(image)]
        got: dict[str, dict[str, list]] = {name: {"wall_s": [], "cpu_s": [], "csw": []} for name in tools}
        digests = set()
        for r in range(NBD_ROUNDS):
            for name, argv in list(tools.items())[:: -1 if r % 2 else 1]:
                wall, out, cpu, csw = _run([*argv, *args])
                got[name]["wall_s"].append(wall)
                got[name]["cpu_s"].append(cpu)
                got[name]["csw"].append(csw)
                digests.add(out.split()[0] if out.split()[1:] else "")
        if len(digests) != 1:
            raise RuntimeError(f"NBD profile: the tools' {digest} digests differ: {digests}")
        for name, argv in tools.items():
            pr = profile_run([*argv, *args])
            med = {k: statistics.median(v) for k, v in got[name].items()}
            rows.append(
                {
                    "tool": name,
                    "digest": digest,
                    "threads": threads,
                    "queue_depth": qd,
                    **{f"{k}_median": v for k, v in med.items()},
                    **{f"{k}_rounds": v for k, v in got[name].items()},
                    "client_pct": pr["client_pct"],
                    "shares_pct": pr["shares_pct"],
                    "argv": pr["argv"],
                }
            )
    return rows


def profile(
    ours: str, dense: Path, nbd: bool, sparse: Path | None = None, original_nbd: str | None = None
) -> dict[str, Any]:
    """The split for dense-image runs (file mode; NBD mode when nbd): sha256 and null, one hash thread
    and two, queue depth 16; and sha256 on the sparse image (written zeros: zero detection) when given."""
    if shutil.which("perf") is None:
        return {"skipped": "perf not on PATH (linux-perf)"}
    runs = []
    for mode in ("file", "nbd") if nbd else ("file",):
        for digest in ("sha256", "null"):
            for threads in (1, 2):
                argv = [ours, *(["--mode", "nbd"] if mode == "nbd" else []), "-d", digest, "-t", str(threads)]
                argv += ["--queue-depth", "16", str(dense)]
                r = profile_run(argv)
                r.update(image="dense", mode=mode, digest=digest, threads=threads, queue_depth=16)
                runs.append(r)
    if sparse is not None:
        r = profile_run([ours, "-d", "sha256", "-t", "1", "--queue-depth", "16", str(sparse)])
        r.update(image="sparse", mode="file", digest="sha256", threads=1, queue_depth=16)
        runs.append(r)
    out = {"perf_freq_hz": PERF_FREQ, "image_bytes": dense.stat().st_size, "host": os.uname().nodename, "runs": runs}
    if nbd:
        tools = {"ours": [ours, "--mode", "nbd"]}
        with tempfile.TemporaryDirectory(prefix="blksum-before-") as tmp:
            before, how = build_before(BEFORE_REV, Path(tmp))
            out["before"] = {"rev": BEFORE_REV, "how": how}
            if before:
                tools["ours_before"] = [before, "--mode", "nbd"]
            if original_nbd:
                tools["original"] = [original_nbd]
            out["nbd_paths"] = nbd_paths(tools, dense)
    return out


if __name__ == "__main__":
    import sys

    from nvmelab.engines import blksum
    from nvmelab.host import cpus

    from .bench_blksum import HOST_WATCH_S, _children_cpu_s, _host_report

    before_pct = cpus.host_busy(HOST_WATCH_S)
    host0, own0, t0 = cpus.host_cpu_times(), _children_cpu_s(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="blksum-profile-", dir=os.environ.get("NVMELAB_SCRATCH")) as tmp:
        img = Path(tmp) / "dense.raw"
        blksum.make_image(img, 256 << 20, pattern=(("d", 64),))
        sparse = Path(tmp) / "sparse.raw"
        blksum.make_image(sparse, 256 << 20)
        subprocess.run(["cat", str(img), str(sparse)], stdout=subprocess.DEVNULL, check=True)
        ok, _ = blksum.have_nbd()
        from .bench_blksum import find_originals

        have = ok and shutil.which("qemu-nbd") is not None
        res = profile(blksum.native_command(), img, have, sparse, find_originals()["nbd"])
    res["host_load"] = _host_report(before_pct, host0, own0, t0)
    text = json.dumps(res, indent=2)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text + "\n")
    print(text)
