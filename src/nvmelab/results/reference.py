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
    data_root()          the repository's data/ folder

Caveat: these files are published results, never ours; rows carry
``source == PUBLISHED`` so that figures can say which is which. The folder is
found next to the package in a source checkout, or through ``NVMELAB_DATA``.
"""
from __future__ import annotations

import os
import re
from decimal import Decimal
from functools import lru_cache
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
    """The data/ folder: $NVMELAB_DATA, else the one of the source checkout this package is in."""
    env = os.environ.get("NVMELAB_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "data" / "reference"
        if cand.is_dir():
            return parent / "data"
    raise FileNotFoundError("data/reference/ not found next to the nvmelab package; set NVMELAB_DATA to the data folder")


def reference_dir() -> Path:
    return data_root() / "reference"


@lru_cache(maxsize=None)
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
    df["stack"] = df["tool"] + " + " + df["backend"]
    return df


def published(name: str) -> pd.DataFrame:
    """The published AiSIO records of one experiment, one row per run and repetition."""
    return _published(name).copy()


def headline() -> pd.DataFrame:
    """The headline numbers of the published chapters (value kept as text; see `headline_value`)."""
    return pd.read_csv(reference_dir() / "headline.csv", dtype={"value": str})


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


def blksum_qdepth() -> pd.DataFrame:
    """Seed 002: blksum time per queue depth, one row per hyperfine benchmark of the eight tables
    (system laptop|server x nbd 0|1 x digest null|sha256). Times in seconds (``mean_s``, ``std_s`` =
    hyperfine's σ, ``user_s``, ``system_s``, ``min_s``, ``max_s``), converted from the printed unit."""
    files = [f for f in seed_files("002") if f.name != "seed002_summary.csv"]
    t = pd.concat([_read_seed_csv(f) for f in files], ignore_index=True)
    scale = t["unit"].map(_TIME_UNIT_S)
    if scale.isna().any():
        raise ValueError(f"seed 002: unknown time unit(s) {sorted(set(t.loc[scale.isna(), 'unit']))}")
    df = pd.DataFrame({
        "system": t["machine"], "nbd": (t["io"] == "nbd").astype(int), "io": t["io"], "digest": t["digest"],
        "threads": pd.to_numeric(t["threads"].replace("", None)), "qdepth": t["qdepth"].astype(int),
    })
    for col, out in (("mean", "mean_s"), ("sigma", "std_s"), ("user", "user_s"), ("system", "system_s"),
                     ("min", "min_s"), ("max", "max_s")):
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
