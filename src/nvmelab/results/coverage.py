# SPDX-License-Identifier: BSD-3-Clause
"""What the book does with every seed statement and table (the "Seeds and coverage" chapter).

``book/coverage.csv`` holds one line per quantity a seed's text states (the ``quantity``
of ``data/reference/seeds/seed<NNN>_statements.csv``) and one per other table transcribed
from a seed (item ``table``): its status here and a note. This module joins each line to
the seed's own words, so the chapter shows what the seed says rather than our file keys.

Key functions:
    lines()      the coverage lines (dicts: seed, file, item, status, where, note)
    rows()       the chapter's table rows: seed, what the seed says, status, chapter, note
    sources()    the files the chapter is built from (for the page's data links)

Caveat: only transcribed numbers are covered; a seed sentence without a number has no line.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .publication import repo_root

#: The statuses a line may have, and what each means (shown on the chapter).
STATUSES = {
    "measured here": "our own runs on this book's hosts measure the same quantity",
    "emulated": "our runs drive emulated NVMe controllers; the note names the profile and what it encodes",
    "model": "the analytical model predicts it from named calibration points (a calibration input is marked)",
    "published only": "a set-up fact, an arithmetic consequence of one, or a reading we show but cannot repeat",
    "not testable here": "needs hardware or host control this book's hosts lack; the note says what",
}
HEADER = ["seed", "what the seed says", "status", "chapter", "note"]
WIDTHS = [1, 5, 2, 2, 5]


def coverage_file() -> Path:
    return repo_root() / "book" / "coverage.csv"


def seeds_dir() -> Path:
    return repo_root() / "data" / "reference" / "seeds"


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def lines() -> list[dict[str, str]]:
    return _read(coverage_file())


def sources() -> list[Path]:
    return [coverage_file()] + sorted({seeds_dir() / ln["file"] for ln in lines()})


def _says(line: dict[str, str]) -> str:
    rows = _read(seeds_dir() / line["file"])
    if line["item"] == "table":
        first = rows[0] if rows else {}
        return f"the {first.get('locator', 'table')} under “{first.get('section', '?')}”"
    quotes = list(dict.fromkeys(r["quote"] for r in rows if r["quantity"] == line["item"]))
    if not quotes:
        raise KeyError(f"{line['file']} states no quantity {line['item']!r}")
    return " / ".join(f"“{q}”" for q in quotes[:2]) + (" …" if len(quotes) > 2 else "")


def rows(titles: dict[str, str] | None = None) -> list[list[str]]:
    """One row per coverage line; `titles` maps a study to its chapter title."""
    titles = titles or {}
    return [[ln["seed"], _says(ln), ln["status"], titles.get(ln["where"], ln["where"]), ln["note"]] for ln in lines()]
