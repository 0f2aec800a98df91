# SPDX-License-Identifier: BSD-3-Clause
"""The cuda_match study: Device-initiated I/O: completion matching. Its spec is spec.toml beside this file."""
