# SPDX-License-Identifier: BSD-3-Clause
"""The CPU stand-in of the cuda-run engine, for rehearsing the GPU lease plan on a host without a GPU.

    rec = nvmelab.engines.gpu_standin.run_cuda_standin(target="gpu-emu://?profile=pm1753&ndev=16",
                                                       iosize=512, qdepth=128, nqueues=2, runtime=0.5)

Same parameters as nvmelab.engines.gpu.run_cuda (the study runner calls either with a run's parameters);
the gpu-emu:// target becomes the CPU emulator with the same profile, ``emu://?profile=P&ndev=N``
(``STANDIN_MAX_NDEVS`` devices at most: one CPU thread drives them all), and the native stand-in
(src/engine/gpuq_standin.h) drives lock-step rounds on its queue pairs with the queue code of the GPU
kernel (SQE building, PRPs from a lookup table, completions matched by CID with a deadline). Records
say tool ``nvmelab-gpuq-cpu`` and ``standin: true``: they prove that the lease's steps produce records,
never a GPU rate, and are never published (make rehearse-gpu-host writes them outside data/results).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..host import cpus as _cpus
from ..host import provenance as _prov
from ..results.records import engine_record, validate
from .gpu import match_block

log = logging.getLogger(__name__)

TOOL = "nvmelab-gpuq-cpu"
#: Devices the stand-in emulates at most (one CPU thread drives every queue of every device).
STANDIN_MAX_NDEVS = 4
#: gpu-emu:// keys the CPU emulator does not take (GPU launch shape, payload handling).
_GPU_ONLY_KEYS = ("blocks", "warps", "data", "fill", "ooo", "drop", "ndev")


def standin_target(target: str, ndevs: int | None) -> tuple[str, int]:
    """(the emu:// URI the stand-in drives for a gpu-emu:// target, its device count)."""
    if not str(target).startswith("gpu-emu://"):
        raise ValueError(f"target={target!r}: the CPU stand-in replaces gpu-emu:// targets only")
    q = parse_qs(urlsplit(target).query)
    n = int(ndevs or (q.get("ndev") or ["16"])[0])
    n = max(1, min(n, STANDIN_MAX_NDEVS))
    keep = [f"{k}={v[0]}" for k, v in q.items() if k not in _GPU_ONLY_KEYS]
    return "emu://?" + "&".join([*keep, f"ndev={n}"]), n


def run_cuda_standin(
    target: str = "gpu-emu://?profile=null",
    rw: str = "randread",
    iosize: int = 512,
    qdepth: int = 128,
    nqueues: int = 1,
    ndevs: int | None = None,
    runtime: float = 5.0,
    warmup: float = 1.0,
    *,
    study: str = "adhoc",
    repetition: int = 0,
    seed: int | None = None,
    stress: bool = False,
    thr_sib: bool = False,
    match: str = "cid",
    rounds: int = 0,
    timeout: float = 0.0,
    unordered: int = 0,
    fence: bool = True,
    sq_readback: bool = True,
    **_: Any,
) -> dict:
    """One stand-in run -> one record (see the module docstring). ValueError for a parameter it refuses.

    match: "cid" | "positional" | "scan" (src/nvme/nvme_gpuq_match.h); rounds > 0: exactly that many rounds
    per queue pair instead of the timed window; timeout: seconds per completion (0: the stand-in's 2 s).
    unordered, fence, sq_readback: the missing-fence model (src/nvme/gpuq_ctrl.h nvme_gpuq_round_opt): the last
    ``unordered`` SQE stores of a round land after the doorbell unless the fence orders them; the read-back
    of the last SQE refuses to ring for SQEs that have not landed (OSError EIO)."""
    from .. import _native

    if rw not in ("read", "randread"):
        raise ValueError(f"rw={rw!r}: the CPU stand-in reads only (read, randread)")
    uri, n = standin_target(target, ndevs)
    host = _cpus.host_state()
    res = dict(
        _native.gpuq_standin_run(
            uri,
            int(nqueues),
            int(qdepth),
            int(iosize),
            float(runtime),
            float(warmup),
            seed or 1,
            match=str(match),
            rounds=int(rounds),
            timeout=float(timeout),
            unordered=int(unordered),
            fence=bool(fence),
            readback=bool(sq_readback),
        )
    )
    win = res["window_s"] or float(runtime)
    iops = res["ios"] / win if win > 0 else 0.0
    q = parse_qs(urlsplit(uri).query)
    info = {"backend": TOOL, "profile": (q.get("profile") or ["nominal"])[0], "scale": 1.0, "devices": n}
    rec = engine_record(
        study=study,
        tool=TOOL,
        target=target,
        backend=TOOL,
        rw=rw,
        iosize=int(iosize),
        qdepth=int(qdepth),
        runtime_s=round(win, 6),
        iops=round(iops, 2),
        mibs=round(iops * int(iosize) / (1 << 20), 2),
        nqueues=int(nqueues),
        ndevs=n,
        ios=res["ios"],
        errors=res["errors"],
        first_error=res["first_status"] or None,
        host=host,
        thr_sib=thr_sib,
        stress=stress,
        repetition=repetition,
        warmup=warmup,
        seed=seed,
        provenance=_prov.capture(info, standin_target=uri),
    )
    rec.update(standin=True, standin_rounds=res["rounds"], ndevs_requested=int(ndevs) if ndevs else None)
    rec["match"] = match_block(
        res["match"],
        completions=res["ios"],
        looks=res["looks"],
        cq_bytes=res["cq_bytes"],
        stale=res["stale"],
        foreign=res["foreign"],
        misattributed=res["misattributed"],
    )
    rec["match"]["expected_errors"] = res["expected_errors"]
    return validate(rec)


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
        target = f"gpu-emu://?profile={profile}&ndev=1&err_every={int(err_every)}" + (
            f"&ooo_win={int(w)}" if w > 1 else ""
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
