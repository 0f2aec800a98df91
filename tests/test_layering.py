# SPDX-License-Identifier: BSD-3-Clause
"""No call cycle between C files (the Python side: tests/test_import_cycles.py).

Each object file of the dev build (build/dev, as `make test` builds it) is a node; A -> B when A uses a
global symbol that B defines (nm). Any strongly connected component of two or more files is a cycle, e.g.
the emulator's ctrl.c <-> io.c loop that the split removed. The test also checks that the graph is not
trivially empty, so it can fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "dev" / "src"


def _sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    nodes = set(graph) | {w for ws in graph.values() for w in ws}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_scc_finds_a_cycle() -> None:
    assert _sccs({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _sccs({"a": {"b"}, "b": set()}) == []


def _c_graph() -> dict[str, set[str]]:
    objs = [o for o in BUILD.rglob("*.o") if "bindings" not in o.parts]
    defs: dict[str, set[str]] = defaultdict(set)
    uses: dict[str, set[str]] = {}
    for o in objs:
        name = str(o.relative_to(BUILD))
        for line in subprocess.run(
            ["nm", "-g", "--defined-only", str(o)], capture_output=True, text=True, check=True
        ).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3:
                defs[parts[2]].add(name)
        uses[name] = {
            ln.split()[-1]
            for ln in subprocess.run(
                ["nm", "-u", str(o)], capture_output=True, text=True, check=True
            ).stdout.splitlines()
            if ln.strip()
        }
    graph: dict[str, set[str]] = {}
    for name, syms in uses.items():
        graph[name] = {d for s in syms for d in defs.get(s, ()) if d != name}
    return graph


@pytest.mark.skipif(not BUILD.is_dir() or shutil.which("nm") is None, reason="needs the dev build (make build) and nm")
def test_no_call_cycle_between_c_files() -> None:
    graph = _c_graph()
    assert sum(len(v) for v in graph.values()) > 20, "the call graph of the C files looks empty"
    assert _sccs(graph) == []


# ------------------------------------------------------------------------------------------ include directions
SRC = ROOT / "src"
#: Which layer each folder of the C/CUDA tree belongs to, lowest first (src/README.md, "The tree").
_LAYERS = [
    # the driver, its queue primitives (nvme_gpuq.h, nvme_cuda.cuh) and the emulated controllers it opens
    # (target.c routes emu:// to emu/): one layer; the GPU emulator lives beside the CPU emulator
    ("nvme/emu/gpu", 0),
    ("nvme/emu", 0),
    ("nvme", 0),
    ("engine/cuda", 2),  # the cuda-run engine
    ("engine", 2),
    ("blksum", 3),
]


def _layer(rel: str) -> tuple[str, int] | None:
    for prefix, rank in _LAYERS:
        if rel == prefix or rel.startswith(prefix + "/"):
            return prefix, rank
    return None


def _includes(path: Path) -> list[str]:
    return re.findall(r'^#include "([^"]+)"', path.read_text(), flags=re.M)


def test_gpu_files_live_in_their_layers() -> None:
    """Issue 23: the GPU half is split like the CPU half -- no src/nvme/cuda/ any more, queue primitives beside
    the driver, the cuda-run engine in the engine layer, the GPU emulator beside the CPU emulator."""
    assert not (SRC / "nvme" / "cuda").exists()
    assert (SRC / "nvme" / "nvme_gpuq.h").is_file() and (SRC / "nvme" / "nvme_cuda.cuh").is_file()
    assert (SRC / "engine" / "cuda" / "cuda_run.cu").is_file() and (SRC / "engine" / "crun_params.h").is_file()
    assert (SRC / "nvme" / "emu" / "gpu" / "gpu_emu.cu").is_file()
    # one host driver for every target (the pci:// copy is gone), the emulator on the shared command rules
    assert not (SRC / "engine" / "cuda" / "cuda_pci.cu").exists()
    assert "nvme/emu/cmd_rules.h" in _includes(SRC / "nvme" / "emu" / "gpu" / "gpu_emu.cu")
    assert "nvme/emu/model_keys.h" in _includes(SRC / "nvme" / "emu" / "gpu" / "gpu_emu_uri.cu")
    assert "nvme/emu/model_keys.h" in _includes(SRC / "nvme" / "emu" / "params.c")


def test_includes_point_down() -> None:
    """No file includes a header of a layer above its own (driver/emulators < engines < blksum)."""
    bad, seen = [], 0
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in {".c", ".h", ".cu", ".cuh"}:
            continue
        me = _layer(str(path.parent.relative_to(SRC)))
        if me is None:
            continue
        for inc in _includes(path):
            other = _layer(str(Path(inc).parent))
            if other is None:
                continue
            seen += 1
            if other[1] > me[1]:
                bad.append(f"{path.relative_to(SRC)} includes {inc}")
    assert seen > 50, "no includes found: the scan looks broken"
    assert bad == []


def test_the_book_states_the_enforced_layers() -> None:
    """The framework chapter's layer block (book/framework.md, "How the code is layered") says what the tests
    enforce: the Python line is the documented package order, the C line orders the ranked folders of _LAYERS."""
    from tests.test_import_cycles import documented_layers

    text = (ROOT / "book" / "framework.md").read_text()
    block = text[text.index("(sec-framework-layers)=") :].split("```text\n", 1)[1].split("```", 1)[0]
    python = [ln for ln in block.splitlines() if ln.startswith("Python ")]
    assert python == ["Python  " + " < ".join(documented_layers())], python
    c_part = block.split("Python ", 1)[0]
    ranks = {"nvme": 0, "engine": 2, "blksum": 3}
    assert {p.split("/")[0]: r for p, r in _LAYERS} == ranks, "the ranks changed: update the book's C line"
    at = [c_part.index(w) for w in ("driver (src/nvme/", "< engines (src/engine/", "< blksum")]
    assert at == sorted(at), c_part
