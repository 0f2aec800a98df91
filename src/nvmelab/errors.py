# SPDX-License-Identifier: BSD-3-Clause
"""The driver's errors under their first name: the compiled extension (src/bindings) raises
them through ``import nvmelab.errors``. They live in :mod:`nvmelab.driver.errors`."""

from __future__ import annotations

from .driver.errors import *  # noqa: F401,F403
