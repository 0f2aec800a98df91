# SPDX-License-Identifier: BSD-3-Clause
"""The book extension's publication features on a small Sphinx project (no notebook execution).

A study notebook with stored outputs shows a table and a figure made by
``nvmelab.book.publication`` and declares its records and published sources. The built page
must: number both captions ("Table 1", "Figure 1"), fold the code cells, open with a
banner naming the records' host, preset, date and commit (from their provenance) and
the published source, and end with a footer that names the build commit and links
the data files, which the build copies into the site.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from unittest import mock

import pandas as pd
from test_result_role import _build, _glue_output  # the same stored-output notebook and -W build

from nvmelab.book import publication

BOOK = Path(__file__).resolve().parents[2] / "book"

CONF = f"""
import sys
sys.path.insert(0, {str(BOOK / "_ext")!r})
extensions = ["myst_nb", "nvmelab_book"]
nb_execution_mode = "off"
exclude_patterns = ["_build"]
html_theme = "sphinx_book_theme"
templates_path = [{str(BOOK / "_templates")!r}]
html_theme_options = {{"footer_content_items": ["nvmelab-footer.html"]}}
numfig = True
numfig_format = {{"figure": "Figure %s", "table": "Table %s"}}
nvmelab_studies = [("study", "sec-study", "A study")]
nvmelab_results_dir = "results"
"""

RECORD = {
    "study": "study",
    "preset": "standard",
    "iops": 1.0,
    "provenance": {
        "host": "hostA",
        "git_commit": "0123456789abcdef0123",
        "utc": "2026-11-20T10:00:00Z",
        "profile": "pm1753",
        "scale": 64.0,
    },
}


def _display(obj) -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": obj._repr_mimebundle_()}


def _write_study(root: Path, cells: list[dict]) -> None:
    """A book source folder with one study notebook of `cells` (outputs given) and an index naming it."""
    (root / "notebooks").mkdir(parents=True)
    (root / "_static" / "vega").mkdir(parents=True)
    (root / "_static" / "vega" / "vega-bundle.js").write_text("// placeholder\n")
    (root / "conf.py").write_text(CONF)
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": cells,
    }
    (root / "notebooks" / "study.ipynb").write_text(json.dumps(nb))
    (root / "index.md").write_text("# Book\n\n```{toctree}\nnotebooks/study\n```\n")


def _code(cid: str, source: str, outputs: list, n: int = 1, tags: list | None = None) -> dict:
    meta = {"tags": tags} if tags else {}
    return {
        "cell_type": "code",
        "id": cid,
        "metadata": meta,
        "execution_count": n,
        "source": source,
        "outputs": outputs,
    }


def _project(root: Path, records: Path, published: Path) -> Path:
    tab = publication.table(
        pd.DataFrame({"qdepth": [1, 2], "iops": [1234567.0, 2345678.0]}),
        "Rates by depth",
        name="tab-rates",
        units={"iops": "IO/s"},
    )
    fig = publication.figure("<svg width='10' height='10'></svg>", "A small picture")
    decl = {"records": [str(records)], "published": [str(published)]}
    sources = _glue_output(publication.SOURCES_KEY, repr(json.dumps(decl)))
    _write_study(
        root,
        [
            {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "(sec-study)=\n# The study\n\nText.\n"},
            _code("c1", "SECRET_CODE_LINE = 1\n", [_display(tab)]),
            _code("c2", "OPEN_CODE_LINE = 2\n", [_display(fig), sources], n=2, tags=["show-input"]),
            {"cell_type": "markdown", "id": "m2", "metadata": {}, "source": "See {numref}`tab-rates`.\n"},
        ],
    )
    return root


def test_study_page_is_published_with_numbers_banner_and_footer(tmp_path: Path) -> None:
    # the project's repository root is the parent of its source folder (as book/ in the checkout)
    repo = tmp_path
    scratch = repo / "data" / "results" / "study"
    scratch.mkdir(parents=True)
    records = scratch / "standard.jsonl"
    records.write_text(
        json.dumps(RECORD)
        + "\n"
        + json.dumps({**RECORD, "provenance": {**RECORD["provenance"], "utc": "2026-11-21T10:00:00Z"}})
        + "\n"
    )
    published = scratch / "seed.csv"
    published.write_text("a,b\n1,2\n")
    root = _project(tmp_path / "p", records, published)
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    page = (root / "_build" / "notebooks" / "study.html").read_text()
    text = re.sub(r"<[^>]+>", " ", page)
    text = re.sub(r"\s+", " ", text)
    # numbered captions, and the JupyterLab caption is not shown twice
    assert "Table 1" in text and "Rates by depth" in text
    assert "Figure 1" in text and "A small picture" in text
    assert "Table. Rates" not in text and "Figure. A small" not in text
    assert 'href="#tab-rates"' in page, "numref to the table does not resolve"
    # numbers formatted in the table
    assert "1,234,567" in text and "iops (IO/s)" in text
    # code folded, except the show-input cell
    fold = page.index("SECRET_CODE_LINE")
    assert "<details" in page[:fold] and "</details>" in page[fold:], "the code cell is not folded"
    opened = page.index("OPEN_CODE_LINE")
    assert page.rfind("<details", 0, opened) < page.rfind("</details>", 0, opened), "show-input cell was folded"
    # banner: before the first table, from the records' provenance
    banner = page.index("nvmelab-banner")
    assert banner < page.index("SECRET_CODE_LINE")
    btext = text[text.index("Records shown") :]
    for want in (
        "2 records",
        "host hostA",
        "preset standard",
        "2026-11-20 to 2026-11-21",
        "commit 0123456789ab",
        "emulated pm1753 (scale 64)",
        "Published sources",
        "seed.csv",
    ):
        assert want in btext, f"banner lacks {want!r}"
    # footer: build commit and links to the data files, copied into the site
    assert "nvmelab-footer" in page and "Built " in text and "from commit" in text
    rel = records.relative_to(repo).as_posix()
    assert f'href="../_data/{rel}"' in page
    assert (root / "_build" / "_data" / rel).read_text().count("\n") == 2
    assert (root / "_build" / "_data" / published.relative_to(repo).as_posix()).is_file()


def test_index_page_footer_without_data(tmp_path: Path) -> None:
    """A page that uses no data says so; a page never gets a banner unless it is a study."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "_static" / "vega").mkdir(parents=True)
    (root / "_static" / "vega" / "vega-bundle.js").write_text("// placeholder\n")
    (root / "conf.py").write_text(CONF)
    (root / "index.md").write_text("# Book\n\nNothing here.\n")
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    page = (root / "_build" / "index.html").read_text()
    assert "This page uses no data file." in page
    assert "nvmelab-banner" not in page


def test_undeclared_study_banner_names_what_its_code_reads(tmp_path: Path) -> None:
    """A study notebook that declares nothing: the banner lists its records of the preset being
    built (from the results folder) and the published files its code reads, and says so."""
    root = tmp_path / "p"
    (root / "notebooks").mkdir(parents=True)
    (root / "_static" / "vega").mkdir(parents=True)
    (root / "_static" / "vega" / "vega-bundle.js").write_text("// placeholder\n")
    (root / "conf.py").write_text(
        CONF.replace('nvmelab_results_dir = "results"', f"nvmelab_results_dir = {str(tmp_path / 'results')!r}")
    )
    rec_dir = tmp_path / "results" / "study" / "hostB"
    rec_dir.mkdir(parents=True)
    (rec_dir / "standard.jsonl").write_text(
        json.dumps({**RECORD, "provenance": {**RECORD["provenance"], "host": "hostB"}}) + "\n"
    )
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "(sec-study)=\n# The study\n"},
            {
                "cell_type": "code",
                "id": "c1",
                "metadata": {},
                "execution_count": 1,
                "outputs": [],
                "source": "from nvmelab.results import reference\nh = reference.headline()\n"
                'r = reference.published("tool-comparison")\n',
            },
        ],
    }
    (root / "notebooks" / "study.ipynb").write_text(json.dumps(nb))
    (root / "index.md").write_text("# Book\n\n```{toctree}\nnotebooks/study\n```\n")
    env = {"NVMELAB_PRESET": "standard"}
    import os

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        proc = _build(root)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert proc.returncode == 0, proc.stderr
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (root / "_build" / "notebooks" / "study.html").read_text()))
    assert "Records of this study (preset being built)" in text
    assert "host hostB" in text and "preset standard" in text
    assert "Published sources (read by its code)" in text
    assert "headline.csv" in text and "tool-comparison.jsonl" in text


def _used_notebook(root: Path, decl: dict, used: dict | None) -> None:
    outputs = [_glue_output(publication.SOURCES_KEY, repr(json.dumps(decl)))]
    if used is not None:
        outputs.append(_glue_output(publication.USED_KEY, repr(json.dumps(used))))
    _write_study(
        root,
        [
            {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "(sec-study)=\n# The study\n"},
            _code("c", "x = 1\n", outputs),
        ],
    )


def test_every_file_the_notebook_read_is_on_the_banner_linked_and_copied(tmp_path: Path) -> None:
    """declare_used's glue (every data file the kernel opened) joins declare_sources': the banner
    names the other data files, the footer links each file, and each is copied into the site."""
    data = tmp_path / "data"
    (data / "results" / "model").mkdir(parents=True)
    (data / "results" / "bench" / "vm").mkdir(parents=True)
    (data / "reference").mkdir(parents=True)
    validation = data / "results" / "model" / "validation.csv"
    validation.write_text("a\n1\n")
    bench = data / "results" / "bench" / "vm" / "cost.json"
    bench.write_text("{}\n")
    methods = data / "reference" / "methods.csv"
    methods.write_text("study\nx\n")
    headline = data / "reference" / "headline.csv"
    headline.write_text("experiment\nx\n")
    rel = {p: p.relative_to(tmp_path).as_posix() for p in (validation, bench, methods, headline)}
    root = tmp_path / "p"
    _used_notebook(
        root,
        {"records": [], "published": [rel[headline]]},
        {"records": [], "published": [rel[methods]], "data": [rel[bench], rel[validation]]},
    )
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    page = (root / "_build" / "notebooks" / "study.html").read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "Other data files read" in text
    for p, r in rel.items():
        assert r in text, f"banner lacks {r}"
        assert f'href="../_data/{r}"' in page, f"footer does not link {r}"
        assert (root / "_build" / "_data" / r).read_text() == p.read_text(), f"{r} not copied into the site"
    # a page that shows no records but published files says so, never "no measured data"
    assert "published data only" in text and "Published sources: none" not in text


def test_banner_without_records_or_published_files_does_not_claim_published_data(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _used_notebook(root, {"records": [], "published": []}, None)
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (root / "_build" / "notebooks" / "study.html").read_text()))
    assert "Published sources. none." in text
    assert "published data only" not in text, "the banner claims published data beside 'Published sources: none'"


def test_declare_used_collects_what_the_process_opened(tmp_path: Path) -> None:
    """The audit hook notes data files opened for reading under data/ (any loader); writes and files
    elsewhere are not noted."""
    import pandas as pd

    publication._USED.clear()
    pd.read_csv(publication.repo_root() / "data" / "reference" / "methods.csv")
    (publication.repo_root() / "data" / "reference" / "headline.csv").read_text()
    outside = tmp_path / "x.csv"
    outside.write_text("a\n")
    outside.read_text()
    decl = publication.declare_used(glue=False)
    assert decl["published"] == ["data/reference/headline.csv", "data/reference/methods.csv"]
    assert decl["records"] == [] and decl["data"] == []
    publication.note_used(publication.repo_root() / "data" / "results" / "model" / "validation.csv")
    assert publication.declare_used(glue=False)["data"] == ["data/results/model/validation.csv"]
    publication._USED.clear()


def test_study_toctree_lists_only_the_studies_no_other_toctree_names(tmp_path: Path) -> None:
    """The reader's path lists some studies by hand; NVMELAB_STUDIES then adds only the others."""
    root = tmp_path / "p"
    (root / "notebooks").mkdir(parents=True)
    (root / "_static" / "vega").mkdir(parents=True)
    (root / "_static" / "vega" / "vega-bundle.js").write_text("// placeholder\n")
    studies = [("first", "sec-first", "First"), ("second", "sec-second", "Second"), ("third", "sec-third", "Third")]
    (root / "conf.py").write_text(
        CONF.replace('nvmelab_studies = [("study", "sec-study", "A study")]', f"nvmelab_studies = {studies!r}")
    )
    for stem, label, title in studies:
        (root / "notebooks" / f"{stem}.md").write_text(f"({label})=\n# {title}\n")
    (root / "index.md").write_text(
        "# Book\n\n```{toctree}\n:caption: The answer\n\nnotebooks/second\n```\n\n"
        "```{toctree}\n:caption: Further studies\n\nNVMELAB_STUDIES\n```\n"
    )
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    page = (root / "_build" / "index.html").read_text()
    article = page[page.index('<article class="bd-article"') :]  # the page body, not the sidebar
    main = article[article.index("The answer") :]
    further = main[main.index("Further studies") :]
    further = further[: further.index("</div>")]  # that toctree only
    assert "notebooks/second.html" in main[: main.index("Further studies")]
    assert "notebooks/first.html" in further and "notebooks/third.html" in further
    assert "notebooks/second.html" not in further, "a study listed on the reader's path is listed twice"


def test_every_study_notebook_glues_the_files_it_read() -> None:
    """Each study notebook's last code cell calls publication.declare_used(), so that its footer links
    (and the site holds) every data file it read, not only those it declared."""
    import sys

    sys.path.insert(0, str(BOOK))
    with mock.patch.dict(os.environ):  # conf.py's exported NVMELAB_* settings stay out of the other tests
        from conf import STUDIES

    missing = []
    for stem, _, _ in STUDIES:
        nb = json.loads((BOOK.parent / "notebooks" / f"{stem}.ipynb").read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        last = "".join(code[-1]["source"]) if code else ""
        if "declare_used(" not in last:
            missing.append(f"notebooks/{stem}.ipynb")
    assert not missing, f"no publication.declare_used() in the last code cell of: {', '.join(missing)}"


def test_published_environments_are_generated_from_the_method_rows(tmp_path: Path) -> None:
    """``{nvmelab-environments}`` with ``:published:`` lists each study's published environment from
    data/reference/methods.csv (no environment typed into the page), under the chapter's title."""
    root = tmp_path / "p"
    (root / "_static" / "vega").mkdir(parents=True)
    (root / "_static" / "vega" / "vega-bundle.js").write_text("// placeholder\n")
    (root / "conf.py").write_text(
        CONF.replace(
            'nvmelab_studies = [("study", "sec-study", "A study")]',
            'nvmelab_studies = [("vram_cache", "sec-v", "The vRAM chapter")]',
        )
    )
    (root / "index.md").write_text("# Book\n\n```{nvmelab-environments}\n:published:\n```\n")
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (root / "_build" / "index.html").read_text()))
    methods = pd.read_csv(BOOK.parent / "data" / "reference" / "methods.csv", dtype=str).fillna("")
    env = methods[methods["aspect"] == "environment"]
    assert "The vRAM chapter" in text
    for row in env.itertuples():
        assert row.published.replace("-", "-\u200b") in text or row.published in text, row.published


def test_a_page_quoting_a_result_links_the_notebook_s_data_files(tmp_path: Path) -> None:
    """A chapter that quotes a {result} of a study uses that study's data: its footer links them."""
    data = tmp_path / "data" / "reference"
    data.mkdir(parents=True)
    headline = data / "headline.csv"
    headline.write_text("experiment\nx\n")
    rel = headline.relative_to(tmp_path).as_posix()
    root = tmp_path / "p"
    _used_notebook(root, {"records": [], "published": [rel]}, None)
    nb_path = root / "notebooks" / "study.ipynb"
    nb = json.loads(nb_path.read_text())
    nb["cells"][1]["source"] = 'glue("rate", 2.5)\n'
    nb["cells"][1]["outputs"].append(_glue_output("rate", "2.5"))
    nb_path.write_text(json.dumps(nb))
    (root / "quote.md").write_text("# Quote\n\nThe rate is {result}`notebooks/study.ipynb::rate:.1f`.\n")
    (root / "index.md").write_text("# Book\n\n```{toctree}\nnotebooks/study\nquote\n```\n")
    proc = _build(root)
    assert proc.returncode == 0, proc.stderr
    page = (root / "_build" / "quote.html").read_text()
    assert "The rate is" in page and "2.5" in page
    foot = page[page.index('class="nvmelab-footer"') :]
    assert f'href="_data/{rel}"' in foot, "the quoting page's footer does not link the study's data file"
