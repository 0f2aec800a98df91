# SPDX-License-Identifier: BSD-3-Clause
"""Host variables of the CPU-initiated study (seed 004): governor, fixed clock, turbo, SMT, stress.

HostControl reads the current values from sysfs, applies requested values where
the host allows it (root and writable sysfs files), restores what it changed
(`restore`, also called from the runner's ``finally`` so Ctrl-C restores too),
and runs stress-ng on the CPUs a run does not use.

Policy (documented in the notebooks): a run that *requests* a value which the
host cannot be set to, and which differs from the value found, is **skipped**
and reported ("could not set governor=powersave: no cpufreq in sysfs"); it is
never recorded under a label that is not true. A variable a preset does not
request is recorded as found. Thread siblings are not a host setting: the
engine picks the CPUs (nvmelab.host.cpus) and the record says what it used.

`controllability()` says, per variable, what this host allows and why not, so that
a variable the host does not expose is recorded as not controllable with its reason
(the runner stores it in every record as ``host_control``) rather than left out.

The fixed clock (``fixed_freq``, kHz; 0 = none) is seed 004's "userspace governor at a fixed
frequency": the governor becomes ``userspace`` and every CPU's ``scaling_setspeed`` the clock.

Caveat: sysfs paths are those of Linux intel_pstate/acpi-cpufreq; on hosts
without them the values read as None (governor, turbo) and cannot be set.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import shutil
import signal
import subprocess
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cpus as _cpus
from .cpus import SYS_CPU, _read

log = logging.getLogger(__name__)

#: How long to wait for stress-ng to exit after SIGTERM before killing it (seconds).
STRESS_STOP_TIMEOUT_S = 5.0
#: stress-ng's own --timeout: the run's expected length plus this margin (seconds), so that a
#: runner killed with SIGKILL (no cleanup at all) leaves it running a little while, not forever.
STRESS_MARGIN_S = 60.0
#: --timeout when the run's length is not known in advance (seconds).
STRESS_DEFAULT_TIMEOUT_S = 3600.0


def _write(path: Path, value: str) -> str | None:
    """Write value; None on success, else the reason."""
    try:
        path.write_text(value)
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"


def used_cpus(ncpus: int, thr_sib: int, root: Path = SYS_CPU) -> list[int]:
    """The logical CPUs a run uses: the engine's own choice (nvmelab.host.cpus.cpumask), read from
    `root`, so that stress lands exactly on the others. ValueError when the host has fewer cores."""
    return sorted(_cpus.cpumask(ncpus, thr_sib=bool(thr_sib), topo=_cpus.topology(root=root)))


def read_all(root: Path = SYS_CPU) -> dict[str, Any]:
    """governor, turbo, smt as found: the engine's reader, so the runner and the records agree."""
    return _cpus.host_state(root)


#: The variables `controllability` reports on, in the order seed 004 lists them.
CONTROL_VARS = ("governor", "fixed_freq", "turbo", "smt", "thr_sib", "stress", "freq_samples")


def fixed_freq(root: Path = SYS_CPU) -> int | None:
    """The fixed clock in kHz under the userspace governor, 0 under any other governor, None
    without cpufreq."""
    files = sorted(root.glob("cpu[0-9]*/cpufreq/scaling_setspeed"))
    gov = _cpus.governor(root=root)
    if gov is None:
        return None
    if gov != "userspace" or not files:
        return 0
    v = _read(files[0])
    return int(v) if v and v.isdigit() else None


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def controllability(
    root: Path = SYS_CPU, *, allow_changes: bool = True, stress_cmd: str | None = None
) -> dict[str, dict[str, Any]]:
    """What this host lets a sweep vary, per variable: ``{"found": value as found, "settable": bool,
    "why": reason when not settable (else "")}``. `thr_sib` is settable when a physical core has
    more than one usable logical CPU; `stress` when stress-ng is installed and the host has more
    than one CPU; `freq_samples` when scaling_cur_freq can be read (the records then carry them)."""
    euid_root = os.geteuid() == 0
    out: dict[str, dict[str, Any]] = {}

    def entry(found: Any, why: str) -> dict[str, Any]:
        return {"found": found, "settable": not why, "why": why}

    def sysfs_why(files: list[Path], absent: str) -> str:
        if not files:
            return absent
        if not allow_changes:
            return "changing host settings is turned off (--no-host-changes)"
        if not euid_root:
            return "needs root"
        ro = [str(f) for f in files if not _writable(f)]
        return f"{ro[0]} is read-only" if ro else ""

    state = read_all(root)
    gov_files = sorted(root.glob("cpu[0-9]*/cpufreq/scaling_governor"))
    gw = sysfs_why(gov_files, "no cpufreq in sysfs (no scaling_governor)")
    avail = _read(gov_files[0].parent / "scaling_available_governors") if gov_files else None
    out["governor"] = entry(state.get("governor"), gw)
    if avail:
        out["governor"]["available"] = avail.split()
    speed = sorted(root.glob("cpu[0-9]*/cpufreq/scaling_setspeed"))
    if not gov_files:
        fw = "no cpufreq in sysfs (no scaling_governor): no userspace governor"
    elif avail is not None and "userspace" not in avail.split():
        fw = f"the userspace governor is not offered (available: {avail})"
    else:
        fw = gw or sysfs_why(speed, "no scaling_setspeed in sysfs")
    out["fixed_freq"] = entry(fixed_freq(root), fw)
    tf = _cpus.turbo_file(root)
    out["turbo"] = entry(
        state.get("turbo"), sysfs_why([tf[0]] if tf else [], "no intel_pstate/no_turbo or cpufreq/boost in sysfs")
    )
    ctl = root / "smt" / "control"
    smt_state = _read(ctl)
    if smt_state in (None, "notsupported", "notimplemented", "forceoff"):
        sw = f"SMT control is {smt_state or 'absent'} on this host"
    else:
        sw = sysfs_why([ctl], "")
    out["smt"] = entry(state.get("smt"), sw)
    try:
        topo = _cpus.topology(root=root)
        tpc = topo.threads_per_core
        out["thr_sib"] = entry(tpc, "" if tpc > 1 else "one logical CPU per physical core: no siblings to use")
        ncpu = topo.nlogical
    except OSError as exc:  # pragma: no cover - sysfs unreadable
        out["thr_sib"] = entry(None, f"topology unreadable: {exc}")
        ncpu = len(_cpus.online(root))
    cmd = stress_cmd if stress_cmd is not None else shutil.which("stress-ng")
    out["stress"] = entry(
        bool(cmd),
        "" if cmd and ncpu > 1 else ("stress-ng is not installed" if not cmd else "one CPU: none left to stress"),
    )
    freq = sorted(root.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))
    out["freq_samples"] = entry(bool(freq), "" if freq else "no scaling_cur_freq in sysfs: no frequency samples")
    return out


@dataclass(eq=False)  # hashable by identity: _CHANGED holds them
class HostControl:
    """Applies host variables for runs and restores them; one per sweep (and per host)."""

    root: Path = SYS_CPU
    allow_changes: bool = True
    stress_cmd: str | None = field(default_factory=lambda: shutil.which("stress-ng"))
    _saved: dict[str, list[tuple[Path, str]]] = field(default_factory=dict)
    _stress: subprocess.Popen | None = None

    def current(self) -> dict[str, Any]:
        return {**read_all(self.root), "fixed_freq": fixed_freq(self.root)}

    def controllability(self) -> dict[str, dict[str, Any]]:
        """What this host lets a sweep vary (module function `controllability`), for the records."""
        return controllability(self.root, allow_changes=self.allow_changes, stress_cmd=self.stress_cmd or "")

    # -- setters: None on success, else the reason it cannot be set --
    def _set_files(self, var: str, files: list[Path], value: str) -> str | None:
        if not self.allow_changes:
            return "changing host settings is turned off (--no-host-changes)"
        if not files:
            return "not exposed by this host's sysfs"
        if os.geteuid() != 0:
            return "needs root"
        for f in files:
            old = _read(f)
            if old is None:
                return f"{f} unreadable"
            if old == value:
                continue
            why = _write(f, value)
            if why:
                return why
            self._saved.setdefault(var, []).append((f, old))
            _CHANGED.add(self)
        return None

    def set_governor(self, value: str) -> str | None:
        files = sorted(self.root.glob("cpu[0-9]*/cpufreq/scaling_governor"))
        if files:
            avail = _read(files[0].parent / "scaling_available_governors") or ""
            if avail and value not in avail.split():
                return f"governor {value!r} not offered (available: {avail})"
        return self._set_files("governor", files, value)

    def set_fixed_freq(self, value: int) -> str | None:
        """Userspace governor at `value` kHz on every CPU; 0 asks for no fixed clock (then the
        requested governor applies)."""
        if not int(value):
            return None if _same(self.current().get("fixed_freq"), 0) else "a fixed clock is set; set a governor"
        why = self.set_governor("userspace")
        if why:
            return why
        return self._set_files("fixed_freq", sorted(self.root.glob("cpu[0-9]*/cpufreq/scaling_setspeed")), str(value))

    def set_turbo(self, value: int) -> str | None:
        tf = _cpus.turbo_file(self.root)
        if tf is None:
            return self._set_files("turbo", [], "")
        return self._set_files("turbo", [tf[0]], str(1 - int(value) if tf[1] else int(value)))

    def set_smt(self, value: int) -> str | None:
        ctl = self.root / "smt" / "control"
        state = _read(ctl)
        if state in (None, "notsupported", "notimplemented", "forceoff"):
            return f"SMT control is {state or 'absent'} on this host"
        return self._set_files("smt", [ctl], "on" if int(value) else "off")

    def apply(self, want: dict[str, Any]) -> tuple[bool, list[str]]:
        """Bring governor/turbo/smt to the requested values.

        Returns (ok, notes): ok is False when a requested value differs from the
        host's and could not be set; notes say what was set or why not.
        """
        now = self.current()
        notes: list[str] = []
        ok = True
        setters = (
            ("smt", self.set_smt),
            ("governor", self.set_governor),
            ("fixed_freq", self.set_fixed_freq),
            ("turbo", self.set_turbo),
        )
        for var, setter in setters:
            if var not in want or want[var] is None:
                continue
            req = want[var]
            if _same(now.get(var), req):
                continue
            why = setter(req)
            after = self.current().get(var)
            if why is None and _same(after, req):
                notes.append(f"set {var}={req} (was {now.get(var)})")
            else:
                ok = False
                notes.append(f"could not set {var}={req} (host has {now.get(var)}): {why or 'value did not change'}")
        return ok, notes

    def restore(self) -> list[str]:
        """Put back every value this object changed, in reverse order."""
        notes = []
        for var in ("turbo", "fixed_freq", "governor", "smt"):
            for f, old in reversed(self._saved.pop(var, [])):
                why = _write(f, old)
                notes.append(f"restored {f}={old}" if why is None else f"could not restore {f}: {why}")
        _CHANGED.discard(self)
        for n in notes:
            log.info(n)
        return notes

    # -- stress on unused CPUs --
    def start_stress(self, used: list[int], seconds: float | None = None) -> tuple[bool, str]:
        """stress-ng on the online CPUs not in `used`, for at most `seconds` + STRESS_MARGIN_S (its
        own --timeout; STRESS_DEFAULT_TIMEOUT_S when None), in a process group of its own that
        stop_stress kills (the runner calls it on every exit); (ok, note)."""
        self.stop_stress()
        free = [c for c in _cpus.online(self.root) if c not in used]
        if not free:
            return False, f"no unused CPUs to stress (run uses {used})"
        if not self.stress_cmd:
            return False, "stress-ng is not installed"
        limit = STRESS_DEFAULT_TIMEOUT_S if seconds is None else float(seconds) + STRESS_MARGIN_S
        cmd = [
            self.stress_cmd,
            "--cpu",
            str(len(free)),
            "--taskset",
            ",".join(map(str, free)),
            "--timeout",
            f"{max(1, math.ceil(limit))}s",
            "--quiet",
        ]
        self._stress = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        _LIVE_STRESS.add(self._stress.pid)
        return True, f"stress-ng on CPUs {free}"

    def stress_running(self) -> bool:
        """Whether the stress-ng started by start_stress is still running (it must outlast the run)."""
        return self._stress is not None and self._stress.poll() is None

    def stop_stress(self) -> None:
        p, self._stress = self._stress, None
        if p is None:
            return
        _LIVE_STRESS.discard(p.pid)
        _kill_group(p.pid, wait=p.wait)

    def close(self) -> list[str]:
        self.stop_stress()
        return self.restore()


#: Process groups of stress-ng runs not stopped yet: killed at interpreter exit whatever happened.
_LIVE_STRESS: set[int] = set()


def _kill_group(pgid: int, wait: Any = None) -> None:
    """SIGTERM the process group `pgid` (a stress-ng session we started, and only that), SIGKILL it
    after STRESS_STOP_TIMEOUT_S; its workers are in the group too, so none is left."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if wait is None:
        return
    try:
        wait(timeout=STRESS_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)  # workers that outlived their parent, or a stuck parent
    except ProcessLookupError:
        return
    wait()


#: HostControls that changed a host variable and have not restored it yet.
_CHANGED: weakref.WeakSet[HostControl] = weakref.WeakSet()


@atexit.register
def _at_exit() -> None:
    """The backstop of every exit the runner's finally did not see: stop stress, restore sysfs."""
    for pgid in sorted(_LIVE_STRESS):
        _kill_group(pgid)
    _LIVE_STRESS.clear()
    for ctl in list(_CHANGED):
        ctl.restore()


def _same(found: Any, want: Any) -> bool:
    if found is None or want is None:
        return found is want
    if isinstance(want, (bool, int)) and not isinstance(want, str):
        try:
            return int(found) == int(want)
        except (TypeError, ValueError):
            return False
    return str(found) == str(want)
