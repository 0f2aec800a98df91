# SPDX-License-Identifier: BSD-3-Clause
"""Run a sweep on several hosts through Dask distributed.

One Dask worker per test host (start each with ``dask worker SCHEDULER
--nthreads 1 --name <host>``); DaskExecutor keeps exactly one run in flight per
worker, so runs never share a host. Each run executes on its worker with that
host's variables applied and restored there (hostvars.HostControl); the record
comes back to the client, which appends it to
``data/results/<study>/<host>/<preset>.jsonl`` like a local sweep.

Runs are dispatched, not replicated: a run of the plan is done once, on
whichever host is free; resume treats a run recorded by any host as done. For
identical test hosts this spreads one sweep over them; to run the whole sweep on
each host, run it per host (``--target`` per host if the targets differ).

Usage:
    from distributed import Client
    from nvmelab.studies import run_study, DaskExecutor
    with Client("tcp://scheduler:8786") as c:
        run_study("cpu_initiated", "paper", executor=DaskExecutor(c))
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..host.hostvars import HostControl
from .paths import Where
from .runner import Outcome, RunFn, execute_run, host_id
from .spec import Run

log = logging.getLogger(__name__)


def _remote_run(run: Run, run_fn: RunFn, allow_host_changes: bool, file_mib: int, host_name: str | None) -> Outcome:
    """Executed on a worker: one run with the host variables applied and restored there."""
    host = HostControl(allow_changes=allow_host_changes)
    try:
        out = execute_run(run, run_fn, host, file_mib=file_mib)
    finally:
        notes = host.close()
    out.notes.extend(notes)
    if host_name:
        out.host = host_name
    return out


class DaskExecutor:
    """Dispatch runs to the workers of a distributed.Client, one at a time per worker.

    host_from: "hostname" (default) files records under each worker machine's
    host id (nvmelab.studies.runner.host_id, evaluated on the worker);
    "worker-name" uses the Dask worker's name instead (for workers started with
    ``--name <host>``, and for tests where several workers share a machine).
    """

    def __init__(self, client: Any, *, allow_host_changes: bool = True, host_from: str = "hostname"):
        if host_from not in ("hostname", "worker-name"):
            raise ValueError(f"host_from must be 'hostname' or 'worker-name', got {host_from!r}")
        self.client = client
        self.allow_host_changes = allow_host_changes
        self.host_from = host_from

    def _workers(self) -> dict[str, str]:
        info = (
            self.client.scheduler_info(n_workers=-1)["workers"]
            if _takes_n(self.client)
            else self.client.scheduler_info()["workers"]
        )
        if not info:
            raise RuntimeError("the Dask cluster has no workers")
        return {addr: str(w.get("name", addr)) for addr, w in info.items()}

    def execute(self, runs: list[Run], run_fn: RunFn, file_mib: int) -> Iterator[Outcome]:
        from distributed import as_completed

        workers = self._workers()
        queue = deque(runs)
        where: dict[str, str] = {}
        inflight: dict[str, Any] = {}
        ac = as_completed()

        def submit(addr: str) -> None:
            run = queue.popleft()
            name = workers[addr] if self.host_from == "worker-name" else None
            fut = self.client.submit(
                _remote_run,
                run,
                run_fn,
                self.allow_host_changes,
                file_mib,
                name,
                workers=[addr],
                allow_other_workers=False,
                pure=False,
            )
            where[fut.key] = addr
            inflight[fut.key] = fut
            ac.add(fut)

        for addr in workers:
            if queue:
                submit(addr)
        try:
            for fut in ac:
                addr = where.pop(fut.key)
                inflight.pop(fut.key, None)
                out = fut.result()  # re-raises a worker's exception here
                if queue:
                    submit(addr)
                yield out
        finally:  # interrupted or failed: nothing more may run on the hosts
            for fut in inflight.values():
                fut.cancel()

    def done_paths(self, where: Where) -> list[Path]:
        return where.all_hosts()


def _takes_n(client: Any) -> bool:
    import inspect

    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        return False


__all__ = ["DaskExecutor", "host_id"]
