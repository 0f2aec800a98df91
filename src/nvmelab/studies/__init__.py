# SPDX-License-Identifier: BSD-3-Clause
"""Study sweeps: one folder per study (<study>/spec.toml, its analysis and figures), the runner, host
variables, and a Dask executor. Adding a study means adding a folder (spec.list_specs finds it).

    from nvmelab.studies import load_spec, run_study, load_results
    spec = load_spec("cpu_initiated")          # cpu_initiated/spec.toml
    plan = spec.plan("quick")                  # the runs of a preset
    report = run_study("cpu_initiated", "quick", target="emu://?profile=pm1753")
    df = load_results("cpu_initiated", "quick")

See spec.py (file format), runner.py (resume, atomic records, progress),
hostvars.py (governor/turbo/SMT/stress policy), distributed.py (several hosts).
"""

from __future__ import annotations

from ..host.hostvars import HostControl
from .runner import (
    HostBusyError,
    SweepReport,
    default_results_root,
    engine_available,
    ensure_quiet,
    execute_run,
    host_id,
    load_gpu_results,
    load_results,
    results_path,
    run_study,
    scratch_dir,
    set_aside,
    study_results,
)
from .spec import HOST_VARS, PRESETS, Plan, Run, SpecError, StudySpec, list_specs, load_spec, parse_spec


def __getattr__(name: str):
    if name == "DaskExecutor":  # imports distributed only when asked for
        from .distributed import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module 'nvmelab.studies' has no attribute {name!r}")


__all__ = [
    "HOST_VARS",
    "PRESETS",
    "HostBusyError",
    "HostControl",
    "Plan",
    "Run",
    "SpecError",
    "StudySpec",
    "SweepReport",
    "DaskExecutor",
    "default_results_root",
    "engine_available",
    "ensure_quiet",
    "execute_run",
    "host_id",
    "list_specs",
    "load_gpu_results",
    "load_results",
    "load_spec",
    "parse_spec",
    "results_path",
    "run_study",
    "scratch_dir",
    "set_aside",
    "study_results",
]
