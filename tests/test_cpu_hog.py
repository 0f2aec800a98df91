# SPDX-License-Identifier: BSD-3-Clause
"""env/with-cpu-hog.sh (make test-busy): the command runs beside a hog that really runs, the hog is
stopped however the command ends, and a hog that cannot run stops the script instead of letting the
command run on an idle machine (a stress-ng hidden as a non-executable file was once 'started')."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOG = ROOT / "env" / "with-cpu-hog.sh"


def _fake_path(tmp_path: Path, body: str) -> dict:
    """PATH with a `stress-ng` of our own first: a script with `body`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "stress-ng"
    fake.write_text("#!/bin/sh\n" + body)
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOG_CPUS": "1", "HOG_MAX_S": "60"}


def _hog_pids(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return out.split()


def test_the_command_runs_beside_a_running_hog_and_the_hog_is_stopped(tmp_path):
    env = _fake_path(tmp_path, "exec sleep 60 # nvmelab-fake-hog\n")
    r = subprocess.run(
        ["bash", str(HOG), "bash", "-c", "pgrep -f nvmelab-fake-hog >/dev/null && exit 7"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 7, r.stderr  # the command saw the hog, and its status is passed on
    assert "hog stopped; exit status 7" in r.stderr
    assert not _hog_pids("nvmelab-fake-hog")


def test_a_hog_that_cannot_run_stops_the_script_before_the_command(tmp_path):
    env = _fake_path(tmp_path, "exit 1\n")
    marker = tmp_path / "ran"
    r = subprocess.run(["bash", str(HOG), "touch", str(marker)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "ended at once" in r.stderr, r.stderr
    assert not marker.exists()
