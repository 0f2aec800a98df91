# SPDX-License-Identifier: BSD-3-Clause
"""The vram_cache study as a spec run by the sweep runner, with the tier engine (nvmelab.engines.tier.engine):
records fit the schema, name profile and scale, verify the state, resume, and skip the GPU cache with
the reason where there is no GPU."""

from __future__ import annotations

import pytest

from nvmelab.engines.tier import engine, gpu_available
from nvmelab.results import analysis, records
from nvmelab.studies import load_spec, parse_spec, run_study
from nvmelab.studies.vram_cache import analysis as vram_cache

#: pm1753 at scale 4 keeps the emulated latency short so the tests are quick.
TARGET = "emu://?profile=pm1753&scale=4"
TINY = dict(nqubits=14, depth=2, accesses=64, page=4096, fraction="1/4")


def test_spec_plans_the_seed_configurations():
    spec = load_spec("vram_cache")
    assert spec.engine == "tier" and spec.label == "sec-experiments-vram-cache"
    for preset in ("quick", "standard", "paper"):
        plan = spec.plan(preset)
        keys = [r.key for r in plan.runs]
        assert len(keys) == len(set(keys))
        params = [r.params for r in plan.runs]
        assert {p["cache"] for p in params} == {"none", "host", "gpu"}
        assert {p["ndevs"] for p in params if p["cache"] == "none"} == {1, 2, 4, engine.SEED_NDEVS}
        assert {p["ndevs"] for p in params if p["cache"] != "none"} == {engine.SEED_NDEVS}
        assert all(f"ndev={p['ndevs']}" in p["target"] and "profile=pm1753" in p["target"] for p in params)
        assert set(plan.sweeps) == {"striping", "cache"}


def test_engine_record_is_valid_and_verified():
    rec = engine.run(target=TARGET + "&ndev=2", rw="circuit", ndevs=2, cache="host", policy="lru", **TINY)
    records.validate(rec)
    assert rec["status"] == "ok" and rec["checksum_ok"] is True
    assert rec["provenance"]["profile"] == "pm1753" and rec["provenance"]["scale"] == 4 and "scale=4" in rec["target"]
    assert "nsze=" in rec["target"] and rec["study"] == "vram_cache" and rec["tool"] == "nvmelab-tier"
    assert rec["config"] == "RAID-0 x2 + host cache (lru)"
    assert 0 <= rec["hit_ratio"] <= 1
    assert rec["unused"] + rec["clean"] + rec["dirty"] == pytest.approx(1)
    assert len(rec["per_device"]) == 2 and all(d["write_mibs"] > 0 for d in rec["per_device"])
    assert rec["mibs"] > 0 and rec["runtime_s"] > 0


def test_engine_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="fraction"):
        engine.run(target=TARGET, **dict(TINY, fraction="1/0"))
    with pytest.raises(ValueError, match="allow_write"):
        engine.run(target="pci://0000:00:00.0", **TINY)
    with pytest.raises(ValueError, match="rw"):
        engine.run(target=TARGET, rw="sequential", **TINY)
    if not gpu_available()[0]:
        with pytest.raises(ValueError, match="GPU"):
            engine.run(target=TARGET, cache="gpu", **TINY)


SPEC = f"""
study = "t_vram"
engine = "tier"
target = "{TARGET}"
[fixed]
nqubits = 14
depth = 2
accesses = 64
page = 4096
fraction = "1/4"
rw = "random"
[presets.quick]
repetitions = 1
[[presets.quick.sweeps]]
name = "striping"
ndevs = [1, 2]
cache = "none"
[[presets.quick.sweeps]]
name = "cache"
ndevs = 2
cache = ["host", "gpu"]
[presets.standard]
[presets.paper]
"""


def test_runner_sweeps_resumes_and_skips_the_gpu_with_a_reason(tmp_path):
    import tomllib

    spec = parse_spec(tomllib.loads(SPEC))
    rep = run_study(spec, "quick", results_root=tmp_path, progress=False)
    assert rep.planned == 4
    gpu = gpu_available()[0]
    assert rep.ran == (4 if gpu else 3) and len(rep.skipped) == (0 if gpu else 1)
    if not gpu:
        assert "GPU" in rep.skipped[0][1]
    recs = records.load_records(next(iter(rep.paths)), check=True)
    assert all(r["checksum_ok"] for r in recs) and all(r["run_key"] for r in recs)
    again = run_study(spec, "quick", results_root=tmp_path, progress=False)
    assert again.already_done == rep.ran and again.ran == 0
    df = analysis.to_frame(recs)
    assert set(vram_cache.vram_per_device(df)["ndevs"]) == {1, 2}
    agg = vram_cache.vram_summary(df)
    assert set(agg["fraction_value"]) == {0.25}


def test_committed_records_resume_under_the_spec():
    """data/results/vram_cache/vm/standard.jsonl carries the runner's keys (migrated once): the
    runner finds every host-memory and no-cache run done and only the GPU runs pending."""
    from nvmelab.results.reference import data_root
    from nvmelab.studies.runner import done_keys

    path = data_root() / "results" / "vram_cache" / "vm" / "standard.jsonl"
    plan = load_spec("vram_cache").plan("standard")
    done = done_keys([path])
    pending = [r for r in plan.runs if r.key not in done]
    assert done <= {r.key for r in plan.runs}
    assert pending and all(r.params["cache"] == "gpu" for r in pending)
    assert len(done) == len(plan.runs) - len(pending)
