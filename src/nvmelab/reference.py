"""Published reference data (data/reference/) as pandas DataFrames.

Key functions:
    published(name)      AiSIO records ("cpu-initiated-upcie", "tool-comparison",
                         "pcie-bandwidth-saturation") in the same column layout as
                         nvmelab.analysis.to_frame gives for our records
    headline()           the headline numbers quoted in the published chapters
    headline_value(...)  one of them, as a number
    blksum_qdepth()      the blksum --queue-depth tables of seed 002
    data_root()          the repository's data/ folder

Caveat: these files are published results, never ours; rows carry
``source == PUBLISHED`` so that figures can say which is which. The folder is
found next to the package in a source checkout, or through ``NVMELAB_DATA``.
"""
from __future__ import annotations

import os
import re
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


def blksum_qdepth() -> pd.DataFrame:
    """Seed 002: blksum wall time per queue depth (system x NBD x digest), mean and hyperfine σ."""
    # "null" is a digest name here, not a missing value; only an empty threads cell is missing.
    df = pd.read_csv(reference_dir() / "blksum-qdepth.csv", keep_default_na=False,
                     na_values={"threads": [""]}, dtype={"system": str, "digest": str})
    df["source"] = "published (blksum notes)"
    return df
