# SPDX-License-Identifier: BSD-3-Clause
"""Errors raised by the nvmelab driver API.

Two kinds of failure are kept apart, as the C driver keeps them apart:

* :class:`NvmeError` -- the controller completed a command with a non-zero NVMe
  status. It carries the status code type (``sct``), status code (``sc``), the
  spec's name for that status (``name``, e.g. ``"LBA Out of Range"``), the
  Do-Not-Retry bit (``dnr``) and a description of the command that failed.
* :class:`OSError` subclasses -- a system-level failure reported by the driver as a
  negative errno (``TimeoutError`` for ``-ETIMEDOUT``, ``PermissionError`` for
  ``-EACCES``, ...). :func:`os_error` builds them; Python picks the subclass from
  the errno.

Bad arguments never reach the driver: they raise ``ValueError``/``TypeError``
naming the argument. Using a closed object raises :class:`ClosedError`.
"""

from __future__ import annotations

import errno as _errno
import functools
import logging
import os

log = logging.getLogger(__name__)


class ClosedError(ValueError):
    """An operation on a target, controller, queue pair or buffer that was closed.

    A subclass of ValueError, as for I/O on a closed Python file.
    """


class NvmeError(Exception):
    """A command completed with a non-zero NVMe status.

    Attributes:
        sct: status code type (0 generic, 1 command specific, 2 media/data integrity, ...).
        sc: status code within its type.
        name: the specification's name of the status (e.g. ``"LBA Out of Range"``).
        dnr: the Do-Not-Retry bit: retrying the same command will fail again.
        command: a one-line description of the failed command (opcode name, nsid, slba, nlb),
            or ``""`` when unknown.
    """

    def __init__(self, sct: int, sc: int, name: str, dnr: bool = False, command: str = "") -> None:
        self.sct = int(sct)
        self.sc = int(sc)
        self.name = str(name)
        self.dnr = bool(dnr)
        self.command = str(command)
        super().__init__(self._message())

    def _message(self) -> str:
        where = f"{self.command}: " if self.command else ""
        dnr = ", DNR" if self.dnr else ""
        return f"{where}{self.name} (SCT {self.sct:#x}, SC {self.sc:#04x}{dnr})"

    def __reduce__(self):  # picklable (e.g. across Dask workers)
        return (type(self), (self.sct, self.sc, self.name, self.dnr, self.command))


def os_error(err: int, what: str) -> OSError:
    """The OSError subclass for a driver error code (negative or positive errno).

    ``os_error(-errno.ETIMEDOUT, "Read nsid=1 slba=0 nlb=8")`` is a ``TimeoutError``
    whose message names the operation and the system's text for the errno.
    """
    code = abs(int(err))
    name = _errno.errorcode.get(code, f"errno {code}")
    return OSError(code, f"{what}: {os.strerror(code)} ({name})")


def check_uri(uri: str, what: str = "URI") -> str:
    """`uri` when the native layer can take it whole; else ValueError naming what is wrong.

    A NUL character would end the C string there (the rest silently dropped), and text that is
    not UTF-8 (a command-line byte Python kept as a surrogate) cannot be passed at all: both are
    refused here, before they reach the extension, with the offending position."""
    if not isinstance(uri, str):
        raise TypeError(f"{what}: expected str, got {type(uri).__name__}")
    nul = uri.find("\0")
    if nul >= 0:
        raise ValueError(f"{what} {uri!r}: contains a NUL character at offset {nul}")
    try:
        uri.encode("utf-8")
    except UnicodeEncodeError as exc:
        try:
            shown: object = os.fsencode(uri)  # the bytes as given (surrogate-escaped command-line bytes)
        except UnicodeEncodeError:
            shown = uri
        raise ValueError(f"{what} {shown!r}: not UTF-8 text (character {exc.start + 1})") from None
    _warn_old_spellings(uri)
    return uri


@functools.lru_cache(maxsize=256)
def _warn_old_spellings(uri: str) -> None:
    """Log, once per URI, the old key spellings an emulated target uses (nsze's old 'ns', ...; the table of
    src/nvme/emu/emu_keys.h words them): still accepted, gone in the next release."""
    try:
        from .. import _native

        warn = _native.emu_uri_warnings(uri)
    except (ImportError, AttributeError, ValueError):
        return
    if warn:
        log.warning("%s", warn)
