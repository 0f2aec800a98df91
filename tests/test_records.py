# SPDX-License-Identifier: BSD-3-Clause
"""The record schema and the atomic JSONL files (nvmelab.results.records)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from nvmelab.results import records

GOOD = {
    "study": "adhoc",
    "tool": "nvmelab",
    "target": "emu://?profile=null",
    "backend": "nvmelab-emu",
    "rw": "randread",
    "iosize": 512,
    "qdepth": 8,
    "nqueues": 1,
    "ndevs": 1,
    "ncpus": 1,
    "runtime_s": 1.0,
    "iops": 1000.0,
    "mibs": 0.49,
    "lat_ns": {"p50": 1, "p99": 2, "p999": 3, "max": 4},
    "cpu_usage": 99.0,
    "cpu_freqs": None,
    "governor": None,
    "turbo": None,
    "smt": 1,
    "thr_sib": 0,
    "stress": 0,
    "repetition": 0,
    "provenance": {
        "git_commit": "x",
        "host": "h",
        "cpu_model": "c",
        "kernel": "k",
        "packages": {},
        "utc": "2026-01-01T00:00:00Z",
        "profile": "null",
        "scale": 1.0,
    },
}


def test_good_record_validates():
    assert records.validate(copy.deepcopy(GOOD)) is not None


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda r: r.pop("iops"), "missing field 'iops'"),
        (lambda r: r.update(qdepth="8"), "field 'qdepth' must be int"),
        (lambda r: r.update(qdepth=0), "'qdepth' must be >= 1"),
        (lambda r: r.update(iops=float("nan")), "'iops' must be a finite number"),
        (lambda r: r.update(iosize=True), "must be a number, got a boolean"),
        (lambda r: r["lat_ns"].pop("p99"), "lat_ns lacks p99"),
        (lambda r: r["provenance"].pop("profile"), "must name its profile and scale"),
        (lambda r: r["provenance"].pop("host"), "provenance lacks host"),
    ],
)
def test_bad_records_name_the_problem(mutate, needle):
    rec = copy.deepcopy(GOOD)
    mutate(rec)
    with pytest.raises(records.RecordError, match=needle.replace("(", r"\(")):
        records.validate(rec, "r")


def test_write_append_load_roundtrip(tmp_path):
    p = tmp_path / "study" / "host" / "runs.jsonl"
    records.write_records(p, [GOOD])
    r2 = copy.deepcopy(GOOD)
    r2["repetition"] = 1
    records.append_records(p, [r2])
    got = records.load_records(tmp_path)
    assert [r["repetition"] for r in got] == [0, 1]
    assert not list(p.parent.glob(".tmp-*"))


def test_invalid_new_record_leaves_file_untouched(tmp_path):
    p = tmp_path / "runs.jsonl"
    records.write_records(p, [GOOD])
    before = p.read_bytes()
    bad = copy.deepcopy(GOOD)
    del bad["iops"]
    with pytest.raises(records.RecordError):
        records.append_records(p, [bad])
    assert p.read_bytes() == before
    assert not list(tmp_path.glob(".tmp-*"))


def test_interrupted_write_leaves_no_partial_file(tmp_path):
    p = tmp_path / "runs.jsonl"
    records.write_records(p, [GOOD])
    before = p.read_bytes()

    def boom():
        yield copy.deepcopy(GOOD)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        records._atomic_write(p, (records.dumps(r) for r in boom()))
    assert p.read_bytes() == before
    assert not list(tmp_path.glob(".tmp-*"))


def test_corrupt_line_is_named(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(records.RecordError, match=r"runs.jsonl:2: not valid JSON"):
        records.load_records(p)


def test_git_commit_is_dirty_for_code_changes_not_for_records(tmp_path):
    """A re-measurement rewrites tracked record files while it runs: that must not mark the
    commit of the code that measured them as +dirty; a changed source file must."""
    import shutil
    import subprocess

    from nvmelab.host import provenance

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "data" / "results" / "s" / "h").mkdir(parents=True)
    (repo / "src").mkdir()
    rec, code = repo / "data" / "results" / "s" / "h" / "standard.jsonl", repo / "src" / "a.py"
    rec.write_text("{}\n")
    code.write_text("x = 1\n")

    def git(*args):
        env = {
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        }
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env={**os.environ, **env})

    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "init")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    provenance.git_commit.cache_clear()
    try:
        rec.unlink()  # moved aside by --replace, then rewritten run by run
        assert provenance.git_commit(repo / "src") == head
        provenance.git_commit.cache_clear()
        code.write_text("x = 2\n")
        assert provenance.git_commit(repo / "src") == head + "+dirty"
    finally:
        provenance.git_commit.cache_clear()


def test_provenance_reads_git_without_taking_the_index_lock(tmp_path):
    """Every run reads the commit of the source checkout: that must not rewrite .git/index (nor
    take .git/index.lock, which makes a concurrent `git commit` there fail). A tracked file whose
    mtime changed makes a plain `git status` refresh and rewrite the index."""
    import shutil
    import subprocess
    import time

    from nvmelab.host import provenance

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    code = repo / "src" / "a.py"
    code.write_text("x = 1\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)
    index = repo / ".git" / "index"
    time.sleep(1.1)
    os.utime(code)  # same content, new mtime: the index entry is stale
    before = (index.stat().st_mtime_ns, index.read_bytes())
    provenance.git_commit.cache_clear()
    try:
        assert provenance.git_commit(repo / "src") is not None
    finally:
        provenance.git_commit.cache_clear()
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before, "provenance rewrote .git/index"
    assert not (repo / ".git" / "index.lock").exists()
    # the check can fail: a plain `git status` does rewrite this index
    subprocess.run(["git", "status", "--porcelain"], cwd=repo, check=True, capture_output=True)
    assert (index.stat().st_mtime_ns, index.read_bytes()) != before


def test_records_that_are_not_utf8_name_the_file_and_line(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_bytes(records.dumps(GOOD).encode() + b'\n{"study": "\xff"}\n')
    with pytest.raises(records.RecordError, match=r"runs.jsonl:2: not UTF-8 text \(byte 12"):
        records.load_records(p)


def test_no_committed_record_comes_from_an_uncommitted_tree():
    """Every record (and benchmark result) under data/results names a commit of a clean tree: a `+dirty`
    git_commit means the code that made it is nowhere in the history (issue 34, item 6). The failure names
    each file."""
    root = Path(__file__).resolve().parents[1] / "data" / "results"
    dirty = {}
    for path in sorted(root.rglob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                commit = str((json.loads(line).get("provenance") or {}).get("git_commit") or "")
                if commit.endswith("+dirty"):
                    dirty.setdefault(str(path.relative_to(root.parents[1])), []).append(n)
    for path in sorted(root.rglob("*.json")):  # benchmark results: one object, its provenance at the top
        doc = json.loads(path.read_text(encoding="utf-8"))
        prov = doc.get("provenance") if isinstance(doc, dict) else None
        if str((prov or {}).get("git_commit") or "").endswith("+dirty"):
            dirty.setdefault(str(path.relative_to(root.parents[1])), []).append(1)
    assert not dirty, "records from an uncommitted tree (+dirty), file: lines: " + "; ".join(
        f"{p}: {v[:5]}{' ...' if len(v) > 5 else ''}" for p, v in dirty.items()
    )
