# SPDX-License-Identifier: BSD-3-Clause
"""The GPU lease plan: what the minutes of a lent GPU host run (env/gpu-lease.sh), above the studies layer.

plan        the calls, their parts, the cost model and budget; `python -m nvmelab.lease plan|call|pack|native-check`
host        what the device host has: nvidia-smi, the driver, the installed extension (probe, native_check)
gpu_tests   the GPU tests under pytest with a plugin that logs each outcome as it happens (run_gpu_tests)
"""
