# SPDX-License-Identifier: BSD-3-Clause
"""The scratch folder, and temporary files there that cannot outlive their process for long.

    scratch_dir()               $NVMELAB_SCRATCH, else /dev/shm/nvmelab-<uid> (memory), else $TMPDIR/...
    temp_path(stem, suffix)     a path for this process's temporary file: <stem>.<host>.pid<N><suffix>
    remove_own()                delete the temporary files this process named (a sweep's end, any exit)
    remove_stale()              delete the temporary files of processes of this host that are gone

A generated image or temporary file carries its host and pid in its name, so that whatever a
killed run leaves behind (SIGKILL runs no cleanup) is recognised and removed by the next run:
`remove_stale` deletes ``*.<host>.pid<N>*`` files whose process N no longer exists on this host
(a reused pid keeps a stale file until that process is gone too; never the other way round).
Persistent scratch data (a study's ``file://{scratch}/x.img`` target, kept between runs on
purpose) has no pid in its name and is never touched.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import socket
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

_OWN: set[Path] = set()
_NAME_RE = re.compile(r"\.(?P<host>[A-Za-z0-9_-]+)\.pid(?P<pid>\d+)(?:\.|$)")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", socket.gethostname() or "host").strip("_") or "host"


def scratch_dir() -> Path:
    """Where file:// study targets and generated images live: $NVMELAB_SCRATCH, else a folder on
    /dev/shm (memory), else the temporary directory."""
    env = os.environ.get("NVMELAB_SCRATCH")
    if env:
        base = Path(env)
    elif Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
        base = Path("/dev/shm") / f"nvmelab-{os.getuid()}"
    else:
        base = Path(tempfile.gettempdir()) / f"nvmelab-{os.getuid()}"
    base.mkdir(parents=True, exist_ok=True)
    return base


def temp_path(stem: str, suffix: str = "", folder: Path | None = None) -> Path:
    """A path for a temporary file of this process in `folder` (default: the scratch folder),
    named so `remove_stale` finds it once this process is gone; `remove_own` deletes it."""
    if "/" in stem or "/" in suffix:
        raise ValueError(f"temporary file name {stem!r}{suffix!r}: no '/' allowed")
    path = (folder or scratch_dir()) / f"{stem}.{_host()}.pid{os.getpid()}{suffix}"
    _OWN.add(path)
    return path


def forget(path: Path) -> None:
    """`path` was deleted by its user: remove_own need not."""
    _OWN.discard(path)


def remove_own() -> list[Path]:
    """Delete every temporary file this process named with temp_path (those that exist)."""
    gone = []
    for path in sorted(_OWN):
        try:
            path.unlink()
            gone.append(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("%s: could not remove: %s", path, exc.strerror or exc)
            continue
        _OWN.discard(path)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(folder: Path | None = None) -> list[Path]:
    """Delete the temporary files in `folder` (default: the scratch folder) left by processes of
    this host that no longer exist; returns what was removed (each logged)."""
    folder = folder or scratch_dir()
    me = _host()
    gone = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return gone
    for path in entries:
        m = _NAME_RE.search(path.name)
        if not m or m["host"] != me or _alive(int(m["pid"])) or not path.is_file():
            continue
        try:
            path.unlink()
        except OSError:
            continue
        log.info("removed %s, left by process %s that is gone", path, m["pid"])
        gone.append(path)
    return gone


atexit.register(remove_own)
