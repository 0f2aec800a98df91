# SPDX-License-Identifier: BSD-3-Clause
"""The blksum_qdepth study's analysis (seed 002): summaries of the blksum engine's records, the seed's
hyperfine layout, speedups over queue depth 1 and the best configurations (moved from
nvmelab.results.analysis, which keeps the aggregation every study shares)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ...results.analysis import aggregate

# ------------------------------------------------------------ blksum_qdepth ---
# The block-image checksum study (seed 002): records of the blksum engine (nvmelab.engines.blksum).

#: Columns of a hyperfine table, as the seed prints them (time columns in seconds here).
HYPERFINE_COLUMNS = ("mean_s", "std_s", "user_s", "system_s", "min_s", "max_s")


def blksum_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and population std of runtime and MiB/s per (host, tool, digest, io, threads, qdepth);
    adds ``series`` ("psync, 2 thread(s)") and ``lo``/``hi`` (mean ∓ one std) for error bars."""
    by = [c for c in ("host", "tool", "digest", "backend", "ncpus", "qdepth", "image_bytes") if c in df.columns]
    agg = aggregate(df, by=by, metrics=("runtime_s", "mibs")).rename(columns={"backend": "io", "ncpus": "threads"})
    if not agg.empty:
        agg["series"] = agg["io"].astype(str) + ", " + agg["threads"].astype(str) + " thread(s)"
        agg["lo"] = agg["runtime_s_mean"] - agg["runtime_s_std"]
        agg["hi"] = agg["runtime_s_mean"] + agg["runtime_s_std"]
    return agg


def hyperfine_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Our runs summarised the way hyperfine prints a benchmark, per (tool, digest, io, threads,
    qdepth): mean, σ (sample standard deviation, ddof=1, as hyperfine's), mean user and system
    CPU time, min, max and the number of runs. Records without CPU times give NaN there."""
    d = df.rename(columns={"backend": "io", "ncpus": "threads"}).copy()
    for c in ("user_s", "system_s"):
        if c not in d.columns:
            d[c] = float("nan")
    by = [c for c in ("host", "tool", "digest", "io", "threads", "qdepth") if c in d.columns]
    g = d.groupby(by, dropna=False)
    out = g["runtime_s"].agg(mean_s="mean", std_s=lambda x: x.std(ddof=1), min_s="min", max_s="max", runs="count")
    out["user_s"] = g["user_s"].mean()
    out["system_s"] = g["system_s"].mean()
    return out.reset_index()[by + list(HYPERFINE_COLUMNS) + ["runs"]]


def seed_layout(
    ours: pd.DataFrame, seed: pd.DataFrame, digest: str, *, io: str = "file", pm: str | None = None
) -> pd.DataFrame:
    """One table per digest in the seed's layout: a row per queue depth, and for each source (the
    seed's laptop and server with ``io`` = file or nbd, then each of our series) the columns mean,
    σ, user and system in seconds. ``ours`` is hyperfine_summary() of our records (one host).
    With ``pm`` (a format spec such as ".3f"), mean and σ become one text column "mean ± σ", as
    hyperfine prints them."""
    cols = ["mean_s", "std_s", "user_s", "system_s"]
    parts = {}
    for machine, g in seed[(seed["digest"] == digest) & (seed["io"] == io)].groupby("system"):
        thr = g["threads"].dropna()
        label = f"seed: {machine}, {'NBD' if io == 'nbd' else 'file'}" + (
            f", {int(thr.iloc[0])} threads" if len(thr) else ""
        )
        parts[label] = g.set_index("qdepth")[cols]
    for (io_o, thr), g in ours[ours["digest"] == digest].groupby(["io", "threads"]):
        parts[f"ours: {io_o}, {int(thr)} thread{'s' if int(thr) != 1 else ''}"] = g.set_index("qdepth")[cols]
    if not parts:
        raise ValueError(f"no seed or own rows for digest {digest!r}")
    if pm:
        for k, t in parts.items():
            t = t.copy()
            t.insert(
                0,
                "mean_pm_std_s",
                [f"{m:{pm}} ± {sd:{pm}}" if sd == sd else f"{m:{pm}}" for m, sd in zip(t["mean_s"], t["std_s"])],
            )
            parts[k] = t.drop(columns=["mean_s", "std_s"])
    table = pd.concat(parts, axis=1).sort_index()
    table.index.name = "qdepth"
    return table


def speedup_over_q1(agg: pd.DataFrame, series: Sequence[str], mean: str = "runtime_s_mean") -> pd.DataFrame:
    """time(Q=1) / time(Q) within each series (Q1 itself is 1.0); rows without a Q1 point are dropped."""
    series = list(series)
    rows = []
    for _, g in agg.groupby(series, dropna=False):
        q1 = g.loc[g["qdepth"] == 1, mean]
        if q1.empty:
            continue
        g = g.copy()
        g["speedup"] = float(q1.iloc[0]) / g[mean]
        rows.append(g)
    return pd.concat(rows, ignore_index=True) if rows else agg.assign(speedup=pd.Series(dtype=float))


def published_speedups(seed: pd.DataFrame) -> pd.DataFrame:
    """The seed's laptop/server tables (``seed`` = reference.blksum_qdepth(), seed 002) as speed-up
    over Q1."""
    ref = seed.assign(series=seed["system"] + (seed["nbd"].astype(int).map({0: " (file)", 1: " (NBD)"})))
    return speedup_over_q1(ref, ["system", "nbd", "digest"], mean="mean_s")


def blksum_speedups(agg_ours: pd.DataFrame, seed: pd.DataFrame) -> pd.DataFrame:
    """Ours (blksum_summary of our tool) and the seed's (``seed`` = reference.blksum_qdepth())
    speed-ups over Q1 in one long table: digest, qdepth, speedup, series ("ours: psync, 2 thr" /
    "seed: laptop (file)"), source."""
    ours = speedup_over_q1(agg_ours, ["digest", "io", "threads"])
    ours["series"] = "ours: " + ours["io"].astype(str) + ", " + ours["threads"].astype(str) + " thr"
    pub = published_speedups(seed)
    pub["series"] = "seed: " + pub["series"]
    cols = ["digest", "qdepth", "speedup", "series"]
    return pd.concat(
        [ours[cols].assign(source="ours"), pub[cols].assign(source="published (seed 002)")], ignore_index=True
    )


def _ratio_spread(g: pd.DataFrame, best: pd.Series, col: str, best_col: str | None = None) -> float:
    """One std of time(Q1) / time(best) from the runs: the two relative stds added in quadrature."""
    q1 = g[g["qdepth"] == 1]
    if q1.empty or f"{col}_std" not in g:
        return float("nan")
    m1, s1 = float(q1[f"{col}_mean"].iloc[0]), float(q1[f"{col}_std"].iloc[0])
    mb = float(best[best_col or f"{col}_mean"])
    sb = float(g.loc[g["qdepth"] == best["qdepth"], f"{col}_std"].iloc[0])
    return (m1 / mb) * ((s1 / m1) ** 2 + (sb / mb) ** 2) ** 0.5


def blksum_best(agg_ours: pd.DataFrame, seed: pd.DataFrame) -> pd.DataFrame:
    """The fastest queue depth per series, ours and the seed's, with its gain over Q1:
    source, digest, series, qdepth, time_s, speedup (time(Q1) / time(best)) and spread (one std of
    the gain from the runs' spread; the seed's σ is hyperfine's)."""
    rows = []
    for (digest, io, thr), g in agg_ours.groupby(["digest", "io", "threads"]):
        best = g.loc[g["runtime_s_mean"].idxmin()]
        q1 = g.loc[g["qdepth"] == 1, "runtime_s_mean"]
        rows.append(
            {
                "source": "ours",
                "digest": digest,
                "series": f"{io}, {int(thr)} thread(s)",
                "qdepth": int(best["qdepth"]),
                "time_s": float(best["runtime_s_mean"]),
                "mibs": float(best.get("mibs_mean", float("nan"))),
                "speedup": float(q1.iloc[0]) / float(best["runtime_s_mean"]) if len(q1) else float("nan"),
                "spread": _ratio_spread(g, best, "runtime_s"),
            }
        )
    for (system, io, digest), g in seed.groupby(["system", "io", "digest"]):
        best = g.loc[g["mean_s"].idxmin()]
        q1 = g.loc[g["qdepth"] == 1, "mean_s"]
        thr = best.get("threads")
        rows.append(
            {
                "source": "seed",
                "digest": digest,
                "series": f"{system}, {'NBD' if io == 'nbd' else 'file'}"
                + (f", {int(thr)} threads" if thr == thr and thr is not None else ""),
                "qdepth": int(best["qdepth"]),
                "time_s": float(best["mean_s"]),
                "mibs": float("nan"),
                "speedup": float(q1.iloc[0]) / float(best["mean_s"]) if len(q1) else float("nan"),
                "spread": _ratio_spread(g.rename(columns={"mean_s": "x_mean", "std_s": "x_std"}), best, "x", "mean_s"),
            }
        )
    return pd.DataFrame(rows)


def blksum_host_load(ours: pd.DataFrame) -> dict[str, float]:
    """What the host used beside our measured client, per read mode (percent of one CPU, medians
    over the runs): in file mode that is background; in NBD mode it is mostly the qemu-nbd the
    study started, part of the measured path, so its share is that less the file-mode background.
    Empty without host_cpu_usage in the records."""
    if "host_cpu_usage" not in ours.columns:
        return {}
    d = ours.assign(beside=ours["host_cpu_usage"] - ours["cpu_usage"]).dropna(subset=["beside"])
    out = {}
    for m, g in d.groupby(d["mode"] if "mode" in d.columns else pd.Series("file", index=d.index)):
        out[f"{m}_beside_median"] = float(g["beside"].median())
        out[f"{m}_beside_max"] = float(g["beside"].max())
        out[f"{m}_client_median"] = float(g["cpu_usage"].median())
    if "nbd_beside_median" in out and "file_beside_median" in out:
        out["nbd_server_median"] = out["nbd_beside_median"] - out["file_beside_median"]
    return out


def profile_share(prof: pd.DataFrame, mode: str, digest: str, part: str, image: str = "dense") -> tuple[float, float]:
    """The smallest and largest share (%) of the CPU samples the profile's `part` (a prefix of its name: "hash",
    "copies", "NBD", ...) took over the runs of one mode, digest and image (blksum.load_profile's frame)."""
    v = prof[(prof["mode"] == mode) & (prof["digest"] == digest) & (prof["image"] == image)]
    v = v[v["part"].str.startswith(part)]["pct"]
    return float(v.min()), float(v.max())
