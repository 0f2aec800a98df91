# SPDX-License-Identifier: BSD-3-Clause
"""A write-back page cache in front of a :class:`~nvmelab.engines.tier.volume.Volume`, in host or GPU memory.

The cache holds ``capacity // line`` lines of ``line`` bytes (one page each). Callers work in
batches of pages: :meth:`Cache.acquire` makes every page of a batch resident (reading misses from
the volume, with read-ahead), pins them, and returns their slots in :attr:`Cache.lines`, a 2-D
array ``(nlines, line // itemsize)`` of the chosen dtype (numpy in host memory, cupy in GPU
memory); the caller reads and updates the slots in place; :meth:`Cache.release` unpins them::

    cache = Cache(vol, capacity=1 << 20, line=16384, policy="lru", readahead=4)
    slots = cache.acquire(np.array([3, 7]), write=True)   # pages 3 and 7, marked dirty
    cache.lines[slots] *= 2
    cache.release()
    cache.flush()                                          # every dirty line to the devices

Policies: ``lru`` (least recently used) and ``clock`` (second chance: one reference bit per line
and a sweeping hand). Write-back: a line written is dirty until it is evicted, flushed, or written
back early because the dirty share passed ``writeback_percent`` (as bcache's writeback_percent).
Dirty lines written together are coalesced: runs of consecutive pages become one request of up to
``coalesce`` bytes, which the volume stripes over its devices; misses and their read-ahead are
read the same way. All device traffic of one step runs concurrently on every device.

Errors: a failed write-back leaves the line dirty and resident, a failed read installs nothing;
either way the batch's pins are dropped and :class:`~nvmelab.engines.tier.volume.TierIOError` names the
failed request. Nothing written by the caller is dropped silently: after a successful
:meth:`flush` the devices hold exactly what the cache was given.

Statistics (:meth:`Cache.stats`) follow bcache's priority_stats shape (``unused``, ``clean``,
``dirty`` fractions of the lines, now: :meth:`fractions`; averaged over every release since the
counters were reset: :meth:`mean_fractions`) plus hit ratio, read-ahead, evictions and
write-back counts.

GPU memory (``memory="gpu"``) needs cupy and a CUDA device; :func:`gpu_available` says whether
both are there, and the constructor raises :class:`GpuUnavailable` otherwise. Device I/O stages
through a host DMA buffer, then copies to the GPU lines.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

import numpy as np

from .volume import Request, TierIOError, Volume

log = logging.getLogger(__name__)

__all__ = ["Cache", "GpuUnavailable", "gpu_available", "POLICIES", "MEMORIES"]

POLICIES = ("lru", "clock")
MEMORIES = ("host", "gpu")
#: Largest coalesced device request by default (bytes).
DEFAULT_COALESCE = 1 << 20
#: Staging buffer for device transfers (bytes): one step's traffic goes in rounds of this size.
DEFAULT_STAGING = 8 << 20
FREE = -1


class GpuUnavailable(RuntimeError):
    """A GPU-memory cache was asked for on a host without cupy or without a CUDA device."""


def gpu_available() -> tuple[bool, str]:
    """(True, device name) when cupy and a CUDA device are usable, else (False, why not)."""
    try:
        import cupy  # type: ignore[import-not-found]
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return False, f"cupy is not importable ({type(exc).__name__}: {exc})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"no CUDA device ({exc})"
    if n < 1:
        return False, "no CUDA device"
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props.get("name", b"")
    return True, name.decode() if isinstance(name, bytes) else str(name)


def _runs(pages: np.ndarray, max_pages: int) -> list:
    """Split sorted unique pages into runs of consecutive pages, each at most ``max_pages`` long:
    ``[(start_index, length)]`` into ``pages``."""
    if pages.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [pages.size]))
    out = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        for p in range(s, e, max_pages):
            out.append((p, min(max_pages, e - p)))
    return out


class Cache:
    """Write-back page cache over a volume (see the module doc)."""

    def __init__(
        self,
        volume: Volume,
        capacity: int,
        line: int = 4096,
        *,
        dtype: Any = np.uint8,
        policy: str = "lru",
        readahead: int = 0,
        coalesce: int = DEFAULT_COALESCE,
        memory: str = "host",
        writeback_percent: float | None = None,
        staging: int = DEFAULT_STAGING,
    ) -> None:
        """
        Args:
            volume: the backing volume; pages are ``line``-byte slices of it.
            capacity: cache bytes (rounded down to whole lines; at least 2 lines).
            line: line = page size in bytes, a multiple of the volume's block size.
            dtype: element type of :attr:`lines` (e.g. np.complex64); ``line`` must hold whole items.
            policy: ``"lru"`` or ``"clock"``.
            readahead: pages after each miss read along with it (when not resident and room allows).
            coalesce: largest device request built from consecutive pages, bytes (>= line).
            memory: ``"host"`` (numpy, DMA memory of the volume's target) or ``"gpu"`` (cupy).
            writeback_percent: when set, dirty lines above this share of the cache are written back
                (and kept, clean) after each release, oldest first; None writes back only on
                eviction and flush.
            staging: host DMA staging bytes for device transfers.
        """
        if policy not in POLICIES:
            raise ValueError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}")
        if memory not in MEMORIES:
            raise ValueError(f"memory: {memory!r} is not one of {', '.join(MEMORIES)}")
        for name, v in (
            ("capacity", capacity),
            ("line", line),
            ("readahead", readahead),
            ("coalesce", coalesce),
            ("staging", staging),
        ):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name}: expected an integer >= 0, got {v!r}")
        if line <= 0 or line % volume.block:
            raise ValueError(f"line: {line} must be a positive multiple of the volume's block size {volume.block}")
        self.dtype = np.dtype(dtype)
        if line % self.dtype.itemsize:
            raise ValueError(f"line: {line} bytes do not hold whole {self.dtype} items")
        self.nlines = int(capacity // line)
        if self.nlines < 2:
            raise ValueError(f"capacity: {capacity} bytes hold fewer than 2 lines of {line} bytes")
        if coalesce < line:
            raise ValueError(f"coalesce: {coalesce} is smaller than a line ({line})")
        if staging < line:
            raise ValueError(f"staging: {staging} is smaller than a line ({line})")
        if writeback_percent is not None and not 0 <= writeback_percent <= 100:
            raise ValueError(f"writeback_percent: {writeback_percent!r} is not in 0..100")
        self.volume = volume
        self.line = int(line)
        self.npages = volume.nbytes // self.line
        self.policy = policy
        self.readahead = int(readahead)
        self.coalesce_pages = int(coalesce // line)
        self.memory = memory
        self.writeback_percent = writeback_percent
        self._arena: Any = None
        self._staging: Any = None
        self._stage_pages = int(staging // line)
        if memory == "gpu":
            ok, why = gpu_available()
            if not ok:
                raise GpuUnavailable(f"memory='gpu': {why}")
            import cupy  # type: ignore[import-not-found]

            self.xp: Any = cupy
            self.lines = cupy.zeros((self.nlines, self.line // self.dtype.itemsize), dtype=self.dtype)
            self._raw = self.lines.view(cupy.uint8).reshape(self.nlines, self.line)
        else:
            self.xp = np
            self._arena = volume.alloc(self.nlines * self.line)
            self._raw = self._arena.array[: self.nlines * self.line].reshape(self.nlines, self.line)
            self.lines = self._raw.view(self.dtype)
        # state
        self._slot_page = np.full(self.nlines, FREE, dtype=np.int64)
        self._dirty = np.zeros(self.nlines, dtype=bool)
        self._pinned = np.zeros(self.nlines, dtype=bool)
        self._ref = np.zeros(self.nlines, dtype=bool)  # CLOCK reference bits
        self._ra = np.zeros(self.nlines, dtype=bool)  # read ahead and not used yet
        self._hand = 0
        self._map: dict[int, int] = {}  # page -> slot
        self._lru: OrderedDict[int, None] = OrderedDict()  # slots, least recent first
        self._free = list(range(self.nlines - 1, -1, -1))
        self._pins: list = []
        #: pages a workload should acquire per batch (half the lines: the rest serve read-ahead
        #: and keep recently used pages)
        self.batch_pages = max(1, self.nlines // 2)
        self.reset_counters()

    # -- lifetime --
    def close(self) -> None:
        """Give the memory back to the volume without writing back (call :meth:`flush` first). Safe twice."""
        for b in (self._staging, self._arena):
            self.volume.release(b)
        self._staging = self._arena = None

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<tier.Cache {self.memory} {self.policy} {self.nlines}x{self.line}B dirty={int(self._dirty.sum())}>"

    @property
    def capacity(self) -> int:
        return self.nlines * self.line

    # -- statistics --
    def reset_counters(self) -> None:
        self.hits = self.misses = 0
        self.readahead_reads = self.readahead_hits = 0
        self.evictions = self.dirty_evictions = 0
        self.writeback_lines = self.writeback_requests = 0
        self.fill_lines = self.fill_requests = 0
        self._samples = self._sum_used = self._sum_dirty = 0

    def fractions(self) -> dict:
        """bcache-style shares of the lines: unused, clean, dirty (they sum to 1)."""
        used = self._slot_page != FREE
        dirty = int(self._dirty.sum())
        n = self.nlines
        return {"unused": float((~used).sum()) / n, "clean": float(used.sum() - dirty) / n, "dirty": dirty / n}

    def mean_fractions(self) -> dict:
        """unused/clean/dirty averaged over the states after each release() since the counters
        were reset (the state now when there was no release yet)."""
        if not self._samples:
            return self.fractions()
        n = self._samples * self.nlines
        used, dirty = self._sum_used / n, self._sum_dirty / n
        return {"unused": 1.0 - used, "clean": used - dirty, "dirty": dirty}

    def stats(self) -> dict:
        acc = self.hits + self.misses
        out = {
            "lines": self.nlines,
            "line": self.line,
            "policy": self.policy,
            "memory": self.memory,
            "hits": self.hits,
            "misses": self.misses,
            "hit_ratio": self.hits / acc if acc else 0.0,
            "readahead_reads": self.readahead_reads,
            "readahead_hits": self.readahead_hits,
            "evictions": self.evictions,
            "dirty_evictions": self.dirty_evictions,
            "writeback_lines": self.writeback_lines,
            "writeback_requests": self.writeback_requests,
            "fill_lines": self.fill_lines,
            "fill_requests": self.fill_requests,
        }
        out.update(self.fractions())
        out.update({f"{k}_mean": v for k, v in self.mean_fractions().items()})
        return out

    # -- policy bookkeeping --
    def _touch(self, slot: int) -> None:
        if self.policy == "lru":
            self._lru.move_to_end(slot)
        else:
            self._ref[slot] = True

    def _victims(self, n: int, exclude: set) -> list:
        """Up to ``n`` resident, unpinned slots to evict, by policy."""
        out: list = []
        if n <= 0:
            return out
        if self.policy == "lru":
            for slot in self._lru:
                if not self._pinned[slot] and slot not in exclude:
                    out.append(slot)
                    if len(out) == n:
                        break
            return out
        # CLOCK: sweep, clearing reference bits, at most two full turns
        exclude = set(exclude)
        for _ in range(2 * self.nlines):
            s = self._hand
            self._hand = (self._hand + 1) % self.nlines
            if self._slot_page[s] == FREE or self._pinned[s] or s in exclude:
                continue
            if self._ref[s]:
                self._ref[s] = False
                continue
            out.append(s)
            exclude.add(s)
            if len(out) == n:
                break
        return out

    def _install(self, page: int, slot: int) -> None:
        self._map[page] = slot
        self._slot_page[slot] = page
        if self.policy == "lru":
            self._lru[slot] = None
        else:
            self._ref[slot] = True

    def _drop(self, slot: int) -> None:
        page = int(self._slot_page[slot])
        del self._map[page]
        self._slot_page[slot] = FREE
        self._dirty[slot] = False
        self._ra[slot] = False
        self._ref[slot] = False
        if self.policy == "lru":
            self._lru.pop(slot, None)
        self._free.append(slot)

    # -- device transfers (coalesced, staged) --
    def _stage(self) -> Any:
        if self._staging is None:
            self._staging = self.volume.alloc(self._stage_pages * self.line)
        return self._staging

    def _write_back(self, slots: list) -> None:
        """Write the given dirty slots to the volume, coalescing consecutive pages. Slots written
        successfully become clean; on failure the rest stay dirty and TierIOError is raised."""
        if not slots:
            return
        slots_arr = np.asarray(slots, dtype=np.int64)
        pages = self._slot_page[slots_arr]
        order = np.argsort(pages)
        pages, slots_arr = pages[order], slots_arr[order]
        runs = _runs(pages, min(self.coalesce_pages, self._stage_pages))
        buf = self._stage()
        stage = buf.array.reshape(-1, self.line)
        failures: list = []
        i = 0
        while i < len(runs):
            # one round: as many runs as fit in the staging buffer
            reqs, spans, used = [], [], 0
            while i < len(runs) and used + runs[i][1] <= self._stage_pages:
                s, n = runs[i]
                sl = slots_arr[s : s + n]
                if self.memory == "gpu":
                    stage[used : used + n] = self._raw[self.xp.asarray(sl)].get()
                else:
                    np.take(self._raw, sl, axis=0, out=stage[used : used + n])
                reqs.append(Request("w", int(pages[s]) * self.line, n * self.line, buf, used * self.line))
                spans.append(sl)
                used += n
                i += 1
            errs = self.volume.io(reqs, check=False)
            for k, (r, sl, e) in enumerate(zip(reqs, spans, errs)):
                if e is None:
                    self._dirty[sl] = False
                    self.writeback_lines += len(sl)
                    self.writeback_requests += 1
                else:
                    failures.append((k, r, e))
        if failures:
            raise TierIOError(failures, "cache write-back")

    def _fill(self, pages: np.ndarray, slots: np.ndarray) -> list:
        """Read sorted pages into slots, coalescing consecutive pages; return the failed page sets."""
        runs = _runs(pages, min(self.coalesce_pages, self._stage_pages))
        buf = self._stage()
        stage = buf.array.reshape(-1, self.line)
        failures: list = []
        i = 0
        while i < len(runs):
            reqs, spans, used = [], [], 0
            while i < len(runs) and used + runs[i][1] <= self._stage_pages:
                s, n = runs[i]
                reqs.append(Request("r", int(pages[s]) * self.line, n * self.line, buf, used * self.line))
                spans.append((s, n, used))
                used += n
                i += 1
            errs = self.volume.io(reqs, check=False)
            for r, (s, n, at), e in zip(reqs, spans, errs):
                if e is not None:
                    failures.append((len(failures), r, e, (s, n)))
                    continue
                sl = slots[s : s + n]
                if self.memory == "gpu":
                    self._raw[self.xp.asarray(sl)] = self.xp.asarray(stage[at : at + n])
                else:
                    self._raw[sl] = stage[at : at + n]
                self.fill_lines += n
                self.fill_requests += 1
        return failures

    def _exchange(self, wb_slots: list, pages: np.ndarray) -> tuple:
        """Write dirty ``wb_slots`` back and read sorted ``pages`` into staging, in one concurrent
        round (both fit in the staging buffer). Write failures raise TierIOError after marking the
        successful lines clean; read failures are returned with the staged fills for _scatter."""
        buf = self._stage()
        stage = buf.array.reshape(-1, self.line)
        maxrun = self.coalesce_pages
        reqs: list = []
        kinds: list = []
        used = 0
        if wb_slots:
            ws = np.asarray(wb_slots, dtype=np.int64)
            wp = self._slot_page[ws]
            order = np.argsort(wp)
            wp, ws = wp[order], ws[order]
            for s, n in _runs(wp, maxrun):
                sl = ws[s : s + n]
                if self.memory == "gpu":
                    stage[used : used + n] = self._raw[self.xp.asarray(sl)].get()
                else:
                    np.take(self._raw, sl, axis=0, out=stage[used : used + n])
                reqs.append(Request("w", int(wp[s]) * self.line, n * self.line, buf, used * self.line))
                kinds.append(("w", sl))
                used += n
        fill_at = used
        for s, n in _runs(pages, maxrun):
            reqs.append(Request("r", int(pages[s]) * self.line, n * self.line, buf, used * self.line))
            kinds.append(("r", (s, n)))
            used += n
        errs = self.volume.io(reqs, check=False)
        wfail, rfail = [], []
        for k, (r, (kind, what), e) in enumerate(zip(reqs, kinds, errs)):
            if kind == "w":
                if e is None:
                    self._dirty[what] = False
                    self.writeback_lines += len(what)
                    self.writeback_requests += 1
                else:
                    wfail.append((k, r, e))
            elif e is None:
                self.fill_lines += what[1]
                self.fill_requests += 1
            else:
                rfail.append((k, r, e, what))
        if wfail:
            raise TierIOError(wfail, "cache write-back")
        return stage[fill_at:used], rfail

    def _scatter(self, staged: Any, slots: np.ndarray) -> None:
        """Copy staged pages (in the order of their sorted pages) into ``slots``."""
        if slots.size == 0:
            return
        if self.memory == "gpu":
            self._raw[self.xp.asarray(slots)] = self.xp.asarray(staged)
        else:
            self._raw[slots] = staged

    # -- the batch interface --
    def acquire(self, pages: Any, write: bool = False, overwrite: bool = False) -> np.ndarray:
        """Make ``pages`` (distinct page numbers) resident and pinned; return their slots.

        ``write`` marks them dirty (the caller is about to change them). ``overwrite`` (with
        ``write``) skips reading missing pages because the caller replaces them entirely.
        """
        pages = np.asarray(pages, dtype=np.int64).reshape(-1)
        if pages.size == 0:
            return np.empty(0, dtype=np.int64)
        if pages.min() < 0 or pages.max() >= self.npages:
            raise ValueError(f"pages: outside 0..{self.npages - 1}")
        if np.unique(pages).size != pages.size:
            raise ValueError("pages: a batch must not repeat a page")
        npinned = int(self._pinned.sum())
        if pages.size + npinned > self.nlines:
            raise ValueError(f"pages: {pages.size} pages (+{npinned} pinned) exceed the cache's {self.nlines} lines")
        before = self._pinned.copy()
        slots = np.empty(pages.size, dtype=np.int64)
        miss_idx = []
        for k, p in enumerate(pages.tolist()):
            s = self._map.get(p)
            if s is None:
                miss_idx.append(k)
                continue
            slots[k] = s
            self.hits += 1
            if self._ra[s]:
                self._ra[s] = False
                self.readahead_hits += 1
            self._touch(s)
            self._pinned[s] = True
        self.misses += len(miss_idx)
        try:
            if miss_idx:
                self._fetch_misses(pages, slots, np.asarray(miss_idx, dtype=np.int64), overwrite and write)
        except BaseException:
            self._pinned[:] = before  # this batch holds no pins after a failure
            raise
        if write:
            self._dirty[slots] = True
        self._pins.append(slots)
        return slots

    def _fetch_misses(self, pages: np.ndarray, slots: np.ndarray, miss_idx: np.ndarray, overwrite: bool) -> None:
        miss = pages[miss_idx]
        want = set(miss.tolist())
        ra: list = []
        if self.readahead and not overwrite:
            resident = self._map
            for p in np.sort(miss).tolist():
                for q in range(p + 1, min(p + 1 + self.readahead, self.npages)):
                    if q not in want and q not in resident:
                        want.add(q)
                        ra.append(q)
        # room: free slots, then victims (not pinned, not hits of this batch)
        free_n = len(self._free)
        need = miss.size + len(ra)
        victims = self._victims(need - free_n, set())
        room = free_n + len(victims)
        if room < miss.size:
            raise ValueError(f"cache: {miss.size} misses but only {room} lines can be freed")
        ra = ra[: room - miss.size]
        victims = victims[: max(0, miss.size + len(ra) - free_n)]
        dv = [s for s in victims if self._dirty[s]]
        all_pages = np.sort(np.concatenate((miss, np.asarray(ra, dtype=np.int64))))
        nfill = 0 if overwrite else all_pages.size
        if len(dv) + nfill <= self._stage_pages:
            # the common case: dirty victims out and misses in, in one concurrent round
            fills, failures = self._exchange(dv, all_pages if nfill else all_pages[:0])
        else:
            self._write_back(dv)  # raises on failure: nothing evicted, victims stay dirty
            fills, failures = None, []
        for s in victims:
            self.evictions += 1
            self.dirty_evictions += int(s in dv)
            self._drop(s)
        new_slots = np.asarray([self._free.pop() for _ in range(all_pages.size)], dtype=np.int64)
        if fills is not None and nfill:
            self._scatter(fills, new_slots)
        elif nfill:
            failures = self._fill(all_pages, new_slots)
        failed_pages: set = set()
        for _, _, _, (s, n) in failures:
            failed_pages.update(all_pages[s : s + n].tolist())
        for p, s in zip(all_pages.tolist(), new_slots.tolist()):
            if p in failed_pages:
                self._free.append(s)
                continue
            self._install(p, s)
        for q in ra:
            if q not in failed_pages:
                self.readahead_reads += 1
                self._ra[self._map[q]] = True
        for k in miss_idx.tolist():
            p = int(pages[k])
            if p in self._map:
                s = self._map[p]
                slots[k] = s
                self._pinned[s] = True
        if failures:
            raise TierIOError([(i, r, e) for i, r, e, _ in failures], "cache fill")

    def release(self) -> None:
        """Unpin every page acquired since the last release; apply ``writeback_percent``."""
        self._pinned[:] = False
        self._pins.clear()
        self._samples += 1
        self._sum_used += self.nlines - len(self._free)
        self._sum_dirty += int(self._dirty.sum())
        if self.writeback_percent is not None:
            limit = int(self.nlines * self.writeback_percent / 100.0)
            ndirty = int(self._dirty.sum())
            if ndirty > limit:
                self._write_back(self._oldest_dirty(ndirty - limit))

    def _oldest_dirty(self, n: int) -> list:
        if self.policy == "lru":
            out = [s for s in self._lru if self._dirty[s]]
        else:
            order = [(self._hand + i) % self.nlines for i in range(self.nlines)]
            out = [s for s in order if self._dirty[s]]
        return out[:n]

    def flush(self, device_flush: bool = True) -> None:
        """Write every dirty line back (coalesced); then NVMe Flush each device when asked.
        Raises TierIOError on any failure; failed lines stay dirty, so a later flush retries."""
        self._write_back(np.flatnonzero(self._dirty).tolist())
        if device_flush:
            self.volume.flush()

    def invalidate(self) -> None:
        """Drop every clean, unpinned line (dirty lines stay)."""
        for s in np.flatnonzero((self._slot_page != FREE) & ~self._dirty & ~self._pinned).tolist():
            self._drop(s)

    # -- byte-level access --
    def read(self, offset: int, nbytes: int) -> np.ndarray:
        """Bytes of the volume through the cache (a new host uint8 array)."""
        out = np.empty(nbytes, dtype=np.uint8)
        for p0, lo, hi, at in self._spans(offset, nbytes):
            slots = self.acquire(np.arange(p0, p0 + len(lo)))
            try:
                for s, a, b, o in zip(slots.tolist(), lo, hi, at):
                    row = self._raw[s, a:b]
                    out[o : o + b - a] = row.get() if self.memory == "gpu" else row
            finally:
                self.release()
        return out

    def write(self, offset: int, data: Any) -> None:
        """Write bytes through the cache (write-back: they reach the devices on eviction/flush)."""
        src = (
            np.ascontiguousarray(
                np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8) if not isinstance(data, np.ndarray) else data
            )
            .reshape(-1)
            .view(np.uint8)
        )
        for p0, lo, hi, at in self._spans(offset, src.nbytes):
            full = all(a == 0 and b == self.line for a, b in zip(lo, hi))
            slots = self.acquire(np.arange(p0, p0 + len(lo)), write=True, overwrite=full)
            try:
                for s, a, b, o in zip(slots.tolist(), lo, hi, at):
                    chunk = src[o : o + b - a]
                    self._raw[s, a:b] = self.xp.asarray(chunk) if self.memory == "gpu" else chunk
            finally:
                self.release()

    def _spans(self, offset: int, nbytes: int):
        if offset < 0 or nbytes < 0 or offset + nbytes > self.npages * self.line:
            raise ValueError(
                f"offset {offset} + nbytes {nbytes} is outside the cached volume ({self.npages * self.line} bytes)"
            )
        per = max(1, self.nlines // 2)
        pos, end = offset, offset + nbytes
        while pos < end:
            p0 = pos // self.line
            lo, hi, at = [], [], []
            p = p0
            while pos < end and p < p0 + per:
                a = pos - p * self.line
                b = min(self.line, end - p * self.line)
                lo.append(a)
                hi.append(b)
                at.append(pos - offset)
                pos += b - a
                p += 1
            yield p0, lo, hi, at
