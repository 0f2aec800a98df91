# SPDX-License-Identifier: BSD-3-Clause
"""The QEMU guest's program (src/tools/nvmelab-guest) and the guest run itself.

* On every run: the self-test and perf run of the guest program against emu:// controllers shaped like the
  QEMU ones (512 B and 4 KiB LBAs, MDTS 128 KiB and 32 KiB, one controller with two namespaces), and the
  `provoke` command's rejected read — so the program the guest runs is known good before any guest boots.
* Marked `qemu` and opt-in (NVMELAB_TEST_QEMU=1): the short leg of `make test-qemu` (env/qemu/run.sh
  --short), a few minutes under TCG; the default test run leaves it to `make test-qemu`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EMU_LIKE_QEMU = "emu://?ndev=2&nns=1,2&lbads=512,4096&mdts=128K,32K&nsze=64M,32M"


@pytest.fixture(scope="module")
def guest() -> Path:
    """The host build of the guest program (CMake target nvmelab-guest, built by `make build`); the QEMU
    guest runs a static build of the same sources (env/qemu/run.sh)."""
    built = ROOT / "build/dev/src/tools/nvmelab-guest"
    if not built.exists():
        pytest.skip("nvmelab-guest is not built: run `make build` (CMake target nvmelab-guest)")
    return built


def _run(exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)


def test_selftest_on_emu(guest: Path) -> None:
    r = _run(guest, "selftest", EMU_LIKE_QEMU, "--queues", "4", "--rounds", "4")
    fails = [ln for ln in r.stdout.splitlines() if ln.startswith("NVMELAB-TEST") and " FAIL " in ln]
    assert r.returncode == 0 and not fails, r.stdout + r.stderr
    names = {ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("NVMELAB-TEST")}
    # every kind of check ran on both controllers and on the second namespace
    for n in (
        "ctrl0.identify",
        "ctrl1.identify",
        "ctrl0.ns1.multiqueue-raw",
        "ctrl1.ns2.multiqueue-raw",
        "ctrl0.ns1.prp.max-transfer-offset",
        "ctrl1.ns2.prp.lba-crossing-page",
        "ctrl1.ns1.refuse-over-mdts",
        "ctrl0.ns1.wrap-depth2",
        "ctrl1.ns1.wrap-depth3",
    ):
        assert n in names
    assert re.search(r"^ctrl 0 .*mdts_bytes=131072 ", r.stdout, re.M)
    assert re.search(r"^ctrl 1 .*mdts_bytes=32768 .* nns=2$", r.stdout, re.M)


def test_perf_on_emu(guest: Path) -> None:
    r = _run(guest, "perf", EMU_LIKE_QEMU, "--seconds", "0.3", "--qd", "16", "--queues", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [
        dict(kv.split("=", 1) for kv in ln.split()[1:]) for ln in r.stdout.splitlines() if ln.startswith("NVMELAB-PERF")
    ]
    assert len(rows) == 2 and all(int(x["ios"]) > 0 and x["errors"] == "0" for x in rows)


def test_provoke_is_rejected_by_the_controller(guest: Path) -> None:
    r = _run(guest, "provoke", "emu://")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "LBA Out of Range" in r.stdout
    assert "NVMELAB-PROVOKED pci_nvme_err_invalid_lba_range 1" in r.stdout


def test_open_reports_bad_uri(guest: Path) -> None:
    r = _run(guest, "open", "pci://0000:00:zz.0")
    assert r.returncode == 1 and "not a PCI address" in r.stdout


@pytest.mark.qemu
@pytest.mark.slow
def test_qemu_short_leg() -> None:
    if os.environ.get("NVMELAB_TEST_QEMU") != "1":
        pytest.skip("the QEMU guest runs under `make test-qemu` (or set NVMELAB_TEST_QEMU=1)")
    if os.geteuid() != 0 and not shutil.which("qemu-system-x86_64"):
        pytest.skip("needs qemu-system-x86_64 (or root to install it)")
    r = subprocess.run(["bash", str(ROOT / "env/qemu/run.sh"), "--short"], capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert re.search(r"^uio\s+PASS", r.stdout, re.M) and re.search(r"^vfio\s+PASS", r.stdout, re.M)
