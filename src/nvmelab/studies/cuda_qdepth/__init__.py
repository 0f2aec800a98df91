# SPDX-License-Identifier: BSD-3-Clause
"""The cuda_qdepth study: Device-initiated I/O: queue depth scaling. Its spec is spec.toml beside this file."""
