# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab build-info`: what this build has, and why an optional part is absent."""

from __future__ import annotations

import argparse
import json

COMMAND = "build-info"
ALIASES = ("build_info",)  # the name of the Python function
HELP = "what this build has (CUDA, io_uring, blksum, a usable GPU) and why a part is absent"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object (nvmelab.build_info() plus 'gpu')")


def run(args: argparse.Namespace) -> int:
    import nvmelab
    from nvmelab import _native

    info = nvmelab.build_info()
    gpu = dict(_native.cuda_status())  # here, unlike in build_info(), initialising CUDA is fine
    parts = dict(info["parts"])
    if not gpu["compiled"]:
        why = "no CUDA parts in this build (see cuda)"
    else:
        why = gpu["reason"] or "no CUDA device"
    parts["gpu"] = {
        "available": gpu["devices"] > 0,
        "detail": f"{gpu['devices']} CUDA device(s)" if gpu["devices"] > 0 else why,
    }
    if args.json:
        print(json.dumps({**info, "parts": parts}, indent=2, sort_keys=True))
        return 0
    print(
        f"nvmelab {info['version']}  compiler {info['compiler']}"
        + ("  sanitizers on" if info.get("sanitizers") else "")
    )
    width = max(map(len, parts))
    for name, part in parts.items():
        print(f"  {name:<{width}}  {'yes' if part['available'] else 'no ':<3}  {part['detail']}")
    return 0
