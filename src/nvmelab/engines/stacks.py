# SPDX-License-Identifier: BSD-3-Clause
"""I/O stacks side by side on one served controller: the seeds' own tools (SPDK's) and our driver.

    rec = nvmelab.engines.stacks.run(target="emu://?profile=null", tool="spdk_nvme_perf", via="vfio-user",
                                     rw="randread", iosize=512, qdepth=128, runtime=2, warmup=0.5)

One run, one record. ``target`` is the device: an ``emu://`` URI, served for the run by ``nvmelab-serve``
(nvmelab.host.serve) on CPUs of its own, so that the stack under test has its cores to itself and the
device's work is never charged to it. The stacks (``tool`` and ``via``):

    spdk_nvme_perf  via vfio-user   SPDK's NVMe driver and perf tool (``-L``: lat_track=1, its per-I/O
                                    latency histogram; without it the tool still reads the TSC at submit and
                                    completion of every I/O for its min/mean/max)
    bdevperf        via vfio-user   SPDK's bdev layer over the same NVMe driver (the tool of seed 004)
    nvmelab         via vfio-user   our driver as a vfio-user client (nvmelab.engines.perf.run)
    nvmelab         via in-process  our driver on the same emulator in this process, mode=thread (its service
                                    thread, not pinned, runs beside the engine's pinned one)

SPDK's tools come from the build that ``SPDK_DIR`` names (build/bin, build/examples); the project builds no
SPDK. They need hugepages on a hugetlbfs mount and run with ``-g`` (one hugepage file: the vfio-user server
maps the client's memory by file offset). A run this host cannot make (no SPDK_DIR, no hugepages, too few
cores) raises ValueError naming why: the study runner lists it as skipped.

Every stack here polls: its cores are busy for the whole run whether or not it finds completions, so the CPU
an I/O costs is ``ncpus / IOPS`` (``ns_per_io``), the published comparison's "IOPS per core" turned over; the
record also carries the tool process's measured CPU use. The server's own CPU time and, when it prints them,
its service thread's sweep counts (``server``) say whether the device could have been the limit: a service
thread that found its queues empty on most sweeps was waiting for the stack.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..driver import uri as _uri
from ..host import cpus as _cpus
from ..host import provenance as _prov
from ..host import serve as _serve
from ..results.records import MIB, engine_record, validate
from . import perf as _perf

log = logging.getLogger(__name__)

#: The stacks: tool -> the ways it reaches the device.
TOOLS = {"spdk_nvme_perf": ("vfio-user",), "bdevperf": ("vfio-user",), "nvmelab": ("vfio-user", "in-process")}
#: Where each SPDK tool lies in an SPDK build (SPDK_DIR).
SPDK_PATHS = {"spdk_nvme_perf": "build/bin/spdk_nvme_perf", "bdevperf": "build/examples/bdevperf"}
#: The driver each (tool, via) runs on: the record's ``backend``.
BACKENDS = {
    ("spdk_nvme_perf", "vfio-user"): "spdk-vfio-user",
    ("bdevperf", "vfio-user"): "spdk-vfio-user",
    ("nvmelab", "vfio-user"): "nvmelab-vfio-user",
    ("nvmelab", "in-process"): "nvmelab-emu",
}
#: Patterns the SPDK tools and our engine all take.
PATTERNS = ("read", "randread", "write", "randwrite")
#: The subsystem NQN SPDK's vfio-user transport ID carries (any name: without one SPDK probes for a discovery
#: controller).
SUBNQN = "nqn.2019-07.io.nvmelab:served"
#: Seconds an SPDK tool may take beyond its runtime and warm-up (environment set-up, attach, teardown).
TOOL_SLACK_S = 60.0
#: The run's keys, handed up to the study specs (nvmelab.studies.spec.ENGINES): this engine has no C table.
PYTHON_PARAMS = ("target", "tool", "via", "lat_track", "rw", "iosize", "qdepth", "ncpus", "runtime", "warmup")
NS_PER_S = 1e9
PERCENT = 100.0


def params() -> list[dict]:
    """The engine's C-table rows: none (every parameter is PYTHON_PARAMS')."""
    return []


def spdk_tool(tool: str) -> Path:
    """The SPDK tool's executable in SPDK_DIR; ValueError naming what is missing."""
    root = os.environ.get("SPDK_DIR")
    if not root:
        raise ValueError(f"tool={tool}: SPDK_DIR is not set (SPDK's tools are used from a build the user names)")
    exe = Path(root) / SPDK_PATHS[tool]
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise ValueError(f"tool={tool}: {exe} is not an executable (SPDK_DIR={root}: an SPDK build with vfio-user)")
    return exe


def _check(p: dict[str, Any]) -> None:
    target, tool, via = p["target"], p["tool"], p["via"]
    if not isinstance(target, str) or _uri.kind(target) != "emu":
        raise ValueError(f"target={target!r}: the stacks run on an emulated controller (emu://...), served or not")
    if _uri.get(target, "mode") == "inline":
        raise ValueError(f"target={target!r}: mode=inline would put the device's work on the stack's own thread")
    if tool not in TOOLS:
        raise ValueError(f"tool={tool!r}: must be one of {', '.join(TOOLS)}")
    if via not in TOOLS[tool]:
        raise ValueError(f"via={via!r}: {tool} runs via {' or '.join(TOOLS[tool])}")
    if p["lat_track"] not in (0, 1) or (p["lat_track"] and tool != "spdk_nvme_perf"):
        raise ValueError(f"lat_track={p['lat_track']!r}: 0, or 1 for spdk_nvme_perf (its -L)")
    if p["rw"] not in PATTERNS:
        raise ValueError(f"rw={p['rw']!r}: must be one of {', '.join(PATTERNS)}")
    for k in ("iosize", "qdepth", "ncpus"):
        if isinstance(p[k], bool) or not isinstance(p[k], int) or p[k] < 1:
            raise ValueError(f"{k}={p[k]!r}: must be an integer >= 1")
    if p["iosize"] % 512:
        raise ValueError(f"iosize={p['iosize']}: must be a multiple of 512 bytes")
    if not p["runtime"] > 0 or p["warmup"] < 0:
        raise ValueError(f"runtime={p['runtime']!r}, warmup={p['warmup']!r}: runtime > 0, warmup >= 0")
    if tool != "nvmelab" and not any(m.split()[2:3] == ["hugetlbfs"] for m in _mounts()):
        raise ValueError(
            f"tool={tool}: SPDK needs hugepages on a hugetlbfs mount "
            "(root: nvmelab hugepages 1024; mount -t hugetlbfs nodev /dev/hugepages)"
        )


def _mounts() -> list[str]:
    try:
        return Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []


def split_cpus(ncpus: int) -> tuple[list[int], list[int]]:
    """The stack's CPUs (one per physical core, the first `ncpus` cores) and the server's (every logical CPU
    of the cores left); ValueError when no core is left for the server."""
    topo = _cpus.topology()
    tool = _cpus.cpumask(ncpus, False, topo)
    server = [c for core in topo.cores if not set(core) & set(tool) for c in core]
    if not server:
        raise ValueError(f"ncpus={ncpus}: the server needs a core of its own ({topo.nphysical} physical cores here)")
    return tool, server


_TOTAL = re.compile(r"^\s*Total\s*:\s*(.*)$")


def parse_total(tool: str, text: str) -> dict[str, float]:
    """IOPS, MiB/s and latency (us) of the ``Total`` line an SPDK tool prints; ValueError when absent.

    spdk_nvme_perf: ``Total : IOPS MiB/s Average min max``;
    bdevperf:       ``Total : IOPS MiB/s Fail/s TO/s Average min max``."""
    names = {
        "spdk_nvme_perf": ("iops", "mibs", "lat_avg_us", "lat_min_us", "lat_max_us"),
        "bdevperf": ("iops", "mibs", "fail_per_s", "timeout_per_s", "lat_avg_us", "lat_min_us", "lat_max_us"),
    }[tool]
    for line in reversed(text.splitlines()):
        m = _TOTAL.match(line)
        if m:
            try:
                vals = [float(x) for x in m.group(1).split()]
            except ValueError:
                continue
            if len(vals) == len(names):
                return dict(zip(names, vals, strict=True))
    raise ValueError(f"{tool}: no 'Total' line with {len(names)} numbers in its output")


def _bdev_config(path: Path, socket_dir: str) -> None:
    attach = {"name": "Nvme0", "trtype": "VFIOUSER", "traddr": socket_dir, "subnqn": SUBNQN}
    conf = {
        "subsystems": [{"subsystem": "bdev", "config": [{"method": "bdev_nvme_attach_controller", "params": attach}]}]
    }
    path.write_text(json.dumps(conf))


def spdk_argv(p: dict[str, Any], exe: Path, ctrl_dir: str, tool_cpus: list[int], conf: Path) -> list[str]:
    """The SPDK tool's command line for one run."""
    mask = hex(sum(1 << c for c in tool_cpus))
    common = ["-q", str(p["qdepth"]), "-o", str(p["iosize"]), "-w", p["rw"]]
    if p["tool"] == "spdk_nvme_perf":
        trid = f"trtype:VFIOUSER traddr:{ctrl_dir} subnqn:{SUBNQN}"
        argv = [str(exe), "-g", "-r", trid, *common, "-c", mask, "-t", _secs(p["runtime"]), "-a", _secs(p["warmup"])]
        return argv + ["-L"] * int(p["lat_track"])
    # bdevperf has no warm-up of its own: it runs warm-up + runtime, and its IOPS cover the whole time
    return [str(exe), "-g", "--json", str(conf), *common, "-m", mask, "-t", _secs(p["runtime"] + p["warmup"])]


def _secs(x: float) -> str:
    if float(x) != int(x):
        raise ValueError(f"runtime/warmup={x!r}: SPDK's tools take whole seconds")
    return str(int(x))


#: Lines an SPDK tool prints when its I/O starts and once it has ended (stdout line-buffered by stdbuf): the
#: tool's CPU use is read from /proc at both, so its set-up and teardown are not counted.
MARKS = {
    "spdk_nvme_perf": ("Initialization complete. Launching workers.", "Device Information"),
    "bdevperf": ("Running I/O for", "Device Information"),
}


def _run_spdk(p: dict[str, Any], server: _serve.Server, tool_cpus: list[int]) -> dict[str, Any]:
    exe = spdk_tool(p["tool"])
    ctrl_dir = str(server.sockets[0].parent)
    start_mark, end_mark = MARKS[p["tool"]]
    with tempfile.TemporaryDirectory(prefix="nvmelab-stacks.") as tmp:
        conf = Path(tmp) / "bdev.json"
        _bdev_config(conf, ctrl_dir)
        argv = spdk_argv(p, exe, ctrl_dir, tool_cpus, conf)
        log.info("running %s", " ".join(argv))
        stdbuf = shutil.which("stdbuf")
        proc = subprocess.Popen(
            ([stdbuf, "-oL"] if stdbuf else []) + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        lines: list[str] = []
        marks: dict[str, tuple[float, float | None, float | None]] = {}
        spid = server.proc.pid

        def read() -> None:
            for line in proc.stdout:
                lines.append(line)
                for name, mark in (("start", start_mark), ("end", end_mark)):
                    if name not in marks and mark in line:
                        now = time.monotonic()
                        marks[name] = (now, _serve.process_cpu_s(proc.pid), _serve.process_cpu_s(spid))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            proc.wait(p["runtime"] + p["warmup"] + TOOL_SLACK_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"{p['tool']}: no result within {TOOL_SLACK_S:g} s beyond its runtime") from None
        except BaseException:  # Ctrl-C (or any error here): the tool never outlives the run
            proc.kill()
            proc.wait()
            raise
        finally:
            reader.join(5.0)
            proc.stdout.close()
    out = "".join(lines)
    if proc.returncode != 0:
        tail = "\n".join(out.strip().splitlines()[-5:])
        raise RuntimeError(f"{p['tool']} exited with status {proc.returncode}: {tail}")
    usage = server_usage = None
    if {"start", "end"} <= set(marks):
        (t0, c0, s0), (t1, c1, s1) = marks["start"], marks["end"]
        usage = _usage(c0, c1, t1 - t0)
        server_usage = _usage(s0, s1, t1 - t0)
    return {
        "total": parse_total(p["tool"], out),
        "cpu_usage": usage,
        "server_cpu_usage": server_usage,
        "argv": argv[1:],
    }


def _usage(c0: float | None, c1: float | None, secs: float) -> float | None:
    """Percent of one CPU from two CPU-time readings `secs` apart (None when a reading is missing)."""
    return round((c1 - c0) / secs * PERCENT, 1) if c0 is not None and c1 is not None and secs > 0 else None


def _emu_info(target: str) -> dict[str, Any]:
    with _perf.open_target(target) as t:
        return dict(t.info())


def _server_summary(server: _serve.Server, cpus: list[int], usage: float | None) -> dict[str, Any]:
    """The record's ``server``: its CPUs, its CPU use over the stack's I/O (percent of one CPU: its service
    thread sleeps when it finds no work, so this is the work it did) and its service thread's counters."""
    st = server.stats.get(0) or {}
    sweeps, busy = st.get("sweeps"), st.get("busy")
    return {
        "cpus": cpus,
        "cpu_usage": usage,
        "stats": st or None,
        "busy_sweep_fraction": round(busy / sweeps, 4) if sweeps and busy is not None else None,
    }


def run(
    target: str = "emu://?profile=null",
    *,
    tool: str = "nvmelab",
    via: str = "vfio-user",
    lat_track: int = 0,
    rw: str = "randread",
    iosize: int = 512,
    qdepth: int = 128,
    ncpus: int = 1,
    runtime: float = 2.0,
    warmup: float = 1.0,
    study: str = "adhoc",
    repetition: int = 0,
    stress: Any = 0,
) -> dict:
    """One run of one stack on a served (or, for nvmelab in-process, embedded) controller -> one record."""
    p = dict(
        target=target,
        tool=tool,
        via=via,
        lat_track=lat_track,
        rw=rw,
        iosize=iosize,
        qdepth=qdepth,
        ncpus=ncpus,
        runtime=runtime,
        warmup=warmup,
    )
    _check(p)
    if tool != "nvmelab":
        spdk_tool(tool)
    tool_cpus, server_cpus = split_cpus(ncpus)
    info = _emu_info(target)
    host = _cpus.host_state()
    perf_args = dict(rw=rw, iosize=iosize, qdepth=qdepth, ncpus=ncpus, cpus=tool_cpus, runtime=runtime, warmup=warmup)
    server_info: dict[str, Any] | None = None
    spdk: dict[str, Any] | None = None
    if via == "in-process":
        # the emulator's service thread is not pinned: with the engine's thread busy on its CPU the scheduler
        # keeps it on the others (the record's `threads` say where the engine ran)
        prec = _perf.run(_uri.with_params(target, mode="thread"), study=study, repetition=repetition, **perf_args)
    else:
        with _serve.Server(target, cpus=server_cpus) as server:
            if tool == "nvmelab":
                uri = f"vfio-user://{server.sockets[0].parent}"
                t0, s0 = time.monotonic(), _serve.process_cpu_s(server.proc.pid)
                prec = _perf.run(uri, study=study, repetition=repetition, **perf_args)
                susage = _usage(s0, _serve.process_cpu_s(server.proc.pid), time.monotonic() - t0)
            else:
                spdk = _run_spdk(p, server, tool_cpus)
                susage = spdk["server_cpu_usage"]
        server_info = _server_summary(server, server_cpus, susage)
    if spdk is not None:
        tot = spdk["total"]
        secs = float(runtime if tool == "spdk_nvme_perf" else runtime + warmup)
        rec = engine_record(
            study=study,
            tool=tool,
            target=target,
            backend=BACKENDS[(tool, via)],
            rw=rw,
            iosize=iosize,
            qdepth=qdepth,
            ncpus=ncpus,
            runtime_s=secs,
            iops=tot["iops"],
            mibs=tot["mibs"],
            ios=int(round(tot["iops"] * secs)),
            errors=int(round(tot.get("fail_per_s", 0.0) * secs)),
            host=host,
            repetition=repetition,
            warmup=float(warmup if tool == "spdk_nvme_perf" else 0.0),
            provenance=_prov.capture(info, spdk_dir=os.environ.get("SPDK_DIR")),
        )
        rec["spdk_commit"] = _spdk_commit()  # the SPDK build's commit (flat: the notebooks name it)
        rec["cpu_usage"] = spdk["cpu_usage"]  # the tool process from its first I/O to its results
        rec["tool_latency_us"] = {k[4:-3]: tot[k] for k in ("lat_avg_us", "lat_min_us", "lat_max_us")}
        rec["tool_argv"] = spdk["argv"]
        if tot["iops"] > 0:
            check = abs(tot["mibs"] * MIB / (tot["iops"] * iosize) - 1.0)
            rec["mibs_check"] = round(check, 4)  # the tool's MiB/s against IOPS x I/O size
    else:
        rec = dict(prec)
        rec["target"] = target
        rec["provenance"] = {**rec["provenance"], "profile": info.get("profile"), "scale": info.get("scale")}
    rec.update(
        via=via,
        lat_track=int(lat_track),
        cpus=tool_cpus,
        ns_per_io=round(ncpus * NS_PER_S / rec["iops"], 2) if rec["iops"] > 0 else None,
        server=server_info,
        server_cpu_usage=None if server_info is None else server_info["cpu_usage"],  # flat, for the frames
        server_busy_fraction=None if server_info is None else server_info["busy_sweep_fraction"],
        stack=stack_label(tool, via, lat_track),
    )
    rec["stress"] = stress
    return validate(rec)


def stack_label(tool: str, via: str, lat_track: int = 0) -> str:
    """A stack's name in tables and figures: tool (+ -L), driver, how it reaches the device."""
    name = tool + (" -L" if lat_track else "")
    return f"{name} ({BACKENDS[(tool, via)].replace('-vfio-user', '')}, {via})"


def _spdk_commit() -> str | None:
    root = os.environ.get("SPDK_DIR")
    return _prov.git_commit(Path(root)) if root else None
