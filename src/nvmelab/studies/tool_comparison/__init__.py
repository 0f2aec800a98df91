# SPDX-License-Identifier: BSD-3-Clause
"""The tool_comparison study: I/O stacks: software overhead per I/O. Its spec is spec.toml beside this file."""
