# SPDX-License-Identifier: BSD-3-Clause
"""The closed-loop performance engine from Python: one call, one record.

    rec = nvmelab.engines.perf.run(target="emu://?profile=null", rw="randread", iosize=512,
                           qdepth=128, nqueues=1, ncpus=1, runtime=5, warmup=1)

`run` validates every parameter before any I/O (ValueError naming the
parameter), pins one worker thread per logical CPU of `ncpus` physical cores (one CPU
per core, or every thread sibling with thr_sib=True; or the explicit `cpus`), runs the native engine
(src/engine/perf.c) with the GIL released, samples the CPU frequencies of the used
CPUs every 0.5 s, and returns one record that passes nvmelab.results.records.validate.
Ctrl-C stops the run cleanly and raises KeyboardInterrupt: no partial record.

Targets: emu://..., pci://..., vfio-user:///socket (the user-space driver), file:///path and
blk:///dev/X (kernel paths, backend "io_uring" (default) or "psync"; psync keeps
one I/O in flight per thread, so qdepth must be 1).

`make_file(path, size)` creates a target file holding real data (not holes).
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

from ..driver import uri as _uri
from ..host import cpus as _cpus
from ..host import provenance as _prov
from ..results import checks as _checks
from ..results.records import engine_record, measured_fields, validate
from . import table as _tables

log = logging.getLogger(__name__)

PATTERNS = ("read", "randread", "write", "randwrite", "randrw")
KERNEL_BACKENDS = ("psync", "io_uring")
#: The schemes perf.run takes (nvmelab.driver.uri.kind); gpu-emu:// is named to refuse it with the reason.
SCHEMES = ("emu", "pci", "vfio-user", "file", "blk", "gpu-emu")
#: The kernel paths (a backend: io_uring or psync).
KERNEL_SCHEMES = ("file", "blk")
#: The driver's schemes and the backend name their records carry.
_DRIVER_BACKENDS = {"emu": "nvmelab-emu", "pci": "nvmelab-pci", "vfio-user": "nvmelab-vfio-user"}
PERCENT = 100.0
#: The engine's native parameter table (engines.table).
TABLE = "PERF_PARAMS"
#: Chunk written by make_file.
MAKE_FILE_CHUNK = 1 << 20
#: A run's keys beyond the engine's C table (perf_params.h, `params()`): the target and what Python resolves
#: before the engine: the kernel backend, the CPUs to pin (ncpus cores, thr_sib: every thread sibling, or
#: the explicit cpus), the prefill of a verified read. The study specs admit these and every table row.
PYTHON_PARAMS = ("target", "backend", "ncpus", "thr_sib", "cpus", "prefill")
#: A call's keywords that label its record or give consent, not run parameters (a spec does not set them).
CALL_KEYS = ("study", "repetition", "stress", "allow_write")
#: Defaults of the keys above (the target's is run's).
_PY_DEFAULTS = {
    "backend": None,
    "ncpus": 1,
    "thr_sib": False,
    "cpus": None,
    "prefill": None,
    "study": "adhoc",
    "repetition": 0,
    "stress": False,
    "allow_write": False,
}
#: Table rows Python derives from the pinned CPUs (checked there, not by the table's check).
_PINNED = ("nthreads",)
#: The run's keys a record carries as given (make_record; the CPUs, runtime and host are added by run).
_RECORD_KEYS = (
    "target",
    "rw",
    "iosize",
    "qdepth",
    "nqueues",
    "alldevs",
    "ncpus",
    "thr_sib",
    "stress",
    "study",
    "repetition",
    "seed",
    "rwmix",
    "verify",
    "warmup",
)


def _native():
    from .. import _native

    return _native


def backend_name(target: str, backend: str | None) -> str:
    """The backend a target/backend pair runs on ("nvmelab-emu", "io_uring", ...)."""
    scheme = _uri.kind(target)
    if scheme in KERNEL_SCHEMES:
        return backend or "io_uring"
    return _DRIVER_BACKENDS.get(scheme) or backend or "?"


def _int(name: str, v: Any, lo: int = 1, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{name}={v!r}: must be an integer")
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ValueError(f"{name}={v}: must be {rng}")
    return v


def params() -> list[dict]:
    """The engine's run parameters as declared once in C (src/engine/perf_params.h): name, type,
    min, max, default, doc. The CLI options and `nvmelab perf params` are made from this list."""
    return _tables.rows(TABLE)


def default(name: str) -> Any:
    """The table's default of one run parameter."""
    return _tables.default(TABLE, name)


def params_markdown() -> str:
    """The parameter reference as a Markdown table, made from params()."""
    return _tables.markdown(TABLE)


def check_params(p: dict[str, Any]) -> list[int]:
    """Validate a run's mapping (see `resolve`); returns the CPU list to pin to.

    The engine's own parameters are checked by the one C check of the parameter table
    (perf_params.h); this adds only what the engine does not see: the URI, the CPUs, the backend."""
    target, backend = p["target"], p["backend"]
    if not isinstance(target, str) or _uri.kind(target) not in SCHEMES:
        raise ValueError(
            f"target={target!r}: use emu://..., pci://..., vfio-user:///socket, file:///path or blk:///dev/X"
        )
    if _uri.kind(target) == "gpu-emu":
        raise ValueError(
            f"target={target!r}: GPU-emulated targets are driven by the device-initiated engine, not perf.run"
        )
    ncpus = _int("ncpus", p["ncpus"], 1, 256)
    _native().perf_params_check(**{k: v for k, v in p.items() if k in _table() and k not in _PINNED})
    if backend is not None:
        if _uri.kind(target) not in KERNEL_SCHEMES:
            raise ValueError(f"backend={backend!r}: only file:// and blk:// targets take a backend")
        if backend not in KERNEL_BACKENDS:
            raise ValueError(f"backend={backend!r}: must be one of {', '.join(KERNEL_BACKENDS)}")
    cpus = p["cpus"]
    if cpus is not None:
        cpus = _cpus.check_cpus(list(cpus))
        if not p["thr_sib"] and len(cpus) != ncpus:
            raise ValueError(f"cpus: {len(cpus)} CPU ids given for ncpus={ncpus} (thr_sib=False: one CPU per core)")
    else:
        cpus = _cpus.cpumask(ncpus, bool(p["thr_sib"]))
    if p.get("nthreads") is not None and p["nthreads"] != len(cpus):
        raise ValueError(
            f"nthreads={p['nthreads']!r}: one thread per pinned CPU, and ncpus={ncpus} thr_sib={p['thr_sib']}"
            f" cpus={p['cpus']} pin {len(cpus)}"
        )
    return cpus


def make_file(path: str | os.PathLike, size: int, *, seed: int = 0) -> Path:
    """Create (or replace) `path` holding `size` bytes of pseudo-random data, fsynced.

    Real data, so reads are served from allocated blocks, not holes. `size` must be
    a positive multiple of 4096.
    """
    _int("size", size)
    if size % 4096:
        raise ValueError(f"size={size}: must be a multiple of 4096 bytes")
    path = Path(path)
    rng = random.Random(seed)
    chunk = rng.randbytes(MAKE_FILE_CHUNK)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            left = size
            i = 0
            while left:
                n = min(left, MAKE_FILE_CHUNK)
                # vary each chunk a little so no two blocks are identical
                f.write(i.to_bytes(8, "little") + chunk[8:n])
                left -= n
                i += 1
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def open_target(target: str, backend: str | None = None, *, allow_write: bool = False, need_write: bool = False):
    """Open a target for the engine (a context manager): .info(), .check(**p), .run(**p), .fill(**p)."""
    from ..driver.errors import check_uri

    return _native().PerfTarget(check_uri(target, "target"), backend or "", bool(allow_write), bool(need_write))


def fill(
    target: str,
    *,
    iosize: int = 4096,
    qdepth: int = 32,
    backend: str | None = None,
    seed: int = 1,
    ndevs: int | None = None,
    lba_start: int = 0,
    lba_count: int = 0,
    allow_write: bool = False,
) -> dict:
    """Write the verify stamp over the LBA range once (what a verified read run checks)."""
    with open_target(target, backend, allow_write=allow_write, need_write=True) as t:
        return t.fill(
            iosize=iosize,
            qdepth=qdepth,
            nthreads=1,
            ndevs=ndevs or 0,
            seed=seed,
            lba_start=lba_start,
            lba_count=lba_count,
        )


def _table() -> dict[str, Any]:
    """The engine's table: each run parameter's default, by name (perf_params.h)."""
    return _tables.defaults(TABLE)


def resolve(target: str = "emu://", **given: Any) -> dict[str, Any]:
    """One run's parameters as one mapping (engines.table.resolve): every table row (its default where not
    given or None), every key of PYTHON_PARAMS and CALL_KEYS (theirs, _PY_DEFAULTS), seed 1 + repetition unless
    given. A key that is none of these is refused (TypeError naming it): the engine cannot honour it. Values
    are checked by `check_params`, not here."""
    extra = {**_PY_DEFAULTS, "nthreads": None}
    return _tables.resolve("perf.run", _table(), extra, PYTHON_PARAMS + CALL_KEYS, target, given)


def run(target: str = "emu://", **params: Any) -> dict:
    """One closed-loop run -> one record (see the module docstring and DESIGN.md "Records").

    Keywords: every row of the engine's table (`params()`, src/engine/perf_params.h: rw, iosize, qdepth,
    nqueues, ndevs, runtime, warmup, rwmix, batch, seed, ...; None or absent: the table's default), the
    Python-only keys of PYTHON_PARAMS (backend, ncpus, thr_sib, cpus, prefill) and the call's CALL_KEYS
    (study, repetition, stress, allow_write). Any other keyword is refused (TypeError naming it).

    verify: stamp every written LBA and check every read one; mismatches are
    counted in `verify_errors` with the first bad (device, LBA) in `verify_first_bad`.
    prefill: write the stamps over the range before a verified run that reads
    (default: True when verify and the pattern reads); pass False to check data
    written earlier (e.g. by `fill`).
    lat: sample latency (False for the hot-path benchmark).
    bd: the per-I/O time breakdown on a share of the timed commands (default on; False keeps latency sampling
    and records ``breakdown.sample_every`` 0: tests/bench/bench_breakdown_cost.py measures its cost this way).
    alldevs: every thread gets `nqueues` queues on every device (the published CPU-initiated set-up, a
    queue per core per device); default: the devices are split among the threads.
    batch: commands queued per submission (doorbell write or io_uring_enter); 0 = the
    target's default: each I/O submitted at once on io_uring (as fio does), the whole
    refill per doorbell on emu:// and pci://.
    nthreads: one worker thread per pinned CPU; given, it must be the number ncpus/thr_sib/cpus pin.
    seed: default 1 + repetition.
    """
    p = resolve(target, **params)
    _int("repetition", p["repetition"], 0)
    pinned = check_params(p)
    _int("seed", p["seed"], 0)
    reads = p["rw"] in ("read", "randread", "randrw")
    writes = p["rw"] in ("write", "randwrite", "randrw")
    prefill = bool(p["verify"] and reads) if p["prefill"] is None else p["prefill"]
    engine = {k: bool(p[k]) if isinstance(d, bool) else p[k] for k, d in _table().items()}
    engine.update(nthreads=len(pinned), cpus=pinned, runtime=float(p["runtime"]), warmup=float(p["warmup"]))
    host = _cpus.host_state()
    with open_target(target, p["backend"], allow_write=p["allow_write"], need_write=writes or prefill) as t:
        info = t.info()
        t.check(**engine)  # every parameter against the target, before any I/O
        if prefill:
            log.info("prefill: stamping the LBA range of %s", target)
            t.fill(**{**engine, "rw": "write"})
        sampler = _cpus.FreqSampler(pinned)
        with sampler:
            res = t.run(**engine)
    return make_record(
        res,
        info,
        **{k: p[k] for k in _RECORD_KEYS},
        runtime=float(p["runtime"]),
        cpus=pinned,
        cpu_freqs=sampler.result(),
        host=host,
        engine_params={k: engine[k] for k in _table()},
    )


def _percent(cpu_s: float | None, window_s: float | None) -> float | None:
    return round(cpu_s / window_s * PERCENT, 1) if cpu_s is not None and window_s else None


def _thread0_window(res: dict) -> float | None:
    thr = res.get("threads") or []
    return thr[0]["window_s"] if thr else res.get("window_s")


def io_stack_cpu_usage(res: dict, backend: str) -> float | None:
    """A record's ``cpu_usage``: the CPU the host-side I/O stack used, in percent of one CPU.

    For the kernel backends (psync, io_uring on a file or block device) that is the whole
    process over the window: io_uring hands reads it cannot finish inline to io-wq kernel
    threads of the process, whose time the submitting threads never see (on a tmpfs file about
    half of the total). For the user-space driver (``nvmelab-*``) it is the engine threads
    only: an emulated controller runs in threads of this process too, and those are the
    device, not the I/O stack."""
    if backend.startswith("nvmelab-"):
        return _percent(res["cpu_s"], res["window_s"])
    return _percent(res.get("proc_cpu_s"), _thread0_window(res))


def lat_record(lat: dict | None) -> dict | None:
    """A record's ``lat_ns``: the percentiles of the sampled latencies, how many commands were timed
    (``count``) and one command in how many on average (``sample_every``, perf.h's sampling period)."""
    if lat is None:
        return None
    keys = ("p50", "p90", "p99", "p999", "max", "min", "mean", "count", "sample_every")
    return {k: lat[k] for k in keys}


def make_record(
    res: dict,
    info: dict,
    *,
    target: str,
    rw: str,
    iosize: int,
    qdepth: int,
    nqueues: int,
    ncpus: int,
    thr_sib: bool,
    stress: bool,
    study: str,
    repetition: int,
    cpus: list[int],
    cpu_freqs: list | None,
    host: dict,
    seed: int,
    rwmix: int,
    verify: bool,
    warmup: float,
    alldevs: bool = False,
    runtime: float | None = None,
    engine_params: dict | None = None,
) -> dict:
    """Turn the engine's raw result into a record (nvmelab.results.records format) and validate it.
    `runtime`: the runtime asked (its ``window`` self-check: the window saw I/O and lasted half of it).
    `engine_params`: every row of the engine's table as it ran (the record's ``engine_params``)."""
    window = res["window_s"]
    lat = res["lat"]
    ndevs_used = len(res["dev_ios"]) or 1
    rec = engine_record(
        **measured_fields(res),
        study=study,
        tool="nvmelab",
        target=target,
        backend=info["backend"],
        rw=rw,
        iosize=iosize,
        qdepth=qdepth,
        nqueues=nqueues,
        ndevs=ndevs_used,
        ncpus=ncpus,
        host=host,
        thr_sib=thr_sib,
        stress=stress,
        repetition=repetition,
        warmup=warmup,
        seed=seed,
    )
    rec.update(
        {
            "lat_ns": lat_record(lat),
            "breakdown": res["breakdown"],
            "cpu_usage": io_stack_cpu_usage(res, info["backend"]),
            "engine_cpu_usage": _percent(res["cpu_s"], window),
            "process_cpu_usage": _percent(res.get("proc_cpu_s"), _thread0_window(res)),
            "cpu_freqs": cpu_freqs,
            "cpus": cpus,
            "threads": [
                {k: t[k] for k in ("cpu", "affinity", "cpu_last", "ios", "nchans", "cpu_s", "polls", "empty_polls")}
                for t in res["threads"]
            ],
            "dev_ios": res["dev_ios"],
            "alldevs": bool(alldevs),
            "provenance": _prov.capture(info),
        }
    )
    if engine_params is not None:
        rec["engine_params"] = dict(engine_params)
    if rw == "randrw":
        rec["rwmix"] = rwmix
    if verify:
        rec["verify_errors"] = res["verify_errors"]
        rec["verify_first_bad"] = res["first_bad"]
        if res["verify_errors"]:
            bad = res["first_bad"]
            log.warning(
                "verify: %d mismatching LBAs; first: device %d LBA %d", res["verify_errors"], bad["dev"], bad["lba"]
            )
    if res["errors"]:
        log.warning("%d commands failed; first: %s", res["errors"], res["first_error"])
    _checks.perf_checks(rec, res, verify=verify, rw=rw, runtime=runtime)
    return validate(rec)


def table(rec: dict) -> str:
    """A human-readable summary of one record."""
    lat = rec.get("lat_ns") or {}

    def us(k: str) -> str:
        return f"{lat[k] / 1000:.1f} us" if k in lat else "-"

    prov = rec["provenance"]
    rows = [
        ("target", rec["target"]),
        (
            "backend",
            rec["backend"]
            + (f" (profile {prov.get('profile')}, scale {prov.get('scale')})" if prov.get("profile") else ""),
        ),
        ("pattern", f"{rec['rw']}" + (f" ({rec['rwmix']}% reads)" if "rwmix" in rec else "")),
        ("iosize / qdepth", f"{rec['iosize']} B / {rec['qdepth']}"),
        ("nqueues / ndevs", f"{rec['nqueues']} / {rec['ndevs']}"),
        ("threads (cpus)", f"{rec['ncpus']} ({_cpus.format_cpu_list(rec['cpus'])}, thr_sib={rec['thr_sib']})"),
        ("runtime", f"{rec['runtime_s']:.2f} s (warm-up {rec['warmup_s']:.2f} s, not counted)"),
        ("IOPS", f"{rec['iops']:,.0f}"),
        ("bandwidth", f"{rec['mibs']:,.2f} MiB/s"),
        ("latency p50/p99/p99.9", f"{us('p50')} / {us('p99')} / {us('p999')}"),
        ("latency max", us("max")),
        ("CPU usage", "-" if rec["cpu_usage"] is None else f"{rec['cpu_usage']:.1f} %"),
        ("errors", str(rec["errors"])),
    ]
    if "verify_errors" in rec:
        bad = rec.get("verify_first_bad")
        rows.append(
            (
                "verify errors",
                f"{rec['verify_errors']}" + (f" (first: dev {bad['dev']} LBA {bad['lba']})" if bad else ""),
            )
        )
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)
