"""Everything a model reads, by content: the part of every stage's fingerprint that the model contributes.

A result is stale when anything its model read has changed, not only the file ``model.source`` names. The
fingerprint therefore covers

- the model itself: a ``.keras`` file, or every file of a SavedModel or ensemble directory (each member by its
  bytes), or, for ``package.module:function``, the module's source;
- the modules that module imports from its own folder (the study's helpers), transitively: found by reading
  their ``import`` statements with :mod:`ast` (nothing is imported or run), and kept only where they resolve to
  a file under the folder the model's top-level module lives in; modules of installed packages (site-packages,
  this package) are left to their versions, which every fingerprint holds already;
- every file or directory a string of ``model.kwargs`` or ``model.scaling`` names (weights, data, scaling
  tables), as it resolves from the working directory or the repository root;
- ``model.depends_on``: the paths of any other input the model reads (a file it opens by a name of its own,
  a folder of tables), declared in the model's config.
"""
from __future__ import annotations

import ast
import importlib.util
import sysconfig
from pathlib import Path
from typing import Any, Iterator

from omegaconf import DictConfig, OmegaConf

from sensitivity.errors import ConfigError

#: Top-level packages whose modules their version covers (every fingerprint holds the package version).
VERSIONED = ("sensitivity", "workflows")


def model_inputs_hash(cfg: DictConfig) -> str | None:
    """One hash of the content of everything ``cfg.model`` reads (see the module's docstring); None when the
    config has no model.

    Raises
    ------
    ConfigError
        A path of ``model.depends_on`` that does not exist (named, with its value).
    """
    from workflows.plumbing.values import fingerprint

    source = OmegaConf.select(cfg, "model.source", default=None)
    if not source or OmegaConf.is_missing(cfg.model, "source"):
        return None
    from sensitivity.datasets import content_hash

    # by content alone: a study folder moved or copied elsewhere keeps its results
    return fingerprint(sorted(content_hash(file) for file in model_files(cfg)))


def model_files(cfg: DictConfig) -> list[Path]:
    """The files whose content ``cfg.model`` reads, sorted (see :func:`model_inputs_hash`)."""
    from workflows.plumbing.values import plain, repo_path

    model = cfg.model
    found: set[Path] = set()
    path = repo_path(model.source)
    if path.exists():
        found.update(_files_of(path))
    else:
        found.update(module_files(str(model.source).partition(":")[0]))
    for key in ("kwargs", "scaling"):
        for text in _strings(plain(model.get(key))):
            named = repo_path(text)
            if _names_a_file(text, named):
                found.update(_files_of(named))
    for named in declared_inputs(cfg):
        found.update(_files_of(named))
    return sorted(found)


def declared_inputs(cfg: DictConfig) -> list[Path]:
    """The paths of ``model.depends_on``, resolved as every config path is (:func:`workflows.plumbing.values.repo_path`).

    Raises
    ------
    ConfigError
        A path that does not exist, named with its value.
    """
    from workflows.plumbing.values import plain, repo_path

    paths = []
    for text in plain(OmegaConf.select(cfg, "model.depends_on", default=None)) or []:
        named = repo_path(str(text))
        if not named.exists():
            raise ConfigError(f"`model.depends_on`: {text!r} does not exist")
        paths.append(named)
    return paths


def simulator_hash(source: str) -> str:
    """One hash of the content of a simulator ``package.module:function``'s module and of the modules it imports from
    its folder (:func:`module_files`): with its kwargs and the package versions, what its runs depend on (a run kept by
    an interrupted run is reused only while this holds)."""
    from sensitivity.datasets import content_hash
    from workflows.plumbing.values import fingerprint

    return fingerprint(sorted(content_hash(file) for file in module_files(source.partition(":")[0])))


def module_files(module: str) -> list[Path]:
    """The source file of ``module`` and of every module it imports, transitively, that lies in the folder of its
    top-level module (the study folder); an installed package's module (or this package's) alone, its imports left
    to their versions; empty when ``module`` is not found."""
    origin = _origin(module)
    if origin is None:
        return []
    if _installed(origin) or module.split(".")[0] in VERSIONED:
        return [origin]
    depth = len(module.split(".")) + (origin.name == "__init__.py")
    root = origin.parents[depth - 1]
    seen: dict[Path, str] = {}
    todo = [(origin, module)]
    while todo:
        file, name = todo.pop()
        if file in seen:
            continue
        seen[file] = name
        package = name if file.name == "__init__.py" else name.rpartition(".")[0]
        for imported in _imports(file, package):
            parts = imported.split(".")
            for name in (".".join(parts[:k]) for k in range(1, len(parts) + 1)):  # a.b.c runs a and a.b first
                found = _in_folder(root, name)
                if found is not None and parts[0] not in VERSIONED:
                    todo.append((found, name))
    return sorted(seen)


def _imports(file: Path, package: str) -> Iterator[str]:
    """The absolute names of the modules ``file`` imports (``from x import y`` gives ``x`` and ``x.y``: y may be a
    submodule); a file that does not parse imports nothing (its import fails loudly when the model loads)."""
    try:
        tree = ast.parse(file.read_bytes(), str(file))
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, *([base] if base else [])])
            if base:
                yield base
            yield from (f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*")


def _in_folder(root: Path, module: str) -> Path | None:
    """The file of ``module`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``), or None."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _origin(module: str) -> Path | None:
    """The source file of ``module`` found on ``sys.path`` (its parent packages are imported to find a submodule,
    as loading the model would), or None."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not Path(spec.origin).is_file() or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def _installed(path: Path) -> bool:
    """Whether ``path`` lies in an installed package folder (site-packages, the standard library)."""
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    return any(path.is_relative_to(Path(r).resolve()) for r in roots)


def _strings(node: Any) -> Iterator[str]:
    """Every string in a nested config value."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from _strings(value)


def _names_a_file(text: str, path: Path) -> bool:
    """Whether a config string names a file or directory (a path-like string that exists; not the working
    directory or a folder above it, which would hash the study)."""
    if not text.strip() or not ("/" in text or Path(text).suffix) or not path.exists():
        return False
    return not (path.is_dir() and Path.cwd().resolve().is_relative_to(path.resolve()))


def _files_of(path: Path) -> list[Path]:
    """``path`` itself, or every file under the directory ``path``."""
    if path.is_dir():
        return sorted(p.resolve() for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [path.resolve()]

