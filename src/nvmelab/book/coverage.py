# SPDX-License-Identifier: BSD-3-Clause
"""One status vocabulary for every claim of the book, and the seed statements' status derived from data.

The vocabulary (``STATUSES``, ``ORIGINS``) is the single place the words live: the chapters, the
coverage page (book/coverage.md) and the conclusions use these strings. ``book/coverage.csv`` holds
one line per quantity a seed's text states (the ``quantity`` of
``data/reference/seeds/seed<NNN>_statements.csv``) and one per other table transcribed from a seed
(item ``table``). A line either types its status (a set-up fact, a measurement of ours, something
not testable here, with the reason in its note) or names its ``basis``, and the status is derived:

* ``model: <fact>; <fact>``: the rows of data/results/model/validation.csv (written by
  ``python -m nvmelab.results.model_validation``) whose ``fact`` (or ``study/point_id``) is named. A
  calibration row, or a held-out row that restates an input, is a ``calibration input``; an informative
  held-out fact is what ``model_validation.status`` calls its worst row (``model hit`` or ``model miss``:
  the model chapter's one definition of a hit). A fact the file lacks raises KeyError.
* ``emulated: <check>``: a comparator of ``CHECKS`` over our records (data/results/cpu_initiated/vm and
  vram_cache/vm, preset standard) and the pm1753 profile (data/results/model/pm1753-profile.csv). Where
  a chapter derives the verdict itself, the check takes the chapter's (cpu_submit.emulated_sweep_verdicts,
  vram_cache.vram_seed_findings); otherwise a value within ``model_validation.AT_CAP`` of a profile input
  times the scale ``restates an input``, and any other value is set beside the seed's: ``emulated`` when
  equal, else ``emulated — disagrees``.
* ``measured: <check>``: a check of ``CHECKS`` that reads a quantity our own runs measure.

Key functions:
    lines()         the coverage lines, each with its derived ``statuses`` and a computed ``detail``
    rows()          the page's rows: lines of one seed sharing status and note merged into one row
    counts()        lines per status per seed
    vocabulary()    (status, meaning) rows for the page; order() every status word, is_status() checks one
    quotes(), says()  the seed's own words for a line (every place it says it; one, shortened, for the page)
    typed_emulated()  emulated lines whose status is typed (no comparator can be written), for the test
    sources()       the files the page is built from

Caveat: only transcribed numbers are covered; a seed sentence without a number has no line.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from nvmelab.book.publication import repo_root

# ------------------------------------------------------------------ the vocabulary ---
# (kept in nvmelab.results.status, the one place the words live; re-exported for the page and its tests)
from nvmelab.results.status import (  # noqa: E402,F401
    CALIBRATION,
    EMU_DISAGREES,
    EMU_RESTATES,
    EMULATED,
    HITS,
    MEASURED,
    MODEL_HIT,
    MODEL_MISS,
    NOT_TESTABLE,
    ORIGINS,
    PUBLISHED,
    STATUSES,
    published,
)

HEADER = ["seed", "what the seed says", "status", "chapter", "note"]
#: The columns the page shows (rows of one seed follow a heading row that names the seed and links its chapter).
SHOWN = ["what the seed says", "status", "note"]
#: A quote on the page is cut to this many characters (the seed CSVs hold it whole).
QUOTE_CHARS = 36
#: The name of the section a table stands in is cut to this many characters.
SECTION_CHARS = 30
WIDTHS = [9, 3, 9]


def is_status(status: str) -> bool:
    """A word of the vocabulary: a status, or ``published — <origin>``."""
    if status in STATUSES and status != PUBLISHED:
        return True
    return status.startswith(f"{PUBLISHED} — ") and status.split(" — ", 1)[1] in ORIGINS


def order() -> list[str]:
    """Every status word in the vocabulary's order, ``published`` expanded to its origin classes."""
    out: list[str] = []
    for s in STATUSES:
        out += [published(o) for o in ORIGINS] if s == PUBLISHED else [s]
    return out


def vocabulary() -> list[list[str]]:
    """(status, meaning) rows: every status; ``published`` as ``published — <origin class>`` with the classes."""
    rows = [[s, m] for s, m in STATUSES.items() if s != PUBLISHED]
    classes = "; ".join(f"{o}: {m}" for o, m in ORIGINS.items())
    at = [s for s, _ in rows].index(NOT_TESTABLE)
    return (
        rows[:at]
        + [[f"{PUBLISHED} — <origin class>", f"{STATUSES[PUBLISHED]}; its origin class is one of these: {classes}"]]
        + rows[at:]
    )


# --------------------------------------------------------------------------- files ---
def coverage_file() -> Path:
    return repo_root() / "book" / "coverage.csv"


def seeds_dir() -> Path:
    return repo_root() / "data" / "reference" / "seeds"


def validation_file() -> Path:
    return repo_root() / "data" / "results" / "model" / "validation.csv"


def profile_file() -> Path:
    return repo_root() / "data" / "results" / "model" / "pm1753-profile.csv"


def cpu_records_file() -> Path:
    return repo_root() / "data" / "results" / "cpu_initiated" / "vm" / "standard.jsonl"


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------------ the model ---
def _model_status(rel_error: float) -> str:
    """The model chapter's own word for a scored error (model_validation.status: its one definition of a hit)."""
    from nvmelab.results import model_validation as mv

    word = mv.status(rel_error)
    if word not in (MODEL_HIT, MODEL_MISS):
        raise ValueError(f"model_validation.status gives {word!r}, not {MODEL_HIT!r} or {MODEL_MISS!r}")
    return word


@cache
def _validation() -> tuple[dict[str, str], ...]:
    return tuple(_read(validation_file()))


def fact_status(key: str) -> tuple[str, str]:
    """(status, short detail) of a validation fact (or ``study/point_id``); KeyError if absent."""
    rows = [r for r in _validation() if key in (r["fact"], f"{r['study']}/{r['point_id']}")]
    if not rows:
        raise KeyError(f"validation.csv has no fact or point {key!r} (run python -m nvmelab.results.model_validation)")
    if any(r["role"] == "calibration" for r in rows):
        return CALIBRATION, "fitted"
    if any(r["restates"].strip() for r in rows):
        return CALIBRATION, "restates"
    worst = max(rows, key=lambda r: abs(float(r["rel_error"])))
    err = float(worst["rel_error"])
    return _model_status(err), f"{err:+.0%}"


# ------------------------------------------------------------------ emulated checks ---
@cache
def _emulated() -> dict[str, Any]:
    """Our emulated cpu_initiated sweeps (means per swept value), the profile inputs and the scale."""
    from nvmelab.results import analysis, records
    from nvmelab.studies import load_spec

    ours = analysis.to_frame(records.load_records(cpu_records_file()))
    plan = load_spec("cpu_initiated").plan("standard", target=str(ours["target"].iloc[0]))
    agg = {}
    for name in plan.sweeps:
        frame = plan.sweep_frame(ours, name)
        if not frame.empty:
            agg[name] = analysis.aggregate(frame, by=[name]).set_index(name)
    prof = {r["name"]: float(r["value"]) for r in _read(profile_file())}
    scale = float(ours["scale"].dropna().iloc[0])
    ndevs = int(plan.sweeps["qdepth"][0]["ndevs"])
    roof = analysis.roofline(per_device=prof["DEV_IOPS"] / scale, ndevs=ndevs)
    verdicts = _sweep_verdicts(agg, roof.value, scale, ndevs, int(plan.sweeps["qdepth"][0]["ncpus"]))
    e = {"agg": agg, "prof": prof, "scale": scale, "ndevs": ndevs, "roof": roof, "analysis": analysis}
    return {**e, "verdicts": verdicts, "ours": ours}


def _sweep_verdicts(agg: dict, roof: float, scale: float, ndevs: int, ncpus: int) -> dict[str, dict]:
    """The cpu_initiated chapter's own verdicts on its sweeps (cpu_submit.emulated_sweep_verdicts), by sweep."""
    from nvmelab.results import reference
    from nvmelab.studies.cpu_submit import analysis as cpu_submit

    threads, pub_roof = cpu_submit.published_threads_to_roofline("upcie")
    v = cpu_submit.emulated_sweep_verdicts(
        {name: a.reset_index() for name, a in agg.items()},
        roof=roof,
        scale=scale,
        ndevs=ndevs,
        ncpus=ncpus,
        profile=cpu_submit.profile_inputs(),
        seed={k: reference.seed004_value(k) for k in ("peak_qdepth", "bandwidth_512", "bandwidth_4096")},
        pub_threads=threads,
        pub_roof=pub_roof,
    )
    return {r["sweep"]: r for r in v.to_dict("records")}


def _verdict(sweep: str, ours: str) -> tuple[str, str]:
    """(status, detail) of one of the chapter's sweep verdicts (its reason is on the chapter); `ours` says what
    was compared."""
    r = _emulated()["verdicts"][sweep]
    if not is_status(r["status"]):
        raise ValueError(f"cpu_submit gives sweep {sweep} the status {r['status']!r}, not a word of the vocabulary")
    return r["status"], ours.format(ours=r["ours"], published=r["published"])


def _stated(quantity: str) -> list[float]:
    rows = _read(seeds_dir() / "seed004_statements.csv")
    return [float(r["value"].replace(" ", "")) for r in rows if r["quantity"] == quantity]


def _near(value: float, target: float) -> bool:
    from nvmelab.results.model_validation import AT_CAP

    return abs(value / target - 1) <= AT_CAP


def _beside(ours: float, theirs: float, what: str) -> tuple[str, str]:
    status = EMULATED if ours == theirs else EMU_DISAGREES
    return status, f"{what}: ours {ours:g}, the seed's {theirs:g}"


def _check_cap_qdepth() -> tuple[str, str]:
    e = _emulated()
    iops = e["agg"]["qdepth"]["iops_mean"]
    depths = [int(q) for q in _stated("device_cap_qdepth")]
    if all(_near(float(iops[q]), e["roof"].value) for q in depths):
        return EMU_RESTATES, (
            f"ours at QD {', '.join(map(str, depths))}: the device cap × {e['ndevs']} / scale {e['scale']:g}"
        )
    return EMU_DISAGREES, "ours stays below the profile's device cap at a depth where the seed reaches it"


def _check_peak_iops() -> tuple[str, str]:
    e = _emulated()
    best = float(max(a["iops_mean"].max() for a in e["agg"].values()))
    if _near(best, e["roof"].value):
        return EMU_RESTATES, (f"our best × scale: {best * e['scale'] / 1e6:.1f} M IOPS, the device cap × {e['ndevs']}")
    return _beside(best * e["scale"] / 1e6, _stated("peak_iops")[0], "peak IOPS (M, scaled back)")


def vram_records_file() -> Path:
    return repo_root() / "data" / "results" / "vram_cache" / "vm" / "standard.jsonl"


def _check_vram_balance() -> tuple[str, str]:
    """The vram_cache chapter's balance verdict (vram_cache.vram_seed_findings: the load spread over the
    largest array's devices, reads and writes, against BALANCED_SPREAD) beside the seed's mdadm sticks."""
    from nvmelab.results import analysis, records, reference
    from nvmelab.studies.vram_cache import analysis as vram_cache

    df = analysis.to_frame(records.load_records(vram_records_file()))
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    disk, st, bc = reference.seed003_disk_io(), reference.seed003_statements(), reference.seed003_bcache()
    f = vram_cache.vram_seed_findings(vram_cache.vram_summary(ok), vram_cache.vram_per_device(ok), disk, st, bc)
    sticks = disk[(disk["setup"] == "mdadm-raid0-swap") & ~disk["partition"] & disk["device"].str.startswith("nvme")]
    seed = {k: float(sticks[f"{k}_bytes_s"].max() / sticks[f"{k}_bytes_s"].min()) for k in ("read", "write")}
    limit = f["balanced_spread"]
    ours_even = max(f["stripe_spread_read_max"], f["stripe_spread_write_max"]) <= limit
    status = EMULATED if ours_even == (max(seed.values()) <= limit) else EMU_DISAGREES
    return status, (
        f"busiest over least busy device: ours {f['stripe_spread_read_max']:.2f}× reading, "
        f"{f['stripe_spread_write_max']:.2f}× writing; the seed's sticks {seed['read']:.2f}× and {seed['write']:.2f}×; "
        f"even up to {limit:.2f}×"
    )


def _check_busy_poll() -> tuple[str, str]:
    """What each polling thread of our cpu_initiated runs used of its CPU (cpu_submit.polling_share)."""
    from nvmelab.studies.cpu_submit import analysis as cpu_submit

    ours = _emulated()["ours"]
    share = cpu_submit.polling_share(ours).dropna()
    return MEASURED, (
        f"each polling thread of our {len(share)} runs got {share.min():.0%} to {share.max():.0%} of a CPU"
        f", median {share.median():.0%}"
    )


def _check_iops_drop() -> tuple[str, str]:
    e = _emulated()
    iops = e["agg"]["iosize"]["iops_mean"].sort_index()
    ours = next((int(s) for s in iops.index if iops[s] < 0.95 * iops.iloc[0]), None)
    ratio = e["prof"]["DEV_BW"] / e["prof"]["DEV_IOPS"]
    implied = next((int(s) for s in iops.index if s > ratio), None)
    if ours is not None and ours == implied:
        return EMU_RESTATES, (
            f"ours drops first at {ours} B, the first size above bandwidth cap / IOPS cap ({ratio:,.0f} B)"
        )
    return _beside(float(ours or 0), _stated("iops_drop_iosize")[0], "I/O size where IOPS drops")


#: Comparators an ``emulated: <check>`` or ``measured: <check>`` basis may name: each returns (status, detail).
CHECKS: dict[str, Callable[[], tuple[str, str]]] = {
    "peak_qdepth": lambda: _verdict("qdepth", "saturating queue depth: ours {ours:g}, the seed's {published:g}"),
    "core_ratio": lambda: _verdict(
        "ncpus", "fewest threads at the roofline: ours {ours:g}, the published records' {published:g}"
    ),
    "bandwidth_512": lambda: _verdict(
        "iosize", "4096 B over 512 B bandwidth: ours {ours:.2f}, the seed's {published:.2f}"
    ),
    "bandwidth_4096": lambda: _verdict(
        "iosize", "4096 B over 512 B bandwidth: ours {ours:.2f}, the seed's {published:.2f}"
    ),
    "vram_balance": _check_vram_balance,
    "busy_poll": _check_busy_poll,
    "cap_qdepth": _check_cap_qdepth,
    "peak_iops": _check_peak_iops,
    "iops_drop": _check_iops_drop,
}


# -------------------------------------------------------------------------- lines ---
#: How a model line's detail starts (the facts of validation.csv it rests on follow, comma-separated).
FACTS = "validation.csv: "


def _derive(line: dict[str, str]) -> tuple[list[str], str]:
    basis = line["basis"].strip()
    if not basis:
        return [line["status"]], ""
    kind, _, names = basis.partition(":")
    keys = [k.strip() for k in names.split(";") if k.strip()]
    if kind in ("emulated", "measured"):
        status, detail = CHECKS[keys[0]]()
        if status.startswith(EMULATED) != (kind == "emulated"):
            raise ValueError(f"{line['file']}::{line['item']}: check {keys[0]} gives {status!r} on a {kind} basis")
        return [status], detail
    if kind != "model":
        raise ValueError(f"{line['file']}::{line['item']}: basis {basis!r} is not model:, emulated: or measured:")
    derived = [(k, *fact_status(k)) for k in keys]
    statuses = sorted(dict.fromkeys(s for _, s, _ in derived), key=order().index)
    detail = ", ".join(
        f"{k.split('/', 1)[-1]} {d if s == CALIBRATION else f'{s.split()[-1]} {d}'}" for k, s, d in derived
    )
    return statuses, f"{FACTS}{detail}"


def lines() -> list[dict[str, Any]]:
    """The coverage lines with ``statuses`` (derived or typed) and ``detail`` (computed, may be empty)."""
    out = []
    for ln in _read(coverage_file()):
        statuses, detail = _derive(ln)
        out.append({**ln, "statuses": statuses, "detail": detail})
    return out


def typed_emulated() -> list[str]:
    """``file::item`` of the emulated lines whose status is typed, not derived by a comparator."""
    return [f"{ln['file']}::{ln['item']}" for ln in _read(coverage_file()) if ln["status"].startswith(EMULATED)]


def sources() -> list[Path]:
    """Every data file the page reads: this list, the model's files, our records the checks read, the
    published files behind the cpu_initiated verdicts (records, headline table) and the seed files."""
    from nvmelab.results import reference

    ref = reference.reference_dir()
    published = [ref / reference.PUBLISHED_FILES["cpu-initiated-upcie"], ref / "headline.csv"]
    ours = [coverage_file(), validation_file(), profile_file(), cpu_records_file(), vram_records_file()]
    return ours + published + sorted({seeds_dir() / ln["file"] for ln in _read(coverage_file())})


def place(line: dict[str, str]) -> tuple[str, str]:
    """(what, section) of a table line: the seed's name for the table and the section it stands in."""
    rows = _read(seeds_dir() / line["file"])
    first = rows[0] if rows else {}
    return first.get("locator", "table"), first.get("section", "?")


def _places(tables: list[dict[str, str]]) -> list[str]:
    """Where the tables of one row stand, one entry per kind of table: the sections it stands in, shortened."""
    by: dict[str, list[str]] = {}
    for ln in tables:
        what, section = place(ln)
        by.setdefault(what, []).append(f"“{short(section, SECTION_CHARS)}”")
    return [f"the {what} under {', '.join(dict.fromkeys(secs))}" for what, secs in by.items()]


def quotes(line: dict[str, str]) -> list[str]:
    """The seed's own words for a line: each place it states the quantity, or where the table is."""
    rows = _read(seeds_dir() / line["file"])
    if line["item"] == "table":
        what, section = place(line)
        return [f"the {what} under “{section}”"]
    plain = (re.sub(r"\\([*_`\\])", r"\1", r["quote"]) for r in rows if r["quantity"] == line["item"])  # as read
    found = list(dict.fromkeys(f"“{q}”" for q in plain))
    if not found:
        raise KeyError(f"{line['file']} states no quantity {line['item']!r}")
    return found


def short(quote: str, limit: int = QUOTE_CHARS) -> str:
    """A quote cut at a word boundary to at most `limit` characters, marked with an ellipsis."""
    if len(quote) <= limit:
        return quote
    cut = quote[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return cut + ("…”" if quote.endswith("”") else "…")


def says(line: dict[str, str], shown: set[str] | frozenset[str] = frozenset()) -> str:
    """One quote for a line, shortened: the first not in `shown` (a sentence stating two quantities is
    quoted once)."""
    q = [short(x) for x in quotes(line)]
    return next((x for x in q if x not in shown), q[0])


def status_text(statuses: list[str]) -> str:
    return " · ".join(statuses)


def rows(chapters: dict[str, Any] | None = None) -> list[list[Any]]:
    """The page's rows: lines of one seed with the same statuses, chapter and typed note grouped into one row
    that quotes each (once) and lists their computed details (the validation facts once each). `chapters`
    maps a study to what the chapter cell shows (its title or a link)."""
    chapters = chapters or {}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for ln in lines():
        groups.setdefault((ln["seed"], status_text(ln["statuses"]), ln["where"], ln["note"]), []).append(ln)
    out, shown = [], set()
    for (seed, status, where, note), g in groups.items():
        said = [says(ln, shown) for ln in g if ln["item"] != "table"]
        shown.update(said)
        said += _places([ln for ln in g if ln["item"] == "table"])
        details = [ln["detail"] for ln in g if ln["detail"]]
        facts = [f for d in details if d.startswith(FACTS) for f in d[len(FACTS) :].split(", ")]
        other = [d for d in details if not d.startswith(FACTS)]
        merged = "; ".join(list(dict.fromkeys(other)) + ([FACTS + ", ".join(dict.fromkeys(facts))] if facts else []))
        note = note + (f" ({merged})" if merged else "")
        out.append([seed, " · ".join(dict.fromkeys(said)), status, chapters.get(where, where), note])
    return out


def counts() -> tuple[list[str], list[list[str]]]:
    """(header, rows): per status, how many lines of each seed have it (a line with several facts of
    different statuses counts under each)."""
    ls = lines()
    seeds = sorted({ln["seed"] for ln in ls})
    found = list(dict.fromkeys(s for ln in ls for s in ln["statuses"]))
    body = []
    for s in [s for s in order() if s in found]:
        per = [sum(s in ln["statuses"] for ln in ls if ln["seed"] == seed) for seed in seeds]
        body.append([s] + [str(n) if n else "·" for n in per] + [str(sum(per))])
    return ["status"] + [f"seed {s}" for s in seeds] + ["all"], body
