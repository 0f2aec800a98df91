# SPDX-License-Identifier: BSD-3-Clause
"""Where nvmelab-blksum's time goes: perf samples of whole runs, sorted into hash, zero detection, copies,
page-cache lookup, I/O submission, thread hand-offs, the NBD server and the rest.

Used by bench_blksum (make bench) and on its own: python -m tests.bench.blksum_profile [OUT.json].
Samples are CPU time (perf record's cpu-clock at PERF_FREQ Hz, children followed, so the qemu-nbd a run
starts is counted), so the shares are a split of the CPU the run used, not of its wall time; they
depend little on other load on the host. Without perf (linux-perf) the profile is skipped with the
reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

PERF_FREQ = 2000
#: (category, test on (command, shared object, symbol)); the first that matches takes the sample.
CATEGORIES: list[tuple[str, Any]] = [
    ("NBD server (qemu-nbd)", lambda c, d, s: c.startswith("qemu-nbd") or c.startswith("qemu")),
    ("hash (OpenSSL)", lambda c, d, s: "libcrypto" in d),
    # the hash threads' own loop: is_zero() and hash_chunk() are inlined into worker_main
    (
        "zero detection (hash threads' own code)",
        lambda c, d, s: d.startswith("nvmelab-blksum") and s in ("hash_chunk", "is_zero", "worker_main"),
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
    return {"argv": argv, "shares_pct": categorise(rep)}


def profile(ours: str, dense: Path, nbd: bool, sparse: Path | None = None) -> dict[str, Any]:
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
    return {"perf_freq_hz": PERF_FREQ, "image_bytes": dense.stat().st_size, "host": os.uname().nodename, "runs": runs}


if __name__ == "__main__":
    import sys

    from nvmelab.engines import blksum

    with tempfile.TemporaryDirectory(prefix="blksum-profile-", dir=os.environ.get("NVMELAB_SCRATCH")) as tmp:
        img = Path(tmp) / "dense.raw"
        blksum.make_image(img, 256 << 20, pattern=(("d", 64),))
        sparse = Path(tmp) / "sparse.raw"
        blksum.make_image(sparse, 256 << 20)
        subprocess.run(["cat", str(img), str(sparse)], stdout=subprocess.DEVNULL, check=True)
        ok, _ = blksum.have_nbd()
        res = profile(blksum.native_command(), img, ok and shutil.which("qemu-nbd") is not None, sparse)
    text = json.dumps(res, indent=2)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text + "\n")
    print(text)
