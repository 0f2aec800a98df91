# SPDX-License-Identifier: BSD-3-Clause
"""The Python face of the user-space NVMe driver: targets, controllers, namespaces.

``nvmelab.open(uri)`` opens a target (``emu://...``, ``pci://...``) and returns a
:class:`Target`: a sequence of :class:`Controller` objects and a context manager.
When the target has exactly one controller, the Target also forwards the
controller's methods (``identify``, ``namespace``, ``qpair``, ``alloc``, ``reset``,
...), so both spellings work::

    with nvmelab.open("emu://?ndev=2&nsze=64MiB") as ctrls:
        c = ctrls[0]                       # a Target is a sequence of controllers
        ns = c.namespace(1)
        ns.write(0, data)
        a = ns.read(0, 8)                  # a numpy uint8 array of 8 * ns.lba_size bytes

    with nvmelab.open("emu://?nsze=64MiB") as c:   # one controller: use it directly
        c.identify()["sn"]

Synchronous I/O (``Namespace.read/write/...``) is for convenience and tests: it
takes any bytes-like data (the C driver bounces it through DMA memory) and splits
requests larger than the largest transfer (MDTS). Asynchronous I/O goes through a
:class:`~nvmelab.driver.qpair.QPair` (``Controller.qpair(depth=...)``), which works on DMA
memory only, without copies, and refuses requests beyond MDTS. DMA memory comes
from :meth:`Controller.alloc` as a :class:`DmaBuffer` whose ``.array`` is a numpy
view of the driver's memory.

Lifetimes: closing a Target destroys its queue pairs and shuts its controllers
down; Controller, Namespace and QPair objects of a closed target raise
:class:`~nvmelab.driver.errors.ClosedError`. A DmaBuffer that still has numpy views when
it (or its target) is closed keeps its memory until the last view is gone, so a
view never dangles; ``DmaBuffer.close()`` raises BufferError while commands on it are
outstanding. Closing anything twice is safe.

Threads: controllers and namespaces may be shared between threads (admin
commands and synchronous I/O are serialised per controller); a QPair belongs to
one thread at a time (concurrent use raises RuntimeError). Blocking waits release
the GIL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from .. import _native
from . import spec
from .errors import ClosedError, NvmeError, check_uri, os_error
from .namespace import DmaBuffer, Namespace, _buf_span, _count, _int
from .qpair import Completion, QPair, check_completion, opcode_name

__all__ = ["open", "Target", "Controller", "Namespace", "QPair", "DmaBuffer", "Completion", "NvmeError", "ClosedError"]

log = logging.getLogger(__name__)

U32_MAX = 0xFFFFFFFF


def open(uri: str, **options: Any) -> Target:  # noqa: A001 - the package's entry point
    """Open the target named by ``uri`` and bring its controllers up.

    Args:
        uri: ``emu://?ndev=2&nsze=64MiB`` (emulated, the default), ``pci://0000:4a:00.0,...``
            (real controllers on an explicit allow-list). The URI grammar lives with the C
            parser (documented in ``src/README.md``); a bad URI raises ValueError naming the bad part.
        options: none yet; unknown keywords raise TypeError (put target options in the URI).

    Returns:
        a :class:`Target` (a sequence of controllers, and itself a controller when it has
        exactly one). Use it as a context manager, or call ``close()``.
    """
    if options:
        raise TypeError(f"open(): unexpected keyword argument(s) {sorted(options)}; target options belong in the URI")
    check_uri(uri, "uri")
    return Target(_native.Target(uri), uri)


class Target(Sequence):
    """The controllers of one URI. A sequence of :class:`Controller`; a context manager.

    With exactly one controller the Target forwards the controller's API (``identify``,
    ``namespace``, ``namespaces``, ``nsids``, ``qpair``, ``reset``, ``emu_inject``,
    ``admin_raw``, ``mdts_bytes``, ``max_transfer``); with several it raises ValueError asking for an index.
    """

    def __init__(self, native: Any, uri: str) -> None:
        self._native = native
        self.uri = uri
        self._ctrls = [Controller(native.ctrl(i), self, i) for i in range(native.nctrl)]
        log.debug("opened %s: %d controller(s)", uri, len(self._ctrls))

    # -- sequence of controllers --
    def __len__(self) -> int:
        return len(self._ctrls)

    def __getitem__(self, i):  # type: ignore[override]
        return self._ctrls[i]

    def __iter__(self) -> Iterator[Controller]:
        return iter(self._ctrls)

    # -- lifetime --
    @property
    def closed(self) -> bool:
        return bool(self._native.closed)

    def close(self) -> None:
        """Destroy the queue pairs, shut the controllers down (CC.SHN) and release the target.

        Safe to call twice. DMA buffers with live numpy views keep their memory until the
        views go away; the driver itself is released after them.
        """
        self._native.close()

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self)} controller(s)"
        return f"<nvmelab.Target {self.uri!r} {state}>"

    # -- memory --
    def alloc(self, nbytes: int) -> DmaBuffer:
        """DMA memory usable by every controller of this target (see :meth:`Controller.alloc`)."""
        return self._native.alloc(_count("nbytes", nbytes, minimum=1))

    # -- forwarding for a single controller --
    def _single(self, what: str) -> Controller:
        if len(self._ctrls) != 1:
            raise ValueError(f"{what}: this target has {len(self._ctrls)} controllers; pick one, e.g. target[0].{what}")
        return self._ctrls[0]

    def identify(self) -> dict:
        return self._single("identify").identify()

    def namespace(self, nsid: int = 1) -> Namespace:
        return self._single("namespace").namespace(nsid)

    def namespaces(self) -> list:
        return self._single("namespaces").namespaces()

    @property
    def nsids(self) -> list:
        return self._single("nsids").nsids

    @property
    def mdts_bytes(self) -> int:
        return self._single("mdts_bytes").mdts_bytes

    @property
    def max_transfer(self) -> int:
        return self._single("max_transfer").max_transfer

    def qpair(self, depth: int = 64, timeout: float = 5.0, batch: int = 1) -> QPair:
        return self._single("qpair").qpair(depth=depth, timeout=timeout, batch=batch)

    def reset(self) -> None:
        self._single("reset").reset()

    def emu_inject(self, kind: str, **kw: Any) -> None:
        self._single("emu_inject").emu_inject(kind, **kw)

    def admin_raw(self, sqe: Any, buf: DmaBuffer | None = None, **kw: Any) -> Completion:
        return self._single("admin_raw").admin_raw(sqe, buf, **kw)


class Controller:
    """One NVMe controller of a target (real or emulated).

    Obtain it from a :class:`Target` (``target[i]``). It lives as long as its target.
    """

    def __init__(self, native: Any, target: Target, index: int) -> None:
        self._native = native
        self.target = target
        self.index = index
        self._identify: dict | None = None

    @property
    def closed(self) -> bool:
        return bool(self._native.closed)

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving a controller's ``with`` block does nothing: the target owns it."""

    def __repr__(self) -> str:
        if self.closed:
            return f"<nvmelab.Controller {self.index} of {self.target.uri!r} (closed)>"
        idf = self.identify()
        return f"<nvmelab.Controller {self.index} mn={idf['mn']!r} sn={idf['sn']!r}>"

    def identify(self) -> dict:
        """Identify Controller fields as a dict (a fresh copy each call).

        Keys include ``vid, ssvid, sn, mn, fr, mdts`` (the raw exponent), ``mdts_bytes``
        (0 = no limit reported), ``cntlid, ver, nn, sqes, cqes, oncs, vwc`` and, where the
        driver knows them, ``mps_min`` and ``dstrd``.
        """
        if self._identify is None:
            self._identify = dict(self._native.identify())
        return dict(self._identify)

    @property
    def mdts_bytes(self) -> int:
        """MDTS in bytes as the controller reports it (0 = no limit reported)."""
        return int(self._native.mdts_bytes)

    @property
    def max_transfer(self) -> int:
        """The largest transfer per command the driver builds, in bytes (MDTS, or the driver's cap)."""
        return int(self._native.max_transfer)

    @property
    def nsids(self) -> list:
        """The active namespace IDs."""
        return list(self._native.nsids())

    def namespace(self, nsid: int = 1) -> Namespace:
        """The active namespace ``nsid``; ValueError if it is not active."""
        nsid = _count("nsid", nsid, minimum=1, maximum=U32_MAX)
        return Namespace(self._native.ns(nsid), self)

    def namespaces(self) -> list:
        """All active namespaces, in NSID order."""
        return [self.namespace(n) for n in self.nsids]

    def alloc(self, nbytes: int) -> DmaBuffer:
        """DMA memory of ``nbytes`` (page aligned) from this controller's target.

        The result is a context manager; ``buf.array`` is a numpy uint8 view of the memory.
        """
        return self.target.alloc(nbytes)

    def qpair(self, depth: int = 64, timeout: float = 5.0, batch: int = 1) -> QPair:
        """Create an I/O queue pair (an SQ/CQ pair on the controller).

        Args:
            depth: entries per queue; at most ``depth - 1`` commands can be outstanding
                (the spec's full rule). Must fit the controller's CAP.MQES.
            timeout: seconds after which an outstanding command completes with TimeoutError.
            batch: ring the SQ doorbell once per ``batch`` submissions (``ring()`` flushes).
        """
        depth = _count("depth", depth, minimum=2, maximum=U32_MAX)
        batch = _count("batch", batch, minimum=1, maximum=U32_MAX)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")
        if timeout > U32_MAX / 1000:
            raise ValueError(f"timeout: {timeout!r} s is too long")
        timeout_ms = max(1, int(round(timeout * 1000)))
        return QPair(self._native.qpair(depth, timeout_ms, batch), self, depth=depth)

    def reset(self) -> None:
        """Controller-level reset (CC.EN 1->0->1) and bring-up again.

        Queue pairs created before the reset are gone: they are closed, and their
        outstanding commands are dropped. Namespaces remain usable.
        """
        self._identify = None
        self._native.reset()

    def emu_inject(
        self,
        kind: str,
        *,
        nth: int = 1,
        sct: int = 0,
        sc: int = 0,
        dnr: bool = False,
        delay_ms: int = 0,
        qid: int = -1,
        count: int = 1,
    ) -> None:
        """Fault injection on an emulated controller (``emu://`` only).

        Args:
            kind: ``"status"`` (complete the nth command with status sct/sc),
                ``"drop"`` (never complete it), ``"delay"`` (complete it ``delay_ms`` late),
                ``dnr`` sets the Do-Not-Retry bit of an injected status,
                ``"cfs"`` (set CSTS.CFS: Controller Fatal Status), or ``"none"`` (clear).
            nth: which upcoming command (1 = the next one) on queue ``qid`` (-1 = any I/O queue).
            count: how many consecutive commands from the nth on.
        """
        if not isinstance(kind, str):
            raise TypeError(f"kind: expected str, got {type(kind).__name__}")
        self._native.emu_inject(
            kind,
            _count("nth", nth, minimum=1),
            _count("sct", sct, maximum=7),
            _count("sc", sc, maximum=255),
            _count("delay_ms", delay_ms, maximum=2**32 - 1),
            _int("qid", qid),
            _count("count", count, minimum=1, maximum=2**32 - 1),
            bool(dnr),
        )

    def admin_raw(
        self, sqe: Any, buf: DmaBuffer | None = None, *, offset: int = 0, nbytes: int | None = None, check: bool = False
    ) -> Completion:
        """Send a raw admin command (64-byte SQE as bytes or a dict of fields, see
        :func:`nvmelab.driver.spec.sqe`) and wait for its completion. The driver fills CID and PRPs.

        With ``check=True`` a non-zero status raises NvmeError; otherwise the Completion says.

        With ``buf`` the data goes through the driver's admin buffer. Without, the SQE's own PRPs
        pass the driver's IOMMU: an Identify, Get Log Page, Get/Set Features with a data
        structure, or the queue of a Create I/O CQ/SQ (contiguous, PC=1) must lie inside a
        ``Controller.alloc`` buffer, never in the driver's queues; otherwise ValueError names the
        PRP and its address and nothing reaches the controller.
        """
        raw = spec.sqe_bytes(sqe)
        off, n = _buf_span(buf, offset, nbytes, "buf")
        cpl = self._native.admin_raw(raw, buf, off, n)
        comp = Completion.from_native(cpl, tag=None, command=f"admin {spec.admin_opcode_name(raw[0])}")
        if check:
            check_completion(comp)
        return comp

    def _io(self, ns: Namespace, opc: int, slba: int, nlb: int, buf: Any, offset: int, nbytes: int) -> None:
        cpl = self._native.io(ns._native, opc, slba, nlb, buf, offset, nbytes)
        err, sct, sc, dnr, _cdw0 = cpl
        if err == 0 and sct == 0 and sc == 0:
            return
        what = f"{opcode_name(opc)} nsid={ns.nsid} slba={slba} nlb={nlb}"
        if err != 0:
            raise os_error(err, what)
        raise NvmeError(sct, sc, _native.status_name(sct, sc), bool(dnr), what)
