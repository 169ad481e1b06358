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


def test_the_library_imports_neither_hydra_nor_omegaconf_nor_the_workflows():
    """Layers point down: ``sensitivity/`` is usable from a notebook; only ``workflows/`` reads a config."""
    library = ROOT / "sensitivity"
    upward = ("hydra", "omegaconf", "workflows", "hydra_plugins")
    offending = [f"{path.relative_to(ROOT)}: {name}" for path in sorted(library.rglob("*.py"))
                 for name in imported_modules(path) if name.split(".")[0] in upward]
    assert offending == []


def test_math_in_the_analyses_does_not_write_files():
    """``sensitivity/analyses/`` is math on arrays: results are written through ``sensitivity.datasets`` or, for
    a stored sweep's block analyses, by the workflow through ``StoredSweep.map_to``."""
    analyses = ROOT / "sensitivity" / "analyses"
    writers = ("to_netcdf", "to_zarr", "write_text", "write_bytes", "open(", "map_to(")
    offending = [f"{path.relative_to(ROOT)}: {writer}" for path in sorted(analyses.rglob("*.py"))
                 for writer in writers if writer in path.read_text()]
    assert offending == []


def test_the_analyses_packages_import_each_other_without_a_cycle():
    """Each study's package may use another's, never both ways (the shared input distributions live a level up,
    in ``sensitivity.analyses.inputs``); function-local imports count too."""
    analyses = ROOT / "sensitivity" / "analyses"
    packages = sorted(p.name for p in analyses.iterdir() if (p / "__init__.py").is_file())
    uses = {name: {other for path in (analyses / name).rglob("*.py") for module in imported_modules(path)
                   for other in packages if other != name and module.startswith(f"sensitivity.analyses.{other}")}
            for name in packages}
    cycles = [(a, b) for a in packages for b in uses[a] if a in uses[b]]
    assert cycles == [], uses
