# SPDX-License-Identifier: BSD-3-Clause
"""`make test-kernel` (env/qemu/kernel.sh): the parts that run without QEMU 10, and the committed log.

* The recipe refuses URIs its guest cannot check (not emu://, more than 4 controllers, more than one namespace,
  a namespace too small for its patterns) before it installs or builds anything, and both guest scripts parse.
* It is its own make target and no CI leg (the first run builds QEMU).
* The committed log, data/results/conformance/kernel-nvme.log, is a passing run on our controllers that shows
  what issue 36 asks for: the Linux nvme driver binding, nvme-cli's id-ctrl, id-ns and smart-log, a fio verify
  pass, reset and rescan, on every controller it served.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERNEL_SH = ROOT / "env/qemu/kernel.sh"
LOG = ROOT / "data/results/conformance/kernel-nvme.log"


def _kernel_sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(KERNEL_SH), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("pci://0000:00:04.0", "must be an emu:// URI"),
        ("emu://?ndev=5", "1 to 4 controllers"),
        ("emu://?nns=2", "one namespace per controller"),
        ("emu://?nsze=8M", "namespace too small"),
        ("emu://?ndev=2&nsze=64M,4M", "controller 1: namespace too small"),
        ("emu://?nsze=12Q", "cannot read the size"),
    ],
)
def test_refuses_uris_it_cannot_check(uri: str, why: str) -> None:
    r = _kernel_sh("--uri", uri)
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert "packages this leg needs" not in r.stderr, "refused only after the package step"


def test_help_and_unknown_argument() -> None:
    r = _kernel_sh("--help")
    assert r.returncode == 0 and "--reference" in r.stdout and "--commit REV" in r.stdout
    r = _kernel_sh("--bogus")
    assert r.returncode == 2 and "unknown argument" in r.stderr


def test_scripts_parse() -> None:
    for f in ("kernel.sh", "qemu-build.sh", "guest-lib.sh", "run.sh"):
        r = subprocess.run(["bash", "-n", str(ROOT / "env/qemu" / f)], capture_output=True, text=True)
        assert r.returncode == 0, f"{f}: {r.stderr}"
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh
    r = subprocess.run([sh, "-n", str(ROOT / "env/qemu/kernel-tests.sh")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_own_make_target_not_a_ci_leg() -> None:
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^test-kernel: build\n\tbash env/qemu/kernel\.sh \$\(KERNEL_ARGS\)$", make, re.M)
    assert "test-kernel" not in (ROOT / ".ci/run").read_text()


#: what every served controller's section of the log must show passing
REQUIRED = ("bind", "interrupts", "id-ctrl", "id-ns", "smart-log", "rw-verify-block", "fio-verify", "reset")
REQUIRED += ("io-interrupts", "smart-counts-writes", "ns-rescan", "pci-remove", "pci-rescan", "pci-rescan-read-back")


def test_committed_log_is_a_passing_run_on_our_controllers() -> None:
    if not LOG.exists():
        pytest.skip("no committed kernel-nvme.log yet (make test-kernel writes it)")
    text = LOG.read_text()
    header = dict(re.findall(r"^# ([a-zA-Z ]+?): +(.*)$", text, re.M))
    assert header["verdict"].startswith("PASS"), header["verdict"]
    assert "--reference" not in text.splitlines()[0], "the reference run's log is not the committed one"
    assert re.match(r"[0-9a-f]{40} ", header["nvmelab"]), header["nvmelab"]
    assert re.search(r"QEMU emulator version (1[1-9]|10\.[1-9])", header["QEMU"]), header["QEMU"]
    assert header["controller"].startswith("emu://")
    ndev = int(re.search(r"ndev=(\d)", header["controller"]).group(1)) if "ndev=" in header["controller"] else 1
    results = dict(re.findall(r"^NVMELAB-TEST (\S+) (PASS|FAIL)", text, re.M))
    assert results and all(v == "PASS" for v in results.values()), [k for k, v in results.items() if v != "PASS"]
    for i in range(ndev):
        for name in REQUIRED:
            assert results.get(f"kernel.ctrl{i}.{name}") == "PASS", f"ctrl{i}.{name} missing"
    assert results.get("kernel.kernel-log-clean") == "PASS"
    assert re.search(r"dmesg\| \[ *[0-9.]+\] nvme nvme0: pci function 0000:00:06\.0", text)
    assert "NVMELAB-LEG kernel PASS" in text
    qemu_stderr = text.split("# --- QEMU stderr ---", 1)[1].split("# --- nvmelab-serve", 1)[0]
    errors = [ln for ln in qemu_stderr.splitlines() if "error" in ln.lower() and "warning:" not in ln]
    assert not errors, f"QEMU complained about the device: {errors[:3]}"
