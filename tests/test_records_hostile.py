# SPDX-License-Identifier: BSD-3-Clause
"""Records and lock files against what a neighbour can plant (issue 33, item 4): a symbolic link in place
of the sweep lock or the records file, a FIFO as records path, a foreign flock held on either, and the NUL
bytes a crash after the file grew leaves at its end."""

from __future__ import annotations

import copy
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from test_records import GOOD

from nvmelab.results import records
from tests.fake_study import fake_spec, preset, sweep

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
#: A hang guard only (the cases below end at once when they work); no assertion is made on time.
GUARD_S = 60

#: Holds an exclusive flock on argv[1] until its stdin closes (a foreign `flock FILE cat`).
HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
    """
)


def _rec(key: str) -> dict:
    r = copy.deepcopy(GOOD)
    r["run_key"] = key
    return r


@pytest.fixture
def holder():
    """Start a process that holds a foreign flock on a path; yields start(path) -> Popen."""
    procs: list[subprocess.Popen] = []

    def start(path: Path) -> subprocess.Popen:
        p = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        procs.append(p)
        assert p.stdout.readline().strip() == "held"
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_a_planted_lock_symlink_leaves_its_target_untouched(tmp_path):
    """`.<records>.lock` a symbolic link to someone's file: the sweep is refused with one error naming the lock
    path, and the file it points to keeps every byte (it used to be truncated to the sweep's pid)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    p = tmp_path / "runs.jsonl"
    records.lock_path(p).symlink_to(victim)
    with pytest.raises(records.RecordError) as ei:
        with records.sweep_lock(p):
            pass
    msg = str(ei.value)
    assert str(records.lock_path(p)) in msg and "symbolic link" in msg and "\n" not in msg
    assert victim.read_text() == "precious\n"
    # a dangling link is not followed to create its target either
    records.lock_path(p).unlink()
    records.lock_path(p).symlink_to(tmp_path / "made-by-us")
    with pytest.raises(records.RecordError, match="symbolic link"):
        with records.sweep_lock(p):
            pass
    assert not (tmp_path / "made-by-us").exists()


def test_a_records_path_that_is_a_symlink_is_refused(tmp_path):
    victim = tmp_path / "victim.jsonl"
    records.append_records(victim, [_rec("a")])
    before = victim.read_bytes()
    link = tmp_path / "runs.jsonl"
    link.symlink_to(victim)
    with pytest.raises(records.RecordError, match=r"runs.jsonl: is a symbolic link"):
        records.append_records(link, [_rec("b")])
    with pytest.raises(records.RecordError, match=r"runs.jsonl: is a symbolic link"):
        records.write_records(link, [_rec("b")])
    assert victim.read_bytes() == before and link.is_symlink()
    assert [r["run_key"] for r in records.load_records(link)] == ["a"]  # reading may follow a link


def _in_thread(fn, *args, **kw):
    """Run fn in a daemon thread; (thread, box) where box holds its result or exception."""
    box: dict = {}

    def body():
        try:
            box["ok"] = fn(*args, **kw)
        except BaseException as exc:  # noqa: BLE001 -- handed back to the test
            box["exc"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, box


@pytest.mark.parametrize("op", ["append", "write", "read"])
def test_a_fifo_as_records_path_is_refused_at_once(tmp_path, op):
    """A FIFO where the records file should be: one error naming it and what it is (opening it used to
    block forever, waiting for a writer or a reader that never comes)."""
    fifo = tmp_path / "runs.jsonl"
    os.mkfifo(fifo)
    fn = {
        "append": lambda: records.append_records(fifo, [_rec("a")]),
        "write": lambda: records.write_records(fifo, [_rec("a")]),
        "read": lambda: records.load_records(fifo),
    }[op]
    t, box = _in_thread(fn)
    t.join(GUARD_S)
    if t.is_alive():  # unblock the old behaviour's open so the thread ends, then fail
        with open(os.open(fifo, os.O_RDWR | os.O_NONBLOCK), "rb"):
            t.join(5)
        pytest.fail(f"{op} on a FIFO blocked")
    assert isinstance(box.get("exc"), records.RecordError), box
    assert str(box["exc"]) == f"{fifo}: is a FIFO, not a regular file; a records file must be a regular file"
    assert fifo.exists() and not fifo.is_file()


class _Released(logging.Handler):
    """Releases the foreign lock (closes the holder's stdin) when the wait's warning is logged."""

    def __init__(self, proc: subprocess.Popen):
        super().__init__(logging.WARNING)
        self.proc, self.seen, self.event = proc, [], threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        self.seen.append(msg)
        if "waiting for the lock" in msg:
            self.proc.stdin.close()
            self.event.set()


@pytest.mark.parametrize("which", ["records", "lock"])
def test_a_foreign_flock_is_waited_on_with_a_message(tmp_path, holder, monkeypatch, which):
    """A foreign flock on the records file (an append waits) or on the sweep lock (a sweep that waits): a
    warning names the file and the holding process, then the wait goes on until the lock is free."""
    monkeypatch.setattr(records, "LOCK_NOTICE_S", 0.0)
    p = tmp_path / "runs.jsonl"
    proc = holder(p if which == "records" else records.lock_path(p))
    h = _Released(proc)
    logger = logging.getLogger("nvmelab.results.records")
    logger.addHandler(h)
    try:
        if which == "records":
            t, box = _in_thread(records.append_records, p, [_rec("a")])
        else:
            t, box = _in_thread(lambda: records.sweep_lock(p, wait=True).__enter__())
        told = h.event.wait(GUARD_S)
        if not told:
            proc.stdin.close()  # the old silent stall: let it go, then fail below
        t.join(GUARD_S)
    finally:
        logger.removeHandler(h)
    assert told, f"no message while waiting: {h.seen}"
    assert not t.is_alive() and "exc" not in box, box
    waiting = next(m for m in h.seen if "waiting for the lock" in m)
    assert f"pid {proc.pid}" in waiting and str(p if which == "records" else records.lock_path(p)) in waiting
    if which == "records":
        assert [r["run_key"] for r in records.load_records(p)] == ["a"]


def test_a_sweep_refused_by_a_foreign_lock_names_its_holder(tmp_path, holder):
    """Without --wait a foreign flock on the sweep lock (no pid written in it) is refused naming who holds it."""
    p = tmp_path / "runs.jsonl"
    proc = holder(records.lock_path(p))
    with pytest.raises(records.RecordsBusyError) as ei:
        with records.sweep_lock(p):
            pass
    assert f"pid {proc.pid}" in str(ei.value) and str(p) in str(ei.value)


APPEND_WAITING = textwrap.dedent(
    """
    import json, logging, signal, sys
    from nvmelab.results import records
    # Ctrl-C as at a terminal: a run started in the background inherits SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler of its own
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    records.LOCK_NOTICE_S = 0.0
    records.append_records(sys.argv[1], [json.loads(sys.argv[2])])
    """
)


def test_ctrl_c_ends_the_wait_for_a_foreign_lock(tmp_path, holder):
    """An append waiting for a foreign lock ends on Ctrl-C (KeyboardInterrupt) and writes nothing."""
    p = tmp_path / "runs.jsonl"
    holder(p)
    app = subprocess.Popen(
        [sys.executable, "-c", APPEND_WAITING, str(p), records.dumps(_rec("a"))],
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        line = app.stderr.readline()  # the wait's warning (EOF if the process ended without one)
        assert "waiting for the lock" in line, line
        app.send_signal(signal.SIGINT)
        rest = app.communicate(timeout=GUARD_S)[1]
    finally:
        app.kill()
        app.wait()
    assert app.returncode != 0 and "KeyboardInterrupt" in rest
    assert p.read_bytes() == b""


def test_trailing_nul_bytes_are_moved_aside_not_every_append_failing(tmp_path, caplog):
    """A crash after the file grew leaves NUL bytes where the last line's data should be: the next append
    moves them aside to a named file (their count in the warning) and appends; later appends work too."""
    p = tmp_path / "runs.jsonl"
    records.append_records(p, [_rec("a")])
    with open(p, "ab") as f:
        f.write(b"\0" * 700)
    with caplog.at_level(logging.WARNING, logger="nvmelab.results.records"):
        records.append_records(p, [_rec("b")])
    records.append_records(p, [_rec("c")])
    assert [r["run_key"] for r in records.load_records(p)] == ["a", "b", "c"]
    aside = list(tmp_path.glob("runs.jsonl.tail-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"\0" * 700 + b"\n"
    assert "700 NUL bytes" in caplog.text and aside[0].name in caplog.text
    # a file that is nothing but NULs (the crash came before its first record landed)
    q = tmp_path / "new.jsonl"
    q.write_bytes(b"\0" * 64)
    records.append_records(q, [_rec("x")])
    assert [r["run_key"] for r in records.load_records(q)] == ["x"]


@pytest.mark.parametrize(
    "tail",
    [b"\xef\xbb\xbf{}", b"{\x00}\x00"],
    ids=["utf8-bom", "utf16"],
)
def test_a_last_line_json_reads_only_by_guessing_its_encoding_is_not_finished_as_a_record(tmp_path, tail):
    """json.loads(bytes) guesses UTF-16 and skips a BOM (fuzz_records found both): such a last line
    must not get a newline as a 'whole record', which left every later read of the file failing."""
    p = tmp_path / "runs.jsonl"
    records.append_records(p, [_rec("a")])
    with open(p, "ab") as f:
        f.write(tail)
    try:
        records.append_records(p, [_rec("b")])
    except records.RecordError:
        pass  # refusing is allowed; losing the readable records is not
    keys = [r["run_key"] for r in records.load_records(p)]
    assert keys[0] == "a" and set(keys) <= {"a", "b"}


def test_json_nested_too_deeply_is_a_record_error_not_a_recursion_error(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_bytes(b"[" * 5000 + b"\n")
    with pytest.raises(records.RecordError, match="nested too deeply"):
        list(records.iter_records(p))
    q = tmp_path / "tail.jsonl"
    q.write_bytes(b"[" * 5000)
    with pytest.raises(records.RecordError, match="not JSON"):  # not a record: refused, no RecursionError
        records.append_records(q, [_rec("b")])


def _nested(depth: int) -> bytes:
    """One record line whose 'x' holds lists nested so the line nests `depth` containers deep."""
    inner = depth - 1
    return b'{"run_key": "deep", "x": ' + b"[" * inner + b"]" * inner + b"}\n"


def test_json_nesting_is_judged_by_a_fixed_bound_not_by_the_callers_stack(tmp_path):
    """A line nested just under the interpreter's recursion limit was read by iter_records and refused
    by load_records (a deeper stack): the fuzzer's finding of CI. Every reader now gives one answer."""
    p = tmp_path / "runs.jsonl"
    p.write_bytes(_nested(records.MAX_NESTING))
    assert [r["run_key"] for r in records.iter_records(p)] == ["deep"]
    assert [r["run_key"] for r in records.load_records(p)] == ["deep"]
    for depth in (records.MAX_NESTING + 1, 990, 3000):
        p.write_bytes(_nested(depth))
        with pytest.raises(records.RecordError, match="nested too deeply"):
            list(records.iter_records(p))
        with pytest.raises(records.RecordError, match="nested too deeply"):
            records.load_records(p)
    # a torn last line nested deeply: the same answer from every reader at every stack depth (the second finding)
    p.write_bytes(b'{"a": 1}\n' + _nested(990)[:-40])

    def at_depth(n, read):
        return at_depth(n - 1, read) if n else read()

    for n in (0, 300, 600, 900):
        for read in (lambda: list(records.iter_records(p)), lambda: records.load_records(p)):
            with pytest.raises(records.RecordError, match="nested too deeply"):
                at_depth(n, read)


SPEC = fake_spec("t_hostile", preset(sweep("qdepth", qdepth=[1, 2])))


@pytest.mark.parametrize("plant", ["lock-symlink", "records-symlink", "records-fifo"])
def test_a_sweep_refuses_a_planted_path_before_any_run(tmp_path, plant):
    """The issue's case: a sweep whose `.<records>.lock` (or records file) someone replaced with a link to their
    file, or a FIFO: refused with one error naming the path before any run, the link's target untouched."""
    from nvmelab.studies import load_spec, run_study
    from nvmelab.studies.paths import host_id, results_path
    from tests.fake_study import fake_run

    (tmp_path / "t_hostile.toml").write_text(SPEC)
    spec = load_spec(tmp_path / "t_hostile.toml")
    path = results_path(tmp_path / "res", "t_hostile", host_id(), "quick")
    path.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = {"lock-symlink": records.lock_path(path), "records-symlink": path, "records-fifo": path}[plant]
    if plant == "records-fifo":
        os.mkfifo(planted)
    else:
        planted.symlink_to(victim)
    ran = []

    def run_fn(**kw):
        ran.append(kw)
        return fake_run(**kw)

    t, box = _in_thread(run_study, spec, "quick", run_fn=run_fn, results_root=tmp_path / "res", progress=False)
    t.join(GUARD_S)
    if t.is_alive():
        with open(os.open(planted, os.O_RDWR | os.O_NONBLOCK), "rb"):
            t.join(5)
        pytest.fail("the sweep blocked on the planted path")
    assert isinstance(box.get("exc"), records.RecordError), box
    assert str(box["exc"]).startswith(f"{planted}: is a ") and not ran
    assert victim.read_text() == "precious\n"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nvmelab", "perf", *args], capture_output=True, text=True, timeout=GUARD_S, env=ENV
    )


@pytest.mark.parametrize("action", ["run", "cuda-run"])
@pytest.mark.parametrize("plant", ["symlink", "fifo"])
def test_the_cli_refuses_a_records_path_before_the_run(tmp_path, action, plant):
    """`perf run --json` / `perf cuda-run --json` at a link or a FIFO: exit 2 with one line naming it, before the
    run (no table printed, no measurement lost after it; cuda-run says so even on a host without a GPU)."""
    out = tmp_path / "runs.jsonl"
    victim = tmp_path / "victim.jsonl"
    victim.write_text("")
    if plant == "fifo":
        os.mkfifo(out)
    else:
        out.symlink_to(victim)
    p = _cli(action, "--runtime", "0.05", "--json", str(out))
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    kind = "a FIFO, not a regular file" if plant == "fifo" else "a symbolic link"
    assert len(lines) == 1 and f"{out}: is {kind}" in lines[0], lines
    assert p.stdout == "" and victim.read_text() == ""
