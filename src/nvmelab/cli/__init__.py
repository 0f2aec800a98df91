"""The `nvmelab` command line.

Each module in this package that defines COMMAND (its name), HELP (one line),
add_arguments(parser) and run(args) -> int becomes a subcommand; modules are
discovered, so each part of the project owns its own file. Errors a user can fix
(bad URI, bad parameter, missing file) are raised as nvmelab.cli.UsageError or
ValueError and printed as one line, exit status 2; Ctrl-C exits 130.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys


class UsageError(Exception):
    """A problem with what the user asked for; printed without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="nvmelab",
        description="CPU- and GPU-initiated NVMe I/O: driver, emulated targets, engines and studies.",
    )
    parser.add_argument("--version", action="version", version=f"nvmelab {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if not hasattr(mod, "COMMAND"):
            continue
        p = sub.add_parser(mod.COMMAND, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args._run(args) or 0)
    except (UsageError, ValueError, TypeError, FileNotFoundError, PermissionError) as exc:
        print(f"nvmelab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"nvmelab {args.command}: interrupted", file=sys.stderr)
        return 130
