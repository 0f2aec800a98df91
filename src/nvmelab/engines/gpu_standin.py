# SPDX-License-Identifier: BSD-3-Clause
"""The CPU stand-in of the cuda-run engine, for rehearsing the GPU lease plan on a host without a GPU.

    rec = nvmelab.engines.gpu_standin.run_cuda_standin(target="gpu-emu://?profile=pm1753&ndev=16",
                                                       iosize=512, qdepth=128, nqueues=2, runtime=0.5)

Same parameters as nvmelab.engines.gpu.run_cuda, taken from cuda-run's table (``_native.CRUN_PARAMS``; the
study runner calls either with a run's parameters): a row the stand-in cannot honour (a GPU ordinal, a poll
backoff, verify, ...) or a key neither declares is refused with its name, never ignored;
the gpu-emu:// target becomes the CPU emulator with the same profile, ``emu://?profile=P&ndev=N``
(``STANDIN_MAX_NDEVS`` devices at most: one CPU thread drives them all), and the native stand-in
(src/engine/gpuq_standin.h) drives lock-step rounds on its queue pairs with the queue code of the GPU
kernel (SQE building, PRPs from a lookup table, completions matched by CID with a deadline). Records
say tool ``nvmelab-gpuq-cpu`` and ``standin: true``: they prove that the lease's steps produce records,
never a GPU rate, and are never published (make rehearse-gpu-host writes them outside data/results).
With ``corun`` > 0 a host-side co-runner (engines/gpu_corun.py CpuCorun) runs beside the polling thread and
fills the record's ``corun`` field as the GPU engine does (``kind: "cpu-standin"``); ``nvml`` is filled
by the same sampler (host/nvml.py), which says why nothing is readable on a host without a GPU.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..driver import uri as _uri
from ..host import cpus as _cpus
from ..host import provenance as _prov
from ..results.records import validate
from . import gpu as _gpu
from .gpu import match_block

log = logging.getLogger(__name__)

TOOL = "nvmelab-gpuq-cpu"
#: Devices the stand-in emulates at most (one CPU thread drives every queue of every device).
STANDIN_MAX_NDEVS = 4
#: Target keys the stand-in sets its own way besides the gpu-emu-only rows (_dropped_keys): the payload handling
#: (data, ooo: the stand-in's reads take the CPU emulator's defaults), ndev (from ndevs), and `mode` (an emu://
#: target of the GPU engine serves from a thread of its own, mode=thread; the stand-in drives it inline).
_STANDIN_SETS = ("data", "ooo", "ndev", "mode")


def _dropped_keys() -> frozenset[str]:
    """The target keys the stand-in drops: the key table's gpu-emu-only rows (src/nvme/emu/emu_keys.h), and
    the ones it sets itself (_STANDIN_SETS)."""
    from .. import _native

    gpu_only = {r["name"] for r in _native.emu_keys() if r["emulators"] == ("gpu-emu",)}
    return frozenset(gpu_only | set(_STANDIN_SETS))


#: cuda-run's table rows (src/engine/crun_params.h) the stand-in runs as asked (rw: reads only, checked).
HONOURED = (
    "rw",
    "iosize",
    "qdepth",
    "nqueues",
    "ndevs",
    "runtime",
    "warmup",
    "rounds",
    "seed",
    "timeout",
    "sample_every",
    "match",
    "corun",
)
#: The rows it runs one way only: accepted at that value (or absent), refused at any other. Its one thread
#: spins on the completion queues (poll "spin"); the rows in AS_DEFAULT it runs at the table's default only:
#: no GPU (gpu 0, occupancy never limits), the target's whole namespace, neither stamps nor read-back. Any
#: other table row (a new one) is refused when given.
AS_RUN = {"poll": "spin"}
AS_DEFAULT = ("gpu", "occupancy", "lba_count", "verify", "readback")
_NEVER = object()
#: The stand-in's own keywords (fault injection, the missing-fence model) and their defaults.
OWN_PARAMS = {"idle_pair": None, "unordered": 0, "fence": True, "sq_readback": True}


def standin_target(target: str, ndevs: int | None) -> tuple[str, int]:
    """(the emu:// URI the stand-in drives for a gpu-emu:// target, or for the GPU engine's emu://?mode=thread
    target, and its device count)."""
    if not _uri.is_emulated(str(target)):
        raise ValueError(f"target={target!r}: the CPU stand-in replaces gpu-emu:// and emu:// targets only")
    u = _uri.parse(target)
    from .. import _native

    n = int(ndevs or u.get("ndev", _native.CRUN_DEFAULT_NDEVS))  # the published server's count (crun_params.h)
    n = max(1, min(n, STANDIN_MAX_NDEVS))
    keep = {k: v for k, v in u.params if k not in _dropped_keys()}
    return _uri.with_params("emu://", **keep, ndev=n), n


def resolve(target: str = _gpu.DEFAULT_TARGET, **given: Any) -> dict[str, Any]:
    """One stand-in run's parameters as one mapping: cuda-run's table (``_native.CRUN_PARAMS``, its defaults;
    ``sample_every`` absent: the rule of nvme/bd_sample.h, as cuda-run), cuda-run's Python-only keys
    (gpu.PYTHON_PARAMS), the call's labels (gpu.CALL_KEYS) and the stand-in's own (OWN_PARAMS). A key that is
    none of these is refused (TypeError naming it); so is a value the stand-in cannot run: a table row outside
    HONOURED given at another value than the one it runs (AS_RUN; a new row: any value), ncpus other than 1,
    another backend, payload other than host (ValueError naming the key)."""
    table = {p["name"]: p["default"] for p in _gpu.params()}
    known = set(table) | set(_gpu.PYTHON_PARAMS) | set(_gpu.CALL_KEYS) | set(OWN_PARAMS)
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(f"CPU stand-in: unknown parameter(s) {', '.join(unknown)}; it takes {', '.join(sorted(known))}")
    asked = {k: v for k, v in given.items() if v is not None}
    as_run = {**AS_RUN, **{k: table[k] for k in AS_DEFAULT}}
    cannot = [f"{k}={v!r}" for k, v in asked.items() if k in table and k not in HONOURED and v != as_run.get(k, _NEVER)]
    if cannot:
        raise ValueError(
            f"CPU stand-in: cannot honour {', '.join(cannot)}; it runs "
            + ", ".join(f"{k}={v!r}" for k, v in as_run.items())
            + f" and takes as asked {', '.join(HONOURED)}"
        )
    if asked.get("ncpus", 1) != 1:
        raise ValueError(f"ncpus={asked['ncpus']!r}: the stand-in, as cuda-run, drives every queue from one thread")
    if asked.get("backend") not in (None, _gpu.BACKEND):
        raise ValueError(f"backend={asked['backend']!r}: cuda-run has one backend, {_gpu.BACKEND!r}")
    if asked.get("payload", "host") != "host":
        raise ValueError(f"payload={asked['payload']!r}: the stand-in's payload is host memory (payload='host')")
    p = {**table, "sample_every": None, "seed": None, "ndevs": None, **_gpu.PY_DEFAULTS, **OWN_PARAMS, **asked}
    p["target"] = target
    return p


def _as_run(p: dict[str, Any], ndevs: int) -> dict[str, Any]:
    """The record's ``engine_params``: every row of cuda-run's table as the stand-in ran it: the rows it honours
    as asked (``ndevs`` the devices it drove; ``sample_every`` None: the rule of nvme/bd_sample.h), the others at
    the one value it runs them."""
    fixed = {**AS_RUN, **{k: _gpu.default(k) for k in AS_DEFAULT}}
    out = {
        r["name"]: p[r["name"]] if r["name"] in HONOURED else fixed.get(r["name"], p[r["name"]]) for r in _gpu.params()
    }
    out.update(ndevs=ndevs, seed=p["seed"] or 1)
    return out


def run_cuda_standin(target: str = _gpu.DEFAULT_TARGET, **params: Any) -> dict:
    """One stand-in run -> one record (see the module docstring). Keywords: those of gpu.run_cuda (cuda-run's
    table and its Python-only keys; see `resolve` for what is refused) and OWN_PARAMS. ValueError for a
    parameter it refuses.

    sample_every: stamp one command in N for the record's breakdown (0: off). timeout: per-completion
    deadline in s (a lost completion raises TimeoutError). idle_pair: fault injection
    for tests (pair idle_pair - 1 never runs; its record fails the kernel_ran check). match: "cid" |
    "positional" | "scan" (src/nvme/nvme_gpuq_match.h); rounds > 0: exactly that many rounds per queue pair
    instead of the timed window. unordered, fence, sq_readback: the missing-fence model (src/nvme/gpuq_ctrl.h
    nvme_gpuq_round_opt): the last ``unordered`` SQE stores of a round land after the doorbell unless the
    fence orders them; the read-back of the last SQE refuses to ring for SQEs that have not landed (OSError
    EIO)."""
    from .. import _native

    p = resolve(target, **params)
    rw, iosize, qdepth, nqueues, ndevs = p["rw"], int(p["iosize"]), int(p["qdepth"]), p["nqueues"], p["ndevs"]
    runtime, warmup, corun, seed = p["runtime"], p["warmup"], p["corun"], p["seed"]
    if rw not in ("read", "randread"):
        raise ValueError(f"rw={rw!r}: the CPU stand-in reads only (read, randread)")
    uri, n = standin_target(target, ndevs)
    from ..host import nvml as _nvml
    from . import gpu_corun

    host = _cpus.host_state()
    co = gpu_corun.CpuCorun(corun, warmup, runtime, _native.CRUN_CORUN_SHARE) if corun else None
    knobs = {k: p[k] for k in ("sample_every", "idle_pair") if p[k] is not None}
    with _nvml.SmSampler() as sampler:
        t0 = time.monotonic()
        if co:
            co.start()
        raw = dict(
            _native.gpuq_standin_run(
                uri,
                int(nqueues),
                qdepth,
                iosize,
                float(runtime),
                float(warmup),
                seed or 1,
                match=str(p["match"]),
                rounds=int(p["rounds"]),
                timeout=float(p["timeout"]),
                unordered=int(p["unordered"]),
                fence=bool(p["fence"]),
                readback=bool(p["sq_readback"]),
                **knobs,
            )
        )
        t1 = time.monotonic()
    corun_raw = co.finish(t0, t1) if co else None
    raw["sq_readback"] = bool(p["sq_readback"])
    info = {"backend": TOOL, "profile": _uri.get(uri, "profile", "nominal"), "scale": 1.0, "devices": n}
    rec = _gpu.make_record(
        standin_result(raw, iosize=iosize, qdepth=qdepth, profile=info["profile"], corun=int(corun or 0)),
        target=target,
        rw=rw,
        iosize=iosize,
        qdepth=qdepth,
        nqueues=int(nqueues),
        study=p["study"],
        repetition=p["repetition"],
        seed=seed,
        warmup=warmup,
        stress=p["stress"],
        thr_sib=p["thr_sib"],
        host=host,
        verify=False,
        tool=TOOL,
        provenance=_prov.capture(info, standin_target=uri),
        engine_params=_as_run(p, n),
    )
    rec.update(standin=True, standin_rounds=raw["rounds"], ndevs_requested=int(ndevs) if ndevs else None)
    # the window's edges are not reported by the stand-in: the call less its warm-up (never a GPU figure)
    w0 = int((t0 + float(warmup)) * 1e9)
    rec.update(
        corun=gpu_corun.corun_field(corun_raw, corun, gpu_corun.KIND_CPU),
        nvml=sampler.window(w0, max(w0, int(t1 * 1e9))),
    )
    rec["match"] = match_block(
        raw["match"],
        completions=raw["ios"],
        looks=raw["looks"],
        cq_bytes=raw["cq_bytes"],
        stale=raw["stale"],
        foreign=raw["foreign"],
        misattributed=raw["misattributed"],
    )
    rec["match"]["expected_errors"] = raw["expected_errors"]
    return validate(rec)


def standin_result(raw: dict, *, iosize: int, qdepth: int, profile: str, corun: int = 0) -> dict:
    """The stand-in's raw result in the shape of the cuda-run engine's (gpu.make_record reads it); the
    GPU-only fields are None. One CPU thread drives the pairs in turn: qdepth commands in flight."""
    win = raw["window_s"]
    iops = raw["ios"] / win if win > 0 else 0.0
    rounds = raw["rounds"]
    return {
        "window_s": win,
        "iops": iops,
        "bytes_per_s": iops * iosize,
        "ios": raw["ios"],
        "errors": raw["errors"],
        "first_error": raw["first_status"] or None,
        "ndevs": raw["ndevs"],
        "profile": profile,
        "scale": 1.0,
        "ios_total": raw["ios"],
        "threads": None,
        "kernel_s": None,
        "round_ns_mean": raw["round_ns_sum"] / rounds if rounds else 0.0,
        "round_ns_max": None,
        "queue_rounds": raw["beats"],
        "submitted": raw["submitted"],
        "completed": raw["completed"],
        "beats": raw["beats"],
        "blocks": len(raw["beats"]) if raw.get("beats") is not None else None,
        "in_flight": qdepth,
        "sample_every": raw["sample_every"],
        "clock": "clock_gettime",
        "phases": raw["phases"],
        "sq_readback": raw.get("sq_readback", True),
        "littles_law_na": _gpu.CORUN_LITTLE_NA if corun else None,
    }


def match_grid(
    modes: tuple[str, ...] = ("cid", "positional", "scan"),
    qdepths: tuple[int, ...] = (8, 32, 128),
    windows: tuple[int, ...] = (0, 8),
    *,
    profile: str = "null",
    err_every: int = 64,
    rounds: int = 100,
    nqueues: int = 1,
    seed: int = 1,
) -> list[dict]:
    """The cuda_match grid on the CPU stand-in: every mode x depth x completion order (``ooo_win`` of each
    window; 0 = in order) for ``rounds`` rounds on one emulated device with ``err_every``. Its records hold
    counters of the queue code (looks, CQ bytes, misattributed statuses), never a GPU's rates."""
    out = []
    for w in windows:
        target = _uri.with_params(
            "gpu-emu://", profile=profile, ndev=1, err_every=int(err_every), ooo_win=int(w) if w > 1 else None
        )
        for qd in qdepths:
            for mode in modes:
                out.append(
                    run_cuda_standin(
                        target=target,
                        qdepth=int(qd),
                        nqueues=int(nqueues),
                        runtime=1.0,
                        warmup=0.0,
                        rounds=int(rounds),
                        seed=seed,
                        match=mode,
                        study="cuda_match",
                    )
                )
    return out
