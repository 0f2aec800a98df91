# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.engines.stacks: I/O stacks side by side on one served controller.

Our driver's two stacks run for real (a served controller and the in-process one). SPDK's tools are used
from SPDK_DIR only: the SPDK path is tested here with a stand-in executable that prints what the real tools
print (their start and end marks, a `Total` line), and for real when SPDK_DIR names a build."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from nvmelab.engines import stacks
from nvmelab.host import cpus as _cpus
from nvmelab.host import serve
from nvmelab.results.records import validate

needs_server = pytest.mark.skipif(serve.command() is None, reason="nvmelab-serve is not built (make build)")
two_cores = pytest.mark.skipif(_cpus.topology().nphysical < 2, reason="the server needs a core of its own")

# What the tools print (taken from runs of SPDK v26.09-pre here), cut to the lines the engine reads.
PERF_OUT = """Initializing NVMe Controllers
Attached to NVMeoF Controller at VFIOUSER (/tmp/sv/ctrl0)
Initialization complete. Launching workers.
========================================================
                                                                                Latency(us)
Device Information                          :       IOPS      MiB/s    Average        min        max
VFIOUSER (/tmp/sv/ctrl0) NSID 1 from core  0: 6243272.00    3048.47      20.49       8.36   12190.37
========================================================
Total                                       : 6243272.00    3048.47      20.49       8.36   12190.37
"""
BDEVPERF_OUT = """Running I/O for 2 seconds...
  1982452.00 IOPS,   967.99 MiB/s
                                                                                                Latency(us)
 Device Information          : runtime(s)       IOPS      MiB/s     Fail/s     TO/s    Average        min        max
Job: Nvme0n1 (Core Mask 0x1, workload: randread, depth: 128, IO size: 512)
\t Nvme0n1             :       2.00 1732856.59     846.12       0.00     0.00      73.75      13.90   53719.27
 ===================================================================================================================
 Total                       :            1732856.59     846.12       0.00     0.00      73.75      13.90   53719.27
"""


def test_parse_total_reads_each_tools_columns() -> None:
    t = stacks.parse_total("spdk_nvme_perf", PERF_OUT)
    assert t == {"iops": 6243272.0, "mibs": 3048.47, "lat_avg_us": 20.49, "lat_min_us": 8.36, "lat_max_us": 12190.37}
    b = stacks.parse_total("bdevperf", BDEVPERF_OUT)
    assert b["iops"] == 1732856.59 and b["fail_per_s"] == 0.0 and b["lat_max_us"] == 53719.27


def test_parse_total_without_a_total_line_names_the_tool() -> None:
    with pytest.raises(ValueError, match="bdevperf: no 'Total' line"):
        stacks.parse_total("bdevperf", PERF_OUT)  # five numbers where bdevperf prints seven
    with pytest.raises(ValueError, match="spdk_nvme_perf"):
        stacks.parse_total("spdk_nvme_perf", "Total : n/a\n")


def test_argv_of_each_tool(tmp_path: Path) -> None:
    p = dict(tool="spdk_nvme_perf", rw="randread", iosize=512, qdepth=32, runtime=2, warmup=1, lat_track=1)
    argv = stacks.spdk_argv(p, Path("/x/perf"), "/d/ctrl0", [0, 2], tmp_path / "c.json")
    assert argv[:2] == ["/x/perf", "-g"] and argv[-1] == "-L"
    assert f"trtype:VFIOUSER traddr:/d/ctrl0 subnqn:{stacks.SUBNQN}" in argv
    assert argv[argv.index("-c") + 1] == "0x5" and argv[argv.index("-a") + 1] == "1"
    p.update(tool="bdevperf", lat_track=0)
    argv = stacks.spdk_argv(p, Path("/x/bdevperf"), "/d/ctrl0", [1], tmp_path / "c.json")
    assert argv[argv.index("-m") + 1] == "0x2" and argv[argv.index("-t") + 1] == "3"  # warm-up + runtime
    with pytest.raises(ValueError, match="whole seconds"):
        stacks.spdk_argv({**p, "runtime": 0.5}, Path("/x/b"), "/d", [0], tmp_path / "c.json")


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"target": "file:///tmp/x"}, "emulated controller"),
        ({"target": "emu://?profile=null&mode=inline"}, "mode=inline"),
        ({"tool": "fio"}, "tool='fio'"),
        ({"tool": "bdevperf", "via": "in-process"}, "via='in-process'"),
        ({"tool": "bdevperf", "lat_track": 1}, "lat_track=1"),
        ({"rw": "randrw"}, "rw='randrw'"),
        ({"iosize": 100}, "multiple of 512"),
        ({"qdepth": 0}, "qdepth=0"),
    ],
)
def test_bad_parameters_are_refused_before_anything_runs(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        stacks.run(**{"runtime": 1, "warmup": 0, **kw})


def test_spdk_tools_need_spdk_dir_and_hugepages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SPDK_DIR", raising=False)
    monkeypatch.setattr(stacks, "_mounts", lambda: ["nodev /dev/hugepages hugetlbfs rw 0 0"])
    with pytest.raises(ValueError, match="SPDK_DIR is not set"):
        stacks.run(tool="spdk_nvme_perf", runtime=1, warmup=0)
    monkeypatch.setenv("SPDK_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="build/bin/spdk_nvme_perf is not an executable"):
        stacks.run(tool="spdk_nvme_perf", runtime=1, warmup=0)
    monkeypatch.setattr(stacks, "_mounts", lambda: ["proc /proc proc rw 0 0"])
    with pytest.raises(ValueError, match="hugetlbfs"):
        stacks.run(tool="bdevperf", runtime=1, warmup=0)


def test_the_server_needs_a_core_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cpus, "topology", lambda *a, **k: _cpus.Topology(cores=[(0, 1)]))
    with pytest.raises(ValueError, match="a core of its own"):
        stacks.split_cpus(1)
    monkeypatch.setattr(_cpus, "topology", lambda *a, **k: _cpus.Topology(cores=[(0, 2), (1, 3)]))
    assert stacks.split_cpus(1) == ([0], [1, 3])


def _check_record(rec: dict, tool: str, via: str) -> None:
    validate(rec)
    assert rec["tool"] == tool and rec["via"] == via and rec["target"] == "emu://?profile=null"
    assert rec["provenance"]["profile"] == "null" and rec["iops"] > 0
    assert rec["ns_per_io"] == pytest.approx(rec["ncpus"] * 1e9 / rec["iops"], rel=1e-3)


@needs_server
@two_cores
@pytest.mark.parametrize("via", ["vfio-user", "in-process"])
def test_our_driver_on_a_served_and_an_embedded_controller(via: str) -> None:
    rec = stacks.run(tool="nvmelab", via=via, iosize=4096, qdepth=8, runtime=0.3, warmup=0.1, study="t")
    _check_record(rec, "nvmelab", via)
    assert rec["errors"] == 0 and rec["cpus"] == [stacks.split_cpus(1)[0][0]]
    if via == "vfio-user":
        srv = rec["server"]
        assert srv["cpus"] == stacks.split_cpus(1)[1] and srv["cpu_usage"] is not None
        assert rec["backend"] == "nvmelab-vfio-user" and rec["stack"] == "nvmelab (nvmelab, vfio-user)"
    else:
        assert rec["server"] is None and rec["backend"] == "nvmelab-emu"


FAKE_TOOL = """#!/bin/sh
# a stand-in for an SPDK tool: its start mark, a busy loop, its results (with the end mark)
echo "$0 $*" > "$(dirname "$0")/argv"
echo "{start}"
i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done
printf '%s\\n' "{out}"
"""


def _fake_spdk(root: Path, tool: str, out: str, start: str) -> Path:
    exe = root / stacks.SPDK_PATHS[tool]
    exe.parent.mkdir(parents=True, exist_ok=True)
    body = out.split(start, 1)[1]
    exe.write_text(FAKE_TOOL.format(start=start, out=body.replace('"', "'")))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


@needs_server
@two_cores
@pytest.mark.parametrize("tool, out", [("spdk_nvme_perf", PERF_OUT), ("bdevperf", BDEVPERF_OUT)])
def test_an_spdk_tool_run_becomes_a_record(
    tool: str, out: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = _fake_spdk(tmp_path, tool, out, stacks.MARKS[tool][0])
    monkeypatch.setenv("SPDK_DIR", str(tmp_path))
    monkeypatch.setattr(stacks, "_mounts", lambda: ["nodev /dev/hugepages hugetlbfs rw 0 0"])
    rec = stacks.run(tool=tool, qdepth=128, runtime=1, warmup=0, study="t")
    _check_record(rec, tool, "vfio-user")
    assert rec["iops"] == stacks.parse_total(tool, out)["iops"] and rec["backend"] == "spdk-vfio-user"
    assert rec["cpu_usage"] is not None and rec["cpu_usage"] > 0  # read at its two marks (it spins between)
    assert rec["server"]["cpu_usage"] is not None
    argv = (exe.parent / "argv").read_text()
    assert "-g" in argv.split() and " -q 128 -o 512 -w randread " in argv
    assert rec["provenance"]["spdk_dir"] == str(tmp_path)


def test_a_failing_tool_is_one_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if serve.command() is None or _cpus.topology().nphysical < 2:
        pytest.skip("needs nvmelab-serve and two cores")
    exe = tmp_path / stacks.SPDK_PATHS["bdevperf"]
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho 'spdk_app_start: *ERROR*: no hugepages' >&2\nexit 3\n")
    exe.chmod(0o755)
    monkeypatch.setenv("SPDK_DIR", str(tmp_path))
    monkeypatch.setattr(stacks, "_mounts", lambda: ["nodev /dev/hugepages hugetlbfs rw 0 0"])
    with pytest.raises(RuntimeError, match=r"bdevperf exited with status 3: .*no hugepages"):
        stacks.run(tool="bdevperf", runtime=1, warmup=0)


SPDK_DIR = os.environ.get("SPDK_DIR")


@pytest.mark.skipif(not SPDK_DIR, reason="SPDK_DIR is not set: SPDK's tools are used from a user's build")
@needs_server
@two_cores
@pytest.mark.parametrize("tool, lat", [("spdk_nvme_perf", 0), ("spdk_nvme_perf", 1), ("bdevperf", 0)])
def test_spdk_tools_for_real(tool: str, lat: int) -> None:
    rec = stacks.run(tool=tool, lat_track=lat, qdepth=32, runtime=1, warmup=0, study="t")
    _check_record(rec, tool, "vfio-user")
    assert rec["errors"] == 0 and rec["mibs_check"] < 0.01


def test_ctrl_c_during_a_tool_run_leaves_no_tool_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if serve.command() is None or _cpus.topology().nphysical < 2:
        pytest.skip("needs nvmelab-serve and two cores")
    exe = tmp_path / stacks.SPDK_PATHS["spdk_nvme_perf"]
    exe.parent.mkdir(parents=True)
    exe.write_text(f"#!/bin/sh\necho $$ > {tmp_path}/pid\nexec sleep 60\n")
    exe.chmod(0o755)
    monkeypatch.setenv("SPDK_DIR", str(tmp_path))
    monkeypatch.setattr(stacks, "_mounts", lambda: ["nodev /dev/hugepages hugetlbfs rw 0 0"])
    real_wait = subprocess.Popen.wait

    def interrupted(self, timeout=None):  # the first wait for the tool is where Ctrl-C lands
        if timeout is not None and timeout > 30:
            for _ in range(100):
                if (tmp_path / "pid").exists():
                    break
                time.sleep(0.05)
            raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stacks.run(tool="spdk_nvme_perf", runtime=1, warmup=0)
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
