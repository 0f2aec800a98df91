# SPDX-License-Identifier: BSD-3-Clause
"""What a sweep holds and gives back on any exit (the runner's one place for it).

    with SweepGuard(wait=False) as guard:
        guard.lock(paths)                 the sweep lock of each records file (records.sweep_lock)
        for out in guard.closing(gen):    an executor's outcomes, the generator closed on any exit
            ...

On entry: SIGTERM and SIGHUP raise like Ctrl-C (host.signals), and the scratch files of dead
processes are removed (host.scratch.remove_stale). On exit, however the body ended (return, an
error, Ctrl-C, SIGTERM, SIGHUP), in this order: the executor's generator is closed (the local
executor stops stress-ng and restores host variables in its ``finally``), the records locks are
released, this process's scratch files are removed, the signal handlers restored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..host import scratch, signals
from ..results import records as _records


class SweepGuard:
    """Locks, signal handling and cleanup of one sweep (module docstring)."""

    def __init__(self, *, wait: bool = False):
        self.wait = wait
        self.locked: set[Path] = set()
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> SweepGuard:
        self._stack.enter_context(signals.terminate_as_interrupt())
        try:
            self._stack.callback(scratch.remove_own)
            scratch.remove_stale()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def lock(self, paths: Iterable[Path]) -> None:
        """Take the sweep lock of each records file not locked yet (RecordsBusyError when another
        sweep holds one and wait is False). A records path or lock that is a symbolic link, a FIFO or
        anything but a regular file is refused first (RecordError naming it), before any run."""
        for p in paths:
            p = Path(p)
            if p not in self.locked:
                _records.check_path(p)
                self._stack.enter_context(_records.sweep_lock(p, wait=self.wait))
                self.locked.add(p)

    def closing(self, gen: Iterator[Any]) -> Iterator[Any]:
        """`gen`, closed (its ``finally`` run) when the guard exits, whatever happened before."""
        close = getattr(gen, "close", None)
        if close is not None:
            self._stack.callback(close)
        return gen
