# SPDX-License-Identifier: BSD-3-Clause
"""The cpu_initiated study: CPU-initiated I/O: optimal parameter search. Its spec is spec.toml beside this file."""
