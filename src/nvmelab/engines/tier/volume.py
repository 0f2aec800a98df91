# SPDX-License-Identifier: BSD-3-Clause
"""Volumes over NVMe namespaces: RAID-0 striping, a single device, a linear concatenation.

A :class:`Volume` turns byte ranges of one logical address space into NVMe commands on the
namespaces under it and runs them concurrently: one queue pair per device, up to ``qdepth - 1``
commands outstanding on each, all driven from the calling thread (the emulated target processes
commands inline on doorbell writes and polls, so one thread keeps every device busy)::

    with nvmelab.open("emu://?ndev=4&nsze=64MiB&lbads=4096") as t:
        with Volume.open(t, layout="raid0", chunk=64 * 1024, qdepth=32) as vol:
            vol.write(0, data)              # bounce through a staging DMA buffer
            back = vol.read(0, data.nbytes)
            with vol.alloc(1 << 20) as buf: # zero-copy: requests on DMA memory
                vol.io([Request("r", 0, 1 << 20, buf, 0)])

Layouts (``layout=``):

* ``raid0``: chunk ``c`` of the volume lives on device ``c % n`` at chunk ``c // n``; the capacity
  is ``n`` times the smallest namespace, rounded down to whole chunks.
* ``single``: one namespace, as is (the baseline).
* ``linear``: the namespaces one after the other (capacity = their sum).

Offsets and lengths are in bytes and must be multiples of the LBA size, which all namespaces share.
Data moves only through :class:`~nvmelab.driver.DmaBuffer` memory of the namespaces' target
(:meth:`Volume.alloc`); :meth:`Volume.read`/:meth:`Volume.write` bounce other memory through a
staging buffer. A failed command does not stop the others: :meth:`Volume.io` reaps every
completion, then raises :class:`TierIOError` naming each failed request and its NVMe status (or
system error), so a caller knows exactly which bytes did not reach the devices.

Per-device counters (:attr:`Volume.stats`) give bytes and commands read and written, the numbers
behind the per-device throughput of the study.

Caveat: all namespaces must belong to controllers of one target (one ``nvmelab.open`` URI),
because DMA memory is allocated per target.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["Volume", "Request", "TierIOError", "DeviceStats", "LAYOUTS"]

LAYOUTS = ("raid0", "single", "linear")
#: Default RAID-0 chunk (mdadm's default is 512 KiB; a smaller chunk spreads page traffic wider).
DEFAULT_CHUNK = 64 * 1024
#: Default queue depth per device (entries per queue; depth - 1 commands in flight).
DEFAULT_QDEPTH = 32
#: Seconds after which an outstanding command completes with TimeoutError.
DEFAULT_CMD_TIMEOUT_S = 30.0
#: Staging buffer granularity for read()/write() of non-DMA memory.
STAGING_MIN = 1 << 20


class TierIOError(IOError):
    """One or more requests of a batch failed on a device.

    Attributes:
        failures: list of ``(request_index, request, error)``; ``error`` is the
            :class:`~nvmelab.driver.errors.NvmeError` or OSError the device's completion carried.
    """

    def __init__(self, failures: list, what: str = "volume I/O") -> None:
        self.failures = failures
        first = failures[0]
        more = f" (and {len(failures) - 1} more failed request(s))" if len(failures) > 1 else ""
        super().__init__(f"{what}: request {first[0]} ({first[1].describe()}) failed: {first[2]}{more}")


@dataclass(frozen=True)
class Request:
    """One byte range of the volume to read into / write from ``buf[buf_offset:]``.

    ``op`` is ``"r"`` or ``"w"``; ``buf`` a DmaBuffer of the volume's target.
    """

    op: str
    offset: int
    nbytes: int
    buf: Any
    buf_offset: int = 0

    def describe(self) -> str:
        kind = "read" if self.op == "r" else "write"
        return f"{kind} of {self.nbytes} bytes at volume offset {self.offset}"


@dataclass
class DeviceStats:
    """Counters of one device of a volume (since creation or the last reset_stats())."""

    read_bytes: int = 0
    write_bytes: int = 0
    reads: int = 0
    writes: int = 0
    errors: int = 0

    def as_dict(self) -> dict:
        return {
            "read_bytes": self.read_bytes,
            "write_bytes": self.write_bytes,
            "reads": self.reads,
            "writes": self.writes,
            "errors": self.errors,
        }


@dataclass
class _Dev:
    ns: Any
    qp: Any
    max_bytes: int
    stats: DeviceStats = field(default_factory=DeviceStats)


class Volume:
    """A byte-addressed volume over NVMe namespaces (see the module doc)."""

    def __init__(
        self,
        namespaces: Sequence[Any],
        layout: str = "raid0",
        chunk: int = DEFAULT_CHUNK,
        qdepth: int = DEFAULT_QDEPTH,
        timeout: float = DEFAULT_CMD_TIMEOUT_S,
    ) -> None:
        """Build a volume over ``namespaces`` (driver :class:`~nvmelab.driver.Namespace` objects).

        Args:
            layout: one of :data:`LAYOUTS`.
            chunk: RAID-0 stripe chunk in bytes (a multiple of the LBA size); ignored otherwise.
            qdepth: queue entries per device; ``qdepth - 1`` commands in flight per device.
            timeout: per-command timeout in seconds.
        """
        namespaces = list(namespaces)
        if layout not in LAYOUTS:
            raise ValueError(f"layout: {layout!r} is not one of {', '.join(LAYOUTS)}")
        if not namespaces:
            raise ValueError("namespaces: a volume needs at least one namespace")
        if layout == "single" and len(namespaces) != 1:
            raise ValueError(f"layout 'single' takes exactly one namespace, got {len(namespaces)}")
        if isinstance(qdepth, bool) or not isinstance(qdepth, int) or qdepth < 2:
            raise ValueError(f"qdepth: expected an integer >= 2, got {qdepth!r}")
        lba = {ns.lba_size for ns in namespaces}
        if len(lba) != 1:
            raise ValueError(f"namespaces: LBA sizes differ ({sorted(lba)}); a volume needs one block size")
        self.block = lba.pop()
        targets = {id(ns.controller.target) for ns in namespaces}
        if len(targets) != 1:
            raise ValueError("namespaces: all must come from one target (one nvmelab.open URI)")
        self.target = namespaces[0].controller.target
        self.layout = layout
        self.qdepth = qdepth
        if layout == "raid0":
            if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0 or chunk % self.block:
                raise ValueError(f"chunk: {chunk!r} must be a positive multiple of the LBA size {self.block}")
            self.chunk = chunk
            per_dev = min(ns.nbytes for ns in namespaces) // chunk * chunk
            if per_dev == 0:
                raise ValueError(f"chunk: {chunk} bytes is larger than the smallest namespace")
            self.nbytes = per_dev * len(namespaces)
        else:
            self.chunk = 0
            self.nbytes = sum(ns.nbytes for ns in namespaces)
        self._starts = np.cumsum([0] + [ns.nbytes for ns in namespaces])
        self._devs: list[_Dev] = []
        self._staging: Any = None
        self._retired: list = []  # buffers released while the queue pairs live (see release())
        try:
            for ns in namespaces:
                ctrl = ns.controller
                qp = ctrl.qpair(depth=qdepth, timeout=timeout)
                limit = ctrl.max_transfer or (1 << 20)
                self._devs.append(_Dev(ns, qp, limit // self.block * self.block))
        except BaseException:
            self.close()
            raise
        self._t0 = time.perf_counter()
        log.debug("volume %s over %d device(s), %d bytes", layout, len(self._devs), self.nbytes)

    @classmethod
    def open(cls, target: Any, layout: str = "raid0", ndevs: int | None = None, nsid: int = 1, **kw: Any) -> Volume:
        """A volume over namespace ``nsid`` of the first ``ndevs`` controllers of ``target``."""
        n = len(target) if ndevs is None else ndevs
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(target):
            raise ValueError(f"ndevs: {ndevs!r} is not in 1..{len(target)} (the target's controllers)")
        return cls([target[i].namespace(nsid) for i in range(n)], layout=layout, **kw)

    # -- lifetime --
    @property
    def ndevs(self) -> int:
        return len(self._devs)

    def close(self) -> None:
        """Close the queue pairs, then every buffer released to the volume and the staging buffer
        (the target stays open). Safe twice."""
        for d in self._devs:
            d.qp.close()
        self._devs = []
        for b in self._retired + ([self._staging] if self._staging is not None else []):
            b.close()
        self._retired = []
        self._staging = None

    def __enter__(self) -> Volume:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        chunk = f" chunk={self.chunk}" if self.layout == "raid0" else ""
        return f"<tier.Volume {self.layout} ndevs={self.ndevs}{chunk} nbytes={self.nbytes}>"

    def alloc(self, nbytes: int) -> Any:
        """DMA memory usable with every device of the volume (a DmaBuffer context manager)."""
        return self.target.alloc(nbytes)

    def release(self, buf: Any) -> None:
        """Give back a buffer that was used for I/O on this volume; it is closed when the volume
        closes its queue pairs (closing it earlier can upset later I/O on the same queue pairs in
        the current driver, so the volume defers it)."""
        if buf is None:
            return
        if not self._devs:
            buf.close()
        else:
            self._retired.append(buf)

    def describe(self) -> dict:
        return {
            "layout": self.layout,
            "ndevs": self.ndevs,
            "chunk": self.chunk,
            "qdepth": self.qdepth,
            "nbytes": self.nbytes,
            "block": self.block,
        }

    # -- statistics --
    @property
    def stats(self) -> list:
        """Per-device :class:`DeviceStats` (live objects)."""
        return [d.stats for d in self._devs]

    def reset_stats(self) -> None:
        for d in self._devs:
            d.stats = DeviceStats()

    # -- address mapping --
    def extents(self, offset: int, nbytes: int) -> list:
        """The device pieces of a volume byte range: ``[(dev, dev_offset, length, rel_offset)]``."""
        self._check_range(offset, nbytes)
        out = []
        if self.layout == "raid0":
            n, c = len(self._devs), self.chunk
            pos, end = offset, offset + nbytes
            while pos < end:
                ci, within = divmod(pos, c)
                length = min(c - within, end - pos)
                dev, stripe = ci % n, ci // n
                out.append((dev, stripe * c + within, length, pos - offset))
                pos += length
        else:
            pos, end = offset, offset + nbytes
            while pos < end:
                dev = int(np.searchsorted(self._starts, pos, side="right")) - 1
                within = pos - int(self._starts[dev])
                length = min(int(self._starts[dev + 1]) - pos, end - pos)
                out.append((dev, within, length, pos - offset))
                pos += length
        return out

    def _check_range(self, offset: int, nbytes: int) -> None:
        for name, v in (("offset", offset), ("nbytes", nbytes)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name}: expected an integer >= 0, got {v!r}")
            if v % self.block:
                raise ValueError(f"{name}: {v} is not a multiple of the LBA size {self.block}")
        if offset + nbytes > self.nbytes:
            raise ValueError(f"offset {offset} + nbytes {nbytes} runs past the volume's {self.nbytes} bytes")

    # -- I/O --
    def io(self, requests: Iterable[Request], check: bool = True) -> list:
        """Run the requests concurrently on all devices; return one error (or None) per request.

        Each request is split at chunk and device boundaries and at each controller's largest
        transfer; the pieces are queued per device and kept in flight up to the queue depth.
        With ``check`` (the default) any failure raises :class:`TierIOError` after every
        command has completed.
        """
        reqs = list(requests)
        if not self._devs:
            raise ValueError("volume is closed")
        queues: list = [deque() for _ in self._devs]
        for i, r in enumerate(reqs):
            if r.op not in ("r", "w"):
                raise ValueError(f"request {i}: op must be 'r' or 'w', got {r.op!r}")
            if r.buf_offset < 0 or r.buf_offset + r.nbytes > r.buf.nbytes:
                raise ValueError(f"request {i}: buffer span {r.buf_offset}+{r.nbytes} exceeds its {r.buf.nbytes} bytes")
            for dev, doff, length, rel in self.extents(r.offset, r.nbytes):
                mx = self._devs[dev].max_bytes
                for p in range(0, length, mx):
                    n = min(mx, length - p)
                    queues[dev].append(
                        (i, r.op == "w", (doff + p) // self.block, n // self.block, r.buf, r.buf_offset + rel + p, n)
                    )
        errors: list = [None] * len(reqs)
        self._run(queues, errors)
        if check:
            failures = [(i, reqs[i], e) for i, e in enumerate(errors) if e is not None]
            if failures:
                raise TierIOError(failures)
        return errors

    def _run(self, queues: list, errors: list) -> None:
        devs = self._devs
        limit = self.qdepth - 1
        active = [k for k, q in enumerate(queues) if q]
        inflight = [0] * len(devs)
        try:
            while active or any(inflight):
                for k in active:
                    d, q = devs[k], queues[k]
                    while q and inflight[k] < limit:
                        i, is_w, slba, nlb, buf, boff, n = q.popleft()
                        if is_w:
                            d.qp.submit_write(d.ns, slba, nlb, buf, boff, tag=(i, True, n))
                        else:
                            d.qp.submit_read(d.ns, slba, nlb, buf, boff, tag=(i, False, n))
                        inflight[k] += 1
                    d.qp.ring()
                active = [k for k in active if queues[k]]
                for k, d in enumerate(devs):
                    if not inflight[k]:
                        continue
                    for c in d.qp.poll():
                        inflight[k] -= 1
                        i, is_w, n = c.tag
                        st = d.stats
                        if c.error is not None:
                            st.errors += 1
                            if errors[i] is None:
                                errors[i] = c.error
                        elif is_w:
                            st.writes += 1
                            st.write_bytes += n
                        else:
                            st.reads += 1
                            st.read_bytes += n
        except BaseException:
            # Ctrl-C or a driver failure: reap what is outstanding so no DMA targets a buffer
            # the caller may free, then re-raise.
            for k, d in enumerate(devs):
                if inflight[k]:
                    try:
                        d.qp.wait_all(timeout=DEFAULT_CMD_TIMEOUT_S)
                    except Exception:  # the original exception matters more
                        log.exception("volume: could not drain device %d", k)
            raise

    def flush(self) -> None:
        """NVMe Flush on every device (volatile write caches to media); errors raise."""
        for d in self._devs:
            d.qp.submit_flush(d.ns)
        for d in self._devs:
            d.qp.wait_all(check=True)

    # -- convenience (bounce through a staging buffer) --
    def _stage(self, nbytes: int) -> Any:
        if self._staging is None or self._staging.nbytes < nbytes:
            if self._staging is not None:
                self.release(self._staging)
            size = max(STAGING_MIN, 1 << (int(nbytes) - 1).bit_length())
            self._staging = self.alloc(size)
        return self._staging

    def read(self, offset: int, nbytes: int, out: np.ndarray | None = None) -> np.ndarray:
        """Read ``nbytes`` at ``offset`` into a new uint8 array (or ``out``) and return it."""
        self._check_range(offset, nbytes)
        buf = self._stage(nbytes)
        self.io([Request("r", offset, nbytes, buf, 0)])
        if out is None:
            return buf.array[:nbytes].copy()
        view = out.reshape(-1).view(np.uint8)
        if view.nbytes != nbytes:
            raise ValueError(f"out: holds {view.nbytes} bytes, expected {nbytes}")
        view[:] = buf.array[:nbytes]
        return out

    def write(self, offset: int, data: Any) -> None:
        """Write the bytes of ``data`` (bytes-like or a contiguous numpy array) at ``offset``."""
        src = (
            np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
            if not isinstance(data, np.ndarray)
            else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        )
        self._check_range(offset, src.nbytes)
        buf = self._stage(src.nbytes)
        buf.array[: src.nbytes] = src
        self.io([Request("w", offset, src.nbytes, buf, 0)])
