# SPDX-License-Identifier: BSD-3-Clause
"""The cuda_pollcost study: Device-initiated I/O: what polling costs the GPU. Its spec is spec.toml beside this file."""
