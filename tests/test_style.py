# SPDX-License-Identifier: BSD-3-Clause
"""The tree stays formatted: clang-format (.clang-format) for C, C++ and CUDA sources, ruff
(pyproject.toml [tool.ruff]) for Python sources and notebooks, and every source file carries its
SPDX license line.

The formatter comes pinned from env/requirements.lock, so the check runs wherever `make test` runs; a
change that is not formatted fails here with the file names (fix: `make format`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name if (BIN / name).exists() else shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: it comes from env/requirements.lock (make env)")
    return str(path)


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", *patterns], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [f for f in out.stdout.splitlines() if (ROOT / f).exists()]


def test_c_sources_are_clang_formatted() -> None:
    files = _tracked("*.c", "*.h", "*.cu", "*.cuh", "*.cpp", "*.hpp")
    assert len(files) > 50
    p = subprocess.run(
        [_tool("clang-format"), "--dry-run", "-Werror", *files], cwd=ROOT, capture_output=True, text=True
    )
    bad = sorted({line.split(":", 1)[0] for line in p.stderr.splitlines() if ": error:" in line})
    assert p.returncode == 0, f"not clang-formatted (run `make format`): {', '.join(bad) or p.stderr[:500]}"


def test_python_is_ruff_clean_and_formatted() -> None:
    ruff = _tool("ruff")
    lint = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert lint.returncode == 0, f"ruff check: {lint.stdout[-1500:]}{lint.stderr[-500:]}"
    fmt = subprocess.run([ruff, "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert fmt.returncode == 0, f"not ruff-formatted (run `make format`): {fmt.stdout[-1500:]}"


#: Sources that carry the license line (notebooks and data files do not).
SPDX_PATTERNS = (
    "*.c",
    "*.h",
    "*.cu",
    "*.cuh",
    "*.cpp",
    "*.hpp",
    "*.py",
    "*.sh",
    "*.cmake",
    "CMakeLists.txt",
    "*/CMakeLists.txt",
    "Makefile",
    ".ci/run",
)


def test_every_source_file_has_an_spdx_line() -> None:
    files = _tracked(*SPDX_PATTERNS)
    assert len(files) > 100
    missing = [f for f in files if "SPDX-License-Identifier: BSD-3-Clause" not in (ROOT / f).read_text()[:400]]
    assert not missing, f"no SPDX-License-Identifier line in: {', '.join(missing)}"


#: The size past which a source file is split along its jobs (issue 16).
MAX_LINES = 800


def test_no_source_file_over_800_lines() -> None:
    files = _tracked("*.c", "*.h", "*.cu", "*.cuh", "*.cpp", "*.hpp", "*.py")
    long = {f: n for f in files if (n := len((ROOT / f).read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines, split along their jobs: {long}"
