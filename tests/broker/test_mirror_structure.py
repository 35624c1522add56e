"""``broker/mirror`` stays composed of small objects (issue 28 item 4): no import cycle among its
modules, counting ``TYPE_CHECKING`` imports (``ruff analyze graph`` lists those too), and no
private cross-module reads (``obj._name`` where ``_name`` is defined nowhere in the reading
module, or a private name imported from a sibling): what a mixin reading its host's state, or a
helper calling another object's ``_private`` method, looks like. Both checks are tested on
planted violations, so they cannot pass by finding nothing.
"""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ruff() -> str:
    found = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    assert Path(found).exists(), "ruff (a dev dependency) is needed for the import graph"
    return found


def import_cycles(cwd: Path, package: str) -> list[list[str]]:
    """Strongly connected components of more than one module in ``package``'s import graph."""
    out = subprocess.run(
        [_ruff(), "analyze", "graph", package],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    graph: dict[str, list[str]] = json.loads(out)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the package is a few dozen modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in graph:
                continue  # outside the package: import-linter's layer contracts cover those
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def private_reads(package: Path) -> list[str]:
    """``file:line: .name`` for every private cross-module read in ``package``."""
    hits: list[str] = []
    for f in sorted(package.rglob("*.py")):
        tree = ast.parse(f.read_text())
        defined: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
        rel = f.relative_to(package.parent)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in defined
            ):
                hits.append(f"{rel}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.level:
                hits += [
                    f"{rel}:{node.lineno}: import {a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
    return hits


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / name).write_text(text)
    return pkg


def test_a_planted_type_checking_cycle_is_found(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "host.py": "from .part import Part\n\nclass Host(Part): ...\n",
            "part.py": (
                "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                "    from .host import Host\n\nclass Part: ...\n"
            ),
            "leaf.py": "X = 1\n",
        },
    )
    assert import_cycles(tmp_path, "pkg") == [["pkg/host.py", "pkg/part.py"]]


def test_planted_private_reads_are_found(tmp_path: Path) -> None:
    pkg = _plant(
        tmp_path,
        {
            "owner.py": "class Owner:\n    def __init__(self):\n        self._state = 1\n",
            "helper.py": (
                "from .owner import _hidden\n\n"
                "def peek(owner):\n    return owner._state\n\n"
                "class Own:\n    def __init__(self):\n        self._mine = 2\n\n"
                "    def read(self):\n        return self._mine\n"
            ),
        },
    )
    assert private_reads(pkg) == ["pkg/helper.py:1: import _hidden", "pkg/helper.py:4: ._state"]


def test_the_mirror_package_has_no_import_cycle() -> None:
    assert import_cycles(ROOT, "broker/mirror") == []


def test_the_mirror_package_reads_no_other_modules_privates() -> None:
    assert private_reads(ROOT / "broker" / "mirror") == []
