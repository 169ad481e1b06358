"""Every cross-reference in the docstrings resolves: a role such as ``:func:`~sensitivity.datasets.select``` names a
module, class, function or attribute that exists, so the documentation never points at a name that was renamed or
removed."""
from __future__ import annotations

import ast
import importlib
import inspect
import re

import pytest

from tests.helpers import ROOT

ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc):`([^`<]+?)(?:\s*<([^>]+)>)?`")
PACKAGES = ("sensitivity", "workflows")


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MISSING = object()


def instance_attributes(cls):
    """The names a class's methods assign as ``self.<name>`` (documented instance attributes)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return set()
    return set(re.findall(r"self\.(\w+)\s*(?::[^=\n]+)?=", source))


def lookup(dotted):
    """The object an absolute dotted name denotes, or :data:`MISSING`: the longest importable module, then
    attributes (dataclass fields, annotated and instance attributes count)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            fields = getattr(obj, "__dataclass_fields__", {}) or {}
            annotations = getattr(obj, "__annotations__", {}) if isinstance(obj, type) else {}
            if hasattr(obj, attribute):
                obj = getattr(obj, attribute)
            elif (attribute in fields or attribute in annotations or attribute in getattr(obj, "_fields", ())
                  or (isinstance(obj, type) and attribute in instance_attributes(obj))):
                obj = object()
            else:
                return MISSING
        return obj
    return MISSING


def resolves(target, module, classes=()):
    """Sphinx's rules, as the docstrings use them: absolute names, names relative to the enclosing classes
    (``classes``, innermost first), to the module (``.name`` or bare) or to one of its packages."""
    target = target.lstrip("~").removesuffix("()")
    relative = target.lstrip(".")
    scopes = [f"{module}.{c}" for c in classes] + [module.rsplit(".", depth)[0] for depth in range(module.count(".") + 1)]
    candidates = ([] if target.startswith(".") else [target]) + [f"{scope}.{relative}" for scope in scopes]
    return any(lookup(c) is not MISSING for c in candidates)


def class_spans(tree, prefix=""):
    """``(first line, last line, qualified name)`` of every class in a module, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            yield node.lineno, node.end_lineno, prefix + node.name
            yield from class_spans(node, prefix + node.name + ".")


def references():
    """``(module, enclosing classes innermost first, file:line, target)`` of every role in the library and workflows."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            spans = list(class_spans(ast.parse(text)))
            for match in ROLE.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                classes = sorted((name for first, last, name in spans if first <= line <= last), key=len, reverse=True)
                yield (module_name(path), classes, f"{path.relative_to(ROOT)}:{line}",
                       match.group(2) or match.group(1))


def test_every_cross_reference_in_the_docstrings_resolves():
    unresolved = [f"{where}: {target}" for module, classes, where, target in references()
                  if not resolves(target, module, classes)]
    assert unresolved == []


@pytest.mark.parametrize("target, module, expected", [
    ("~sensitivity.datasets.select", "sensitivity.errors", True),
    (".build", "sensitivity.datasets", True),
    ("ParameterSpace.nominal", "sensitivity.inputs.space", True),
    ("sensitivity.space.ParameterSpace", "sensitivity.errors", False),  # the path before the wings
    ("no_such_function", "sensitivity.datasets.read", False),
])
def test_the_resolver_finds_what_exists_and_only_that(target, module, expected):
    assert resolves(target, module) is expected


def test_every_file_the_docstrings_name_exists():
    """A benchmark, test or documentation page a docstring points at (``benchmarks/bench_jacobian.py``) is in the
    repository (the study files that ``sensitivity init`` writes, ``conf/...`` of a study folder, are not checked)."""
    path = re.compile(r"\b((?:benchmarks|tests|docs)/[\w./-]+\.(?:py|md))")
    missing = [f"{p.relative_to(ROOT)}: {name}" for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
               for name in path.findall(p.read_text()) if not (ROOT / name).exists()]
    assert missing == []
