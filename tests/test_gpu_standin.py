# SPDX-License-Identifier: BSD-3-Clause
"""The CPU stand-in of the cuda-run engine (engine/gpuq_standin.h, engines/gpu_standin.py): lock-step rounds
with the GPU kernel's queue code on the CPU emulator give valid records, and bad parameters are named."""

from __future__ import annotations

import pytest

from nvmelab.engines import gpu_standin
from nvmelab.results import records


def test_standin_target_maps_gpu_emu_to_the_cpu_emulator():
    uri, n = gpu_standin.standin_target("gpu-emu://?profile=pm1753&ndev=16&blocks=4&data=none", None)
    assert uri == f"emu://?profile=pm1753&ndev={gpu_standin.STANDIN_MAX_NDEVS}" and n == gpu_standin.STANDIN_MAX_NDEVS
    # the GPU engine's emu://?mode=thread target (rings in host memory): driven inline, its mode key dropped
    assert gpu_standin.standin_target("emu://?mode=thread&profile=null&ndev=4", None) == (
        "emu://?profile=null&ndev=4",
        4,
    )
    with pytest.raises(ValueError, match="gpu-emu"):
        gpu_standin.standin_target("pci://0000:4a:00.0", 1)


@pytest.mark.parametrize("iosize", [512, 4096, 65536])  # one page, two pages, a PRP list
def test_standin_rounds_give_a_valid_record(iosize):
    rec = gpu_standin.run_cuda_standin(
        target="gpu-emu://?profile=null&ndev=2", iosize=iosize, qdepth=8, nqueues=2, runtime=0.1, warmup=0.02
    )
    records.validate(rec)
    assert rec["standin"] is True and rec["tool"] == "nvmelab-gpuq-cpu"
    assert rec["ios"] > 0 and rec["errors"] == 0 and rec["ndevs"] == 2 and rec["iops"] > 0
    assert rec["standin_rounds"] * 8 == rec["ios"]


def test_standin_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="reads only"):
        gpu_standin.run_cuda_standin(target="gpu-emu://?profile=null", rw="randwrite", runtime=0.1)
    with pytest.raises(ValueError, match="qdepth"):
        gpu_standin.run_cuda_standin(target="gpu-emu://?profile=null&ndev=1", qdepth=5000, runtime=0.1)
    with pytest.raises(ValueError, match="multiple of the LBA size"):
        gpu_standin.run_cuda_standin(target="gpu-emu://?profile=null&ndev=1", iosize=700, runtime=0.1)
