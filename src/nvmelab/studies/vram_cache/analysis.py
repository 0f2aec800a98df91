# SPDX-License-Identifier: BSD-3-Clause
"""The vram_cache study's analysis (seed 003): summaries of the tier engine's records, striping, per-device
load, line states and the seed's findings set against ours (moved from nvmelab.results.analysis, which
keeps the aggregation every study shares)."""

from __future__ import annotations

from typing import Any

import pandas as pd

# --------------------------------------------------------------- vram_cache ---
# The tiered-store study (seed 003): records of the tier engine (nvmelab.engines.tier.engine).

#: An array whose busiest device moved at most this multiple of the least busy one's bytes is
#: called evenly loaded (the seed's sticks were within 0.3 % of each other).
BALANCED_SPREAD = 1.10


def _fraction_value(s: Any) -> float:
    from fractions import Fraction

    return float(Fraction(str(s)))


def vram_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and population std over repetitions of the ok runs, per configuration (rw, fraction,
    config, ndevs, cache, policy); ``fraction_value`` is the budget as a number, ``lo``/``hi`` the
    effective throughput ∓ one std."""
    ok = df[df["status"] == "ok"].copy() if "status" in df.columns else df.copy()
    ok["fraction_value"] = ok["fraction"].map(_fraction_value)
    keys = ["rw", "fraction", "fraction_value", "config", "config_key", "ndevs", "cache", "policy"]
    cols = [
        c
        for c in (
            "mibs",
            "device_mibs",
            "iops",
            "runtime_s",
            "hit_ratio",
            "unused",
            "clean",
            "dirty",
            "mean_request_bytes",
        )
        if c in ok.columns
    ]
    g = ok.groupby(keys, dropna=False)[cols]
    out = g.mean().add_suffix("_mean").join(g.std(ddof=0).add_suffix("_std")).reset_index()
    out["lo"] = out["mibs_mean"] - out["mibs_std"]
    out["hi"] = out["mibs_mean"] + out["mibs_std"]
    return out


def vram_per_device(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ok run and device: config, workload, fraction, ndevs, cache, repetition, dev,
    read_mibs, write_mibs."""
    rows = []
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    for r in ok.itertuples():
        for d in r.per_device:
            rows.append(
                {
                    "config": r.config,
                    "workload": r.rw,
                    "fraction": r.fraction,
                    "ndevs": r.ndevs,
                    "cache": r.cache,
                    "repetition": r.repetition,
                    "dev": d["dev"],
                    "read_mibs": d["read_mibs"],
                    "write_mibs": d["write_mibs"],
                }
            )
    return pd.DataFrame(rows)


def vram_striping(agg: pd.DataFrame) -> pd.DataFrame:
    """Runs without a cache, with ``speedup``: effective throughput over that of one device at the
    same workload and budget."""
    nc = agg[agg["cache"] == "none"].copy()
    one = nc[nc["ndevs"] == 1].set_index(["rw", "fraction"])["mibs_mean"]
    nc["speedup"] = [r.mibs_mean / one.get((r.rw, r.fraction), float("nan")) for r in nc.itertuples()]
    return nc


def vram_device_rates(dev: pd.DataFrame, ndevs: int | None = None) -> pd.DataFrame:
    """Mean read and write MiB/s per device of the largest array (or `ndevs`), per workload,
    budget and cache."""
    top = int(dev["ndevs"].max()) if ndevs is None else ndevs
    return (
        dev[dev["ndevs"] == top]
        .groupby(["workload", "fraction", "cache", "dev"])[["read_mibs", "write_mibs"]]
        .mean()
        .reset_index()
    )


def vram_device_spread(rates: pd.DataFrame) -> pd.DataFrame:
    """Per workload, budget and cache, the load spread over the array's devices in each direction:
    busiest device's MiB/s over the least busy one's (columns read, write; from vram_device_rates)."""
    g = rates.groupby(["workload", "fraction", "cache"])
    out = g["read_mibs"].max() / g["read_mibs"].min()
    return pd.DataFrame({"read": out, "write": g["write_mibs"].max() / g["write_mibs"].min()}).reset_index()


def vram_line_states(agg: pd.DataFrame, bcache: pd.DataFrame) -> pd.DataFrame:
    """Shares of unused, clean and dirty cache lines: ours (mean over each run, a row per configuration
    and budget, labelled by workload and configuration) and the seed's bcache reading (data/reference seed003_bcache), columns who, state, share."""
    ca = agg[agg["cache"] != "none"]
    states = ca.melt(
        id_vars=["config", "rw", "fraction"],
        value_vars=["unused_mean", "clean_mean", "dirty_mean"],
        var_name="state",
        value_name="share",
    )
    states["state"] = states["state"].str.replace("_mean", "")
    states["who"] = "ours: " + states["rw"] + ", " + states["config"].str.replace("RAID-0 ", "")  # every budget
    bc = bcache[bcache["stat"].isin(["unused", "clean", "dirty"])]
    seed = pd.DataFrame({"who": "seed 003: bcache on vRAM", "state": bc["stat"], "share": bc["number"] / 100.0})
    return pd.concat([states[["who", "state", "share"]], seed], ignore_index=True)


def verdict(ratios: Any, better: str = "faster than", worse: str = "slower than") -> str:
    """``better`` when every ratio is above 1, ``worse`` when every one is below, else a mixed phrase."""
    r = [float(x) for x in ratios]
    if not r:
        return "not measured against"
    if all(x > 1 for x in r):
        return better
    if all(x < 1 for x in r):
        return worse
    return f"sometimes {better.split()[0]}, sometimes {worse.split()[0]} {better.split(' ', 1)[1]}".strip()


def _stated(statements: pd.DataFrame, setup: str, quantity: str) -> float:
    sel = statements[(statements["setup"] == setup) & (statements["quantity"] == quantity)]
    if len(sel) != 1:
        raise KeyError(f"seed 003 {setup}/{quantity}: {len(sel)} rows match")
    return float(sel["number"].iloc[0])


def vram_seed_findings(
    agg: pd.DataFrame, dev: pd.DataFrame, disk: pd.DataFrame, statements: pd.DataFrame, bcache: pd.DataFrame
) -> dict[str, Any]:
    """Seed 003's conclusions set against our records (``vram_summary`` and ``vram_per_device`` tables).

    Returns scalars only (numbers and short verdict phrases) for the chapter's prose: the
    striping gain of the largest array over one device, the spread of per-device load, the
    cache's gain at equal memory budget per workload (with hit ratio and request size), its
    clean/dirty split, and the seed's own numbers for each claim, computed from its
    transcribed tables (data/reference/seeds/seed003_*.csv: ``disk`` = reference.seed003_disk_io(),
    ``statements`` = reference.seed003_statements(), ``bcache`` = reference.seed003_bcache()).
    Nothing here is typed in."""
    out: dict[str, Any] = {}
    nc = vram_striping(agg)
    top = int(nc["ndevs"].max())
    big = nc[nc["ndevs"] == top]
    out["ndevs"] = top
    out["stripe_gain_min"] = float(big["speedup"].min())
    out["stripe_gain_max"] = float(big["speedup"].max())
    for w, g in big.groupby("rw"):
        g = g.sort_values("fraction_value")
        out[f"stripe_gain_{w}_small"] = float(g["speedup"].iloc[0])
        out[f"stripe_gain_{w}_large"] = float(g["speedup"].iloc[-1])
        out[f"stripe_budget_{w}_small"] = str(g["fraction"].iloc[0])
        out[f"stripe_budget_{w}_large"] = str(g["fraction"].iloc[-1])
    # the seed: one SATA SSD against the mdadm array (MiB/s; Glances' M is binary)
    whole = disk[~disk["partition"]]
    sata = whole[(whole["setup"] == "sata-ssd-swap") & (whole["device"] == "sdb")].iloc[0]
    md0 = whole[(whole["setup"] == "mdadm-raid0-swap") & (whole["device"] == "md0")].iloc[0]
    mib = float(1 << 20)
    out["seed_sata_mibs"] = float(sata["read_bytes_s"] + sata["write_bytes_s"]) / mib
    out["seed_md0_mibs"] = float(md0["read_bytes_s"] + md0["write_bytes_s"]) / mib
    out["seed_md0_over_sata"] = out["seed_md0_mibs"] / out["seed_sata_mibs"]
    # balance over the array's devices
    sticks = whole[(whole["setup"] == "mdadm-raid0-swap") & whole["device"].str.startswith("nvme")]
    out["seed_sticks"] = int(len(sticks))
    out["seed_qubits"] = int(_stated(statements, "workload", "max_qubits"))
    out["seed_stick_read_min"] = float(sticks["read_bytes_s"].min()) / mib
    out["seed_stick_read_max"] = float(sticks["read_bytes_s"].max()) / mib
    out["seed_stick_spread"] = float(sticks["read_bytes_s"].max() / sticks["read_bytes_s"].min())
    # balance over the array's devices: reads and writes each, the verdict from both; per repetition too
    nc_dev = dev[dev["cache"] == "none"]
    spread = vram_device_spread(vram_device_rates(nc_dev, top))
    for k in ("read", "write"):
        out[f"stripe_spread_{k}_max"] = float(spread[k].max())
    out["stripe_spread_max"] = max(out["stripe_spread_read_max"], out["stripe_spread_write_max"])
    out["balanced_spread"] = BALANCED_SPREAD
    uneven = [k + "s" for k in ("read", "write") if out[f"stripe_spread_{k}_max"] > BALANCED_SPREAD]
    out["stripe_balance"] = (
        "not evenly loaded: " + " and ".join(uneven) + " spread more" if uneven else "evenly loaded, like the seed's"
    )
    by_rep = nc_dev.groupby("repetition") if "repetition" in nc_dev else [(0, nc_dev)]
    reps = pd.concat(vram_device_spread(vram_device_rates(g, top)) for _, g in by_rep)
    both = reps.groupby(["workload", "fraction", "cache"])[["read", "write"]]
    out["stripe_spread_rep_diff"] = round(float((both.max() - both.min()).max().max()), 12)  # between repetitions
    run = agg["mibs_std"] / agg["mibs_mean"] if "mibs_std" in agg else pd.Series([float("nan")])
    out["run_spread_max_pct"] = 100 * float(run.max())  # run to run: the largest std over mean of a configuration
    # ZFS against mdadm in the seed's own tables (whole devices only)
    zfs = whole[(whole["setup"] == "zfs-swap") & whole["device"].str.startswith("nvme")]
    out["seed_zfs_read_ratio"] = float(sticks["read_bytes_s"].mean() / zfs["read_bytes_s"].mean())
    out["seed_zfs_write_ratio"] = float(sticks["write_bytes_s"].mean() / zfs["write_bytes_s"].mean())
    out["seed_zfs_latency_ratio"] = _stated(statements, "zfs-vs-mdadm", "latency_ratio")
    out["seed_iowait_mdadm"] = _stated(statements, "mdadm-raid0-swap", "io_wait")
    out["seed_iowait_zfs"] = _stated(statements, "zfs-swap", "io_wait")
    # the cache at equal budget, per workload
    host = agg[agg["cache"] == "host"]
    cmp = host.merge(
        nc[nc["ndevs"] == host["ndevs"].max()][["rw", "fraction", "mibs_mean", "mean_request_bytes_mean"]],
        on=["rw", "fraction"],
        suffixes=("", "_nocache"),
    )
    cmp["gain"] = cmp["mibs_mean"] / cmp["mibs_mean_nocache"]
    cmp["req_ratio"] = cmp["mean_request_bytes_mean"] / cmp["mean_request_bytes_mean_nocache"]
    out["cache_gain_min"] = float(cmp["gain"].min()) if len(cmp) else None
    out["cache_gain_max"] = float(cmp["gain"].max()) if len(cmp) else None
    out["cache_change_min_pct"] = 100 * float((cmp["gain"] - 1).abs().min()) if len(cmp) else None  # vs run spread
    for w, g in cmp.groupby("rw"):
        out[f"cache_verdict_{w}"] = verdict(g["gain"])
        out[f"cache_gain_{w}_min"] = float(g["gain"].min())
        out[f"cache_gain_{w}_max"] = float(g["gain"].max())
        best = g.loc[g["gain"].idxmax()]
        out[f"cache_best_budget_{w}"] = str(best["fraction"])
        out[f"cache_hit_{w}_min"] = float(g["hit_ratio_mean"].min())
        out[f"cache_hit_{w}_max"] = float(g["hit_ratio_mean"].max())
        out[f"cache_req_{w}_min"] = float(g["req_ratio"].min())
        out[f"cache_req_{w}_max"] = float(g["req_ratio"].max())
        out[f"cache_req_verdict_{w}"] = verdict(g["req_ratio"], "larger than", "smaller than")
        out[f"cache_dirty_{w}_pct"] = 100 * float(g["dirty_mean"].mean())
        out[f"cache_clean_{w}_pct"] = 100 * float(g["clean_mean"].mean())
    bc = bcache.set_index("stat")["number"]
    for k in ("unused", "clean", "dirty"):
        out[f"seed_bcache_{k}_pct"] = float(bc[k])
    return out


def vram_gpu_status(agg: pd.DataFrame, here_ok: bool, here_why: str) -> str:
    """One sentence on the GPU-memory cache: whether the records hold runs of it, and whether this
    host could make them (``here_ok``, ``here_why`` from nvmelab.engines.tier.gpu_available)."""
    n = int((agg["cache"] == "gpu").sum()) if "cache" in agg.columns else 0
    if n:
        return f"the records hold {n} GPU-memory cache configuration(s), shown beside the host-memory ones"
    here = f"this host has one ({here_why})" if here_ok else f"this host has none either ({here_why})"
    return "the records hold no GPU-memory cache runs: the host that made them had no usable GPU, and " + here
