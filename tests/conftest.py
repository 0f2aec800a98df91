# SPDX-License-Identifier: BSD-3-Clause
"""Shared pytest configuration: GPU tests skip with a reason where no CUDA device exists, and a test
that skips for want of the seed documents names the public texts it expects."""

from __future__ import annotations

import functools
import os
import re
import signal

import pytest


@functools.lru_cache(maxsize=1)
def gpu_available() -> tuple[bool, str]:
    try:
        import nvmelab

        if not nvmelab.build_info().get("cuda"):
            return False, "nvmelab was built without CUDA (no nvcc at build time)"
    except Exception as exc:  # extension missing or broken: say so
        return False, f"nvmelab native extension unavailable: {exc}"
    try:
        from nvmelab import _native

        n = _native.cuda_device_count() if hasattr(_native, "cuda_device_count") else 0
    except Exception as exc:
        return False, f"CUDA runtime unavailable: {exc}"
    if n <= 0:
        return False, "no CUDA GPU on this machine (GPU tests run on a lent GPU host; see README)"
    return True, ""


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_available() if any("gpu" in i.keywords for i in items) else (True, "")
    if ok:
        return
    skip = pytest.mark.skip(reason=f"GPU test skipped: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def sigint():
    """SIGINT raises KeyboardInterrupt here, as in an interactive shell, even when pytest was
    started with SIGINT ignored (a background job of a non-interactive shell inherits SIG_IGN,
    and Python then installs no handler). Yields a preexec_fn that gives a child process the
    default disposition for the same reason."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    finally:
        signal.signal(signal.SIGINT, old)


#: The seed documents this project started from, by number, with the public text each one is
#: (data/reference/README.md). A reader's clone has no shared/seeds/: a test that needs them says which
#: texts to put there (as <number>_<anything>.txt) or in a folder named by $NVMELAB_SEEDS.
SEED_SOURCES = (
    "000, 001 and 004: the AiSIO chapters of xnvme/aisio at commit 31b032a, docs/src/experiments/"
    "device_initiated_qdepth.md, device_initiated_iosize.md and cpu_initiated.md",
    "002: blkhash's queue-depth notes, nirs/blkhash test/results/queue-depth.md ('Experimenting with --queue-depth')",
    "003: the vRAM notes 'NVME RAID cache optimisations on (V)RAM' (A. Blaauw's experiment notes; book/references.bib, "
    "vramswap)",
)
_SEED_SKIP_RE = re.compile(r"seed documents|shared/seeds|NVMELAB_SEEDS", re.I)


def seed_sources_text() -> str:
    """What a test that skips without the seed documents adds to its reason."""
    return (
        "; the seed documents are public texts: "
        + "; ".join(SEED_SOURCES)
        + " (put them in shared/seeds/ beside the checkout, or name their folder with $NVMELAB_SEEDS)"
    )


def _name_seed_sources(rep) -> None:
    if not rep.skipped or not isinstance(rep.longrepr, tuple) or len(rep.longrepr) != 3:
        return
    path, line, reason = rep.longrepr
    if _SEED_SKIP_RE.search(str(reason)) and "31b032a" not in str(reason):
        rep.longrepr = (path, line, f"{reason}{seed_sources_text()}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """NVMELAB_NO_SKIP=word[,word...]: a skip whose reason names one of the words fails instead.

    An extra leg that installed what a test needs (`make test-browser` installs chromium and sets
    NVMELAB_NO_SKIP=chromium) must not pass by skipping it.
    """
    outcome = yield
    words = [w for w in os.environ.get("NVMELAB_NO_SKIP", "").split(",") if w.strip()]
    rep = outcome.get_result()
    _name_seed_sources(rep)
    if not words or not rep.skipped or not isinstance(rep.longrepr, tuple):
        return
    reason = str(rep.longrepr[2])
    if any(w.strip().lower() in reason.lower() for w in words):
        rep.outcome = "failed"
        rep.longrepr = f"skipped, but NVMELAB_NO_SKIP={os.environ['NVMELAB_NO_SKIP']} forbids it: {reason}"
