# SPDX-License-Identifier: BSD-3-Clause
"""Records files shared by processes: appends under an flock, the sweep lock, torn lines, full disks,
duplicates (nvmelab.results.records; issue 21 item 3). The append cost is measured by
tests/bench/bench_records_append.py (make bench), not here."""

from __future__ import annotations

import copy
import errno
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_records import GOOD

from nvmelab.results import analysis, records
from nvmelab.studies import load_results, load_spec, run_study
from tests.fake_study import fake_run, fake_spec, preset, sweep

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}

SPEC = fake_spec("t_lock", preset(sweep("qdepth", qdepth=[1, 2, 3, 4, 5, 6, 7, 8]), repetitions=3))

SWEEP = textwrap.dedent(
    """
    import logging, os, sys, time
    from nvmelab.results.records import RecordsBusyError
    from nvmelab.studies import load_spec, run_study
    from tests.fake_study import fake_run

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    spec_path, root, mode, release = sys.argv[1:5]
    calls = []

    def run_fn(**kw):
        calls.append(1)
        while len(calls) == 2 and release != "-" and not os.path.exists(release):
            time.sleep(0.01)  # hold the sweep (and its lock) open until the test lets it go
        return fake_run(**kw)

    try:
        rep = run_study(load_spec(spec_path), "quick", run_fn=run_fn, results_root=root, progress=False,
                        wait=mode == "wait")
    except RecordsBusyError as exc:
        print(f"REFUSED {exc}")
        sys.exit(3)
    print(f"RAN {rep.ran} DONE {rep.already_done}")
    """
)

APPENDER = textwrap.dedent(
    """
    import json, sys
    from nvmelab.results import records
    path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rec = json.loads(sys.stdin.read())
    for i in range(n):
        rec["run_key"] = f"{who}-{i}"
        records.append_records(path, [rec])
    """
)


def _rec(key: str, **kw) -> dict:
    r = copy.deepcopy(GOOD)
    r["run_key"] = key
    r.update(kw)
    return r


def test_append_adds_lines_in_place(tmp_path):
    """An append writes the new line after the old bytes, in the same file (no rewrite)."""
    p = tmp_path / "runs.jsonl"
    records.append_records(p, [_rec("a")])
    before, ino = p.read_bytes(), p.stat().st_ino
    records.append_records(p, [_rec("b"), _rec("c")])
    after = p.read_bytes()
    assert p.stat().st_ino == ino and after.startswith(before)
    assert after[len(before) :].count(b"\n") == 2
    assert [r["run_key"] for r in records.load_records(p)] == ["a", "b", "c"]


def test_torn_last_line_is_ignored_then_dropped(tmp_path, caplog):
    """A kill mid-write leaves an unfinished last line: readers skip it (saying so), resume redoes
    that run, and the next append cuts it off before writing."""
    p = tmp_path / "runs.jsonl"
    records.append_records(p, [_rec("a")])
    whole = records.dumps(_rec("b"))
    with open(p, "a", encoding="utf-8") as f:
        f.write(whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING, logger="nvmelab.results.records"):
        assert [r["run_key"] for r in records.load_records(p)] == ["a"]
    assert "unfinished last line" in caplog.text
    records.append_records(p, [_rec("b")])
    assert p.read_text().splitlines() == [records.dumps(_rec("a")), whole]


def test_whole_records_on_an_unfinished_line_are_moved_aside_not_cut(tmp_path, caplog):
    """Two complete records written on one line with no final newline are no torn write: the append moves the line
    aside to a named file (the count in the warning) instead of cutting both records."""
    p = tmp_path / "runs.jsonl"
    records.append_records(p, [_rec("a")])
    two = records.dumps(_rec("b")) + records.dumps(_rec("c"))
    with open(p, "a", encoding="utf-8") as f:
        f.write(two)
    with caplog.at_level(logging.WARNING, logger="nvmelab.results.records"):
        records.append_records(p, [_rec("d")])
    assert "held 2 whole record(s)" in caplog.text
    assert [r["run_key"] for r in records.load_records(p)] == ["a", "d"]
    aside = list(tmp_path.glob("runs.jsonl.tail-*"))
    assert len(aside) == 1 and aside[0].name in caplog.text and aside[0].read_text() == two + "\n"


def test_a_file_that_is_not_records_is_not_cut(tmp_path):
    """`perf run --json` pointed at some other file: nothing of it is dropped, one error names it."""
    p = tmp_path / "notes.txt"
    p.write_bytes(b"line one\n\xff\xfe binary tail")
    before = p.read_bytes()
    with pytest.raises(records.RecordError, match=r"notes.txt: does not end with a whole record"):
        records.append_records(p, [_rec("a")])
    assert p.read_bytes() == before


def test_whole_last_line_without_newline_is_kept(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_text(records.dumps(_rec("a")))  # a hand-written file without its final newline
    records.append_records(p, [_rec("b")])
    assert [r["run_key"] for r in records.load_records(p)] == ["a", "b"]


def test_full_disk_names_the_file_and_keeps_the_records(tmp_path, monkeypatch):
    p = tmp_path / "runs.jsonl"
    records.append_records(p, [_rec("a")])
    before = p.read_bytes()
    real_write = os.write

    def half_then_enospc(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(records.os, "write", half_then_enospc)
    with pytest.raises(OSError) as ei:
        records.append_records(p, [_rec("b")])
    monkeypatch.undo()
    assert ei.value.errno == errno.ENOSPC and ei.value.filename == str(p)
    assert "records already in it are kept" in ei.value.strerror
    assert p.read_bytes() == before


def test_dev_full_is_one_error_naming_the_file():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with pytest.raises(OSError) as ei:
        records.append_records("/dev/full", [_rec("a")])
    assert ei.value.errno == errno.ENOSPC and ei.value.filename == "/dev/full"


def test_readers_drop_duplicate_run_keys_and_say_so(tmp_path, caplog):
    f = tmp_path / "t_lock" / "h" / "quick.jsonl"
    records.append_records(f, [_rec("a", iops=1.0), _rec("b"), _rec("a", iops=2.0), _rec("a", iops=3.0)])
    with caplog.at_level(logging.WARNING):
        got = records.load_records(f)
        df = load_results("t_lock", "quick", root=tmp_path)
    assert [(r["run_key"], r["iops"]) for r in got] == [("a", 1.0), ("b", 1000.0)]
    assert len(df) == 2
    assert "2 duplicate record(s)" in caplog.text and str(f) in caplog.text
    # a frame built some other way: aggregate counts each run once
    frame = analysis.to_frame([_rec("a"), _rec("a"), _rec("b", repetition=1)])
    assert int(analysis.aggregate(frame)["n"].sum()) == 2


def test_sweep_lock_names_the_file_and_the_holder(tmp_path):
    p = tmp_path / "s" / "h" / "quick.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom nvmelab.results import records\n"
            "with records.sweep_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)\n",
            str(p),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(records.RecordsBusyError) as ei:
            with records.sweep_lock(p):
                pass
        assert str(p) in str(ei.value) and f"pid {holder.pid}" in str(ei.value)
    finally:
        holder.kill()
        holder.wait()
    with records.sweep_lock(p):  # the kernel dropped the dead holder's lock
        pass


def test_two_concurrent_appenders_lose_nothing(tmp_path):
    """Two processes appending to one file (two `nvmelab perf run --json` loops): every record once."""
    p = tmp_path / "runs.jsonl"
    n = 150
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(p), who, str(n)], stdin=subprocess.PIPE, text=True, env=ENV
        )
        for who in ("x", "y")
    ]
    for proc in procs:
        proc.stdin.write(json.dumps(GOOD))
        proc.stdin.close()
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0]
    keys = [r["run_key"] for r in records.iter_records(p, check=True)]
    assert len(keys) == 2 * n and len(set(keys)) == 2 * n


def _start_sweep(tmp_path: Path, mode: str, release: str = "-") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SWEEP, str(tmp_path / "t_lock.toml"), str(tmp_path / "res"), mode, release],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def _records_file(folder: Path, proc: subprocess.Popen, timeout: float = 60.0) -> Path:
    """The records file the sweep `proc` writes under `folder`, once it holds a record."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in folder.glob("*/quick.jsonl") if p.stat().st_size > 0]
        if found:
            return found[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    raise AssertionError(f"no record under {folder}")


@pytest.mark.parametrize("mode", ["refuse", "wait"])
def test_two_concurrent_sweeps_write_every_record_exactly_once(tmp_path, mode):
    """Two sweeps of one study on one host and results root at once: the second is refused
    (naming the file and the first's pid) or waits for the first; the file ends with every run
    of the plan exactly once."""
    (tmp_path / "t_lock.toml").write_text(SPEC)
    planned = len(load_spec(tmp_path / "t_lock.toml").plan("quick").runs)
    release = tmp_path / "release"
    first = _start_sweep(tmp_path, "refuse", str(release))
    path = _records_file(tmp_path / "res" / "t_lock", first)  # first is inside its sweep, lock held
    second = _start_sweep(tmp_path, mode)
    if mode == "refuse":
        out2, err2 = second.communicate(timeout=120)
        assert second.returncode == 3, err2
        assert str(path) in out2 and f"pid {first.pid}" in out2
        release.touch()
    else:
        line = second.stderr.readline()  # blocks until the second logs that it waits
        assert "waiting for the sweep of pid" in line and str(first.pid) in line, line
        release.touch()
        out2, err2 = second.communicate(timeout=120)
        assert second.returncode == 0, err2
        assert out2.split()[:2] == ["RAN", "0"]  # it waited, then found every run recorded
    out1, err1 = first.communicate(timeout=120)
    assert first.returncode == 0, err1
    keys = [r["run_key"] for r in records.iter_records(path, check=True)]
    assert len(keys) == planned and len(set(keys)) == planned


def test_set_aside_refuses_while_a_sweep_writes(tmp_path):
    from nvmelab.studies import set_aside
    from nvmelab.studies.paths import host_id, results_path

    p = results_path(tmp_path, "t_lock", host_id(), "quick")
    records.append_records(p, [_rec("a")])
    with records.sweep_lock(p):
        with pytest.raises(records.RecordsBusyError, match="another sweep"):
            set_aside(tmp_path, "t_lock", "quick")
    assert p.exists()


def test_a_sweep_in_process_resumes_after_a_torn_line(tmp_path):
    (tmp_path / "t_lock.toml").write_text(SPEC)
    spec = load_spec(tmp_path / "t_lock.toml")
    rep = run_study(spec, "quick", run_fn=fake_run, results_root=tmp_path, progress=False, max_runs=5)
    path = next(iter(rep.paths))
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # the fifth record cut short, as SIGKILL mid-write leaves it
    rep2 = run_study(spec, "quick", run_fn=fake_run, results_root=tmp_path, progress=False)
    assert rep2.already_done == 4 and rep2.ran == rep2.planned - 4
    keys = [r["run_key"] for r in records.iter_records(path, check=True)]
    assert len(keys) == rep2.planned == len(set(keys))
