# SPDX-License-Identifier: BSD-3-Clause
"""Device-initiated I/O (issue 6): what runs without a GPU here, and the GPU tests (marked `gpu`).

Without a GPU: the native module answers "no GPU" with a reason, parameters and gpu-emu URIs are checked
before any CUDA call, pci:// names the missing DMA importer, records are built and validated from an
engine result, the CLI and the study runner reach the engine, and the numba-cuda checksum kernel runs
under numba's CUDA simulator (tests/test_cuda_numba_sim.py).

With a GPU (`pytest -m gpu`; make test-gpu, or call 1 of env/gpu-lease.sh): read-after-write through device-side
queues with many threads and ring wraparound, CID matching under out-of-order completion, the timeout
path, the device model, PRP lists, and zero-copy interop with cupy/numba.
"""

from __future__ import annotations

import errno
import subprocess
import sys

import numpy as np
import pytest

from nvmelab.engines import gpu
from nvmelab.results import records

nat = pytest.importorskip("nvmelab._native")
HAS_CUDA_BUILD = bool(nat.build_info().get("cuda"))
needs_cuda_build = pytest.mark.skipif(not HAS_CUDA_BUILD, reason="nvmelab built without CUDA (no nvcc)")


# ------------------------------------------------------------------------------------------ no GPU needed
def test_device_count_always_answers():
    n = nat.cuda_device_count()
    st = nat.cuda_status()
    assert isinstance(n, int) and n >= 0
    assert st["devices"] == n
    assert st["compiled"] == HAS_CUDA_BUILD
    if n == 0:
        assert st["reason"], "no GPU must come with a reason"
    ok, why = gpu.available()
    assert ok == (n > 0) and (ok or why == st["reason"])


@needs_cuda_build
def test_no_gpu_reason_names_cuda():
    if nat.cuda_device_count() > 0:
        pytest.skip("this host has a GPU")
    assert "no CUDA device" in nat.cuda_status()["reason"]


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"rw": "randrw"}, "rw="),
        ({"iosize": 1000}, "iosize="),
        ({"iosize": 4 << 20}, "iosize="),
        ({"qdepth": 0}, "qdepth="),
        ({"qdepth": 2048}, "qdepth="),
        ({"nqueues": 0}, "nqueues="),
        ({"ndevs": 0}, "ndevs="),
        ({"runtime": 0}, "runtime="),
        ({"runtime": float("nan")}, "runtime="),
        ({"warmup": -1}, "warmup="),
        ({"target": "emu://?profile=null"}, "target="),
        ({"ncpus": 2}, "ncpus="),
        ({"backend": "io_uring"}, "backend="),
        ({"timeout": 0}, "timeout="),
    ],
)
def test_parameters_checked_before_the_gpu(kw, word):
    args = dict(target="gpu-emu://?profile=null", runtime=0.1, warmup=0)
    args.update(kw)
    with pytest.raises(ValueError, match=word):
        gpu.run_cuda(**args)


@needs_cuda_build
@pytest.mark.parametrize(
    "uri, word",
    [
        ("gpu-emu://?profile=nope", "profile"),
        ("gpu-emu://?ndev=0", "ndev"),
        ("gpu-emu://?ndev=65", "ndev"),
        ("gpu-emu://?scale=-2", "scale"),
        ("gpu-emu://?blocks=0", "blocks"),
        ("gpu-emu://?warps=33", "warps"),
        ("gpu-emu://?nsze=1000", "nsze"),
        ("gpu-emu://?lbads=1024", "lbads"),
        ("gpu-emu://?data=maybe", "data"),
        ("gpu-emu://?fill=stamp&data=none", "fill"),
        ("gpu-emu://?ooo=perhaps", "ooo"),
        ("gpu-emu://?colour=blue", "colour"),
        ("gpu-emu://host?profile=null", "gpu-emu://"),
        ("gpu-emu://?lat=5parsecs", "lat"),
        ("gpu-emu://?qiops=-1", "qiops"),
        ("gpu-emu://?bw=fast", "bw"),
    ],
)
def test_gpu_emu_uri_errors_name_the_key(uri, word):
    with pytest.raises(ValueError, match=word):
        nat.cuda_target_check(uri)
    # the engine checks the URI before it looks for a GPU, so the same error reaches run_cuda
    with pytest.raises(ValueError, match=word):
        gpu.run_cuda(target=uri, runtime=0.1, warmup=0)


@needs_cuda_build
def test_gpu_emu_uri_defaults():
    desc = nat.cuda_target_check("gpu-emu://?profile=pm1753")
    assert "profile=pm1753" in desc and "scale=1 " in desc  # unscaled unless asked
    assert "ndev=16" in desc
    assert "ndev=4" in nat.cuda_target_check("gpu-emu://?ndev=4&ooo=1&drop=3&fill=stamp")
    # the pm1753 model as profiles.c takes it from the fitted model (data/results/model/pm1753-profile.csv,
    # generated into calibration.h), and the overrides (nominal values, before scale)
    import csv

    from nvmelab.results.reference import data_root

    with open(data_root() / "results" / "model" / "pm1753-profile.csv", encoding="utf-8") as f:
        prof = {row["name"]: row["value"] for row in csv.DictReader(f)}
    assert f"qiops={float(prof['QUEUE_IOPS']):g}" in desc and f" iops={float(prof['DEV_IOPS']):g}" in desc
    over = nat.cuda_target_check("gpu-emu://?profile=pm1753&lat=14us&qiops=3.7e6&bw=10GiB/s&scale=2")
    assert "lat=14000ns" in over and "qiops=3.7e+06" in over and f"bw={10 * 2**30:g}" in over and "scale=2 " in over


@needs_cuda_build
def test_pci_gpu_payload_names_the_missing_importer():
    # pci:// runs with a host-memory payload; a GPU-memory payload is refused with the reason, before any GPU
    with pytest.raises(OSError) as ei:
        gpu.run_cuda(target="pci://0000:01:00.0", runtime=0.1, warmup=0, payload="gpu")
    assert ei.value.errno == errno.ENOTSUP
    msg = str(ei.value)
    assert "dma-buf" in msg and "importer" in msg and "nvidia-p2p" in msg and "payload=host" in msg


@needs_cuda_build
def test_run_without_gpu_is_a_clear_error():
    if nat.cuda_device_count() > 0:
        pytest.skip("this host has a GPU")
    with pytest.raises(OSError) as ei:
        gpu.run_cuda(target="gpu-emu://?profile=null", runtime=0.1, warmup=0)
    assert ei.value.errno == errno.ENODEV
    assert "no CUDA device" in str(ei.value)


def record_kw(**over):
    """gpu.make_record's keywords for a record built from _fake_result (the tests of the record builder);
    `over` changes the ones a test is about."""
    kw = dict(
        target="gpu-emu://?profile=pm1753&ndev=2",
        rw="randread",
        iosize=512,
        qdepth=128,
        nqueues=1,
        study="x",
        repetition=0,
        seed=1,
        warmup=0.5,
        stress=False,
        thr_sib=False,
        host={},
        verify=False,
    )
    kw.update(over)
    return kw


def _fake_result(**over):
    res = {
        "window_s": 1.0,
        "kernel_s": 1.5,
        "ios": 1000,
        "ios_total": 1500,
        "iops": 1000.0,
        "bytes_per_s": 512000.0,
        "errors": 0,
        "verify_errors": 0,
        "round_ns_mean": 1234.5,
        "round_ns_max": 9999,
        "threads": 256,
        "emu_blocks": 8,
        "emu_warps": 8,
        "ndevs": 2,
        "profile": "pm1753",
        "scale": 1.0,
        "ooo": False,
        "target_desc": "profile=pm1753 scale=1 ndev=2",
        "queue_rounds": [10, 10],
        "buf_offset": 0,
        "buf_stride": 4096,
        "first_error": None,
        "poll": "backoff:2048",
        "occupancy_pct": 95,
        "occupancy_permille": 412,
        "sq_readback": False,
        "gpu": {"name": "Test GPU", "compute_capability": "9.0", "sms": 132, "driver_version": 13000},
    }
    res.update(over)
    return res


def test_record_from_an_engine_result_validates():
    rec = gpu.make_record(
        _fake_result(),
        target="gpu-emu://?profile=pm1753&ndev=2",
        rw="randread",
        iosize=512,
        qdepth=128,
        nqueues=1,
        study="cuda_qdepth",
        repetition=0,
        seed=1,
        warmup=0.5,
        stress=False,
        thr_sib=False,
        host={"governor": None, "turbo": None, "smt": None},
        verify=False,
    )
    records.validate(rec)
    assert rec["tool"] == "nvmelab-cuda" and rec["backend"] == "nvmelab-cuda"
    assert rec["provenance"]["profile"] == "pm1753" and rec["provenance"]["scale"] == 1.0
    assert rec["provenance"]["cuda_device"]["name"] == "Test GPU"
    assert rec["ndevs"] == 2 and rec["cuda_threads"] == 256
    assert rec["mibs"] == round(512000.0 / (1 << 20), 2)


def test_record_without_profile_is_refused():
    with pytest.raises(records.RecordError, match="profile"):
        gpu.make_record(
            _fake_result(profile=""),
            **record_kw(target="gpu-emu://", rw="read", qdepth=1, warmup=0),
        )


def test_engine_is_reachable_from_the_study_runner():
    from nvmelab.engines import gpu, perf
    from nvmelab.studies import runner

    assert not hasattr(perf, "run_cuda")  # one name for the engine: gpu.run_cuda
    assert runner.resolve_engine("cuda") is gpu.run_cuda
    with pytest.raises(ValueError, match="qdepth"):
        gpu.run_cuda(target="gpu-emu://", qdepth=0)


def test_cli_cuda_run_help_and_errors():
    exe = [sys.executable, "-m", "nvmelab", "perf", "cuda-run"]
    h = subprocess.run(exe + ["--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "--qdepth" in h.stdout and "gpu-emu" in h.stdout
    bad = subprocess.run(exe + ["--qdepth", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "qdepth=0" in bad.stderr and "Traceback" not in bad.stderr
    if HAS_CUDA_BUILD and nat.cuda_device_count() == 0:
        nogpu = subprocess.run(exe + ["--runtime", "0.1"], capture_output=True, text=True, timeout=60)
        assert nogpu.returncode == 2 and "no CUDA device" in nogpu.stderr and "Traceback" not in nogpu.stderr


def test_stamps_match_the_c_header():
    # values of nvme_gpuq_stamp() from tests/c/test_cuda_queue_host.c (same formula, two languages)
    words = gpu.stamps(3, 1000, 512).view(np.uint64)
    assert int(words[5]) == STAMP_3_1000_5
    assert int(gpu.stamps(0, 0, 8).view(np.uint64)[0]) == STAMP_0_0_0
    # LBA 1001 starts at word 64 of a 1024-byte read from LBA 1000
    two = gpu.stamps(3, 1000, 1024).view(np.uint64)
    assert int(two[64]) == int(gpu.stamps(3, 1001, 512).view(np.uint64)[0])


def test_read_lbas_layout():
    lbas = gpu.read_lbas(4096, qdepth=4, nqueues=2, ndevs=2)
    assert len(lbas) == 16
    assert lbas[0] == (0, 0) and lbas[1] == (0, 8) and lbas[4] == (0, 32) and lbas[8] == (1, 0)


# Known values of nvme_gpuq_stamp(dev, lba, word), asserted in tests/c/test_cuda_queue_host.c too.
STAMP_3_1000_5 = 14819571440484406469
STAMP_0_0_0 = 654009164567993689


# ------------------------------------------------------------------------------------------ GPU tests
@pytest.mark.gpu
def test_read_after_write_many_threads_wraparound():
    # 4 devices x 4 queues x 64 threads = 1024 threads; each ring has qdepth+1 slots, so the tail and the
    # phase move every round; 40 write rounds sweep the 4 MiB namespaces 10 times, then the same LBAs are
    # read back and checked
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=4&profile=null&nsze=4MiB",
        rw="write",
        iosize=4096,
        qdepth=64,
        nqueues=4,
        ndevs=4,
        rounds=40,
        verify=True,
        readback=True,
    )
    assert rec["errors"] == 0 and rec["verify_errors"] == 0
    assert rec["queue_rounds"] == [80] * 16
    assert rec["ios"] == 80 * 64 * 16


@pytest.mark.gpu
def test_verify_detects_unwritten_data():
    # the negative control: reading a zeroed namespace with verify must report mismatches
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=1&profile=null&nsze=1MiB",
        rw="read",
        iosize=512,
        qdepth=8,
        ndevs=1,
        rounds=2,
        verify=True,
    )
    assert rec["verify_errors"] == 2 * 8 * 512 // 8


@pytest.mark.gpu
def test_cid_matching_under_out_of_order_completion():
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=2&profile=null&ooo=1&fill=stamp&nsze=8MiB",
        rw="randread",
        iosize=512,
        qdepth=256,
        nqueues=2,
        ndevs=2,
        rounds=200,
        verify=True,
    )
    assert rec["errors"] == 0 and rec["verify_errors"] == 0
    assert rec["queue_rounds"] == [200] * 4


@pytest.mark.gpu
def test_prp_lists_and_large_io():
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=2&profile=null&nsze=16MiB",
        rw="randwrite",
        iosize=65536,
        qdepth=16,
        nqueues=1,
        ndevs=2,
        rounds=20,
        verify=True,
        readback=True,
    )
    assert rec["errors"] == 0 and rec["verify_errors"] == 0


@pytest.mark.gpu
def test_lost_completion_times_out_not_hangs():
    with pytest.raises(TimeoutError, match="device .* queue .*did not arrive"):
        gpu.run_cuda(
            target="gpu-emu://?ndev=1&profile=null&drop=5", rw="randread", qdepth=8, ndevs=1, rounds=10, timeout=0.2
        )


@pytest.mark.gpu
def test_nvme_errors_are_counted_with_their_status():
    # lba_count beyond the namespace is refused by the engine; an MDTS below iosize is an NVMe error
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=1&profile=null&mdts=4096", rw="randread", iosize=8192, qdepth=4, ndevs=1, rounds=3
    )
    assert rec["errors"] == 12
    assert rec["first_error"]["name"] == "Invalid Field in Command" and rec["first_error"]["dnr"]


@pytest.mark.gpu
def test_timed_run_record_and_model_caps():
    # pm1753, one device, one queue: the per-queue cap (profiles.c) bounds the rate
    rec = gpu.run_cuda(
        target="gpu-emu://?ndev=1&profile=pm1753",
        rw="randread",
        iosize=512,
        qdepth=512,
        nqueues=1,
        ndevs=1,
        runtime=0.5,
        warmup=0.2,
    )
    records.validate(rec)
    cap = 53_500_000 / 16
    assert rec["errors"] == 0
    assert 0.5 * cap < rec["iops"] <= 1.03 * cap
    assert rec["provenance"]["cuda_device"]["name"]


@pytest.mark.gpu
def test_numba_checksum_of_blocks_just_read():
    blocks, res = gpu.read_blocks(
        "gpu-emu://?ndev=2&profile=null&fill=stamp&nsze=4MiB", iosize=4096, qdepth=32, nqueues=2, ndevs=2
    )
    assert res["errors"] == 0
    got = gpu.block_checksums(blocks).copy_to_host()
    want_rows = np.stack([gpu.stamps(d, lba, 4096) for d, lba in gpu.read_lbas(4096, 32, 2, 2)])
    assert np.array_equal(got, gpu.checksum_reference(want_rows))


@pytest.mark.gpu
def test_cupy_wraps_the_buffer_without_a_copy():
    cupy = pytest.importorskip("cupy")
    size, _ = nat.cuda_buf_size(512, 8, 1, 1)
    buf = cupy.zeros(size, dtype=cupy.uint8)
    blocks, res = gpu.read_blocks(
        "gpu-emu://?ndev=1&profile=null&fill=stamp&nsze=1MiB", iosize=512, qdepth=8, ndevs=1, buf=buf
    )
    view = cupy.asarray(blocks)
    assert view.data.ptr == buf.data.ptr + res["buf_offset"]
    assert np.array_equal(cupy.asnumpy(view[3]), gpu.stamps(0, 3, 512))


@pytest.mark.gpu
def test_read_and_checksum_for_the_notebook():
    out = gpu.read_and_checksum(iosize=4096, qdepth=16, nqueues=2, ndevs=2)
    assert out["rows"] == 64 and out["matches"] == 64 and out["read_s"] > 0
