# SPDX-License-Identifier: BSD-3-Clause
"""`python -m nvmelab.lease ...`: the lease plan's command line (nvmelab.lease.plan.main)."""

from __future__ import annotations

from .plan import main

raise SystemExit(main())
