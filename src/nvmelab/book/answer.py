# SPDX-License-Identifier: BSD-3-Clause
"""The book's answer to its title question, side by side: what each initiator needs to reach each ceiling.

For each ceiling the seeds reach (the sixteen-drive roofline of 512-byte random reads; about 45 GB/s into
GPU memory at 4 KiB and at 64 KiB), one row per initiator (CPU threads, GPU threads): the threads, queues
and drives the fewest-resource published configuration used, what the initiator itself costs where a
source states it, the status of the numbers (coverage.STATUSES vocabulary) and their caveats. Rows of our
own measurements follow, each marked as ours. Every number is computed here from files under
``data/reference/`` and ``data/results/``; none is typed.

Key functions:
    rows()      the table: one dict per row (ceiling, initiator, resources, cost, status, source, caveat)
    unknowns()  what the table cannot say yet, one sentence each
    sources()   the data files the table reads (for the page footer)

Caveat: the CPU and GPU rows of one ceiling come from different experiments of the published evaluation
(different drive counts at 4 KiB; no CPU-initiated run at 64 KiB); the caveat column says so per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pandas as pd

from ..results import analysis, reference, status
from ..studies.cpu_submit import analysis as cpu_submit
from ..studies.tool_costs import analysis as tool_costs

#: The three ceilings, as the first column shows them.
CEILING_IOPS = "16-drive roofline of 512 B random reads"
CEILING_4K = "≈45 GB/s into GPU memory, 4 KiB reads"
CEILING_64K = "≈45 GB/s into GPU memory, 64 KiB reads"
#: Status words (the vocabulary of nvmelab.results.status).
RECORDS = status.published("per-run records at a commit")
SEED_TEXT = status.published("text of a seed")
REVISION_TEXT = status.published("text of a later revision")
#: Our GPU-lease runs drive emulated devices resident on the GPU: emulated, never measured on a drive.
OURS = status.EMULATED
COLUMNS = ["ceiling", "initiator", "threads", "queues", "drives", "initiator cost", "status", "caveat"]
#: The table as the book shows it: one heading row per ceiling, then per initiator these columns.
SHOWN = ["initiator", "what it took", "what the initiator costs", "status", "caveat"]


def shown(row: dict[str, str]) -> list[str]:
    """One row of the book's table: threads, queues and drives joined into "what it took"."""
    took = f"{row['threads']}; queues: {row['queues']}; drives: {row['drives']}"
    return [row["initiator"], took, row["initiator cost"], row["status"], row["caveat"]]


def _n(x: float) -> str:
    return f"{int(round(x)):,}"


@cache
def _cpu_iops_row() -> dict[str, str]:
    n, roof = cpu_submit.published_threads_to_roofline("upcie")
    pub = reference.published("cpu-initiated-upcie")
    ndevs, qd = int(pub["ndevs"].iloc[0]), int(pub["qdepth"].iloc[0])
    busy = reference.seed004_value("busy_poll_cpu_utilisation_per_logical_cpu")
    return {
        "ceiling": CEILING_IOPS,
        "initiator": "CPU (xnvmeperf + upcie, payload in host memory)",
        "threads": "none of the published runs" if n is None else f"{n} CPU threads",
        "queues": "–" if n is None else f"{n * ndevs} (one per thread per drive), depth {qd}",
        "drives": str(ndevs),
        "initiator cost": f"each thread polls: about {busy:.0f} % of a logical CPU (seed 004)",
        "status": RECORDS,
        "caveat": (
            f"fewest threads whose mean reaches {analysis.SATURATION_FRACTION:.0%} of the roofline in the "
            f"published core sweep ({reference.PUBLISHED_SOURCE}); host memory, not GPU memory"
        ),
    }


def polling_cost() -> pd.DataFrame:
    """The published GPU polling-kernel costs (reference.polling_cost), or an empty frame without the file."""
    if not (reference.reference_dir() / reference.POLLING_COST_FILE).is_file():
        return pd.DataFrame()
    return reference.polling_cost("cuda-qdepth")


def _gpu_cost(nqueues: int, qdepth: int) -> str:
    pc = polling_cost()
    if pc.empty:
        return "not stated by the seeds"
    parts = []
    for quantity, text in (("sm_active", "of the SMs active"), ("occupancy", "of the warp slots")):
        sel = pc[(pc["quantity"] == quantity) & (pc["nqueues"] == nqueues) & (pc["qdepth"] == qdepth)]
        if not sel.empty:
            parts.append(f"{float(sel['value'].iloc[0]):g} % {text}")
    return ", ".join(parts) + " (DCGM)" if parts else "not stated"


@cache
def _gpu_iops_row() -> dict[str, str]:
    mq = reference.cuda_min_qdepth("cuda_qdepth")
    reached = mq[mq["reached"]]
    best = reached[reached["total_cuda_threads"] == reached["total_cuda_threads"].min()]
    ndevs = int(reference.cuda_parameters("cuda_qdepth")["Number of devices"][0])
    configs = " or ".join(
        f"{int(r.nqueues) * ndevs} ({int(r.nqueues)} per drive, depth {int(r.min_qdepth)})" for r in best.itertuples()
    )
    first = best.iloc[0]
    cost = _gpu_cost(int(first["nqueues"]), int(first["min_qdepth"]))
    return {
        "ceiling": CEILING_IOPS,
        "initiator": "GPU threads (xnvmeperf cuda-run + upcie-cuda)",
        "threads": f"{_n(first['total_cuda_threads'])} CUDA threads",
        "queues": configs,
        "drives": str(ndevs),
        "initiator cost": cost + (f", at {int(first['nqueues'])} queues per drive" if "%" in cost else ""),
        "status": f"{SEED_TEXT} (threads); {REVISION_TEXT} (cost)" if "%" in cost else SEED_TEXT,
        "caveat": "one queue per drive never reaches it (seed 000); the per-run records are not published",
    }


@cache
def _pcie_cpu_row() -> dict[str, str]:
    pub = reference.published("pcie-bandwidth-saturation")
    at = pub[pub["iosize"] == 4096]
    return {
        "ceiling": CEILING_4K,
        "initiator": "CPU (xnvmeperf + upcie-cuda, payload peer-to-peer into GPU memory)",
        "threads": f"{int(at['ncpus'].iloc[0])} CPU thread",
        "queues": f"{int(at['ncpus'].iloc[0]) * int(at['ndevs'].iloc[0])} (one per drive), depth {int(at['qdepth'].iloc[0])}",
        "drives": str(int(at["ndevs"].iloc[0])),
        "initiator cost": "one polling CPU thread",
        "status": RECORDS,
        "caveat": (
            f"mean payload {cpu_submit.published_p2p_payload_gbps(4096):.1f} GB/s over {len(at)} repetitions; "
            f"{int(at['ndevs'].iloc[0])} drives, not sixteen: "
            "how the CPU side scales to the GPU rows' drive count is not measured"
        ),
    }


def _gpu_iosize_row(iosize: int, ceiling: str) -> dict[str, str]:
    mq = reference.cuda_min_qdepth("cuda_iosize")
    row = mq[mq["iosize"] == iosize].iloc[0]
    ndevs = int(reference.cuda_parameters("cuda_iosize")["Number of devices"][0])
    return {
        "ceiling": ceiling,
        "initiator": "GPU threads (xnvmeperf cuda-run + upcie-cuda)",
        "threads": f"{_n(row['total_cuda_threads'])} CUDA threads",
        "queues": f"{ndevs} (one per drive), depth {int(row['min_qdepth'])}",
        "drives": str(ndevs),
        "initiator cost": "not stated (the later revision shows a figure of SM activity, no numbers)",
        "status": SEED_TEXT,
        "caveat": "sixteen drives; the per-run records are not published",
    }


def _pcie_max_iosize() -> int:
    return int(reference.published("pcie-bandwidth-saturation")["iosize"].max())


def _cpu_64k_row() -> dict[str, str]:
    return {
        "ceiling": CEILING_64K,
        "initiator": "CPU",
        "threads": "unknown",
        "queues": "unknown",
        "drives": "–",
        "initiator cost": "unknown",
        "status": f"{status.NOT_TESTABLE} (no published CPU-initiated run at 64 KiB; no drives or GPU here)",
        "caveat": f"the published CPU-initiated runs into GPU memory stop at {_pcie_max_iosize():,} B",
    }


def _ours_gpu_row(df: pd.DataFrame, target: str, preset: str) -> dict[str, str] | None:
    from ..results import model
    from ..results import model_validation as mv

    if df.empty:
        return None
    per_target = analysis.aggregate_per_target(df, by=["nqueues", "qdepth"])
    main, _ = analysis.main_target(per_target, target)
    if main is None:
        return None
    ndevs = int(main.first["ndevs"])
    roof = ndevs * model.fit(mv.published_points()).dev_iops
    agg = main.agg.assign(threads=main.agg["nqueues"] * main.agg["qdepth"] * ndevs)
    reached = agg[agg["iops_mean"] >= analysis.SATURATION_FRACTION * roof]
    gpu = str(main.first.get("results_host") or "a lent GPU")
    flagged = int(main.agg["flagged"].sum()) if "flagged" in main.agg else 0
    if reached.empty:
        threads, queues = "none of the points swept reached it", "–"
    else:
        best = reached.sort_values(["threads", "nqueues"]).iloc[0]
        threads = f"{_n(best['threads'])} CUDA threads"
        queues = f"{int(best['nqueues']) * ndevs} ({int(best['nqueues'])} per drive at depth {int(best['qdepth'])})"
    return {
        "ceiling": f"{CEILING_IOPS}: our runs",
        "initiator": "GPU threads, ours (nvmelab cuda-run on gpu-emu://, profile pm1753)",
        "threads": threads,
        "queues": queues,
        "drives": f"{ndevs} emulated, resident on the same GPU",
        "initiator cost": "see the device-initiated chapters (co-running kernel)",
        "status": f"{OURS}, ours (profile pm1753 on the GPU; records {gpu}, preset {preset})",
        "caveat": "our engine against a GPU-resident emulator whose rates are the fitted published caps: "
        f"it tests the software path, not a drive; the emulator limited {flagged} of {len(main.agg)} points",
    }


def _ours_cpu_row(costs: pd.DataFrame, preset: str) -> dict[str, str] | None:
    """Our CPU row: each stack's CPU time per I/O measured here (study tool_costs: SPDK's tools and our driver on
    one served emulated controller) and the cores it would need for the roofline."""
    summ = tool_costs.summary(costs)
    cores = tool_costs.cores_for_roofline(summ) if not summ.empty else pd.DataFrame()
    if not cores.empty:  # the stacks that stand for published ones
        cores = cores[cores["stack"].isin(list(tool_costs.PUBLISHED_FOR))]
    if cores.empty:
        return None
    host = str(costs["results_host"].iloc[0])
    short = {s: s.split(" (")[0] for s in cores["stack"]}
    return {
        "ceiling": f"{CEILING_IOPS}: our runs",
        "initiator": "CPU threads, measured here (SPDK's bdevperf and spdk_nvme_perf, our driver)",
        "threads": "cores needed on this host: " + ", ".join(f"{short[r.stack]} {r.cores}" for r in cores.itertuples()),
        "queues": "one per core (derived)",
        "drives": "16 (derived from one served emulated controller, profile null)",
        "initiator cost": f"CPU time per I/O on {host}: "
        + ", ".join(f"{short[r.stack]} {r.ns_per_io:,.0f} ns" for r in cores.itertuples()),
        "status": f"{status.MEASURED} (per-I/O cost, host {host}, preset {preset}); the core counts are derived",
        "caveat": f"one core per stack; {_server_note(summ, list(cores['stack']))}; the counts assume perfect "
        "scaling over cores and drives (lower bounds) and this host's CPU, not the published server's",
    }


def _server_note(summ: pd.DataFrame, stacks: list[str]) -> str:
    """Whether the served controller could have set these stacks' rates at 512 B, QD 128 (its sweeps with work)."""
    busy = tool_costs.at(summ, 512, 128).set_index("stack").reindex(stacks).get("server_busy_fraction_mean")
    if busy is None or busy.isna().all():
        return "the server's sweep counts were not recorded"
    verdict = "it was waiting for them" if busy.max() < tool_costs.SERVER_BUSY_FLAG else "it may have set the pace"
    return f"the served controller found a new command on at most {busy.max():.0%} of its sweeps ({verdict})"


def rows(
    gpu_runs: pd.DataFrame | None = None,
    gpu_target: str = "",
    gpu_preset: str = "",
    cpu_costs: pd.DataFrame | None = None,
    cpu_preset: str = "",
) -> list[dict[str, str]]:
    """The answer table, published rows first, then ours: `gpu_runs` are our records of the device-initiated
    queue-depth study (studies.load_gpu_results), `gpu_target` that study's own target, `gpu_preset` their preset;
    `cpu_costs` our records of study tool_costs (each stack's CPU time per I/O), `cpu_preset` theirs."""
    out = [
        _cpu_iops_row(),
        _gpu_iops_row(),
        _pcie_cpu_row(),
        _gpu_iosize_row(4096, CEILING_4K),
        _cpu_64k_row(),
        _gpu_iosize_row(65536, CEILING_64K),
    ]
    cpu = None if cpu_costs is None or cpu_costs.empty else _ours_cpu_row(cpu_costs, cpu_preset)
    ours = None if gpu_runs is None or gpu_runs.empty else _ours_gpu_row(gpu_runs, gpu_target, gpu_preset)
    return out + [r for r in (cpu, ours) if r]


def unknowns() -> list[str]:
    """What the table cannot say yet."""
    return [
        "What the GPU threads cost at 4 KiB and 64 KiB, and what they cost a co-running application on real "
        "drives: the published text gives SM activity and warp-slot occupancy at 512 B only.",
        "Both initiators on the same drive count: the 4 KiB rows use four drives (CPU) and sixteen (GPU).",
        "The CPU initiator at 64 KiB; and the stacks' CPU cost per I/O on real drives, where the controller's "
        "doorbells and completion writes cost the host what an emulated controller cannot show.",
        "Any of it on drives here: this book's hosts have no NVMe drive, and a GPU only on a short lease.",
    ]


def sources(gpu_files: Sequence[Path] = ()) -> list[Path]:
    """The data files rows() reads (`gpu_files`: the files of the records passed as `gpu_runs`)."""
    ref = reference.reference_dir()
    files = [
        ref / "headline.csv",
        ref / reference.PUBLISHED_FILES["cpu-initiated-upcie"],
        ref / reference.PUBLISHED_FILES["pcie-bandwidth-saturation"],
        *reference.seed_files("000"),
        *reference.seed_files("001"),
        *reference.seed_files("004"),
        ref / "model-calibration.csv",
        *gpu_files,
    ]
    if (ref / reference.POLLING_COST_FILE).is_file():
        files.append(ref / reference.POLLING_COST_FILE)
    return sorted(set(files))
