# SPDX-License-Identifier: BSD-3-Clause
"""Loaders of the seed 002/003 transcriptions (nvmelab.results.reference): units converted, nothing lost.

The transcriptions themselves are checked against the seed text by tests/test_reference_seeds.py;
here the loaders must convert what is printed (ms or s; Glances' K/M suffixes) without
changing a digit, and keep every table row.
"""

from __future__ import annotations

import csv

import pytest

from nvmelab.results import reference


def _rows(name: str) -> list[dict]:
    with open(reference.seeds_dir() / name, newline="") as f:
        return list(csv.DictReader(f))


def test_seed002_eight_tables_of_six_depths_in_seconds() -> None:
    b = reference.blksum_qdepth()
    assert len(b) == 48
    assert b.groupby(["system", "io", "digest"]).size().eq(6).all()
    assert sorted(set(b["qdepth"])) == [1, 2, 4, 8, 16, 32]
    # printed in ms (laptop, file, null, Q1: 762.6 ms ± 21.8 ms, user 134.0 ms, system 812.6 ms)
    r = b[(b.system == "laptop") & (b.io == "file") & (b.digest == "null") & (b.qdepth == 1)].iloc[0]
    assert (r.mean_s, r.std_s, r.user_s, r.system_s, r.min_s, r.max_s) == (
        0.7626,
        0.0218,
        0.134,
        0.8126,
        0.7266,
        0.8083,
    )
    # printed in s, with NBD
    r = b[(b.system == "server") & (b.io == "nbd") & (b.digest == "sha256") & (b.qdepth == 1)].iloc[0]
    assert (r.mean_s, r.std_s, r.user_s, r.system_s, r.threads, r.nbd) == (8.425, 0.088, 20.644, 3.933, 16, 1)
    assert b[b.digest == "null"]["threads"].isna().all()


def test_seed002_every_transcribed_row_is_loaded() -> None:
    n = sum(len(_rows(f.name)) for f in reference.seed_files("002") if "summary" not in f.name)
    assert n == len(reference.blksum_qdepth())


def test_seed003_disk_io_converts_glances_suffixes() -> None:
    d = reference.seed003_disk_io()
    assert len(d) == len(_rows("seed003_disk_io.csv"))
    md0 = d[(d.setup == "mdadm-raid0-swap") & (d.device == "md0")].iloc[0]
    assert md0.read_bytes_s == 475 * 2**20 and md0.write_bytes_s == 481 * 2**20
    sda = d[(d.setup == "mdadm-raid0-swap") & (d.device == "sda")].iloc[0]
    assert sda.read_bytes_s == 18 * 2**10
    sticks = d[(d.setup == "zfs-swap") & d.device.str.startswith("nvme")]
    assert sticks["partition"].sum() == 14 and (~sticks["partition"]).sum() == 7


def test_seed003_statements_and_bcache() -> None:
    assert reference.seed003_value("zfs-vs-mdadm", "latency_ratio") == 18
    s = reference.seed003_statements()
    assert s.loc[(s.setup == "zfs-vs-mdadm") & (s.quantity == "swap_latency_ratio"), "bound"].item() == ">"
    with pytest.raises(KeyError):
        reference.seed003_value("zfs-swap", "no-such-quantity")
    bc = reference.seed003_bcache().set_index("stat")["number"]
    assert (bc["unused"], bc["clean"], bc["dirty"]) == (6, 71, 22)


def test_hyperfine_summary_and_seed_layout() -> None:
    import math

    import pandas as pd

    from nvmelab.studies.blksum_qdepth import analysis as blksum_qdepth

    runs = pd.DataFrame(
        {
            "host": "h",
            "tool": "nvmelab-blksum",
            "digest": "null",
            "backend": "psync",
            "ncpus": 2,
            "qdepth": [1, 1, 1, 2, 2],
            "runtime_s": [1.0, 2.0, 3.0, 0.5, 0.7],
            "user_s": [0.1, 0.2, 0.3, 0.1, 0.1],
            "system_s": [0.4, 0.5, 0.6, 0.2, 0.2],
        }
    )
    hf = blksum_qdepth.hyperfine_summary(runs)
    q1 = hf[hf.qdepth == 1].iloc[0]
    assert (q1.mean_s, q1.std_s, q1.min_s, q1.max_s, q1.runs) == (2.0, 1.0, 1.0, 3.0, 3)  # sample σ, as hyperfine
    assert math.isclose(q1.user_s, 0.2) and math.isclose(q1.system_s, 0.5)
    t = blksum_qdepth.seed_layout(hf, reference.blksum_qdepth(), "null", pm=".3f")
    assert list(t.index) == [1, 2, 4, 8, 16, 32]
    groups = list(dict.fromkeys(a for a, _ in t.columns))
    assert groups == ["seed: laptop, file", "seed: server, file", "ours: psync, 2 threads"]
    assert t.loc[1, ("seed: laptop, file", "mean_pm_std_s")] == "0.763 ± 0.022"
    assert t.loc[1, ("ours: psync, 2 threads", "mean_pm_std_s")] == "2.000 ± 1.000"
    assert pd.isna(t.loc[4, ("ours: psync, 2 threads", "user_s")])  # no run at Q4: empty, not invented


def test_blksum_speedups_ours_beside_the_seeds() -> None:
    import pandas as pd

    from nvmelab.studies.blksum_qdepth import analysis as blksum_qdepth

    agg = pd.DataFrame(
        {"digest": "null", "io": "psync", "threads": 2, "qdepth": [1, 2, 4], "runtime_s_mean": [2.0, 1.0, 4.0]}
    )
    both = blksum_qdepth.blksum_speedups(agg, reference.blksum_qdepth())
    ours = both[both.source == "ours"].set_index("qdepth")["speedup"]
    assert list(ours) == [1.0, 2.0, 0.5] and set(both[both.source == "ours"]["series"]) == {"ours: psync, 2 thr"}
    seed = both[both.source != "ours"]
    assert {"seed: laptop (file)", "seed: server (NBD)"} <= set(seed["series"])
    assert (seed[seed.qdepth == 1]["speedup"] == 1.0).all()
    best = blksum_qdepth.blksum_best(agg, reference.blksum_qdepth())
    mine = best[best.source == "ours"].iloc[0]
    assert (mine.qdepth, mine.speedup) == (2, 2.0)


def test_seed002_printed_keeps_the_eight_tables_as_printed() -> None:
    tables = reference.seed002_printed()
    assert len(tables) == 8
    for title, t in tables:
        assert list(t.columns) == ["qdepth", "mean", "sigma", "user", "system", "min", "max", "unit", "runs"]
        assert list(t["qdepth"]) == ["1", "2", "4", "8", "16", "32"] and set(t["unit"]) <= {"ms", "s"}
        assert ("NBD" in title) != ("file read directly" in title)
    first = dict(tables[0][1].iloc[0])
    assert (first["mean"], first["sigma"], first["unit"]) == ("762.6", "21.8", "ms")  # digits as the seed prints
