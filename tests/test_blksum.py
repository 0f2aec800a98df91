# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.engines.blksum: conformance vectors, independence of the configuration, inputs, errors, Ctrl-C."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvmelab.engines import blksum
from nvmelab.results import records

VECTORS = Path(os.environ.get("NVMELAB_VECTORS", Path(__file__).resolve().parent / "vectors"))
NVMELAB = [sys.executable, "-m", "nvmelab"]


def _have_core() -> bool:
    try:
        from nvmelab import _native
    except ImportError:
        return False
    return hasattr(_native, "blksum_file")


pytestmark = pytest.mark.skipif(not _have_core(), reason="nvmelab native extension without the blksum core")


def _rows():
    path = VECTORS / "blkhash.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


ROWS = _rows()


@pytest.fixture(scope="session")
def vector_images(tmp_path_factory):
    """Each vector's image, built by the vectors' own make_image.py."""
    assert ROWS, f"conformance vectors not found under {VECTORS}"
    out = tmp_path_factory.mktemp("vectors")
    images = {}
    for spec in dict.fromkeys(r["spec"] for r in ROWS):
        p = out / f"img{len(images)}.raw"
        subprocess.run([sys.executable, str(VECTORS / "make_image.py"), spec, str(p)], check=True)
        images[spec] = p
    return images


@pytest.fixture(scope="session")
def mixed_image(tmp_path_factory):
    """A 40 MiB image with data, written zeros and holes, plus a short tail."""
    p = tmp_path_factory.mktemp("mixed") / "mixed.raw"
    desc = blksum.make_image(p, 40 * blksum.MIB + 12345, seed=3)
    return p, desc


def test_every_vector_row(vector_images):
    assert len(ROWS) >= 40
    for row in ROWS:
        got = blksum.checksum(vector_images[row["spec"]], row["digest"], threads=2, queue_depth=4)
        assert got == row["blkhash"], f"{row['spec']} {row['digest']}"


@pytest.mark.parametrize("io", blksum.IO_MODES)
@pytest.mark.parametrize("threads,qd,rs", [(1, 1, 64 * 1024), (3, 2, 128 * 1024), (2, 32, 1024 * 1024)])
def test_vectors_any_configuration(vector_images, io, threads, qd, rs):
    if io == "io_uring" and not blksum.have_io_uring():
        pytest.skip("io_uring unavailable (kernel, sysctl or seccomp)")
    for row in ROWS:
        if row["digest"] != "sha256":
            continue
        got = blksum.checksum(
            vector_images[row["spec"]], "sha256", threads=threads, queue_depth=qd, io=io, read_size=rs
        )
        assert got == row["blkhash"], f"{row['spec']} t={threads} q={qd} rs={rs} {io}"


def test_python_reference_agrees_with_vectors(vector_images):
    for row in ROWS:
        if row["spec"].startswith(("9:",)):  # the largest image: the C path covers it
            continue
        assert blksum.blkhash_py(vector_images[row["spec"]], row["digest"]) == row["blkhash"]


def test_mixed_image_independent_of_configuration(mixed_image):
    path, desc = mixed_image
    ref = blksum.blkhash_py(path, "sha256")
    seen = set()
    for io in [m for m in blksum.IO_MODES if m == "psync" or blksum.have_io_uring()]:
        for threads, qd, rs in [(1, 1, 64 << 10), (2, 8, 256 << 10), (4, 16, 4 << 20), (2, 3, 192 << 10)]:
            res = blksum.run(path, "sha256", threads=threads, queue_depth=qd, io=io, read_size=rs)
            seen.add(res.hexdigest)
            assert res.size == desc["image_bytes"]
    assert seen == {ref}


def test_holes_are_not_read_and_zeros_detected(mixed_image):
    path, desc = mixed_image
    res = blksum.run(path, "sha1", threads=2, queue_depth=4)
    assert res.hole_blocks * blksum.BLOCK_SIZE <= desc["image_hole_bytes"]
    assert res.hole_blocks > 0 and res.zero_blocks > 0
    assert res.bytes_read <= res.size - res.hole_blocks * blksum.BLOCK_SIZE
    assert res.bytes_read + res.hole_blocks * blksum.BLOCK_SIZE == res.size


def test_null_digest_is_empty_and_reads(mixed_image):
    path, _ = mixed_image
    res = blksum.run(path, "null", threads=1, queue_depth=2)
    assert res.hexdigest == "" and res.bytes_read > 0 and res.elapsed_s > 0


def test_short_zero_tail_hashes_as_itself(tmp_path):
    p = tmp_path / "z.raw"
    p.write_bytes(bytes(blksum.BLOCK_SIZE + 100))
    assert blksum.checksum(p, "sha256", threads=1) == blksum.blkhash_py(p, "sha256")
    sparse = tmp_path / "s.raw"
    with open(sparse, "wb") as f:
        f.truncate(3 * blksum.BLOCK_SIZE + 7)  # all hole, short last block inside the hole
    assert blksum.checksum(sparse, "md5", threads=2) == blksum.blkhash_py(sparse, "md5")


def test_stdin_pipe_matches_file(vector_images):
    row = next(r for r in ROWS if r["spec"].startswith("6:") and r["digest"] == "sha256")
    data = vector_images[row["spec"]].read_bytes()
    out = subprocess.run(NVMELAB + ["blksum", "-t", "2", "-q", "3"], input=data, capture_output=True, check=True)
    assert out.stdout.decode().split() == [row["blkhash"], "-"]


def test_cli_output_and_json(vector_images):
    row = next(r for r in ROWS if r["spec"].startswith("8:") and r["digest"] == "blake2b512")
    path = str(vector_images[row["spec"]])
    out = subprocess.run(NVMELAB + ["blksum", "-d", "blake2b512", path], capture_output=True, text=True, check=True)
    assert out.stdout == f"{row['blkhash']}  {path}\n"
    out = subprocess.run(
        NVMELAB + ["blksum", "-d", "blake2b512", "--io", "io_uring", "--json", path],
        capture_output=True,
        text=True,
        check=True,
    )
    d = json.loads(out.stdout)
    assert d["hexdigest"] == row["blkhash"] and d["elapsed_s"] > 0 and d["size"] == os.path.getsize(path)


def test_list_digests():
    names = blksum.digests()
    for n in ("null", "sha256", "sha1", "sha512", "blake2b512", "md5"):
        assert n in names
    out = subprocess.run(NVMELAB + ["blksum", "-l"], capture_output=True, text=True, check=True)
    assert "sha256" in out.stdout.split()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"digest": "no-such-digest"}, "unknown digest"),
        ({"threads": 0}, "threads"),
        ({"threads": -3}, "threads"),
        ({"queue_depth": 0}, "queue_depth"),
        ({"read_size": 0}, "read_size"),
        ({"read_size": 1000 * 1000}, "multiple"),
        ({"io": "aio"}, "io must be"),
    ],
)
def test_bad_parameters(mixed_image, kwargs, match):
    path, _ = mixed_image
    digest = kwargs.pop("digest", "sha256")
    with pytest.raises(ValueError, match=match):
        blksum.run(path, digest, **kwargs)


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError):
        blksum.checksum(tmp_path / "missing.raw")
    with pytest.raises(IsADirectoryError):
        blksum.checksum(tmp_path)
    p = tmp_path / "secret.raw"
    p.write_bytes(b"x")
    p.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(PermissionError):
            blksum.checksum(p)
    with pytest.raises(ValueError, match="gpu-emu://"):
        blksum.checksum("gpu-emu://?ndev=1")


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["/no/such/image"], "No such file"),
        (["-d", "bogus", "-"], "unknown digest"),
        (["-t", "0", "-"], "must be >= 1"),
        (["-q", "-4", "-"], "queue-depth"),
        (["--read-size", "1000", "-"], "multiple of 64 KiB"),
    ],
)
def test_cli_errors_are_one_line(argv, needle):
    out = subprocess.run(NVMELAB + ["blksum"] + argv, capture_output=True, text=True, input="")
    assert out.returncode == 2
    assert out.stdout == ""
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_ctrl_c_stops_promptly_without_digest(sigint):
    """An endless pipe never finishes; SIGINT must end the run quickly, exit 130, print no digest."""
    producer = subprocess.Popen(["yes", "blksum"], stdout=subprocess.PIPE)
    try:
        proc = subprocess.Popen(
            NVMELAB + ["blksum", "-t", "2"],
            stdin=producer.stdout,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=sigint,
        )
        producer.stdout.close()
        time.sleep(1.0)
        assert proc.poll() is None, "blksum ended on an endless pipe"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        assert time.monotonic() - t0 < 2.0
        assert proc.returncode == 130
        assert out == ""
        assert "interrupted" in err and "Traceback" not in err
    finally:
        producer.kill()
        producer.wait()


def test_record_fits_schema(mixed_image):
    path, desc = mixed_image
    res = blksum.run(path, "sha256", threads=2, queue_depth=8, io="psync")
    rec = blksum.to_record(res, repetition=0, image=desc)
    records.validate(rec)
    assert rec["study"] == "blksum_qdepth" and rec["target"].startswith("file://")
    assert rec["qdepth"] == 8 and rec["ncpus"] == 2 and rec["iosize"] == blksum.DEFAULT_READ_SIZE
    assert rec["digest"] == "sha256" and rec["image_hole_bytes"] == desc["image_hole_bytes"]
    assert rec["runtime_s"] == res.elapsed_s and rec["mibs"] > 0


def _emu_uri(backing: Path, nbytes: int, **params: str) -> str:
    extra = "".join(f"&{k}={v}" for k, v in params.items())
    return f"emu://?nsze={nbytes}&backing=file:{backing}{extra}"


@pytest.mark.parametrize("params", [{}, {"mdts": "16KiB"}, {"lbads": "4096", "mqes": "63", "mdts": "64KiB"}])
def test_emu_namespace_matches_file(tmp_path, mixed_image, params):
    """The same bytes read through the user-space driver (emu://, file-backed) give the file's digest."""
    src, _ = mixed_image
    nbytes = 8 * blksum.MIB
    img = tmp_path / "ns.raw"
    with open(src, "rb") as f:
        img.write_bytes(f.read(nbytes))
    want = blksum.blkhash_py(img, "sha256")
    uri = _emu_uri(img, nbytes, **params)
    for qd, rs in [(1, 64 << 10), (8, 1 << 20)]:
        res = blksum.run(uri, "sha256", threads=2, queue_depth=qd, read_size=rs)
        assert res.hexdigest == want and res.io == "nvmelab-emu" and res.size == nbytes
    rec = blksum.to_record(res, repetition=0)
    records.validate(rec)  # an emulated target names its profile and scale
    assert rec["target"].startswith("emu://") and rec["provenance"]["profile"]


def test_emu_bad_uri_is_one_clear_error():
    with pytest.raises(ValueError, match="bogus"):
        blksum.checksum("emu://?nsze=1MiB&bogus=1")
    out = subprocess.run(NVMELAB + ["blksum", "emu://?nsze=1MiB&bogus=1"], capture_output=True, text=True)
    assert out.returncode == 2 and "bogus" in out.stderr and "Traceback" not in out.stderr


# ------------------------------------------------------------ the study, through the runner ---
STUDY_SPEC = """
study = "t_blksum"
engine = "blksum"
target = "image://generated"
[fixed]
iosize = 262144
image_mib = 2
[presets.quick]
repetitions = 2
[[presets.quick.sweeps]]
name = "qdepth"
digest = "sha256"
backend = ["psync", "io_uring"]
ncpus = ["all", 1]
qdepth = [1, 4]
[[presets.quick.sweeps]]
name = "original"
tool = "blksum"
digest = "sha256"
backend = "psync"
ncpus = 1
qdepth = 1
[presets.standard]
[presets.paper]
"""


def test_study_runs_through_the_runner_and_resumes(tmp_path, monkeypatch):
    import tomllib

    from nvmelab.studies import parse_spec, run_study

    monkeypatch.setenv("NVMELAB_SCRATCH", str(tmp_path / "scratch"))
    spec = parse_spec(tomllib.loads(STUDY_SPEC))
    rep = run_study(spec, "quick", results_root=tmp_path / "results", progress=False)
    uring = blksum.have_io_uring()
    orig = blksum.original_blksum() is not None
    assert rep.planned == 2 * (8 + 1)
    assert rep.ran == 2 * ((8 if uring else 4) + (1 if orig else 0))
    reasons = " ".join(why for _, why in rep.skipped)
    if not uring:
        assert "io_uring" in reasons
    if not orig:
        assert "is not given" in reasons
    recs = records.load_records(next(iter(rep.paths)), check=True)
    ours = [r for r in recs if r["tool"] == blksum.TOOL]
    assert len({r["hexdigest"] for r in ours}) == 1 and ours[0]["image_bytes"] == 2 * blksum.MIB
    assert {r["ncpus"] for r in ours} == {blksum.default_threads(), 1}
    assert all(r["run_key"].endswith(f"#{r['repetition']}") for r in recs)
    assert not list((tmp_path / "scratch").glob("*.raw")), "the generated image is deleted after the sweep"
    again = run_study(spec, "quick", results_root=tmp_path / "results", progress=False)
    assert again.ran == 0 and again.already_done == rep.ran


def test_study_engine_refuses_bad_targets():
    with pytest.raises(ValueError, match="image://generated"):
        blksum.study_run(target="emu://?nsze=1MiB", image_mib=1)
    with pytest.raises(ValueError, match="image_mib"):
        blksum.study_run(image_mib=0)


def test_committed_records_resume_under_the_spec():
    """data/results/blksum_qdepth/vm/standard.jsonl carries the runner's keys: every file-mode run of
    nvmelab blksum is done (the NBD mode axis left their keys as they were); only the original tool's
    runs and the NBD-mode runs (added with the mode axis) were measured on top of them, so the committed
    records now cover the whole plan and a resume has nothing left to run."""
    from nvmelab.results.reference import data_root
    from nvmelab.studies import load_spec
    from nvmelab.studies.runner import done_keys

    plan = load_spec("blksum_qdepth").plan("standard")
    done = done_keys([data_root() / "results" / "blksum_qdepth" / "vm" / "standard.jsonl"])
    pending = [r for r in plan.runs if r.key not in done]
    assert done <= {r.key for r in plan.runs}
    assert not pending, f"{len(pending)} runs of the plan are not in the committed records, e.g. {pending[0].label()}"
    assert any(r.params.get("mode") == "nbd" for r in plan.runs if r.key in done)
    assert any(r.params["tool"] == blksum.ORIGINAL_TOOL for r in plan.runs if r.key in done)


def test_host_load_counts_qemu_nbd_as_the_servers_share_not_background() -> None:
    """In NBD mode the CPU beside our client is mostly the study's qemu-nbd, part of the measured path
    (issue 34, item 7): it is reported as the server's share, the file-mode runs giving the background."""
    import pandas as pd

    from nvmelab.studies.blksum_qdepth import analysis as blksum_qdepth

    ours = pd.DataFrame(
        {
            "mode": ["file", "file", "nbd", "nbd"],
            "cpu_usage": [100.0, 100.0, 60.0, 60.0],
            "host_cpu_usage": [102.0, 102.0, 150.0, 150.0],
        }
    )
    load = blksum_qdepth.blksum_host_load(ours)
    assert load["file_beside_median"] == 2.0 and load["nbd_beside_median"] == 90.0
    assert load["nbd_server_median"] == 88.0 and load["nbd_client_median"] == 60.0
    assert blksum_qdepth.blksum_host_load(ours.drop(columns=["host_cpu_usage"])) == {}


def test_gain_over_q1_carries_its_run_to_run_spread() -> None:
    import pandas as pd

    from nvmelab.results import reference
    from nvmelab.studies.blksum_qdepth import analysis as blksum_qdepth

    agg = pd.DataFrame(
        {
            "digest": "null",
            "io": "psync",
            "threads": 2,
            "qdepth": [1, 2],
            "runtime_s_mean": [2.0, 1.0],
            "runtime_s_std": [0.2, 0.1],
        }
    )
    best = blksum_qdepth.blksum_best(agg, reference.blksum_qdepth())
    mine = best[best.source == "ours"].iloc[0]
    assert mine.speedup == 2.0 and mine.spread == pytest.approx(2.0 * (0.1**2 + 0.1**2) ** 0.5)
    assert best[best.source == "seed"]["spread"].notna().all()  # from hyperfine's sigma


def test_bench_summary_compares_whole_processes_on_both_sides() -> None:
    """The chapter's comparison with the original reads the side-by-side benchmark, where both tools are
    timed as whole processes (issue 34, item 7: like with like)."""
    got = blksum.bench_summary("vm")
    if got is None:
        pytest.skip("no committed blksum benchmark for host vm")
    table, facts = got
    assert set(table.index.get_level_values("mode")) <= {"file", "nbd"}
    assert (table["least"] <= table["median"]).all() and (table["median"] <= table["most"]).all()
    assert (table["rounds_least"] <= table["least"]).all() and facts["image_bytes"] > 0
    assert blksum.bench_summary("no-such-host") is None


def test_profile_share_is_the_range_of_one_part_over_the_runs():
    import pandas as pd

    from nvmelab.studies.blksum_qdepth import analysis as blksum_qdepth

    prof = pd.DataFrame(
        {
            "image": ["dense", "dense", "dense", "sparse"],
            "mode": ["file", "file", "file", "file"],
            "digest": ["sha256"] * 4,
            "threads": [1, 4, 4, 4],
            "part": ["hash (OpenSSL)", "hash (OpenSSL)", "copies", "hash (OpenSSL)"],
            "pct": [61.0, 55.5, 12.0, 3.0],
        }
    )
    assert blksum_qdepth.profile_share(prof, "file", "sha256", "hash") == (55.5, 61.0)
    assert blksum_qdepth.profile_share(prof, "file", "sha256", "hash", image="sparse") == (3.0, 3.0)
