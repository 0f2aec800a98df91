# SPDX-License-Identifier: BSD-3-Clause
"""Engines: what makes a measurement (a run function per study spec, spec.ENGINES).

perf         closed-loop I/O engine (CPU- and GPU-initiated), file and kernel paths
gpu          GPU-side queues and kernels (cuda-run), gpu_kernels
blksum       blkhash-compatible image checksums (and the blksum_qdepth study engine)
stacks       I/O stacks side by side on one served controller: SPDK's tools (SPDK_DIR) and our driver
tier         striped volumes, a write-back page cache, the paging workload, the tier engine
"""
