"""tier.study: records fit the schema, name profile and scale, verify the state, resume, and
record the GPU cache as not run where there is no GPU."""
from __future__ import annotations

import pytest

from nvmelab import records
from nvmelab.tier import gpu_available, study


def _tiny(**kw):
    # pm1753 at scale 4 keeps the emulated latency short so the test is quick
    return study.plan("quick", nqubits=14, depth=2, fractions=("1/4",), ndevs=(1, 2), page=4096, scale=4, **kw)


def test_plan_and_configs():
    sp = study.plan("quick")
    keys = [c.key for c in sp.configs]
    assert len(keys) == len(set(keys))
    assert {c.cache for c in sp.configs} == {"none", "host", "gpu"}
    assert {c.ndevs for c in sp.configs if c.cache == "none"} == {1, 2, 4, 7}
    assert "profile=pm1753" in sp.uri(7) and "ndev=7" in sp.uri(7)
    with pytest.raises(ValueError, match="preset"):
        study.plan("huge")
    with pytest.raises(ValueError, match="fraction"):
        study.plan("quick", fractions=("2",))


def test_run_one_records_are_valid_and_verified():
    sp = _tiny()
    cfgs = {c.key: c for c in sp.configs if c.workload == "circuit"}
    rec = study.run_one(cfgs["circuit/1/4/raid02/host/lru"], sp)
    records.validate(rec)
    assert rec["status"] == "ok" and rec["checksum_ok"] is True
    assert rec["provenance"]["profile"] == "pm1753" and rec["provenance"]["scale"] == 4 and "scale=4" in rec["target"]
    assert rec["study"] == "vram_cache" and rec["tool"] == "nvmelab-tier"
    assert 0 <= rec["hit_ratio"] <= 1
    assert rec["unused"] + rec["clean"] + rec["dirty"] == pytest.approx(1)
    assert len(rec["per_device"]) == 2 and all(d["write_mibs"] > 0 for d in rec["per_device"])
    assert rec["mibs"] > 0 and rec["runtime_s"] > 0
    gpu = study.run_one(cfgs["circuit/1/4/raid02/gpu/lru"], sp)
    records.validate(gpu)
    if not gpu_available()[0]:
        assert gpu["status"] == "not run" and "GPU" in gpu["reason"] and gpu["mibs"] == 0


def test_sweep_appends_and_resumes(tmp_path):
    sp = _tiny(workloads=("random",))
    path = tmp_path / "r.jsonl"
    seen = []
    study.sweep(study_plan=sp, path=path, progress=lambda r: seen.append(r["config_key"]))
    recs = records.load_records(path, check=True)
    assert len(recs) == len(sp.configs) == len(seen)
    assert all(r["checksum_ok"] for r in recs if r["status"] == "ok")
    seen.clear()
    study.sweep(study_plan=sp, path=path, progress=lambda r: seen.append(r["config_key"]))
    assert seen == [] and len(records.load_records(path)) == len(sp.configs)
    df = study.load(path)
    assert set(df["status"]) <= {"ok", "not run"}
    pd_ = study.per_device(df)
    assert set(pd_["ndevs"]) == {1, 2}


def test_cli_run_prints_one_verified_record(capsys):
    import json

    from nvmelab.cli import main

    rc = main(["tier", "run", "--workload", "random", "--fraction", "1/4", "--ndevs", "2", "--cache", "host",
               "--nqubits", "16", "--scale", "4"])
    out = capsys.readouterr().out
    rec = json.loads(out)
    assert rc == 0 and rec["checksum_ok"] is True and rec["config"] == "RAID-0 x2 + host cache (lru)"
    assert main(["tier", "run", "--fraction", "1/0", "--nqubits", "14"]) == 2
    assert "fraction" in capsys.readouterr().err


def test_real_target_needs_allow_write():
    sp = _tiny(target="pci://0000:00:00.0")
    assert sp.uri(2) == "pci://0000:00:00.0"
    with pytest.raises(ValueError, match="allow_write"):
        study.run_one(sp.configs[0], sp)
