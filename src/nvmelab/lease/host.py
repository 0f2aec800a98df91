# SPDX-License-Identifier: BSD-3-Clause
"""What a lease call finds on its host before it measures: the GPU as the driver reports it, and the installed
extension (nvmelab.lease.plan's probe and native-check parts).

    probe(out_json) -> dict           nvidia-smi's facts and one bare CUDA driver initialisation, timed
    native_check(want_cuda) -> dict   the installed extension: imports, CUDA code, no driver linked

Neither creates a CUDA context in the calling process except probe's one timed cuInit + primary context,
which it releases; the call's orchestrator runs native_check in a child process.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any


def probe(out_json: Path) -> dict[str, Any]:
    """The GPU as the lease found it: nvidia-smi's name, persistence mode, clocks, link, power and temperature,
    and one bare CUDA driver initialisation (cuInit + the primary context) timed through ctypes, before anything
    of ours touches CUDA. On a host without a GPU each entry says why it is missing."""
    import ctypes

    fields = (
        "name,pci.bus_id,driver_version,persistence_mode,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,"
        "pcie.link.gen.current,pcie.link.width.current,power.draw,power.limit,temperature.gpu,memory.total,"
        "compute_mode,mig.mode.current"
    )
    res: dict[str, Any] = {"fields": fields.split(",")}
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            cp = subprocess.run(
                [smi, f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
            )
            res["nvidia_smi"] = [
                dict(zip(res["fields"], (v.strip() for v in ln.split(","))))
                for ln in cp.stdout.splitlines()
                if ln.strip()
            ]
            if cp.returncode:
                res["nvidia_smi_error"] = cp.stderr.strip()[-500:]
        except (OSError, subprocess.SubprocessError) as exc:
            res["nvidia_smi_error"] = f"{type(exc).__name__}: {exc}"
    else:
        res["nvidia_smi_error"] = "nvidia-smi not found"
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        t0 = time.perf_counter()
        rc = cu.cuInit(0)
        t1 = time.perf_counter()
        dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
        rc2 = cu.cuDeviceGet(ctypes.byref(dev), 0) if rc == 0 else None
        rc3 = cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) if rc2 == 0 else None
        t2 = time.perf_counter()
        if rc3 == 0:
            cu.cuDevicePrimaryCtxRelease(dev)
        res["cuda_init"] = {
            "cuInit_rc": rc,
            "cuInit_s": round(t1 - t0, 4),
            "primary_ctx_rc": rc3,
            "primary_ctx_s": round(t2 - t1, 4),
        }
    except OSError as exc:
        res["cuda_init"] = {"error": f"libcuda.so.1 not loadable: {exc}"}
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(res, indent=1) + "\n")
    return res


def _elf_facts(path: Path) -> dict[str, Any]:
    """Sections and DT_NEEDED libraries of a shared object (readelf), or why they were not read."""
    import shutil
    import subprocess

    if not shutil.which("readelf"):
        return {"why": "readelf not found: sections and linked libraries not read"}
    sec = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=False).stdout
    dyn = subprocess.run(["readelf", "-d", "-W", str(path)], capture_output=True, text=True, check=False).stdout
    return {
        "sections": sorted(set(re.findall(r"\]\s+(\.\S+)", sec))),
        "needed": re.findall(r"\(NEEDED\).*\[(.+?)\]", dyn),
    }


def native_check(want_cuda: bool) -> dict[str, Any]:
    """What the installed extension is (the carried wheel's build): it imports (a CUDA build too, on a
    host without a GPU driver: cudart_static loads libcuda.so.1 with dlopen when CUDA is first used, so
    the extension must not name it as a DT_NEEDED library), says what it was built with, holds the GPU
    code when CUDA is on (an .nv_fatbin section, its architectures in build_info) and, without a usable
    GPU, gives the reason the GPU parts skip with. ``problems`` lists what is wrong (empty: nothing)."""
    from .. import _native, build_info
    from ..engines import gpu

    info = build_info()
    so = Path(_native.__file__)
    elf = _elf_facts(so)
    st = gpu.status()
    problems = []
    if want_cuda and not info.get("cuda"):
        problems.append(f"built without CUDA: {info.get('parts', {}).get('cuda', {}).get('detail')}")
    if want_cuda and "sections" in elf and ".nv_fatbin" not in elf["sections"]:
        problems.append(f"{so.name} holds no GPU code (no .nv_fatbin section)")
    if any(n.startswith("libcuda.so") for n in elf.get("needed", ())):
        problems.append(f"{so.name} links the driver library itself ({elf['needed']}): no import without a GPU driver")
    if want_cuda and not st.get("compiled"):
        problems.append(f"cuda_status() says the engine is not compiled in: {st.get('reason')}")
    if st.get("devices", 0) == 0 and not st.get("reason"):
        problems.append("no GPU and no reason given (the GPU tests would skip without saying why)")
    return {"extension": so.name, "build": info, "elf": elf, "cuda_status": st, "problems": problems}
