# SPDX-License-Identifier: BSD-3-Clause
"""A perf run that measured nothing is no result (issue 33, item 4): a window that saw no I/O, or a thread whose
window lasted under half the asked runtime (a host that left it without a CPU), fails the record's ``window``
self-check, and `nvmelab perf run` exits non-zero with one line naming why. The cases are made deterministic:
a device model slower than the run (its first completion comes after the window) and a crafted result."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nvmelab.engines import perf
from nvmelab.results import checks
from nvmelab.results.records import load_records

NULL = "emu://?profile=null"
#: pm1753 scaled so far that one command takes ~0.3 s: a 0.01 s window ends before any I/O completes.
SLOW = "emu://?profile=pm1753&scale=20000"


def test_window_check_on_crafted_counts():
    none = checks.window(0, [0.01], 0.01)
    assert none["ok"] is False and "no I/O in the measurement window" in none["detail"]
    short = checks.window(120, [0.5, 0.002], 0.5)
    assert short["ok"] is False and short["value"] == 0.002 and short["expect"] == 0.25
    assert "thread 1's measurement window lasted 0.002000 s of the 0.5 s asked" in short["detail"]
    ok = checks.window(120, [0.25, 0.31], 0.5)  # half the asked runtime is enough (a busy host starts late)
    assert ok["ok"] is True and ok["value"] == 0.25
    assert checks.window(5, [0.1], None)["ok"] is None  # nothing asked: not applicable


def test_a_short_thread_window_fails_the_record():
    """A real run's result with thread 0's window cut to a sliver (what a starved thread measures): the record
    is marked (checks_ok false, left out of figures), its rate kept as measured."""
    with perf.open_target(NULL) as t:
        info = t.info()
        res = t.run(rw="randread", iosize=512, qdepth=8, runtime=0.1, warmup=0.0)
    kw = dict(
        target=NULL,
        rw="randread",
        iosize=512,
        qdepth=8,
        nqueues=1,
        ncpus=1,
        thr_sib=False,
        stress=False,
        study="t",
        repetition=0,
        cpus=[0],
        cpu_freqs=None,
        host={},
        seed=1,
        rwmix=50,
        verify=False,
        warmup=0.0,
    )
    good = perf.make_record(dict(res), info, runtime=0.1, **kw)
    assert good["checks"]["window"]["ok"] is True and res["ios"] > 0
    thr = [dict(res["threads"][0], window_s=0.001)]
    bad = perf.make_record({**res, "threads": thr}, info, runtime=0.1, **kw)
    assert bad["checks"]["window"]["ok"] is False and bad["checks_ok"] is False
    assert checks.failed_checks(bad) == ["window"] and checks.excluded(bad) == checks.EXCLUDED_CHECKS


def test_a_run_whose_window_saw_no_io_fails_its_self_check():
    rec = perf.run(SLOW, rw="randread", iosize=512, qdepth=1, runtime=0.01, warmup=0.0)
    assert rec["ios"] == 0 and rec["iops"] == 0
    w = rec["checks"]["window"]
    assert w["ok"] is False and rec["checks_ok"] is False, w
    assert w["detail"].startswith("no I/O in the measurement window")


@pytest.mark.parametrize("sink", ["file", "stdout"])
def test_the_cli_exits_non_zero_naming_why(tmp_path, sink):
    out = tmp_path / "runs.jsonl"
    args = ["--target", SLOW, "--qdepth", "1", "--runtime", "0.01", "--warmup", "0", "--json"]
    args.append(str(out) if sink == "file" else "-")
    p = subprocess.run(
        [sys.executable, "-m", "nvmelab", "perf", "run", *args], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 1, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "self-check failed (window: no I/O in the measurement window" in lines[0], lines
    rec = load_records(out)[0] if sink == "file" else json.loads(p.stdout)
    assert rec["checks_ok"] is False and rec["checks"]["window"]["ok"] is False  # the record says so too
