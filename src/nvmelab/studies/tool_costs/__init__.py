# SPDX-License-Identifier: BSD-3-Clause
"""The tool_costs study: I/O stacks measured here: the seeds' tools and ours on one served controller. Its spec
is spec.toml beside this file."""
