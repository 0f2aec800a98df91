# SPDX-License-Identifier: BSD-3-Clause
"""One ctest entry per C test case (issue 37): tests/c/CMakeLists.txt registers `<program>.<case>` for every
`RUN_CASE(name);` line of a tests/c/test_*.c, run as `<program> --case <name>` (check.h reads the option).

A RUN_CASE the configure-time scan cannot see (inside an `if`, two on a line) would run when the program runs
alone but never under ctest: every RUN_CASE must stand alone on its line. With the dev build at hand, the
registered entries are compared with the sources, both ways.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
C_TESTS = ROOT / "tests" / "c"
CTEST_FILE = ROOT / "build" / "dev" / "tests" / "c" / "CTestTestfile.cmake"
#: What the CMake scan matches (tests/c/CMakeLists.txt, nvmelab_add_c_test).
_CASE_LINE = re.compile(r"^[ \t]*RUN_CASE\(([A-Za-z0-9_]+)\);")


def cases() -> dict[str, list[str]]:
    """Program -> its cases, in source order, as the CMake scan sees them."""
    out = {}
    for src in sorted(C_TESTS.glob("test_*.c")):
        out[src.stem] = [m.group(1) for ln in src.read_text().splitlines() if (m := _CASE_LINE.match(ln))]
    return out


def test_every_run_case_is_seen_by_the_scan() -> None:
    hidden = []
    for src in sorted(C_TESTS.glob("test_*.c")):
        for n, ln in enumerate(src.read_text().splitlines(), 1):
            if "RUN_CASE(" in ln and not _CASE_LINE.match(ln):
                hidden.append(f"{src.name}:{n}: {ln.strip()}")
    assert hidden == [], "RUN_CASE must stand alone on its line, or ctest never runs it"
    all_cases = cases()
    assert sum(map(len, all_cases.values())) > 50, "no cases found: the scan looks broken"
    dups = {p: sorted({c for c in cs if cs.count(c) > 1}) for p, cs in all_cases.items()}
    assert {p: d for p, d in dups.items() if d} == {}


@pytest.mark.skipif(not CTEST_FILE.is_file(), reason="needs the dev build with its C tests (make build)")
def test_ctest_has_one_entry_per_case() -> None:
    registered = set(re.findall(r'^add_test\("([^"]+)"', CTEST_FILE.read_text(), flags=re.M))
    want = {f"{p}.{c}" if cs else p for p, cs in cases().items() for c in (cs or [None])}
    assert sorted(want - registered) == [], "cases without a ctest entry: configure again (make build)"
    assert sorted(registered - want) == [], "ctest entries without a case"
