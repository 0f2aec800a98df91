# SPDX-License-Identifier: BSD-3-Clause
"""Our controller on the wire (issue 35): `nvmelab serve` serves emulated controllers over vfio-user in a
process of its own, and our driver attaches to them as a vfio-user client (`vfio-user://` targets).

Our own client against our own server: bring-up, identify, I/O with verify (Python API and the perf engine),
queue errors with their NVMe statuses, signals, a client killed mid-I/O, bad URIs. The tests that run SPDK's
own tools against the server (`spdk_nvme_identify`, the conformance suite `nvme_compliance`) run whenever
SPDK_DIR names an SPDK build and skip with that reason otherwise; with NVMELAB_CONFORMANCE_LOG_DIR set they
keep their logs there (`make conformance` commits them under data/results/conformance/)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nvmelab
from nvmelab.driver import spec
from nvmelab.driver.errors import NvmeError
from nvmelab.engines import perf
from nvmelab.host import serve

URI2 = "emu://?ndev=2&nsze=16MiB&profile=null"
PAGE = 4096


def test_the_server_is_built():
    assert serve.command(), "make build puts nvmelab-serve next to the venv's python"


@pytest.fixture(scope="module")
def served():
    with serve.Server(URI2) as s:
        yield s


def test_serve_lists_one_socket_per_controller(served):
    assert served.sockets == [served.dir / "ctrl0" / "cntrl", served.dir / "ctrl1" / "cntrl"]
    assert all(p.is_socket() for p in served.sockets)


def test_open_identify_and_io_with_verify(served):
    rng = np.random.default_rng(35)
    with nvmelab.open(served.uri) as t:
        assert len(t) == 2
        assert len({c.identify()["sn"] for c in t}) == 2, "each controller its own serial number"
        for c in t:
            ns = c.namespace(1)
            assert ns.nbytes == 16 << 20
            # one block, one page, a PRP pair, a PRP list
            for nbytes in (ns.lba_size, PAGE, 2 * PAGE, 64 << 10):
                nlb = nbytes // ns.lba_size
                data = rng.integers(0, 256, nbytes, dtype=np.uint8)
                ns.write(100, data)
                assert np.array_equal(ns.read(100, nlb), data)
            with c.qpair(depth=16) as q, c.alloc(64 << 10) as buf:
                buf.array[:] = rng.integers(0, 256, buf.array.size, dtype=np.uint8)
                want = buf.array.copy()
                for i in range(8):
                    q.submit_write(ns, 1000 + i * 16, 16, buf, offset=i * 8192 % (56 << 10))
                q.wait_all(timeout=5, check=True)
                buf.array[:] = 0
                q.submit_read(ns, 1000, 16, buf)
                q.wait_all(timeout=5, check=True)
                assert np.array_equal(buf.array[: 16 * ns.lba_size], want[: 16 * ns.lba_size])


def test_the_same_sockets_serve_a_second_client(served):
    with nvmelab.open(served.uri) as t:
        ns = t[1].namespace(1)
        ns.write(7, np.full(ns.lba_size, 0x5A, np.uint8))
    with nvmelab.open(f"vfio-user://{served.dir}/ctrl1") as t:  # one controller: its directory
        assert len(t) == 1
        assert (t[0].namespace(1).read(7, 1) == 0x5A).all(), "the data outlives the connection"


def test_queue_errors_keep_their_nvme_status(served):
    S = spec._native.spec
    with nvmelab.open(served.uri) as t:
        c = t[0]
        ns = c.namespace(1)
        with c.qpair(depth=4, timeout=2) as q, c.alloc(PAGE) as buf:
            q.submit_raw(dict(opc=spec.OPC_READ, nsid=1, cdw10=ns.nsze & 0xFFFFFFFF, cdw11=ns.nsze >> 32), buf)
            (cpl,) = q.wait_all(timeout=5)
            assert cpl.name == "LBA Out of Range" and isinstance(cpl.error, NvmeError)
        idf = c.identify()
        free_qid, too_big = idf["max_qpairs"], idf["max_depth"] + 1
        with c.qpair(depth=4) as q, c.alloc(too_big * spec.SQE_SIZE) as qmem:
            base = qmem.iova(0)
            cases = [
                (
                    "Invalid Queue Size",
                    dict(opc=S.ADM_CREATE_CQ, prp1=base, cdw10=free_qid | ((too_big - 1) << 16), cdw11=1),
                ),
                ("Invalid Queue Deletion", dict(opc=S.ADM_DELETE_CQ, cdw10=q.qid)),
                ("Invalid Queue Identifier", dict(opc=S.ADM_DELETE_SQ, cdw10=999)),
            ]
            for name, sqe in cases:
                assert c.admin_raw(sqe).name == name
        with c.qpair(depth=4) as q2:  # queue management still works
            assert q2.qid >= 1


def test_perf_engine_verifies_over_vfio_user(served):
    rec = perf.run(
        served.uri, rw="randrw", iosize=4096, qdepth=8, verify=True, lba_count=4096, seed=7,
        runtime=0.3, warmup=0.05, allow_write=True,
    )  # fmt: skip
    assert rec["verify_errors"] == 0 and rec["ios"] > 0 and rec["errors"] == 0
    assert rec["target"] == served.uri


_WRITER = """
import sys, numpy as np, nvmelab
with nvmelab.open(sys.argv[1]) as t:
    ns = t[0].namespace(1)
    print("attached", flush=True)
    with t[0].qpair(depth=32) as q, t[0].alloc(1 << 20) as buf:
        while True:
            for i in range(31):  # a queue of depth 32 holds 31 commands
                q.submit_write(ns, i * 64, 64, buf, offset=i * 32768)
            q.wait_all(timeout=5, check=True)
"""


def test_a_client_killed_mid_io_leaves_the_server_serving():
    with serve.Server(URI2) as s:
        w = subprocess.Popen([sys.executable, "-c", _WRITER, f"vfio-user://{s.dir}/ctrl0"], stdout=subprocess.PIPE)
        try:
            assert w.stdout.readline().strip() == b"attached"
            time.sleep(0.3)  # writes in flight
        finally:
            w.kill()
            w.wait()
        assert s.proc.poll() is None, "the server survives its client"
        with nvmelab.open(s.uri) as t:  # the same socket serves the next client, the other one never stopped
            for c in t:
                ns = c.namespace(1)
                ns.write(3, np.full(ns.lba_size, 9, np.uint8))
                assert (ns.read(3, 1) == 9).all()
        assert s.stop() == 0


def test_the_server_reports_its_service_threads_work_at_exit():
    with serve.Server("emu://?ndev=2&nsze=1MiB") as s:
        with nvmelab.open(f"vfio-user://{s.dir}/ctrl0") as t:
            ns = t[0].namespace(1)
            for lba in range(20):
                ns.write(lba, np.full(ns.lba_size, lba, np.uint8))
                assert (ns.read(lba, 1) == lba).all()
    st = s.stats  # one `stats ctrl<i> sweeps= busy= commands=` line per controller, printed at exit
    assert set(st) == {0, 1}
    assert st[0]["commands"] >= 40 and 0 < st[0]["busy"] <= st[0]["sweeps"]
    assert st[1]["commands"] == st[1]["busy"] == 0 < st[1]["sweeps"], "an idle controller's thread only sweeps"


def test_sigint_and_sigterm_close_and_remove_the_sockets():
    for sig in (signal.SIGTERM, signal.SIGINT):
        s = serve.Server("emu://?nsze=1MiB", dir=None)
        s._own_dir = False  # keep the directory to look into it
        s.start()
        t = nvmelab.open(s.uri)  # a client attached while the server stops
        s.proc.send_signal(sig)
        assert s.proc.wait(10) == 0
        assert not any(p.exists() for p in s.sockets), "no socket left behind"
        with pytest.raises((OSError, ValueError)):
            t[0].namespace(1).read(0, 1)
        t.close()
        s.stop()
        for p in sorted(s.dir.rglob("*"), reverse=True):
            p.rmdir()
        s.dir.rmdir()


def test_bad_uris_are_refused_with_one_message(tmp_path):
    with pytest.raises(ValueError, match="absolute"):
        nvmelab.open("vfio-user://relative/path")
    missing = tmp_path / "nothing" / "cntrl"
    with pytest.raises(OSError, match=str(missing.parent)):
        nvmelab.open(f"vfio-user://{missing}")
    # a UNIX socket whose server is not a vfio-user server: it answers nothing and hangs up
    path = tmp_path / "cntrl"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    try:
        with pytest.raises(OSError, match="cntrl"):
            import threading

            def hang_up():
                conn, _ = srv.accept()
                conn.recv(64)
                conn.close()

            threading.Thread(target=hang_up, daemon=True).start()
            nvmelab.open(f"vfio-user://{path}?timeout_ms=2000")
    finally:
        srv.close()


def test_serve_refuses_what_it_cannot_serve(tmp_path):
    def cli(*a):
        return subprocess.run([sys.executable, "-m", "nvmelab", "serve", *a], capture_output=True, text=True)

    r = cli("--dir", str(tmp_path), "pci://0000:00:00.0")
    assert r.returncode == 2 and "emu://" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli("--dir", str(tmp_path), "emu://?bogus=1")
    assert r.returncode == 2 and "bogus" in r.stderr
    r = cli("--dir", str(tmp_path), "emu://?mode=inline")
    assert r.returncode == 2 and "mode" in r.stderr
    assert not list(tmp_path.iterdir()), "a refused server leaves nothing behind"


# ---------------------------------------------------------------- SPDK's own driver, when SPDK_DIR is given

SPDK_DIR = os.environ.get("SPDK_DIR")
needs_spdk = pytest.mark.skipif(not SPDK_DIR, reason="SPDK_DIR is not set: SPDK's tools are used from a user's build")


def _trid(s: serve.Server) -> str:
    """SPDK's transport ID of the server's first controller (a subsystem NQN, so that SPDK takes it for an NVM
    subsystem, not a discovery controller)."""
    return f"trtype:VFIOUSER traddr:{s.dir / 'ctrl0'} subnqn:nqn.2026-11.io.nvmelab:ctrl0"


def _spdk_tool(*names: str) -> Path:
    for n in names:
        for sub in ("build/bin", "build/examples", "test/nvme/compliance", "build/test/nvme/compliance"):
            p = Path(SPDK_DIR) / sub / n
            if p.is_file() and os.access(p, os.X_OK):
                return p
    pytest.fail(f"SPDK_DIR={SPDK_DIR}: none of {names} is built there")


def _keep_log(name: str, argv: list[str], r: subprocess.CompletedProcess, served_by: str) -> None:
    """The run's log with what it tested: our commit, the SPDK build, the served URI, the command."""
    out = os.environ.get("NVMELAB_CONFORMANCE_LOG_DIR")
    if not out:
        return
    from nvmelab.host import provenance

    spdk_commit = provenance.git_commit(Path(SPDK_DIR))
    head = [
        f"# nvmelab commit: {provenance.git_commit()}",
        f"# SPDK: {SPDK_DIR} at {spdk_commit}",
        f"# served by: {served_by}",
        f"# command: {' '.join(argv)}",
        f"# exit status: {r.returncode}",
        f"# date: {provenance.utc_now()}",
    ]
    Path(out).mkdir(parents=True, exist_ok=True)
    Path(out, name).write_text("\n".join(head) + "\n" + r.stdout + r.stderr)


@needs_spdk
def test_spdk_nvme_identify_against_our_server():
    exe = _spdk_tool("spdk_nvme_identify", "identify")
    with serve.Server("emu://?nsze=64MiB&profile=null") as s:
        argv = [str(exe), "-r", _trid(s)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        _keep_log("spdk_nvme_identify.log", argv, r, f"nvmelab-serve '{s.target}'")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Controller at VFIOUSER" in r.stdout and "Model Number:" in r.stdout
    assert "Namespace ID:1" in r.stdout, "SPDK's driver finds the active namespace"
    assert "failed" not in r.stdout + r.stderr, "every Identify and log page SPDK asks for is answered"


@needs_spdk
def test_spdk_nvme_compliance_against_our_server():
    exe = _spdk_tool("nvme_compliance")
    with serve.Server("emu://?nsze=64MiB&profile=null") as s:
        argv = [str(exe), "-g", "-r", _trid(s)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        _keep_log("nvme_compliance.log", argv, r, f"nvmelab-serve '{s.target}'")
    assert "Run Summary" in r.stdout, r.stderr[-2000:]
    assert r.returncode == 0, r.stdout[-4000:]


@needs_spdk
def test_our_driver_against_spdks_own_target(tmp_path):
    """Our vfio-user client on SPDK's vfio-user NVMe target (nvmf_tgt with a malloc bdev): bring-up, identify,
    and the perf engine's verified random read/write."""
    tgt, rpc = _spdk_tool("nvmf_tgt"), Path(SPDK_DIR) / "scripts" / "rpc.py"
    sock, traddr, nqn = tmp_path / "spdk.sock", tmp_path / "vfu", "nqn.2026-11.io.nvmelab:spdk0"
    traddr.mkdir()
    p = subprocess.Popen([str(tgt), "-m", "0x1", "-r", str(sock)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert p.poll() is None and time.monotonic() < deadline, "nvmf_tgt did not start"
            time.sleep(0.2)
        for args in (
            ["nvmf_create_transport", "-t", "VFIOUSER"],
            ["bdev_malloc_create", "64", "512", "-b", "malloc0"],
            ["nvmf_create_subsystem", nqn, "-a", "-s", "nvmelab", "-m", "32"],
            ["nvmf_subsystem_add_ns", nqn, "malloc0"],
            ["nvmf_subsystem_add_listener", nqn, "-t", "VFIOUSER", "-a", str(traddr), "-s", "0"],
        ):
            subprocess.run(
                [sys.executable, str(rpc), "-s", str(sock), *args], check=True, capture_output=True, timeout=60
            )
        uri = f"vfio-user://{traddr}"
        argv = [sys.executable, "-m", "nvmelab", "identify", uri]
        ident = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        _keep_log("nvmelab_identify_on_spdk_nvmf_tgt.log", argv, ident, "SPDK nvmf_tgt, VFIOUSER, malloc bdev 64 MiB")
        assert ident.returncode == 0, ident.stderr
        assert "1 controller(s)" in ident.stdout and "nsid 1:" in ident.stdout
        argv = [sys.executable, "-m", "nvmelab", "perf", "run", "--target", uri, "--rw", "randrw", "--iosize", "4096",
                "--qdepth", "16", "--runtime", "1", "--verify"]  # fmt: skip
        run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        _keep_log("nvmelab_perf_verify_on_spdk_nvmf_tgt.log", argv, run, "SPDK nvmf_tgt, VFIOUSER, malloc bdev 64 MiB")
        assert run.returncode == 0, run.stderr
    finally:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
