# SPDX-License-Identifier: BSD-3-Clause
"""The engine's run parameters are declared once (src/engine/perf_params.h); everything else is derived."""

from __future__ import annotations

import argparse

import pytest

from nvmelab import _native
from nvmelab.cli import perf as cli_perf
from nvmelab.engines import perf


def test_table_is_exported_with_bounds_and_docs() -> None:
    ps = {p["name"]: p for p in perf.params()}
    assert {"rw", "iosize", "qdepth", "nqueues", "runtime", "warmup", "batch", "verify", "lat"} <= set(ps)
    assert ps["qdepth"]["min"] == 1 and ps["qdepth"]["max"] == 65536 and ps["qdepth"]["default"] == 128
    assert all(p["doc"] for p in ps.values())


def test_cli_options_come_from_the_table() -> None:
    parser = argparse.ArgumentParser()
    cli_perf.add_arguments(parser)
    run = parser._subparsers._group_actions[0].choices["run"]  # noqa: SLF001 (argparse has no public API)
    dests = {a.dest: a for a in run._actions}
    for p in perf.params():
        if p["name"] in cli_perf._OWN:
            continue
        assert p["name"] in dests, p["name"]
        if p["name"] not in cli_perf._NONE_DEFAULT:
            assert dests[p["name"]].default == p["default"], p["name"]


@pytest.mark.parametrize(
    "kw,word",
    [
        ({"qdepth": 70000}, "qdepth=70000: must be 1..65536"),
        ({"nqueues": 2000}, "nqueues=2000: must be 1..1024"),
        ({"rwmix": 101}, "rwmix=101: must be 0..100"),
        ({"runtime": 0}, "runtime=0"),
        ({"batch": 1 << 20}, "batch=1048576"),
        ({"iosize": True}, "iosize=True"),
        ({"nosuch": 1}, "unknown engine parameter 'nosuch'"),
    ],
)
def test_one_check_names_the_parameter(kw: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        _native.perf_params_check(**kw)


def test_run_defaults_are_the_table_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    class _T:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def info(self):
            raise RuntimeError("stop")  # enough: the parameters have been resolved and checked

        def check(self, **kw):
            seen.update(kw)

    monkeypatch.setattr(perf, "open_target", lambda *a, **k: _T())
    monkeypatch.setattr(perf, "check_params", lambda p: (seen.update(p), [0])[1])  # the run's one mapping
    with pytest.raises(RuntimeError, match="stop"):
        perf.run("emu://")
    d = {p["name"]: p["default"] for p in perf.params()}
    for k in d:
        if k != "nthreads":  # one per pinned CPU (check_params)
            assert seen[k] == d[k], k
