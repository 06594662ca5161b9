"""Imports flow one way: no circle inside ``dedup_tasks`` or ``bench``, and no layer imports the pipeline.

The graph is read from the source (``ast``), not by importing. Every ``import`` statement counts,
at module level and inside functions alike: a deferred import inside a function is how a circle is
usually hidden, and it still ties the two modules together (each needs the other to work). Imports
under ``if TYPE_CHECKING:`` are left out (they never run). Importing ``a.b.c`` also imports the
packages ``a`` and ``a.b`` (their ``__init__``), so those count too, except the importer's own
enclosing packages, which are already being imported when it runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _modules(package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's ``__init__``) for every module of ``package``."""
    root = REPO / package
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_names(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """Dotted names ``module`` imports anywhere (module level or in a function), bar TYPE_CHECKING."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # ``source.name``: the submodule when ``name`` is one, else (resolved to the longest module
            # prefix by ``import_graph``) ``source`` itself.
            names.update(f"{source}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (see the module docstring for what counts)."""
    modules = _modules(package)

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        deps = {owner(n) for n in _imported_names(ast.parse(path.read_text()), module, is_package)}
        deps.discard(None)
        for dep in list(deps):
            parts = dep.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in modules and not (module == parent or module.startswith(parent + ".")):
                    deps.add(parent)
        deps.discard(module)
        graph[module] = deps  # type: ignore[assignment]
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    inside = set(component)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & inside))}" for m in component)


@pytest.mark.parametrize("package", ["dedup_tasks", "bench"])
def test_no_import_circle(package: str) -> None:
    graph = import_graph(package)
    assert len(graph) > 10
    found = cycles(graph)
    assert not found, "import circles: " + " | ".join(_describe(graph, c) for c in found)


def test_layers_never_import_the_pipeline() -> None:
    """A layer stands below the pipeline, the steps, the engines and the CLI that run it."""
    above = ("dedup_tasks.pipeline", "dedup_tasks.steps", "dedup_tasks.engines", "dedup_tasks.cli")
    graph = import_graph("dedup_tasks")
    bad = {
        m: sorted(d for d in deps if d.startswith(above))
        for m, deps in graph.items()
        if m.startswith("dedup_tasks.layers")
    }
    assert not {m: d for m, d in bad.items() if d}


def test_no_bench_module_imports_the_command_line() -> None:
    graph = import_graph("bench")
    assert not sorted(m for m, deps in graph.items() if "bench.__main__" in deps)


def test_the_walk_sees_a_deferred_circle(tmp_path: Path) -> None:
    """The checker itself: a circle closed by an import inside a function is found."""
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]
    tree = ast.parse("import os\ndef f():\n    from p.b import x\nif TYPE_CHECKING:\n    import p.z\n")
    assert _imported_names(tree, "p.a", False) == {"os", "p.b.x"}
