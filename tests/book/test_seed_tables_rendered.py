# SPDX-License-Identifier: BSD-3-Clause
"""Each study page renders its seed's published tables from data/reference/seeds (issue 13).

For every transcribed CSV of a seed, the numbers it holds must appear in the text of the built page of the
chapter that seed belongs to: at least MIN_SHARE of its numeric cells, written as transcribed or with
thousands separators. A table that is dropped from a chapter, or typed with other numbers, fails here.
The check reads the HTML that `make book` built (tests/book/test_book.py builds it when missing).
"""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path

import pytest
from test_book import HTML, ROOT

SEEDS = ROOT / "data" / "reference" / "seeds"
#: Which chapter shows which seed's tables.
SEED_PAGES = {
    "000": "cuda_qdepth",
    "001": "cuda_iosize",
    "002": "blksum_qdepth",
    "003": "vram_cache",
    "004": "cpu_initiated",
}
#: Share of a file's numeric cells that must be on its page (a few cells are units or ids, not shown).
MIN_SHARE = 0.75
NOT_DATA = {"seed", "section", "locator"}


def _numbers(path: Path) -> list[str]:
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for k, v in row.items():
                v = (v or "").strip()
                if k in NOT_DATA or not re.fullmatch(r"-?[\d][\d ,]*(\.\d+)?", v):
                    continue
                out.append(v)
    return out


def _shown(value: str, text: str) -> bool:
    plain = value.replace(" ", "").replace(",", "")
    forms = {value, plain}
    try:
        x = float(plain)
    except ValueError:
        return value in text
    if x == int(x):
        forms |= {f"{int(x):,}", f"{int(x):,}".replace(",", " "), f"{int(x):,}".replace(",", "\u202f")}
    return any(f in text for f in forms)


def _page_text(stem: str) -> str:
    page = HTML / "notebooks" / f"{stem}.html"
    if not page.is_file():
        pytest.skip(f"{page} not built (make book)")
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("seed", sorted(SEED_PAGES))
def test_study_page_renders_its_seed_tables(seed: str) -> None:
    files = sorted(SEEDS.glob(f"seed{seed}_*.csv"))
    assert files, f"no transcription of seed {seed} under {SEEDS}"
    text = _page_text(SEED_PAGES[seed])
    short = {}
    for f in files:
        nums = _numbers(f)
        if len(nums) < 3:  # a file of one or two ids (a DCGM field number) is not a table to render
            continue
        found = sum(_shown(v, text) for v in nums)
        if found < MIN_SHARE * len(nums):
            short[f.name] = f"{found}/{len(nums)}"
    assert not short, f"{SEED_PAGES[seed]} does not render these seed {seed} tables (numbers found): {short}"


def test_the_check_fails_on_a_page_without_the_table() -> None:
    nums = _numbers(SEEDS / "seed000_min_qdepth.csv")
    assert nums and sum(_shown(v, "a page that shows no table") for v in nums) < MIN_SHARE * len(nums)
