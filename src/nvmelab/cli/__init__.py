# SPDX-License-Identifier: BSD-3-Clause
"""The `nvmelab` command line.

Each module in this package that defines COMMAND (its name), HELP (one line),
add_arguments(parser) and run(args) -> int becomes a subcommand (ALIASES, optional,
are other names for it); modules are discovered, so each part of the project owns
its own file.

Errors are handled here, once, for every subcommand: a command raises (a
:class:`UsageError`, ``ValueError``, ``OSError``, :class:`~nvmelab.driver.errors.NvmeError`,
...) and :func:`main` prints ONE line on stderr, ``nvmelab COMMAND: error: MESSAGE``,
never a traceback. Exit status: 2 when a command could not do what was asked
(a bad option, URI or value, an unknown study or digest, a missing file, a
directory where a file belongs, a device that is mounted or in use, an NVMe
status, a part this build lacks), 128 + n when stopped by signal n: SIGINT (Ctrl-C, 130),
SIGTERM (143) and SIGHUP (129) alike, after the same cleanup (host.signals); 1 is left
to the commands for "ran, and the result is bad" (I/O errors counted in a record, a
verify mismatch).

``nvmelab --debug ...`` or ``NVMELAB_DEBUG=1`` prints the traceback as well.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import re
import sys
import traceback
from pathlib import Path

from ..host import signals

EXIT_ERROR = 2  # the command could not do what was asked (argparse uses 2 as well)
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left
_ERRNO_PREFIX = re.compile(r"^\[Errno -?\d+\]\s*")


class UsageError(Exception):
    """A problem with what the user asked for; printed without a traceback."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line on stderr (exit 2), like every other error."""

    def error(self, message: str):  # noqa: D401 (argparse API)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def records_file(text: str) -> str:
    """argparse type of a ``--json PATH`` option: '-' (stdout) or a JSONL file that can be written.

    Checked when the command line is parsed, so a bad path fails before a measurement, not after it.
    """
    if text == "-":
        return text
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory (name a .jsonl file)")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: cannot create files in {ancestor}")
    return text


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(
        prog="nvmelab",
        description="CPU- and GPU-initiated NVMe I/O: driver, emulated targets, engines and studies.",
    )
    parser.add_argument("--version", action="version", version=f"nvmelab {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error (also: NVMELAB_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if not hasattr(mod, "COMMAND"):
            continue
        p = sub.add_parser(
            mod.COMMAND,
            aliases=getattr(mod, "ALIASES", ()),
            help=mod.HELP,
            description=getattr(mod, "DESCRIPTION", mod.HELP),
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def error_message(exc: BaseException) -> str:
    """One line naming what was wrong, from any exception a command raised."""
    if isinstance(exc, OSError) and exc.strerror:
        # "[Errno 2] No such file or directory: 'x'" -> "x: No such file or directory"
        msg = _ERRNO_PREFIX.sub("", exc.strerror)
        if exc.filename is not None:
            msg = f"{os.fsdecode(exc.filename)}: {msg}"
            if exc.filename2 is not None:
                msg += f" -> {os.fsdecode(exc.filename2)}"
    elif isinstance(exc, KeyError) and len(exc.args) == 1:
        msg = str(exc.args[0])  # str(KeyError) is the repr of its key
    else:
        msg = _ERRNO_PREFIX.sub("", str(exc))
    if not _is_expected(exc) or not msg:
        msg = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return " ".join(msg.split())  # exactly one line


def _is_expected(exc: BaseException) -> bool:
    """An error a command raises on purpose (its message is the whole story), not a bug.

    NvmeError is recognised by name, so this needs no import (the handler must not fail itself).
    """
    if any(cls.__name__ == "NvmeError" for cls in type(exc).__mro__):
        return True
    return isinstance(exc, (UsageError, OSError, ValueError, TypeError, LookupError, RuntimeError))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # --debug is accepted anywhere on the line (`nvmelab perf run ... --debug`), not only before COMMAND.
    debug = "--debug" in argv or os.environ.get("NVMELAB_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    command = "nvmelab"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        command = f"nvmelab {args.command}"
        level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
        with signals.terminate_as_interrupt():
            return int(args._run(args) or 0)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: every finally has run
        if debug:
            traceback.print_exc()
        name = signals.signal_name(exc)
        print(f"{command}: interrupted" + ("" if name == "SIGINT" else f" ({name})"), file=sys.stderr)
        return signals.exit_status(exc)
    except BrokenPipeError:
        # The reader of our stdout went away (`nvmelab study list | head`): not an error of ours.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 -- the one place every command's errors become one line
        if debug:
            traceback.print_exc()
        hint = "" if debug or _is_expected(exc) else " (run with --debug for the traceback)"
        print(f"{command}: error: {error_message(exc)}{hint}", file=sys.stderr)
        return EXIT_ERROR
