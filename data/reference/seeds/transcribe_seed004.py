# SPDX-License-Identifier: BSD-3-Clause
"""Transcribe seed 004 (AiSIO, "CPU-initiated I/O: Optimal Parameter Search") into seed004_*.csv.

usage: python data/reference/seeds/transcribe_seed004.py [SEED_FILE]
       (default: ../shared/seeds/004_*.txt next to the repository, or $NVMELAB_SEEDS/004_*.txt)

The tables are read from the seed's Markdown pipe tables, cell for cell; the
numbers quoted in the prose are listed below as (section, quote, value) and
each is checked here: the quote must stand in that section's text and the value
must stand in the quote, exactly as printed. The script refuses to write
anything when a check fails, so a transcription never drifts from the seed.
tests/test_reference_seeds.py checks the written files against the seed again.
"""

from __future__ import annotations

import csv
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED_NAME = "004_499c7f303a2c6475.txt"
_HEAD_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def seed_path(arg: str | None = None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("NVMELAB_SEEDS")
    roots = [Path(env)] if env else []
    roots += [p / "shared" / "seeds" for p in HERE.parents]
    for r in roots:
        if (r / SEED_NAME).is_file():
            return r / SEED_NAME
    raise SystemExit(f"seed {SEED_NAME} not found (pass its path or set NVMELAB_SEEDS)")


def sections(text: str) -> dict[str, str]:
    """Heading title -> the text under it up to the next heading of the same or a higher level
    (deeper headings included). Fenced code is not searched for headings."""
    lines = text.splitlines()
    heads: list[tuple[int, int, str]] = []
    fenced = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else _HEAD_RE.match(line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2)))
    out: dict[str, str] = {}
    for k, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1 :] if lv <= level), len(lines))
        out[title] = "\n".join(lines[i + 1 : end])
    return out


def own_text(text: str, title: str) -> str:
    """The text under a heading before its first sub-heading (tables are taken from here)."""
    body = sections(text)[title]
    return re.split(r"^#{1,6}\s", body, maxsplit=1, flags=re.M)[0]


def tables(body: str) -> list[list[list[str]]]:
    """Pipe tables in `body`: each a list of rows of stripped cells, header first, separator dropped."""
    out: list[list[list[str]]] = []
    cur: list[list[str]] = []
    for line in body.splitlines() + [""]:
        s = line.strip()
        if s.startswith("|") and s.endswith("|"):
            cells = [c.strip() for c in s[1:-1].split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                cur.append(cells)
        elif cur:
            out.append(cur)
            cur = []
    return out


def set_members(printed: str) -> list[str]:
    """'{ 64, 128, 256 }' -> ['64', '128', '256'] (an ellipsis is kept as '...')."""
    inner = printed.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        return [inner]
    return [m.strip() for m in inner[1:-1].split(",")]


# (section, quantity, bound, value, unit, quote) for every number the prose quotes.
STATEMENTS = [
    ("Independent variables", "independent_variables", "", "five", "", "five environmental conditions"),
    ("Independent variables", "run_time", "", "10", "s", "Each run lasted 10 seconds"),
    (
        "CPU-initiated I/O: Optimal Parameter Search",
        "repetitions",
        "",
        "five",
        "",
        "average of five runs per configuration",
    ),
    (
        "Independent variables",
        "logical_cpus_per_core_with_siblings",
        "",
        "two",
        "",
        "there are two threads on each of the cores",
    ),
    ("Metrics Collected", "frequency_sample_interval", "", "0.5", "s", "every\n0.5 seconds"),
    ("Metrics Collected", "frequency_trim_fraction", "", "10", "%", "first and last 10% of the reported cpu"),
    ("Metrics Collected", "measurement_interval", "", "10", "s", "over the 10-second measurement"),
    ("Metrics Collected", "busy_poll_cpu_utilisation_per_logical_cpu", "~", "100", "%", "approx. N\\*100% CPU"),
    (
        "Environment",
        "pm1753_random_read_capacity",
        "",
        "3.2",
        "million IOPS",
        "random reads of 3.2 million\nIOPS of the Samsung PM1753",
    ),
    (
        "Determining Device IOPS Capacity",
        "device_iops_capacity",
        "",
        "3 857 938",
        "IOPS",
        "reach 3 857 938 IOPS with only one device",
    ),
    (
        "Determining Device IOPS Capacity",
        "ndev1_mean_iops",
        "",
        "3 099 640",
        "IOPS",
        "% Average for all ndev=1: 3 099 640",
    ),
    (
        "Determining Device IOPS Capacity",
        "ndev1_median_iops",
        "",
        "3 766 518",
        "IOPS",
        "% Median for all ndev=1: 3 766 518",
    ),
    (
        "Determining Device IOPS Capacity",
        "ndev1_performance_mean_iops",
        "",
        "3 709 847",
        "IOPS",
        "% Average for ndev=1,gov=performance: 3 709 847",
    ),
    (
        "Determining Device IOPS Capacity",
        "ndev1_performance_median_iops",
        "",
        "3 844 043",
        "IOPS",
        "% Median for ndev=1,gov=performance: 3 844 043",
    ),
    ("Optimal Parameterization", "ndevs", "", "16", "", "With all 16 devices utilized"),
    ("Optimal Parameterization", "peak_iops", "~", "62", "million IOPS", "almost 62\nmillion IOPS"),
    ("Optimal Parameterization", "ncpus", "", "8", "physical cores", "using 8 physical cores"),
    (
        "CPU Frequency and Governors",
        "powersave_mean_decrease_a_c",
        "",
        "64.19",
        "%",
        "decreased by 64.19 % for parameterization\nA-C",
    ),
    ("CPU Frequency and Governors", "performance_clock", "", "3.3", "GHz", "clock speed at 3.3 GHz for all CPUs"),
    ("Turbo Boost", "turbo_off_clock_limit", "", "2.6", "GHz", "limiting the clock speed to 2.6 GHz"),
    ("Turbo Boost", "turbo_off_mean_decrease", "", "4.4", "%", "on average 4.4 % less IOPS"),
    ("SMT", "smt_off_max_clock", "<=", "2.6", "GHz", "do not exceed 2.6 GHz"),
    ("SMT", "userspace_fixed_clock", "", "3.0", "GHz", "CPU governor of 3.0 GHz"),
    ("Queue depth", "peak_qdepth", "", "128", "", "peaked when using a queue depth of 128"),
    ("Queue depth", "device_cap_qdepth", "", "128", "", "both queue depths 128, 256 and 512"),
    ("Queue depth", "device_cap_qdepth", "", "256", "", "both queue depths 128, 256 and 512"),
    ("Queue depth", "device_cap_qdepth", "", "512", "", "both queue depths 128, 256 and 512"),
    ("Queue depth", "turbo_off_peak_qdepth", "", "128", "", "highlights the peak at 128"),
    ("I/O size", "iops_drop_iosize", "", "4096", "B", "Increasing the I/O size to 4096"),
    ("I/O size", "bandwidth_512", "~", "30", "GiB/s", "approximately 30 GiB/s at 512 bytes"),
    ("I/O size", "bandwidth_512_iosize", "", "512", "B", "approximately 30 GiB/s at 512 bytes"),
    ("I/O size", "bandwidth_4096", "~", "215", "GiB/s", "approximately 215 GiB/s at 4096 bytes"),
    ("I/O size", "bandwidth_4096_iosize", "", "4096", "B", "approximately 215 GiB/s at 4096 bytes"),
    ("Number of Cores", "linear_until_core_to_device_cores", "", "1", "", "core-to-device ratio of 1:2"),
    ("Number of Cores", "linear_until_core_to_device_devices", "", "2", "", "core-to-device ratio of 1:2"),
    ("Number of Cores", "turbo_off_decrease", "~", "4.4", "%", "approximately 4.4 % decrease in IOPS"),
    ("Number of Cores", "turbo_off_recovers_core_to_device_cores", "", "1", "", "core-to-device ratio is 1:1"),
    ("Number of Cores", "turbo_off_recovers_core_to_device_devices", "", "1", "", "core-to-device ratio is 1:1"),
    ("Summary", "qdepth", "", "128", "", "queue depth 128"),
    ("Summary", "iosize", "", "512", "B", "512-byte I/O"),
    ("Summary", "peak_iops", "~", "61.7", "million IOPS", "approximately 61.7 million IOPS"),
    ("Summary", "ndevs", "", "16", "", "across 16 devices"),
    ("Summary", "ncpus", "", "8", "physical cores", "using 8 physical cores"),
    ("Summary", "device_iops_capacity", "", "3.86", "million IOPS", "(3.86 million IOPS)"),
]

#: The host-variable tables: (section, index of the table in its section's own text, condition).
HOST_TABLES = [
    ("CPU Frequency and Governors", 0, "powersave"),
    ("Turbo Boost", 0, "turbo_off"),
    ("SMT", 0, "smt_off"),
    ("SMT", 1, "smt_off_userspace_3ghz"),
]
#: The comment lines (``% X: ...``) under the same headings: unrounded values, D included.
_NOTE_RE = re.compile(
    r"^% ([A-D]): (?:(3GHz), )?(Using|Not using), stress (on|off): ([\d ]+?) - ([\d.]+)% "
    r"(decrease|increase)$"
)
_CHANGE_RE = re.compile(r"^([\d.]+) % (decrease|increase)$")


def build(text: str, seed: str) -> dict[str, tuple[list[str], list[list[str]]]]:
    sec = sections(text)
    files: dict[str, tuple[list[str], list[list[str]]]] = {}
    tail = ["seed", "section", "locator"]

    def where(section: str, locator: str) -> list[str]:
        return [seed, section, locator]

    # parameter sets (initial and expanded)
    rows = []
    for idx, (name, head) in enumerate((("initial", "Parameter Set"), ("expanded", "Expanded Parameter Set"))):
        t = tables(own_text(text, "Independent variables"))[idx]
        assert t[0] == ["Variable", head], t[0]
        for var, printed in t[1:]:
            for m in set_members(printed):
                rows.append([name, var, printed, m] + where("Independent variables", f"{head} table"))
    files["seed004_parameter_sets.csv"] = (["set", "variable", "parameter_set", "value"] + tail, rows)

    # optimal parameterisation
    t = tables(own_text(text, "Optimal Parameterization"))
    assert t[0][0] == ["Independent Variable", "Value"], t[0][0]
    files["seed004_optimal_parameterisation.csv"] = (
        ["independent_variable", "value"] + tail,
        [r + where("Optimal Parameterization", "parameterization table") for r in t[0][1:]],
    )

    # A-D
    assert t[1][0] == ["Id", "Thread siblings", "Stress", "Reached IOPS"], t[1][0]
    files["seed004_parameterisations.csv"] = (
        ["id", "thread_siblings", "stress", "reached_iops"] + tail,
        [r + where("Optimal Parameterization", "A-D table") for r in t[1][1:]],
    )

    # governor / turbo / SMT / userspace tables, with their printed change
    rows = []
    for section, idx, cond in HOST_TABLES:
        tab = tables(own_text(text, section))[idx]
        assert tab[0] == ["Parameterization Id", "IOPS", "Change"], tab[0]
        for pid, iops, change in tab[1:]:
            m = _CHANGE_RE.match(change)
            assert m, change
            rows.append([cond, pid, iops, m.group(1), "%", m.group(2)] + where(section, f"table {idx + 1}"))
    files["seed004_host_variables.csv"] = (
        ["condition", "parameterization_id", "iops", "change", "change_unit", "direction"] + tail,
        rows,
    )

    # the unrounded comment lines under the same headings
    rows = []
    for section, _, cond in HOST_TABLES[:3]:
        for line in own_text(text, section).splitlines():
            m = _NOTE_RE.match(line.strip())
            if not m:
                continue
            pid, ghz, sib, stress, iops, pct, direction = m.groups()
            c = "smt_off_userspace_3ghz" if ghz else cond
            rows.append(
                [c, pid, "used" if sib == "Using" else "not used", stress, iops, pct, "%", direction]
                + where(section, "comment line")
            )
    files["seed004_host_variables_notes.csv"] = (
        ["condition", "parameterization_id", "thread_siblings", "stress", "iops", "change", "change_unit", "direction"]
        + tail,
        rows,
    )

    # statements
    rows = []
    for section, quantity, bound, value, unit, quote in STATEMENTS:
        body = sec[section]
        if quote not in body:
            raise SystemExit(f"statement {quantity}: quote {quote!r} not in section {section!r}")
        if value not in quote:
            raise SystemExit(f"statement {quantity}: value {value!r} not in its quote {quote!r}")
        rows.append([quantity, bound, value, unit, " ".join(quote.split())] + where(section, "text"))
    files["seed004_statements.csv"] = (["quantity", "bound", "value", "unit", "quote"] + tail, rows)
    return files


def main(argv: list[str]) -> int:
    path = seed_path(argv[1] if len(argv) > 1 else None)
    files = build(path.read_text(), path.name)
    for name, (header, rows) in files.items():
        with open(HERE / name, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
        print(f"{name}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
