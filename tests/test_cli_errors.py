# SPDX-License-Identifier: BSD-3-Clause
"""Every `nvmelab` command, given bad input, prints exactly one line on stderr that names what was
wrong, no traceback, nothing on stdout, and exits 2 (Ctrl-C: 130). The handler is in one place,
`nvmelab.cli.main`; these cases run the real command line in a subprocess.

Nothing here touches a device or a host setting: the mounted device is only named to `perf run`
(read-only pattern; the refusal comes before any I/O), and the device-management commands run
against an empty fake sysfs tree (`--root`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvmelab.cli import build_parser

NVMELAB = [sys.executable, "-m", "nvmelab"]


def nvmelab(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*NVMELAB, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def root_block_device() -> str | None:
    """The block device that holds '/', found at test time (None when '/' is not on one, e.g. overlayfs)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) > 4 and fields[4] == "/":
            source = right.split()[1]
            if source.startswith("/dev/") and Path(source).is_block_device():
                return source
    return None


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cli_errors")
    (d / "image.raw").write_bytes(b"\0" * 65536)
    (d / "sys").mkdir()  # an empty fake sysfs: no PCI functions, no hugepage sizes
    head = 'engine = "cpu"\ntarget = "emu://?profile=null"\n'
    presets = "".join(f'[presets.{p}]\n[[presets.{p}.sweeps]]\nname = "s"\nqdepth = 1\n' for p in ("standard", "paper"))
    specs = {
        "badutf8": b'study = "s\xff"\n',
        "strtable": ('study = "s"\n' + head + 'presets = "quick"\n').encode(),
        "escape": ('study = "../../escape"\n' + head + presets).encode(),
        "huge": (
            'study = "huge"\n'
            + head
            + "[presets.quick]\n[[presets.quick.sweeps]]\n"
            + "".join(f"{k} = {list(range(1, 101))}\n" for k in ("qdepth", "iosize", "ncpus", "nqueues"))
            + presets
        ).encode(),
    }
    for name, text in specs.items():
        (d / f"{name}.toml").write_bytes(text)
    return {
        "dir": str(d),
        "missing": str(d / "missing.img"),
        "image": str(d / "image.raw"),
        "fakeroot": str(d / "sys"),
        **{name: str(d / f"{name}.toml") for name in specs},
    }


# (command line, text the error line must contain). {dir}, {missing}, {image}, {fakeroot} are filled in.
CASES = [
    # bad URIs
    (["identify", "bogus://x"], "bogus://x"),
    (["identify", "emu://?nsze=12Q"], "nsze"),
    (["identify", "emu://?ndev=1&wat=1"], "wat"),
    (["identify", "vfio-user://{missing}"], "{missing}"),
    (["serve", "--dir", "{dir}", "pci://0000:00:00.0"], "emu://"),
    (["serve", "--dir", "{dir}", "emu://?bogus=1"], "bogus"),
    (["perf", "run", "--target", "nfs://x"], "nfs://x"),
    (["blksum", "emu://?nsze=1MiB&bogus=1"], "bogus"),
    # a missing file
    (["blksum", "{missing}"], "{missing}: No such file"),
    (["perf", "run", "--target", "file://{missing}", "--backend", "psync", "--qdepth", "1"], "{missing}"),
    (["study", "plan", "{missing}.toml"], "{missing}.toml"),
    (["identify", "emu://?backing=file:{missing}/x"], "{missing}/x"),
    # a directory where a file belongs
    (["blksum", "{dir}"], "{dir}: Is a directory"),
    (["perf", "run", "--target", "file://{dir}", "--backend", "psync", "--qdepth", "1"], "not a regular file"),
    (["perf", "run", "--json", "{dir}"], "{dir}: is a directory"),
    (["perf", "cuda-run", "--json", "{dir}"], "{dir}: is a directory"),
    (["perf", "params", "--bogus"], "--bogus"),
    (["identify", "emu://?backing=file:{dir}"], "Is a directory"),
    (["study", "plan", "{image}"], "not valid TOML"),
    # specs that name the file and what is wrong in it (issue 21)
    (["study", "plan", "{badutf8}"], "{badutf8}: not UTF-8 text"),
    (["study", "plan", "{strtable}"], "presets: must be a table"),
    (["study", "run", "{escape}"], "study name '../../escape'"),
    (["study", "plan", "{huge}"], "100,000,000 configurations"),
    (["study", "plan", "{dir}"], "{dir}: is a directory"),
    # URIs the native layer cannot take whole
    (["identify", "emu://?ndev=1\udcff"], "not UTF-8 text"),
    (["perf", "run", "--target", "emu://\udcff"], "not UTF-8 text"),
    (["blksum", "emu://?nsze=1MiB\udcff"], "not UTF-8 text"),
    # out-of-range and malformed values
    (["perf", "run", "--qdepth", "0"], "qdepth=0"),
    (["perf", "run", "--qdepth", "many"], "'many'"),
    (["perf", "run", "--rw", "randrw", "--rwmix", "101"], "rwmix=101"),
    (["perf", "run", "--iosize", "513"], "iosize=513"),
    (["perf", "run", "--runtime", "-1"], "runtime=-1"),
    (["perf", "run", "--cpus", "0-100000"], "cpus"),
    (["perf", "cuda-run", "--qdepth", "0"], "qdepth=0"),
    (["identify", "emu://?ndev=0"], "ndev"),
    (["blksum", "-t", "0", "{image}"], "must be >= 1"),
    (["blksum", "--read-size", "1000", "{image}"], "--read-size"),
    (["blksum", "--nsid", "7", "emu://?nsze=1MiB"], "namespace 7"),
    (["study", "run", "vram_cache", "--preset", "huge"], "huge"),
    (["study", "plan", "blksum_qdepth", "--preset", "huge"], "huge"),
    (["study", "run", "cpu_initiated", "--max-runs", "0"], "--max-runs"),
    (["hugepages", "-3", "--root", "{fakeroot}"], "-3"),
    (["hugepages", "4", "--root", "{fakeroot}"], "not supported"),
    (["bind", "zz:zz", "--driver", "vfio-pci", "--root", "{fakeroot}"], "zz:zz"),
    (["unbind", "0000:99:00.0", "--root", "{fakeroot}"], "0000:99:00.0"),
    (["devices", "--json", "extra"], "extra"),
    (["build-info", "--wat"], "--wat"),
    # unknown names
    (["blksum", "-d", "nodigest", "{image}"], "nodigest"),
    (["study", "run", "nostudy"], "nostudy"),
    (["study", "plan", "cpu_initiated", "--preset", "nopreset"], "nopreset"),
    (["study", "list", "--wat"], "--wat"),
    (["perf", "walk"], "walk"),
    (["nocommand"], "nocommand"),
    ([], "COMMAND"),
]


def _fill(text: str, files: dict[str, str]) -> str:
    return text.format(**files)


def check_one_line(p: subprocess.CompletedProcess, needle: str, code: int = 2) -> str:
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, f"want one line on stderr, got {len(lines)}:\n{p.stderr}"
    assert needle in lines[0], f"{needle!r} not named in: {lines[0]}"
    assert p.returncode == code, (p.returncode, lines[0])
    return lines[0]


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(a) or "(nothing)" for a, _ in CASES])
def test_bad_input_is_one_line(argv, needle, files):
    p = nvmelab(*(_fill(a, files) for a in argv))
    line = check_one_line(p, _fill(needle, files))
    assert line.startswith("nvmelab"), line
    assert p.stdout == "", f"partial output before the error: {p.stdout!r}"


def test_full_disk_names_the_records_file():
    """`perf run --json FILE` on a full disk: one line naming the file (the table was printed)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    p = nvmelab("perf", "run", "--target", "emu://?profile=null", "--runtime", "0.1", "--json", "/dev/full")
    check_one_line(p, "/dev/full: No space left on device")


def test_mounted_device_is_refused_in_one_line():
    """The report of issue 15: `perf run --target blk://<the root fs's device>` printed a traceback."""
    dev = root_block_device()
    if dev is None:
        pytest.skip("'/' is not on a block device here (no mounted device to name)")
    for extra in ([], ["--backend", "psync", "--qdepth", "1"]):  # the command line, then psync
        p = nvmelab("perf", "run", "--target", f"blk://{dev}", "--runtime", "0.2", *extra)
        line = check_one_line(p, dev)
        assert "mounted" in line, line


def test_missing_cuda_is_one_line():
    from nvmelab import _native

    if _native.cuda_device_count() > 0:
        pytest.skip("a CUDA GPU is present: cuda-run would run")
    p = nvmelab("perf", "cuda-run", "--runtime", "0.1")
    check_one_line(p, "cuda")


def test_every_command_has_a_bad_input_case():
    """A new subcommand (or action) must come with a case above: the handler covers it, this proves it."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    wanted = set()
    seen = set()
    for name, sub in commands.items():
        if id(sub) in seen:  # an alias of a command already listed
            continue
        seen.add(id(sub))
        actions = [a for a in sub._actions if getattr(a, "choices", None) and a.dest.endswith(("action", "command"))]
        if actions:
            wanted |= {(name, act) for act in actions[0].choices}
        else:
            wanted.add((name,))
    covered = {tuple(argv[:2]) for argv, _ in CASES} | {tuple(argv[:1]) for argv, _ in CASES}
    assert not wanted - covered, f"commands without a bad-input case: {sorted(wanted - covered)}"


@pytest.mark.parametrize("how", ["--debug", "NVMELAB_DEBUG=1"])
def test_debug_shows_the_traceback(how):
    env = {"NVMELAB_DEBUG": "1"} if how.startswith("NVMELAB") else None
    args = ["perf", "run", "--qdepth", "0"] + (["--debug"] if how == "--debug" else [])
    p = nvmelab(*args, env=env)
    assert p.returncode == 2 and "Traceback" in p.stderr and "ValueError" in p.stderr
    assert p.stderr.rstrip().splitlines()[-1].startswith("nvmelab perf: error: qdepth=0"), p.stderr


def test_ctrl_c_is_one_line_exit_130(sigint):
    proc = subprocess.Popen(
        [*NVMELAB, "perf", "run", "--target", "emu://?profile=null", "--runtime", "30", "--warmup", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint,
    )
    try:
        time.sleep(1.5)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err, err
    assert err.splitlines() == ["nvmelab perf: interrupted"], err
    assert proc.returncode == 130


def test_broken_pipe_is_silent():
    """`nvmelab study list | head -1`: the reader leaving is not an error to print."""
    r, w = os.pipe()
    proc = subprocess.Popen([*NVMELAB, "study", "list"], stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    os.close(r)  # the reader leaves before anything was read
    _, err = proc.communicate(timeout=60)
    assert err == "", err
    assert proc.returncode in (0, 141)  # 0 when everything fit into the pipe before the reader left


@pytest.mark.parametrize(
    "exc,needle",
    [
        ("nvme", "LBA Out of Range (SCT 0x0, SC 0x80, DNR)"),
        ("oserror", "/dev/nvme9n1: Device or resource busy"),
        ("bug", "ZeroDivisionError: integer division or modulo by zero (run with --debug for the traceback)"),
    ],
)
def test_any_exception_from_a_command_is_one_line(exc, needle, monkeypatch, capsys):
    """In-process: whatever a command raises (an NVMe status, an OSError with a file name, a bug)
    reaches the user as one line through nvmelab.cli.main."""
    import errno

    from nvmelab.cli import devices as devices_cmd
    from nvmelab.cli import main
    from nvmelab.driver.errors import NvmeError

    def boom(args):
        if exc == "nvme":
            raise NvmeError(0, 0x80, "LBA Out of Range", True, "Read nsid=1 slba=9 nlb=1")
        if exc == "oserror":
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), "/dev/nvme9n1")
        return 1 // 0

    monkeypatch.setattr(devices_cmd, "run", boom)
    monkeypatch.delenv("NVMELAB_DEBUG", raising=False)
    assert main(["devices"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nvmelab devices: error: ") and needle in err, err
