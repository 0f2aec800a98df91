# SPDX-License-Identifier: BSD-3-Clause
"""Shared helpers of the CPU benchmarks: build tests/bench/hotpath.c against build/dev's
libnvmelab-driver.a, run it natively (timed) and under callgrind (instruction counts split between
the driver and the emulator), and run fio with JSON output."""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
HOTPATH_SRC = Path(__file__).with_name("hotpath.c")
#: The build the benchmarks link against (NVMELAB_BENCH_BUILD: another one, e.g. of an earlier revision).
BUILD = Path(os.environ.get("NVMELAB_BENCH_BUILD", ROOT / "build" / "dev"))
LIBNVME = BUILD / "src" / "nvme" / "libnvmelab-driver.a"
LIBENGINE = BUILD / "src" / "engine" / "libnvmelab-engine.a"
ENGINE_LOOP_SRC = Path(__file__).with_name("engine_loop.c")
#: Driver entry points measured (inclusive) by the hot-path benchmark.
DRIVER_ENTRIES = ("nvme_qpair_submit", "nvme_qpair_ring", "nvme_qpair_poll")
#: Functions through which the driver enters the emulator (bar ops) and the caller's callback.
EMULATOR_ENTRIES = ("bar_write", "bar_idle")
CALLBACK = "bench_cb"
NULL_URI = "emu://?profile=null"


def _build(src: Path, libs: list[Path], exe: Path) -> Path:
    for lib in libs:
        if not lib.exists():
            raise RuntimeError(f"{lib} is missing: run `make build` first")
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O2", "-g", "-std=gnu11", "-D_GNU_SOURCE", f"-I{ROOT / 'src'}", str(src)]
    cmd += [str(lib) for lib in libs] + ["-lpthread", "-lm", "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"cannot build {src.name}: {p.stderr.strip()[:500]}")
    return exe


def build_hotpath(workdir: Path) -> Path:
    """Compile hotpath.c against the dev build's static driver library."""
    return _build(HOTPATH_SRC, [LIBNVME], workdir / "hotpath")


def build_engine_loop(workdir: Path) -> Path:
    """Compile engine_loop.c against the dev build's static engine and driver libraries."""
    return _build(ENGINE_LOOP_SRC, [LIBENGINE, LIBNVME], workdir / "engine_loop")


def build_hotpath_at(rev: str, workdir: Path) -> Path:
    """Build hotpath.c and the driver library as they were at git revision `rev`, for a side-by-side
    comparison with the working tree (same compiler, same flags, same host, interleaved runs).

    The revision's own sources are exported with `git archive` (src/, the top CMakeLists.txt, the
    headline table the emulator's calibration is generated from, and its hotpath.c), configured with
    Python, CUDA and tests off, and only the driver library target is built: whichever of the names
    it has had (`nvmelab_driver`, earlier `nvme`). Raises RuntimeError naming what failed (no git
    history in this checkout, an unknown revision, a failed build).
    """
    src = workdir / f"rev-{rev}"
    src.mkdir(parents=True, exist_ok=True)
    paths = ["src", "CMakeLists.txt", "data/reference/headline.csv", "tests/bench/hotpath.c"]
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, *paths], capture_output=True)
    if arch.returncode != 0:
        raise RuntimeError(f"git archive {rev}: {arch.stderr.decode(errors='replace').strip()[:300]}")
    subprocess.run(["tar", "-x", "-C", str(src)], input=arch.stdout, check=True)
    bdir = workdir / f"build-{rev}"
    conf = subprocess.run(
        [
            "cmake",
            "-S",
            str(src),
            "-B",
            str(bdir),
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DNVMELAB_PYTHON=OFF",
            "-DNVMELAB_CUDA=OFF",
            "-DNVMELAB_TESTS=OFF",
        ],
        capture_output=True,
        text=True,
    )
    if conf.returncode != 0:
        raise RuntimeError(f"configure {rev}: {conf.stdout[-300:]}{conf.stderr[-300:]}")
    lib = None
    for target, rel in (("nvmelab_driver", "src/nvme/libnvmelab-driver.a"), ("nvme", "src/nvme/libnvme.a")):
        b = subprocess.run(["cmake", "--build", str(bdir), "--target", target], capture_output=True, text=True)
        if b.returncode == 0 and (bdir / rel).exists():
            lib = bdir / rel
            break
    if lib is None:
        raise RuntimeError(f"build {rev}: no driver library target built")
    exe = workdir / f"hotpath-{rev}"
    cc = os.environ.get("CC", "cc")
    p = subprocess.run(
        [
            cc,
            "-O2",
            "-g",
            "-std=gnu11",
            "-D_GNU_SOURCE",
            f"-I{src / 'src'}",
            str(src / "tests/bench/hotpath.c"),
            str(lib),
            "-lpthread",
            "-lm",
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise RuntimeError(f"cannot build hotpath at {rev}: {p.stderr.strip()[:300]}")
    return exe


def run_native(exe: Path, qdepth: int, nios: int, uri: str = NULL_URI) -> dict[str, float]:
    """Run hotpath natively; wall time and the child's CPU time (user+sys)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([str(exe), uri, str(qdepth), str(nios)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ios = int(re.search(r"ios=(\d+)", p.stdout).group(1))
    return {
        "ios": ios,
        "wall_s": wall,
        "cpu_s": cpu,
        "iops_wall": ios / wall,
        "ios_per_cpu_s": ios / cpu if cpu else None,
    }


def _inclusive(annotate: str, name: str) -> int:
    total = 0
    # callgrind_annotate may list one function on several lines (one per source file, with or without
    # the "[object]" suffix): count them all.
    for m in re.finditer(rf"^\s*([\d,]+) \([^)]*\)\s+\S*:{re.escape(name)}(?: \[.*)?$", annotate, re.M):
        total += int(m.group(1).replace(",", ""))
    return total


def _require_callgrind() -> None:
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        raise RuntimeError("valgrind (callgrind) is not installed")


#: callgrind_annotate views the splits read: inclusive and self costs, and the caller tree (call counts).
INCL = ("--inclusive=yes", "--threshold=100")
EXCL = ("--threshold=100",)
CALLERS = ("--tree=caller", "--threshold=100")


def _callgrind(
    argv: list[str], toggles: tuple[str, ...], views: dict[str, tuple[str, ...]], options: tuple[str, ...] = ()
) -> tuple[int, dict[str, str]]:
    """Run argv under callgrind, collection on inside `toggles` only: the I/Os the program printed (ios=N)
    and, for each named view, callgrind_annotate's output with those options."""
    _require_callgrind()
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "cg.out"
        cmd = ["valgrind", "--tool=callgrind", *options, f"--callgrind-out-file={out}"]
        cmd += [f"--toggle-collect={t}" for t in toggles]
        p = subprocess.run([*cmd, *argv], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(
                f"callgrind{' ' + ' '.join(options) if options else ''} failed: {p.stderr.strip()[-500:]}"
            )
        ios = int(re.search(r"ios=(\d+)", p.stdout).group(1))
        out_views = {
            name: subprocess.run(
                ["callgrind_annotate", *opts, str(out)], capture_output=True, text=True, check=True
            ).stdout
            for name, opts in views.items()
        }
    return ios, out_views


def _program_total(annotate: str) -> int:
    m = re.search(r"^\s*([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", annotate, re.M)
    return int(m.group(1).replace(",", ""))


def _two_lengths(once, runtimes_ms: tuple[int, int]) -> tuple[Any, Any, int]:
    """once(runtime_ms) at both lengths and the I/Os between them (set-up and teardown cancel)."""
    a, b = once(runtimes_ms[0]), once(runtimes_ms[1])
    dios = b["ios"] - a["ios"]
    if dios <= 0:
        raise RuntimeError(f"callgrind runs of {runtimes_ms} ms did not differ in I/Os ({a['ios']}, {b['ios']})")
    return a, b, dios


def callgrind_split(exe: Path, qdepth: int, nios: int, uri: str = NULL_URI) -> dict[str, Any]:
    """Instructions inside the driver's submit/ring/poll, split into driver, emulator and callback.

    Collection is switched on only inside DRIVER_ENTRIES (--toggle-collect), so the
    total is everything those calls execute; the emulator (reached through the BAR
    ops) and the caller's callback are subtracted by their inclusive counts.
    """
    ios, v = _callgrind([str(exe), uri, str(qdepth), str(nios)], DRIVER_ENTRIES, {"incl": INCL, "excl": EXCL})
    ann, excl = v["incl"], v["excl"]
    total = _program_total(ann)
    emu = sum(_inclusive(ann, f) for f in EMULATOR_ENTRIES)
    cb = _inclusive(ann, CALLBACK)
    driver = total - emu - cb
    return {
        "ios": ios,
        "qdepth": qdepth,
        "instructions_total": total,
        "instructions_emulator": emu,
        "instructions_callback": cb,
        "instructions_driver": driver,
        "driver_instr_per_io": driver / ios,
        "emulator_instr_per_io": emu / ios,
        "callback_instr_per_io": cb / ios,
        "per_function_inclusive": {f: _inclusive(ann, f) for f in DRIVER_ENTRIES + EMULATOR_ENTRIES + (CALLBACK,)},
        "exclusive_instr_per_io": _exclusive_top(excl, ios),
    }


#: Entry points of the three parts in a perf-engine run (engine_loop.c): the driver's public hot-path
#: calls, the emulator behind the BAR ops, and the engine's completion callback the driver calls back.
ENGINE_DRIVER_ENTRIES = (
    "nvme_qpair_submit_many",
    "nvme_qpair_poll_collect",
    "nvme_qpair_submit_one",
    "nvme_qpair_poll_one",
    *DRIVER_ENTRIES,
)
ENGINE_CALLBACKS = ("pchan_cb", "pchan_cb_freel")


def _callgrind_engine_once(exe: Path, uri: str, qdepth: int, runtime_ms: int, lat: bool) -> dict[str, int]:
    argv = [str(exe), uri, str(qdepth), str(runtime_ms), "1" if lat else "0"]
    ios, v = _callgrind(argv, ("worker_main",), {"incl": INCL, "callers": CALLERS})
    ann, callers = v["incl"], v["callers"]
    total = _program_total(ann)
    drv_incl = sum(_inclusive(ann, f) for f in ENGINE_DRIVER_ENTRIES)
    emu = sum(_inclusive(ann, f) for f in EMULATOR_ENTRIES)
    cb = sum(_inclusive(ann, f) for f in ENGINE_CALLBACKS)
    return {
        "ios": ios,
        "total": total,
        "emulator": emu,
        "driver": drv_incl - emu - cb,
        "engine": total - drv_incl + cb,
        # every register store reaches the emulator through bar_write: in the steady state, the doorbells
        "doorbells": _calls(callers, "bar_write"),
    }


#: The data caches of callgrind's cache simulation (engine_cache_split): this host's L1d and L2 per core (lscpu:
#: 32 KiB 8-way and 512 KiB 8-way, 64-byte lines; its "2 instances" are per core). Valgrind simulates two
#: levels, so LL is the L2 here: the 32 MiB L3 holds all of a 16-device run, and what leaves L2 is what the
#: 16-device footprint costs. NVMELAB_BENCH_CACHE="D1size,assoc,line;LLsize,assoc,line" sets others.
CACHE_SIM = ("32768,8,64", "524288,8,64")
#: Events read back: instructions, D1 read/write misses, LL (here L2) read/write misses.
CACHE_EVENTS = ("Ir", "D1mr", "D1mw", "DLmr", "DLmw")
#: The emulator's writes of a Read's data into the host buffer (the null profile's zeros: glibc's memset,
#: whatever name its ifunc variant has), the emulated DMA a real drive does without the CPU.
EMULATED_DMA = ("memset",)
#: Driver work that runs per interval of wall-clock time, not per I/O: the expiry scan over every tracker
#: (every NVME_QPAIR_DEFAULT_TIMEOUT_MS / 4 = 250 ms). Valgrind runs the program ~50x slower, so its share
#: per I/O is ~50x the native one: engine_cache_split reports it apart from the driver.
TIMER_DRIVEN = ("scan_timeouts",)


def _cache_sim() -> tuple[str, str]:
    env = os.environ.get("NVMELAB_BENCH_CACHE")
    if not env:
        return CACHE_SIM
    d1, ll = env.split(";")
    return d1.strip(), ll.strip()


def _annotate_events(annotate: str) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """callgrind_annotate output with --show=CACHE_EVENTS: the program totals and every function's events
    (summed over the lines one function may take: one per source file, see _inclusive), by bare name
    (an ifunc variant such as __memset_avx2_unaligned_erms is reported under every name it matches by
    substring in EMULATED_DMA, see engine_cache_split)."""
    col = r"(?:([\d,]+)(?: \(\s*[\d.]+%\))?|\.)\s+"  # "0" and "." print without a percentage
    line = re.compile(rf"^\s*{col * len(CACHE_EVENTS)}(.*)$")
    totals: dict[str, int] = {}
    funcs: dict[str, dict[str, int]] = {}
    for raw in annotate.splitlines():
        m = line.match(raw)
        if not m:
            continue
        vals = [int(v.replace(",", "")) if v else 0 for v in m.groups()[: len(CACHE_EVENTS)]]
        rest = m.group(len(CACHE_EVENTS) + 1).strip()
        if rest == "PROGRAM TOTALS":
            totals = dict(zip(CACHE_EVENTS, vals))
            continue
        fm = re.match(r"\S*?:([\w.@']+)(?: \[|$)", rest)
        if not fm:
            continue
        name = fm.group(1)
        acc = funcs.setdefault(name, dict.fromkeys(CACHE_EVENTS, 0))
        for k, v in zip(CACHE_EVENTS, vals):
            acc[k] += v
    return totals, funcs


def _cache_once(exe: Path, uri: str, qdepth: int, runtime_ms: int, lat: bool) -> dict[str, Any]:
    d1, ll = _cache_sim()
    show = ("--show=" + ",".join(CACHE_EVENTS), "--threshold=100")
    ios, v = _callgrind(
        [str(exe), uri, str(qdepth), str(runtime_ms), "1" if lat else "0"],
        ("worker_main",),
        {"incl": ("--inclusive=yes", *show), "excl": show},
        options=("--cache-sim=yes", f"--D1={d1}", f"--LL={ll}", f"--I1={d1}"),
    )
    incl, excl = v["incl"], v["excl"]
    totals, fin = _annotate_events(incl)
    _, fex = _annotate_events(excl)

    def incl_sum(names: tuple[str, ...]) -> dict[str, int]:
        return {k: sum(fin.get(f, {}).get(k, 0) for f in names) for k in CACHE_EVENTS}

    drv_incl = incl_sum(ENGINE_DRIVER_ENTRIES)
    emu = incl_sum(EMULATOR_ENTRIES)
    cb = incl_sum(ENGINE_CALLBACKS)
    # the emulated DMA: the self cost of every function named like EMULATED_DMA (memset's ifunc variants);
    # in the worker thread's steady state only the emulator's Read calls it (checked: its Ir per I/O)
    dma = {k: sum(v[k] for f, v in fex.items() if any(d in f for d in EMULATED_DMA)) for k in CACHE_EVENTS}
    timer = incl_sum(TIMER_DRIVEN)
    parts = {
        "emulator": emu,
        "driver": {k: drv_incl[k] - emu[k] - cb[k] - timer[k] for k in CACHE_EVENTS},
        "timer_scan": timer,
        "engine": {k: totals[k] - drv_incl[k] + cb[k] for k in CACHE_EVENTS},
        "total": totals,
        "emulated_dma": dma,
    }
    return {"ios": ios, "parts": parts}


def engine_cache_split(
    exe: Path, uri: str, qdepth: int, lat: bool, runtimes_ms: tuple[int, int] = (400, 1000)
) -> dict[str, Any]:
    """Cache misses per I/O of a perf-engine run (callgrind --cache-sim=yes with CACHE_SIM), split into the
    parts of callgrind_engine_split (engine, driver, emulator) and, inside the emulator, the emulated DMA
    (the writes of a Read's data into the host buffer). Deterministic: a simulated cache, not the host's.
    Two run lengths are differenced as for the instructions, so the cold misses of set-up cancel.

    Per part and event (CACHE_EVENTS): D1mr/D1mw are L1d read/write misses, DLmr/DLmw misses of the LL
    (this host's L2 with the default CACHE_SIM). "without_emulated_dma" is the total less the emulated DMA:
    what a host with a real drive (which writes the data by DMA, not the CPU) would keep of the misses,
    as far as the DMA's own cache effect (the lines it evicts) is left out too.
    """
    a, b, dios = _two_lengths(lambda ms: _cache_once(exe, uri, qdepth, ms, lat), runtimes_ms)
    per: dict[str, dict[str, float]] = {}
    for part, ev in b["parts"].items():
        per[part] = {k: round((ev[k] - a["parts"][part][k]) / dios, 3) for k in CACHE_EVENTS}
    # the steady state: the total less the wall-clock-driven scan (see TIMER_DRIVEN)
    per["per_io"] = {k: round(per["total"][k] - per["timer_scan"][k], 3) for k in CACHE_EVENTS}
    per["without_emulated_dma"] = {k: round(per["per_io"][k] - per["emulated_dma"][k], 3) for k in CACHE_EVENTS}
    return {"per_io": per, "ios": [a["ios"], b["ios"]], "runtimes_ms": list(runtimes_ms), "cache": list(_cache_sim())}


def _caller_counts(tree: str, callee: str, skip: str | None = None) -> int:
    """The sum of the "< caller (Nx)" counts above every "* file:callee" line of `callgrind_annotate
    --tree=caller` output (callee a regex for the function name), leaving out callers whose line holds skip."""
    lines = tree.splitlines()
    total = 0
    for i, line in enumerate(lines):
        if re.search(rf"\*\s+\S*:{callee}(?: \[|$)", line):
            j = i - 1
            while j >= 0 and "<" in lines[j]:
                if skip is None or skip not in lines[j]:
                    c = re.search(r"\(([\d,]+)x\)", lines[j])
                    total += int(c.group(1).replace(",", "")) if c else 0
                j -= 1
    return total


def _calls(tree: str, name: str) -> int:
    """Calls of `name` (the sum of its callers' counts in the caller tree)."""
    return _caller_counts(tree, re.escape(name))


def callgrind_engine_split(
    exe: Path, uri: str, qdepth: int, lat: bool, runtimes_ms: tuple[int, int] = (300, 1200)
) -> dict[str, Any]:
    """Instructions per I/O of a whole perf-engine run, split into engine, driver and emulator.

    Collection is on inside the worker thread (worker_main) only. Inside it, the driver is what
    nvme_qpair_submit_many/poll_collect/submit_one/poll_one/submit/ring/poll execute (a rare fallback of one
    of them to another, submit_many to submit or poll_one to poll_collect, would count twice; the fast paths
    never take it) less the emulator (the inclusive cost of the BAR ops
    bar_write and bar_idle) and less the engine's completion callbacks (pchan_cb, pchan_cb_freel); the engine is the
    rest. Two runs of different lengths are differenced, so the setup and teardown of the channels
    (qpair creation, admin commands, thread start) cancel and what is left is the steady state.
    """
    a, b, dios = _two_lengths(lambda ms: _callgrind_engine_once(exe, uri, qdepth, ms, lat), runtimes_ms)
    per = {k: round((b[k] - a[k]) / dios, 1) for k in ("total", "emulator", "driver", "engine")}
    per["doorbells"] = round((b["doorbells"] - a["doorbells"]) / dios, 4)
    return {"per_io": per, "ios": [a["ios"], b["ios"]], "runs": [a, b], "runtimes_ms": list(runtimes_ms)}


def _exclusive_top(annotate: str, ios: int, top: int = 12) -> dict[str, float]:
    """Self cost per I/O of the most expensive functions in the collected region."""
    out: dict[str, float] = {}
    body = annotate.split("file:function", 1)[-1]
    for m in re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+\S*?:([\w.@]+) \[", body, re.M):
        out[m.group(2)] = round(int(m.group(1).replace(",", "")) / ios, 1)
        if len(out) == top:
            break
    return out


def fio(args: list[str]) -> dict[str, Any]:
    """Run fio with JSON output; the first job's read figures and CPU usage.

    cpu_usage / ios_per_cpu_s are fio's own figures for the job thread; proc_cpu_s is the whole fio
    process's CPU (every thread, io_uring's io-wq workers included: getrusage of the reaped child), over
    its whole life (start-up and any ramp included, so it slightly overstates fio's CPU per I/O), and
    proc_cpu_usage that CPU over fio's wall time in percent of one CPU.
    """
    if not shutil.which("fio"):
        raise RuntimeError("fio is not installed")
    before = _children_cpu_s()
    t0 = time.perf_counter()
    with subprocess.Popen(
        ["fio", "--output-format=json", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        out, err = proc.communicate()
        wall = time.perf_counter() - t0
    # the reaped child's whole process (all its threads) is in RUSAGE_CHILDREN; one child at a time here
    ru = _children_cpu_s() - before
    ru = ru if ru > 0 else None
    if proc.returncode != 0:
        raise RuntimeError(f"fio {' '.join(args)} failed: {err.strip()[:500]}")
    text = out[out.index("{") :]
    job = json.loads(text)["jobs"][0]
    rd = job["read"]
    runtime_s = rd["runtime"] / 1000.0 if rd.get("runtime") else job["job_runtime"] / 1000.0
    cpu_frac = (job["usr_cpu"] + job["sys_cpu"]) / 100.0
    return {
        "iops": rd["iops"],
        "ios": rd["total_ios"],
        "runtime_s": runtime_s,
        "cpu_usage": job["usr_cpu"] + job["sys_cpu"],
        "ios_per_cpu_s": rd["total_ios"] / (runtime_s * cpu_frac) if cpu_frac > 0 and runtime_s > 0 else None,
        "proc_cpu_s": ru,
        "proc_cpu_usage": 100.0 * ru / wall if ru is not None and wall > 0 else None,
        "ios_per_proc_cpu_s": rd["total_ios"] / ru if ru else None,
        "lat_ns_mean": rd.get("clat_ns", {}).get("mean"),
        "version": subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip(),
    }


def _children_cpu_s() -> float:
    """CPU (user + system) of every reaped child so far, each child's whole process (all its threads)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def mean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


#: The breakdown-cost benchmark's helper programs (tests/bench/bench_breakdown_cost.py).
STANDIN_LOOP_SRC = Path(__file__).with_name("standin_loop.c")
CLOCK_COST_SRC = Path(__file__).with_name("clock_cost.c")


def build_standin_loop(workdir: Path) -> Path:
    """Compile standin_loop.c (cuda-run's CPU stand-in, one run) against build/dev's static libraries."""
    return _build(STANDIN_LOOP_SRC, [LIBENGINE, LIBNVME], workdir / "standin_loop")


def build_clock_cost(workdir: Path) -> Path:
    """Compile clock_cost.c (the cost of one clock_gettime / rdtsc read); no library."""
    return _build(CLOCK_COST_SRC, [], workdir / "clock_cost")


def _clock_reads(tree: str) -> int:
    """Calls into clock_gettime from outside the clock's own functions (glibc names it clock_gettime,
    __clock_gettime or __clock_gettime64, one calling the next): the program's clock reads, counted once."""
    return _caller_counts(tree, r"\S*clock_gettime\S*", skip="clock_gettime")


def callgrind_counts(argv: list[str], toggle: str) -> dict[str, int]:
    """One run of argv under callgrind, collection on inside `toggle` only: the instructions executed, the
    clock reads made (calls of clock_gettime) and the I/Os the program printed (ios=N)."""
    ios, v = _callgrind(argv, (toggle,), {"excl": EXCL, "callers": CALLERS})
    return {"ios": ios, "instructions": _program_total(v["excl"]), "clock_reads": _clock_reads(v["callers"])}


def callgrind_per_io(argv_of, toggle: str, runtimes_ms: tuple[int, int]) -> dict[str, Any]:
    """Instructions and clock reads per I/O of the steady state: argv_of(runtime_ms) run under callgrind at
    two lengths, the difference divided by the difference in I/Os (set-up and teardown cancel)."""
    a, b, dios = _two_lengths(lambda ms: callgrind_counts(argv_of(ms), toggle), runtimes_ms)
    return {
        "instr_per_io": round((b["instructions"] - a["instructions"]) / dios, 2),
        "clock_reads_per_io": round((b["clock_reads"] - a["clock_reads"]) / dios, 5),
        "ios": [a["ios"], b["ios"]],
    }
