# SPDX-License-Identifier: BSD-3-Clause
"""The three completion-matching modes (src/nvme/nvme_gpuq_match.h) through the CPU stand-in of cuda-run on the
CPU emulator, with the fault-model keys of the target URI (err_every, err_status, ooo_win): every mode correct in
order; out of order positional reap hands commands the statuses of others (counted) while cid and scan do not;
scan reads more CQ bytes per completion; the missing-fence model is caught by the SQE read-back, and without the
read-back it corrupts positional runs. Also the run parameter ``match`` of cuda-run's table and the URI errors."""

from __future__ import annotations

import pytest

from nvmelab.engines import gpu, gpu_standin
from nvmelab.results import records

# a quarter of the LBAs fail (Unrecovered Read Error): the expected status of every command is known
BASE = "gpu-emu://?profile=null&ndev=1&err_every=4"
KW = dict(iosize=512, qdepth=32, nqueues=2, runtime=1.0, warmup=0.0, rounds=40, seed=3)


def _run(target: str = BASE, **kw) -> dict:
    rec = gpu_standin.run_cuda_standin(target=target, **{**KW, **kw})
    records.validate(rec)
    return rec


@pytest.mark.parametrize("mode", ["cid", "positional", "scan"])
def test_in_order_every_mode_hands_each_command_its_status(mode):
    m = _run(match=mode)["match"]
    assert m["mode"] == mode and m["completions"] == 40 * 2 * 32
    assert m["expected_errors"] > 0  # the errors are there to be misattributed, and they are not
    assert m["misattributed"] == 0 and m["stale"] == 0


def test_out_of_order_positional_misattributes_cid_and_scan_do_not():
    target = BASE + "&ooo_win=8"
    got = {mode: _run(target, match=mode)["match"] for mode in ("cid", "positional", "scan")}
    assert got["cid"]["misattributed"] == 0 and got["scan"]["misattributed"] == 0
    assert got["positional"]["misattributed"] > 0  # detected, not silent
    assert got["positional"]["foreign"] > 0 and got["cid"]["foreign"] > 0  # both met them out of order
    # the same completions in the same order for every mode (same seed): the errors are the same
    assert got["cid"]["expected_errors"] == got["positional"]["expected_errors"] == got["scan"]["expected_errors"]


def test_scan_reads_more_cq_bytes_per_completion_than_cid():
    cid = _run(match="cid")["match"]
    scan = _run(match="scan")["match"]
    assert cid["looks_per_completion"] >= 1.0
    assert scan["cq_bytes_per_completion"] > 2 * cid["cq_bytes_per_completion"]


def test_missing_fence_is_caught_by_the_sq_readback():
    with pytest.raises(OSError, match="read back"):
        _run(match="cid", unordered=4, fence=False)
    # with the fence the late stores are ordered: a clean run
    assert _run(match="cid", unordered=4, fence=True)["match"]["misattributed"] == 0


def test_missing_fence_without_readback_corrupts_a_positional_run():
    """The study subject: no fence, no read-back. The controller fetches SQEs that have not landed (last
    pass's commands); positional reap hands their statuses to this round's commands."""
    target = "gpu-emu://?profile=null&ndev=1&err_every=2"
    m = _run(target, match="positional", unordered=4, fence=False, sq_readback=False, nqueues=1)["match"]
    assert m["misattributed"] > 0 and m["foreign"] > 0
    # cid match notices the stale CIDs instead of handing their statuses on
    with pytest.raises(OSError, match="not outstanding"):
        _run(target, match="cid", unordered=4, fence=False, sq_readback=False, nqueues=1)


def test_bad_fault_keys_and_modes_are_named():
    with pytest.raises(ValueError, match="err_status"):
        _run("gpu-emu://?profile=null&ndev=1&err_every=4&err_status=bogus")
    with pytest.raises(ValueError, match="ooo_win"):
        _run("gpu-emu://?profile=null&ndev=1&ooo_win=x")
    with pytest.raises(ValueError, match="match"):
        _run(match="bam")


def test_match_is_a_cuda_run_parameter():
    p = {q["name"]: q for q in gpu.params()}["match"]
    assert p["type"] == "match" and p["default"] == "cid"
    gpu.check_params("gpu-emu://?profile=null", match="scan")
    with pytest.raises(ValueError, match="match"):
        gpu.check_params("gpu-emu://?profile=null", match="bam")


def test_the_study_analysis_reads_match_blocks_from_records_and_frames():
    from nvmelab.results import analysis
    from nvmelab.studies.cuda_match import analysis as matching

    recs = gpu_standin.match_grid(qdepths=(8,), windows=(0, 8), rounds=30, err_every=4)
    for rows in (recs, analysis.to_frame(recs)):  # records as dicts, and as the loader's frame
        tab = matching.summary(matching.frame(rows))
        assert len(tab) == 2 * len(matching.MODES)
        bad = tab.set_index(["order", "mode"]).misattributed_per_k
        assert bad[("in order", "positional")] == 0 and bad[("out of order (window 8)", "positional")] > 0
        assert bad[("out of order (window 8)", "cid")] == 0 and bad[("out of order (window 8)", "scan")] == 0
    assert matching.chart(tab, "t").to_dict()["vconcat"]
    f = matching.findings(tab)
    assert f["inorder_misattributed"] == 0 and f["ooo_id_misattributed"] == 0
    assert f["ooo_positional_per_k_min"] > 0 and f["inorder_commands"] > 0 and f["qdepths"] == [8]
    assert f["scan_over_cid_min"] >= 1  # every thread of scan reads the round's entries until it finds its own


# ------------------------------------------------------------------------------------------ GPU (lease)
GPU_EMU = "gpu-emu://?ndev=1&profile=null&err_every=4"


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["cid", "positional", "scan"])
def test_gpu_kernel_every_mode_correct_in_order(mode):
    rec = gpu.run_cuda(target=GPU_EMU, qdepth=64, nqueues=2, rounds=50, match=mode)
    m = rec["match"]
    assert m["mode"] == mode and m["completions"] == 50 * 2 * 64
    assert rec["errors"] > 0 and m["misattributed"] == 0


@pytest.mark.gpu
def test_gpu_kernel_out_of_order_positional_misattributes_and_scan_reads_more():
    got = {
        mode: gpu.run_cuda(target=GPU_EMU + "&ooo_win=8", qdepth=64, rounds=50, match=mode)["match"]
        for mode in ("cid", "positional", "scan")
    }
    assert got["positional"]["misattributed"] > 0
    assert got["cid"]["misattributed"] == 0 and got["scan"]["misattributed"] == 0
    assert got["scan"]["cq_bytes_per_completion"] > 2 * got["cid"]["cq_bytes_per_completion"]
