"""The test tree's own rule: shared code comes from ``tests.helpers``, never from another test module."""
from __future__ import annotations

import ast

from tests.helpers import ROOT


def imported_modules(path):
    """Every module name an ``import`` or ``from ... import`` in ``path`` names (relative ones as ``.name``)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield "." * node.level + (node.module or "")


def test_test_modules_import_shared_code_only_from_the_helpers_package():
    tests = ROOT / "tests"
    offending = [f"{path.relative_to(ROOT)}: {name}" for path in sorted(tests.rglob("*.py"))
                 for name in imported_modules(path)
                 if name.startswith(".") or (name.startswith("tests") and name != "tests.helpers"
                                             and not name.startswith("tests.helpers."))]
    assert offending == []
