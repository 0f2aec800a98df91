# SPDX-License-Identifier: BSD-3-Clause
"""An engine's run parameters as its C table declares them, and one run's parameters as one mapping.

The engines with a native table (perf: src/engine/perf_params.h, ``_native.PERF_PARAMS``; cuda-run:
src/engine/crun_params.h, ``_native.CRUN_PARAMS``) hand their rows up through here: name, type, min, max,
default, doc. `resolve` turns a call's keywords into one mapping, every row at its default unless given, plus
the engine's Python-only keys; a keyword that is neither is refused (TypeError naming it), never ignored.
`as_run` is the record's ``engine_params`` block: every row as the engine ran it, so a new row reaches the
records with no Python edit.
"""

from __future__ import annotations

from typing import Any


def rows(name: str) -> list[dict]:
    """The rows of the native table `name` ("PERF_PARAMS", "CRUN_PARAMS"), each a dict of its own."""
    from .. import _native

    return [dict(p) for p in getattr(_native, name)]


def defaults(name: str) -> dict[str, Any]:
    """Each row's default, by row name, in the table's order."""
    return {p["name"]: p["default"] for p in rows(name)}


def default(name: str, row: str) -> Any:
    """The default of one row (KeyError for a row the table does not have)."""
    return defaults(name)[row]


def markdown(name: str) -> str:
    """The table as a Markdown reference (parameter, type, range, default, meaning)."""
    out = ["| parameter | type | range | default | meaning |", "|---|---|---|---|---|"]
    for p in rows(name):
        rng = "" if p["min"] is None else f"{p['min']}..{'' if p['max'] is None else p['max']}"
        out.append(f"| `{p['name']}` | {p['type']} | {rng} | {p['default']} | {p['doc']} |")
    return "\n".join(out)


def resolve(
    who: str, table: dict[str, Any], extra: dict[str, Any], listed: tuple[str, ...], target: str, given: dict[str, Any]
) -> dict[str, Any]:
    """One run's parameters: every row of `table` (row -> default) and every key of `extra` (the engine's
    Python-only keys and call labels -> default) at its default unless `given` (None counts as not given), the
    target, and the seed 1 + repetition unless given. A given key that is neither is refused: TypeError naming it
    and what `who` takes (`listed`: the Python-only keys as the engine names them). Values are checked by the
    engine's own check, not here."""
    unknown = sorted(set(given) - set(table) - set(extra) - {"target"})
    if unknown:
        raise TypeError(
            f"{who}: unknown parameter(s) {', '.join(unknown)}; it takes the table's "
            f"({', '.join(table)}) and {', '.join(listed)}"
        )
    p = {**table, **extra}
    p.update({k: v for k, v in given.items() if v is not None}, target=target)
    if "seed" in table and given.get("seed") is None:
        p["seed"] = 1 + p["repetition"] if isinstance(p.get("repetition"), int) else None
    return p


def as_run(table: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """The record's ``engine_params``: every row of `table` as resolved in `p` (the table's order)."""
    return {k: p[k] for k in table}
