# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab-blksum's direct qcow2 reader against crafted images (issue 33, item 1).

Every image is built here by patching the header or tables of a sound image (tests/vectors/make_qcow2.py,
no QEMU needed): a guest size within one cluster of 2^64 (the cluster count must not wrap), an L1 table
whose entries all name one L2 table (memory must stay bounded by the file, not by the 8 TiB guest), and
each field qemu checks when it opens an image (the reader refuses what qemu refuses, exit 1, one line
naming the field; where qemu-img is present the test also shows qemu refusing the same file). A sound
image with a feature the direct reader does not read (compressed clusters, extended L2 entries, a
backing file, an external data file, the corrupt bit) is read by mode auto through qemu-nbd, digest for
digest with mode nbd; without qemu-nbd the one error names the feature.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from test_blksum_native import EXE, make_qcow2  # the native command, and the qcow2 fixtures' writer

from nvmelab.engines import blksum

pytestmark = pytest.mark.skipif(EXE is None, reason="nvmelab-blksum not built (make build)")

HAVE_NBD, NBD_WHY = blksum.have_nbd() if EXE else (False, "the extension is missing")
QEMU_IMG = shutil.which("qemu-img")
QEMU_NBD = shutil.which("qemu-nbd")
needs_nbd = pytest.mark.skipif(
    not (HAVE_NBD and QEMU_NBD and QEMU_IMG),
    reason="NBD path: "
    + (NBD_WHY if not HAVE_NBD else "qemu-nbd or qemu-img not on PATH (qemu-utils; make test-nbd installs it)"),
)
needs_qemu_img = pytest.mark.skipif(QEMU_IMG is None, reason="qemu-img not on PATH (qemu-utils; make test-nbd)")

CB = 16
CS = 1 << CB
BLOCK = 64 * 1024
MIB = 1 << 20
#: ru_maxrss bound for reading the 8 TiB shared-L2 image: generous for a busy machine, far below the
#: 1 GiB (8 bytes per guest cluster) the per-cluster table took
RSS_BOUND_KIB = 200 * 1024

# Header fields: name -> (byte offset, struct format), docs/interop/qcow2.txt
FIELDS = {
    "version": (4, ">I"),
    "backing_file_offset": (8, ">Q"),
    "backing_file_size": (16, ">I"),
    "cluster_bits": (20, ">I"),
    "size": (24, ">Q"),
    "crypt_method": (32, ">I"),
    "l1_size": (36, ">I"),
    "l1_table_offset": (40, ">Q"),
    "refcount_table_offset": (48, ">Q"),
    "refcount_table_clusters": (56, ">I"),
    "nb_snapshots": (60, ">I"),
    "snapshots_offset": (64, ">Q"),
    "incompatible_features": (72, ">Q"),
    "autoclear_features": (88, ">Q"),
    "refcount_order": (96, ">I"),
    "header_length": (100, ">I"),
    "compression_type": (104, ">B"),
}


def poke(path: Path, off: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(data)


def patch(path: Path, **fields) -> None:
    for name, value in fields.items():
        off, fmt = FIELDS[name]
        poke(path, off, struct.pack(fmt, value))


def field(path: Path, name: str) -> int:
    off, fmt = FIELDS[name]
    with open(path, "rb") as f:
        f.seek(off)
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def run(*args, env=None):
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, env=env)


def digest_of(*args) -> str:
    out = run(*args)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()[0]


def blkhash(blocks, size: int) -> str:
    """blkhash sha256 of a guest given as its 64 KiB blocks (bytes each): H(H(b1) || ... || le64(size))."""
    outer = hashlib.sha256()
    for b in blocks:
        outer.update(hashlib.sha256(b).digest())
    outer.update(struct.pack("<Q", size))
    return outer.hexdigest()


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    """A raw image of 4 data clusters and a hole (whole sectors: qemu's view is its bytes)."""
    p = tmp_path_factory.mktemp("crafted") / "r.raw"
    with open(p, "wb") as f:
        f.write(os.urandom(3 * CS))
        f.seek(6 * CS)
        f.write(os.urandom(CS))
    return p


def sound(raw: Path, out: Path, version: int = 3) -> dict:
    """A sound qcow2 of raw (qemu-img check passes), data clusters stored as data; its layout."""
    return make_qcow2.write(str(raw), str(out), zeros="data", cluster_bits=CB, version=version)


# ------------------------------------------------------------------ what qemu refuses, refused


def _snapshot_garbage(q: Path, lay: dict) -> None:
    host = next(iter(lay["data"].values()))  # a data cluster holds the "snapshot table"
    entry = struct.pack(">QIHHIIQII", 0, 0, 0, 0, 0, 0, 0, 0, 5000)  # extra_data_size 5000 > 1024
    poke(q, host, entry)
    patch(q, nb_snapshots=1, snapshots_offset=host)


def _v2_zero_flag(q: Path, lay: dict) -> None:
    c, host = next(iter(lay["data"].items()))
    poke(q, lay["l2"][0] + 8 * c, struct.pack(">Q", host | make_qcow2.COPIED | 1))


def _l2_entry_off_boundary(q: Path, lay: dict) -> None:
    c, host = next(iter(lay["data"].items()))
    poke(q, lay["l2"][0] + 8 * c, struct.pack(">Q", (host + 512) | make_qcow2.COPIED))


def _l1_entry_off_boundary(q: Path, lay: dict) -> None:
    poke(q, lay["l1"], struct.pack(">Q", (lay["l2"][0] + 512) | make_qcow2.COPIED))


def _extension_too_large(q: Path, lay: dict) -> None:
    poke(q, make_qcow2.HEADER_V3, struct.pack(">II", 0x12345678, 0x7FFFFFFF))


def _bitmaps_extension(q: Path, lay: dict) -> None:
    poke(q, make_qcow2.HEADER_V3, struct.pack(">II", 0x23852875, 16))
    patch(q, autoclear_features=1)


def _fields(**kw):
    return lambda q, lay: patch(q, **kw)


# id -> (version of the sound image, the damage, text the one error line must hold, qemu refuses it too)
CORRUPT = {
    "size-within-a-cluster-of-2^64": (3, _fields(size=2**64 - 512), "size", True),
    "size-one-cluster-below-2^64": (3, _fields(size=2**64 - CS), "size", True),
    "size-2^63": (3, _fields(size=2**63), "size", True),
    "l1_size-huge": (3, _fields(l1_size=0x01000000), "l1_size", True),
    "l1_size-too-small": (3, _fields(size=1 << 40), "l1_size", True),
    "l1_table_offset-off-a-cluster": (
        3,
        lambda q, lay: patch(q, l1_table_offset=lay["l1"] + 8),
        "l1_table_offset",
        True,
    ),
    "l1_table_offset-past-the-end": (3, _fields(l1_table_offset=1 << 40), "l1_table_offset", False),
    "v2-zero-flag": (2, _v2_zero_flag, "zero flag", True),
    "compression-bit-with-zlib": (3, _fields(incompatible_features=8), "compression_type", True),
    "compression_type-zstd-without-bit": (3, _fields(header_length=112, compression_type=1), "compression_type", True),
    "compression_type-unknown": (
        3,
        _fields(header_length=112, compression_type=7, incompatible_features=8),
        "compression_type",
        True,
    ),
    "incompatible_features-unknown-bit": (3, _fields(incompatible_features=1 << 5), "incompatible_features", True),
    "refcount_order-7": (3, _fields(refcount_order=7), "refcount_order", True),
    "refcount_table_offset-off-a-cluster": (3, _fields(refcount_table_offset=CS + 8), "refcount_table_offset", True),
    "refcount_table_clusters-0": (3, _fields(refcount_table_clusters=0), "refcount_table_clusters", True),
    "refcount_table_clusters-huge": (3, _fields(refcount_table_clusters=1000), "refcount_table_clusters", True),
    "snapshots_offset-off-a-cluster": (3, _fields(snapshots_offset=8), "snapshots_offset", True),
    "nb_snapshots-huge": (3, _fields(nb_snapshots=100000, snapshots_offset=CS), "nb_snapshots", True),
    "snapshot-table-garbage": (3, _snapshot_garbage, "extra_data_size", True),
    "header_length-short": (3, _fields(header_length=50), "header_length", True),
    "header_length-past-a-cluster": (3, _fields(header_length=CS + 8), "header_length", True),
    "header-extension-too-large": (3, _extension_too_large, "header extension", True),
    "bitmaps-extension-length": (3, _bitmaps_extension, "bitmaps extension", True),
    "cluster_bits-8": (3, _fields(cluster_bits=8), "cluster_bits", True),
    "crypt_method-unknown": (3, _fields(crypt_method=9), "crypt_method", True),
    "version-4": (3, _fields(version=4), "version", True),
    "backing_file_offset-past-a-cluster": (
        3,
        _fields(backing_file_offset=CS + 8, backing_file_size=4),
        "backing_file_offset",
        True,
    ),
    "backing_file_size-too-long": (
        3,
        _fields(backing_file_offset=512, backing_file_size=2000),
        "backing_file_size",
        True,
    ),
    "l1-entry-off-a-cluster": (3, _l1_entry_off_boundary, "L1 entry", True),
    "l2-entry-off-a-cluster": (3, _l2_entry_off_boundary, "off a cluster boundary", True),
}


def crafted(raw: Path, tmp_path: Path, case: str) -> Path:
    version, damage, _, _ = CORRUPT[case]
    q = tmp_path / "crafted.qcow2"  # a name that says nothing: the message must
    lay = sound(raw, q, version)
    damage(q, lay)
    return q


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_header_refused_naming_the_field(raw, tmp_path, case):
    q = crafted(raw, tmp_path, case)
    for mode in ("auto", "qcow2"):
        out = run("--mode", mode, q)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 1 and out.stdout == "", (mode, out.stdout, out.stderr)
        assert len(lines) == 1 and str(q) in lines[0], (mode, out.stderr)
        assert CORRUPT[case][2] in lines[0].replace(str(q), ""), (mode, out.stderr)


@needs_qemu_img
@pytest.mark.parametrize("case", sorted(c for c, v in CORRUPT.items() if v[3]))
def test_qemu_refuses_them_too(raw, tmp_path, case):
    """The reader refuses what qemu refuses: qemu-img cannot read these images either (the sound image
    it reads). Not listed here: an L1 table past the end of the file, which qemu reads as zeros."""
    q = crafted(raw, tmp_path, case)
    ok = tmp_path / "sound.qcow2"
    sound(raw, ok, CORRUPT[case][0])
    for img, want in ((ok, 0), (q, 1)):
        r = subprocess.run(
            [QEMU_IMG, "convert", "-f", "qcow2", "-O", "raw", img, tmp_path / "out.raw"], capture_output=True
        )
        assert (r.returncode != 0) == bool(want), (img, r.stderr)


def test_sound_image_and_the_fields_qemu_allows(raw, tmp_path):
    """The sound image, and the same with what qemu accepts: an odd header_length, an unknown header
    extension, zstd with its bit, a refcount or snapshot table past the end of the file."""
    want = blksum.blkhash_py(raw)
    q = tmp_path / "ok.qcow2"
    sound(raw, q)
    assert digest_of(q) == want
    variants = [
        dict(header_length=105),
        dict(header_length=112, compression_type=1, incompatible_features=8),
        dict(refcount_table_offset=1 << 40),
        dict(nb_snapshots=3, snapshots_offset=1 << 40),
    ]
    for kw in variants:
        sound(raw, q)
        patch(q, **kw)
        assert digest_of("--mode", "qcow2", q) == want, kw
    sound(raw, q)
    patch(q, header_length=112)  # compression_type (0, zlib) and its padding, then the extension
    poke(q, 112, struct.pack(">II", 0x12345678, 16))
    assert digest_of("--mode", "qcow2", q) == want


# ------------------------------------------------------------------ memory bounded by the file


def shared_l2_image(path: Path, l1_entries: int, data: list[int] = (), zero: list[int] = ()) -> tuple[int, list]:
    """A qcow2 whose l1_entries L1 entries all name one L2 table (64 KiB clusters): cluster 0 header, 1
    refcount table, 2 refcount block, 3.. L1, then the L2 table, then one data cluster per index of the
    table in data (in order); the indexes in zero have the zero flag. Returns the guest size and the data
    clusters' host offsets."""
    per_l2 = CS // 8
    size = l1_entries * per_l2 * CS
    l2 = 3 + -(-l1_entries * 8 // CS)
    hosts = [(l2 + 1 + k) * CS for k in range(len(data))]
    total = l2 + 1 + len(data)
    img = bytearray(total * CS)
    hdr = struct.pack(">IIQIIQIIQQIIQ", make_qcow2.MAGIC, 3, 0, 0, CB, size, 0, l1_entries, 3 * CS, CS, 1, 0, 0)
    hdr += struct.pack(">QQQII", 0, 0, 0, 4, make_qcow2.HEADER_V3)
    img[: len(hdr)] = hdr
    img[CS : CS + 8] = struct.pack(">Q", 2 * CS)
    for i in range(total):
        img[2 * CS + 2 * i : 2 * CS + 2 * i + 2] = struct.pack(">H", 1)
    img[3 * CS : 3 * CS + 8 * l1_entries] = struct.pack(
        f">{l1_entries}Q", *([l2 * CS | make_qcow2.COPIED] * l1_entries)
    )
    entries = {i: h | make_qcow2.COPIED for i, h in zip(data, hosts)} | {i: make_qcow2.ZERO_FLAG for i in zero}
    for i, e in entries.items():
        img[l2 * CS + 8 * i : l2 * CS + 8 * i + 8] = struct.pack(">Q", e)
    path.write_bytes(img)
    return size, hosts


#: argv: EXE OUT ERR ARGS...; prints the child's exit code and its own peak RSS in KiB (os.wait4).
SPAWN_PEAK = """
import os, sys
exe, out, err, *args = sys.argv[1:]
acts = [(os.POSIX_SPAWN_OPEN, fd, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) for fd, path in ((1, out), (2, err))]
pid = os.posix_spawn(exe, [exe, *args], os.environ, file_actions=acts)
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def test_l1_entries_naming_one_l2_table_take_memory_of_the_file(tmp_path):
    """384 KiB of file, 8 TiB of guest: 16384 L1 entries naming one (empty) L2 table. The per-cluster
    table took 8 bytes per guest cluster (1 GiB); now the peak RSS of the child stays far below."""
    q = tmp_path / "shared.qcow2"
    size, _ = shared_l2_image(q, 16384)
    assert q.stat().st_size == 384 * 1024 and size == 8 << 40
    out, err = tmp_path / "out", tmp_path / "err"
    # Started from a small launcher: a child's ru_maxrss keeps the peak of the process it was forked
    # from (Linux carries it across exec), and pytest's own RSS grows past the bound over a whole run.
    r = subprocess.run(
        [sys.executable, "-I", "-S", "-c", SPAWN_PEAK, EXE, str(out), str(err), "-d", "null", str(q)],
        capture_output=True,
        text=True,
        check=True,
    )
    rc, peak_kib = map(int, r.stdout.split())
    assert rc == 0, err.read_text()
    assert out.read_text().split() == [str(q)]  # the null digest is empty
    assert peak_kib < RSS_BOUND_KIB, f"peak RSS {peak_kib} KiB reading a 384 KiB image"


def test_shared_l2_table_reads_right(tmp_path):
    """16 L1 entries naming one L2 table with a data cluster and a zero-flagged one: the guest repeats
    that table's clusters every 512 MiB, and the digest says so."""
    q = tmp_path / "shared.qcow2"
    size, hosts = shared_l2_image(q, 16, data=[0], zero=[5])
    data = os.urandom(CS)
    poke(q, hosts[0], data)
    per_l2 = CS // 8
    blocks = (data if i % per_l2 == 0 else bytes(BLOCK) for i in range(size // BLOCK))
    want = blkhash(blocks, size)
    assert digest_of(q) == want
    assert digest_of("-q", "1", "-t", "1", "--read-size", "64k", q) == want


def test_small_clusters_many_l2_tables(tmp_path):
    """512-byte clusters: an L2 table covers 32 KiB, so a read crosses many tables (the cache turns over)
    and the map's regions end off the 64 KiB blocks."""
    r = tmp_path / "m.raw"
    with open(r, "wb") as f:
        for i in range(48):
            f.write(os.urandom(20000) if i % 3 else bytes(20000))
            if i % 7 == 0:
                f.seek(f.tell() + 50000)
        f.truncate(-(-f.tell() // 512) * 512)
    q = tmp_path / "m.qcow2"
    make_qcow2.write(str(r), str(q), zeros="flag", cluster_bits=9)
    want = blksum.blkhash_py(r)
    assert digest_of(q) == want
    assert digest_of("-q", "3", "--read-size", "1m", q) == want


# ------------------------------------------------------------------ features qemu reads: auto goes through qemu-nbd

# id -> how to make it from raw with qemu-img (no qemu-io needed)
QEMU_FEATURES = {
    "compressed": lambda raw, q, d: subprocess.run(
        [QEMU_IMG, "convert", "-q", "-c", "-f", "raw", "-O", "qcow2", raw, q], check=True
    ),
    "extended-l2": lambda raw, q, d: subprocess.run(
        [QEMU_IMG, "convert", "-q", "-f", "raw", "-O", "qcow2", "-o", "extended_l2=on", raw, q], check=True
    ),
    "backing-file": lambda raw, q, d: (
        subprocess.run([QEMU_IMG, "convert", "-q", "-f", "raw", "-O", "qcow2", raw, d / "base.qcow2"], check=True),
        subprocess.run(
            [QEMU_IMG, "create", "-q", "-f", "qcow2", "-b", "base.qcow2", "-F", "qcow2", q], check=True, cwd=d
        ),
    ),
    "external-data-file": lambda raw, q, d: subprocess.run(
        [QEMU_IMG, "convert", "-q", "-f", "raw", "-O", "qcow2", "-o", f"data_file={d / 'q.data'}", raw, q], check=True
    ),
    "corrupt-bit": lambda raw, q, d: (
        subprocess.run([QEMU_IMG, "convert", "-q", "-f", "raw", "-O", "qcow2", raw, q], check=True),
        patch(q, incompatible_features=field(q, "incompatible_features") | 2),
    ),
}


@pytest.fixture(scope="module")
def compressible(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("feat") / "c.raw"
    text = b"".join(b"%08d compressible line of the guest\n" % i for i in range(40000))
    p.write_bytes(text[: 24 * BLOCK] + os.urandom(BLOCK) + bytes(3 * BLOCK))
    return p


@needs_nbd
@pytest.mark.parametrize("feature", sorted(QEMU_FEATURES))
def test_auto_reads_what_qemu_reads_through_qemu_nbd(compressible, tmp_path, feature):
    q = tmp_path / "f.qcow2"
    QEMU_FEATURES[feature](compressible, q, tmp_path)
    want = blksum.blkhash_py(compressible)
    refused = run("--mode", "qcow2", q)
    assert refused.returncode == 1 and "--mode nbd" in refused.stderr, refused.stderr
    out = run(q)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [want, str(q)]
    assert digest_of("--mode", "nbd", q) == want
    assert blksum.run(q, "sha256", threads=1, mode="auto").hexdigest == want


@needs_nbd
def test_auto_says_why_in_one_info_line(compressible, tmp_path):
    """The open says why it went to qemu-nbd (image.h: err on success); nvmelab-blksum prints that one
    line on stderr (src/blksum/main.c), the digest on stdout as ever."""
    q = tmp_path / "c.qcow2"
    QEMU_FEATURES["compressed"](compressible, q, tmp_path)
    out = run(q)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 0 and out.stdout.split() == [blksum.blkhash_py(compressible), str(q)], out.stderr
    assert len(lines) == 1 and "compressed clusters" in lines[0] and "qemu-nbd" in lines[0], out.stderr


# The same features made without QEMU: the header bit or an L2 entry (what the direct reader looks at).
def _compressed_entry(q: Path, lay: dict) -> None:
    c, host = next(iter(lay["data"].items()))
    poke(q, lay["l2"][0] + 8 * c, struct.pack(">Q", host | make_qcow2.COMPRESSED))


def _backing(q: Path, lay: dict) -> None:
    poke(q, CS - 64, b"base.qcow2")
    patch(q, backing_file_offset=CS - 64, backing_file_size=len(b"base.qcow2"))


NO_QEMU = {
    "compressed clusters": _compressed_entry,
    "extended L2": _fields(incompatible_features=1 << 4),
    "backing file": _backing,
    "external data file": _fields(incompatible_features=1 << 2),
    "marked corrupt": _fields(incompatible_features=1 << 1),
}


@pytest.mark.parametrize("feature", sorted(NO_QEMU))
def test_without_qemu_nbd_one_error_names_the_feature(raw, tmp_path, feature):
    q = tmp_path / "f.qcow2"
    NO_QEMU[feature](q, sound(raw, q))
    env = dict(os.environ, PATH=str(tmp_path))  # no qemu-nbd on it
    out = run(q, env=env)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and out.stdout == "" and len(lines) == 1, out.stderr
    assert str(q) in lines[0] and feature in lines[0].replace(str(q), "") and "qemu-nbd" in lines[0], out.stderr
