# SPDX-License-Identifier: BSD-3-Clause
"""The "Seeds and coverage" chapter (book/coverage.md) lists every seed statement and table with a status.

book/coverage.csv has one line per quantity a seed's text states (the ``quantity`` column of
``data/reference/seeds/seed<NNN>_statements.csv``; a quantity stated twice is one line) and one line per
other transcribed table of a seed (item ``table``). A line types its status or names the basis it is
derived from (``model: <validation facts>`` or ``emulated: <comparator>``), never both. Fails here: a
statement or table without a line, a line for something no seed transcribes, a status outside the
vocabulary of nvmelab.book.coverage, a basis that names a fact validation.csv lacks, a study without a
chapter, an emulated line that does not say what its profile encodes, a typed emulated line this test does
not list, and (on a built book) a line whose chapter cell is not a working link. The seed 004 verdicts of
issue 34 are pinned: they must come out of the comparators, not out of the file.
"""

from __future__ import annotations

import csv
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_book import HTML, ROOT

from nvmelab.book import coverage
from nvmelab.studies.spec import book_studies

SEEDS = ROOT / "data" / "reference" / "seeds"
COVERAGE = ROOT / "book" / "coverage.csv"
#: Emulated lines whose status is typed because no comparator can be written (each note says why).
TYPED_EMULATED = {
    "seed003_statements.csv::typical_read_per_stick",
    "seed003_statements.csv::typical_write_per_stick",
    "seed003_bcache_priority_stats.csv::table",
}


def _coverage() -> list[dict[str, str]]:
    with open(COVERAGE, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _transcribed() -> set[tuple[str, str]]:
    want = set()
    for path in sorted(SEEDS.glob("seed*.csv")):
        if path.name.endswith("_statements.csv"):
            with open(path, newline="", encoding="utf-8") as f:
                want |= {(path.name, row["quantity"]) for row in csv.DictReader(f)}
        else:
            want.add((path.name, "table"))
    return want


def _status(file: str, item: str) -> list[str]:
    (line,) = [ln for ln in coverage.lines() if ln["file"] == file and ln["item"] == item]
    return line["statuses"]


def test_every_line_has_exactly_the_header_fields() -> None:
    with open(COVERAGE, newline="", encoding="utf-8") as f:
        header, *body = list(csv.reader(f))
    assert header == ["seed", "file", "item", "status", "basis", "where", "note"]
    bad = [i + 2 for i, row in enumerate(body) if len(row) != len(header)]
    assert not bad, f"book/coverage.csv lines {bad} do not have {len(header)} fields (an unquoted comma?)"


def test_every_seed_statement_and_table_has_one_line() -> None:
    rows = _coverage()
    have = [(r["file"], r["item"]) for r in rows]
    dupes = sorted({k for k in have if have.count(k) > 1})
    assert not dupes, f"book/coverage.csv lists these more than once: {dupes}"
    want = _transcribed()
    assert not want - set(have), f"seed statements or tables missing from book/coverage.csv: {sorted(want - set(have))}"
    assert not set(have) - want, f"book/coverage.csv lists what no seed transcribes: {sorted(set(have) - want)}"


def test_every_line_has_a_status_or_a_basis_a_chapter_and_its_reason() -> None:
    chapters = {stem for stem, _, _ in book_studies()}
    for r in _coverage():
        who = f"{r['file']}::{r['item']}"
        assert bool(r["status"]) != bool(r["basis"]), f"{who}: give a typed status or a basis, not both or neither"
        if r["status"]:
            assert coverage.is_status(r["status"]), f"{who}: status {r['status']!r} is not in the vocabulary"
            assert r["status"] not in (coverage.MODEL_HIT, coverage.MODEL_MISS, coverage.CALIBRATION), (
                f"{who}: a model status is derived from validation.csv (basis 'model: <fact>'), never typed"
            )
        else:
            assert re.fullmatch(r"(model|emulated|measured): \S.*", r["basis"]), f"{who}: basis {r['basis']!r}"
        assert r["where"] in chapters, f"{who}: no study chapter {r['where']!r} (chapters: {sorted(chapters)})"
        assert r["seed"] == re.match(r"seed(\d{3})_", r["file"]).group(1), f"{who}: seed {r['seed']} is not the file's"
        assert len(r["note"].strip()) > 20, f"{who}: the note must say what the book does with it"
        if r["status"].startswith(coverage.EMULATED) or r["basis"].startswith("emulated"):
            assert "profile" in r["note"], f"{who}: an emulated line must name the profile and what it encodes"


def test_no_note_types_a_number() -> None:
    names = re.compile(r"pm1753|RAID-0|p2pBandwidthLatencyTest")  # names that hold digits
    for r in _coverage():
        assert not re.search(r"\d", names.sub("", r["note"])), (
            f"{r['file']}::{r['item']}: a number typed in the note (numbers come from data: coverage.py details)"
        )


def test_every_derived_status_is_in_the_vocabulary() -> None:
    for ln in coverage.lines():
        assert ln["statuses"], ln
        for s in ln["statuses"]:
            assert coverage.is_status(s), f"{ln['file']}::{ln['item']}: derived {s!r} is not in the vocabulary"


def test_typed_emulated_lines_are_the_listed_ones() -> None:
    typed = set(coverage.typed_emulated())
    assert typed == TYPED_EMULATED, (
        "emulated lines with a typed status (no comparator): "
        f"new {sorted(typed - TYPED_EMULATED)}, gone {sorted(TYPED_EMULATED - typed)}; write a comparator "
        "(coverage.CHECKS) or list the line here with the reason in its note"
    )


#: Run in a fresh interpreter: every file under data/ that coverage.lines() opens (an audit hook sees each).
_OPENED = """
import json, sys
opened = set()
sys.addaudithook(lambda ev, a: ev == "open" and isinstance(a[0], str) and "/data/" in a[0] and opened.add(a[0]))
from nvmelab.book import coverage
coverage.lines()
print(json.dumps(sorted(opened)))
"""


def test_the_page_lists_every_file_it_reads() -> None:
    """The directive links coverage.sources() from the page's footer: every data file lines() reads is there."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _OPENED], capture_output=True, text=True, check=True, cwd=ROOT)
    opened = {str(Path(p).resolve()) for p in json.loads(out.stdout.strip().splitlines()[-1])}
    assert opened, "the audit hook saw no file opened"
    listed = {str(p.resolve()) for p in coverage.sources()}
    assert not opened - listed, f"read but not in coverage.sources(): {sorted(opened - listed)}"


def test_a_missing_fact_fails_loudly() -> None:
    with pytest.raises(KeyError, match="no fact"):
        coverage.fact_status("cuda_qdepth/no-such-fact")


def test_issue_34_verdicts_come_from_the_data() -> None:
    s4 = "seed004_statements.csv"
    assert _status(s4, "peak_qdepth") == [coverage.EMU_DISAGREES]
    assert _status(s4, "linear_until_core_to_device_cores") == [coverage.EMU_DISAGREES]
    assert _status("seed003_disk_io.csv", "table") == [coverage.EMU_DISAGREES]  # our writes spread, the seed's do not
    for item in ("bandwidth_512", "bandwidth_4096", "peak_iops", "device_cap_qdepth"):
        assert _status(s4, item) == [coverage.EMU_RESTATES], item
    s0 = "seed000_statements.csv"
    assert _status(s0, "fraction_of_roofline") == [coverage.CALIBRATION]  # the one-queue rate at depth 512 is fitted
    assert coverage.MODEL_MISS in _status(s0, "min_qdepth")  # the two-queue depth the model misses
    assert coverage.CALIBRATION in _status(s0, "min_qdepth")  # the 16-queue depth is fitted


def test_the_coverage_page_shows_the_vocabulary_counts_and_lines() -> None:
    page = (ROOT / "book" / "coverage.md").read_text(encoding="utf-8")
    for part in ("vocabulary", "counts", "lines"):
        assert f"```{{nvmelab-coverage}} {part}" in page, f"book/coverage.md does not show the {part}"
    assert not any(s in page for s in ("| status |", "|---|")), (
        "the vocabulary comes from coverage.py, not a typed table"
    )
    shown = {r[0] for r in coverage.vocabulary()}
    assert set(coverage.STATUSES) - {coverage.PUBLISHED} <= shown
    shown = " ".join(r[1] for r in coverage.rows())
    for line in _coverage():
        if line["item"] == "table":
            what, section = coverage.place(line)
            said = [f"the {what} under", coverage.short(section, coverage.SECTION_CHARS)]
            assert all(q in shown for q in said), f"{line['file']}::{line['item']}: on no row"
        else:
            said = coverage.quotes(line)
            assert any(coverage.short(q) in shown for q in said), f"{line['file']}::{line['item']}: on no row"
    header, body = coverage.counts()
    assert sum(int(r[-1]) for r in body) >= len(_coverage())
    index = (ROOT / "book" / "index.md").read_text(encoding="utf-8")
    assert re.search(r"^coverage$", index, re.M), "book/index.md does not list the coverage chapter"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag == "a" and self.rows:
            self.rows[-1].append(dict(attrs).get("href", ""))


def test_built_coverage_page_links_every_chapter() -> None:
    page = HTML / "coverage.html"
    if not page.is_file():
        pytest.skip(f"no built book at {HTML} (make book, or NVMELAB_BOOK_HTML=<a build>)")
    inputs = [
        COVERAGE,
        ROOT / "src" / "nvmelab" / "book" / "coverage.py",
        ROOT / "src" / "nvmelab" / "results" / "status.py",
        ROOT / "book" / "coverage.md",
    ]
    if page.stat().st_mtime < max(p.stat().st_mtime for p in inputs):
        pytest.skip(f"{page} is older than the coverage sources: rebuild the book (make book)")
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    stems = {stem for stem, _, _ in book_studies()}
    linked = [h for row in parser.rows for h in row if re.match(r"notebooks/\w+\.html#", h)]
    want = {(r[0], r[3]) for r in coverage.rows()}  # one heading row per seed and chapter
    assert len(linked) >= len(want), f"{len(linked)} chapter links for {len(want)} seeds and chapters"
    assert {r[3] for r in coverage.rows()} <= {h.split("/")[1].split(".")[0] for h in linked}
    for h in linked:
        stem = h.split("/")[1].split(".")[0]
        assert stem in stems and (HTML / "notebooks" / f"{stem}.html").is_file(), f"broken chapter link {h}"
    assert Path(HTML / "coverage.html").read_text(encoding="utf-8").count("model hit") >= 1


def test_other_modules_speak_the_vocabulary() -> None:
    """Status words other modules define as constants (cpu_submit, answer, model_validation, ...) are words of
    coverage's vocabulary, so the chapters, the answer table and this page use the same ones."""
    import importlib
    import pkgutil

    import nvmelab.book
    import nvmelab.results
    import nvmelab.studies

    heads = ("measured here", "emulated", "model hit", "model miss", "calibration input", "published —", "not testable")
    seen = 0
    for pkg in (nvmelab.results, nvmelab.book, nvmelab.studies):  # shared results, book rendering, each study's own
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
            mod = importlib.import_module(info.name)
            seen += 1
            for name, value in vars(mod).items():
                if isinstance(value, str) and name.isupper() and value.startswith(heads):
                    assert coverage.is_status(value), f"{info.name}.{name} = {value!r}: not a status word"
    assert seen > 20, "the module walk found too few modules"
    from nvmelab.results import model_validation as mv

    assert {mv.status(0.0), mv.status(1.0)} == {coverage.MODEL_HIT, coverage.MODEL_MISS}
