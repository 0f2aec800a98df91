# SPDX-License-Identifier: BSD-3-Clause
"""The emulator's calibrated profiles (src/nvme/emu/profiles.c) re-derived from data/reference/headline.csv.

profiles.c takes its published inputs from calibration.h, generated at build time from the reference
table (src/nvme/emu/calibration.cmake); the effective profile values the C code uses (dumped by the ctest
binary `test_emu_regs --profiles-json`) must equal the arithmetic documented in profiles.c.
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
HEADLINE = ROOT / "data" / "reference" / "headline.csv"
GIB = 2**30
NDEVS_PUBLISHED = 16


def _headline() -> dict[tuple[str, str, str], str]:
    with HEADLINE.open(newline="") as f:
        return {(r["experiment"], r["quantity"], r["config"]): r["value"] for r in csv.DictReader(f)}


def _row(rows, experiment: str, quantity: str, config_prefix: str) -> float:
    hits = [v for (e, q, c), v in rows.items() if e == experiment and q == quantity and c.startswith(config_prefix)]
    assert len(hits) == 1, f"headline.csv: expected one row {experiment},{quantity},{config_prefix}*, got {hits}"
    return float(hits[0])


def expected_profiles() -> dict[str, dict[str, float]]:
    rows = _headline()
    dev_iops = _row(rows, "cpu-initiated", "device_iops_cap", "single device")
    plateau_gib = _row(rows, "cpu-initiated", "bandwidth", "4096B plateau")
    nq1_qd512 = _row(rows, "cuda-qdepth", "iops", "nqueues=1 qd=512")
    nq1_qd128 = _row(rows, "cuda-qdepth", "iops", "nqueues=1 qd=128")
    p2p = _row(rows, "pcie-saturation", "payload_bandwidth", ">=4096B") * 1e9
    pm = {
        "dev_iops": dev_iops,
        "dev_bw": plateau_gib * GIB / NDEVS_PUBLISHED,
        "queue_iops": nq1_qd512 / NDEVS_PUBLISHED,
        "lat_ns": 128 * NDEVS_PUBLISHED / nq1_qd128 * 1e9,
        "lat_sigma": 0.0,
        "link_bw": 0.0,
    }
    return {"pm1753": pm, "pm1753-p2p": {**pm, "link_bw": p2p}}


def test_roofline_is_sixteen_device_caps():
    rows = _headline()
    cap = _row(rows, "cpu-initiated", "device_iops_cap", "single device")
    roof = _row(rows, "cpu-initiated", "roofline_iops", "16 devices")
    assert roof == NDEVS_PUBLISHED * cap, "profiles.c assumes the roofline is 16 independent device caps"


def test_profiles_c_quotes_no_published_number():
    """The published inputs reach the C code only through the generated calibration.h."""
    text = PROFILES_C.read_text()
    rows = _headline()
    for key in [("cpu-initiated", "device_iops_cap"), ("cuda-qdepth", "iops"), ("cpu-initiated", "roofline_iops")]:
        for (e, q, _c), v in rows.items():
            if (e, q) == key:
                digits = v.replace(".", "")
                assert digits not in re.sub(r"[ ,_]", "", text), f"profiles.c quotes the published {e},{q} value {v}"


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
