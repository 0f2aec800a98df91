# SPDX-License-Identifier: BSD-3-Clause
"""Namespaces and the argument checks that the driver's objects share (Controller, QPair).

:class:`Namespace` is one active namespace of a controller: its size, LBA format and synchronous
I/O; :data:`DmaBuffer` is DMA memory from ``Controller.alloc``. The helpers ``_int``, ``_count``,
``_spans``, ``_as_bytes_view`` and ``_buf_span`` validate arguments with one clear error naming the
argument. This module sits below :mod:`nvmelab.driver` and :mod:`nvmelab.driver.qpair`, which both use it,
so neither imports the other's internals (no import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _native
from . import spec

if TYPE_CHECKING:  # annotations only
    from . import Controller

DmaBuffer = _native.DmaBuffer
"""DMA memory from :meth:`Controller.alloc`: a context manager; ``.array`` is a numpy
uint8 view (no copy), ``np.asarray(buf)`` is the same view; ``.close()`` retires it."""

BytesLike = bytes | bytearray | memoryview | np.ndarray


class Namespace:
    """One active namespace: its size, LBA format and synchronous I/O.

    ``nsze`` is the size in logical blocks, ``lba_size`` the bytes per block,
    ``nbytes`` the capacity in bytes.
    """

    def __init__(self, native: Any, ctrl: Controller) -> None:
        self._native = native
        self.controller = ctrl
        self.nsid = int(native.nsid)
        self.lba_size = int(native.lba_size)
        self.nsze = int(native.nsze)

    @property
    def nbytes(self) -> int:
        return self.nsze * self.lba_size

    def __repr__(self) -> str:
        return f"<nvmelab.Namespace nsid={self.nsid} nsze={self.nsze} lba_size={self.lba_size}>"

    # -- argument checks shared with QPair --
    def check_range(self, slba: int, nlb: int) -> tuple:
        """Validate an LBA range; return (slba, nlb) as ints or raise ValueError naming the argument."""
        slba = _count("slba", slba)
        nlb = _count("nlb", nlb, minimum=1)
        if slba >= self.nsze:
            raise ValueError(f"slba: {slba} is beyond the namespace (nsze={self.nsze})")
        if slba + nlb > self.nsze:
            raise ValueError(f"nlb: slba {slba} + nlb {nlb} runs past the end of the namespace (nsze={self.nsze})")
        return slba, nlb

    # -- synchronous I/O --
    def read(self, slba: int, nlb: int, out: DmaBuffer | np.ndarray | None = None) -> np.ndarray:
        """Read ``nlb`` blocks from ``slba``; return a numpy uint8 array of ``nlb * lba_size`` bytes.

        ``out`` (optional): a DmaBuffer or a writable contiguous numpy uint8 array of at least that
        many bytes; the data lands there and a view of it is returned. Requests beyond the largest
        transfer are split.
        """
        slba, nlb = self.check_range(slba, nlb)
        n = nlb * self.lba_size
        if out is None:
            dest: Any = np.empty(n, dtype=np.uint8)
            view = dest
        elif isinstance(out, DmaBuffer):
            if out.nbytes < n:
                raise ValueError(f"out: {out.nbytes} bytes is smaller than nlb*lba_size = {n}")
            dest, view = out, out.array[:n]
        elif isinstance(out, np.ndarray):
            if out.dtype != np.uint8 or not out.flags.c_contiguous or not out.flags.writeable:
                raise TypeError("out: expected a writable C-contiguous numpy uint8 array")
            if out.nbytes < n:
                raise ValueError(f"out: {out.nbytes} bytes is smaller than nlb*lba_size = {n}")
            dest = view = out.reshape(-1)[:n]
        else:
            raise TypeError(f"out: expected a DmaBuffer or a numpy uint8 array, got {type(out).__name__}")
        self._transfer(spec.OPC_READ, slba, nlb, dest)
        return view

    def write(self, slba: int, data: BytesLike | DmaBuffer) -> None:
        """Write ``data`` (bytes-like, numpy uint8 or a DmaBuffer) at ``slba``.

        Its length must be a multiple of ``lba_size``. Requests beyond the largest transfer are split.
        """
        slba = _count("slba", slba)
        src: Any
        if isinstance(data, DmaBuffer):
            src, n = data, data.nbytes
        else:
            src = _as_bytes_view("data", data)
            n = src.nbytes
        if n == 0 or n % self.lba_size:
            raise ValueError(
                f"data: length {n} is not a multiple of lba_size {self.lba_size}"
                if n
                else "data: length 0; write needs at least one block"
            )
        slba, nlb = self.check_range(slba, n // self.lba_size)
        self._transfer(spec.OPC_WRITE, slba, nlb, src)

    def _transfer(self, opc: int, slba: int, nlb: int, buf: Any) -> None:
        per = max(1, min(self.controller.max_transfer // self.lba_size, spec.MAX_NLB))
        for s, k in _spans(slba, nlb, per):
            off = (s - slba) * self.lba_size
            self.controller._io(self, opc, s, k, buf, off, k * self.lba_size)

    def flush(self) -> None:
        """Flush volatile write cache contents of this namespace to media."""
        self.controller._io(self, spec.OPC_FLUSH, 0, 0, None, 0, 0)

    def write_zeroes(self, slba: int, nlb: int) -> None:
        """Zero ``nlb`` blocks from ``slba`` without a data transfer."""
        slba, nlb = self.check_range(slba, nlb)
        for s, k in _spans(slba, nlb, spec.MAX_NLB):
            self.controller._io(self, spec.OPC_WRITE_ZEROES, s, k, None, 0, 0)

    def deallocate(self, slba: int, nlb: int) -> None:
        """Dataset Management / deallocate (TRIM) ``nlb`` blocks from ``slba``; they then read as zeroes
        on the emulator (the spec leaves the value to the controller's DLFEAT)."""
        slba, nlb = self.check_range(slba, nlb)
        for s, k in _spans(slba, nlb, spec.MAX_DSM_NLB):
            self.controller._io(self, spec.OPC_DSM, s, k, None, 0, 0)


# --- argument helpers (shared with qpair.py) ---


def _int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    return int(v)


def _count(name: str, v: Any, minimum: int = 0, maximum: int | None = None) -> int:
    v = _int(name, v)
    if v < minimum:
        raise ValueError(f"{name}: {v} is below the minimum {minimum}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name}: {v} is above the maximum {maximum}")
    if v > spec.U64_MAX:
        raise ValueError(f"{name}: {v} does not fit in 64 bits")
    return v


def _spans(slba: int, nlb: int, per: int):
    done = 0
    while done < nlb:
        k = min(per, nlb - done)
        yield slba + done, k
        done += k


def _as_bytes_view(name: str, data: Any) -> memoryview:
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise TypeError(f"{name}: expected a numpy uint8 array, got dtype {data.dtype}")
        data = np.ascontiguousarray(data).reshape(-1)
        return memoryview(data)
    if isinstance(data, (str, int, float)) or data is None:
        raise TypeError(f"{name}: expected bytes-like or numpy uint8 data, got {type(data).__name__}")
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(f"{name}: expected bytes-like or numpy uint8 data, got {type(data).__name__}") from None
    if not mv.c_contiguous:
        raise ValueError(f"{name}: the buffer is not contiguous")
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def _buf_span(buf: DmaBuffer | None, offset: Any, nbytes: Any, name: str) -> tuple:
    """(offset, nbytes) of a command's data in ``buf``, validated against its size."""
    if buf is None:
        if (nbytes or 0) != 0 or offset != 0:
            raise ValueError(f"{name}: offset/nbytes given but no buffer")
        return 0, 0
    if not isinstance(buf, DmaBuffer):
        raise TypeError(f"{name}: expected a DmaBuffer from Controller.alloc(), got {type(buf).__name__}")
    offset = _count("offset", offset)
    if nbytes is None:
        nbytes = buf.nbytes - offset if offset <= buf.nbytes else 0
    nbytes = _count("nbytes", nbytes)
    if offset + nbytes > buf.nbytes:
        raise ValueError(f"{name}: offset {offset} + {nbytes} bytes exceeds the buffer's {buf.nbytes} bytes")
    if offset % spec.DWORD:
        raise ValueError(f"offset: {offset} is not dword aligned (PRP entries need 4-byte alignment)")
    return offset, nbytes
