# SPDX-License-Identifier: BSD-3-Clause
"""data/reference/methods.csv: every study has its method, every seed row names a real section.

A study chapter opens with ``publication.method(study)``; a study without rows, an unknown
aspect, a seed row whose section is not a heading of that seed, or a value list whose
numbers are not in the seed's text fail here.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from test_reference_seeds import SEEDS

from nvmelab.book import publication
from nvmelab.studies import list_specs

ROOT = Path(__file__).resolve().parents[1]
ROWS = list(csv.DictReader(open(ROOT / "data" / "reference" / "methods.csv", newline="", encoding="utf-8")))


def test_every_study_has_its_method_in_all_four_aspects() -> None:
    for study in list_specs():
        # our own sweeps with no published experiment behind them: cpu_submit (CPU side), cuda_pollcost (what
        # polling costs the GPU), cuda_match (no measured comparison of the matching modes has been published),
        # tool_costs (the published tool comparison's stacks measured here: its method rows are tool_comparison's)
        if study in ("cpu_submit", "cuda_pollcost", "cuda_match", "tool_costs"):
            continue
        aspects = {r["aspect"] for r in ROWS if r["study"] == study}
        assert aspects == set(publication.METHOD_ASPECTS), f"{study}: method rows cover {sorted(aspects)}"
        assert publication.method(study).kind == "table"


def test_unknown_study_fails() -> None:
    with pytest.raises(KeyError, match="no method rows"):
        publication.method("no_such_study")


def _seed_text(seed: str) -> str:
    found = sorted(SEEDS.glob(f"{seed}_*.txt")) if SEEDS else []
    if not found:
        pytest.skip("the seed documents (shared/seeds) are not on this machine")
    return found[0].read_text(encoding="utf-8")


@pytest.mark.parametrize("row", [r for r in ROWS if r["source"].startswith("seed ")], ids=lambda r: r["item"])
def test_seed_rows_name_a_section_and_numbers_of_their_seed(row: dict) -> None:
    text = _seed_text(row["source"].split()[1])
    headings = {h.strip().lower() for h in re.findall(r"^#+\s*(.+)$", text, re.M)}
    parts = [p.strip().lower() for p in row["section"].split("/")]
    assert any(any(p in h for h in headings) for p in parts), f"{row['item']}: no heading {row['section']!r}"
    if "{" in row["published"]:
        for n in re.findall(r"\d[\d,]*", row["published"].split(";")[0]):
            assert n in text, f"{row['item']}: {n} is not in the seed's text"


@pytest.mark.parametrize(
    "study, fields",
    [
        ("pcie_saturation", ("1010", "1002", "1005", "237/238", "100/101/112/202")),
        ("cuda_qdepth", ("1002", "1003", "1005", "100 ", "101/112/202/237/238")),
        ("cuda_iosize", ("1010", "1002", "1003", "1005", "100 ", "101/112/202/237/238")),
    ],
)
def test_gpu_metric_rows_are_complete_against_the_published_pages(study: str, fields: tuple[str, ...]) -> None:
    """The GPU-side metrics of the published pages (xnvme/aisio @ 02b6c63 and later: DCGM SM activity,
    occupancy, DRAM activity, clocks and validity guards) each have a row; none is dropped."""
    metrics = " | ".join(f"{r['published']} " for r in ROWS if r["study"] == study and r["aspect"] == "metric")
    for field in fields:
        assert f"field {field}" in metrics or f"fields {field}" in metrics or f"/{field}" in metrics, (
            f"{study}: no metric row names DCGM field(s) {field}"
        )
