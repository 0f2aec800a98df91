# SPDX-License-Identifier: BSD-3-Clause
"""env/prereqs.sh, the one check of what each make target needs from the system: silent when all is
there, and otherwise one line per missing part with its Debian package, then the install command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "env" / "prereqs.sh"


def prereqs(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable, **(env or {})},
    )


def test_silent_on_this_machine():
    """The tests run here, so the build's prerequisites are here."""
    p = prereqs("env", "build")
    assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p.stderr


@pytest.fixture
def bare_path(tmp_path) -> str:
    """A PATH with a shell and the few tools the script itself uses, and no compiler."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "id", "tr", "head", "sed", "mktemp", "rm"):
        real = shutil.which(tool)
        assert real, tool
        (bindir / tool).symlink_to(real)
    return str(bindir)


def test_missing_compilers_are_named_with_packages(bare_path):
    p = prereqs("build", env={"PATH": bare_path})
    assert p.returncode == 1
    err = p.stderr
    assert "a C compiler (cc)" in err and "Debian package: gcc" in err, err
    assert "a C++ compiler (c++)" in err and "Debian package: g++" in err, err
    assert "apt-get install gcc g++" in err, err
    assert "Traceback" not in err


def test_missing_python_is_named():
    p = prereqs("env", env={"PYTHON": "/nonexistent/python3"})
    assert p.returncode == 1
    assert "/nonexistent/python3" in p.stderr and "Debian package: python3" in p.stderr, p.stderr


def test_unknown_leg_is_refused():
    p = prereqs("everything")
    assert p.returncode == 2 and "unknown leg 'everything'" in p.stderr


def test_makefile_targets_check_first():
    """Each target that needs the system names its check before anything else."""
    make = (ROOT / "Makefile").read_text()
    for target, check in (
        ("build", "check-build"),
        ("test-qemu", "check-qemu"),
        ("test-browser", "check-browser"),
        ("bench", "check-bench"),
        ("test-sanitize", "check-sanitize"),
        ("fuzz", "check-fuzz"),
        ("test-gpu", "check-gpu"),
        ("bench-gpu", "check-gpu"),
    ):
        line = next(ln for ln in make.splitlines() if ln.startswith(f"{target}:"))
        assert line.split(":", 1)[1].split()[0] == check, line
    assert "| check-env" in make  # the venv's stamp waits for the env check


#: Standard-library modules that appeared after Python 3.10, with the version that brought them.
NEWER_STDLIB = {"tomllib": (3, 11)}


def test_the_stated_python_version_is_what_the_code_needs():
    """requires-python (pyproject.toml), the README and env/prereqs.sh state one minimum, and it is
    at least what the package imports need (tomllib: 3.11)."""
    import ast
    import re
    import tomllib

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    m = re.fullmatch(r">=\s*3\.(\d+)", tomllib.loads(text)["project"]["requires-python"].strip())
    assert m, "requires-python must be of the form >=3.N"
    stated = (3, int(m.group(1)))
    needed = (3, 0)
    for p in (ROOT / "src" / "nvmelab").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            for name in names:
                needed = max(needed, NEWER_STDLIB.get(name.split(".")[0], (3, 0)))
    assert stated >= needed, f"requires-python says >={stated[0]}.{stated[1]}, the code imports need {needed}"
    version = f"{stated[0]}.{stated[1]}"
    assert f"Python {version} or newer" in (ROOT / "README.md").read_text(encoding="utf-8")
    script = SCRIPT.read_text(encoding="utf-8")
    assert f"sys.version_info < ({stated[0]}, {stated[1]})" in script and f"Python {version} or newer" in script
