# SPDX-License-Identifier: BSD-3-Clause
"""The fuzz harnesses of tests/fuzz cannot drop out silently (issue 33): every harness has a committed
seed corpus and is picked up by the build and by `make fuzz`, which CI runs; tests/fuzz/run.sh fuzzes a
copy of each corpus (never the committed seeds) and fails, naming the harness, on any finding or on a
harness that was not built. Cheap: no clang, no fuzzing (run.sh runs against stand-in harnesses)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FUZZ = ROOT / "tests" / "fuzz"


def harnesses() -> list[Path]:
    return sorted([*FUZZ.glob("fuzz_*.c"), *FUZZ.glob("fuzz_*.py")])


def corpus_name(h: Path) -> str:
    return h.stem.removeprefix("fuzz_")


def test_the_four_targets_of_the_issue_have_harnesses():
    names = {corpus_name(h) for h in harnesses()}
    assert {"qcow2", "uri", "records", "nbd_reply"} <= names, names


@pytest.mark.parametrize("h", harnesses(), ids=lambda h: h.name)
def test_every_harness_has_seeds_and_an_entry_point(h):
    seeds = FUZZ / "corpus" / corpus_name(h)
    files = [f for f in seeds.iterdir() if f.is_file()] if seeds.is_dir() else []
    assert files, f"{h.name}: no seed in {seeds.relative_to(ROOT)}/ (commit at least one input)"
    assert any(f.stat().st_size for f in files), f"{seeds}: only empty seeds (libFuzzer skips empty files)"
    text = h.read_text(encoding="utf-8")
    assert "SPDX-License-Identifier: BSD-3-Clause" in text[:200]
    if h.suffix == ".c":
        assert re.search(r"\bint\s+LLVMFuzzerTestOneInput\s*\(", text), f"{h.name}: no LLVMFuzzerTestOneInput"
    else:
        assert "atheris.Setup(" in text and "atheris.Fuzz()" in text, f"{h.name}: not an atheris harness"


def test_every_corpus_has_a_harness():
    names = {corpus_name(h) for h in harnesses()}
    orphans = sorted(d.name for d in (FUZZ / "corpus").iterdir() if d.is_dir() and d.name not in names)
    assert not orphans, f"seed corpora without a harness: {orphans}"


def test_the_build_and_make_fuzz_pick_up_every_harness():
    """The CMake glob builds every fuzz_*.c (no list to forget), run.sh runs every fuzz_*.{c,py}, make fuzz
    runs run.sh over the fuzz build, and CI runs make fuzz."""
    cmake = (FUZZ / "CMakeLists.txt").read_text()
    assert re.search(r"file\(GLOB FUZZ_HARNESSES CONFIGURE_DEPENDS \$\{CMAKE_CURRENT_SOURCE_DIR\}/fuzz_\*\.c\)", cmake)
    top = (ROOT / "CMakeLists.txt").read_text()
    assert re.search(r"if\(NVMELAB_FUZZ\)\s+enable_testing\(\)\s+add_subdirectory\(tests/fuzz\)", top)
    run = (FUZZ / "run.sh").read_text()
    assert "harnesses=(tests/fuzz/fuzz_*.c tests/fuzz/fuzz_*.py)" in run
    make = (ROOT / "Makefile").read_text()
    rule = make[make.index("\nfuzz:") :].split("\n\n", 1)[0]
    assert "-DNVMELAB_FUZZ=ON" in rule and "tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)" in rule, rule
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    fuzz = [ln for ln in ci if ln.startswith("make fuzz")]
    assert fuzz and re.fullmatch(r"make fuzz FUZZ_SECONDS=\d+", fuzz[0]), fuzz
    assert ci.index(fuzz[0]) > ci.index("make test-nbd")


STAND_IN = """#!/usr/bin/env bash
# a stand-in harness: libFuzzer's command line, one new unit into the corpus it is given, a finding on demand
for a in "$@"; do
    case "$a" in
        -artifact_prefix=*) prefix=${a#-artifact_prefix=} ;;
        -*) ;;
        *.py) ;;
        *) corpus=$a ;;
    esac
done
echo new > "$corpus/new-unit"
echo "cov: 7 ft: 9"
echo "stat::number_of_executed_units: 42"
if [ -n "${FIND:-}" ] && [[ "$0 $*" == *"$FIND"* ]]; then
    echo boom > "${prefix}crash-0123"
    echo "ERROR: AddressSanitizer: heap-buffer-overflow"
    exit 1
fi
"""


def run_stand_ins(tmp_path: Path, find: str = "", built: bool = True) -> subprocess.CompletedProcess:
    build = tmp_path / "build"
    (build / "tests" / "fuzz").mkdir(parents=True)
    exe = tmp_path / "stand-in"
    exe.write_text(STAND_IN)
    exe.chmod(0o755)
    if built:
        for h in FUZZ.glob("fuzz_*.c"):
            shutil.copy(exe, build / "tests" / "fuzz" / h.stem)
    env = {**os.environ, "FIND": find}
    return subprocess.run(
        ["bash", str(FUZZ / "run.sh"), str(build), "1", str(exe)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def corpus_state() -> dict[str, bytes]:
    return {str(p.relative_to(FUZZ)): p.read_bytes() for p in sorted((FUZZ / "corpus").rglob("*")) if p.is_file()}


def test_run_sh_fuzzes_a_copy_and_passes_when_nothing_is_found(tmp_path):
    before = corpus_state()
    p = run_stand_ins(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert corpus_state() == before, "run.sh wrote into the committed seed corpus"
    for h in harnesses():
        name = corpus_name(h)
        assert f"  {name}: cov: 7 ft: 9 number_of_executed_units=42" in p.stdout, p.stdout
        assert (tmp_path / "build" / "fuzz-work" / name / "corpus" / "new-unit").exists()


def test_run_sh_fails_on_a_finding_and_names_its_input(tmp_path):
    p = run_stand_ins(tmp_path, find="fuzz_uri")
    assert p.returncode == 1, p.stdout + p.stderr
    crash = tmp_path / "build" / "fuzz-work" / "uri" / "crash-0123"
    assert crash.exists() and f"input: {crash}" in p.stderr, p.stderr
    assert "fuzz: failed: uri " in p.stderr and "heap-buffer-overflow" in p.stderr, p.stderr
    # the other harnesses still ran
    assert "  qcow2: cov: 7" in p.stdout and "  records: cov: 7" in p.stdout, p.stdout


def test_run_sh_fails_on_a_harness_that_was_not_built(tmp_path):
    p = run_stand_ins(tmp_path, built=False)
    assert p.returncode == 1
    assert "fuzz: tests/fuzz/fuzz_qcow2.c was not built" in p.stderr, p.stderr
    assert "qcow2 (not built)" in p.stderr


def test_prereqs_names_clang_for_make_fuzz(tmp_path):
    """Without clang, `make fuzz`'s check names the Debian package (and --install, as root on Debian,
    installs it: the extra legs' convention)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "id", "tr", "head", "sed", "mktemp", "rm", "cc", "c++"):
        real = shutil.which(tool)
        if real is None:
            pytest.skip(f"{tool} not on PATH")
        (bindir / tool).symlink_to(real)
    p = subprocess.run(
        ["bash", str(ROOT / "env" / "prereqs.sh"), "fuzz"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PATH": str(bindir), "PYTHON": sys.executable},
    )
    assert p.returncode == 1, p.stderr
    assert "clang and clang++" in p.stderr and "Debian package: clang" in p.stderr, p.stderr
