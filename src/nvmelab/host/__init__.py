# SPDX-License-Identifier: BSD-3-Clause
"""The host: CPUs and their settings (cpus, hostvars), NVMe devices and their binding (devices),
and the provenance every record carries."""
