# SPDX-License-Identifier: BSD-3-Clause
"""Published reference data (data/reference/) as pandas DataFrames.

Key functions:
    published(name)      AiSIO records ("cpu-initiated-upcie", "tool-comparison",
                         "pcie-bandwidth-saturation") in the same column layout as
                         nvmelab.results.analysis.to_frame gives for our records
    headline()           the headline numbers quoted in the published chapters
    headline_value(...)  one of them, as a number
    blksum_qdepth()      the eight hyperfine tables of seed 002 (blksum --queue-depth), in seconds
    seed003_disk_io()    seed 003's Glances disk tables (per device, bytes/s)
    seed003_statements() every number seed 003 quotes in its text (set-up, typical rates, ratios)
    seed003_value(...)   one of them, as a number
    seed003_bcache()     seed 003's bcache priority_stats (percent)
    seed003_tables()     seed 003's Glances and bcache tables as printed, for display
    seed004_parameterisations()  seed 004's A-D table (IOPS of the best configuration per siblings/stress)
    seed004_host_variables()     seed 004's powersave, turbo-off, SMT-off and userspace tables, with changes
    seed004_optimal() seed004_parameter_sets() seed004_statements() seed004_value(...)
    host_io_costs()      what a real controller adds per I/O, from the literature (host-io-costs.csv)
    data_root()          the repository's data/ folder (or an installed package's copy of data/reference)
    installed_data()     True when that is an installed package's copy

Caveat: these files are published results, never ours; rows carry
``source == PUBLISHED`` so that figures can say which is which. The folder is
found next to the package in a source checkout, in an installed package (which ships
data/reference as nvmelab/data/reference), or through ``NVMELAB_DATA``.
"""

from __future__ import annotations

import os
import re
from decimal import Decimal
from functools import cache
from pathlib import Path

import pandas as pd

from .analysis import to_frame
from .records import load_records

#: Label of published rows in tables and figure legends.
PUBLISHED = "published (AiSIO)"
#: Where the published records come from (see data/reference/README.md).
PUBLISHED_SOURCE = "xnvme/aisio @ 31b032a"
#: The published record files, by name.
PUBLISHED_FILES = {
    "cpu-initiated-upcie": "cpu-initiated-upcie.jsonl",
    "tool-comparison": "tool-comparison.jsonl",
    "pcie-bandwidth-saturation": "pcie-bandwidth-saturation.jsonl",
}
_REP_RE = re.compile(r"-(\d+)\.out$")


def data_root() -> Path:
    """The data/ folder: $NVMELAB_DATA; else the source checkout's data/ (walking up from this
    file); else, in an installed package (pip install ., a wheel), the copy of data/reference/ it
    ships as nvmelab/data/reference (src/bindings/CMakeLists.txt). One clear error when none is found."""
    env = os.environ.get("NVMELAB_DATA")
    if env:
        if not (Path(env) / "reference").is_dir():
            raise FileNotFoundError(f"NVMELAB_DATA={env}: no reference/ folder in it (it must name a data/ folder)")
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "data" / "reference").is_dir():
            return parent / "data"
    raise FileNotFoundError(
        f"data/reference/ not found: nvmelab at {here.parent.parent} is neither in a source checkout nor an "
        "installed package that ships nvmelab/data/reference; set NVMELAB_DATA to a checkout's data folder"
    )


def installed_data() -> bool:
    """True when data_root() is the copy an installed package ships (no checkout: no records, only its profile)."""
    return data_root().resolve() == (Path(__file__).resolve().parent.parent / "data")


def reference_dir() -> Path:
    return data_root() / "reference"


@cache
def _published(name: str) -> pd.DataFrame:
    if name not in PUBLISHED_FILES:
        raise ValueError(f"unknown published data set {name!r}; known: {', '.join(PUBLISHED_FILES)}")
    recs = load_records(reference_dir() / PUBLISHED_FILES[name])
    df = to_frame(recs, source=PUBLISHED)
    df = df.rename(columns={"cpu_governor": "governor"})
    reps = df["run_file"].str.extract(_REP_RE, expand=False)
    if reps.isna().any():
        bad = df.loc[reps.isna(), "run_file"].iloc[0]
        raise ValueError(f"{name}: cannot read the repetition from run_file {bad!r}")
    df["repetition"] = reps.astype(int)
    df["study"] = name
    df["nqueues"] = 1
    df["rw"] = "randread"
    df["target"] = "published"
    df["host"] = "AiSIO HPC server"
    # the stack as the book names it (tool and the driver it ran on), never the records' backend label
    df["stack"] = [stack_label(t, b) for t, b in zip(df["tool"], df["backend"])]
    df["driver"] = [published_driver(t, b) for t, b in zip(df["tool"], df["backend"])]
    return df


#: The NVMe driver under each published tool whose records do not name it truthfully: SPDK's
#: applications (bdevperf, spdk_nvme_perf) always run on SPDK's own user-space NVMe driver. The
#: published per-run records label them ``backend: upcie``; that is the published pipeline's label
#: for the run, not the driver (AiSIO's I/O-paths table and book/architecture.md).
SPDK_TOOLS = ("bdevperf", "spdk_nvme_perf")
#: Driver name of each xnvmeperf backend label of the published records.
BACKEND_DRIVERS = {"spdk": "SPDK NVMe driver", "upcie": "upcie", "upcie-cuda": "upcie, payload in GPU memory"}


def published_driver(tool: str, backend: str) -> str:
    """The user-space NVMe driver a published run used (not the records' backend label for SPDK's tools)."""
    if tool in SPDK_TOOLS:
        return "SPDK NVMe driver"
    return BACKEND_DRIVERS.get(backend, backend)


def stack_label(tool: str, backend: str) -> str:
    """A published stack as the book names it: tool and the driver it really ran on."""
    if tool in SPDK_TOOLS:
        return f"{tool} (SPDK driver)"
    return f"{tool} + {backend}"


def published(name: str) -> pd.DataFrame:
    """The published AiSIO records of one experiment, one row per run and repetition."""
    return _published(name).copy()


def headline() -> pd.DataFrame:
    """The headline numbers of the published chapters (value kept as text; see `headline_value`)."""
    return pd.read_csv(reference_dir() / "headline.csv", dtype={"value": str})


def host_io_costs() -> pd.DataFrame:
    """What a real controller adds to a host thread's cost per I/O, from the literature: one row per
    quantity with its ``low``/``high`` bounds, unit, source address and locator (data/reference/README.md)."""
    return pd.read_csv(reference_dir() / "host-io-costs.csv").set_index("quantity")


def headline_value(experiment: str, quantity: str, config: str | None = None) -> float:
    """One headline number; `config` must match exactly when several rows share the quantity."""
    h = headline()
    sel = h[(h["experiment"] == experiment) & (h["quantity"] == quantity)]
    if config is not None:
        sel = sel[sel["config"] == config]
    if len(sel) != 1:
        raise KeyError(f"headline {experiment}/{quantity}/{config}: {len(sel)} rows match")
    return float(sel["value"].iloc[0])


#: Seed transcriptions (data/reference/seeds/, see data/reference/README.md).
SEEDS_DIR = "seeds"
#: Seconds per printed hyperfine unit.
_TIME_UNIT_S = {"s": 1, "ms": 0.001}
#: Glances' byte-rate suffixes (binary multiples).
_GLANCES_PREFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def seeds_dir() -> Path:
    return reference_dir() / SEEDS_DIR


def seed_files(seed: str) -> list[Path]:
    """The transcription files of one seed ("002", "003"), sorted."""
    files = sorted(seeds_dir().glob(f"seed{seed}_*.csv"))
    if not files:
        raise FileNotFoundError(f"no transcription of seed {seed} in {seeds_dir()}")
    return files


def _read_seed_csv(path: Path) -> pd.DataFrame:
    # every cell as printed: "null" is a digest name and "0.030" keeps its digits
    return pd.read_csv(path, dtype=str, keep_default_na=False)


# --- seed 004 (AiSIO, CPU-initiated I/O: the parameter search) --------------------------------
#: Number words seed 004 uses for counts.
_SEED004_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
#: Which published parameterisation (seed 004's A-D table) a host-variable condition starts from.
SEED004_CONDITIONS = {
    "powersave": "powersave governor",
    "turbo_off": "turbo boost off",
    "smt_off": "SMT off",
    "smt_off_userspace_3ghz": "SMT off, userspace governor at a fixed clock",
}


def seed004_number(printed: str) -> float:
    """A number as seed 004 prints it ("12 345 678", "1.25", "five") -> float; ValueError otherwise."""
    t = printed.strip()
    if t in _SEED004_WORDS:
        return float(_SEED004_WORDS[t])
    return float(t.replace(" ", "").replace(",", ""))


def seed004_parameterisations() -> pd.DataFrame:
    """Seed 004's A-D table: the best configuration with thread siblings used or not and stress on
    or off. Columns ``id``, ``thread_siblings``, ``stress`` (as printed), ``thr_sib`` and
    ``stress_on`` (0/1), ``iops`` (float)."""
    t = _read_seed_csv(seeds_dir() / "seed004_parameterisations.csv")
    df = t[["id", "thread_siblings", "stress", "section"]].copy()
    df["thr_sib"] = (t["thread_siblings"] == "used").astype(int)
    df["stress_on"] = (t["stress"] == "on").astype(int)
    df["iops"] = t["reached_iops"].map(seed004_number)
    return df


def seed004_host_variables(notes: bool = False) -> pd.DataFrame:
    """Seed 004's governor (powersave), turbo-off, SMT-off and SMT-off-at-3-GHz tables, one row
    per condition and parameterisation: ``condition``, ``id``, ``iops``, ``change`` as printed
    (percent, signed: a decrease is negative), ``baseline_iops`` (the A-D table) and
    ``change_from_iops``, the change recomputed from the two IOPS values.
    notes=True: the unrounded comment lines under the same headings (which include D)."""
    name = "seed004_host_variables_notes.csv" if notes else "seed004_host_variables.csv"
    t = _read_seed_csv(seeds_dir() / name)
    unknown = sorted(set(t["condition"]) - set(SEED004_CONDITIONS))
    if unknown:
        raise ValueError(f"seed 004: unknown condition(s) {unknown}")
    sign = t["direction"].map({"decrease": -1.0, "increase": 1.0})
    if sign.isna().any():
        raise ValueError(f"seed 004: change direction must be increase or decrease, got {sorted(set(t['direction']))}")
    base = seed004_parameterisations().set_index("id")["iops"]
    df = pd.DataFrame(
        {
            "condition": t["condition"],
            "id": t["parameterization_id"],
            "iops": t["iops"].map(seed004_number),
            "change": sign * t["change"].astype(float),
        }
    )
    df["baseline_iops"] = df["id"].map(base)
    df["change_from_iops"] = (df["iops"] / df["baseline_iops"] - 1) * 100
    df["section"] = t["section"]
    return df


def seed004_optimal() -> pd.DataFrame:
    """Seed 004's optimal parameterisation, as printed (``independent_variable``, ``value``)."""
    return _read_seed_csv(seeds_dir() / "seed004_optimal_parameterisation.csv")[["independent_variable", "value"]]


def seed004_parameter_sets(which: str = "initial") -> dict[str, list[str]]:
    """Seed 004's parameter sets ("initial" or "expanded"): variable -> its values as printed; an
    elided range ("1, 2, ..., 16") is expanded."""
    t = _read_seed_csv(seeds_dir() / "seed004_parameter_sets.csv")
    t = t[t["set"] == which]
    if t.empty:
        raise KeyError(f"seed 004 has no {which!r} parameter set")
    out: dict[str, list[str]] = {}
    for var, g in t.groupby("variable", sort=False):
        vals = list(g["value"])
        if "..." in vals:
            i = vals.index("...")
            lo, step, hi = int(vals[i - 1]), int(vals[i - 1]) - int(vals[i - 2]), int(vals[i + 1])
            vals = vals[:i] + [str(v) for v in range(lo + step, hi, step)] + vals[i + 1 :]
        out[var] = vals
    return out


def seed004_statements() -> pd.DataFrame:
    """Every number seed 004 quotes in its text, with ``number`` (float; counts printed as words
    included) and ``bound`` (~, <=, or empty)."""
    t = _read_seed_csv(seeds_dir() / "seed004_statements.csv")
    t["number"] = t["value"].map(seed004_number)
    return t


def seed004_value(quantity: str, section: str | None = None) -> float:
    """One number seed 004 quotes (e.g. ``"bandwidth_4096"``); `section` picks among repeats."""
    s = seed004_statements()
    sel = s[s["quantity"] == quantity]
    if section is not None:
        sel = sel[sel["section"] == section]
    if len(sel) != 1:
        raise KeyError(f"seed 004 {quantity}/{section}: {len(sel)} rows match")
    return float(sel["number"].iloc[0])


def seed002_printed() -> list[tuple[str, pd.DataFrame]]:
    """Seed 002's eight hyperfine tables as the seed prints them (its unit, min and max included), each
    with a title naming machine, I/O path, digest and threads: what the chapter shows as published."""
    out = []
    for f in seed_files("002"):
        if f.name == "seed002_summary.csv":
            continue
        t = _read_seed_csv(f)
        first = t.iloc[0]
        io = "NBD" if first["io"] == "nbd" else "file read directly"
        threads = f", {first['threads']} hash threads" if first["threads"] else ", default threads"
        title = f"{first['machine']}, {io}, digest {first['digest']}{threads} ({first['section']})"
        cols = ["qdepth", "mean", "sigma", "user", "system", "min", "max", "unit", "runs"]
        out.append((title, t[cols].reset_index(drop=True)))
    return out


def blksum_qdepth() -> pd.DataFrame:
    """Seed 002: blksum time per queue depth, one row per hyperfine benchmark of the eight tables
    (system laptop|server x nbd 0|1 x digest null|sha256). Times in seconds (``mean_s``, ``std_s`` =
    hyperfine's σ, ``user_s``, ``system_s``, ``min_s``, ``max_s``), converted from the printed unit."""
    files = [f for f in seed_files("002") if f.name != "seed002_summary.csv"]
    t = pd.concat([_read_seed_csv(f) for f in files], ignore_index=True)
    scale = t["unit"].map(_TIME_UNIT_S)
    if scale.isna().any():
        raise ValueError(f"seed 002: unknown time unit(s) {sorted(set(t.loc[scale.isna(), 'unit']))}")
    df = pd.DataFrame(
        {
            "system": t["machine"],
            "nbd": (t["io"] == "nbd").astype(int),
            "io": t["io"],
            "digest": t["digest"],
            "threads": pd.to_numeric(t["threads"].replace("", None)),
            "qdepth": t["qdepth"].astype(int),
        }
    )
    for col, out in (
        ("mean", "mean_s"),
        ("sigma", "std_s"),
        ("user", "user_s"),
        ("system", "system_s"),
        ("min", "min_s"),
        ("max", "max_s"),
    ):
        # decimal arithmetic: 762.6 ms is exactly 0.7626 s, as the printed digits say
        df[out] = [float(Decimal(v) * Decimal(str(k))) for v, k in zip(t[col], scale)]
    df["runs"] = t["runs"].astype(int)
    df["section"] = t["section"]
    df["source"] = "published (blksum notes, seed 002)"
    return df.sort_values(["system", "nbd", "digest", "qdepth"], ignore_index=True)


def seed003_disk_io() -> pd.DataFrame:
    """Seed 003: the Glances disk tables, one row per device and set-up (``sata-ssd-swap``,
    ``mdadm-raid0-swap``, ``zfs-swap``): ``read_bytes_s``, ``write_bytes_s`` (Glances' K/M suffixes
    are binary multiples), ``cpu_pct`` as printed."""
    t = _read_seed_csv(seeds_dir() / "seed003_disk_io.csv")
    df = t[["setup", "device", "section"]].copy()
    for d in ("read", "write"):
        df[f"{d}_bytes_s"] = t[f"{d}_per_s"].astype(float) * t[f"{d}_prefix"].map(_GLANCES_PREFIX)
    df["cpu_pct"] = t["cpu_pct"].astype(float)
    # whole devices only: partitions (nvme0n1p1) repeat their device's traffic
    df["partition"] = df["device"].str.contains(r"n\d+p\d+$")
    return df


def seed003_statements() -> pd.DataFrame:
    """Seed 003: every number quoted in its text, with ``number`` (float) and ``bound`` (>, <, ~ or empty)."""
    t = _read_seed_csv(seeds_dir() / "seed003_statements.csv")
    t["number"] = pd.to_numeric(t["value"], errors="coerce")
    return t


def seed003_value(setup: str, quantity: str) -> float:
    """One number seed 003 quotes (e.g. ``("zfs-vs-mdadm", "latency_ratio")``)."""
    s = seed003_statements()
    sel = s[(s["setup"] == setup) & (s["quantity"] == quantity)]
    if len(sel) != 1:
        raise KeyError(f"seed 003 {setup}/{quantity}: {len(sel)} rows match")
    return float(sel["number"].iloc[0])


def seed003_bcache() -> pd.DataFrame:
    """Seed 003: bcache's priority_stats with the vRAM cache (unused, clean, dirty, metadata %, average)."""
    t = _read_seed_csv(seeds_dir() / "seed003_bcache_priority_stats.csv")
    t["number"] = t["value"].astype(float)
    return t


#: Seed 003's transcribed tables, in the order the seed prints them, with what each one is.
SEED003_TABLES = (
    (
        "seed003_disk_io.csv",
        "Glances disk I/O tables of the three swap set-ups (per device; K and M are binary prefixes)",
    ),
    ("seed003_glances_summary.csv", "Glances task counts and set-up numbers of the vRAM-cached run"),
    ("seed003_glances_container.csv", "Glances container table of the vRAM-cached run"),
    ("seed003_glances_tasks.csv", "Glances task table of the vRAM-cached run (the Qrack benchmark and vramfs)"),
    ("seed003_bcache_priority_stats.csv", "bcache priority_stats of the vRAM cache"),
)


def seed003_tables() -> list[tuple[str, str, pd.DataFrame]]:
    """Seed 003's Glances and bcache tables as printed (file name, what it is, cells as text without
    the provenance columns, which name the seed file and the section in ``section``)."""
    out = []
    for name, what in SEED003_TABLES:
        t = _read_seed_csv(seeds_dir() / name)
        sections = ", ".join(dict.fromkeys(t["section"]))
        t = t.drop(columns=["seed", "locator", "section"])
        cols = list(t.columns)
        for i, c in enumerate(cols):  # a printed prefix or unit goes back next to its number: "338 M"
            if i and c.endswith(("_prefix", "_unit")):
                base = cols[i - 1]
                t[base] = (t[base] + " " + t[c]).str.strip()
                t = t.drop(columns=[c])
        if len(t) <= 2:  # one or two rows of many columns: a column per row reads better
            t = t.set_index(t.columns[0]).T.rename_axis("field").reset_index()
        out.append((name, f"{what} (section: {sections})", t))
    return out


# ------------------------------------------------------------------ seeds 000 and 001 ---
# Device-initiated studies (seed 000: cuda-qdepth; seed 001: cuda-iosize), transcribed into
# data/reference/seeds/seed000_*.csv and seed001_*.csv (numbers as printed; see the README there).

#: Multipliers of the printed units to plain numbers (M IOPS -> IOPS, KiB -> bytes).
_SEED_UNIT_SCALE = {"M IOPS": 1e6, "KiB": 1024, "B": 1, "bytes": 1}
#: Each study's seed file prefix.
CUDA_SEEDS = {"cuda_qdepth": "000", "cuda_iosize": "001"}


def _seed_number(value: str, unit: str) -> float:
    return float(Decimal(value) * Decimal(str(_SEED_UNIT_SCALE.get(unit, 1))))


def cuda_min_qdepth(study: str) -> pd.DataFrame:
    """The published minimum-queue-depth table of a device-initiated study ("cuda_qdepth": per
    ``nqueues``; "cuda_iosize": per ``iosize`` in bytes), with ``min_qdepth``, ``total_cuda_threads``
    (ints), ``reached`` (False where the seed prints "> N (not reached)": the number is then the top
    of the sweep, a lower bound) and the provenance columns."""
    if study not in CUDA_SEEDS:
        raise ValueError(f"cuda_min_qdepth: unknown study {study!r}; known: {', '.join(CUDA_SEEDS)}")
    t = _read_seed_csv(seeds_dir() / f"seed{CUDA_SEEDS[study]}_min_qdepth.csv")
    df = pd.DataFrame()
    if study == "cuda_qdepth":
        df["nqueues"] = t["nqueues"].astype(int)
    else:
        df["iosize"] = [int(_seed_number(v, u)) for v, u in zip(t["iosize"], t["iosize_unit"])]
    df["min_qdepth"] = t["min_qdepth"].astype(int)
    df["total_cuda_threads"] = t["total_cuda_threads"].astype(int)
    df["reached"] = t["qdepth_bound"] != ">"
    for col in ("seed", "section", "locator"):
        df[col] = t[col]
    return df


def cuda_statements(study: str) -> pd.DataFrame:
    """Every number a device-initiated seed quotes in its text, one row per quotation: the printed
    columns plus ``number`` (the value in plain units: "53.5" "M IOPS" -> 53 500 000) and, for
    seed 001, ``iosize_bytes``. A range ("44–45 GB/s") has ``value`` and ``value_high``."""
    if study not in CUDA_SEEDS:
        raise ValueError(f"cuda_statements: unknown study {study!r}; known: {', '.join(CUDA_SEEDS)}")
    t = _read_seed_csv(seeds_dir() / f"seed{CUDA_SEEDS[study]}_statements.csv")
    t["number"] = [_seed_number(v, u) for v, u in zip(t["value"], t["unit"])]
    if "value_high" in t:
        t["number_high"] = [_seed_number(v, u) if v else float("nan") for v, u in zip(t["value_high"], t["unit"])]
    if "iosize" in t:
        t["iosize_bytes"] = [int(_seed_number(v, u)) if v else None for v, u in zip(t["iosize"], t["iosize_unit"])]
    return t


def cuda_value(study: str, quantity: str, *, section: str | None = None, **where: str) -> float:
    """One number a device-initiated seed quotes, in plain units; ``where`` selects printed columns
    (e.g. ``nqueues="2", qdepth="128"``). Repeated quotations of the same number (caption, text,
    summary) are allowed as long as they agree."""
    s = cuda_statements(study)
    sel = s[s["quantity"] == quantity]
    if section is not None:
        sel = sel[sel["section"] == section]
    for col, val in where.items():
        if col not in sel:
            raise KeyError(f"{study}: no column {col!r} in the statements")
        sel = sel[sel[col] == str(val)]
    if sel.empty:
        raise KeyError(f"{study} {quantity} {where}: no statement matches")
    vals = set(sel["number"])
    if len(vals) != 1:
        raise KeyError(f"{study} {quantity} {where}: {len(vals)} different numbers match ({sorted(vals)})")
    return float(vals.pop())


def cuda_parameters(study: str) -> dict[str, list[int]]:
    """The sweep of a device-initiated seed's "Independent Variables" table, by variable name."""
    if study not in CUDA_SEEDS:
        raise ValueError(f"cuda_parameters: unknown study {study!r}; known: {', '.join(CUDA_SEEDS)}")
    t = _read_seed_csv(seeds_dir() / f"seed{CUDA_SEEDS[study]}_parameters.csv")
    return {var: [int(v) for v in g["value"]] for var, g in t.groupby("variable", sort=False)}


#: What the published device-initiated pages state about the GPU cost of their polling kernel (a revision
#: of xnvme/aisio later than 02b6c63; data/reference/README.md, "What polling costs the GPU").
POLLING_COST_FILE = "aisio-polling-cost.csv"


def polling_cost(experiment: str | None = None) -> pd.DataFrame:
    """Every number the published pages state about what the polling kernel costs the GPU (DCGM SM
    activity, warp-slot occupancy, DRAM activity, clocks), one row per number with ``quote`` (the text it
    stands in), ``section`` and ``source``; ``value`` as a float, ``nqueues``/``qdepth``/``iosize`` as
    nullable ints. `experiment` ("cuda-qdepth", "cuda-iosize") selects one page."""
    df = pd.read_csv(reference_dir() / POLLING_COST_FILE, dtype=str, keep_default_na=False)
    df["value"] = df["value"].astype(float)
    for col in ("nqueues", "qdepth", "iosize"):
        df[col] = pd.array([int(v) if v else None for v in df[col]], dtype="Int64")
    if experiment is not None:
        if experiment not in set(df["experiment"]):
            raise KeyError(f"polling_cost: no rows for {experiment!r}; known: {', '.join(sorted(set(df.experiment)))}")
        df = df[df["experiment"] == experiment].reset_index(drop=True)
    return df
