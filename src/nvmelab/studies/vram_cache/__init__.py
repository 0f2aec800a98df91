# SPDX-License-Identifier: BSD-3-Clause
"""The vram_cache study: NVMe RAID-0 with a GPU-memory cache. Its spec is spec.toml beside this file."""
