# SPDX-License-Identifier: BSD-3-Clause
"""The engines hand their parameter tables up (issue 37, item 1): every row of the perf engine's table
(src/engine/perf_params.h, ``_native.PERF_PARAMS``) and of cuda-run's (src/engine/crun_params.h,
``_native.CRUN_PARAMS``) is admitted by a study spec of the matching engine and reaches the run function;
a key no engine declares is refused with its name, by the spec, by perf.run and by the GPU stand-in; the
stand-in refuses a cuda-run row it cannot honour."""

from __future__ import annotations

import pytest

from nvmelab import _native
from nvmelab.engines import gpu, gpu_standin, perf
from nvmelab.studies import runner
from nvmelab.studies.spec import ENGINES, SpecError, load_spec
from tests.fake_study import fake_run, fake_spec, preset, sweep

#: The engine of each C table, its module and its table.
TABLES = {"cpu": (perf, _native.PERF_PARAMS), "cuda": (gpu, _native.CRUN_PARAMS)}
#: A second value per table type, swept beside the default (bounds permitting).
SWEPT = {"batch": 4, "timeout": 1.0, "sample_every": 16, "rwmix": 30, "rounds": 2}


def _spec(tmp_path, engine: str, fixed: dict, quick: dict):
    text = fake_spec(f"t_params_{engine}", quick, fixed=fixed).replace('engine = "cpu"', f'engine = "{engine}"')
    path = tmp_path / f"t_params_{engine}.toml"
    path.write_text(text)
    return load_spec(path)


@pytest.mark.parametrize("engine", sorted(TABLES))
def test_every_table_row_is_a_spec_parameter_and_reaches_the_run_function(engine, tmp_path):
    module, table = TABLES[engine]
    names = [p["name"] for p in table]
    assert set(names) <= set(ENGINES[engine].params)
    assert set(module.PYTHON_PARAMS) <= set(ENGINES[engine].params)
    fixed = {p["name"]: p["default"] for p in table}
    swept = {k: [fixed.pop(k), v] for k, v in SWEPT.items() if k in fixed}
    assert swept  # a row the spec could not sweep before the tables were handed up
    spec = _spec(tmp_path, engine, fixed, preset(sweep("all", **swept), repetitions=1))
    calls: list[dict] = []

    def run_fn(**kw):
        calls.append(kw)
        return fake_run(**kw)

    rep = runner.run_study(spec, "quick", run_fn=run_fn, results_root=tmp_path / "results", progress=False)
    n = 1
    for values in swept.values():
        n *= len(values)
    assert rep.ran == n == len(calls)
    for call in calls:
        assert set(names) <= set(call), sorted(set(names) - set(call))
    for k, values in swept.items():
        assert sorted({c[k] for c in calls}) == sorted(values), k


@pytest.mark.parametrize("engine", sorted(TABLES))
def test_a_spec_refuses_a_key_no_engine_declares(engine, tmp_path):
    with pytest.raises(SpecError, match="unknown key.*nosuch_knob"):
        _spec(tmp_path, engine, {"nosuch_knob": 1}, preset(sweep("one", qdepth=1)))


def test_the_study_runner_calls_the_real_cuda_engine():
    assert runner.resolve_engine("cuda") is gpu.run_cuda
    assert runner.resolve_engine("cpu") is perf.run


def test_perf_run_hands_one_mapping_to_the_engine(monkeypatch):
    seen: dict = {}

    class _T:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def info(self):
            return {}

        def check(self, **kw):
            seen.update(kw)
            raise RuntimeError("stop")  # the engine has been handed its parameters

    monkeypatch.setattr(perf, "open_target", lambda *a, **k: _T())
    given = {"batch": 4, "rwmix": 30, "rw": "randrw", "align": 4096, "lba_count": 1 << 20, "lat": False}
    with pytest.raises(RuntimeError, match="stop"):
        perf.run("emu://?profile=null", runtime=0.1, warmup=0.0, **given)
    for k, v in given.items():
        assert seen[k] == v, k
    assert set(seen) >= {p["name"] for p in perf.params()}


@pytest.mark.parametrize(
    "kw,err,word",
    [
        ({"nosuch_knob": 1}, TypeError, "nosuch_knob"),
        ({"poll": "spin"}, TypeError, "poll"),  # cuda-run's, not the perf engine's
        ({"nthreads": 3}, ValueError, "nthreads=3"),  # one thread per pinned CPU: ncpus=1 pins one
    ],
)
def test_perf_run_refuses_what_it_cannot_honour(kw, err, word):
    with pytest.raises(err, match=word):
        perf.run("emu://?profile=null", runtime=0.01, warmup=0.0, **kw)


STANDIN = {"target": "gpu-emu://?profile=null&ndev=1", "qdepth": 8, "runtime": 0.05, "warmup": 0.0}


@pytest.mark.parametrize(
    "kw,err,word",
    [
        ({"nosuch_knob": 1}, TypeError, "nosuch_knob"),
        ({"batch": 4}, TypeError, "batch"),  # the perf engine's, not cuda-run's
        ({"poll": "backoff:1000"}, ValueError, "poll='backoff:1000'"),
        ({"verify": True}, ValueError, "verify=True"),
        ({"gpu": 1}, ValueError, "gpu=1"),
        ({"lba_count": 64}, ValueError, "lba_count=64"),
        ({"ncpus": 2}, ValueError, "ncpus=2"),
        ({"payload": "gpu"}, ValueError, "payload='gpu'"),
    ],
)
def test_the_standin_refuses_what_it_cannot_honour(kw, err, word):
    with pytest.raises(err, match=word):
        gpu_standin.run_cuda_standin(**STANDIN, **kw)


def test_the_standin_knows_every_cuda_run_row():
    """Every row is either run as asked or run at one value: a row the stand-in has not been told about is
    refused when given, never ignored."""
    names = {p["name"] for p in gpu.params()}
    assert set(gpu_standin.HONOURED) | set(gpu_standin.AS_RUN) | set(gpu_standin.AS_DEFAULT) == names
    for p in gpu.params():  # each row at its default, alone: admitted (the stand-in's as-run values included)
        if p["name"] in ("poll", "rw", "runtime", "warmup", "iosize", "qdepth", "ndevs"):
            continue
        rec = gpu_standin.run_cuda_standin(**STANDIN, **{p["name"]: p["default"]})
        assert rec["standin"] is True, p["name"]
    rec = gpu_standin.run_cuda_standin(**STANDIN, poll="spin", ncpus=1, thr_sib=False, backend=gpu.BACKEND)
    assert rec["ios"] > 0


def test_every_cli_option_of_the_table_reaches_perf_run(monkeypatch):
    """`nvmelab perf run` hands every option made from the table to perf.run (--alldevs was made but dropped)."""
    import argparse

    from nvmelab.cli import perf as cli_perf

    parser = argparse.ArgumentParser()
    cli_perf.add_arguments(parser)
    args = parser.parse_args(["run", "--alldevs", "--batch", "4", "--align", "4096", "--rwmix", "30"])
    seen: dict = {}

    def fake(**kw):
        seen.update(kw)
        raise RuntimeError("stop")

    monkeypatch.setattr(perf, "run", fake)
    with pytest.raises(RuntimeError, match="stop"):
        cli_perf.run(args)
    assert {p["name"] for p in perf.params()} - {"nthreads"} <= set(seen)
    assert (seen["alldevs"], seen["batch"], seen["align"], seen["rwmix"]) == (True, 4, 4096, 30)
