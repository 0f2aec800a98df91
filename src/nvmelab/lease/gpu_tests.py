# SPDX-License-Identifier: BSD-3-Clause
"""The GPU tests of a lease call: per-test outcomes as they happen, a junit file, and a hang that costs one test.

    run_gpu_tests(files, limit_s=..., per_test_s=..., junit=PATH, events=PATH, marker="gpu") -> dict

Why not one plain pytest run: after a genuinely hung kernel, the next test's cudaFree blocks every later
test until the call's limit, and a pytest killed at its limit writes no junit file and names no outcome.
Here pytest runs with this module as a plugin (``-p nvmelab.lease.gpu_tests``), which appends one JSON
line per test event (start, each phase's report, finish) to $NVMELAB_LEASE_TEST_EVENTS as it happens, and
with pytest-timeout's thread method, which after ``per_test_s`` dumps every thread's stack to the log and
ends the process. The runner then records the test that started and did not finish as ``hung`` (its stack
is in the log above), starts pytest again with every test already decided deselected, and goes on until all
ran or ``limit_s`` is used. At the end it writes one junit XML (every test, hung ones as errors) and the
per-test JSON; the log has pytest's own ``-v`` lines and one summary line per run.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

EVENTS_ENV = "NVMELAB_LEASE_TEST_EVENTS"
#: A pytest start with less than this left is not made.
MIN_RUN_S = 10.0
#: Outcomes of a test in the junit file and the JSON.
OUTCOMES = ("passed", "failed", "skipped", "error", "hung")


# ------------------------------------------------------------------------------------------ the plugin
def _emit(ev: dict[str, Any]) -> None:
    path = os.environ.get(EVENTS_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(ev, default=str) + "\n")


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _emit({"start": nodeid, "t": time.time()})


def pytest_runtest_logreport(report: Any) -> None:
    text = None
    if report.failed or report.skipped:
        lr = report.longrepr
        text = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    _emit(
        {
            "report": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "duration": round(float(report.duration), 4),
            "text": None if text is None else str(text)[-4000:],
        }
    )


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _emit({"finish": nodeid, "t": time.time()})


# ------------------------------------------------------------------------------------------ the runner
def _fold(events: list[dict[str, Any]], tests: dict[str, dict[str, Any]]) -> str | None:
    """Fold one pytest run's events into `tests`; returns the node id that started and never finished."""
    started = None
    for ev in events:
        if "start" in ev:
            started = ev["start"]
            tests.setdefault(started, {"outcome": None, "duration": 0.0, "text": None})
        elif "report" in ev:
            t = tests.setdefault(ev["report"], {"outcome": None, "duration": 0.0, "text": None})
            t["duration"] = round(t["duration"] + ev["duration"], 4)
            if ev["when"] == "call" or ev["outcome"] != "passed":
                # setup/teardown failures are errors (as pytest counts them); a skip in setup is a skip
                if ev["outcome"] == "failed" and ev["when"] != "call":
                    t["outcome"] = "error"
                elif t["outcome"] in (None, "passed"):
                    t["outcome"] = ev["outcome"]
                if ev.get("text"):
                    t["text"] = ev["text"]
            elif t["outcome"] is None and ev["when"] == "setup":
                t["outcome"] = None
        elif "finish" in ev:
            t = tests[ev["finish"]]
            if t["outcome"] is None:
                t["outcome"] = "passed"
            if started == ev["finish"]:
                started = None
    return started


def _read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for ln in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(ln))
        except json.JSONDecodeError:  # a line cut by the kill
            continue
    return out


def write_junit(tests: dict[str, dict[str, Any]], path: Path, *, name: str = "gpu-tests") -> None:
    counts = {k: sum(1 for t in tests.values() if t["outcome"] == k) for k in OUTCOMES}
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(tests)),
        failures=str(counts["failed"]),
        errors=str(counts["error"] + counts["hung"]),
        skipped=str(counts["skipped"]),
        time=f"{sum(t['duration'] for t in tests.values()):.3f}",
    )
    for nodeid, t in tests.items():
        file, _, test = nodeid.partition("::")
        case = ET.SubElement(
            suite,
            "testcase",
            classname=file.replace("/", ".").removesuffix(".py"),
            name=test,
            time=f"{t['duration']:.3f}",
        )
        o = t["outcome"]
        if o == "failed":
            ET.SubElement(case, "failure", message="failed").text = t.get("text") or ""
        elif o in ("error", "hung"):
            ET.SubElement(case, "error", message=o).text = t.get("text") or ""
        elif o == "skipped":
            ET.SubElement(case, "skipped", message=(t.get("text") or "")[:500])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    ET.ElementTree(suite).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)


def run_gpu_tests(
    files: list[str],
    *,
    limit_s: float,
    per_test_s: float,
    junit: Path,
    events: Path,
    marker: str | None = "gpu",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run the tests of `files` (only those with `marker`, when given) within `limit_s`, each test within
    `per_test_s`, starting pytest again past a hung test; writes `junit` and `events` (JSON: every test's
    outcome). Returns {"rc", "detail", "counts", "runs"}: rc 0 when no test failed, errored or hung."""
    import tempfile

    from ..studies.isolate import end_process_group

    end = time.monotonic() + limit_s
    tests: dict[str, dict[str, Any]] = {}
    runs = 0
    hung: list[str] = []
    stopped = None
    with tempfile.TemporaryDirectory(prefix="nvmelab-gputests-") as tmp:
        while True:
            left = end - time.monotonic()
            if left < MIN_RUN_S:
                stopped = f"the part's {limit_s:.0f} s were used"
                break
            ev_path = Path(tmp) / f"events-{runs}.jsonl"
            cmd = [
                sys.executable,
                "-m",
                "pytest",
                "-v",
                "-rs",
                "-p",
                "no:cacheprovider",
                "-o",
                "addopts=",
                "-p",
                "nvmelab.lease.gpu_tests",
                f"--timeout={per_test_s:g}",
                "--timeout-method=thread",
            ]
            if marker:
                cmd += ["-m", marker]
            cmd += list(files)
            for nodeid in tests:
                cmd += ["--deselect", nodeid]
            runs += 1
            sys.stdout.flush()
            child = subprocess.Popen(
                cmd, cwd=cwd, env={**os.environ, **(env or {}), EVENTS_ENV: str(ev_path)}, start_new_session=True
            )
            try:
                rc = child.wait(timeout=left)
            except subprocess.TimeoutExpired:
                end_process_group(child)
                rc = None
            unfinished = _fold(_read_events(ev_path), tests)
            if unfinished is not None:
                t = tests[unfinished]
                t["outcome"] = "hung"
                t["text"] = (
                    f"no result within {per_test_s:g} s (pytest-timeout dumped every thread's stack into the log)"
                    if rc is not None
                    else f"still running when the part's {limit_s:.0f} s ran out"
                )
                hung.append(unfinished)
                log.error("gpu-tests: %s hung; pytest starts again without it", unfinished)
                if rc is None:
                    stopped = f"the part's {limit_s:.0f} s were used"
                    break
                continue
            if rc is None:
                stopped = f"the part's {limit_s:.0f} s were used"
                break
            if rc in (0, 1, 5):  # all ran (5: nothing collected, e.g. everything deselected)
                break
            log.error("gpu-tests: pytest ended with exit %s and no test left unfinished; not started again", rc)
            stopped = f"pytest exit {rc}"
            break
    counts = {k: sum(1 for t in tests.values() if t["outcome"] == k) for k in OUTCOMES}
    write_junit(tests, junit)
    events.parent.mkdir(parents=True, exist_ok=True)
    events.write_text(json.dumps({"tests": tests, "runs": runs, "hung": hung, "stopped": stopped}, indent=1) + "\n")
    bad = counts["failed"] + counts["error"] + counts["hung"]
    detail = ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "no tests"
    detail += f" in {runs} pytest run(s)" + (f"; stopped: {stopped}" if stopped else "")
    for nodeid, t in tests.items():
        log.info("gpu-test %-8s %8.2f s  %s", t["outcome"] or "unknown", t["duration"], nodeid)
    log.info("gpu-tests: %s", detail)
    return {"rc": 1 if bad or stopped else 0, "detail": detail, "counts": counts, "runs": runs}
