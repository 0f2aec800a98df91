# SPDX-License-Identifier: BSD-3-Clause
"""Fuzz harness (atheris, libFuzzer's engine for Python) of the records reader and appender,
nvmelab.results.records: any bytes as a records file.

Each input is written as a records file in a private directory (on /dev/shm when there is one, where
fsync costs nothing), then:

* ``iter_records`` (with and without ``check``) and ``load_records`` read it: they may only refuse it
  with ``RecordError`` (a bad line, named) and otherwise yield JSON objects;
* ``append_records`` appends one valid record: it may refuse a file that is not a records file
  (``RecordError``, the file untouched), and otherwise no record is lost: the records that could be
  read before are read again, in order, followed by the new one, and a last line moved aside (a
  ``.tail-`` file) holds exactly the bytes that were cut.

Any other exception (a RecursionError from deep JSON, a KeyError, ...), or a broken promise above, is a
finding: atheris stops with the input written as crash-<sha1>.

usage: python tests/fuzz/fuzz_records.py [libFuzzer options] CORPUS_DIR   (make fuzz runs it)
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from nvmelab.results import records as R

logging.disable(logging.CRITICAL)  # the reader's warnings (an unfinished last line) are expected here

BASE = Path(tempfile.mkdtemp(prefix="fuzz-records-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
NEW = {
    "study": "fuzz",
    "tool": "nvmelab",
    "target": "file:///dev/null",
    "backend": "psync",
    "rw": "randread",
    "iosize": 4096,
    "qdepth": 1,
    "nqueues": 1,
    "ndevs": 1,
    "ncpus": 1,
    "runtime_s": 1.0,
    "iops": 1.0,
    "mibs": 1.0,
    "lat_ns": {"p50": 1, "p99": 1, "p999": 1, "max": 1},
    "cpu_usage": None,
    "cpu_freqs": None,
    "governor": None,
    "turbo": None,
    "smt": None,
    "thr_sib": 0,
    "stress": 0,
    "repetition": 0,
    "provenance": {},
    "run_key": "fuzz-new-record",
}


def _valid_new_record() -> dict:
    """The record every input appends (the appender's own validate() takes it)."""
    rec = dict(NEW, provenance={k: "fuzz" for k in R.PROVENANCE_KEYS})
    return R.validate(rec)


RECORD = None


def _read(path: Path, check: bool) -> list | None:
    """The records of path, or None when the reader refuses the file (RecordError only)."""
    try:
        out = list(R.iter_records(path, check=check))
    except R.RecordError:
        return None
    for rec in out:
        if not isinstance(rec, dict):
            raise AssertionError(f"iter_records yielded a {type(rec).__name__}, not a record")
    return out


def one_input(data: bytes) -> None:
    global RECORD
    if RECORD is None:
        RECORD = _valid_new_record()
    for p in BASE.iterdir():
        p.unlink()
    path = BASE / "r.jsonl"
    path.write_bytes(data)
    before = _read(path, check=False)
    _read(path, check=True)
    try:
        loaded = R.load_records(path)
    except R.RecordError:
        loaded = None
    if (loaded is None) != (before is None):
        raise AssertionError("load_records and iter_records disagree on whether the file is readable")
    try:
        R.append_records(path, [RECORD])
    except R.RecordError:
        if path.read_bytes() != data:
            raise AssertionError("a refused append changed the file") from None
        return
    after = _read(path, check=False)
    if before is None:  # a bad line earlier in the file: the append does not read (or mend) it
        return
    if after is None:
        raise AssertionError("a readable file is not readable after an append")
    if not after or after[-1] != RECORD:
        raise AssertionError("the appended record is not the last record of the file")
    if before is not None and after[: len(before)] != before:
        raise AssertionError(f"records lost by an append: {len(before)} before, {len(after) - 1} kept")
    aside = [p for p in BASE.iterdir() if ".tail-" in p.name]
    if len(aside) > 1:
        raise AssertionError(f"one append moved {len(aside)} tails aside")
    if aside:  # the tail cut from the file, and a newline
        tail = aside[0].read_bytes()[:-1]
        if not data.endswith(tail) or not path.read_bytes().startswith(data[: len(data) - len(tail)]):
            raise AssertionError("the moved-aside tail is not what was cut from the file")


def main() -> None:
    try:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
    finally:
        shutil.rmtree(BASE, ignore_errors=True)


if __name__ == "__main__":
    main()
