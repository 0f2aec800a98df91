# SPDX-License-Identifier: BSD-3-Clause
"""Every study notebook follows one template: its title, then the tagged papermill `parameters` cell with the
preset and the one run knob (`mode`, None = $NVMELAB_RUN), then the published method table where the study has
one (data/reference/methods.csv), before anything is loaded."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from nvmelab.book import publication

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Run knobs the notebooks used before `mode` was the only one.
OLD_KNOBS = ("reuse", "run_if_gpu")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def test_there_is_a_notebook_per_study_chapter() -> None:
    assert len(NOTEBOOKS) >= 8


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_title_first(path: Path) -> None:
    first = _cells(path)[0]
    lines = [ln for ln in _src(first).splitlines() if ln.strip()]
    if lines and re.fullmatch(r"\(sec-[a-z0-9-]+\)=", lines[0]):  # a MyST label may stand above the title
        lines = lines[1:]
    assert first["cell_type"] == "markdown" and lines and lines[0].startswith("# "), f"{path.name}: no title first"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_second_with_one_run_knob(path: Path) -> None:
    cell = _cells(path)[1]
    assert "parameters" in (cell.get("metadata", {}).get("tags") or []), f"{path.name}: cell 2 is not `parameters`"
    names = {t.id for node in ast.parse(_src(cell)).body if isinstance(node, ast.Assign) for t in node.targets}
    assert {"preset", "mode"} <= names, f"{path.name}: parameters lack preset/mode ({sorted(names)})"
    text = "".join(_src(c) for c in _cells(path) if c["cell_type"] == "code")
    for knob in OLD_KNOBS:
        assert not re.search(rf"\b{knob}\b", text), f"{path.name}: uses the old run knob {knob!r}; use mode"


def _studies_with_a_method() -> set[str]:
    import csv

    with open(ROOT / "data" / "reference" / publication.METHODS_FILE, newline="") as f:
        return {row["study"] for row in csv.DictReader(f)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_method_table_before_the_data(path: Path) -> None:
    cells = _cells(path)
    calls = [i for i, c in enumerate(cells) if f'publication.method("{path.stem}")' in _src(c)]
    loads = [i for i, c in enumerate(cells) if re.search(r"\b(study_results|load_gpu_results)\(", _src(c))]
    if path.stem not in _studies_with_a_method():  # no published method (e.g. no comparison of it was published)
        assert not calls, f"{path.name}: shows a method table data/reference has no rows for"
        return
    assert calls, f"{path.name}: the published method (data/reference/methods.csv) is not shown"
    assert calls[0] < min(loads, default=len(cells)), f"{path.name}: the method table comes after the data"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_logic_that_belongs_in_the_package(path: Path) -> None:
    """A notebook calls the package; it defines no function or class of its own (those live in the study's folder,
    src/nvmelab/studies/<study>/, where they are tested)."""
    defined = []
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        src = "\n".join(ln for ln in _src(cell).splitlines() if not ln.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):  # a pandas lambda is an idiom
                defined.append(node.name)
    assert not defined, f"{path.name} defines {', '.join(defined)}: move it into the package"
