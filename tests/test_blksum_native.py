# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab-blksum (the native command) and blksum's image readers: the original's options and output,
the direct qcow2 reader (fixtures from tests/vectors/make_qcow2.py, no QEMU needed), bad images, and,
where qemu-img / qemu-nbd and libnbd are present, qemu's qcow2 images and the NBD path digest for
digest against the conformance vectors (and against the original blksum when BLKSUM_ORIGINAL names it)."""

from __future__ import annotations

import csv
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nvmelab.engines import blksum

VECTORS = Path(__file__).resolve().parent / "vectors"
sys.path.insert(0, str(VECTORS))
import make_qcow2  # noqa: E402

EXE = None
try:
    EXE = blksum.native_command()
except Exception:  # the extension is missing: every test skips below
    pass
pytestmark = pytest.mark.skipif(EXE is None, reason="nvmelab-blksum not built (make build)")

HAVE_NBD = False
NBD_WHY = "the extension is missing"
if EXE:
    HAVE_NBD, NBD_WHY = blksum.have_nbd()
QEMU_IMG = shutil.which("qemu-img")
QEMU_NBD = shutil.which("qemu-nbd")
needs_nbd = pytest.mark.skipif(
    not (HAVE_NBD and QEMU_NBD),
    reason=f"NBD path: {'qemu-nbd not on PATH (qemu-utils; make test-nbd installs it)' if HAVE_NBD else NBD_WHY}",
)
needs_qemu_img = pytest.mark.skipif(QEMU_IMG is None, reason="qemu-img not on PATH (qemu-utils; make test-nbd)")


def _rows():
    with open(VECTORS / "blkhash.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["digest"] == "sha256"]


ROWS = _rows()


def cmd(*args, check=True, **kw):
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, check=check, **kw)


def digest_of(*args) -> str:
    out = cmd(*args).stdout.split()
    assert len(out) == 2
    return out[0]


SECTOR = 512


@pytest.fixture(autouse=True)
def sockdir(monkeypatch):
    """A private TMPDIR per test: blksum puts the qemu-nbd socket's directory there, so a leftover is this
    test's own and not another run's that happens to share /tmp."""
    d = Path(tempfile.mkdtemp(prefix="bs-"))
    monkeypatch.setenv("TMPDIR", str(d))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def leftovers(d: Path) -> list[str]:
    return glob.glob(str(d / "nvmelab-blksum-*"))


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """spec -> (raw image, expected sha256), every layout kind of the vectors."""
    out = tmp_path_factory.mktemp("native")
    imgs = {}
    for i, row in enumerate(ROWS):
        p = out / f"v{i}.raw"
        subprocess.run([sys.executable, str(VECTORS / "make_image.py"), row["spec"], str(p)], check=True)
        imgs[row["spec"]] = (p, row["blkhash"])
    return imgs


@pytest.fixture(scope="module")
def qemu_view(images, tmp_path_factory):
    """spec -> the sha256 of the image as qemu presents it: sized in whole 512-byte sectors (a raw file's
    last sector zero-padded), which qemu-nbd, qemu-img and the original's NBD path all read. The vector's
    own digest where the size is already a multiple of 512; else the digest of a padded copy."""
    out = tmp_path_factory.mktemp("padded")
    view = {}
    for spec, (raw, want) in images.items():
        size = raw.stat().st_size
        if size % SECTOR == 0:
            view[spec] = want
            continue
        padded = out / raw.name
        shutil.copyfile(raw, padded)
        with open(padded, "r+b") as f:
            f.truncate(-(-size // SECTOR) * SECTOR)
        view[spec] = blksum.blkhash_py(padded, "sha256")
    assert any(v != images[s][1] for s, v in view.items()), "the vectors should include an unaligned tail"
    return view


# ------------------------------------------------------------------ the command


def test_output_format_and_options_of_the_original(images):
    p, want = images[ROWS[5]["spec"]]
    out = cmd("-d", "sha256", "-t", "2", "--queue-depth=4", "--read-size", "128k", "--block-size=64k", "-c", p)
    assert out.stdout == f"{want}  {p}\n" and out.stderr == ""
    assert digest_of("--threads", "1", "-q", "1", p) == want
    names = cmd("-l").stdout.split()
    assert "sha256" in names and "null" in names and names == sorted(names)
    assert "queue-depth" in cmd("--help").stderr + cmd("--help").stdout


def test_stdin_is_read_when_no_name(images):
    p, want = images[ROWS[6]["spec"]]
    with open(p, "rb") as f:
        out = subprocess.run([EXE, "-t", "2"], stdin=f, capture_output=True, text=True, check=True)
    assert out.stdout == f"{want}  -\n"


@pytest.mark.parametrize(
    "args,text",
    [
        (["-t", "0"], "valid range"),
        (["--queue-depth", "x"], "valid range"),
        (["--read-size", "100000"], "multiply of block size"),
        (["--block-size", "128k"], "64 KiB blocks only"),
        (["-d", "nosuch"], "Unknown digest"),
        (["--bogus"], "Invalid option"),
        (["--mode", "vmdk"], "auto, file, nbd or qcow2"),
        (["/nonexistent/image"], "No such file"),
    ],
)
def test_bad_options_one_line_error(args, text):
    out = cmd(*args, check=False)
    assert out.returncode == 1 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and text in out.stderr, out.stderr


# ------------------------------------------------------------------ the direct qcow2 reader


@pytest.mark.parametrize("zeros", ["flag", "data", "unallocated"])
def test_qcow2_fixtures_every_vector(images, qemu_view, tmp_path, zeros):
    for spec, (raw, _) in images.items():
        q = tmp_path / "img.qcow2"
        make_qcow2.write(str(raw), str(q), zeros=zeros)
        assert digest_of(q) == qemu_view[spec], f"{spec} zeros={zeros}"
        assert digest_of("--mode", "qcow2", "-t", "1", "-q", "1", "--read-size", "64k", q) == qemu_view[spec]


def test_qcow2_v2_small_clusters_and_python_api(images, qemu_view, tmp_path):
    raw, _ = images[ROWS[-1]["spec"]]
    want = qemu_view[ROWS[-1]["spec"]]
    q = tmp_path / "v2.qcow2"
    make_qcow2.write(str(raw), str(q), zeros="data", cluster_bits=12, version=2)
    assert digest_of(q) == want
    res = blksum.run(q, "sha256", threads=2, queue_depth=8, mode="auto")
    assert res.hexdigest == want and res.source == "qcow2" and res.io == "qcow2"
    # raw bytes of the qcow2 file are something else
    assert digest_of("--mode", "file", q) != want


def test_qcow2_zero_clusters_are_not_read(tmp_path):
    raw = tmp_path / "sparse.raw"
    with open(raw, "wb") as f:
        f.write(os.urandom(65536))
        f.write(bytes(3 * 65536))
        f.seek(40 * 65536)
        f.write(os.urandom(1000))
    q = tmp_path / "sparse.qcow2"
    make_qcow2.write(str(raw), str(q), zeros="flag")
    with open(raw, "r+b") as f:
        f.truncate(40 * 65536 + 1024)  # the qcow2's size: whole sectors
    res = blksum.run(q, "sha256", threads=1, mode="auto")
    assert res.hexdigest == blksum.blkhash_py(raw, "sha256")
    assert res.bytes_read < 3 * 65536 and res.hole_blocks >= 39


@pytest.mark.parametrize(
    "kind,text",
    [
        ("backing", "backing file"),
        ("encrypted", "encrypted"),
        ("compressed", "compressed cluster"),
        ("truncated_l1", "L1 table"),
        ("truncated_l2", "L2 table"),
        ("past_end", "past the end of the file"),
    ],
)
def test_bad_qcow2_one_clear_error(images, tmp_path, kind, text):
    raw, _ = images[ROWS[3]["spec"]]
    q = tmp_path / f"{kind}.qcow2"
    layout = make_qcow2.write(str(raw), str(q), zeros="data")
    make_qcow2.damage(str(q), layout, kind)
    out = cmd("--mode", "qcow2", q, check=False)  # mode auto reads a backing file or compressed cluster via qemu-nbd
    assert out.returncode == 1 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0] and str(q) in lines[0], out.stderr
    with pytest.raises(ValueError, match=text):
        blksum.run(q, "sha256", threads=1, mode="qcow2")


def test_not_qcow2_in_qcow2_mode(images):
    raw, _ = images[ROWS[0]["spec"]]
    out = cmd("--mode", "qcow2", raw, check=False)
    assert out.returncode == 1 and "not a qcow2 image" in out.stderr


@needs_qemu_img
@pytest.mark.parametrize("opts", [[], ["-o", "cluster_size=4096"], ["-o", "compat=0.10"]])
def test_qemu_img_qcow2_direct(images, qemu_view, tmp_path, opts):
    for spec, (raw, _) in images.items():
        q = tmp_path / "qemu.qcow2"
        subprocess.run([QEMU_IMG, "convert", "-q", "-f", "raw", "-O", "qcow2", *opts, raw, q], check=True)
        assert digest_of(q) == qemu_view[spec], f"{spec} {opts}"


@needs_qemu_img
def test_qemu_img_compressed_and_backing_refused(images, tmp_path):
    raw, _ = images[ROWS[5]["spec"]]  # random data: clusters that compress
    c = tmp_path / "c.qcow2"
    subprocess.run([QEMU_IMG, "convert", "-q", "-c", "-f", "raw", "-O", "qcow2", raw, c], check=True)
    out = cmd("--mode", "qcow2", c, check=False)
    assert out.returncode == 1 and "compressed cluster" in out.stderr and "--mode nbd" in out.stderr
    top = tmp_path / "top.qcow2"
    subprocess.run([QEMU_IMG, "create", "-q", "-f", "qcow2", "-b", c, "-F", "qcow2", top], check=True)
    out = cmd("--mode", "qcow2", top, check=False)
    assert out.returncode == 1 and "backing file" in out.stderr


# ------------------------------------------------------------------ NBD


def test_nbd_uri_error_is_one_line(tmp_path):
    """Without libnbd: the build's reason; with it: a server that is not there."""
    out = cmd(f"nbd+unix:///?socket={tmp_path}/none.sock", check=False)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert ("libnbd" in out.stderr) if not HAVE_NBD else ("none.sock" in out.stderr), out.stderr


@needs_nbd
def test_nbd_served_raw_and_qcow2_every_vector(images, qemu_view, tmp_path, sockdir):
    for spec, (raw, _) in images.items():
        want = qemu_view[spec]
        assert digest_of("--mode", "nbd", raw) == want, spec
        q = tmp_path / "n.qcow2"
        make_qcow2.write(str(raw), str(q), zeros="flag")
        assert digest_of("--mode", "nbd", "-t", "1", "-q", "3", q) == want, spec
        if QEMU_IMG:
            subprocess.run([QEMU_IMG, "convert", "-q", "-c", "-O", "qcow2", raw, q], check=True)
            assert digest_of("--mode", "nbd", q) == want, f"{spec} compressed"
    assert not leftovers(sockdir), "a private socket directory was left behind"


@needs_nbd
def test_nbd_uri_of_a_running_server(images, qemu_view, tmp_path):
    raw, _ = images[ROWS[7]["spec"]]
    want = qemu_view[ROWS[7]["spec"]]
    sock = tmp_path / "s.sock"
    srv = subprocess.Popen([QEMU_NBD, "-r", "-f", "raw", "--persistent", "-k", str(sock), str(raw)])
    try:
        for _ in range(200):
            if sock.exists():
                break
            time.sleep(0.02)
        uri = f"nbd+unix:///?socket={sock}"
        assert digest_of(uri) == want
        res = blksum.run(uri, "sha256", threads=2, queue_depth=8)
        assert res.hexdigest == want and res.io == "nbd"
        assert res.bytes_read + res.hole_blocks * blksum.BLOCK_SIZE == res.size
    finally:
        srv.terminate()
        srv.wait()


@needs_nbd
def test_nbd_skips_unallocated_extents(tmp_path):
    raw = tmp_path / "sparse.raw"
    with open(raw, "wb") as f:
        f.write(os.urandom(65536))
        f.truncate(64 << 20)
    res = blksum.run(raw, "sha256", threads=1, mode="nbd")
    assert res.hexdigest == blksum.blkhash_py(raw, "sha256")
    assert res.bytes_read <= 2 * 65536 and res.hole_blocks >= 1000


@pytest.fixture(scope="module")
def mixed_image(tmp_path_factory):
    """A few MiB of data, written zeros and holes with a short last block (size a whole number of
    sectors, so qemu-nbd serves it as it is), and its digest by the Python reference."""
    p = tmp_path_factory.mktemp("mixed") / "mixed.raw"
    blksum.make_image(p, (6 << 20) + 3 * SECTOR, pattern=(("d", 1), ("z", 1), ("h", 1), ("d", 2)))
    return p, blksum.blkhash_py(p, "sha256")


#: (threads, queue depth, read size): one chunk hashed by several threads (queue depth 1), chunks of 1
#: and 3 blocks, more buffers than reads on the wire; in NBD mode the reader hashing a whole chunk alone
#: (-t 1 at queue depth 1) and, with no -t (None: the default), joining the hash thread as one more
PIPELINE_SHAPES = [
    (2, 1, "256k"),
    (3, 1, "192k"),
    (2, 2, "64k"),
    (3, 7, "256k"),
    (1, 16, "1m"),
    (1, 1, "256k"),
    (None, 1, "256k"),
    (None, 16, "64k"),
]


@pytest.mark.parametrize(
    "mode, wire",
    [("file", ""), pytest.param("nbd", "", marks=needs_nbd)]
    + [pytest.param("nbd", w, marks=needs_nbd) for w in ("0", "1")],
)
def test_pipeline_shapes_give_the_same_digest(mixed_image, mode, wire, monkeypatch):
    """Hash threads sharing a chunk, the reader woken by them, and the reads on the wire to our own
    qemu-nbd capped (the default), uncapped (NVMELAB_BLKSUM_NBD_WIRE=0) or one at a time: the digest is
    the reference's in every shape."""
    monkeypatch.setenv("NVMELAB_BLKSUM_NBD_WIRE", wire)
    raw, want = mixed_image
    for t, q, rs in PIPELINE_SHAPES:
        threads = [] if t is None else ["-t", t]
        got = digest_of("--mode", mode, *threads, "--queue-depth", q, "--read-size", rs, raw)
        assert got == want, (mode, wire, t, q, rs)


@needs_nbd
def test_nbd_bad_image_and_missing_server(tmp_path, sockdir):
    bad = tmp_path / "bad.qcow2"
    bad.write_bytes(b"QFI\xfb" + bytes(100))
    out = cmd("--mode", "nbd", bad, check=False)
    assert out.returncode == 1 and "qemu-nbd could not serve it" in out.stderr
    env = dict(os.environ, PATH=str(tmp_path))
    out = subprocess.run([EXE, "--mode", "nbd", str(bad)], capture_output=True, text=True, env=env)
    assert out.returncode == 1 and "qemu-nbd not found" in out.stderr
    assert not leftovers(sockdir)


@needs_nbd
def test_nbd_socket_directory_goes_under_tmpdir(tmp_path, monkeypatch):
    """The leftover checks above look in the test's TMPDIR: this proves blksum puts its directory there (it
    is deleted once the connection stands, so it cannot be seen while qemu-nbd serves)."""
    raw = tmp_path / "a.raw"
    raw.write_bytes(bytes(4096))
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("TMPDIR", str(not_a_dir))
    out = cmd("--mode", "nbd", raw, check=False)
    assert out.returncode == 1 and f"cannot create a private directory {not_a_dir}/nvmelab-blksum-" in out.stderr


def _qemu_nbd_serving(path) -> list[int]:
    pids = []
    for d in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            argv = Path(d).read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"qemu-nbd") and str(path).encode() in argv:
            pids.append(int(d.split("/")[2]))
    return pids


@needs_nbd
def test_ctrl_c_stops_qemu_nbd_and_leaves_nothing(tmp_path, sockdir):
    raw = tmp_path / "big.raw"
    with open(raw, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
    p = subprocess.Popen([EXE, "--mode", "nbd", "-t", "1", "--queue-depth", "1", "--read-size", "64k", str(raw)])
    deadline = time.monotonic() + 10
    while not _qemu_nbd_serving(raw) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.01)
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=20)
    assert rc in (128 + signal.SIGINT, 0)
    deadline = time.monotonic() + 5
    while _qemu_nbd_serving(raw) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _qemu_nbd_serving(raw)
    assert not leftovers(sockdir)


def test_build_info_names_nbd():
    import nvmelab

    part = nvmelab.build_info()["parts"]["nbd"]
    assert part["available"] == HAVE_NBD and part["detail"]


def _original(kind: str) -> str | None:
    env = os.environ.get("BLKSUM_ORIGINAL" if kind == "nbd" else "BLKSUM_ORIGINAL_PREAD")
    p = Path(env) if env else VECTORS.parents[1] / "build" / "original" / kind / "bin" / "blksum"
    return str(p) if p.is_file() and os.access(p, os.X_OK) else None


@pytest.mark.skipif(not (_original("nbd") or _original("pread")), reason="the original blksum is not built here")
def test_same_digests_as_the_original(images, tmp_path):
    """The original's NBD build (qemu-nbd for every image) and pread build against ours: raw through
    NBD and as a file, qcow2 through NBD and through the direct reader."""
    nbd, pread = _original("nbd"), _original("pread")
    for spec, (raw, want) in images.items():
        q = tmp_path / "o.qcow2"
        make_qcow2.write(str(raw), str(q), zeros="flag")
        if pread:
            out = subprocess.run([pread, str(raw)], capture_output=True, text=True, check=True)
            assert out.stdout == cmd(raw).stdout == f"{want}  {raw}\n", spec
        if nbd and HAVE_NBD and QEMU_NBD:
            theirs = subprocess.run([nbd, str(raw)], capture_output=True, text=True, check=True).stdout.split()[0]
            assert digest_of("--mode", "nbd", raw) == theirs, spec
            theirs = subprocess.run([nbd, str(q)], capture_output=True, text=True, check=True).stdout.split()[0]
            assert digest_of(q) == digest_of("--mode", "nbd", q) == theirs, spec


@needs_nbd
def test_nbd_server_aio_raw_io_uring_qcow2_threads_and_fallback(mixed_image, tmp_path):
    """Our qemu-nbd reads a raw image with aio=io_uring where this process may use io_uring, a qcow2 with
    threads (qemu 7.2's io_uring hangs on a truncated qcow2); a qemu-nbd that refuses io_uring is started
    again with threads, and its refusal is not shown."""
    raw, want = mixed_image
    q = tmp_path / "m.qcow2"
    make_qcow2.write(str(raw), str(q), zeros="flag")
    log, bindir = tmp_path / "argv.log", tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "qemu-nbd"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'case "$*" in *--aio=io_uring*) [ -n "$REFUSE" ] && { echo "no io_uring here" >&2; exit 1; };; esac\n'
        f'exec {QEMU_NBD} "$@"\n'
    )
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    uring = blksum.have_io_uring()
    for img, refuse in ((raw, ""), (q, ""), (raw, "1")):
        log.write_text("")
        out = subprocess.run(
            [EXE, "--mode", "nbd", str(img)], capture_output=True, text=True, env=dict(env, REFUSE=refuse)
        )
        assert out.returncode == 0 and out.stdout.split()[0] == want and out.stderr == "", (img, refuse, out.stderr)
        tries = log.read_text().splitlines()
        if img == q or not uring:
            assert len(tries) == 1 and "--aio=threads" in tries[0], tries
        elif not refuse:
            assert len(tries) == 1 and "--aio=io_uring" in tries[0], tries
        else:
            assert len(tries) == 2 and "--aio=io_uring" in tries[0] and "--aio=threads" in tries[1], tries


def test_a_digest_that_cannot_be_written_is_a_failure(images):
    """`nvmelab-blksum img > /dev/full` exited 0 with no digest: the result lost and the exit status saying success."""
    img, _ = next(iter(images.values()))
    with open("/dev/full", "w") as full:
        out = subprocess.run([EXE, str(img)], stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    assert out.returncode == 1, out
    assert "writing the digest" in out.stderr and "No space left on device" in out.stderr, out.stderr
