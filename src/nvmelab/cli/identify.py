# SPDX-License-Identifier: BSD-3-Clause
"""`nvmelab identify URI`: the controllers and namespaces of a target."""

from __future__ import annotations

import argparse
import json

COMMAND = "identify"
HELP = "list the controllers and namespaces of a target (emu://, pci://)"
DESCRIPTION = (
    "Open the target named by URI, bring its controllers up, and print each controller's "
    "Identify fields (model, serial, firmware, MDTS) and its active namespaces. "
    "Example: nvmelab identify 'emu://?ndev=2&nsze=64MiB'"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("uri", help="target URI, e.g. 'emu://?ndev=2&nsze=64MiB'")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")


def describe(uri: str) -> list:
    """Controllers of ``uri`` as a list of dicts (identify fields plus a ``namespaces`` list)."""
    import nvmelab

    out = []
    with nvmelab.open(uri) as target:
        for c in target:
            d = c.identify()
            d["index"] = c.index
            d["namespaces"] = [
                {"nsid": ns.nsid, "nsze": ns.nsze, "lba_size": ns.lba_size, "nbytes": ns.nbytes}
                for ns in c.namespaces()
            ]
            out.append(d)
    return out


def _size(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def run(args: argparse.Namespace) -> int:
    ctrls = describe(args.uri)
    if args.json:
        print(json.dumps({"uri": args.uri, "controllers": ctrls}, indent=2, default=str))
        return 0
    print(f"{args.uri}: {len(ctrls)} controller(s)")
    for d in ctrls:
        mdts = _size(d["mdts_bytes"]) if d.get("mdts_bytes") else "no limit"
        print(
            f"  [{d['index']}] {d['mn']}  sn={d['sn']}  fr={d['fr']}  "
            f"vid={d['vid']:#06x}  cntlid={d['cntlid']}  MDTS={mdts}"
        )
        for ns in d["namespaces"]:
            print(f"      nsid {ns['nsid']}: {ns['nsze']} blocks x {ns['lba_size']} B = {_size(ns['nbytes'])}")
    return 0
