# SPDX-License-Identifier: BSD-3-Clause
"""The lease's GPU-test runner (nvmelab.lease.gpu_tests): every test's outcome as it happens, a junit file,
and a hung test that costs that test only: pytest-timeout ends pytest, the runner records the test as hung and
starts pytest again without the tests already decided."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nvmelab.lease.gpu_tests import run_gpu_tests

pytest.importorskip("pytest_timeout")

TESTS = """
import time
import pytest

def test_a_passes():
    pass

def test_b_hangs():
    time.sleep(120)

def test_c_fails():
    assert 1 == 2

@pytest.mark.skip(reason="not here")
def test_d_skips():
    pass

def test_e_passes_after_the_hang():
    pass
"""


@pytest.mark.slow
def test_a_hung_test_costs_itself_only_and_every_outcome_is_reported(tmp_path):
    (tmp_path / "test_fake_gpu.py").write_text(TESTS)
    junit, events = tmp_path / "out" / "gpu-tests.xml", tmp_path / "out" / "gpu-tests.json"
    res = run_gpu_tests(
        ["test_fake_gpu.py"], limit_s=90, per_test_s=3, junit=junit, events=events, marker=None, cwd=tmp_path
    )
    tests = json.loads(events.read_text())["tests"]
    outcome = {k.split("::")[1]: v["outcome"] for k, v in tests.items()}
    assert outcome == {
        "test_a_passes": "passed",
        "test_b_hangs": "hung",
        "test_c_fails": "failed",
        "test_d_skips": "skipped",
        "test_e_passes_after_the_hang": "passed",
    }, outcome
    assert res["rc"] == 1 and res["runs"] == 2 and res["counts"]["hung"] == 1, res
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "5" and suite.get("failures") == "1" and suite.get("errors") == "1"
    assert suite.get("skipped") == "1"
    hung = [c for c in suite if c.get("name") == "test_b_hangs"][0]
    assert hung.find("error") is not None and hung.find("error").get("message") == "hung"


@pytest.mark.slow
def test_a_clean_run_is_rc_0_and_the_limit_stops_a_run_that_never_ends(tmp_path):
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    out = tmp_path / "out"
    res = run_gpu_tests(
        ["test_ok.py"], limit_s=60, per_test_s=5, junit=out / "a.xml", events=out / "a.json", marker=None, cwd=tmp_path
    )
    assert res["rc"] == 0 and res["counts"]["passed"] == 1 and res["runs"] == 1
    # the part's limit (not the per-test one) ends a test: it is recorded as hung and nothing is started after it
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(60)\n")
    res = run_gpu_tests(
        ["test_slow.py"], limit_s=12, per_test_s=50, junit=out / "b.xml", events=out / "b.json", marker=None,
        cwd=tmp_path,
    )  # fmt: skip
    tests = json.loads((out / "b.json").read_text())
    assert res["rc"] == 1 and tests["stopped"] and list(v["outcome"] for v in tests["tests"].values()) == ["hung"]
    assert Path(out / "b.xml").exists()
