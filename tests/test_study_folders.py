# SPDX-License-Identifier: BSD-3-Clause
"""Adding a study means adding one folder (issue 37): a folder with a spec.toml under nvmelab/studies/ is a
study to the spec loader, the runner, the CLI (list, plan, run) and the book's chapter list, with no other
edit; every study folder holds its spec, and the old specs/ folder is gone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nvmelab.studies import spec as spec_mod
from tests.fake_study import add_study_folder, fake_run, fake_spec, preset, sweep

STUDIES = Path(str(spec_mod.studies_dir()))


def test_every_study_is_a_folder_with_its_spec():
    names = spec_mod.list_specs()
    assert len(names) >= 11 and "cpu_initiated" in names
    for name in names:
        folder = STUDIES / name
        assert (folder / "spec.toml").is_file() and (folder / "__init__.py").is_file(), folder
        assert spec_mod.load_spec(name).study == name
    assert not (STUDIES / "specs").exists()


@pytest.fixture
def studies_copy(tmp_path, monkeypatch):
    """A copy of the package's study folders with one more, t_folder, added as a contributor would."""
    root = tmp_path / "studies"
    for name in spec_mod.list_specs():
        shutil.copytree(STUDIES / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    text = fake_spec("t_folder", preset(sweep("qdepth", qdepth=[1, 2, 4]), repetitions=1))
    add_study_folder(root, "t_folder", 'title = "A study added as one folder"\n' + text)
    monkeypatch.setattr(spec_mod, "studies_dir", lambda: root)
    return root


def test_a_new_folder_is_a_study_to_the_loader_and_the_runner(studies_copy, tmp_path):
    from nvmelab.studies import list_specs, load_spec, run_study

    assert "t_folder" in list_specs()
    spec = load_spec("t_folder")
    assert spec.path == studies_copy / "t_folder" / "spec.toml" and len(spec.plan("quick").runs) == 3
    rep = run_study("t_folder", "quick", run_fn=fake_run, results_root=tmp_path / "res", progress=False)
    assert rep.ran == 3


def test_a_new_folder_is_a_study_to_the_cli(studies_copy, capsys):
    from nvmelab.cli import main

    assert main(["study", "list"]) == 0
    listed = capsys.readouterr().out
    assert any(line.startswith("t_folder ") for line in listed.splitlines()), listed
    assert main(["study", "plan", "t_folder", "--preset", "quick"]) == 0
    assert "t_folder: 3 runs" in capsys.readouterr().out


def test_a_new_folder_is_a_chapter_of_the_book(studies_copy):
    assert "t_folder" in {study for study, _, _ in spec_mod.book_studies()}


def test_a_study_name_is_a_folder_name_not_a_path(studies_copy):
    with pytest.raises(spec_mod.SpecError, match="unknown study"):
        spec_mod.load_spec("runner")  # a module of the package, not a study folder


def test_a_new_folder_runs_from_the_cli(studies_copy, tmp_path, capsys):
    """`nvmelab study run` on the added study: the perf engine over an emulated controller, records under --results."""
    from nvmelab.cli import main
    from nvmelab.results.records import load_records

    res = tmp_path / "res"
    argv = ["study", "run", "t_folder", "--preset", "quick", "--target", "emu://", "--results", str(res)]
    assert main([*argv, "--no-host-changes"]) == 0
    files = sorted(res.glob("t_folder/*/quick.jsonl"))
    assert len(files) == 1 and sorted(r["qdepth"] for r in load_records(files[0])) == [1, 2, 4]


def test_results_keeps_only_what_the_studies_share():
    """A study's own analysis and figures live in its folder: results/ holds no module named after a study or
    one of the old per-study modules, and its shared analysis and plots hold no blksum_/vram_ functions."""
    import nvmelab.results
    from nvmelab.results import analysis, plots

    results = Path(nvmelab.results.__file__).parent
    names = {p.stem for p in results.glob("*.py")}
    assert not names & (set(spec_mod.list_specs()) | {"matching", "pollcost", "publication", "answer", "environments"})
    for mod in (analysis, plots):
        assert not [n for n in vars(mod) if n.startswith(("blksum_", "vram_"))], mod.__name__
