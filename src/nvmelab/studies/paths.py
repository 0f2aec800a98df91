# SPDX-License-Identifier: BSD-3-Clause
"""Where a study's records and scratch files go, and which host this is.

    host_id()                              $NVMELAB_HOST_ID or the hostname, as a folder name
    scratch_dir()                          where file:// and generated study targets live (host.scratch)
    default_results_root(preset)           $NVMELAB_RESULTS, else data/results (quick: build/results);
                                           an installed package (no checkout) needs $NVMELAB_RESULTS
    results_path(root, study, host, preset) data/results/<study>/<host>/<preset>.jsonl
    Where(root, study, preset)             one sweep's records place, resolved once: .path(host), .here(),
                                           .all_hosts(); Where.of(study, preset, root=None) applies the default

Below both spec.py and runner.py, so neither
imports the other for these.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from ..host.scratch import scratch_dir  # noqa: F401 (re-exported: the scratch folder belongs to the host layer)

_HOST_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def host_id() -> str:
    """This host's folder name under data/results/<study>/: $NVMELAB_HOST_ID or the hostname."""
    raw = os.environ.get("NVMELAB_HOST_ID") or socket.gethostname() or "unknown-host"
    return _HOST_RE.sub("_", raw).strip("._") or "unknown-host"


def default_results_root(preset: str) -> Path:
    """data/results for real sweeps; the quick (CI) preset writes under build/results, which git ignores,
    so that `make test` never changes the committed data."""
    env = os.environ.get("NVMELAB_RESULTS")
    if env:
        return Path(env)
    from ..results.reference import data_root, installed_data

    data = data_root()
    if installed_data():  # never write records into site-packages
        raise FileNotFoundError(
            "nvmelab is installed as a package, not run from a source checkout: set NVMELAB_RESULTS to the "
            "folder that receives the study records (<study>/<host>/<preset>.jsonl)"
        )
    if preset == "quick":
        return data.parent / "build" / "results"
    return data / "results"


#: A study, host or preset name as one folder or file name of the results tree.
_PART_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def results_path(root: Path, study: str, host: str, preset: str) -> Path:
    """data/results/<study>/<host>/<preset>.jsonl; a part that is not one plain name (a '/', '..',
    an absolute path: it would put records outside the results root) is a ValueError."""
    for what, part in (("study", study), ("host", host), ("preset", preset)):
        if not isinstance(part, str) or not _PART_RE.fullmatch(part) or ".." in part:
            raise ValueError(f"{what} name {part!r} cannot name a folder of the results tree under {root}")
    return Path(root) / study / host / f"{preset}.jsonl"


@dataclass(frozen=True)
class Where:
    """Where one sweep's records live: the results root, the study and the preset, resolved once and handed to
    the runner, its executors and the records (instead of the three passed apart)."""

    root: Path
    study: str
    preset: str

    @classmethod
    def of(cls, study: str, preset: str, root: str | os.PathLike | None = None) -> Where:
        """The place of `study`/`preset` under `root`, else under default_results_root(preset)."""
        return cls(Path(root) if root is not None else default_results_root(preset), study, preset)

    def path(self, host: str) -> Path:
        """The records file of `host` (results_path)."""
        return results_path(self.root, self.study, host, self.preset)

    def here(self) -> Path:
        """The records file of this host."""
        return self.path(host_id())

    def all_hosts(self) -> list[Path]:
        """Every host's records file of this study and preset that exists, sorted."""
        return sorted(Path(self.root, self.study).glob(f"*/{self.preset}.jsonl"))
