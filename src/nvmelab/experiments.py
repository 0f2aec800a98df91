"""Old name of :mod:`nvmelab.studies` (before the package was split by concern, issue 14), kept
so that ``from nvmelab.experiments import load_spec, study_results`` still works while notebooks and
branches move to the new path. New code imports nvmelab.studies."""
from __future__ import annotations

from .studies import *  # noqa: F401,F403
from .studies import __all__, __getattr__  # noqa: F401
