# SPDX-License-Identifier: BSD-3-Clause
"""The emulator's calibrated profiles (src/nvme/emu/profiles.c) against the fitted model's profile CSV.

profiles.c takes its numbers from calibration.h, generated at build time from
data/results/model/pm1753-profile.csv (src/nvme/emu/calibration.cmake), which nvmelab.results.model
writes from the parameters it fitted to named published points; the effective profile values the C
code uses (dumped by the ctest binary `test_emu_regs --profiles-json`) must equal that file's.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROFILES_C = ROOT / "src" / "nvme" / "emu" / "profiles.c"
PROFILE_CSV = ROOT / "data" / "results" / "model" / "pm1753-profile.csv"


def _profile() -> dict[str, float]:
    with PROFILE_CSV.open(newline="") as f:
        return {r["name"]: float(r["value"]) for r in csv.DictReader(f)}


def expected_profiles() -> dict[str, dict[str, float]]:
    r = _profile()
    pm = {
        "dev_iops": r["DEV_IOPS"],
        "dev_bw": r["DEV_BW"],
        "queue_iops": r["QUEUE_IOPS"],
        "lat_ns": r["LAT_NS"],
        "lat_sigma": 0.0,
        "link_bw": 0.0,
    }
    return {"pm1753": pm, "pm1753-p2p": {**pm, "link_bw": r["P2P_LINK_BW"]}}


def test_profile_csv_names_its_published_points():
    with PROFILE_CSV.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["name"] for r in rows} >= {"LAT_NS", "QUEUE_IOPS", "DEV_IOPS", "DEV_BW", "P2P_LINK_BW"}
    assert all(re.search(r"\w+:\S+", r["points"]) for r in rows), "every number names the published points it came from"


def test_profiles_c_quotes_no_number():
    """The fitted numbers reach the C code only through the generated calibration.h."""
    text = re.sub(r"[ ,_]", "", PROFILES_C.read_text())
    for v in _profile().values():
        digits = f"{v:.6g}".replace(".", "").split("e")[0]
        if len(digits) >= 4:
            assert digits not in text, f"profiles.c quotes the fitted value {v}"


def _dump_binary() -> Path | None:
    candidates = [os.environ.get("NVMELAB_BUILD", ""), "build/dev", "build/emulator", "build/asan"]
    for c in candidates:
        if c:
            p = ROOT / c / "tests" / "c" / "test_emu_regs"
            if p.exists():
                return p
    return None


def test_effective_profiles_match_derivation():
    exe = _dump_binary()
    if exe is None:
        pytest.skip("C tests not built (make build builds build/dev/tests/c/test_emu_regs)")
    table = {
        p["name"]: p
        for p in json.loads(
            subprocess.run([str(exe), "--profiles-json"], check=True, capture_output=True, text=True).stdout
        )
    }
    assert table["null"]["lat_ns"] == 0 and table["null"]["dev_iops"] == 0
    for name, want in expected_profiles().items():
        got = table[name]
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-12), f"{name}.{key}: C has {got[key]}, derived {value}"
