# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab perf run`: help documents the options, a run prints a table and writes a JSON
record, bad values exit 2 with one line naming the parameter."""

from __future__ import annotations

import json
import subprocess
import sys

from nvmelab.results.records import load_records


def nvmelab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nvmelab", *args], capture_output=True, text=True, timeout=120)


def test_help_documents_every_option():
    p = nvmelab("perf", "run", "--help")
    assert p.returncode == 0
    for opt in (
        "--target",
        "--rw",
        "--rwmix",
        "--iosize",
        "--qdepth",
        "--nqueues",
        "--ncpus",
        "--thr-sib",
        "--cpus",
        "--ndevs",
        "--backend",
        "--runtime",
        "--warmup",
        "--verify",
        "--no-prefill",
        "--no-lat",
        "--seed",
        "--lba-start",
        "--lba-count",
        "--allow-write",
        "--study",
        "--repetition",
        "--json",
    ):
        assert opt in p.stdout, opt


def test_run_prints_a_table_and_appends_a_record(tmp_path):
    out = tmp_path / "runs.jsonl"
    args = (
        "perf",
        "run",
        "--target",
        "emu://?profile=null",
        "--iosize",
        "4096",
        "--qdepth",
        "16",
        "--runtime",
        "0.2",
        "--warmup",
        "0.05",
        "--json",
        str(out),
    )
    p = nvmelab(*args)
    assert p.returncode == 0, p.stderr
    assert "IOPS" in p.stdout and "profile null" in p.stdout
    p = nvmelab(*args)
    recs = load_records(out, check=True)
    assert len(recs) == 2 and all(r["backend"] == "nvmelab-emu" for r in recs)
    p = nvmelab("perf", "run", "--target", "emu://?profile=null", "--runtime", "0.1", "--warmup", "0", "--json", "-")
    assert p.returncode == 0 and json.loads(p.stdout)["tool"] == "nvmelab"


def test_bad_values_exit_2_with_one_line():
    for args, needle in [
        (("--qdepth", "0"), "qdepth=0"),
        (("--runtime", "-1"), "runtime=-1"),
        (("--target", "nfs://x"), "target="),
        (("--target", "file:///nonexistent/x.bin"), "no such file"),
        (("--rw", "randwrite", "--target", "emu://?profile=null", "--iosize", "100"), "iosize=100"),
    ]:
        p = nvmelab("perf", "run", *args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and needle in lines[0], (args, p.stderr)
