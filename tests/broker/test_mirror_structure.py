"""``broker/mirror`` stays composed of small objects (issue 28 item 4): no private cross-module
reads (``obj._name`` where ``_name`` is defined nowhere in the reading module, or a private name
imported from a sibling): what a mixin reading its host's state, or a helper calling another
object's ``_private`` method, looks like. The check is tested on planted
violations, so it cannot pass by finding nothing. Import cycles, here as everywhere, are
tests/test_import_cycles.py's to find.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_mirror_package_reads_no_other_modules_privates() -> None:
    assert private_reads(ROOT / "broker" / "mirror") == []
