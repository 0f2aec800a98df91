# SPDX-License-Identifier: BSD-3-Clause
"""The book's ``{result}`` role (book/_ext/nvmelab_book.py) on a two-page Sphinx project.

A notebook with stored outputs (no execution) glues one number, glues ``None`` for a
second key and mentions a third key it never glues on this "build". The role must paste
the number and fail the build for each of the other two (no fallback sentence is ever
printed in place of a result), and for a key the notebook's source never names.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXT = Path(__file__).resolve().parents[2] / "book" / "_ext"

CONF = f"""
import sys
sys.path.insert(0, {str(EXT)!r})
extensions = ["myst_nb", "nvmelab_book"]
nb_execution_mode = "off"
exclude_patterns = ["_build"]
"""


def _glue_output(name: str, plain: str) -> dict:
    prefix = "application/papermill.record/"
    return {
        "output_type": "display_data",
        "data": {prefix + "text/plain": plain},
        "metadata": {"scrapbook": {"mime_prefix": prefix, "name": name}},
    }


def _project(root: Path, index_body: str) -> Path:
    (root / "_static" / "vega").mkdir(parents=True)
    (root / "_static" / "vega" / "vega-bundle.js").write_text("// placeholder for the bundle check\n")
    (root / "conf.py").write_text(CONF)
    source = (
        'from myst_nb import glue\nglue("present", 0.5, display=False)\n'
        'glue("nothing", None, display=False)\n'
        'if False:\n    glue("absent", 1, display=False)\n'
    )
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# The study\n"},
            {
                "cell_type": "code",
                "id": "c",
                "metadata": {},
                "execution_count": 1,
                "source": source,
                "outputs": [_glue_output("present", "0.5"), _glue_output("nothing", "None")],
            },
        ],
    }
    (root / "study.ipynb").write_text(json.dumps(nb))
    (root / "index.md").write_text(f"# Book\n\n```{{toctree}}\nstudy\n```\n\n{index_body}\n")
    return root


def _build(root: Path) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-n",
        "-q",
        "-b",
        "html",
        str(root),
        str(root / "_build"),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_result_pastes_value(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "A {result}`study.ipynb::present:.0%` B {result}`study.ipynb::present:.1f`")
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    html = (root / "_build" / "index.html").read_text()
    assert "50%" in html and "0.5" in html


@pytest.mark.parametrize("key", ["nothing", "absent"])
def test_a_missing_result_fails_the_build(tmp_path: Path, key: str) -> None:
    root = _project(tmp_path / "p", f"B {{result}}`study.ipynb::{key}:d`")
    proc = _build(root)
    assert proc.returncode != 0, f"the build printed a fallback for {key}"
    assert f"glued no value for '{key}'" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "role",
    [
        "{result}`study.ipynb::presnet:.0%`",  # a key the notebook never names
        "{result}`study.ipynb::present:.0q`",  # a format the value cannot take
        "{result}`missing.ipynb::present:.0%`",  # no such notebook
        "{result}`study.ipynb::present:.0%|a fallback sentence`",  # the old fallback syntax
    ],
)
def test_result_rejects_bad_references(tmp_path: Path, role: str) -> None:
    root = _project(tmp_path / "p", f"X {role}")
    proc = _build(root)
    assert proc.returncode != 0, "the build accepted " + role
    assert "result:" in proc.stderr, proc.stderr
