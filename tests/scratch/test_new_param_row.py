# SPDX-License-Identifier: BSD-3-Clause
"""A new row of an engine's C parameter table reaches the CLI, the study specs, the records and the CPU stand-in
with no Python edit (issue 37, item 1).

The test copies the C sources of this tree into a scratch folder, adds one row, ``scratch_knob`` (U32, 0..7,
default 3), to perf's table (src/engine/perf_params.h, with its field in struct perf_config) and one to
cuda-run's (src/engine/crun_params.h, with its field in struct nvme_cuda_run_params), builds the extension there
(CUDA off: cuda-run's table is plain C), puts it beside a copy of the Python package, and then, in a child
Python on that copy:

* ``nvmelab perf run --help`` and ``nvmelab perf cuda-run --help`` offer ``--scratch-knob``; ``perf run
  --scratch-knob 5`` writes a record whose ``engine_params`` holds 5; ``--scratch-knob 9`` is refused naming it;
* a study spec sweeps ``scratch_knob`` over 1 and 2, and the runner's records carry each value;
* the CPU stand-in refuses ``scratch_knob=5`` naming it (a row it cannot honour is never ignored), and its
  record without it holds the row at its default; ``gpu.run_cuda(scratch_knob=9)`` is refused by cuda-run's
  own check before any GPU is looked for.

A build of the extension takes minutes: ``make test-scratch`` runs this (a CI leg); ``make test`` skips it and
says so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROW = 'X(scratch_knob, U32, scratch_knob, 0, 7, 3, "a row added by tests/scratch (issue 37)")'

pytestmark = pytest.mark.skipif(
    not os.environ.get("NVMELAB_SCRATCH_BUILD"),
    reason="builds the extension from a copy of the tree (minutes): make test-scratch runs it",
)


def _add_row(path: Path, table: str) -> None:
    """Insert ROW as the first row of the X-macro `table` in `path` (C source text)."""
    text = path.read_text()
    head = re.search(rf"#define {table}\(X\)\s*\\\n", text)
    assert head, f"{path}: no #define {table}(X)"
    path.write_text(text[: head.end()] + f"    {ROW} \\\n" + text[head.end() :])


def _add_field(path: Path, after: str) -> None:
    """Insert the row's struct field after the line `after` (its exact text) in `path`."""
    text = path.read_text()
    assert after in text, f"{path}: no line {after!r}"
    path.write_text(text.replace(after, after + "\n    uint32_t scratch_knob; /* tests/scratch */", 1))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A copy of the package whose extension has the scratch row in both tables."""
    tmp = tmp_path_factory.mktemp("scratch")
    src = tmp / "src"
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "CMakeLists.txt", "src", "cmake", "data/results/model"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    _add_row(src / "src/engine/perf_params.h", "PERF_PARAMS")
    _add_field(src / "src/engine/perf.h", "struct perf_config {")
    _add_row(src / "src/engine/crun_params.h", "CRUN_PARAMS")
    _add_field(src / "src/engine/crun_params.h", "    /* table rows (CRUN_PARAMS) */")
    build = tmp / "build"
    pybind11_dir = subprocess.run(
        [sys.executable, "-m", "pybind11", "--cmakedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    for cmd in (
        ["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DNVMELAB_CUDA=OFF", "-DNVMELAB_TESTS=OFF"]
        + [f"-DPython_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11_dir}"],
        ["cmake", "--build", build, "--target", "_native", "-j", str(os.cpu_count() or 1)],
    ):
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(map(str, cmd))}:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    pkg = tmp / "pkg"
    shutil.copytree(ROOT / "src/nvmelab", pkg / "nvmelab", ignore=shutil.ignore_patterns("_native*.so", "__pycache__"))
    (so,) = build.rglob("_native*.so")
    shutil.copy2(so, pkg / "nvmelab" / so.name)
    return pkg


def _py(pkg: Path, *args: str, code: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pkg)}
    cmd = [sys.executable, "-c", textwrap.dedent(code)] if code else [sys.executable, "-m", "nvmelab", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=pkg, timeout=300)


def test_the_scratch_build_is_the_one_imported(scratch):
    r = _py(scratch, code="import nvmelab._native as n; print(n.__file__)")
    assert r.returncode == 0 and r.stdout.startswith(str(scratch)), r.stderr


def test_the_cli_offers_and_checks_the_new_row(scratch):
    for cmd in (("perf", "run", "--help"), ("perf", "cuda-run", "--help")):
        r = _py(scratch, *cmd)
        assert r.returncode == 0 and "--scratch-knob" in r.stdout, (cmd, r.stderr)
    base = ("perf", "run", "--target", "emu://?profile=null", "--runtime", "0.05", "--warmup", "0")
    r = _py(scratch, *base, "--scratch-knob", "5", "--json", "-")
    assert r.returncode == 0, r.stderr
    import json

    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert rec["engine_params"]["scratch_knob"] == 5
    r = _py(scratch, *base, "--scratch-knob", "9")
    assert r.returncode != 0 and "scratch_knob=9" in r.stderr


def test_a_spec_sweeps_the_new_row_into_the_records(scratch, tmp_path):
    spec = tmp_path / "scratch_sweep.toml"
    spec.write_text(
        textwrap.dedent(
            """\
            study = "scratch_sweep"
            title = "a new table row swept (tests/scratch)"
            source = "none: a test of the parameter tables"
            engine = "cpu"
            target = "emu://?profile=null"
            [fixed]
            rw = "randread"
            iosize = 512
            qdepth = 4
            runtime = 0.05
            warmup = 0.0
            [presets.quick]
            repetitions = 1
            [[presets.quick.sweeps]]
            name = "knob"
            scratch_knob = [1, 2]
            [presets.standard]
            repetitions = 1
            [[presets.standard.sweeps]]
            name = "knob"
            scratch_knob = [1]
            [presets.paper]
            repetitions = 1
            [[presets.paper.sweeps]]
            name = "knob"
            scratch_knob = [1]
            """
        )
    )
    r = _py(
        scratch,
        code=f"""
        from nvmelab.results.records import load_records
        from nvmelab.studies.runner import run_study
        run_study({str(spec)!r}, "quick", results_root={str(tmp_path / "out")!r}, progress=False,
                  allow_host_changes=False)
        print(sorted(r["engine_params"]["scratch_knob"] for r in load_records({str(tmp_path / "out")!r})))
        """,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.strip().splitlines()[-1] == "[1, 2]"


def test_the_stand_in_refuses_the_new_row_and_records_its_default(scratch):
    r = _py(
        scratch,
        code="""
        from nvmelab.engines import gpu, gpu_standin
        try:
            gpu_standin.run_cuda_standin("gpu-emu://?profile=null&ndev=1", scratch_knob=5, runtime=0.05, warmup=0)
        except ValueError as exc:
            print("standin:", exc)
        rec = gpu_standin.run_cuda_standin("gpu-emu://?profile=null&ndev=1", qdepth=4, runtime=0.05, warmup=0)
        print("default:", rec["engine_params"]["scratch_knob"])
        try:
            gpu.run_cuda(scratch_knob=9, runtime=0.05, warmup=0)
        except ValueError as exc:
            print("cuda-run:", exc)
        """,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    out = r.stdout
    assert re.search(r"^standin: .*scratch_knob=5", out, re.M), out
    assert "default: 3" in out, out
    assert re.search(r"^cuda-run: .*scratch_knob", out, re.M), out
