# SPDX-License-Identifier: BSD-3-Clause
"""The "Seeds and coverage" chapter (book/coverage.md) lists every seed statement and table.

book/coverage.csv has one line per quantity a seed's text states (the ``quantity`` column
of ``data/reference/seeds/seed<NNN>_statements.csv``; a quantity stated twice is one line)
and one line per other transcribed table of a seed (item ``table``). A statement or table
without a line, a line for something no seed transcribes, an unknown status, a study page
that does not exist, an emulated line that does not name its profile and a "not testable
here" line without a reason each fail here. Reads files only (no book build).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from nvmelab.results import coverage

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "data" / "reference" / "seeds"
COVERAGE = ROOT / "book" / "coverage.csv"
STATUSES = set(coverage.STATUSES)


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


def test_every_seed_statement_and_table_has_one_line() -> None:
    rows = _coverage()
    have = [(r["file"], r["item"]) for r in rows]
    dupes = sorted({k for k in have if have.count(k) > 1})
    assert not dupes, f"book/coverage.csv lists these more than once: {dupes}"
    want = _transcribed()
    assert not want - set(have), f"seed statements or tables missing from book/coverage.csv: {sorted(want - set(have))}"
    assert not set(have) - want, f"book/coverage.csv lists what no seed transcribes: {sorted(set(have) - want)}"


def test_every_line_has_a_known_status_a_page_and_its_reason() -> None:
    pages = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    for r in _coverage():
        who = f"{r['file']}::{r['item']}"
        assert r["status"] in STATUSES, f"{who}: status {r['status']!r} is not one of {sorted(STATUSES)}"
        assert r["where"] in pages, f"{who}: no study notebook {r['where']!r}"
        assert r["seed"] == re.match(r"seed(\d{3})_", r["file"]).group(1), f"{who}: seed {r['seed']} is not the file's"
        assert len(r["note"].strip()) > 20, f"{who}: the note must say what the book does with it"
        if r["status"] == "emulated":
            assert "profile" in r["note"], f"{who}: an emulated line must name the profile and what it encodes"


def test_the_coverage_page_shows_the_list() -> None:
    page = (ROOT / "book" / "coverage.md").read_text(encoding="utf-8")
    assert "```{nvmelab-coverage}" in page
    assert all(s in page for s in STATUSES), "the chapter does not explain every status"
    assert len(coverage.rows()) == len(_coverage())  # every line quotes its seed
    index = (ROOT / "book" / "index.md").read_text(encoding="utf-8")
    assert re.search(r"^coverage$", index, re.M), "book/index.md does not list the coverage chapter"
