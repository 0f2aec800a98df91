# SPDX-License-Identifier: BSD-3-Clause
"""The seed transcriptions (data/reference/seeds/*.csv) against the seed text they came from.

Every CSV in the folder is checked, whatever seed it transcribes (the list is read from the
folder, so a new seed's files are checked as soon as they are added): each row names its seed
file (`seed`) and the heading it stands under (`section`); every cell that is a number must
occur, as printed, in the text under that heading. A typo, a dropped digit or a number taken
from the wrong section fails. The seed documents live outside the repository (`shared/seeds/`
next to the checkout, or `$NVMELAB_SEEDS`); without them these tests skip and say so.
"""

from __future__ import annotations

import csv
import os
import re
from functools import cache
from pathlib import Path

import pytest

from nvmelab.results import reference

#: Columns that say where a row comes from; never checked as numbers.
WHERE_COLUMNS = ("seed", "section", "locator")
#: A printed number: digits, optionally grouped by spaces or commas as the seeds print them
#: ("1 234 567", "1,234"), optionally with a decimal part and a sign.
_NUMBER_RE = re.compile(r"^[+-]?\d{1,3}(?:[ ,]\d{3})+(?:\.\d+)?$|^[+-]?\d+(?:\.\d+)?$")
_HEAD_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def seeds_text_dir() -> Path | None:
    env = os.environ.get("NVMELAB_SEEDS")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "seeds"
        if cand.is_dir():
            return cand
    return None


SEEDS = seeds_text_dir()
needs_seeds = pytest.mark.skipif(SEEDS is None, reason="seed documents not found (shared/seeds or $NVMELAB_SEEDS)")
CSV_FILES = sorted(reference.seeds_dir().glob("*.csv"))


@cache
def seed_sections(seed: str) -> dict[str, list[str]]:
    """Heading title -> the texts under every heading with that title (up to the next heading of
    the same or a higher level, sub-headings included). Lines in fenced code are not headings."""
    path = SEEDS / seed
    if not path.is_file():
        raise FileNotFoundError(f"seed file {seed} not in {SEEDS}")
    lines = path.read_text().splitlines()
    heads, fenced = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else _HEAD_RE.match(line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2)))
    out: dict[str, list[str]] = {}
    for k, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1 :] if lv <= level), len(lines))
        out.setdefault(title, []).append("\n".join(lines[i + 1 : end]))
    return out


def is_number(cell: str) -> bool:
    return bool(_NUMBER_RE.match(cell.strip()))


def number_in(cell: str, text: str) -> bool:
    """`cell` stands in `text` as a whole number: not part of a longer one (12 is not found in
    128, 345 678 not in 12 345 678, 0.5 not in 10.5); a group separator may be a line break."""
    parts = [re.escape(p) for p in re.split(r"\s+", cell.strip())]
    pat = r"(?<![\d.])(?<!\d )(?<!\d,)" + r"\s+".join(parts) + r"(?!\.?\d)(?![ ,]\d{3}(?!\d))"
    return re.search(pat, text) is not None


def mismatches(rows: list[dict[str, str]], name: str) -> list[str]:
    """Every numeric cell of `rows` that is not in the text of its row's section, as messages."""
    bad = []
    for n, row in enumerate(rows, start=2):  # line 1 is the header
        texts = seed_sections(row["seed"]).get(row["section"])
        if not texts:
            bad.append(f"{name}:{n}: no section {row['section']!r} in seed {row['seed']}")
            continue
        for col, cell in row.items():
            if col in WHERE_COLUMNS or cell is None or not is_number(cell):
                continue
            if not any(number_in(cell, t) for t in texts):
                bad.append(f"{name}:{n}: {col}={cell!r} is not in section {row['section']!r} of {row['seed']}")
    return bad


def read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_there_are_transcriptions_of_every_seed_we_use() -> None:
    names = {p.name for p in CSV_FILES}
    for seed in ("002", "003", "004"):
        assert any(n.startswith(f"seed{seed}_") for n in names), f"no transcription of seed {seed}"


@pytest.mark.parametrize("path", CSV_FILES, ids=lambda p: p.name)
def test_layout(path: Path) -> None:
    with open(path, newline="") as f:
        header = next(csv.reader(f))
    assert header[-3:] == list(WHERE_COLUMNS), f"{path.name}: the last columns must be seed, section, locator"
    rows = read(path)
    assert rows, f"{path.name} has no rows"
    assert all(len(r) == len(header) and None not in r.values() for r in rows), f"{path.name}: ragged rows"
    bad = sorted({r["seed"] for r in rows if not re.match(r"^\d{3}_[0-9a-f]+\.txt$", r["seed"])})
    assert not bad, f"{path.name}: seed must name a file under shared/seeds, got {bad}"


@needs_seeds
@pytest.mark.parametrize("path", CSV_FILES, ids=lambda p: p.name)
def test_every_number_is_in_its_section(path: Path) -> None:
    bad = mismatches(read(path), path.name)
    assert not bad, "\n".join(bad)


@needs_seeds
def test_number_matching_is_exact() -> None:
    text = "reached 12 345 678 IOPS at queue depth 128, in 10.5 s;\n1 234\n567 per device"
    assert number_in("12 345 678", text) and number_in("128", text) and number_in("10.5", text)
    assert number_in("1 234 567", text)  # a group broken across lines
    for absent in ("345 678", "12 345", "12", "28", "0.5", "10", "12 345 677", "234"):
        assert not number_in(absent, text), absent


@needs_seeds
def test_a_mutated_value_is_caught() -> None:
    """Seed 004's A-D table with one digit changed: the check must name exactly that cell."""
    path = reference.seeds_dir() / "seed004_parameterisations.csv"
    rows = read(path)
    assert not mismatches(rows, path.name)
    mutated = [dict(r) for r in rows]
    old = mutated[0]["reached_iops"]
    new = old[:-1] + str((int(old[-1]) + 1) % 10)
    assert new not in seed_sections(rows[0]["seed"])[rows[0]["section"]][0]
    mutated[0]["reached_iops"] = new
    bad = mismatches(mutated, path.name)
    assert len(bad) == 1 and f"reached_iops={new!r}" in bad[0]


@needs_seeds
@pytest.mark.parametrize("path", CSV_FILES, ids=lambda p: p.name)
def test_every_file_can_fail(path: Path) -> None:
    """In every file, the first numeric cell changed to a value absent from its section is caught,
    and so is a section name with a typo."""
    rows = read(path)
    for i, row in enumerate(rows):
        col = next((c for c, v in row.items() if c not in WHERE_COLUMNS and v and is_number(v)), None)
        if col is None:
            continue
        texts = seed_sections(row["seed"])[row["section"]]
        cell = row[col]
        candidates = [cell[:-1] + d for d in "0123456789" if d != cell[-1]] + [cell + d for d in "0123456789"]
        new = next(c for c in candidates if is_number(c) and not any(c in t for t in texts))
        mutated = [dict(r) for r in rows]
        mutated[i][col] = new
        bad = mismatches(mutated, path.name)
        assert any(f"{col}={new!r}" in b for b in bad), f"{path.name}: mutation {cell!r} -> {new!r} not caught"
        break
    mutated = [dict(r) for r in rows]
    mutated[0]["section"] += " (typo)"
    assert any("no section" in b for b in mismatches(mutated, path.name))


# ------------------------------------------------------------ seed 004 loaders ---
def test_seed004_a_to_d_and_host_tables_load_every_row() -> None:
    ad = reference.seed004_parameterisations()
    assert list(ad["id"]) == ["A", "B", "C", "D"]
    assert ad.set_index("id").loc["D", ["thr_sib", "stress_on"]].tolist() == [0, 1]
    with open(reference.seeds_dir() / "seed004_parameterisations.csv", encoding="utf-8") as f:
        printed = {r["id"]: r["reached_iops"] for r in csv.DictReader(f)}
    assert ad.set_index("id")["iops"].to_dict() == {k: reference.seed004_number(v) for k, v in printed.items()}
    for notes in (False, True):
        name = "seed004_host_variables_notes.csv" if notes else "seed004_host_variables.csv"
        hv = reference.seed004_host_variables(notes=notes)
        assert len(hv) == len(read(reference.seeds_dir() / name))
        assert hv["baseline_iops"].notna().all()


def test_seed004_printed_changes_agree_with_the_printed_iops() -> None:
    """Each change in the comment lines is (IOPS / the A-D IOPS of the same id - 1), rounded as
    printed; the tables print those changes rounded once more, to one decimal (half up). A typo in
    an IOPS value, in a change or in the A-D table breaks one of the two."""
    from decimal import ROUND_HALF_UP, Decimal

    notes = reference.seed004_host_variables(notes=True)
    raw = read(reference.seeds_dir() / "seed004_host_variables_notes.csv")
    for (_, r), printed in zip(notes.iterrows(), raw):
        decimals = len(printed["change"].split(".")[1])
        assert abs(r.change_from_iops - r.change) <= 0.5 * 10**-decimals + 1e-9, (r.condition, r.id)
    by_key = {(r["condition"], r["parameterization_id"]): r for r in raw}
    table = read(reference.seeds_dir() / "seed004_host_variables.csv")
    assert table
    for t in table:
        n = by_key[(t["condition"], t["parameterization_id"])]
        assert n["iops"] == t["iops"] and n["direction"] == t["direction"]
        assert Decimal(n["change"]).quantize(Decimal(t["change"]), ROUND_HALF_UP) == Decimal(t["change"]), t


def test_seed004_statements_and_sets() -> None:
    with open(reference.seeds_dir() / "seed004_statements.csv", encoding="utf-8") as f:
        (cap,) = [
            r["value"]
            for r in csv.DictReader(f)
            if r["quantity"] == "device_iops_capacity" and r["section"] == "Determining Device IOPS Capacity"
        ]
    assert " " in cap  # printed with digit groups: the loader must read them
    assert reference.seed004_value("device_iops_capacity", "Determining Device IOPS Capacity") == float(
        cap.replace(" ", "")
    )
    assert reference.seed004_value("bandwidth_512") == 30 and reference.seed004_value("bandwidth_4096") == 215
    assert reference.seed004_value("repetitions") == 5
    with pytest.raises(KeyError):
        reference.seed004_value("ncpus")  # quoted in two sections: the caller must say which
    sets = reference.seed004_parameter_sets("expanded")
    assert sets["Number of cores"] == [str(i) for i in range(1, 17)]
    assert reference.seed004_parameter_sets()["Queue depth"] == ["64", "128", "256"]
    opt = reference.seed004_optimal().set_index("independent_variable")["value"]
    assert (opt["Queue depth"], opt["I/O size"], opt["Number of cores"]) == ("128", "512", "8")


@needs_seeds
def test_seed004_files_are_what_the_transcription_script_writes() -> None:
    """data/reference/seeds/transcribe_seed004.py run on the seed gives the committed files, byte for byte."""
    import importlib.util
    import io

    script = reference.seeds_dir() / "transcribe_seed004.py"
    spec = importlib.util.spec_from_file_location("transcribe_seed004", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seed = SEEDS / mod.SEED_NAME
    files = mod.build(seed.read_text(), seed.name)
    assert set(files) == {p.name for p in CSV_FILES if p.name.startswith("seed004_")}
    for name, (header, rows) in files.items():
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        assert (reference.seeds_dir() / name).read_text() == buf.getvalue(), name
