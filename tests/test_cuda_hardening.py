# SPDX-License-Identifier: BSD-3-Clause
"""Device-initiated I/O hardening and the real-controller path (issue 17).

Without a GPU: refusals that come before any CUDA call (CUDA_LAUNCH_BLOCKING, the emulator's warps limit,
an inline emu:// target, a bad payload) and the record fields that tell an emulator-limited run apart. The
queue logic itself (CID range at qd=1024, placement, progress check, backoff against the deadline, the
stand-in on a controller with a dropped completion) is tested in tests/c/test_cuda_queue_host.c.

With a GPU (`pytest -m gpu`): the same path end to end -- the real-controller path (queues created on a
controller, rings and payload in pinned host memory mapped into the GPU, system-scope CQE polls) against
emu://?mode=thread, every queue making progress with 16 queues, the emulator's counters and lateness in the
record, and the watchdog after a dropped completion.
"""

from __future__ import annotations

import errno

import pytest

from nvmelab.engines import gpu

nat = pytest.importorskip("nvmelab._native")
HAS_CUDA_BUILD = bool(nat.build_info().get("cuda"))
needs_cuda_build = pytest.mark.skipif(not HAS_CUDA_BUILD, reason="nvmelab built without CUDA (no nvcc)")


@needs_cuda_build
def test_launch_blocking_is_refused_with_a_clear_message(monkeypatch):
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    with pytest.raises(OSError) as ei:
        gpu.run_cuda(target="gpu-emu://?profile=null", runtime=0.1, warmup=0)
    assert ei.value.errno == errno.ENOTSUP
    assert "CUDA_LAUNCH_BLOCKING=1" in str(ei.value) and "hang" in str(ei.value)
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "0")  # 0 is fine: the run goes on to look for a GPU
    if nat.cuda_device_count() == 0:
        with pytest.raises(OSError) as ei:
            gpu.run_cuda(target="gpu-emu://?profile=null", runtime=0.1, warmup=0)
        assert ei.value.errno == errno.ENODEV


@needs_cuda_build
def test_emulator_warps_beyond_launch_bounds_are_refused():
    assert "warps=16" in nat.cuda_target_check("gpu-emu://?warps=16")
    with pytest.raises(ValueError, match=r"'warps': 17 is out of range 1\.\.16"):
        nat.cuda_target_check("gpu-emu://?warps=17")


@needs_cuda_build
def test_inline_emu_target_is_refused_for_gpu_threads():
    with pytest.raises(ValueError, match="mode=thread"):
        gpu.run_cuda(target="emu://?ndev=1", runtime=0.1, warmup=0)


def test_payload_is_checked():
    with pytest.raises(ValueError, match="payload="):
        gpu.run_cuda(target="pci://0000:01:00.0", runtime=0.1, warmup=0, payload="vram")


def test_record_tells_an_emulator_limited_run_apart():
    from tests.test_cuda import _fake_result, record_kw

    emu = {
        "fetched": 1500,
        "completed": 1500,
        "errors": 0,
        "dropped": 0,
        "cq_full_held": 3,
        "idle_sweeps": 7,
        "late_ns_mean": 812.5,
        "late_ns_max": 40000,
    }
    rec = gpu.make_record(
        _fake_result(emulator=emu, payload="gpu"),
        **record_kw(study="cuda_qdepth"),
    )
    assert rec["emulator_counters"]["late_ns_mean"] == 812.5 and rec["emulator_counters"]["cq_full_held"] == 3
    assert rec["payload"] == "gpu"
    rec = gpu.make_record(
        _fake_result(emulator=None, payload="host"),
        **record_kw(target="pci://0000:01:00.0", rw="read", qdepth=8, warmup=0),
    )
    assert rec["emulator_counters"] is None and rec["payload"] == "host"


# ------------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
def test_real_controller_path_on_the_cpu_emulator():
    # queues created by admin commands, rings + payload in pinned host memory, doorbells in the register
    # window, CQEs written by a CPU thread: the kernel's system-scope polls and the teardown order
    rec = gpu.run_cuda(
        target="emu://?ndev=2&mode=thread&nsze=64MiB",
        rw="write",
        iosize=4096,
        qdepth=32,
        nqueues=2,
        rounds=3,
        verify=True,
        readback=True,
        timeout=5.0,
    )
    assert rec["verify_errors"] == 0 and rec["payload"] == "host"
    assert all(r == 6 for r in rec["queue_rounds"])  # 3 write rounds + 3 readback rounds per queue
    assert rec["emulator_counters"] is None


@pytest.mark.gpu
def test_sixteen_queues_all_progress_and_counters_are_reported():
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=16&profile=pm1753",
        rw="randread",
        iosize=512,
        qdepth=64,
        nqueues=1,
        runtime=1.0,
        warmup=0.2,
    )
    assert len(rec["queue_rounds"]) == 16 and min(rec["queue_rounds"]) > 0
    em = rec["emulator_counters"]
    assert em["completed"] >= rec["ios_total"] and em["late_ns_mean"] >= 0 and em["dropped"] == 0


@pytest.mark.gpu
def test_dropped_completion_ends_in_the_watchdog_error():
    with pytest.raises(TimeoutError, match="did not arrive"):
        gpu.run_cuda(target="gpu-emu://?ndev=1&profile=null&drop=5", rw="randread", qdepth=16, rounds=2, timeout=0.2)


@pytest.mark.gpu
def test_verified_reads_are_poisoned_first():
    # write + readback over the same buffers: without poisoning, a read that moved no data would verify
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=1&profile=null&nsze=16MiB",
        rw="write",
        iosize=4096,
        qdepth=64,
        rounds=2,
        verify=True,
        readback=True,
    )
    assert rec["verify_errors"] == 0
    with pytest.raises(ValueError, match="verify"):  # data=none moves nothing: refused for verify, not passed
        gpu.run_cuda(target="gpu-emu://?ndev=1&data=none", rw="read", qdepth=8, rounds=1, verify=True)
