# SPDX-License-Identifier: BSD-3-Clause
"""Seed 004's fixed clock under the userspace governor as a host variable (nvmelab.host.hostvars).

On a fake sysfs: a host that offers the userspace governor is set to it and to the clock,
and restored; a host without it (or without cpufreq) records the variable as not
controllable with its reason, and a run asking for it is refused, never mislabelled.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvmelab.host.hostvars import HostControl, controllability
from nvmelab.studies import HOST_VARS, load_spec


def _sys(root: Path, governors: str) -> Path:
    for c in (0, 1):
        d = root / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text("performance\n")
        (d / "scaling_available_governors").write_text(governors + "\n")
        (d / "scaling_setspeed").write_text("<unsupported>\n")
        t = root / f"cpu{c}" / "topology"
        t.mkdir()
        (t / "thread_siblings_list").write_text(f"{c}\n")
    (root / "online").write_text("0-1\n")
    return root


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="host variables are set only as root")


@needs_root
def test_fixed_clock_is_set_and_restored(tmp_path: Path) -> None:
    root = _sys(tmp_path / "sys", "performance powersave userspace")
    assert controllability(root)["fixed_freq"] == {"found": 0, "settable": True, "why": ""}
    host = HostControl(root=root)
    ok, notes = host.apply({"governor": "userspace", "fixed_freq": 3000000})
    assert ok, notes
    for c in (0, 1):
        d = root / f"cpu{c}" / "cpufreq"
        assert d.joinpath("scaling_governor").read_text() == "userspace"
        assert d.joinpath("scaling_setspeed").read_text() == "3000000"
    assert host.current()["fixed_freq"] == 3000000
    host.restore()
    assert (root / "cpu1" / "cpufreq" / "scaling_governor").read_text().strip() == "performance"
    assert host.current()["fixed_freq"] == 0


def test_a_host_without_the_userspace_governor_cannot_fix_the_clock(tmp_path: Path) -> None:
    root = _sys(tmp_path / "sys", "performance powersave")
    entry = controllability(root)["fixed_freq"]
    assert not entry["settable"] and "userspace governor is not offered" in entry["why"]
    ok, notes = HostControl(root=root).apply({"governor": "userspace", "fixed_freq": 3000000})
    assert not ok and any(n.startswith("could not set governor=userspace") for n in notes), notes
    bare = tmp_path / "bare"
    (bare / "cpu0" / "topology").mkdir(parents=True)
    (bare / "cpu0" / "topology" / "thread_siblings_list").write_text("0\n")
    (bare / "online").write_text("0\n")
    entry = controllability(bare)["fixed_freq"]
    assert entry["found"] is None and not entry["settable"] and "no cpufreq" in entry["why"]


def test_the_fixed_clock_is_a_host_variable_of_the_sweep() -> None:
    assert "fixed_freq" in HOST_VARS
    runs = [r for r in load_spec("cpu_initiated").plan("paper").runs if r.params.get("fixed_freq")]
    assert runs and all(r.host_params["governor"] == "userspace" for r in runs)
    assert all("fixed_freq" not in r.engine_params for r in runs)
