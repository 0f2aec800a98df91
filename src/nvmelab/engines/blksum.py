# SPDX-License-Identifier: BSD-3-Clause
"""blkhash-compatible image checksums (the C core in src/blksum, threads without the GIL).

The digest, as the conformance vectors (tests/vectors/blkhash.csv) define it::

    digest = H( H(block_1) || ... || H(block_N) || le64(total_length) )

The image is cut into :data:`BLOCK_SIZE` (64 KiB) blocks, the last one possibly
short; ``H`` is one OpenSSL digest chosen by name (``sha256`` by default, also
``sha1``, ``sha512``, ``blake2b512``, ``md5``, ...; see :func:`digests`);
``le64(total_length)`` is the image size in bytes as a little-endian unsigned
64-bit integer. An empty image hashes to ``H(le64(0))``. The digest ``null``
hashes nothing and prints an empty digest; it times the I/O alone.

This is one flat outer hash over the block hashes in order. The vectors were
checked against that reading with a hashlib prototype (:func:`blkhash_py`
is that prototype, kept as an independent slow reference) and they do not match
a variant that spreads the block hashes over several interleaved streams, so
digests from another blkhash implementation that uses such streams will differ.

Full-size all-zero blocks contribute a precomputed ``H(zero block)``; a short
all-zero last block is hashed as itself. Holes (``SEEK_DATA``/``SEEK_HOLE``)
are never read. The digest does not depend on threads, queue depth, read size
or I/O mode.

Key functions:
    checksum(path, digest=..., ...) -> str          the hex digest
    run(path, ...) -> BlksumResult                  digest plus timing and counters
    digests() -> list[str]                          accepted digest names
    blkhash_py(path, digest)                        pure-Python reference (slow)
    make_image(path, size, ...)                     a test image with data, zeros, holes
    to_record(result, ...)                          an nvmelab.results.records run record

Inputs: a file, a block device, ``-`` (stdin, when it is a pipe), a path to a
FIFO, or an nvmelab target namespace (``emu://…``, ``pci://…``) read through the
user-space driver with up to queue-depth chunks in flight on one I/O qpair.

Ctrl-C while :func:`run` waits cancels the C job promptly and raises
``KeyboardInterrupt``; no digest is returned.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..driver import uri as _uri
from ..host import cpus as _cpus
from ..host import provenance as _prov
from ..results.records import MIB, engine_record

log = logging.getLogger(__name__)

#: Bytes per hashed block (fixed by the format).
BLOCK_SIZE = 64 * 1024
#: Defaults, as in the original tool.
DEFAULT_DIGEST = "sha256"
DEFAULT_QUEUE_DEPTH = 16
DEFAULT_READ_SIZE = 256 * 1024
#: I/O modes of the C core.
IO_MODES = ("psync", "io_uring")
#: How an image is read (src/blksum/image.h): auto (an NBD URI with libnbd, qcow2 with the direct
#: reader, anything else raw), file (raw bytes), nbd (served by a qemu-nbd blksum starts), qcow2.
READ_MODES = ("auto", "file", "nbd", "qcow2")
#: URI schemes read with libnbd.
NBD_SCHEMES = ("nbd", "nbds", "nbd+unix", "nbds+unix", "nbd+vsock", "nbds+vsock")
#: Target schemes read through the user-space NVMe driver.
DRIVER_SCHEMES = ("emu", "pci", "vfio-user")
#: Study name and tool label in run records.
STUDY = "blksum_qdepth"
TOOL = "nvmelab-blksum"

ProgressFn = Callable[[int, int], None]


def _native():
    from .. import _native as nat

    if not hasattr(nat, "blksum_file"):
        raise RuntimeError("nvmelab was built without the blksum core (src/blksum)")
    return nat


def default_threads() -> int:
    """Hash threads used when none are given: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def digests() -> list[str]:
    """Digest names accepted by :func:`checksum` (OpenSSL's, plus ``null``), sorted."""
    return list(_native().blksum_digests())


def have_io_uring() -> bool:
    """Whether the io_uring mode was compiled in."""
    return bool(_native().blksum_have_io_uring())


def have_nbd() -> tuple[bool, str]:
    """(available, reason): whether this build reads NBD URIs and qemu-nbd served images (libnbd)."""
    nat = _native()
    if not hasattr(nat, "blksum_have_nbd"):
        return False, "the extension predates NBD support"
    ok, why = nat.blksum_have_nbd()
    return bool(ok), str(why)


def native_command() -> str | None:
    """The native command ``nvmelab-blksum``: next to this Python (a wheel's scripts, or the venv
    where ``make build`` copies it), else on PATH; None when neither has it."""
    import shutil
    import sys

    here = Path(sys.executable).parent / TOOL
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which(TOOL)


@dataclass
class BlksumResult:
    """One checksum run: the digest, what was read, and how long it took."""

    hexdigest: str
    digest: str
    path: str
    size: int
    bytes_read: int
    blocks: int
    zero_blocks: int
    hole_blocks: int
    reads: int
    elapsed_s: float
    io: str
    source: str
    threads: int
    queue_depth: int
    read_size: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mibs(self) -> float:
        """Image bytes per second over the elapsed time, in MiB/s (holes count as covered)."""
        return self.size / MIB / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def line(self) -> str:
        """The output line of the original tool: ``<hex>  <name>``."""
        return f"{self.hexdigest}  {self.path}"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mibs"] = self.mibs
        return d


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def run(
    path: str | os.PathLike,
    digest: str = DEFAULT_DIGEST,
    *,
    threads: int | None = None,
    queue_depth: int = DEFAULT_QUEUE_DEPTH,
    io: str = "psync",
    read_size: int = DEFAULT_READ_SIZE,
    progress: ProgressFn | None = None,
    nsid: int = 0,
    mode: str = "file",
) -> BlksumResult:
    """Checksum a file, block device, pipe or target namespace; return the digest with timing and counters.

    ``emu://`` and ``pci://`` URIs are read through the user-space driver (namespace ``nsid``
    of the first controller, 0 = the first active one); ``io`` does not apply to them.

    ``mode`` (READ_MODES) picks how a path is read: ``file`` (the default: its bytes),
    ``auto``, ``qcow2`` (the direct qcow2 reader) or ``nbd`` (served by a qemu-nbd blksum starts
    and stops); an NBD URI (``nbd://``, ``nbd+unix://``...) is always read with libnbd.

    ``progress(done_bytes, total_bytes)`` is called about every 100 ms from the calling
    thread (``total_bytes`` is 0 for a pipe). Raises ``ValueError`` for a bad parameter or
    unknown digest, ``OSError`` subclasses for a missing or unreadable input.
    """
    nat = _native()
    spath = os.fspath(path)
    if not isinstance(spath, str) or not spath:
        raise ValueError(f"path must be a non-empty string, got {path!r}")
    scheme = _uri.kind(spath)
    if mode not in READ_MODES:
        raise ValueError(f"mode must be one of {', '.join(READ_MODES)}, got {mode!r}")
    if scheme in NBD_SCHEMES:
        mode = "auto"
    elif scheme in ("file", "blk"):
        spath = _uri.tail(spath)  # any file name, as written
    elif scheme and scheme not in DRIVER_SCHEMES:
        raise ValueError(
            f"{spath}: blksum cannot read {scheme}:// targets (files, block devices, pipes, NBD URIs, "
            f"and {', '.join(s + '://' for s in DRIVER_SCHEMES)} namespaces)"
        )
    if threads is None:
        threads = default_threads()
    _check_int("threads", threads, 1, nat.BLKSUM_MAX_THREADS)
    _check_int("queue_depth", queue_depth, 1, nat.BLKSUM_MAX_QUEUE_DEPTH)
    _check_int("read_size", read_size, BLOCK_SIZE, nat.BLKSUM_MAX_READ_SIZE)
    if read_size % BLOCK_SIZE:
        raise ValueError(f"read_size must be a multiple of {BLOCK_SIZE} bytes, got {read_size}")
    if io not in IO_MODES:
        raise ValueError(f"io must be one of {', '.join(IO_MODES)}, got {io!r}")
    if not isinstance(digest, str) or not nat.blksum_digest_known(digest):
        raise ValueError(f"unknown digest {digest!r} (see nvmelab blksum --list-digests)")
    extra: dict[str, Any] = {}
    if scheme in DRIVER_SCHEMES:
        if not hasattr(nat, "blksum_uri"):
            raise RuntimeError("nvmelab was built without the driver path of blksum")
        from ..driver.errors import check_uri

        d = nat.blksum_uri(
            check_uri(spath),
            digest,
            threads=threads,
            queue_depth=queue_depth,
            read_size=read_size,
            nsid=nsid,
            progress=progress,
        )
        extra["target_describe"] = d.pop("target_describe", "")
    elif mode != "file" or scheme in NBD_SCHEMES:
        d = nat.blksum_image(
            spath,
            mode,
            digest,
            threads=threads,
            queue_depth=queue_depth,
            read_size=read_size,
            io=io,
            progress=progress,
        )
    else:
        d = nat.blksum_file(
            spath, digest, threads=threads, queue_depth=queue_depth, read_size=read_size, io=io, progress=progress
        )
    res = BlksumResult(
        digest=digest,
        path=os.fspath(path),
        threads=threads,
        queue_depth=queue_depth,
        read_size=read_size,
        extra=extra,
        **d,
    )
    log.debug(
        "blksum %s: %s in %.3f s (%s, t=%d q=%d)", res.path, res.hexdigest, res.elapsed_s, res.io, threads, queue_depth
    )
    return res


def checksum(
    path_or_uri: str | os.PathLike,
    digest: str = DEFAULT_DIGEST,
    *,
    threads: int | None = None,
    queue_depth: int = DEFAULT_QUEUE_DEPTH,
    io: str = "psync",
    read_size: int = DEFAULT_READ_SIZE,
) -> str:
    """The blkhash hex digest of a file, block device or pipe (empty string for ``null``)."""
    return run(path_or_uri, digest, threads=threads, queue_depth=queue_depth, io=io, read_size=read_size).hexdigest


# --------------------------------------------------------------------------- reference


def blkhash_py(path: str | os.PathLike, digest: str = DEFAULT_DIGEST) -> str:
    """Pure-Python blkhash (hashlib, one thread, reads everything): the slow reference."""
    if digest == "null":
        with open(path, "rb") as f:
            while f.read(BLOCK_SIZE * 16):
                pass
        return ""
    outer = hashlib.new(digest)
    total = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(BLOCK_SIZE)
            if not block:
                break
            total += len(block)
            outer.update(hashlib.new(digest, block).digest())
    outer.update(struct.pack("<Q", total))
    return outer.hexdigest()


# --------------------------------------------------------------------------- test images

#: Extent pattern of :func:`make_image`: (kind, MiB) repeated; d = random data, z = written zeros,
#: h = hole. About 50 % data, 25 % zeros, 25 % holes, in extents of a few MiB.
IMAGE_PATTERN = (("d", 4), ("z", 2), ("d", 2), ("h", 3), ("d", 2), ("z", 1), ("h", 1), ("d", 1))


def make_image(
    path: str | os.PathLike, size: int, *, seed: int = 0, pattern: tuple[tuple[str, int], ...] = IMAGE_PATTERN
) -> dict[str, Any]:
    """Write a sparse test image of ``size`` bytes with data, zero and hole extents.

    Returns a description (size and bytes of each kind) for records and figure captions.
    The data is pseudo-random (numpy, seeded) so it does not compress or dedupe.
    """
    import numpy as np

    size = _check_int("size", size, 0, 1 << 50)
    rng = np.random.default_rng(seed)
    counts = {"data": 0, "zero": 0, "hole": 0}
    names = {"d": "data", "z": "zero", "h": "hole"}
    zeros = bytes(MIB)
    path = Path(path)
    try:
        with open(path, "wb") as f:
            pos = 0
            i = 0
            while pos < size:
                kind, mib = pattern[i % len(pattern)]
                i += 1
                n = min(mib * MIB, size - pos)
                if kind == "h":
                    f.seek(n, os.SEEK_CUR)
                else:
                    left = n
                    while left:
                        k = min(left, MIB)
                        f.write(rng.bytes(k) if kind == "d" else zeros[:k])
                        left -= k
                counts[names[kind]] += n
                pos += n
            f.truncate(size)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return {
        "image_bytes": size,
        "image_data_bytes": counts["data"],
        "image_zero_bytes": counts["zero"],
        "image_hole_bytes": counts["hole"],
        "image_seed": seed,
    }


def drop_file_cache(path: str | os.PathLike) -> bool:
    """Ask the kernel to drop a file's cached pages (POSIX_FADV_DONTNEED); True when it accepted."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (AttributeError, OSError):
        return False
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- records


def provenance() -> dict[str, Any]:
    """Where and with what a blksum record was made: nvmelab.host.provenance.capture (the keys
    every record carries), with the OpenSSL that supplies the digests and the CPUs online."""
    try:
        import ssl

        openssl = ssl.OPENSSL_VERSION
    except ImportError:
        openssl = None
    prov = _prov.capture(ncpus_online=os.cpu_count())
    prov["packages"] = dict(prov.get("packages") or {}, openssl=openssl)
    return prov


def to_record(
    res: BlksumResult,
    *,
    repetition: int,
    tool: str = TOOL,
    study: str = STUDY,
    image: dict[str, Any] | None = None,
    prov: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A run record (nvmelab.results.records schema) for one checksum run.

    ``iosize`` is the read size, ``qdepth`` the queue depth, ``ncpus`` the hash threads,
    ``runtime_s`` the elapsed time; ``iops`` counts read requests per second and ``mibs``
    image MiB per second. Digest, image description and counters go in extra keys.
    """
    target = res.path if _uri.kind(res.path) else "file://" + os.path.abspath(res.path)
    prov = dict(prov if prov is not None else provenance())
    desc = res.extra.get("target_describe") or ""
    if desc:  # an emulated target: name its profile and scale (records require it)
        kv = dict(item.split("=", 1) for item in desc.split() if "=" in item)
        prov["profile"] = kv.get("profile")
        prov["scale"] = float(kv["scale"]) if "scale" in kv else None
        prov["emu"] = desc
    rec = engine_record(
        study=study,
        tool=tool,
        target=target,
        backend=res.io,
        rw="read",
        iosize=res.read_size,
        qdepth=res.queue_depth,
        ncpus=res.threads,
        runtime_s=res.elapsed_s,
        iops=res.reads / res.elapsed_s if res.elapsed_s > 0 else 0.0,
        mibs=res.mibs,
        ios=res.reads,
        host=_cpus.host_state(),
        repetition=repetition,
        provenance=prov,
    )
    rec.update(
        {
            "digest": res.digest,
            "hexdigest": res.hexdigest,
            "image_size": res.size,
            "bytes_read": res.bytes_read,
            "zero_blocks": res.zero_blocks,
            "hole_blocks": res.hole_blocks,
            "reads": res.reads,
        }
    )
    if image:
        rec.update(image)
    rec.update(extra)
    rec["cpu_usage"] = cpu_usage(rec.get("user_s"), rec.get("system_s"), res.elapsed_s)
    return rec


def cpu_usage(user_s: float | None, system_s: float | None, elapsed_s: float) -> float | None:
    """CPU time over elapsed time in percent of one CPU (a record's cpu_usage); None unknown."""
    if user_s is None or system_s is None or elapsed_s <= 0:
        return None
    return round((user_s + system_s) / elapsed_s * 100.0, 1)


# --------------------------------------------------------------------------- the study engine
# The blksum_qdepth study (src/nvmelab/studies/blksum_qdepth/spec.toml) runs through the sweep runner like
# every study; this is its engine: one checksum run, one record. The target ``image://generated``
# is an image made in the scratch folder (data, written zeros, holes; memory-backed where
# possible), read once to warm the page cache (the seed's runs read a cached image too) and
# deleted when the sweep ends (study_cleanup); a ``file://`` target checksums that file as it is.

#: The study's generated-image target.
GENERATED = "image://generated"
#: Tool label of the original blkhash ``blksum`` (timed as a whole process when it is on PATH).
ORIGINAL_TOOL = "blksum"
#: Generated images of this process: size -> (path, description); digests per image and digest.
_IMAGES: dict[int, tuple[Path, dict[str, Any]]] = {}
_DIGESTS: dict[tuple[int, str], str] = {}
#: The study's read modes: the image file itself, or the image served by a qemu-nbd the study starts.
STUDY_MODES = ("file", "nbd")
#: qemu-nbd servers of this process: image path -> (process, private directory, URI).
_SERVERS: dict[str, tuple[subprocess.Popen, Path, str]] = {}
#: Seconds a qemu-nbd gets to create its socket.
NBD_START_S = 10.0


def _nbd_server(image: Path) -> str:
    """An nbd+unix:// URI of image, served read-only by a qemu-nbd this process started (one per image,
    kept for the sweep; study_cleanup stops it)."""
    import shutil
    import tempfile

    key = str(image)
    if key in _SERVERS and _SERVERS[key][0].poll() is None:
        return _SERVERS[key][2]
    exe = shutil.which("qemu-nbd")
    if exe is None:
        raise ValueError("NBD mode needs qemu-nbd (Debian qemu-utils; make test-nbd installs it)")
    d = Path(tempfile.mkdtemp(prefix="nvmelab-nbd-"))
    sock = d / "nbd.sock"
    if not _SERVERS:
        import atexit

        atexit.register(_stop_servers)  # a sweep that ends without study_cleanup (Ctrl-C, an error)
    proc = subprocess.Popen(
        # the image as an absolute path after "--": its name is data, never an option or a protocol prefix
        [exe, "--read-only", "--persistent", "--shared=0", "--format=raw", "--cache=writeback", "-k", str(sock)]
        + ["--", os.path.abspath(key)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_die_with_parent(os.getpid()),
    )
    deadline = time.monotonic() + NBD_START_S
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            err = proc.communicate()[1].decode(errors="replace").strip()
            d.rmdir() if not any(d.iterdir()) else None
            raise RuntimeError(f"qemu-nbd did not come up serving {image}: {err[:200] or 'timed out'}")
        time.sleep(0.01)
    uri = f"nbd+unix:///?socket={sock}"
    _SERVERS[key] = (proc, d, uri)
    log.info("blksum study: qemu-nbd (pid %d) serves %s at %s", proc.pid, image, uri)
    return uri


def _die_with_parent(parent: int) -> Callable[[], None]:
    """For the qemu-nbd child before exec: SIGKILL when this process dies, whatever kills it (qemu reads
    SIGTERM only in its main loop, which a hung open never reaches), and an exit at once when the parent
    is already gone (it may die before the death signal is set)."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1

    def child() -> None:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return child


def _stop_servers() -> None:
    for proc, d, _ in _SERVERS.values():
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for f in d.glob("*"):
            f.unlink(missing_ok=True)
        d.rmdir()
    _SERVERS.clear()


def original_blksum(mode: str = "file") -> str | None:
    """The original blkhash `blksum` for a read mode, from a path the user gives, or None: for "file" its
    pread build (BLKSUM_ORIGINAL_PREAD: a -Dnbd=disabled build reads the file itself, as the seed's "NBD
    disabled" tables did), for "nbd" its NBD build (BLKSUM_ORIGINAL), else a `blksum` on PATH. The project
    builds no peer tool: the user builds it from its own sources and names it here."""
    import shutil

    env = os.environ.get("BLKSUM_ORIGINAL_PREAD" if mode == "file" else "BLKSUM_ORIGINAL")
    if env and os.path.isfile(env) and os.access(env, os.X_OK):
        return env
    return shutil.which("blksum")


def _study_image(target: str, image_mib: int | None) -> tuple[Path, dict[str, Any]]:
    if _uri.kind(target) == "file":
        path = Path(_uri.tail(target))
        if not path.is_file():
            raise FileNotFoundError(f"{target}: no such image")
        size = path.stat().st_size
        return path, {"image_bytes": size, "image_kind": "given file"}
    if target != GENERATED:
        raise ValueError(f"target {target!r}: the blksum study reads {GENERATED} or a file:// image")
    if not image_mib or int(image_mib) < 1:
        raise ValueError(f"image_mib must be >= 1, got {image_mib!r}")
    size = int(image_mib) * MIB
    if size not in _IMAGES:
        from ..host import scratch

        path = scratch.temp_path(f"blksum_qdepth-{int(image_mib)}MiB", ".raw")
        log.info("blksum study: generating a %d MiB image at %s", image_mib, path)
        desc = make_image(path, size)
        desc["image_kind"] = "generated: data, written zeros, holes"
        run(path, "null", threads=1, queue_depth=DEFAULT_QUEUE_DEPTH)  # warm the page cache
        _IMAGES[size] = (path, desc)
    return _IMAGES[size]


def _cpu_times(who: int | None = None) -> tuple[float, float]:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF if who is None else who)
    return ru.ru_utime, ru.ru_stime


def study_run(
    *,
    study: str = STUDY,
    target: str = GENERATED,
    tool: str = TOOL,
    digest: str = DEFAULT_DIGEST,
    backend: str = "psync",
    ncpus: Any = "all",
    qdepth: int = DEFAULT_QUEUE_DEPTH,
    iosize: int = DEFAULT_READ_SIZE,
    image_mib: int | None = None,
    mode: str = "file",
) -> dict[str, Any]:
    """One run of the study: checksum the image once and return its record.

    ``mode`` "file" reads the image file; "nbd" reads it through a qemu-nbd the study starts
    (one per image, the same server for both tools; libnbd's asynchronous reads, the server's
    block-status map), as seed 002's NBD tables did with the original tool.

    ``ncpus`` is the number of hash threads, ``"all"`` for every CPU this process may use;
    ``backend`` the I/O mode (psync | io_uring); ``iosize`` the read size. ``tool`` "blksum"
    times the original blkhash tool as a whole process (as hyperfine does). A run this host
    cannot make (io_uring missing, the original tool not on PATH) raises ValueError, which the
    runner records as skipped with the reason. ``user_s``/``system_s`` are the CPU time of the
    run (getrusage of this process, or of the child for the original tool)."""
    import resource

    threads = default_threads() if ncpus == "all" else int(ncpus)
    if backend == "io_uring" and not have_io_uring():
        raise ValueError("io_uring is not available on this host")
    if tool not in (TOOL, ORIGINAL_TOOL):
        raise ValueError(f"tool must be {TOOL!r} or {ORIGINAL_TOOL!r}, got {tool!r}")
    exe = original_blksum(mode) if tool == ORIGINAL_TOOL else None
    if tool == ORIGINAL_TOOL and exe is None:
        raise ValueError(
            "the original blkhash blksum is not given: set BLKSUM_ORIGINAL (its NBD build) and BLKSUM_ORIGINAL_PREAD "
            "(a -Dnbd=disabled build) to their paths, or put a `blksum` on PATH"
        )
    if mode not in STUDY_MODES:
        raise ValueError(f"mode must be one of {', '.join(STUDY_MODES)}, got {mode!r}")
    if mode == "nbd":
        ok, why = have_nbd()
        if not ok:
            raise ValueError(f"NBD mode: {why}")
        if backend != "psync":
            raise ValueError("NBD mode reads through libnbd's socket; the backend axis applies to file mode only")
    image, desc = _study_image(target, image_mib)
    source = _nbd_server(image) if mode == "nbd" else str(image)
    prov = provenance()
    extra = {"target_note": "page-cache warm", "loadavg_1m": os.getloadavg()[0], "mode": mode}
    if exe is not None:
        if backend != "psync":
            raise ValueError("the original blksum reads with its own I/O path; use backend psync")
        u0, s0 = _cpu_times(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(
            [exe, "-d", digest, "-t", str(threads), "--queue-depth", str(qdepth), source],
            capture_output=True,
            text=True,
        )
        dt = time.perf_counter() - t0
        u1, s1 = _cpu_times(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            raise RuntimeError(f"{exe} failed ({p.returncode}): {p.stderr.strip()[:200]}")
        words = p.stdout.split()
        hexdigest = words[0] if len(words) == 2 else ""
        if _DIGESTS.setdefault((desc["image_bytes"], digest), hexdigest) != hexdigest:
            raise RuntimeError(f"the original's {digest} digest of {image} ({mode} mode) differs from nvmelab's")
        size = desc["image_bytes"]
        rec = engine_record(
            study=study,
            tool=ORIGINAL_TOOL,
            target=source if mode == "nbd" else "file://" + str(image),
            backend="original" if mode == "file" else "original-nbd",
            rw="read",
            iosize=iosize,
            qdepth=qdepth,
            ncpus=threads,
            runtime_s=dt,
            iops=0.0,  # the original tool does not report its reads
            mibs=size / MIB / dt,
            host=_cpus.host_state(),
            provenance=prov,
        )
        rec.update(
            {
                "digest": digest,
                "hexdigest": hexdigest,
                "timing": "whole process",
                "executable": exe,
                "user_s": u1 - u0,
                "system_s": s1 - s0,
                **desc,
                **extra,
            }
        )
        rec["cpu_usage"] = cpu_usage(rec["user_s"], rec["system_s"], dt)
        return rec
    u0, s0 = _cpu_times()
    res = run(source, digest, threads=threads, queue_depth=qdepth, io=backend, read_size=iosize)
    u1, s1 = _cpu_times()
    if _DIGESTS.setdefault((desc["image_bytes"], digest), res.hexdigest) != res.hexdigest:
        raise RuntimeError(
            f"the {digest} digest of {image} changed with the configuration "
            f"(threads {threads}, queue depth {qdepth}, {backend})"
        )
    return to_record(res, repetition=0, study=study, image=desc, prov=prov, user_s=u1 - u0, system_s=s1 - s0, **extra)


def study_cleanup() -> None:
    """Stop the qemu-nbd servers and delete the images study_run made (the runner calls this when a
    sweep ends)."""
    from ..host import scratch

    _stop_servers()
    for path, _ in _IMAGES.values():
        path.unlink(missing_ok=True)
        scratch.forget(path)
    _IMAGES.clear()
    _DIGESTS.clear()


# --------------------------------------------------------------------------- profile
# Where the CPU time of nvmelab-blksum goes: tests/bench/blksum_profile.py (make bench) writes
# data/results/bench/<host>/blksum_profile.json; the chapter's methods section reads it here.


def profile_path(host: str) -> Path | None:
    """The committed blksum profile of host, else None."""
    from ..results.reference import data_root

    p = data_root() / "results" / "bench" / host / "blksum_profile.json"
    return p if p.is_file() else None


def load_profile(path: str | os.PathLike):
    """A profile as a long table: image, mode, digest, threads, part, pct (share of CPU samples)."""
    import json

    import pandas as pd

    rows = []
    for run_ in json.loads(Path(path).read_text())["runs"]:
        for part, pct in run_["shares_pct"].items():
            rows.append(
                {
                    "image": run_.get("image", "dense"),
                    "mode": run_["mode"],
                    "digest": run_["digest"],
                    "threads": run_["threads"],
                    "part": part,
                    "pct": float(pct),
                }
            )
    return pd.DataFrame(rows)


def bench_summary(host: str):
    """The side-by-side benchmark of the two command-line tools (tests/bench/bench_blksum.py, `make bench`:
    data/results/bench/<host>/blksum.json), where both are timed alike: whole processes, start included,
    interleaved rounds, page cache warm. Per read mode and digest: configurations, the median and range of
    ours/original (wall-time medians) and the range of the single paired rounds' ratios (run to run). Also
    the benchmark's facts: image bytes, rounds per mode, the rest of the host's CPU use (percent of one CPU)
    and whether that was quiet, and the start-up medians (a 64 KiB file) of ours and the original. None
    when no benchmark is committed for the host."""
    import json

    import pandas as pd

    from ..results.reference import data_root

    path = data_root() / "results" / "bench" / host / "blksum.json"
    if not path.is_file():
        return None
    b = json.loads(path.read_text())
    c = pd.DataFrame(b["configs"])
    c = c.assign(pair_min=c["paired_ratios"].map(min), pair_max=c["paired_ratios"].map(max))
    table = c.groupby(["mode", "digest"]).agg(
        configurations=("ratio", "size"),
        median=("ratio", "median"),
        least=("ratio", "min"),
        most=("ratio", "max"),
        rounds_least=("pair_min", "min"),
        rounds_most=("pair_max", "max"),
    )
    up = b.get("startup") or {}
    facts = {
        "path": str(path),
        "image_bytes": b["image_bytes"],
        "rounds": b.get("rounds", {}),
        "rest_pct": b["host"]["rest_pct"],
        "quiet": bool(b.get("quiet")),
        "startup_ours_s": up.get("ours_median_s"),
        "startup_original_s": up.get("original_median_s"),
    }
    return table, facts
