# SPDX-License-Identifier: BSD-3-Clause
"""The cpu_submit study: CPU-initiated I/O: the CPU-side cost of submitting I/O. Its spec is spec.toml beside
this file."""
