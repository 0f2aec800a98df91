# SPDX-License-Identifier: BSD-3-Clause
"""Asynchronous I/O on an NVMe queue pair: submit commands, poll completions.

A :class:`QPair` comes from ``Controller.qpair(depth=..., timeout=..., batch=...)``::

    with c.qpair(depth=64) as q, c.alloc(1 << 20) as buf:
        q.submit_read(ns, slba=0, nlb=8, buf=buf, offset=0, tag="a")
        q.submit_write(ns, slba=8, nlb=8, buf=buf, offset=4096)
        for cpl in q.wait_all(timeout=5):
            cpl.check()                # raises NvmeError / OSError when the command failed

Rules:

* At most ``depth - 1`` commands are outstanding (an SQ with ``depth`` entries is full
  at ``depth - 1``); one more raises BlockingIOError until ``poll`` reaps completions.
* Data must live in a :class:`~nvmelab.driver.DmaBuffer`; the QPair keeps the buffer's
  memory alive while a command on it is outstanding, and ``DmaBuffer.close()`` raises
  BufferError while it has outstanding commands.
* A request larger than the controller's MDTS is refused with ValueError (the
  synchronous ``Namespace.read/write`` split instead).
* With ``batch > 1`` the SQ doorbell is rung once per ``batch`` submissions; ``ring()``
  (and ``poll``/``wait_all``, which ring first) flush the rest.
* A QPair belongs to one thread at a time; using it from two threads at once raises
  RuntimeError. Polls release the GIL while they wait.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

from .. import _native
from . import spec
from .errors import NvmeError, os_error
from .namespace import DmaBuffer, Namespace, _buf_span, _count

__all__ = ["QPair", "Completion", "check_completion", "opcode_name"]


def opcode_name(opc: int) -> str:
    """The NVM command set name of an I/O opcode (``"Read"``, ``"Write"``, ...)."""
    return spec.io_opcode_name(opc)


@dataclass(frozen=True)
class Completion:
    """One completed command.

    Attributes:
        tag: what the caller passed as ``tag=`` at submission (an int counter if none).
        cid: the command identifier the driver used.
        ok: True when the command succeeded (no system error, status 0/0).
        sct, sc, name, dnr: the NVMe status (``name`` is the spec's name, "Successful Completion" on success).
        error: the exception that describes a failure (NvmeError, or an OSError subclass such as
            TimeoutError), or None.
        cdw0: command-specific dword 0 of the CQE.
        command: what the command was (e.g. ``"Read nsid=1 slba=8 nlb=8"``).
    """

    tag: Any
    cid: int
    ok: bool
    sct: int
    sc: int
    name: str
    dnr: bool
    error: BaseException | None
    cdw0: int = 0
    command: str = ""

    @classmethod
    def from_native(cls, cpl: tuple, tag: Any, command: str) -> Completion:
        """Build from the native tuple ``(cid, err, sct, sc, dnr, cdw0)``."""
        cid, err, sct, sc, dnr, cdw0 = cpl
        if err:
            error: BaseException | None = os_error(err, command)
            name = error.strerror or ""
        elif sct or sc:
            name = _native.status_name(sct, sc)
            error = NvmeError(sct, sc, name, bool(dnr), command)
        else:
            name, error = _native.status_name(0, 0), None
        return cls(
            tag=tag,
            cid=int(cid),
            ok=error is None,
            sct=int(sct),
            sc=int(sc),
            name=name,
            dnr=bool(dnr),
            error=error,
            cdw0=int(cdw0),
            command=command,
        )

    def check(self) -> Completion:
        """Raise the completion's error if it failed; return self otherwise."""
        if self.error is not None:
            raise self.error
        return self


def check_completion(c: Completion) -> Completion:
    return c.check()


class QPair:
    """An I/O submission/completion queue pair on one controller (see the module doc)."""

    def __init__(self, native: Any, ctrl: Any, depth: int) -> None:
        self._native = native
        self.controller = ctrl
        self.depth = depth
        self._tags = itertools.count()
        self._pending: dict = {}  # native tag -> (user tag, command description)

    # -- lifetime --
    @property
    def closed(self) -> bool:
        return bool(self._native.closed)

    @property
    def qid(self) -> int:
        """The queue identifier on the controller."""
        return int(self._native.qid)

    @property
    def outstanding(self) -> int:
        """Commands submitted and not yet returned by poll()."""
        return int(self._native.outstanding)

    @property
    def memory(self) -> dict:
        """The queue's own DMA memory as bus addresses: ``{"sq": (address, bytes), "cq": ...,
        "prp_lists": ...}`` (the SQ ring, the CQ ring, one PRP-list page per command slot).
        For inspection: no raw command may point into it (:meth:`submit_raw`)."""
        return {k: (int(a), int(n)) for k, (a, n) in self._native.memory.items()}

    def close(self) -> None:
        """Delete the queues on the controller (SQ, then CQ); commands still outstanding are
        cancelled and their completions dropped. Safe to call twice."""
        self._native.close()
        self._pending.clear()

    def __enter__(self) -> QPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return "<nvmelab.QPair (closed)>"
        return f"<nvmelab.QPair qid={self.qid} depth={self.depth} outstanding={self.outstanding}>"

    # -- submission --
    def _data_args(self, ns: Any, slba: Any, nlb: Any, buf: Any, offset: Any) -> tuple:
        if not isinstance(ns, Namespace):
            raise TypeError(f"ns: expected a Namespace, got {type(ns).__name__}")
        if ns.controller is not self.controller:
            raise ValueError(f"ns: namespace {ns.nsid} belongs to another controller")
        slba, nlb = ns.check_range(slba, nlb)
        if nlb > spec.MAX_NLB:
            raise ValueError(f"nlb: {nlb} exceeds the NLB field's maximum of {spec.MAX_NLB} blocks")
        n = nlb * ns.lba_size
        limit = self.controller.max_transfer
        if n > limit:
            what = "MDTS" if limit == self.controller.mdts_bytes else "largest transfer"
            raise ValueError(
                f"nlb: {nlb} blocks ({n} bytes) exceed the controller's {what} of "
                f"{limit} bytes ({limit // ns.lba_size} blocks); split the request"
            )
        if not isinstance(buf, DmaBuffer):
            raise TypeError(f"buf: expected a DmaBuffer from Controller.alloc(), got {type(buf).__name__}")
        offset = _count("offset", offset)
        if offset % spec.DWORD:
            raise ValueError(f"offset: {offset} is not dword aligned (PRP entries need 4-byte alignment)")
        if offset + n > buf.nbytes:
            raise ValueError(f"buf: offset {offset} + {n} bytes exceeds the buffer's {buf.nbytes} bytes")
        return slba, nlb, offset, n

    def _submit(self, ns: Any, opc: int, slba: int, nlb: int, buf: Any, offset: int, n: int, tag: Any) -> Any:
        ntag = next(self._tags)
        self._native.submit(ns._native, opc, slba, nlb, buf, offset, n, ntag)
        if tag is None:
            tag = ntag
        self._pending[ntag] = (tag, f"{opcode_name(opc)} nsid={ns.nsid} slba={slba} nlb={nlb}")
        return tag

    def submit_read(self, ns: Any, slba: int, nlb: int, buf: Any, offset: int = 0, tag: Any = None) -> Any:
        """Queue a Read of ``nlb`` blocks at ``slba`` into ``buf[offset:]``; return the tag."""
        slba, nlb, offset, n = self._data_args(ns, slba, nlb, buf, offset)
        return self._submit(ns, spec.OPC_READ, slba, nlb, buf, offset, n, tag)

    def submit_write(self, ns: Any, slba: int, nlb: int, buf: Any, offset: int = 0, tag: Any = None) -> Any:
        """Queue a Write of ``nlb`` blocks at ``slba`` from ``buf[offset:]``; return the tag."""
        slba, nlb, offset, n = self._data_args(ns, slba, nlb, buf, offset)
        return self._submit(ns, spec.OPC_WRITE, slba, nlb, buf, offset, n, tag)

    def submit_flush(self, ns: Any, tag: Any = None) -> Any:
        """Queue a Flush of the namespace; return the tag."""
        self._check_ns(ns)
        return self._submit(ns, spec.OPC_FLUSH, 0, 0, None, 0, 0, tag)

    def submit_write_zeroes(self, ns: Any, slba: int, nlb: int, tag: Any = None) -> Any:
        """Queue a Write Zeroes of ``nlb`` blocks (at most 65536) at ``slba``; return the tag."""
        self._check_ns(ns)
        slba, nlb = ns.check_range(slba, nlb)
        if nlb > spec.MAX_NLB:
            raise ValueError(f"nlb: {nlb} exceeds the NLB field's maximum of {spec.MAX_NLB} blocks")
        return self._submit(ns, spec.OPC_WRITE_ZEROES, slba, nlb, None, 0, 0, tag)

    def submit_deallocate(self, ns: Any, slba: int, nlb: int, tag: Any = None) -> Any:
        """Queue a Dataset Management deallocate of one range; return the tag."""
        self._check_ns(ns)
        slba, nlb = ns.check_range(slba, nlb)
        if nlb > spec.MAX_DSM_NLB:
            raise ValueError(f"nlb: {nlb} exceeds a DSM range's maximum of {spec.MAX_DSM_NLB} blocks")
        return self._submit(ns, spec.OPC_DSM, slba, nlb, None, 0, 0, tag)

    def submit_raw(self, sqe: Any, buf: Any = None, offset: int = 0, nbytes: int | None = None, tag: Any = None) -> Any:
        """Queue a raw 64-byte SQE (bytes, or a dict for :func:`nvmelab.driver.spec.sqe`) as is.

        The driver sets the CID and, when ``buf`` is given, PRP1/PRP2 for ``nbytes`` bytes of it;
        every other field (opcode, nsid, cdw10-15) is sent unchecked, so the controller's own
        validation answers. Return the tag.

        The driver's IOMMU admits the command's PRPs only into data buffers: with ``buf``, the
        command may move at most ``nbytes`` (its length read from the SQE: NLB blocks of a
        Read/Write/Compare, the ranges of a DSM); without, PRP1, PRP2 and every PRP-list entry
        must each lie inside a ``Controller.alloc`` buffer, never in the driver's queue rings or
        PRP-list pages (:attr:`memory`). A refused command raises ValueError naming the PRP and
        its address, takes no command slot and leaves the queue working.
        """
        raw = spec.sqe_bytes(sqe)
        off, n = _buf_span(buf, offset, nbytes, "buf")
        ntag = next(self._tags)
        self._native.submit_raw(raw, buf, off, n, ntag)
        if tag is None:
            tag = ntag
        self._pending[ntag] = (tag, f"raw {spec.io_opcode_name(raw[0])} nsid={spec.sqe_nsid(raw)}")
        return tag

    def _check_ns(self, ns: Any) -> None:
        if not isinstance(ns, Namespace):
            raise TypeError(f"ns: expected a Namespace, got {type(ns).__name__}")
        if ns.controller is not self.controller:
            raise ValueError(f"ns: namespace {ns.nsid} belongs to another controller")

    def ring(self) -> None:
        """Ring the SQ doorbell for commands queued but not yet announced (batch mode)."""
        self._native.ring()

    # -- completion --
    def poll(self, max: int | None = None, timeout: float = 0.0) -> list:  # noqa: A002 - contract name
        """Reap up to ``max`` completions (all available when None).

        With ``timeout > 0`` wait (GIL released) until at least one completion arrives or the
        timeout passes; with 0 check once. Commands past the queue's command timeout complete
        with ``error=TimeoutError``. Returns a list of :class:`Completion`.
        """
        m = 0 if max is None else _count("max", max, minimum=1, maximum=0xFFFFFFFF)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout < 1e9:
            raise ValueError(f"timeout: expected seconds >= 0, got {timeout!r}")
        out = []
        for cpl in self._native.poll(m, float(timeout)):
            ntag, rest = cpl[0], cpl[1:]
            tag, what = self._pending.pop(ntag, (ntag, ""))
            out.append(Completion.from_native(rest, tag, what))
        return out

    def wait_all(self, timeout: float | None = None, check: bool = False) -> list:
        """Wait until no command is outstanding; return their completions in completion order.

        Args:
            timeout: seconds; None waits as long as the queue's command timeout lets commands live.
                When it passes with commands outstanding, TimeoutError (those commands stay queued).
            check: raise the first failed completion's error after all are reaped.
        """
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout < 1e9
        ):
            raise ValueError(f"timeout: expected seconds >= 0 or None, got {timeout!r}")
        self.ring()
        deadline = None if timeout is None else time.monotonic() + timeout
        out: list = []
        while self.outstanding:
            left = _POLL_SLICE_S if deadline is None else min(_POLL_SLICE_S, deadline - time.monotonic())
            if left <= 0:
                raise TimeoutError(f"wait_all: {self.outstanding} command(s) still outstanding after {timeout} s")
            out.extend(self.poll(timeout=left))
        if check:
            for c in out:
                c.check()
        return out


_POLL_SLICE_S = 0.25  # wait_all polls in slices so Ctrl-C and deadlines are honoured
