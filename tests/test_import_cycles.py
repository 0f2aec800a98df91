# SPDX-License-Identifier: BSD-3-Clause
"""The package has no import cycles: every module's imports (at module level and inside functions,
not the ``if TYPE_CHECKING`` ones, not the compiled ``_native``) form a graph without a cycle, so
each layer can be read, tested and moved without the ones above it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in (SRC / "nvmelab").rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = p
    return mods


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(x)
            for n in ast.walk(tree)
            if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
            for x in ast.walk(n)
        }
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
                continue
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1])
                base += f".{node.module}" if node.module else ""
            else:
                base = node.module or ""
            for a in node.names:
                if a.name == "_native":
                    continue  # the compiled extension
                deps.add(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
        graph[mod] = {d for d in deps if d in mods and d != mod}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w) :] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_check_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    graph = import_graph()
    assert (
        "nvmelab.driver.qpair" in graph["nvmelab.driver"]
        and "nvmelab.driver.namespace" in graph["nvmelab.driver.qpair"]
    )


def test_old_module_paths_are_the_new_modules() -> None:
    """The aliases kept for code written before the split give the very same modules."""
    import nvmelab
    import nvmelab.studies as old_studies
    import nvmelab.studies as studies
    from nvmelab.results import analysis, plots, reference
    from nvmelab.results import analysis as a
    from nvmelab.results import plots as p
    from nvmelab.results import reference as r

    assert (analysis, plots, reference) == (a, p, r)
    assert old_studies.load_spec is studies.load_spec and old_studies.study_results is studies.study_results
    import nvmelab.driver.errors

    assert nvmelab.driver.errors.NvmeError is nvmelab.driver.errors.NvmeError  # what the extension raises
    try:
        nvmelab.nosuchmodule  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def documented_layers() -> list[str]:
    """The package's layers, bottom-up, as the docstring of nvmelab/__init__.py lists them under
    "Packages, by concern (each imports only those listed before it ...)"."""
    doc = ast.get_docstring(ast.parse((SRC / "nvmelab" / "__init__.py").read_text(encoding="utf-8"))) or ""
    lines = doc.split("Packages, by concern", 1)[1].splitlines()[1:]
    layers = []
    for line in lines:
        if not line.startswith("    ") or not line.strip():
            break
        layers.append(line.split()[0])
    return layers


#: Modules outside the layers: the package root (version, build_info, the lazy nvmelab.open) and
#: the old name of the driver's errors sit with the driver; ``python -m nvmelab`` sits above cli.
ROOT_MODULES = {"nvmelab": 0, "nvmelab._version": 0, "nvmelab.errors": 0, "nvmelab.__main__": None}


def layer_violations(graph: dict[str, set[str]], layers: list[str]) -> list[str]:
    """Every import of a module from a higher layer than its own (the package root and
    nvmelab.errors count as the driver layer; nvmelab.__main__ as the top)."""

    def rank(mod: str) -> int:
        if mod in ROOT_MODULES:
            r = ROOT_MODULES[mod]
            return len(layers) if r is None else r
        part = mod.split(".")[1]
        if part not in layers:
            raise AssertionError(f"{mod}: package {part!r} is not in the documented layers {layers}")
        return layers.index(part)

    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if rank(d) > rank(m))


def test_imports_follow_the_documented_layers() -> None:
    """driver < host < results < engines < studies < book < lease < cli (nvmelab/__init__.py): a
    module imports only its own layer and those below it (engines.blksum once took the scratch folder
    from studies; it is in host.scratch now). Book rendering reads the studies, the lease plan runs them."""
    layers = documented_layers()
    assert layers == ["driver", "host", "results", "engines", "studies", "book", "lease", "cli"], layers
    assert layer_violations(import_graph(), layers) == []


def test_the_layer_check_finds_an_upward_import() -> None:
    layers = ["driver", "host", "studies"]
    graph = {
        "nvmelab.host.a": {"nvmelab.studies.b"},
        "nvmelab.studies.b": {"nvmelab.driver.c"},
        "nvmelab.driver.c": set(),
    }
    assert layer_violations(graph, layers) == ["nvmelab.host.a -> nvmelab.studies.b"]
