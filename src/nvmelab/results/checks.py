# SPDX-License-Identifier: BSD-3-Clause
"""Runs that prove themselves: a record's self-checks and its per-I/O time breakdown (issue 24).

Every device-initiated record (the cuda-run engine and its CPU stand-in) and every CPU-path perf record
carries

    "checks": {name: {"ok": True | False | None, "value": ..., "expect": ..., "detail": "one line"}},
    "checks_ok": False if any check has ok False, else True,

ok None meaning "not applicable on this target". The checks, one function each:

* ``completions``: completions counted where they are matched == commands submitted.
* ``kernel_ran``: every block's heartbeat advanced (the GPU kernel, the stand-in's queue pairs): a launch
  that did nothing must not read as a fast run.
* ``payload``: the data of the verified reads held the known pattern (data=ram / fill=stamp, verify on).
* ``littles_law``: IOPS x mean latency / commands in flight, within [LITTLE_MIN, LITTLE_MAX] widened by
  mean latency / window (the window's edges).
* ``emulator_headroom``: the emulator, not the device model, did not set the rate (``emulator_limited``).
* ``window`` (CPU-path perf records): the measurement window saw I/O and every thread's window lasted at least
  WINDOW_MIN of the runtime asked: a thread the host left without a CPU (or one stalled in a call) until late in
  the run measures a window of about nothing (0 I/O, or a rate from a sliver), which must not read as a run.
* ``match`` (the matching study) is added by the engine that counts misattributed statuses, with `check`.

A record with checks_ok False is kept in its file, marked, and left out of figures by `excluded`
(called by nvmelab.studies.runner.load_results, which also leaves out failed points and
emulator-limited runs).

``breakdown`` builds the record's ``breakdown`` field from the phases of the sampled commands (one in
``sample_every``; stamps defined in src/nvme/nvme_gpuq.h): p50/p99 of submit, doorbell, device, poll
and release, in ns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: The phases of the breakdown, in the order the engines report them (nvme_gpuq.h enum nvme_gpuq_phase).
PHASES = ("submit", "doorbell", "device", "poll", "release")
#: Clocks the stamps may come from.
CLOCKS = ("globaltimer", "tsc", "clock_gettime")
#: Little's law: IOPS x mean latency / in flight. The latency (or round time) excludes what the host does
#: between a completion and the next submission, so the ratio is <= 1 up to the noise of the window's
#: edges (LITTLE_MAX); a ratio under LITTLE_MIN means the slots were idle more than half the time, or the
#: counts and the clock disagree (a wrong window, a lost count). The committed CPU records lie in 0.63..1.0.
LITTLE_MIN = 0.5
LITTLE_MAX = 1.05
#: The shortest share of the asked runtime a thread's measurement window may last (``window``).
WINDOW_MIN = 0.5
#: Why a record is left out of figures, by `excluded`.
EXCLUDED_FAILED = "failed point"
EXCLUDED_CHECKS = "failed self-check"
EXCLUDED_LIMITED = "emulator-limited"


def check(ok: bool | None, value: Any, expect: Any, detail: str) -> dict[str, Any]:
    """One entry of ``checks``."""
    return {"ok": None if ok is None else bool(ok), "value": value, "expect": expect, "detail": detail}


def completions(submitted: int | None, completed: int | None, what: str = "CQEs matched") -> dict[str, Any]:
    """Completions counted (where they are matched) == commands submitted."""
    if submitted is None or completed is None:
        return check(None, completed, submitted, "this engine counts no submissions apart from completions")
    return check(
        completed == submitted,
        int(completed),
        int(submitted),
        f"{what} {completed} of {submitted} commands submitted",
    )


def kernel_ran(beats: Sequence[int] | None, blocks: int | None) -> dict[str, Any]:
    """Every block's heartbeat advanced: `beats` one per block (0 = never ran), `blocks` launched."""
    if beats is None or blocks is None:
        return check(None, None, blocks, "no blocks: CPU threads, no kernel")
    ran = sum(1 for b in beats if b)
    idle = [i for i, b in enumerate(beats) if not b]
    return check(
        ran == blocks and len(beats) == blocks,
        ran,
        int(blocks),
        f"{ran} of {blocks} blocks beat" + (f"; block {idle[0]} never ran" if idle else ""),
    )


def payload(verified: bool, errors: int | None, reads: int | None = None) -> dict[str, Any]:
    """The verified reads' data held the known pattern (`errors` mismatching words or LBAs)."""
    if not verified or errors is None:
        return check(None, None, 0, "no payload check: verify off or no known pattern on this target")
    if reads is not None and reads <= 0:
        return check(False, int(errors), 0, "verify on but no read was verified")
    return check(errors == 0, int(errors), 0, f"{errors} mismatches in the verified reads")


def littles_law(
    iops: float, mean_ns: float | None, in_flight: int | None, window_s: float | None = None
) -> dict[str, Any]:
    """IOPS x mean latency (or round time) ~= commands in flight: value = the ratio. The tolerance
    LITTLE_MIN..LITTLE_MAX widens by mean latency / window on both sides: a command in flight at either
    edge of the window counts there or not (the same latency in a short window weighs more)."""
    slack = float(mean_ns) * 1e-9 / float(window_s) if mean_ns and window_s else 0.0
    lo, hi = round(LITTLE_MIN - slack, 4), round(LITTLE_MAX + slack, 4)
    if not mean_ns or not in_flight or not iops:
        return check(None, None, [lo, hi], "no mean latency (latency sampling off) or no I/O")
    ratio = float(iops) * float(mean_ns) * 1e-9 / float(in_flight)
    return check(
        lo <= ratio <= hi,
        round(ratio, 4),
        [lo, hi],
        f"IOPS x mean latency / {in_flight} in flight = {ratio:.3f} (tolerance {lo}..{hi})",
    )


def window(ios: int | None, windows: Sequence[float] | None, runtime_s: float | None) -> dict[str, Any]:
    """The run measured something: `ios` completions counted in the window (> 0) and each thread's window
    (`windows`, s) at least WINDOW_MIN x the asked `runtime_s`. value: the shortest window; expect: its floor."""
    if runtime_s is None or ios is None:
        return check(None, None, None, "no runtime asked (a fill, or a run of a fixed amount of work)")
    floor = round(float(runtime_s) * WINDOW_MIN, 6)
    wins = [float(w) for w in windows or []]
    shortest = min(wins) if wins else 0.0
    if not ios:
        why = f"no I/O in the measurement window ({shortest:.6f} s of the {runtime_s:g} s asked)"
        return check(False, round(shortest, 6), floor, why)
    if shortest < floor:
        i = wins.index(shortest)
        why = (
            f"thread {i}'s measurement window lasted {shortest:.6f} s of the {runtime_s:g} s asked "
            f"(under {WINDOW_MIN:g} of it: the thread started it late or ended it early, left without a CPU or "
            "stalled in a call)"
        )
        return check(False, round(shortest, 6), floor, why)
    return check(True, round(shortest, 6), floor, f"{ios} I/Os; windows {shortest:.6f} s or more of {runtime_s:g} s")


def emulator_headroom(limited: bool | None, headroom: float | None) -> dict[str, Any]:
    """The emulator was not the limiter (part 1's emulator_limited / emulator_headroom). A flag, not a failure
    (FLAGS): a run the emulator limited keeps checks_ok and is drawn marked, until leases show what its counters
    read on a GPU."""
    if limited is None:
        return check(None, headroom, None, "no emulator verdict on this target")
    return check(
        not limited,
        headroom,
        None,
        "flagged: the emulator set the rate (drawn marked)" if limited else "the device model set the rate",
    )


#: Checks that flag a record instead of failing it: checks_ok ignores them, the figures draw such records marked.
FLAGS = ("emulator_headroom",)


def attach(rec: dict[str, Any], checks: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Put `checks` and `checks_ok` into rec (returned); a check in FLAGS does not count for checks_ok."""
    rec["checks"] = dict(checks)
    rec["checks_ok"] = not any(c.get("ok") is False for k, c in checks.items() if k not in FLAGS)
    return rec


def failed_checks(rec: Mapping[str, Any]) -> list[str]:
    """Names of the checks of rec with ok False (the FLAGS not among them)."""
    return [
        k
        for k, c in (rec.get("checks") or {}).items()
        if isinstance(c, dict) and c.get("ok") is False and k not in FLAGS
    ]


def excluded(rec: Mapping[str, Any]) -> str | None:
    """Why rec is left out of figures (EXCLUDED_*), or None: a failed point, a record whose self-checks
    failed. A run the emulator limited (``emulator_limited``) stays in, drawn marked (``flagged``)."""
    if rec.get("failed"):
        return EXCLUDED_FAILED
    if rec.get("checks_ok") is False:
        return EXCLUDED_CHECKS
    return None


def flagged(rec: Mapping[str, Any]) -> str | None:
    """Why rec is drawn marked, or None: the emulator, not the device model, set its rate."""
    return EXCLUDED_LIMITED if rec.get("emulator_limited") is True else None


def _pct(v: np.ndarray, q: float) -> int:
    return int(np.percentile(v, q, method="nearest"))


def breakdown(sample_every: int, clock: str, phases: Sequence[Sequence[int]] | None) -> dict[str, Any]:
    """The record's ``breakdown``: `phases` one sequence of ns per phase (PHASES order, equal lengths);
    sample_every 0 = off (the phase entries are None, ``off`` says by what; None when on)."""
    if clock not in CLOCKS:
        raise ValueError(f"clock={clock!r}: must be one of {', '.join(CLOCKS)}")
    out: dict[str, Any] = {"sample_every": int(sample_every), "samples": 0, "clock": clock}
    out["off"] = None if sample_every else "sample_every=0"
    cols = [np.asarray(p, dtype=np.int64) for p in phases] if sample_every and phases else []
    if cols and len(cols) != len(PHASES):
        raise ValueError(f"phases: {len(cols)} sequences, expected {len(PHASES)} ({', '.join(PHASES)})")
    n = len(cols[0]) if cols else 0
    out["samples"] = n
    for name, col in zip(PHASES, cols or [None] * len(PHASES)):
        out[f"{name}_ns"] = {"p50": _pct(col, 50), "p99": _pct(col, 99)} if n else None
    return out


# ------------------------------------------------------------------------------------------ per engine
def device_checks(rec: dict[str, Any], res: Mapping[str, Any], *, verify: bool, rw: str) -> dict[str, Any]:
    """Checks and breakdown of a device-initiated record (engines/gpu.make_record: the cuda-run engine and
    its CPU stand-in), from the engine's counts: submitted/completed, one heartbeat per block (beats,
    blocks), the mean round time against the commands in flight at once (in_flight), verify errors, the
    emulator's verdict (already in rec), and the sampled commands' phases (sample_every, clock, phases)."""
    reads = rw in ("read", "randread") or bool(res.get("readback"))
    c = {
        "completions": completions(res.get("submitted"), res.get("completed")),
        "kernel_ran": kernel_ran(res.get("beats"), res.get("blocks")),
        "payload": payload(bool(verify) and reads, res.get("verify_errors"), res.get("ios_total")),
        "littles_law": littles_law(rec["iops"], res.get("round_ns_mean"), res.get("in_flight"), rec["runtime_s"]),
        "emulator_headroom": emulator_headroom(rec.get("emulator_limited"), rec.get("emulator_headroom")),
    }
    if res.get("littles_law_na"):  # e.g. a rounds run: its "window" is the whole kernel, start-up included
        c["littles_law"] = check(None, None, [LITTLE_MIN, LITTLE_MAX], res["littles_law_na"])
    rec["breakdown"] = breakdown(res.get("sample_every") or 0, res.get("clock") or "globaltimer", res.get("phases"))
    return attach(rec, c)


def perf_checks(
    rec: dict[str, Any], res: Mapping[str, Any], *, verify: bool, rw: str, runtime: float | None = None
) -> dict[str, Any]:
    """Checks of a CPU-path perf record (engines/perf.make_record). The perf engine counts completions per
    thread and per device: `completions` compares them with its `submitted` count where it reports one,
    else the per-device completion counts with the total (a lost or double count). In flight: qdepth per
    channel (queue or ring) of every thread. `runtime`: the runtime asked (the ``window`` check; None: n/a)."""
    threads = res.get("threads") or []
    if res.get("submitted") is not None:
        comp = completions(res.get("submitted"), res.get("ios"), "completions counted")
    elif res.get("dev_ios"):
        comp = completions(res["ios"], sum(res["dev_ios"]), "completions counted per device")
        comp["detail"] += " (no submission count: per-device completion counts against the total)"
    else:
        comp = completions(None, res.get("ios"))
    lat = res.get("lat") or {}
    nchans = sum(int(t.get("nchans") or 0) for t in threads)
    reads = rw in ("read", "randread", "randrw")
    c = {
        "completions": comp,
        "kernel_ran": kernel_ran(None, None),
        "payload": payload(bool(verify) and reads, res.get("verify_errors"), res.get("reads")),
        "littles_law": littles_law(
            rec["iops"], lat.get("mean"), rec["qdepth"] * nchans if nchans else None, rec["runtime_s"]
        ),
        "emulator_headroom": emulator_headroom(rec.get("emulator_limited"), rec.get("emulator_headroom")),
        "window": window(res.get("ios"), [t.get("window_s") or 0.0 for t in threads], runtime),
    }
    return attach(rec, c)
