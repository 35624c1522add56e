"""No import cycles in protocol/, broker/ and audit/ (issue 28, item 4).

The graph comes from our own scan of the source, not from the interpreter's module cache: every
``import`` and ``from ... import`` statement counts wherever it is, under ``if TYPE_CHECKING:``
and inside functions included (a back-import there still ties the two modules' design
together). Relative imports are resolved; a package's ``__init__`` is a module like any other.
An import names one module: ``from a.b import c`` is an edge to ``a.b.c`` when that is a module,
else to ``a.b``; importing a module does not add edges to its parent packages (each
``__init__`` has its own edges, which the scan sees anyway).
"""

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("protocol", "broker", "audit")

Graph = dict[str, set[str]]


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> its file, for every ``.py`` file under ``packages``."""
    out: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The modules of ``known`` an import statement in ``module`` names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in known:
                yield alias.name
        return
    if not isinstance(node, ast.ImportFrom):
        return
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        if node.level > 1:
            package = package[: -(node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    for alias in node.names:
        sub = f"{base}.{alias.name}" if base else alias.name
        if sub in known:  # ``from package import submodule``
            yield sub
        elif base in known:
            yield base


def import_graph(root: Path, packages: Iterable[str]) -> Graph:
    """Module -> the modules (of the same packages) it imports."""
    files = module_files(root, packages)
    known = set(files)
    graph: Graph = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_bytes(), filename=str(path))
        graph[module] = {
            target
            for node in ast.walk(tree)
            for target in _imported(node, module, is_package, known)
            if target != module
        }
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
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
    return sorted(found)


def one_cycle(graph: Graph, component: list[str]) -> list[str]:
    """A shortest import path from the component's first module back to it."""
    members = set(component)
    start = component[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{component} is not a cycle")


def describe(graph: Graph, found: list[list[str]]) -> str:
    lines = [f"{len(found)} import cycle(s):"]
    for component in found:
        lines.append(f"- {len(component)} modules: {', '.join(component)}")
        lines.append(f"  e.g. {' -> '.join(one_cycle(graph, component))}")
    return "\n".join(lines)


def test_no_import_cycles() -> None:
    graph = import_graph(ROOT, PACKAGES)
    assert len(graph) > 100  # the scan found the tree
    found = cycles(graph)
    if found:
        print(describe(graph, found))
    assert not found, describe(graph, found)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_planted_two_module_cycle_is_caught(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/host.py": "from .part import Part\n\nclass Host(Part): ...\n",
            # the back-import only a type checker runs: a cycle all the same
            "pkg/part.py": (
                "from typing import TYPE_CHECKING\n\n"
                "if TYPE_CHECKING:\n    from .host import Host\n\nclass Part: ...\n"
            ),
            "pkg/leaf.py": "import os\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])
    found = cycles(graph)
    assert found == [["pkg.host", "pkg.part"]]
    assert "pkg.host -> pkg.part -> pkg.host" in describe(graph, found)


def test_imports_in_functions_absolute_and_parent_relative_ones_count(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .sub import b\n",
            "pkg/a.py": "def f():\n    import pkg.sub.b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "from ..a import f\n",
            "pkg/sub/c.py": "from . import b\nfrom .. import a\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg"] == {"pkg.sub.b"}
    assert graph["pkg.sub.c"] == {"pkg.sub.b", "pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def test_a_cycle_through_an_init_counts_and_a_layered_package_has_none(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .top import Top\n",
            "pkg/top.py": "from .mid import Mid\nfrom . import low\n",
            "pkg/mid.py": "from .low import Low\n",
            "pkg/low.py": "import pkg\n",  # the package itself: a cycle through __init__
        },
    )
    graph = import_graph(tmp_path, ["pkg"])
    assert cycles(graph) == [["pkg", "pkg.low", "pkg.mid", "pkg.top"]]
    (tmp_path / "pkg/low.py").write_text("import json\n")
    assert cycles(import_graph(tmp_path, ["pkg"])) == []
