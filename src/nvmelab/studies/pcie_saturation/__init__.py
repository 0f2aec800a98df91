# SPDX-License-Identifier: BSD-3-Clause
"""The pcie_saturation study: PCIe bandwidth saturation (P2P). Its spec is spec.toml beside this file."""
