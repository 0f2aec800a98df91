# SPDX-License-Identifier: BSD-3-Clause
"""SIGTERM and SIGHUP as Ctrl-C: the cleanup of a run happens however it is stopped.

    Terminated(signum)          the KeyboardInterrupt a SIGTERM/SIGHUP raises (``.signum``)
    exit_status(exc)            128 + the signal that stopped us (SIGINT for a plain Ctrl-C)
    terminate_as_interrupt()    context manager: while active, SIGTERM and SIGHUP raise Terminated

Python's default for SIGTERM and SIGHUP is to die on the spot: no ``finally`` runs, so stress-ng,
changed host variables and generated images outlive the run (a ``kill``, ``timeout``, a CI
cancel, a closed terminal). Raised as a KeyboardInterrupt subclass, they take the path Ctrl-C
takes: every ``finally`` and context manager unwinds, finished records stay, and the CLI prints
one line and exits 128 + n. A second SIGTERM/SIGHUP while the first is being handled is ignored
(logged), so cleanup is not cut short; SIGKILL still stops everything (what it leaves behind is
bounded: stress-ng has a ``--timeout``, stale scratch files are removed by the next run).

Caveat: handlers can only be installed from the main thread; elsewhere the context manager does
nothing (the signals keep whatever handling the main thread gave them).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType

log = logging.getLogger(__name__)

#: The signals handled like Ctrl-C besides SIGINT itself.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """Raised by a SIGTERM or SIGHUP while terminate_as_interrupt is active."""

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(f"stopped by {signal.Signals(signum).name}")


def exit_status(exc: BaseException) -> int:
    """The exit status for a run stopped by `exc`: 128 + its signal (SIGINT unless it says)."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def signal_name(exc: BaseException) -> str:
    """SIGINT, SIGTERM or SIGHUP: the signal that raised `exc`."""
    return signal.Signals(int(getattr(exc, "signum", signal.SIGINT))).name


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the body runs, SIGTERM and SIGHUP raise Terminated (once; a repeat is ignored until
    the body has unwound). The previous handlers come back afterwards. Nests: an inner use in the
    same thread leaves the outer handlers in place."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in TERMINATING}
    if all(getattr(h, "_nvmelab_terminate", False) for h in previous.values()):
        yield  # an outer terminate_as_interrupt already handles them
        return
    fired: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired:
            log.warning(
                "%s again: still cleaning up after %s", signal.Signals(signum).name, signal.Signals(fired[0]).name
            )
            return
        fired.append(signum)
        raise Terminated(signum)

    handler._nvmelab_terminate = True  # type: ignore[attr-defined]
    for s in TERMINATING:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
