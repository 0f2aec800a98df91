# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.book.environments: host summaries from record provenance (the book's environments chapter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvmelab.book import environments
from nvmelab.results.records import RecordError, write_records


def record(host: str, **prov) -> dict:
    base = {
        "study": "cpu_initiated",
        "tool": "nvmelab",
        "target": "emu://?profile=pm1753",
        "backend": "emu",
        "rw": "randread",
        "iosize": 512,
        "qdepth": 8,
        "nqueues": 1,
        "ndevs": 1,
        "ncpus": 1,
        "runtime_s": 1.0,
        "iops": 1000.0,
        "mibs": 0.5,
        "lat_ns": None,
        "cpu_usage": None,
        "cpu_freqs": None,
        "governor": None,
        "turbo": None,
        "smt": None,
        "thr_sib": 0,
        "stress": 0,
        "repetition": 0,
        "provenance": {
            "git_commit": "abcdef0123456789",
            "host": host,
            "cpu_model": "CPU X",
            "kernel": "6.1.0",
            "packages": {"nvmelab": "0.1.0", "numpy": "2.0"},
            "utc": "2025-01-01T00:00:00Z",
            "profile": "pm1753",
            "scale": 8.0,
        },
    }
    base["provenance"].update(prov)
    return base


def test_groups_by_host_and_reports_what_records_say(tmp_path):
    write_records(
        tmp_path / "cpu_initiated" / "a" / "standard.jsonl",
        [record("a"), record("a", utc="2025-01-02T00:00:00Z", kernel="6.2.0")],
    )
    rec_b = record("b", gpu={"name": "GPU Y", "driver": "550"})
    rec_b["study"], rec_b["target"] = "cuda_qdepth", "gpu-emu://?profile=pm1753"
    write_records(tmp_path / "cuda_qdepth" / "b" / "standard.jsonl", [rec_b])
    hosts = environments.collect(tmp_path)
    assert [h.host for h in hosts] == ["a", "b"]
    a, b = hosts
    assert a.records == 2 and a.kernel() == "6.1.0 / 6.2.0"
    assert a.span() == "2025-01-01T00:00:00Z – 2025-01-02T00:00:00Z"
    assert a.gpu() == "none recorded"
    assert a.emulation == {"pm1753 @ scale 8.0": 2}
    assert a.git_commits == ["abcdef012345"]
    assert environments.package_versions(a) == "nvmelab 0.1.0, numpy 2.0"
    assert b.gpu() == "GPU Y (driver 550)" and b.studies == {"cuda_qdepth": 1} and b.targets == {"gpu-emu://": 1}


def test_unknown_fields_are_not_guessed():
    rec = record("h", cpu_model=None, kernel=None, packages=None)
    (h,) = environments.host_environments([rec])
    assert h.cpu_model() == environments.UNKNOWN and h.kernel() == environments.UNKNOWN
    assert environments.package_versions(h) == environments.UNKNOWN


def test_records_that_predate_a_field_are_named_not_hidden():
    layout = {"logical": 2, "threads_per_core": 1}
    new = record("h", memory_bytes=2**33, virtualisation="kvm", cpu_layout=layout, kernel="6.2")
    old = record("h", cpu_layout=layout, kernel="6.1")
    old["study"] = "blksum_qdepth"
    (h,) = environments.host_environments([new, old, old])
    assert h.memory_text() == (
        "8.0 GiB (2 older records predate the field: 2 of blksum_qdepth; same CPU model and CPU layout as the "
        "records that carry it, kernel 6.1)"
    )
    assert h.virtualisation_text().startswith("kvm (2 older records predate the field")
    (only_old,) = environments.host_environments([old])
    assert only_old.memory_text() == "not recorded: all 1 records of this host (1 of blksum_qdepth) predate the field"
    (only_new,) = environments.host_environments([new])
    assert only_new.memory_text() == "8.0 GiB" and only_new.virtualisation_text() == "kvm"


def test_empty_or_missing_folder(tmp_path):
    assert environments.collect(tmp_path / "nope") == []
    assert environments.collect(tmp_path) == []


def test_corrupt_record_names_file_and_line(tmp_path):
    f = tmp_path / "s" / "h" / "standard.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text('{"study": "s"}\nnot json\n')
    with pytest.raises(RecordError, match=r"standard\.jsonl"):
        environments.collect(tmp_path)


def test_the_environments_chapter_states_what_the_committed_records_say():
    """book/environments.md says every 'ours' number comes from a 2-vCPU guest without SMT or
    cpufreq: every committed host's records must say so too (layout and host_control)."""
    from nvmelab.book import environments

    root = Path(__file__).resolve().parents[1]
    text = (root / "book" / "environments.md").read_text(encoding="utf-8")
    assert "2 virtual CPUs" in text and "no cpufreq" in text.replace("(no\ncpufreq", "(no cpufreq")
    hosts = environments.collect(root / "data" / "results")
    assert hosts
    vms = [h for h in hosts if not h.host.startswith("lease-")]
    assert vms
    for h in vms:
        assert h.logical_cpus == [2] and h.threads_per_core == [1], (h.host, h.cpus())
        for var in ("governor", "turbo", "smt", "freq_samples"):
            assert var in h.uncontrolled, f"{h.host}: {var} was controllable, the chapter says it is not"
    # the chapter's other kind of host: a lent GPU host with 16 CPUs and the GPU it names, device-initiated records only
    flat = " ".join(text.split())
    assert "lent GPU host" in flat and "16 CPUs" in flat
    for h in hosts:
        if h.host.startswith("lease-"):
            assert h.logical_cpus == [16] and h.gpus and all(g.startswith("NVIDIA") for g in h.gpus), (h.host, h.gpus)
            assert set(h.studies) <= {"cuda_qdepth", "cuda_iosize", "cuda_match", "cuda_pollcost"}, h.studies
