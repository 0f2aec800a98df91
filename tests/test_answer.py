# SPDX-License-Identifier: BSD-3-Clause
"""The answer table (nvmelab.book.answer): every cell computed from the data, statuses from one vocabulary."""

from __future__ import annotations

import pandas as pd
import pytest

from nvmelab.book import answer
from nvmelab.results import reference
from nvmelab.studies.cpu_submit import analysis as cpu_submit


@pytest.fixture(autouse=True)
def _fresh():
    for f in (answer._cpu_iops_row, answer._gpu_iops_row, answer._pcie_cpu_row):
        f.cache_clear()
    yield
    for f in (answer._cpu_iops_row, answer._gpu_iops_row, answer._pcie_cpu_row):
        f.cache_clear()


def test_rows_cover_each_ceiling_with_both_initiators() -> None:
    rows = answer.rows()
    for ceiling in (answer.CEILING_IOPS, answer.CEILING_4K, answer.CEILING_64K):
        inits = [r["initiator"] for r in rows if r["ceiling"] == ceiling]  # published rows only
        assert any(i.startswith("CPU") for i in inits), (ceiling, inits)
        assert any(i.startswith("GPU") for i in inits), (ceiling, inits)
    assert all(set(answer.COLUMNS) <= set(r) for r in rows)


def test_every_status_comes_from_the_vocabulary() -> None:
    from nvmelab.book import coverage

    for r in answer.rows():
        word = r["status"].split(" (")[0].split(", ours")[0].split(" (threads)")[0]
        assert coverage.is_status(word), r


def test_cpu_threads_follow_the_published_records(monkeypatch: pytest.MonkeyPatch) -> None:
    first = answer._cpu_iops_row()
    n = int(first["threads"].split()[0])
    real = reference.published

    def fewer(name: str) -> pd.DataFrame:
        df = real(name)
        if name == "cpu-initiated-upcie":  # the saturating thread count's runs fall short: the next one counts
            df.loc[df["ncpus"] == n, "iops"] *= 0.5
        return df

    monkeypatch.setattr(reference, "published", fewer)
    monkeypatch.setattr(cpu_submit, "published", fewer)
    answer._cpu_iops_row.cache_clear()
    assert int(answer._cpu_iops_row()["threads"].split()[0]) > n


def test_gpu_rows_are_the_seed_tables() -> None:
    size = reference.cuda_min_qdepth("cuda_iosize").set_index("iosize")
    rows = {r["ceiling"]: r for r in answer.rows() if r["initiator"].startswith("GPU threads (xnvmeperf")}
    assert rows[answer.CEILING_4K]["threads"] == f"{int(size.loc[4096, 'total_cuda_threads']):,} CUDA threads"
    assert rows[answer.CEILING_64K]["threads"] == f"{int(size.loc[65536, 'total_cuda_threads']):,} CUDA threads"
    depth = reference.cuda_min_qdepth("cuda_qdepth")
    fewest = int(depth[depth["reached"]]["total_cuda_threads"].min())
    assert rows[answer.CEILING_IOPS]["threads"] == f"{fewest:,} CUDA threads"


def test_gpu_cost_needs_the_published_polling_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answer, "polling_cost", lambda: pd.DataFrame())
    row = answer._gpu_iops_row()
    assert row["initiator cost"] == "not stated by the seeds"
    assert row["status"] == answer.SEED_TEXT


def test_our_row_only_with_our_records() -> None:
    from nvmelab.studies import load_gpu_results, load_spec

    runs, preset, files = load_gpu_results("cuda_qdepth", "standard")
    target = load_spec("cuda_qdepth").target
    assert not any(r["status"].startswith(answer.OURS) for r in answer.rows())
    assert not any(r["status"].startswith(answer.OURS) for r in answer.rows(pd.DataFrame(), target, preset))
    if runs.empty:
        pytest.skip("no GPU records of cuda_qdepth committed")
    ours = [r for r in answer.rows(runs, target, preset) if r["status"].startswith(answer.OURS)]
    assert len(ours) == 1 and preset in ours[0]["status"]
    assert set(files) <= set(answer.sources(files))


def test_sources_exist() -> None:
    files = answer.sources()
    assert files and all(f.is_file() for f in files), [str(f) for f in files if not f.is_file()]


def test_the_shown_row_keeps_every_resource() -> None:
    for r in answer.rows():
        cells = answer.shown(r)
        assert len(cells) == len(answer.SHOWN)
        assert all(r[k] in cells[1] for k in ("threads", "queues", "drives")), cells


def _costs(host: str = "h1") -> pd.DataFrame:
    """Records of study tool_costs as the runner loads them: three stacks at 512 B, QD 128, two repetitions."""
    from nvmelab.studies.tool_costs import analysis as tool_costs

    rows = []
    for stack, iops in ((tool_costs.BDEVPERF, 2e6), (tool_costs.SPDK_PERF, 4e6), (tool_costs.NVMELAB, 8e6)):
        for rep, f in enumerate((0.99, 1.01)):
            rows.append(
                dict(
                    stack=stack,
                    iosize=512,
                    qdepth=128,
                    ncpus=1,
                    iops=iops * f,
                    cpu_usage=100.0,
                    server_cpu_usage=20.0,
                    repetition=rep,
                    run_key=f"{stack}-{rep}",
                    results_host=host,
                )
            )
    return pd.DataFrame(rows)


def test_our_cpu_row_derives_cores_from_the_measured_cost() -> None:
    costs = _costs()
    mine = [
        r
        for r in answer.rows(cpu_costs=costs, cpu_preset="standard")
        if r["initiator"].startswith("CPU threads, measured")
    ]
    assert len(mine) == 1
    row = mine[0]
    roof = reference.headline_value("cpu-initiated", "roofline_iops")
    # bdevperf: 2 M IOPS per core -> 500 ns per I/O -> roofline / 2 M cores, rounded up
    assert f"bdevperf {-(-roof // 2e6):.0f}" in row["threads"] and "bdevperf 500 ns" in row["initiator cost"]
    assert f"nvmelab {-(-roof // 8e6):.0f}" in row["threads"] and "h1" in row["initiator cost"]
    assert row["status"].startswith(answer.status.MEASURED) and "standard" in row["status"]
    assert not [r for r in answer.rows(cpu_costs=pd.DataFrame()) if r["initiator"].startswith("CPU threads, measured")]
