# SPDX-License-Identifier: BSD-3-Clause
"""SIGTERM and SIGHUP behave like Ctrl-C (issue 21 item 2): a sweep stopped by any of them at
several points leaves nothing behind (no stress-ng process, no scratch file, host variables as
they were) and keeps every finished record; the CLI prints one line and exits 128 + n."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nvmelab.host import scratch, signals
from nvmelab.results import records
from tests.fake_study import fake_spec, preset, sweep

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
NVMELAB = [sys.executable, "-m", "nvmelab"]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def _spec(governor: str | None = None) -> str:
    """The sweep's spec: every run under stress, and asking for `governor` if given."""
    fixed = {"stress": 1, **({"governor": governor} if governor else {})}
    return fake_spec("t_sig", preset(sweep("qdepth", qdepth=[1, 2, 3, 4])), fixed=fixed)


#: A stand-in for stress-ng: logs its arguments and pid, forks a worker (as stress-ng does) and sleeps.
FAKE_STRESS = """#!{python}
import os, sys, time
log = os.environ["FAKE_STRESS_LOG"]
with open(os.path.join(log, f"{{os.getpid()}}.args"), "w") as f:
    f.write(" ".join(sys.argv[1:]))
if os.fork() == 0:
    open(os.path.join(log, f"{{os.getpid()}}.worker"), "w").close()
time.sleep(300)
"""

SWEEP = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from nvmelab.host import scratch, signals
    from nvmelab.host.hostvars import HostControl
    from nvmelab.studies import load_spec, run_study
    from nvmelab.studies.runner import LocalExecutor
    from tests.fake_study import fake_run

    spec_path, root, sysroot, marks, hold = sys.argv[1:6]
    n = []

    def run_fn(**kw):
        n.append(1)
        scratch.temp_path(f"image{len(n)}", ".raw").write_bytes(b"x" * 4096)
        Path(marks, f"run{len(n)}").touch()
        if len(n) == int(hold):
            time.sleep(120)  # the test signals us here
        return fake_run(**kw)

    ex = LocalExecutor(host=HostControl(root=Path(sysroot)))
    try:
        run_study(load_spec(spec_path), "quick", run_fn=run_fn, results_root=root, progress=False, executor=ex)
    except KeyboardInterrupt as exc:
        print(f"interrupted ({signals.signal_name(exc)})", file=sys.stderr)
        sys.exit(signals.exit_status(exc))
    """
)


def _fake_sys(root: Path) -> Path:
    for c in (0, 1):
        d = root / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text("performance\n")
        (d / "scaling_available_governors").write_text("performance powersave\n")
        (root / f"cpu{c}" / "topology").mkdir()
        (root / f"cpu{c}" / "topology" / "thread_siblings_list").write_text(f"{c}\n")
    (root / "online").write_text("0-1\n")
    (root / "smt").mkdir()
    (root / "smt" / "control").write_text("notsupported\n")
    return root


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("hold", [1, 3], ids=["first-run", "third-run"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_mid_sweep_leaves_nothing_behind(tmp_path, sig, hold, sigint):
    root = os.geteuid() == 0  # governor changes need root (on a fake sysfs here)
    spec = tmp_path / "t_sig.toml"
    spec.write_text(_spec("powersave" if root else None))
    sysroot = _fake_sys(tmp_path / "sys")
    bindir, log, marks, scr = (tmp_path / d for d in ("bin", "stresslog", "marks", "scratch"))
    for d in (bindir, log, marks, scr):
        d.mkdir()
    fake = bindir / "stress-ng"
    fake.write_text(FAKE_STRESS.format(python=sys.executable))
    fake.chmod(0o755)
    stale = scr / f"old-image.{scratch._host()}.pid{_dead_pid()}.raw"
    stale.write_bytes(b"left by a killed run")
    keep = scr / "study-target.img"  # persistent scratch data (no pid in its name) stays
    keep.write_bytes(b"data")
    env = {
        **ENV,
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_STRESS_LOG": str(log),
        "NVMELAB_SCRATCH": str(scr),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SWEEP, str(spec), str(tmp_path / "res"), str(sysroot), str(marks), str(hold)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=sigint,
    )
    try:
        deadline = time.monotonic() + 120
        while not (marks / f"run{hold}").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sweep never reached the run to interrupt"
            time.sleep(0.02)
        while not list(log.glob("*.worker")):  # the fake stress-ng has started (python startup)
            assert time.monotonic() < deadline, "stress-ng was not started for the run"
            time.sleep(0.02)
        stress_pids = [int(p.stem) for p in log.glob("*.args")]
        assert stress_pids and all(_alive(p) for p in stress_pids), "stress-ng is not running during the run"
        assert all("--timeout" in p.read_text() for p in log.glob("*.args"))
        if root:
            assert (sysroot / "cpu0/cpufreq/scaling_governor").read_text().strip() == "powersave"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, err
    assert f"interrupted ({sig.name})" in err and "Traceback" not in err, err
    time.sleep(0.2)
    left = [int(p.stem) for p in [*log.glob("*.args"), *log.glob("*.worker")] if _alive(int(p.stem))]
    assert not left, f"stress-ng processes left running: {left}"
    if root:
        assert (sysroot / "cpu0/cpufreq/scaling_governor").read_text().strip() == "performance"
    assert sorted(p.name for p in scr.iterdir()) == [keep.name]  # own images and the stale one gone
    path = next((tmp_path / "res" / "t_sig").glob("*/quick.jsonl"), None)
    recs = list(records.iter_records(path, check=True)) if path else []
    assert len(recs) == hold - 1  # every run finished before the signal, and no other


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_cli_waiting_on_a_fifo_stops_with_one_line(tmp_path, sig, sigint):
    """`nvmelab blksum FIFO` with no writer blocks in open(); any of the three signals ends it
    with one line on stderr and exit 128 + n."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [*NVMELAB, "blksum", str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        preexec_fn=sigint,
    )
    try:
        time.sleep(3.0)  # past the imports: the command waits in open()
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "nvmelab blksum: interrupted" in err


def test_ctrl_c_during_startup_is_one_line():
    """Ctrl-C while the package is still being imported (a KeyboardInterrupt raised inside the
    import of nvmelab.cli, deterministically here): one line, exit 130, no traceback."""
    code = textwrap.dedent(
        """
        import runpy, sys

        class Interrupt:
            def find_spec(self, name, path=None, target=None):
                if name == "nvmelab.cli":
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, Interrupt())
        sys.argv = ["nvmelab", "study", "list"]
        runpy.run_module("nvmelab", run_name="__main__")
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=60)
    assert p.returncode == 130 and p.stderr.splitlines() == ["nvmelab: interrupted"], p.stderr


def test_terminated_is_a_keyboard_interrupt_with_its_signal():
    exc = signals.Terminated(signal.SIGTERM)
    assert isinstance(exc, KeyboardInterrupt) and signals.exit_status(exc) == 143
    assert signals.exit_status(KeyboardInterrupt()) == 130 and signals.signal_name(exc) == "SIGTERM"


def test_terminate_as_interrupt_raises_once_and_restores(monkeypatch):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(signals.Terminated) as ei:
        with signals.terminate_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
    assert ei.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_stale_scratch_files_of_live_processes_are_kept(tmp_path):
    mine = scratch.temp_path("img", ".raw", folder=tmp_path)
    mine.write_bytes(b"x")
    dead = tmp_path / f"img.{scratch._host()}.pid{_dead_pid()}.raw"
    dead.write_bytes(b"x")
    other_host = tmp_path / f"img.elsewhere.pid{_dead_pid()}.raw"
    other_host.write_bytes(b"x")
    assert scratch.remove_stale(tmp_path) == [dead]
    assert mine.exists() and other_host.exists()
    assert mine in scratch.remove_own() and not mine.exists()


def test_a_run_that_outlives_stress_ng_is_not_labelled_stress(tmp_path):
    """stress-ng ends at its --timeout; a run still going then did not run under stress all along:
    it is skipped with the reason, never recorded as stress=1."""
    import shutil

    from nvmelab.host.hostvars import HostControl
    from nvmelab.studies import load_spec, run_study
    from nvmelab.studies.runner import LocalExecutor
    from tests.fake_study import fake_run

    true = shutil.which("true")
    if true is None:
        pytest.skip("no `true` command")
    spec = tmp_path / "t_sig.toml"
    spec.write_text(_spec())
    host = HostControl(root=_fake_sys(tmp_path / "sys"), stress_cmd=true)  # a "stress-ng" that ends at once

    def run_fn(**kw):
        host._stress.wait(timeout=30)  # the run goes on after stress-ng has ended
        return fake_run(**kw)

    rep = run_study(
        load_spec(spec),
        "quick",
        run_fn=run_fn,
        results_root=tmp_path,
        progress=False,
        executor=LocalExecutor(host=host),
    )
    assert rep.ran == 0 and len(rep.skipped) == rep.planned > 0
    assert all("stress-ng ended before the run did" in why for _, why in rep.skipped)
