# SPDX-License-Identifier: BSD-3-Clause
"""The cuda_iosize study: Device-initiated I/O: I/O size scaling. Its spec is spec.toml beside this file."""
