# SPDX-License-Identifier: BSD-3-Clause
"""Device-initiated I/O from Python: the cuda-run engine, GPU buffers without copies, a numba-cuda kernel.

    rec = nvmelab.engines.gpu.run_cuda(target="gpu-emu://?profile=pm1753", iosize=512, qdepth=128,
                                nqueues=2, ndevs=16, runtime=5, warmup=1)

`run_cuda` checks every parameter before touching the GPU (ValueError naming it), runs the native
engine (src/engine/cuda/cuda_run.cu) with the GIL released -- grid = devices x queues, one CUDA thread per
command in flight, lock-step rounds, completions matched by CID -- and returns one record in the format
of nvmelab.results.records (tool and backend "nvmelab-cuda"), with the GPU, the emulator's profile and scale in
its provenance. Ctrl-C ends the kernels and raises KeyboardInterrupt; no partial record.

Interop: `read_blocks` reads into any GPU buffer that exposes ``__cuda_array_interface__`` (a cupy array,
a numba device array) and hands back a zero-copy strided view of the blocks; `block_checksums` is the
numba-cuda example kernel that consumes them on the same GPU. `stamps` and `checksum_reference` are the
NumPy counterparts used to check both (also under numba's CUDA simulator, NUMBA_ENABLE_CUDASIM=1);
`read_and_checksum` does read + checksum + check in one call for a notebook.

Where there is no GPU, `status()` says why, and `run_cuda`, `device_buffer`, `read_blocks`, `block_checksums` and
`read_and_checksum` raise OSError(ENODEV) in one line with that reason (`require_gpu`), before numba or cupy
probe for a driver (numba's own error comes seconds later, over many lines). numba's CUDA simulator needs none.
"""

from __future__ import annotations

import errno
import logging
import os
from typing import Any

import numpy as np

from ..driver import uri as _uri
from ..host import provenance as _prov
from ..results import checks as _checks
from ..results.records import engine_record, measured_fields, validate
from . import table as _tables

log = logging.getLogger(__name__)

TOOL = "nvmelab-cuda"
BACKEND = "nvmelab-cuda"
PATTERNS = ("read", "randread", "write", "randwrite")
#: Where the payload of the real-controller path lives ("gpu" is refused with the reason).
PAYLOADS = ("host", "gpu")
DEFAULT_TARGET = "gpu-emu://?profile=null"
#: run_cuda's keys beyond cuda-run's C table (crun_params.h, `params()`): the target, and what lets a study
#: spec shared with the CPU engine call it (ncpus 1, thr_sib, backend: one host thread, one backend) and
#: where the real-controller path keeps its payload. The study specs admit these and every table row.
PYTHON_PARAMS = ("target", "backend", "ncpus", "thr_sib", "payload")
#: A call's keywords that label its record, not run parameters (a spec does not set them).
CALL_KEYS = ("study", "repetition", "stress")
#: Defaults of the keys above.
PY_DEFAULTS = {
    "backend": None,
    "ncpus": 1,
    "thr_sib": False,
    "payload": "host",
    "study": "adhoc",
    "repetition": 0,
    "stress": False,
}
#: The engine's native parameter table (engines.table).
TABLE = "CRUN_PARAMS"
#: LBA size of the stamps and read_lbas (the engine's bounds are its table, params()).
LBA_SIZE = 512
#: Threads per block of the checksum kernel.
CHECKSUM_THREADS = 128
STAMP_WORD = 8
#: Why a run with a co-runner is not held to Little's law (results/checks.py): its launches load the GPU (the
#: stand-in's: the CPU) for part of the kernel only, so the rounds are not steady.
CORUN_LITTLE_NA = "co-runner: its launches load part of the kernel, so the rounds are not steady"
_U64 = (1 << 64) - 1


def _native():
    from .. import _native

    return _native


def status() -> dict:
    """{'compiled', 'devices', 'reason'}: can device-initiated I/O run here, and if not, why."""
    try:
        nat = _native()
    except ImportError as exc:
        return {"compiled": False, "devices": 0, "reason": f"nvmelab native extension unavailable: {exc}"}
    if not hasattr(nat, "cuda_status"):
        return {"compiled": False, "devices": 0, "reason": "this build has no device-initiated I/O"}
    return dict(nat.cuda_status())


def available() -> tuple[bool, str]:
    """(True, "") when a CUDA GPU can run the engine, else (False, the reason)."""
    st = status()
    return (st["devices"] > 0, "" if st["devices"] > 0 else st["reason"])


def simulated() -> bool:
    """numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM, read by numba when it is imported): numba's kernels
    and device arrays then run on the CPU, no GPU needed."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0")


def require_gpu(what: str, *, simulator_ok: bool = False) -> None:
    """Raise OSError(ENODEV) naming `what` and why there is no CUDA device, in one line, before numba or cupy
    look for a driver. `simulator_ok`: numba's CUDA simulator (simulated()) will do instead. A build without
    device-initiated I/O cannot tell: then numba is asked (numba-cuda may still find a GPU)."""
    if simulator_ok and simulated():
        return
    ok, reason = available()
    if ok:
        return
    if not status()["compiled"]:
        try:
            from numba import cuda

            if cuda.is_available():
                return
            reason = f"no CUDA device (numba-cuda finds none; {reason})"
        except ImportError:
            reason = f"no CUDA device (numba-cuda is not installed; {reason})"
    raise OSError(errno.ENODEV, f"{what}: {reason}")


def device_info(gpu: int = 0) -> dict:
    """Name, compute capability, SMs, memory, driver/runtime versions and PCI address of a GPU."""
    return dict(_native().cuda_device_info(gpu))


# ------------------------------------------------------------------------------------------ checks
def params() -> list[dict]:
    """cuda-run's run parameters as declared once in C (src/engine/crun_params.h): name, type, min, max,
    default, doc. The CLI options of `nvmelab perf cuda-run` are made from this list."""
    return _tables.rows(TABLE)


def default(name: str) -> Any:
    """The table's default of one cuda-run parameter."""
    return _tables.default(TABLE, name)


def _int(name: str, v: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{name}={v!r}: must be an integer")
    v = int(v)
    if v < lo or (hi is not None and v > hi):
        raise ValueError(f"{name}={v}: must be " + (f">= {lo}" if hi is None else f"in {lo}..{hi}"))
    return v


def check_params(target: str, ndevs: int | None = None, **table: Any) -> None:
    """Validate the parameters of run_cuda: the target and an explicit ndevs here, every table parameter
    (rw, iosize, qdepth, nqueues, runtime, warmup, rounds, timeout, poll, occupancy, ...) by the engine's
    own check (_native.crun_params_check, the table in src/engine/crun_params.h). ValueError names the
    first bad one."""
    served = _uri.schemes("cuda_run")  # the one table of schemes (src/nvme/scheme.h)
    if not isinstance(target, str) or _uri.kind(target) not in served:
        names = [s + "://" for s in served]
        listed = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
        raise ValueError(f"target={target!r}: cuda-run drives {listed} (emu:// with mode=thread)")
    from ..driver.errors import check_uri

    check_uri(target, "target")  # whole text, and old emulator spellings named once
    if _uri.kind(target) == "emu" and _uri.get(target, "mode") != "thread":  # as the driver, before any CUDA call
        raise ValueError(
            f"target={target!r}: the CPU emulator needs mode=thread (a service thread polls the doorbells)"
        )
    if ndevs is not None:
        _int("ndevs", ndevs, 1)
    _native().crun_params_check(**{k: v for k, v in table.items() if v is not None})


# ------------------------------------------------------------------------------------------ engine
def _table() -> dict[str, Any]:
    """cuda-run's table: each run parameter's default, by name (crun_params.h)."""
    return _tables.defaults(TABLE)


def resolve(target: str = DEFAULT_TARGET, **given: Any) -> dict[str, Any]:
    """One cuda-run run's parameters as one mapping (engines.table.resolve): every table row at its default
    unless given (``ndevs`` None: the target's), the Python-only keys (PYTHON_PARAMS) and the call's labels
    (CALL_KEYS), seed 1 + repetition unless given. A key that is none of these is refused (TypeError naming
    it); values are checked by run_cuda (check_params), not here."""
    extra = {**PY_DEFAULTS, "ndevs": None}
    return _tables.resolve("run_cuda", _table(), extra, PYTHON_PARAMS + CALL_KEYS, target, given)


def run_cuda(target: str = DEFAULT_TARGET, **params: Any) -> dict:
    """One cuda-run measurement -> one record (nvmelab.results.records format, tool "nvmelab-cuda").

    Keywords: every row of cuda-run's table (`params()`, src/engine/crun_params.h: rw, iosize, qdepth, nqueues,
    ndevs, runtime, warmup, rounds, seed, lba_count, timeout, verify, readback, gpu, poll, occupancy, corun,
    sample_every, match; absent or None: the table's default), the Python-only keys of PYTHON_PARAMS (backend,
    ncpus, thr_sib, payload) and the call's CALL_KEYS (study, repetition, stress). Any other keyword is refused
    (TypeError naming it). The record's ``engine_params`` holds every row as run.

    target: gpu-emu://?ndev=N&profile=null|pm1753|pm1753-p2p&scale=S&blocks=B&... (src/README.md).
    ndevs: use the first N devices (default: the URI's ndev, else 16). rounds > 0 runs exactly that many
    lock-step rounds per queue instead of a timed window (tests). readback (write patterns, with rounds and
    verify): after the write rounds every thread reads its LBAs back and checks the stamps. timeout: per-completion
    deadline in seconds; a lost completion raises TimeoutError naming device and queue. poll: "spin" or
    "backoff:MAX_NS"; occupancy: refuse a run needing more than this % of the GPU's resident capacity.
    sample_every: the per-I/O time breakdown, %globaltimer stamps on one command in N (0: off), in the record's
    ``breakdown``; every record also carries its self-checks (``checks``, ``checks_ok``: nvmelab.results.checks);
    match: "cid" (default), "positional" or "scan", how completions reach their commands
    (src/nvme/nvme_gpuq_match.h; the record's ``match`` block holds its counters). ncpus/thr_sib/backend exist so
    that study specs shared with the CPU engine can call this; the GPU engine uses one host thread. payload
    (pci:// and emu://?mode=thread, the real-controller path): "host" = pinned host memory mapped into the GPU;
    "gpu" is refused with the reason (no importer of GPU memory's DMA addresses; book/driver.md). corun: blocks
    per SM of a co-running compute kernel timed alone and under the I/O load (record field ``corun``,
    engines/gpu_corun.py); NVML's SM activity over the window is recorded where readable (field ``nvml``,
    host/nvml.py).
    """
    p = resolve(target, **params)
    _int("ncpus", p["ncpus"], 1, 1)
    if p["backend"] not in (None, BACKEND):
        raise ValueError(f"backend={p['backend']!r}: cuda-run has one backend, {BACKEND!r}")
    _int("repetition", p["repetition"], 0)
    if p["payload"] not in PAYLOADS:
        raise ValueError(f"payload={p['payload']!r}: must be one of {', '.join(PAYLOADS)}")
    ndevs = p["ndevs"]
    table = {k: p[k] for k in _table() if k != "ndevs"}
    table.update(verify=bool(p["verify"]), readback=bool(p["readback"]))
    check_params(target, ndevs, **table)
    from ..host import cpus as _cpus
    from ..host import nvml as _nvml

    host = _cpus.host_state()
    gpu = table["gpu"]
    try:  # NVML finds the GPU by its PCI address (CUDA and NVML may number GPUs differently)
        pci = device_info(gpu)["pci"]
    except (OSError, RuntimeError, ValueError, AttributeError):
        pci = None  # no GPU: the engine names the reason below
    with _nvml.SmSampler(pci=pci, index=gpu) as sampler:
        res = dict(_native().cuda_run(target=target, ndevs=ndevs or 0, payload=p["payload"], **table))
    res["nvml"] = sampler.window(res.get("window_t0_ns"), res.get("window_t1_ns"))
    res["readback"] = table["readback"]  # write patterns read their LBAs back: the payload check applies
    if table["rounds"] or table["verify"]:  # Little's law needs a steady window, no per-command work outside it
        res["littles_law_na"] = (
            "rounds run: the window is the whole kernel"
            if table["rounds"]
            else "verify: per-command work outside the rounds"
        )
    return make_record(
        res,
        target=target,
        rw=p["rw"],
        iosize=p["iosize"],
        qdepth=p["qdepth"],
        nqueues=p["nqueues"],
        study=p["study"],
        repetition=p["repetition"],
        seed=p["seed"],
        warmup=p["warmup"],
        stress=p["stress"],
        thr_sib=p["thr_sib"],
        host=host,
        verify=table["verify"],
        corun=p["corun"],
        match=p["match"],
        engine_params={**table, "ndevs": ndevs or 0},
    )


def match_block(
    mode: str, *, completions: int, looks: int, cq_bytes: int, stale: int, foreign: int, misattributed: int
) -> dict:
    """The record's ``match`` block (GPU engine and CPU stand-in alike): the matching mode and its counters
    (src/nvme/nvme_gpuq_match.h) over ``completions`` commands: CQ looks and CQ bytes per completion, old-phase
    CQEs carrying a wanted CID (``stale``), CQEs met that belonged to another command (``foreign``), and
    commands handed a status the target's per-LBA error rule did not give them (``misattributed``)."""
    per = (lambda v: round(v / completions, 4)) if completions else (lambda v: None)
    return {
        "mode": mode,
        "completions": int(completions),
        "looks_per_completion": per(looks),
        "cq_bytes_per_completion": per(cq_bytes),
        "stale": int(stale),
        "foreign": int(foreign),
        "misattributed": int(misattributed),
    }


def make_record(
    res: dict,
    *,
    target: str,
    rw: str,
    iosize: int,
    qdepth: int,
    nqueues: int,
    study: str,
    repetition: int,
    seed: int,
    warmup: float,
    stress: bool,
    thr_sib: bool,
    host: dict,
    verify: bool,
    corun: int = 0,
    match: str = "cid",
    tool: str = TOOL,
    provenance: dict | None = None,
    engine_params: dict | None = None,
) -> dict:
    """Turn a device-initiated engine's raw result into a validated record: the one place that builds
    them, for the cuda-run engine and its CPU stand-in (engines/gpu_standin.py, which passes its tool and
    provenance and leaves the GPU-only fields None; ``match``: the run's matching mode). The self-checks and the
    breakdown come from nvmelab.results.checks (`device_checks`); ``engine_params``: the table's rows as run."""
    from .gpu_corun import corun_field

    emu = res.get("emulator")
    if corun and not res.get("littles_law_na"):  # the co-runner shares the GPU for part of the kernel only
        res = {**res, "littles_law_na": CORUN_LITTLE_NA}
    info = {"backend": tool, "profile": res["profile"], "scale": res["scale"], "devices": res["ndevs"]}
    if provenance is None:
        provenance = _prov.capture(info, cuda_device=res["gpu"], emulator=res["target_desc"])
    rec = engine_record(
        **measured_fields(res),
        study=study,
        tool=tool,
        target=target,
        backend=tool,
        rw=rw,
        iosize=iosize,
        qdepth=qdepth,
        nqueues=nqueues,
        ndevs=res["ndevs"],
        ncpus=1,
        host=host,
        thr_sib=thr_sib,
        stress=stress,
        repetition=repetition,
        warmup=warmup,
        seed=seed,
    )
    rec.update(
        {
            "lat_ns": None,  # lock-step rounds: the round time below, not per-command latency
            "ios_total": res["ios_total"],
            "cuda_threads": res["threads"],
            "kernel_s": None if res.get("kernel_s") is None else round(res["kernel_s"], 6),
            "round_ns": {"mean": round(res["round_ns_mean"], 1), "max": res.get("round_ns_max")},
            "queue_rounds": list(res["queue_rounds"]),
            "payload": res.get("payload") or None,
            # run parameters that shape the measurement (engine table, src/engine/crun_params.h)
            "poll": res.get("poll"),
            "occupancy": {
                "limit_pct": res.get("occupancy_pct"),
                "used_pct": None if res.get("occupancy_permille") is None else res["occupancy_permille"] / 10,
            },
            "sq_readback": res.get("sq_readback"),
            # the doorbell fences' scope ("gpu": rings and doorbells in GPU memory; "sys": a controller outside
            # the GPU) and how often the kernel writes its round counters to mapped host memory
            "fence": res.get("fence"),
            "round_publish_ns": res.get("round_publish_ns"),
            # what polling costs the GPU: the co-runner alone vs under the I/O load, NVML's SM activity
            "corun": corun_field(res.get("corun"), corun),
            "nvml": res.get("nvml"),
            "match": match_block(
                match,
                completions=res["ios_total"],
                looks=res.get("match_looks", 0),
                cq_bytes=res.get("match_cq_bytes", 0),
                stale=res.get("match_stale", 0),
                foreign=res.get("match_foreign", 0),
                misattributed=res.get("misattributed", 0),
            ),
            # gpu-emu's own counters: fetch lag (sq_wait_*, sq_left_frac) and the SQ backlog beyond the model's
            # pacing (fetch_late_ns_mean), busy fraction per warp (busy_*), lateness, CQ-full holds, headroom
            "emulator_counters": dict(emu) if emu else None,
            "emulator_headroom": emu.get("headroom") if emu else None,
            # True: the emulator, not the device model, set the rate (timed models: the delay it added to a
            # command, completion lateness + fetch lateness, > 10 % of the mean round; src/engine/cuda/cuda_api.h);
            # such runs stay in the figures, drawn marked (results.checks.FLAGS)
            "emulator_limited": bool(emu.get("limited")) if emu else None,
            "provenance": provenance,
        }
    )
    if engine_params is not None:  # every row of cuda-run's table as the run used it
        rec["engine_params"] = dict(engine_params)
    if verify:
        rec["verify_errors"] = res["verify_errors"]
    _checks.device_checks(rec, res, verify=verify, rw=rw)
    if res["errors"]:
        log.warning("%d commands failed; first: %s", res["errors"], res["first_error"])
    return validate(rec)


# ------------------------------------------------------------------------------------------ interop
class _View:
    """A zero-copy 2-D view (rows of `width` bytes, `stride` apart) of GPU memory, as
    __cuda_array_interface__ v3, so cupy.asarray / numba.cuda.as_cuda_array wrap it without a copy.
    Keeps the owner alive."""

    def __init__(self, owner: Any, ptr: int, rows: int, width: int, stride: int):
        self._owner = owner
        self.__cuda_array_interface__ = {
            "shape": (rows, width),
            "typestr": "|u1",
            "data": (ptr, False),
            "strides": (stride, 1),
            "version": 3,
            "stream": None,
        }


def _cai(buf: Any) -> tuple[int, int]:
    """(device pointer, bytes) of a C-contiguous GPU array exposing __cuda_array_interface__."""
    cai = getattr(buf, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(
            f"buf: {type(buf).__name__} has no __cuda_array_interface__ (pass a cupy or numba device array)"
        )
    shape, strides = tuple(cai["shape"]), cai.get("strides")
    itemsize = np.dtype(cai["typestr"]).itemsize
    if strides is not None:
        expect, acc = [], itemsize
        for n in reversed(shape):
            expect.insert(0, acc)
            acc *= n
        if tuple(strides) != tuple(expect):
            raise ValueError("buf: must be C-contiguous")
    if cai["data"][1]:
        raise ValueError("buf: is read-only")
    return int(cai["data"][0]), int(np.prod(shape, dtype=np.int64)) * itemsize


def device_buffer(nbytes: int) -> Any:
    """An uninitialised GPU byte array: cupy when installed, else a numba device array (OSError(ENODEV) in one
    line where there is no CUDA device and numba's simulator is off)."""
    require_gpu("device_buffer", simulator_ok=True)
    try:
        import cupy

        return cupy.empty(nbytes, dtype=cupy.uint8)
    except ImportError:
        from numba import cuda

        return cuda.device_array(nbytes, dtype=np.uint8)


def read_blocks(
    target: str,
    *,
    iosize: int = 4096,
    qdepth: int = 32,
    nqueues: int = 1,
    ndevs: int = 1,
    rw: str = "read",
    buf: Any = None,
    seed: int = 1,
    timeout: float = 2.0,
    gpu: int = 0,
) -> tuple[_View, dict]:
    """One lock-step round of reads by every engine thread into a GPU buffer; returns (blocks, result).

    blocks: a zero-copy view of shape (threads, iosize); row t holds what thread t read (t = (device *
    nqueues + queue) * qdepth + i). With rw="read" thread (d, q, i) reads LBA (q * qdepth + i) * iosize/512
    of device d (see read_lbas). Wrap it with cupy.asarray(blocks) or numba.cuda.as_cuda_array(blocks).
    """
    if rw not in ("read", "randread"):
        raise ValueError(f"rw={rw!r}: read_blocks reads (read or randread)")
    check_params(target, ndevs, rw=rw, iosize=iosize, qdepth=qdepth, nqueues=nqueues, rounds=1, timeout=timeout)
    require_gpu("read_blocks")
    size, stride = _native().cuda_buf_size(iosize, qdepth, nqueues, ndevs)
    if buf is None:
        buf = device_buffer(size)
    ptr, nbytes = _cai(buf)
    if nbytes < size:
        raise ValueError(f"buf: {nbytes} bytes, this shape needs {size} (cuda_buf_size)")
    res = dict(
        _native().cuda_run(
            target=target,
            rw=rw,
            iosize=iosize,
            qdepth=qdepth,
            nqueues=nqueues,
            ndevs=ndevs,
            rounds=1,
            seed=seed,
            timeout=float(timeout),
            gpu=gpu,
            buf=ptr,
            buf_len=nbytes,
        )
    )
    rows = ndevs * nqueues * qdepth
    return _View(buf, ptr + res["buf_offset"], rows, iosize, res["buf_stride"]), res


def read_lbas(iosize: int, qdepth: int, nqueues: int, ndevs: int) -> list[tuple[int, int]]:
    """(device, first LBA) read by each row of read_blocks(rw="read"), in row order."""
    nlb = iosize // LBA_SIZE
    return [(d, (q * qdepth + i) * nlb) for d in range(ndevs) for q in range(nqueues) for i in range(qdepth)]


# ------------------------------------------------------------------------------------------ data
_STAMP_XOR = 0x6E766D656C616221
_MIX = 0xFF51AFD7ED558CCD


def stamps(dev: int, slba: int, nbytes: int, lba_size: int = LBA_SIZE) -> np.ndarray:
    """The bytes gpu-emu holds at (dev, slba..) with fill=stamp (and that verified writes carry):
    NumPy port of nvme_gpuq_stamp()."""
    words = nbytes // STAMP_WORD
    per = lba_size // STAMP_WORD
    w = np.arange(words, dtype=np.uint64)
    lba = np.uint64(slba) + w // np.uint64(per)
    x = (np.uint64(dev) << np.uint64(56)) ^ (lba << np.uint64(8)) ^ (w % np.uint64(per)) ^ np.uint64(_STAMP_XOR)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(33)
        x *= np.uint64(_MIX)
        x ^= x >> np.uint64(33)
    return (x | np.uint64(1)).view(np.uint8)


def checksum_reference(blocks: np.ndarray) -> np.ndarray:
    """NumPy version of block_checksums: per row, XOR over 64-bit words w_k of w_k * (2k + 1) mod 2^64."""
    words = np.ascontiguousarray(blocks).view(np.uint64)
    k = np.arange(words.shape[1], dtype=np.uint64)
    with np.errstate(over="ignore"):
        mixed = words * (np.uint64(2) * k + np.uint64(1))
    return np.bitwise_xor.reduce(mixed, axis=1)


def block_checksums(blocks: Any) -> Any:
    """The numba-cuda example kernel: a checksum of every row of a (rows, bytes) uint8 GPU array (e.g. the
    view from read_blocks), computed on the GPU where the data was read. Returns a device array of uint64;
    .copy_to_host() for NumPy. Under numba's CUDA simulator it runs on the CPU."""
    require_gpu("block_checksums", simulator_ok=True)
    from numba import cuda

    dev = cuda.to_device(blocks) if isinstance(blocks, np.ndarray) else cuda.as_cuda_array(blocks)
    if dev.ndim != 2 or dev.shape[1] % STAMP_WORD:
        raise ValueError(f"blocks: expected (rows, bytes) with bytes a multiple of {STAMP_WORD}, got {dev.shape}")
    from .gpu_kernels import checksum_rows

    out = cuda.to_device(np.zeros(dev.shape[0], dtype=np.uint64))
    checksum_rows[dev.shape[0], CHECKSUM_THREADS](dev, out)
    return out


def read_and_checksum(
    target: str = "gpu-emu://?ndev=2&profile=null&fill=stamp&nsze=16MiB",
    *,
    iosize: int = 4096,
    qdepth: int = 64,
    nqueues: int = 2,
    ndevs: int = 2,
) -> dict:
    """I/O and compute sharing the GPU, in one call for a notebook: one round of device-initiated reads
    into a GPU buffer, then the numba-cuda checksum kernel over the blocks just read, checked against the
    NumPy checksum of the data the target is known to hold (fill=stamp). Needs a GPU.

    Returns {"rows", "bytes", "read_s" (kernel time of the read round), "checksum_s" (wall time of the
    checksum kernel, compile excluded), "matches" (rows whose checksum equals the expected one), "gpu"}."""
    import time

    if _uri.get(target, "fill") != "stamp":
        raise ValueError(f"target={target!r}: needs fill=stamp so that the expected data is known")
    require_gpu("read_and_checksum")
    from numba import cuda

    blocks, res = read_blocks(target, iosize=iosize, qdepth=qdepth, nqueues=nqueues, ndevs=ndevs)
    block_checksums(blocks)  # compile (first call) outside the timed run
    cuda.synchronize()
    t0 = time.perf_counter()
    sums = block_checksums(blocks)
    cuda.synchronize()
    dt = time.perf_counter() - t0
    want = checksum_reference(
        np.stack([stamps(d, lba, iosize) for d, lba in read_lbas(iosize, qdepth, nqueues, ndevs)])
    )
    got = sums.copy_to_host()
    return {
        "rows": int(got.shape[0]),
        "bytes": int(got.shape[0]) * iosize,
        "read_s": res["kernel_s"],
        "checksum_s": dt,
        "matches": int(np.count_nonzero(got == want)),
        "gpu": res["gpu"],
    }
