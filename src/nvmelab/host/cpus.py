# SPDX-License-Identifier: BSD-3-Clause
"""CPU topology and host CPU state: which logical CPUs to pin to, and how the CPUs are set.

The CPU-initiated study varies host variables (governor, turbo, SMT, thread
siblings, stress). This module reads them; it never changes them.

    topology()                 logical CPUs grouped by physical core and socket
    cpumask(n, thr_sib)        the logical CPUs of n physical cores: one each, or all
                               siblings of each core when thr_sib is True
    governor() turbo() smt()   the host state as found (None where unreadable); every
                               reader takes `root`, another sysfs tree (tests use a fake one)
    FreqSampler(cpus)          samples scaling_cur_freq every 0.5 s during a run and
                               summarises it as the published method did (first and
                               last 10 % of the samples dropped)
    host_cpu_times()           busy and total CPU time of the whole host (/proc/stat)
    host_usage(before, after)  the whole host's CPU use between two samples, in percent of
                               one CPU (the unit of a record's cpu_usage)
    host_busy(seconds)         the host's CPU use over a short window: is it quiet?

Sources: /proc/stat (aggregate "cpu" line), /sys/devices/system/cpu/cpuN/topology/*, .../cpufreq/*, .../smt/*,
/sys/devices/system/cpu/intel_pstate/no_turbo, /sys/devices/system/cpu/cpufreq/boost.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

SYS_CPU = Path("/sys/devices/system/cpu")
#: Interval between frequency samples (seconds), as in the published method.
FREQ_INTERVAL_S = 0.5
#: Fraction of the samples dropped at the start and at the end of a run.
FREQ_TRIM_FRACTION = 0.10
PROC_STAT = Path("/proc/stat")
#: /proc/stat "cpu" columns that count as idle: idle, iowait (the rest is busy; guest
#: time is already inside user and nice, so it is not counted twice).
_IDLE_COLUMNS = (3, 4)
_STAT_COLUMNS = 8  # user nice system idle iowait irq softirq steal


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def parse_cpu_list(text: str) -> list[int]:
    """Parse a kernel CPU list ("0-3,8,10-11") into sorted ids; ValueError on bad input."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            a, b = int(lo), int(hi)
            if b < a:
                raise ValueError(f"bad CPU range {part!r}")
            out.update(range(a, b + 1))
        else:
            out.add(int(part))
    return sorted(out)


def format_cpu_list(cpus: list[int]) -> str:
    """Inverse of parse_cpu_list: [0,1,2,5] -> "0-2,5"."""
    s = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass
class Topology:
    """Logical CPUs this process may use, grouped by physical core (siblings together)."""

    cores: list[tuple[int, ...]]  # each physical core: its usable logical CPUs, ascending
    socket_of: dict[int, int] = field(default_factory=dict)

    @property
    def logical(self) -> list[int]:
        return sorted(c for core in self.cores for c in core)

    @property
    def nlogical(self) -> int:
        return sum(len(c) for c in self.cores)

    @property
    def nphysical(self) -> int:
        return len(self.cores)

    @property
    def nsockets(self) -> int:
        return len(set(self.socket_of.values())) or 1

    @property
    def threads_per_core(self) -> int:
        return max((len(c) for c in self.cores), default=1)

    def describe(self) -> dict:
        """A JSON-able summary for provenance."""
        return {
            "logical": self.nlogical,
            "physical": self.nphysical,
            "sockets": self.nsockets,
            "threads_per_core": self.threads_per_core,
            "cores": [list(c) for c in self.cores],
        }


def online(root: Path = SYS_CPU) -> list[int]:
    """The online logical CPUs (`root`/online); this process's affinity where sysfs does not say."""
    txt = _read(root / "online")
    return parse_cpu_list(txt) if txt else sorted(os.sched_getaffinity(0))


def topology(allowed: set[int] | None = None, root: Path = SYS_CPU) -> Topology:
    """Read the topology of the CPUs in `allowed` (default: this process's affinity, or every
    online CPU of `root` when `root` is another tree than the real sysfs)."""
    if allowed is None:
        allowed = set(os.sched_getaffinity(0)) if root == SYS_CPU else set(online(root))
    groups: dict[tuple[int, int], list[int]] = {}
    socket_of: dict[int, int] = {}
    for cpu in sorted(allowed):
        topo = root / f"cpu{cpu}" / "topology"
        core = _read(topo / "core_id")
        pkg = _read(topo / "physical_package_id")
        sib = _read(topo / "thread_siblings_list")
        if core is None or pkg is None:
            key = (0, cpu) if sib is None else (0, min(parse_cpu_list(sib)))
            socket_of[cpu] = 0
        else:
            key = (int(pkg), int(core))
            socket_of[cpu] = int(pkg)
        groups.setdefault(key, []).append(cpu)
    cores = [tuple(sorted(v)) for _, v in sorted(groups.items(), key=lambda kv: min(kv[1]))]
    return Topology(cores=cores, socket_of=socket_of)


def cpumask(ncpus: int, thr_sib: bool = False, topo: Topology | None = None) -> list[int]:
    """Choose the logical CPUs for `ncpus` physical cores, as the published study counts them.

    `ncpus` is a number of physical cores (seed 004: "when using thread siblings, the
    amount of logical CPUs used are doubled").
    thr_sib=False: one logical CPU per core (cores in order), never two siblings.
    thr_sib=True: every sibling of each of those cores, so worker threads share
    physical cores (on a host without SMT this is the same as thr_sib=False).
    """
    if isinstance(ncpus, bool) or not isinstance(ncpus, int) or ncpus < 1:
        raise ValueError(f"ncpus={ncpus!r}: must be an integer >= 1")
    topo = topo or topology()
    if ncpus > len(topo.cores):
        raise ValueError(
            f"ncpus={ncpus}: this process may use {len(topo.cores)} physical cores "
            f"({topo.nlogical} logical CPUs); ncpus counts physical cores"
        )
    cores = topo.cores[:ncpus]
    if thr_sib:
        return [c for core in cores for c in core]
    return [core[0] for core in cores]


def check_cpus(cpus: list[int]) -> list[int]:
    """Validate an explicit CPU list against this process's affinity; ValueError names the bad id."""
    allowed = os.sched_getaffinity(0)
    out: list[int] = []
    for c in cpus:
        if isinstance(c, bool) or not isinstance(c, int):
            raise ValueError(f"cpus: {c!r} is not a CPU id")
        if c not in allowed:
            raise ValueError(
                f"cpus: CPU {c} is not available to this process (allowed: {format_cpu_list(sorted(allowed))})"
            )
        if c in out:
            raise ValueError(f"cpus: CPU {c} is listed twice")
        out.append(c)
    return out


def governor(cpu: int = 0, root: Path = SYS_CPU) -> str | None:
    """cpufreq scaling governor of `cpu`, None where cpufreq is absent (VMs, containers)."""
    return _read(root / f"cpu{cpu}" / "cpufreq" / "scaling_governor")


def turbo_file(root: Path = SYS_CPU) -> tuple[Path, bool] | None:
    """(file, inverted) that holds the turbo state: intel_pstate/no_turbo (1 = off, inverted)
    or cpufreq/boost (1 = on); None when the host exposes neither."""
    p = root / "intel_pstate" / "no_turbo"
    if p.exists():
        return p, True
    p = root / "cpufreq" / "boost"
    if p.exists():
        return p, False
    return None


def turbo(root: Path = SYS_CPU) -> int | None:
    """1 when turbo/boost is enabled, 0 when disabled, None when the host does not say."""
    tf = turbo_file(root)
    v = _read(tf[0]) if tf else None
    if v is None or not v.isdigit():
        return None
    return 1 - int(v) if tf[1] else int(v)


def smt(root: Path = SYS_CPU) -> int | None:
    """1 when SMT is active, 0 when not; from `root`/smt/active, else from the topology."""
    v = _read(root / "smt" / "active")
    if v is not None and v.isdigit():
        return int(v)
    try:
        return 1 if topology(set(online(root)), root=root).threads_per_core > 1 else 0
    except OSError:
        return None


def host_state(root: Path = SYS_CPU) -> dict:
    """governor, turbo and smt as found on the host (None where unreadable)."""
    return {"governor": governor(root=root), "turbo": turbo(root), "smt": smt(root)}


def read_freq_khz(cpu: int) -> int | None:
    v = _read(SYS_CPU / f"cpu{cpu}" / "cpufreq" / "scaling_cur_freq")
    return int(v) if v is not None and v.isdigit() else None


def summarise_freqs(samples: list[int], trim: float = FREQ_TRIM_FRACTION) -> list[float] | None:
    """[mean, population variance] in kHz after dropping `trim` of the samples at each end."""
    if not samples:
        return None
    k = int(len(samples) * trim)
    kept = samples[k : len(samples) - k] if len(samples) - 2 * k > 0 else samples
    mean = sum(kept) / len(kept)
    var = sum((x - mean) ** 2 for x in kept) / len(kept)
    return [mean, var]


class FreqSampler:
    """Sample scaling_cur_freq of `cpus` every FREQ_INTERVAL_S on a background thread.

    Use as a context manager around a run; `result()` gives, per CPU in order,
    [mean_khz, variance_khz2] (first and last 10 % dropped), or None when no CPU
    frequency can be read on this host.
    """

    def __init__(self, cpus: list[int], interval: float = FREQ_INTERVAL_S):
        self.cpus = list(cpus)
        self.interval = interval
        self.samples: dict[int, list[int]] = {c: [] for c in self.cpus}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.readable = any(read_freq_khz(c) is not None for c in self.cpus)

    def _loop(self) -> None:
        while True:
            for c in self.cpus:
                f = read_freq_khz(c)
                if f is not None:
                    self.samples[c].append(f)
            if self._stop.wait(self.interval):
                break

    def __enter__(self) -> FreqSampler:
        if self.readable:
            self._thread = threading.Thread(target=self._loop, name="nvmelab-freq", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def result(self) -> list[list[float] | None] | None:
        if not self.readable:
            return None
        return [summarise_freqs(self.samples[c]) for c in self.cpus]


@dataclass(frozen=True)
class CpuTimes:
    """Busy and total CPU time of the whole host, in clock ticks, at `at` (monotonic seconds)."""

    busy: int
    total: int
    at: float


def host_cpu_times(stat: Path = PROC_STAT) -> CpuTimes | None:
    """The aggregate "cpu" line of /proc/stat; None where it cannot be read (not Linux)."""
    try:
        with open(stat, encoding="ascii") as f:
            line = f.readline()
    except OSError:
        return None
    parts = line.split()
    if not parts or parts[0] != "cpu" or len(parts) < 1 + _STAT_COLUMNS:
        return None
    vals = [int(v) for v in parts[1 : 1 + _STAT_COLUMNS]]
    idle = sum(vals[i] for i in _IDLE_COLUMNS)
    return CpuTimes(sum(vals) - idle, sum(vals), time.monotonic())


def host_usage(before: CpuTimes | None, after: CpuTimes | None, ncpus: int | None = None) -> float | None:
    """The whole host's CPU use between two samples, in percent of one CPU (200 = two CPUs
    busy), the unit of a record's ``cpu_usage``; None when a sample is missing or no time
    passed. `ncpus` defaults to the online CPUs."""
    if before is None or after is None or after.total <= before.total:
        return None
    n = ncpus or len(online())
    share = (after.busy - before.busy) / (after.total - before.total)
    return round(100.0 * n * share, 1)


def host_busy(seconds: float = 2.0, stat: Path = PROC_STAT) -> float | None:
    """The host's CPU use over the next `seconds`, in percent of one CPU; None where
    /proc/stat cannot be read. Used before a sweep that takes published records."""
    before = host_cpu_times(stat)
    time.sleep(seconds)
    return host_usage(before, host_cpu_times(stat))
