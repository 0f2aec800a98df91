# SPDX-License-Identifier: BSD-3-Clause
"""The run record: one JSON object per run and repetition, and the JSONL files that hold them.

A record is a superset of the published AiSIO records (see data/reference/README.md):

    study, tool, target, backend, rw, iosize, qdepth, nqueues, ndevs, ncpus,
    runtime_s, iops, mibs, lat_ns{p50,p99,p999,max}, cpu_usage, cpu_freqs,
    governor, turbo, smt, thr_sib, stress, repetition, provenance{...}

cpu_usage is the CPU the host-side I/O stack used over the window, in percent of one CPU (the
perf engine: the whole process for the kernel paths, whose io_uring workers do part of the I/O,
the engine threads for the user-space driver, whose emulated device runs in threads of its own).

The sweep runner adds run_key, preset, sweeps, host_control (what the host let it vary),
host_flags (a requested host value the engine saw otherwise) and host_cpu_usage: the whole
host's CPU use while the engine ran, in percent of one CPU like cpu_usage, so that
host_cpu_usage - cpu_usage is what everything else on the host used (stress-ng included):
the check that a record was taken on a quiet host.

A failed point (nvmelab.studies.isolate: a run that hung, crashed or raised in its own process)
is a record too, so that a resumed sweep does not repeat it: its parameters, iops/mibs 0, and
failed = {kind, reason, seconds}. Analyses leave it out (nvmelab.studies.runner.load_results).

Writing (book/framework.md, "Records files"):
* `append_records` appends the new lines with one write and fsyncs them: O(1) in the size of the
  file. An exclusive flock on the records file serialises writers across processes (two
  `nvmelab perf run --json` loops, two sweeps). A last line left unfinished by a kill mid-write
  is dropped before the next append (it was never a finished record); a failed write (a full
  disk) is cut back to the records that were there and the error names the file.
* `write_records` replaces a whole file atomically (temporary file, fsync, rename).
* `sweep_lock(path)` is held by a sweep for the whole sweep: a second sweep on the same records
  file is refused, naming the file and the holder's pid (or waits with ``wait=True``).
* Records and lock files are opened with O_NOFOLLOW and must be regular files (`open_regular`): a
  planted symbolic link or a FIFO is refused at once, naming the path, its target untouched. A lock
  another process holds is waited for with a warning naming the holders after LOCK_NOTICE_S (a
  foreign ``flock`` is never a silent stall); Ctrl-C ends the wait.

Reading: `iter_records` names the file and line of anything it cannot use, and ignores an
unfinished last line (a write in progress, or one cut short by a kill) with a warning.
`load_records` and `unique_records` keep the first record of each ``run_key`` and say how many
duplicates they dropped.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..driver import uri as _uri

log = logging.getLogger(__name__)

#: How deeply a line's JSON may nest (the records here nest 5 levels). Judged on the text before parsing, never
#: by the interpreter's recursion limit: that one depends on how deep the caller's stack already is, so the same
#: line would be read by one reader and refused by another (or be refused as deep before it is seen torn).
MAX_NESTING = 64
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


class _TooDeep(ValueError):
    """JSON nested deeper than MAX_NESTING (a ValueError, so tail checks treat it as 'not a record')."""


def _nests_too_deep(text: str) -> bool:
    """Whether the brackets of text (outside its JSON strings) open more than MAX_NESTING deep."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return False
    depth = 0
    for b in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if b in "[{" else -1
        if depth > MAX_NESTING:
            return True
    return False


def _loads(text: str, pos: int | None = None) -> Any:
    """json.loads(text) (or, with pos, raw_decode from pos: (obj, end)), refusing JSON nested more than
    MAX_NESTING deep with _TooDeep before parsing, whatever the caller's stack depth."""
    if _nests_too_deep(text if pos is None else text[pos:]):
        raise _TooDeep(f"JSON nested more than {MAX_NESTING} levels deep")
    try:
        return json.loads(text) if pos is None else json.JSONDecoder().raw_decode(text, pos)
    except RecursionError:  # a caller already near the interpreter's limit
        raise _TooDeep(f"JSON nested more than {MAX_NESTING} levels deep") from None


#: Required keys and the types they may hold (None allowed where listed).
SCHEMA: dict[str, tuple[type, ...]] = {
    "study": (str,),
    "tool": (str,),
    "target": (str,),
    "backend": (str,),
    "rw": (str,),
    "iosize": (int,),
    "qdepth": (int,),
    "nqueues": (int,),
    "ndevs": (int,),
    "ncpus": (int,),
    "runtime_s": (int, float),
    "iops": (int, float),
    "mibs": (int, float),
    "lat_ns": (dict, type(None)),
    "cpu_usage": (int, float, type(None)),
    "cpu_freqs": (list, type(None)),
    "governor": (str, type(None)),
    "turbo": (int, bool, type(None)),
    "smt": (int, bool, type(None)),
    "thr_sib": (int, bool),
    "stress": (int, bool),
    "repetition": (int,),
    "provenance": (dict,),
}
LAT_KEYS = ("p50", "p99", "p999", "max")
#: Provenance keys every record carries (values may be None where unknown).
PROVENANCE_KEYS = ("git_commit", "host", "cpu_model", "kernel", "packages", "utc")


#: Bytes per MiB (the records' `mibs`).
MIB = 1 << 20


def measured_fields(res: dict[str, Any]) -> dict[str, Any]:
    """The measured fields of a record from a C engine's raw result (window_s, iops,
    bytes_per_s, ios, errors, first_error), rounded as records keep them."""
    return {
        "runtime_s": round(res["window_s"], 6),
        "iops": round(res["iops"], 2),
        "mibs": round(res["bytes_per_s"] / MIB, 2),
        "ios": res["ios"],
        "errors": res["errors"],
        "first_error": res["first_error"],
    }


def engine_record(
    *,
    study: str,
    tool: str,
    target: str,
    backend: str,
    rw: str,
    iosize: int,
    qdepth: int,
    runtime_s: float,
    iops: float,
    mibs: float,
    nqueues: int = 1,
    ndevs: int = 1,
    ncpus: int = 1,
    ios: int | None = None,
    errors: int = 0,
    first_error: Any = None,
    host: dict[str, Any] | None = None,
    thr_sib: Any = 0,
    stress: Any = 0,
    repetition: int = 0,
    warmup: float = 0.0,
    seed: int | None = None,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every field of SCHEMA, in one place for all engines (perf, gpu, blksum, tier).

    `host` is the host state found before the run (nvmelab.host.cpus.host_state: governor,
    turbo, smt; None = not read). lat_ns, cpu_usage and cpu_freqs start as None: the engine
    sets what it measured, adds its own fields, then validates."""
    host = host or {}
    return {
        "study": study,
        "tool": tool,
        "target": target,
        "backend": backend,
        "rw": rw,
        "iosize": iosize,
        "qdepth": qdepth,
        "nqueues": nqueues,
        "ndevs": ndevs,
        "ncpus": ncpus,
        "runtime_s": runtime_s,
        "iops": iops,
        "mibs": mibs,
        "lat_ns": None,
        "cpu_usage": None,
        "cpu_freqs": None,
        "governor": host.get("governor"),
        "turbo": host.get("turbo"),
        "smt": host.get("smt"),
        "thr_sib": int(bool(thr_sib)),
        "stress": int(bool(stress)),
        "repetition": repetition,
        "ios": ios,
        "errors": errors,
        "first_error": first_error,
        "warmup_s": float(warmup),
        "seed": seed,
        "provenance": provenance if provenance is not None else {},
    }


class RecordError(ValueError):
    """A record or record file that cannot be used; the message names where and what."""


def validate(rec: dict[str, Any], where: str = "record") -> dict[str, Any]:
    """Check one record against SCHEMA; raise RecordError naming the first problem."""
    if not isinstance(rec, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    for key, types in SCHEMA.items():
        if key not in rec:
            raise RecordError(f"{where}: missing field {key!r}")
        val = rec[key]
        if (
            isinstance(val, bool)
            and bool not in types
            and int in types
            and key not in ("turbo", "smt", "thr_sib", "stress")
        ):
            raise RecordError(f"{where}: field {key!r} must be a number, got a boolean")
        if not isinstance(val, types):
            names = "/".join(t.__name__ for t in types)
            raise RecordError(f"{where}: field {key!r} must be {names}, got {type(val).__name__}")
    for key in ("iosize", "qdepth", "nqueues", "ndevs", "ncpus"):
        if rec[key] < 1:
            raise RecordError(f"{where}: field {key!r} must be >= 1, got {rec[key]}")
    for key in ("iops", "mibs", "runtime_s"):
        v = float(rec[key])
        if not math.isfinite(v) or v < 0:
            raise RecordError(f"{where}: field {key!r} must be a finite number >= 0, got {rec[key]}")
    if rec["lat_ns"] is not None:
        missing = [k for k in LAT_KEYS if k not in rec["lat_ns"]]
        if missing:
            raise RecordError(f"{where}: lat_ns lacks {', '.join(missing)}")
    missing = [k for k in PROVENANCE_KEYS if k not in rec["provenance"]]
    if missing:
        raise RecordError(f"{where}: provenance lacks {', '.join(missing)}")
    if rec.get("failed") is not None:
        f = rec["failed"]
        if not isinstance(f, dict) or not {"kind", "reason"} <= set(f):
            raise RecordError(f"{where}: field 'failed' must be an object with kind and reason")
        return rec  # a failed point measured nothing: no profile/scale was reported
    if _uri.is_emulated(rec["target"]):
        prov = rec["provenance"]
        if not prov.get("profile") or prov.get("scale") is None:
            raise RecordError(f"{where}: an emulated target must name its profile and scale in provenance")
    return rec


def _atomic_write(path: Path, lines: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".jsonl", dir=path.parent)
    try:
        # mkstemp creates 0600; a results file is as readable as any other file the user writes.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def dumps(rec: dict[str, Any]) -> str:
    return json.dumps(rec, sort_keys=True, separators=(",", ":"), allow_nan=False)


def write_records(path: str | os.PathLike, records: Iterable[dict[str, Any]], *, check: bool = True) -> Path:
    """Write records to `path` (JSONL), replacing it atomically."""
    path = Path(path)
    recs = list(records)
    if check:
        for i, r in enumerate(recs):
            validate(r, f"{path} record {i}")
    check_path(path)  # a link or a FIFO in its place is refused, not replaced
    _atomic_write(path, (dumps(r) for r in recs))
    return path


def _tail_state(fd: int, size: int) -> tuple[int, bytes]:
    """Where the last complete line of an open records file ends, and the bytes after it (an
    unfinished last line; empty when the file ends in a newline). Reads only the tail."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size, b""
    chunk = 1 << 16
    end = size
    tail = b""
    while end > 0:
        start = max(0, end - chunk)
        block = os.pread(fd, end - start, start)
        nl = block.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1, block[nl + 1 :] + tail
        tail = block + tail
        end = start
    return 0, tail


def _finish_tail(fd: int, path: Path, size: int) -> int:
    """Make the file end in a newline before an append; returns its new size.

    An unfinished last line that is a whole JSON object (a file written without a final newline)
    gets its newline; the start of a record ('{...', no whole object in it) is what a kill
    mid-write left, and is cut off with a warning; a last line that begins with whole records
    (two written on one line, say) is no torn write: it is moved aside to ``<file>.tail-<utc>``,
    the count of its whole records in the warning, never dropped; a last line of NUL bytes only (a
    crash after the file grew, before its data landed) is moved aside the same way, the count of its
    NULs in the warning; anything else is not a records file: RecordError, the file untouched."""
    keep, tail = _tail_state(fd, size)
    if not tail:
        return size
    try:  # decoded first: json.loads(bytes) would guess UTF-16 or skip a BOM, which no reader here accepts
        whole = isinstance(_loads(tail.decode("utf-8")), dict)
    except ValueError:  # UnicodeDecodeError is a ValueError
        whole = False
    if whole:
        os.write(fd, b"\n")
        return size + 1
    if not tail.strip(b"\0"):  # a crash after the file grew, before its data landed: zeros, not a record
        aside = _move_aside(path, tail)
        log.warning(
            "%s: its last line was %d NUL bytes, no record (a crash after the file grew, before its data landed): "
            "moved to %s before appending",
            path,
            len(tail),
            aside.name,
        )
        os.ftruncate(fd, keep)
        return keep
    if not tail.startswith(b"{"):  # not the start of a record: not a records file, touch nothing
        raise RecordError(
            f"{path}: does not end with a whole record (its last {len(tail)} bytes are not JSON); "
            "not a records file? nothing was appended"
        )
    n = _whole_objects(tail)
    if n:
        aside = _move_aside(path, tail)
        log.warning(
            "%s: its last line held %d whole record(s) and no newline (%d bytes): moved to %s before appending",
            path,
            n,
            len(tail),
            aside.name,
        )
    else:
        log.warning(
            "%s: dropped an unfinished last line (%d bytes, a write cut short) before appending", path, len(tail)
        )
    os.ftruncate(fd, keep)
    return keep


def _move_aside(path: Path, tail: bytes) -> Path:
    """Write `tail` (and a newline) to a new ``<file>.tail-<utc>-<pid>`` next to `path`, durably; its path."""
    aside = path.with_name(f"{path.name}.tail-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}")
    fd = open_regular(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, "records tail file")  # never over an earlier one
    with os.fdopen(fd, "wb") as f:
        f.write(tail + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return aside


def _whole_objects(tail: bytes) -> int:
    """How many whole JSON objects a line begins with, one after the other (0: a record cut short)."""
    try:
        text = tail.decode()
    except UnicodeDecodeError:
        return 0
    pos, n = 0, 0
    while pos < len(text):
        try:
            obj, pos = _loads(text, pos)
        except ValueError:
            break
        if not isinstance(obj, dict):
            break
        n += 1
    return n


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


#: After this many seconds waiting for another process's flock, say who holds it (then keep waiting).
LOCK_NOTICE_S = 1.0
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
}


def open_regular(
    path: str | os.PathLike, flags: int, what: str = "records file", mode: int = 0o666, *, follow: bool = False
) -> int:
    """os.open a records or lock file without following a symbolic link (O_NOFOLLOW) and without
    blocking on a FIFO (O_NONBLOCK, cleared again); anything but a regular file is closed and refused:
    RecordError naming the path and what it is. /dev/null and /dev/full stay usable (character devices
    that never block): a record appended there goes nowhere, or fails with ENOSPC naming the file.
    ``follow=True`` (reading only) opens through a link."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | nofollow | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise RecordError(
                f"{path}: is a symbolic link (to {os.readlink(path)}); a {what} is never opened through a link "
                "(remove it, or name the file itself)"
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) and str(path) not in ("/dev/null", "/dev/full"):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise RecordError(f"{path}: is {kind}, not a regular file; a {what} must be a regular file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_path(path: str | os.PathLike, what: str = "records file") -> None:
    """Refuse at once what open_regular would refuse later (a symbolic link, a FIFO, a directory): RecordError
    naming the path, before a run whose record could not be kept. A path that does not exist yet is fine."""
    with contextlib.suppress(FileNotFoundError):
        os.close(open_regular(path, os.O_RDONLY, what))


def lock_holders(fd: int) -> list[str]:
    """Who holds a lock on the file open at `fd`: "pid N (command)" for each lock /proc/locks lists on its
    inode (empty where /proc/locks cannot be read)."""
    st = os.fstat(fd)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    out: list[str] = []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[5] != dev:
            continue  # "->" marks a waiter, not a holder
        pid = parts[4]
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
        except OSError:
            cmd = ""
        who = f"pid {pid}" + (f" ({cmd})" if cmd else "")
        if who not in out and pid != str(os.getpid()):
            out.append(who)
    return out


def flock_waiting(fd: int, path: str | os.PathLike, what: str) -> None:
    """An exclusive flock on `fd`, waited for as long as it takes: after LOCK_NOTICE_S a warning names
    `path`, `what` holds it and the holders /proc/locks lists, so a foreign lock is never a silent stall.
    The wait sleeps between tries, so Ctrl-C (and SIGTERM raised as an interrupt) ends it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    t0, told, pause = time.monotonic(), False, 0.001
    while True:
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        if not told and time.monotonic() - t0 >= LOCK_NOTICE_S:
            told = True
            who = ", ".join(lock_holders(fd)) or "a process /proc/locks does not name"
            log.warning("%s: waiting for the lock on the %s, held by %s", path, what, who)
    if told:
        log.warning("%s: got the lock on the %s after %.1f s", path, what, time.monotonic() - t0)


def append_records(path: str | os.PathLike, records: Iterable[dict[str, Any]], *, check: bool = True) -> Path:
    """Append records to `path` (created if missing): one write and one fsync under an exclusive
    flock, whatever the size of the file. On any failure (a full disk, an interrupt mid-write) the
    file is cut back to the records it had, and an OSError names the file."""
    path = Path(path)
    new = list(records)
    if check:
        for i, r in enumerate(new):
            validate(r, f"new record {i} for {path}")
    data = "".join(dumps(r) + "\n" for r in new).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        flock_waiting(fd, path, "records file")
        st = os.fstat(fd)
        created = st.st_size == 0
        size = _finish_tail(fd, path, st.st_size)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # keep exactly the records that were there
            if isinstance(exc, OSError):
                why = exc.strerror or str(exc)
                raise OSError(
                    exc.errno, f"{why} (appending {len(new)} record(s); the records already in it are kept)", str(path)
                ) from None
            raise
    finally:
        os.close(fd)  # releases the lock
    if created:  # a new file: make its directory entry durable too
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return path


class RecordsBusyError(RuntimeError):
    """Another sweep holds the lock of a records file."""


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file of a records file: ``.<name>.lock`` next to it (git ignores it)."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def sweep_lock(path: str | os.PathLike, *, wait: bool = False) -> Iterator[Path]:
    """Hold the sweep lock of records file `path` (an flock on `lock_path(path)`, which holds the
    holder's pid) for the body. Taken: RecordsBusyError naming the file and the holder's pid, or,
    with ``wait=True``, wait for it. The kernel drops the lock when the holder dies, however it dies."""
    path = Path(path)
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = open_regular(lock, os.O_RDWR | os.O_CREAT, "sweep lock file")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            others = [w for w in lock_holders(fd) if not w.startswith(f"pid {holder} ") and w != f"pid {holder}"]
            if others:  # a lock this file's pid does not explain (a foreign flock, a stale pid)
                holder += f"; the lock is held by {', '.join(others)}"
            if not wait:
                raise RecordsBusyError(
                    f"{path}: another sweep (pid {holder}) is writing these records; "
                    "let it finish (or stop it), or pass --wait to run after it"
                ) from None
            log.warning("%s: waiting for the sweep of pid %s to finish", path, holder)
            flock_waiting(fd, lock, "sweep lock")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)


def iter_records(path: str | os.PathLike, *, check: bool = False) -> Iterator[dict[str, Any]]:
    """Yield the records of one JSONL file; a bad line raises RecordError naming file and line.

    An unfinished last line (no newline, not a whole JSON object: a write in progress, or one a
    kill cut short) is not a record: it is skipped with a warning. Anything but a regular file (a
    FIFO, which would block forever) is refused at once; reading may follow a symbolic link."""
    path = Path(path)
    with os.fdopen(open_regular(path, os.O_RDONLY, follow=True), "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RecordError(f"{path}:{lineno}: not UTF-8 text (byte {exc.start + 1}: {exc.reason})") from None
            if not line.strip():
                continue
            try:
                rec = _loads(line)
            except _TooDeep:
                raise RecordError(f"{path}:{lineno}: JSON nested too deeply to be a record") from None
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):
                    log.warning("%s:%d: ignoring an unfinished last line (%d bytes)", path, lineno, len(raw))
                    return
                raise RecordError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if check:
                validate(rec, f"{path}:{lineno}")
            elif not isinstance(rec, dict):
                raise RecordError(f"{path}:{lineno}: expected a JSON object")
            yield rec


def unique_records(records: Iterable[dict[str, Any]], where: str = "records") -> list[dict[str, Any]]:
    """The records with the first of each ``run_key`` kept (records without one are all kept); a
    warning names `where` and how many duplicates were dropped (two sweeps that wrote one file)."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    dropped = 0
    for rec in records:
        key = rec.get("run_key")
        if key is not None:
            if key in seen:
                dropped += 1
                continue
            seen.add(key)
        out.append(rec)
    if dropped:
        log.warning("%s: %d duplicate record(s) of the same run key ignored (the first of each kept)", where, dropped)
    return out


def load_records(
    paths: str | os.PathLike | Iterable[str | os.PathLike], *, check: bool = False
) -> list[dict[str, Any]]:
    """Load records from a file, a directory (all *.jsonl below it), or a list of either; within
    each file, the first record of each run key (unique_records)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[dict[str, Any]] = []
    for p in paths:
        p = Path(p)
        files = sorted(f for f in p.rglob("*.jsonl") if not f.name.startswith(".tmp-")) if p.is_dir() else [p]
        for f in files:
            out.extend(unique_records(iter_records(f, check=check), str(f)))
    return out
