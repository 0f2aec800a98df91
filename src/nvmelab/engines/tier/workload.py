# SPDX-License-Identifier: BSD-3-Clause
"""The paging workload: a full state-vector quantum-circuit simulation whose state lives on a volume.

The state is ``2**n`` complex amplitudes (complex64 or complex128) cut into pages of ``page`` bytes.
A single-qubit gate ``U`` on qubit ``k`` updates every amplitude pair ``(i, i ^ 2**k)``::

    a' = U00 a + U01 b,   b' = U10 a + U11 b

When ``2**k`` amplitudes fit in a page the pairs are inside each page (a local sweep); otherwise
they are in pages ``p`` and ``p ^ 2**k / amps_per_page`` (strided pairs of far pages). A circuit is
``depth`` layers, each one gate with a random unitary on a random qubit (seeded). The uniform mix
(:func:`random_mix`) touches random pages instead, multiplying written pages by a phase.

The arithmetic is real and runs on whatever holds the pages (a *pager*): :class:`MemoryPager`
(the whole state in memory: the reference), :class:`DirectPager` (a working buffer of a fixed
budget, one device request per page, like swap without a cache) or a
:class:`~nvmelab.engines.tier.cache.Cache` (numpy or cupy lines). All pagers offer the same interface:
``acquire(pages, write) -> slots``, ``lines[slots]``, ``release()``, ``flush()``, ``xp`` (the
array module) and ``batch_pages`` (how many pages a batch may hold), so one code path computes
both the paged result and the in-memory reference; :func:`checksum` compares them.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .volume import Request, Volume

log = logging.getLogger(__name__)

__all__ = [
    "StateLayout",
    "Gate",
    "random_circuit",
    "random_mix",
    "MemoryPager",
    "DirectPager",
    "init_state",
    "write_initial_state",
    "apply_gate",
    "run_circuit",
    "run_mix",
    "read_state",
    "checksum",
    "DTYPES",
]

DTYPES = {"complex64": np.complex64, "complex128": np.complex128}


@dataclass(frozen=True)
class StateLayout:
    """Where a state vector of ``nqubits`` lives: pages of ``page`` bytes from volume offset 0."""

    nqubits: int
    dtype: str = "complex64"
    page: int = 16384

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype: {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if isinstance(self.nqubits, bool) or not isinstance(self.nqubits, int) or not 1 <= self.nqubits <= 48:
            raise ValueError(f"nqubits: expected an integer in 1..48, got {self.nqubits!r}")
        it = np.dtype(DTYPES[self.dtype]).itemsize
        if self.page <= 0 or self.page & (self.page - 1) or self.page < it:
            raise ValueError(f"page: {self.page} must be a power of two >= {it} bytes")
        if self.nbytes < self.page:
            raise ValueError(
                f"nqubits: a {self.nqubits}-qubit state ({self.nbytes} bytes) is smaller "
                f"than one page ({self.page} bytes)"
            )

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(DTYPES[self.dtype])

    @property
    def amps(self) -> int:
        return 1 << self.nqubits

    @property
    def nbytes(self) -> int:
        return self.amps * np.dtype(DTYPES[self.dtype]).itemsize

    @property
    def amps_per_page(self) -> int:
        return self.page // self.np_dtype.itemsize

    @property
    def npages(self) -> int:
        return self.nbytes // self.page

    @property
    def local_qubits(self) -> int:
        """Qubits whose pairs stay inside one page."""
        return self.amps_per_page.bit_length() - 1


@dataclass(frozen=True)
class Gate:
    qubit: int
    u: np.ndarray = field(repr=False)  # 2x2 complex128

    def describe(self) -> str:
        return f"U(q{self.qubit})"


def _random_unitary(rng: np.random.Generator) -> np.ndarray:
    """A Haar-random 2x2 unitary (QR of a complex Gaussian matrix, phases fixed)."""
    z = (rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))) / np.sqrt(2)
    q, r = np.linalg.qr(z)
    d = np.diag(r)
    return q * (d / np.abs(d))


def random_circuit(nqubits: int, depth: int, seed: int = 0) -> list:
    """``depth`` layers, each a random single-qubit unitary on a uniformly chosen qubit."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth: expected an integer >= 0, got {depth!r}")
    rng = np.random.default_rng(seed)
    return [Gate(int(rng.integers(nqubits)), _random_unitary(rng)) for _ in range(depth)]


@dataclass(frozen=True)
class MixStep:
    page: int
    write: bool
    phase: complex


def random_mix(npages: int, accesses: int, write_fraction: float = 0.5, seed: int = 0) -> list:
    """Uniformly random page accesses; a write multiplies the page by a random phase."""
    if not 0 <= write_fraction <= 1:
        raise ValueError(f"write_fraction: {write_fraction!r} is not in 0..1")
    rng = np.random.default_rng(seed)
    pages = rng.integers(0, npages, accesses)
    writes = rng.random(accesses) < write_fraction
    phases = np.exp(1j * rng.uniform(0, 2 * np.pi, accesses))
    return [MixStep(int(p), bool(w), complex(ph)) for p, w, ph in zip(pages, writes, phases)]


# -- pagers --


class MemoryPager:
    """The whole state in host memory: the in-memory reference run."""

    xp = np

    def __init__(self, layout: StateLayout, batch_pages: int = 64) -> None:
        self.layout = layout
        self.lines = np.zeros((layout.npages, layout.amps_per_page), dtype=layout.np_dtype)
        self.batch_pages = batch_pages

    def acquire(self, pages: Any, write: bool = False, overwrite: bool = False) -> np.ndarray:
        return np.asarray(pages, dtype=np.int64)

    def release(self) -> None:
        pass

    def flush(self, device_flush: bool = True) -> None:
        pass

    def stats(self) -> dict:
        return {}


class DirectPager:
    """No cache: a working buffer of ``budget`` bytes; each page is read and written back with its
    own device request (concurrently across devices), the way swap moves pages."""

    xp = np

    def __init__(self, volume: Volume, layout: StateLayout, budget: int) -> None:
        self.volume = volume
        self.layout = layout
        self.page = layout.page
        self.nslots = int(budget // layout.page)
        if self.nslots < 2:
            raise ValueError(f"budget: {budget} bytes hold fewer than 2 pages of {layout.page} bytes")
        self._buf = volume.alloc(self.nslots * self.page)
        raw = self._buf.array[: self.nslots * self.page].reshape(self.nslots, self.page)
        self.lines = raw.view(layout.np_dtype)
        self.batch_pages = self.nslots
        self._held: list = []  # (pages, first slot, write) acquired since the last release
        self._used = 0
        self.page_reads = self.page_writes = 0

    def close(self) -> None:
        self.volume.release(self._buf)
        self._buf = None

    def acquire(self, pages: Any, write: bool = False, overwrite: bool = False) -> np.ndarray:
        """Read ``pages`` into free slots of the working buffer (one request per page)."""
        pages = np.asarray(pages, dtype=np.int64).reshape(-1)
        if self._used + pages.size > self.nslots:
            raise ValueError(f"pages: {pages.size} pages (+{self._used} held) exceed the {self.nslots}-page budget")
        slots = np.arange(self._used, self._used + pages.size, dtype=np.int64)
        if not (write and overwrite):
            self.volume.io(
                [
                    Request("r", int(p) * self.page, self.page, self._buf, int(s) * self.page)
                    for p, s in zip(pages.tolist(), slots.tolist())
                ]
            )
            self.page_reads += pages.size
        self._held.append((pages, self._used, write))
        self._used += pages.size
        return slots

    def release(self) -> None:
        """Write every page acquired for writing back (one request per page); free the buffer."""
        held, self._held, self._used = self._held, [], 0
        reqs = [
            Request("w", int(p) * self.page, self.page, self._buf, (s0 + k) * self.page)
            for pages, s0, write in held
            if write
            for k, p in enumerate(pages.tolist())
        ]
        if reqs:
            self.volume.io(reqs)
            self.page_writes += len(reqs)

    def flush(self, device_flush: bool = True) -> None:
        if device_flush:
            self.volume.flush()

    def stats(self) -> dict:
        return {"page_reads": self.page_reads, "page_writes": self.page_writes}


# -- the workload --


def _page_init(layout: StateLayout, seed: int, p0: int, n: int) -> np.ndarray:
    """Pages p0..p0+n of a seeded random state (unnormalised; each page from its own stream)."""
    out = np.empty((n, layout.amps_per_page), dtype=layout.np_dtype)
    for k in range(n):
        rng = np.random.default_rng((seed, p0 + k))
        re = rng.standard_normal(layout.amps_per_page)
        im = rng.standard_normal(layout.amps_per_page)
        out[k] = (re + 1j * im).astype(layout.np_dtype)
    return out


def init_state(pager: Any, layout: StateLayout, seed: int = 0) -> None:
    """Fill the state with seeded random amplitudes (scaled so the norm is about 1), batch by batch."""
    scale = layout.np_dtype.type(1.0 / np.sqrt(2.0 * layout.amps))
    step = max(1, pager.batch_pages // 2)
    for p0 in range(0, layout.npages, step):
        n = min(step, layout.npages - p0)
        slots = pager.acquire(np.arange(p0, p0 + n), write=True, overwrite=True)
        data = _page_init(layout, seed, p0, n) * layout.np_dtype.type(scale)
        pager.lines[pager.xp.asarray(slots)] = pager.xp.asarray(data)
        pager.release()


def write_initial_state(volume: Volume, layout: StateLayout, seed: int = 0, chunk_pages: int = 64) -> None:
    """Write the seeded initial state (see :func:`init_state`) straight to the volume."""
    scale = layout.np_dtype.type(1.0 / np.sqrt(2.0 * layout.amps))
    for p0 in range(0, layout.npages, chunk_pages):
        n = min(chunk_pages, layout.npages - p0)
        volume.write(p0 * layout.page, _page_init(layout, seed, p0, n) * scale)


def _gate_batches(layout: StateLayout, qubit: int, batch_pages: int, reverse: bool) -> Iterator[tuple]:
    """Page batches of one gate: ("local", pages) or ("pair", low pages, high pages)."""
    npg = layout.npages
    if qubit < layout.local_qubits:
        step = max(1, batch_pages)
        starts = range(0, npg, step)
        for p0 in reversed(starts) if reverse else starts:
            yield "local", np.arange(p0, min(p0 + step, npg), dtype=np.int64)
        return
    stride = 1 << (qubit - layout.local_qubits)
    low = np.flatnonzero((np.arange(npg) & stride) == 0)
    if reverse:
        low = low[::-1]
    half = max(1, batch_pages // 2)
    for i in range(0, low.size, half):
        lo = low[i : i + half]
        yield "pair", lo, lo + stride


def apply_gate(pager: Any, layout: StateLayout, gate: Gate, reverse: bool = False) -> int:
    """Apply one gate through the pager; return the pages touched."""
    xp = pager.xp
    u = gate.u.astype(layout.np_dtype)
    u00, u01, u10, u11 = (layout.np_dtype.type(x) for x in u.reshape(-1))
    touched = 0
    for item in _gate_batches(layout, gate.qubit, pager.batch_pages, reverse):
        if item[0] == "local":
            pages = item[1]
            slots = xp.asarray(pager.acquire(pages, write=True))
            blk = pager.lines[slots]
            h = 1 << gate.qubit
            v = blk.reshape(pages.size, -1, 2, h)
            a, b = v[:, :, 0, :], v[:, :, 1, :]
            na = u00 * a + u01 * b
            nb = u10 * a + u11 * b
            v[:, :, 0, :] = na
            v[:, :, 1, :] = nb
            pager.lines[slots] = blk
            touched += pages.size
        else:
            lo, hi = item[1], item[2]
            slots = xp.asarray(pager.acquire(np.concatenate((lo, hi)), write=True))
            sa, sb = slots[: lo.size], slots[lo.size :]
            a, b = pager.lines[sa], pager.lines[sb]
            pager.lines[sa] = u00 * a + u01 * b
            pager.lines[sb] = u10 * a + u11 * b
            touched += 2 * lo.size
        pager.release()
    return touched


def run_circuit(pager: Any, layout: StateLayout, gates: list, serpentine: bool = True) -> int:
    """Apply the gates in order; with ``serpentine`` every other sweep runs backwards (pages just
    used are used again first, which an LRU cache can exploit). Returns pages touched."""
    touched = 0
    for i, g in enumerate(gates):
        touched += apply_gate(pager, layout, g, reverse=serpentine and i % 2 == 1)
    return touched


def run_mix(pager: Any, layout: StateLayout, steps: list) -> tuple:
    """Apply a random page mix in batches of distinct pages; return (pages touched, read checksum)."""
    xp = pager.xp
    acc = 0.0
    batch = max(1, pager.batch_pages // 2)
    i = 0
    while i < len(steps):
        group, seen = [], set()
        while i < len(steps) and len(group) < batch and steps[i].page not in seen:
            seen.add(steps[i].page)
            group.append(steps[i])
            i += 1
        wp = np.asarray([s.page for s in group if s.write], dtype=np.int64)
        rp = np.asarray([s.page for s in group if not s.write], dtype=np.int64)
        if wp.size:
            ph = xp.asarray(np.asarray([s.phase for s in group if s.write], dtype=layout.np_dtype))[:, None]
            sw = xp.asarray(pager.acquire(wp, write=True))
            pager.lines[sw] = pager.lines[sw] * ph
        if rp.size:
            acc += float(xp.abs(pager.lines[xp.asarray(pager.acquire(rp))]).sum())
        pager.release()
    return len(steps), acc


def read_state(volume: Volume, layout: StateLayout) -> np.ndarray:
    """The whole state as stored on the volume (after a flush), as a 1-D complex array."""
    return volume.read(0, layout.nbytes).view(layout.np_dtype)


def checksum(state: np.ndarray) -> str:
    """SHA-256 of the state's bytes (exact: equal only when every amplitude is bit-identical)."""
    return hashlib.sha256(np.ascontiguousarray(state).view(np.uint8)).hexdigest()
