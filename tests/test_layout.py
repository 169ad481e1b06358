"""The test tree's own rule: shared code comes from ``tests.helpers``, never from another test module."""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

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
    in ``sensitivity.inputs.uncertainty``); function-local imports count too."""
    analyses = ROOT / "sensitivity" / "analyses"
    packages = sorted(p.name for p in analyses.iterdir() if (p / "__init__.py").is_file())
    uses = {name: {other for path in (analyses / name).rglob("*.py") for module in imported_modules(path)
                   for other in packages if other != name and module.startswith(f"sensitivity.analyses.{other}")}
            for name in packages}
    cycles = [(a, b) for a in packages for b in uses[a] if a in uses[b]]
    assert cycles == [], uses


#: The library's wings by floor: a module may import the wings of lower floors, never its own floor's others nor
#: a higher one (docs/architecture.md draws it). ``studies`` (every study declared once, by dotted names) sits
#: above the studies it names. ``sensitivity`` is the public face: the wings take only
#: ``__version__`` from it.
FLOORS = (
    ("errors",),
    ("units", "settings"),
    ("runtime",),
    ("inputs", "outputs"),
    ("datasets",),
    ("store", "surrogates"),
    ("engine",),
    ("sweep", "interop", "simulators", "plots"),
    ("training", "analyses"),
    ("studies",),
)


def wing_of(module):
    """The wing a dotted ``sensitivity.*`` module name belongs to (``None`` outside the library)."""
    parts = module.split(".")
    if parts[0] != "sensitivity":
        return None
    return parts[1] if len(parts) > 1 else "sensitivity"


def upward_imports(library):
    """Every import in ``library`` (a ``sensitivity/`` tree) of a wing on the importer's floor or above, and every
    name the wings take from the public face other than ``__version__``; function-local imports count."""
    floor = {wing: level for level, wings in enumerate(FLOORS) for wing in wings}
    found = []
    for path in sorted(library.rglob("*.py")):
        relative = path.relative_to(library)
        own = relative.parts[0].removesuffix(".py")
        if own == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "sensitivity":
                found += [f"{relative}: sensitivity.{a.name}" for a in node.names if a.name != "__version__"]
                continue
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                wing = wing_of(name)
                if wing in (None, "sensitivity", own):
                    continue
                if wing not in floor or floor[wing] >= floor.get(own, -1):
                    found.append(f"{relative}: {name}")
    return found


def test_the_library_wings_import_only_the_floors_below():
    assert sorted(p.name.removesuffix(".py") for p in (ROOT / "sensitivity").iterdir()
                  if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").is_file())) == sorted(
        wing for wings in FLOORS for wing in wings)
    assert upward_imports(ROOT / "sensitivity") == []


@pytest.mark.parametrize("importer, line", [
    ("inputs/space.py", "from sensitivity.analyses.indices import sobol"),
    ("engine/jacobian.py", "    from sensitivity.sweep.stream import sweep  # deferred"),
    ("inputs/space.py", "import sensitivity.outputs.spec"),
    ("store/parts.py", "from sensitivity import load_surrogate"),
])
def test_an_upward_import_is_caught(tmp_path, importer, line):
    """The rule fails on an import that climbs: a copy of the library with one such line added is refused."""
    library = tmp_path / "sensitivity"
    shutil.copytree(ROOT / "sensitivity", library, ignore=shutil.ignore_patterns("__pycache__"))
    assert upward_imports(library) == []
    target = library / importer
    body = target.read_text()
    if line.startswith(" "):
        line = "def _added():\n" + line + "\n"
    target.write_text(body + "\n" + line + "\n")
    assert len(upward_imports(library)) == 1


#: The most lines a library module may have: past it, a module holds more than one job.
MAX_MODULE_LINES = 500


def test_no_library_or_workflow_module_is_over_the_line_limit():
    long = {str(p.relative_to(ROOT)): n for tree in ("sensitivity", "workflows") for p in sorted((ROOT / tree).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


#: The application's layers, top down: the entry (``cli``, which dispatches to every command), the commands (one
#: module per verb), then the report and the plumbing the commands wire with; the library below them all.
WORKFLOW_ENTRY = "cli"


def workflow_layer(module):
    """``entry``, ``command``, ``report`` or ``plumbing`` for a dotted ``workflows.*`` module name (else None)."""
    parts = module.split(".")
    if parts[0] != "workflows" or len(parts) < 2 or parts[1] in ("__init__", "__main__"):
        return None
    return {WORKFLOW_ENTRY: "entry", "report": "report", "plumbing": "plumbing"}.get(parts[1], "command")


def workflow_imports(workflows):
    """``(importer, imported)`` dotted names of every ``workflows.*`` import in the ``workflows/`` tree,
    function-local ones included."""
    for path in sorted(workflows.rglob("*.py")):
        importer = ".".join(("workflows",) + path.relative_to(workflows).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                package = (workflows / Path(*node.module.split(".")[1:])).is_dir()  # `from workflows.plumbing import build`
                names = [f"{node.module}.{a.name}" for a in node.names] if package else [node.module]
            else:
                continue
            yield from ((importer, name) for name in names if name.startswith("workflows."))


def layering_faults(workflows):
    """Imports that break the application's layers: a command importing another command, the plumbing or the
    report importing a command or the entry, the plumbing importing the report."""
    allowed = {"entry": {"command", "report", "plumbing"}, "command": {"report", "plumbing"},
               "report": {"report", "plumbing"}, "plumbing": {"plumbing"}}
    return [f"{a} -> {b}" for a, b in workflow_imports(workflows)
            if workflow_layer(a) and workflow_layer(b) and workflow_layer(b) not in allowed[workflow_layer(a)]]


def test_a_command_imports_no_other_command_and_the_plumbing_no_command():
    assert layering_faults(ROOT / "workflows") == []


@pytest.mark.parametrize("importer, line", [
    ("verify.py", "from workflows.propagate import propagation_from"),
    ("plumbing/build.py", "    from workflows.train import run  # deferred"),
    ("plumbing/chain.py", "from workflows.report import render_report"),
])
def test_a_layering_fault_is_caught(tmp_path, importer, line):
    workflows = tmp_path / "workflows"
    shutil.copytree(ROOT / "workflows", workflows, ignore=shutil.ignore_patterns("__pycache__"))
    target = workflows / importer
    if line.startswith(" "):
        line = "def _added():\n" + line + "\n"
    target.write_text(target.read_text() + "\n" + line + "\n")
    assert len(layering_faults(workflows)) == 1


def test_the_plumbing_modules_import_each_other_without_a_cycle():
    """Deferred (function-local) imports count: a cycle hidden in a function is still a cycle."""
    edges = {}
    for a, b in workflow_imports(ROOT / "workflows"):
        if a.startswith("workflows.plumbing.") and b.startswith("workflows.plumbing."):
            edges.setdefault(a, set()).add(b)

    def reaches(start, goal, seen=()):
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, seen + (nxt,)))
                   for nxt in edges.get(start, ()))

    assert [a for a in edges if reaches(a, a)] == []


#: The modules that parse a result's recorded config (``attrs["config"]``), each with why: a result's library
#: settings are read by ``sensitivity.datasets.settings_of`` (the ``settings`` attribute), never from its config.
CONFIG_READERS = {
    "sensitivity/sweep/merge_plan.py": "merge matches shards by their configs (the configs are what it compares)",
    "sensitivity/sweep/merge.py": "merge records the whole grid's config and each swept cell's",
    "workflows/plumbing/chain.py": "a consumed result's space compared with this run's (results of every verb)",
    "workflows/plumbing/verify_checks.py": "a propagation's input uncertainty, a workflow section read from files",
    "workflows/verify.py": "the simulator's kwargs a training.nc records (simulator settings, not a library's)",
}


def config_parsers(root):
    """The modules of ``root``'s ``sensitivity/`` and ``workflows/`` trees that read a result's ``config``
    attribute and parse YAML (``OmegaConf.create``, ``yaml.load``, ``yaml.safe_load``)."""
    reads = re.compile(r"""attrs(?:\.get\(|\[)\s*["']config["']""")
    parses = re.compile(r"OmegaConf\.create\(|yaml\.(?:safe_)?load\(")
    return sorted(str(p.relative_to(root)) for tree in ("sensitivity", "workflows") for p in (root / tree).rglob("*.py")
                  if reads.search(text := p.read_text()) and parses.search(text))


def test_a_result_settings_are_read_back_in_one_place_not_parsed_from_its_config():
    assert config_parsers(ROOT) == sorted(CONFIG_READERS)


@pytest.mark.parametrize("module, line", [
    ("workflows/multifidelity.py", "x = OmegaConf.create(ds.attrs['config'])"),
    ("sensitivity/analyses/indices/dgsm_sweep.py", "x = yaml.safe_load(sweep.attrs.get('config') or 'null')"),
])
def test_a_new_config_parser_is_caught(tmp_path, module, line):
    for tree in ("sensitivity", "workflows"):
        shutil.copytree(ROOT / tree, tmp_path / tree, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / module
    target.write_text(target.read_text() + "\n" + line + "\n")
    assert config_parsers(tmp_path) == sorted([*CONFIG_READERS, module])
