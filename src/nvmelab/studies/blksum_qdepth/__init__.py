# SPDX-License-Identifier: BSD-3-Clause
"""The blksum_qdepth study: Block-image checksum: queue depth. Its spec is spec.toml beside this file."""
