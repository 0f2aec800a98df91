# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.build_info() and `nvmelab build-info`: every optional part is listed, an absent one with
the reason, and the io_uring entry agrees with what the perf engine can actually do here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import nvmelab
from nvmelab.engines import perf

PARTS = {"cuda", "io_uring", "blksum", "nbd"}


def test_every_optional_part_has_a_state_and_a_reason():
    info = nvmelab.build_info()
    assert set(info["parts"]) == PARTS
    for name, part in info["parts"].items():
        assert set(part) == {"available", "detail"}, name
        assert isinstance(part["available"], bool)
        if not part["available"]:
            assert part["detail"].strip(), f"{name} is absent and says not why"
    assert info["parts"]["cuda"]["available"] == bool(info["cuda"])


def test_io_uring_entry_matches_the_engine(tmp_path):
    path = tmp_path / "f.bin"
    perf.make_file(str(path), 1 << 20)
    part = nvmelab.build_info()["parts"]["io_uring"]
    kw = dict(target=f"file://{path}", backend="io_uring", iosize=4096, qdepth=4, runtime=0.05, warmup=0)
    if part["available"]:
        assert perf.run(**kw)["iops"] > 0
    else:
        with pytest.raises(OSError):
            perf.run(**kw)


def test_cli_lists_each_part_and_a_gpu_line():
    p = subprocess.run([sys.executable, "-m", "nvmelab", "build-info"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    listed = {line.split()[0] for line in p.stdout.splitlines()[1:]}
    assert listed == PARTS | {"gpu"}
    p = subprocess.run(
        [sys.executable, "-m", "nvmelab", "build-info", "--json"], capture_output=True, text=True, timeout=120
    )
    doc = json.loads(p.stdout)
    assert set(doc["parts"]) == PARTS | {"gpu"} and doc["version"] == nvmelab.__version__
