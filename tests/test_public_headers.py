# SPDX-License-Identifier: BSD-3-Clause
"""The driver's public surface (issue 37): one list of public headers, nothing past it used from outside.

The list is NVMELAB_DRIVER_PUBLIC_HEADERS in src/nvme/CMakeLists.txt (the one place; CMake installs it as the
component nvmelab-driver-headers). This test fails when
- a file of src/ outside src/nvme/ (engines, blksum, tools, bindings) includes a driver header not on the list;
- a public header includes a private driver header (the list is closed under #include);
- a C test or fuzz harness includes a private header without being named in WHITE_BOX below (white-box tests
  of internals are allowed, by name, and an entry that is no longer needed fails too, so the list stays exact).
The include root `src/` stays exported by nvmelab_driver (headers live beside their sources); this test, not
the compiler's search path, is what keeps the private headers private. The build adds one check of its own:
tests/c/CMakeLists.txt compiles every public header with only the public ones on the include path.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DRIVER = SRC / "nvme"
_SUFFIXES = {".c", ".h", ".cu", ".cuh", ".cpp"}

#: Tests that exercise driver internals directly, and the private headers each may include.
WHITE_BOX = {
    "tests/c/test_driver_units.c": {"nvme/ctrl_internal.h", "nvme/pci.h", "nvme/qpair.h"},
    "tests/c/test_qpair_fastpath.c": {"nvme/qpair.h", "nvme/target.h"},
    "tests/c/test_emu_model.c": {"nvme/emu/emu_internal.h"},
    "tests/c/test_cuda_queue_host.c": {"nvme/emu/gpu/gemu_plan.h"},
    "tests/fuzz/fuzz_uri.c": {"nvme/emu/emu_internal.h"},
}


def public_headers() -> list[str]:
    """NVMELAB_DRIVER_PUBLIC_HEADERS, as src/nvme/CMakeLists.txt sets it."""
    text = (DRIVER / "CMakeLists.txt").read_text()
    m = re.search(r"^set\(NVMELAB_DRIVER_PUBLIC_HEADERS\s+([^)$]*)\)", text, flags=re.M)
    assert m, "src/nvme/CMakeLists.txt no longer sets NVMELAB_DRIVER_PUBLIC_HEADERS"
    return m.group(1).split()


def driver_includes(path: Path) -> list[str]:
    """The driver headers ("nvme/...") a file includes."""
    return re.findall(r'^\s*#\s*include\s*"(nvme/[^"]+)"', path.read_text(errors="replace"), flags=re.M)


def leaks(files: list[Path], public: set[str], allowed: dict[str, set[str]] | None = None) -> list[str]:
    """'file includes header' for every include of a driver header that is neither public nor allowed."""
    out = []
    for f in files:
        rel = str(f.relative_to(ROOT))
        ok = public | (allowed or {}).get(rel, set())
        out += [f"{rel} includes {inc}" for inc in driver_includes(f) if inc not in ok]
    return out


def _sources(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs for p in d.rglob("*") if p.suffix in _SUFFIXES and p.is_file())


def test_the_list_names_real_headers() -> None:
    hdrs = public_headers()
    assert len(hdrs) == len(set(hdrs)) >= 10
    assert [h for h in hdrs if not (SRC / h).is_file()] == []
    assert "nvme/nvme.h" in hdrs
    # the internal header is named as such, and is not public
    assert not (DRIVER / "ctrl.h").exists() and (DRIVER / "ctrl_internal.h").is_file()
    assert not [h for h in hdrs if "internal" in h]


def test_nothing_outside_the_driver_includes_a_private_header() -> None:
    outside = [p for p in _sources(SRC) if DRIVER not in p.parents]
    assert len([p for p in outside if driver_includes(p)]) > 20, "no driver includes found: the scan looks broken"
    assert leaks(outside, set(public_headers())) == []


def test_public_headers_include_only_public_headers() -> None:
    public = set(public_headers())
    assert leaks([SRC / h for h in sorted(public)], public) == []


def test_tests_include_private_headers_only_by_name() -> None:
    tests = _sources(ROOT / "tests" / "c", ROOT / "tests" / "fuzz")
    public = set(public_headers())
    assert leaks(tests, public, WHITE_BOX) == []
    # every white-box entry is still needed (and names a private header), so the exceptions stay exact
    stale = {
        f: sorted(h for h in hdrs if h in public or h not in driver_includes(ROOT / f)) for f, hdrs in WHITE_BOX.items()
    }
    assert {f: h for f, h in stale.items() if h} == {}


def test_the_check_can_fail() -> None:
    fake = ROOT / "tests" / "c" / "test_driver_units.c"  # a real white-box file, judged without its exception
    assert leaks([fake], set(public_headers())) != []
    assert leaks([fake], set(public_headers()), WHITE_BOX) == []


def test_the_design_note_names_the_list() -> None:
    head = "\n".join((SRC / "README.md").read_text().splitlines()[:12])
    assert "NVMELAB_DRIVER_PUBLIC_HEADERS" in head
