"""Turn composed config nodes into library objects: the space, surrogate, engine and grid every workflow shares."""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sensitivity import __version__
from sensitivity.errors import ConfigError
from sensitivity.grids import Grid, make_grid
from sensitivity.space import ParameterSpace

log = logging.getLogger(__name__)


def plain(node: Any) -> Any:
    """A config node as plain Python containers, interpolations resolved."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) or OmegaConf.is_list(node) else node


def space_from(cfg: DictConfig) -> ParameterSpace:
    """The ParameterSpace of ``cfg.space_file`` (a SALib problem file) when set, else of ``cfg.space``."""
    from_file = space_from_problem_file(cfg)
    if from_file is not None:
        return from_file
    records = [{k: v for k, v in p.items() if v is not None} for p in plain(cfg.space.parameters)]
    return ParameterSpace.from_records(records, plain(cfg.space.correlation))


def tensorflow() -> None:
    """Import TensorFlow quietly (:func:`sensitivity.tf_runtime.import_tensorflow`), once every check of the config
    that needs no TensorFlow has passed: each workflow calls this (through :func:`surrogate_from`) where it first
    needs a model, so a bad config fails in about a second."""
    from sensitivity.tf_runtime import import_tensorflow

    import_tensorflow()


def surrogate_from(cfg: DictConfig, space: ParameterSpace, dtype: str | None = None):
    """Load ``cfg.model`` with the space's names and units, in ``dtype`` (default ``cfg.jacobian.dtype``)."""
    tensorflow()
    from sensitivity.surrogate import load_surrogate

    source = cfg.model.source
    if not (":" in source and not Path(source).exists()):
        source = str(repo_path(source))
    return load_surrogate(source, input_names=space.names, input_units=space.units, output=plain(cfg.model.output) or None,
                          kwargs=plain(cfg.model.kwargs), scaling=plain(cfg.model.scaling) or None, dtype=dtype or cfg.jacobian.dtype,
                          trusted=cfg.model.trusted)


def engine_from(cfg: DictConfig, surrogate):
    """Compile the Jacobian engine with ``cfg.jacobian``."""
    from sensitivity.jacobian import compile_jacobian

    j = cfg.jacobian
    return compile_jacobian(surrogate, j.mode, jit_compile=j.jit_compile, chunk_size=j.chunk_size,
                            memory_budget_mb=j.memory_budget_mb)


def grid_from(cfg: DictConfig, space: ParameterSpace) -> Grid:
    """The design of ``cfg.grid``."""
    g = cfg.grid
    return make_grid(space, g.kind, n=g.n, levels=plain(g.levels), seed=g.seed, scramble=g.scramble,
                     steps=g.steps, path=g.path, through=g.through)


def config_yaml(cfg: DictConfig) -> str:
    """The resolved config as YAML (recorded in every result)."""
    return OmegaConf.to_yaml(cfg, resolve=True)


def fingerprint(*parts: Any) -> str:
    """A stable hash of the things that define a computation (config nodes, hashes, versions)."""
    payload = json.dumps([plain(p) for p in parts] + [__version__], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def output_dir(cfg: DictConfig) -> Path:
    """The run directory (Hydra's, or ``output_dir=...`` given when composing in a test)."""
    path = Path(cfg.output_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def file_backend() -> None:
    """Select matplotlib's file-only Agg backend before a workflow draws its figures.

    The command line has no display, and the library (:mod:`sensitivity.plots`) leaves the
    backend to its caller, so a notebook keeps its own.
    """
    import matplotlib

    matplotlib.use("Agg")


def check_choice(value: Any, choices: tuple, key: str) -> None:
    """A clear error for a config value outside its choices."""
    if value not in choices:
        raise ConfigError(f"`{key}` must be one of {list(choices)}, got {value!r}")


def space_from_problem_file(cfg: DictConfig) -> ParameterSpace | None:
    """The space of the SALib problem file ``cfg.space_file`` (JSON or YAML, see :mod:`sensitivity.salib`),
    or None when no such key is set (it may be absent from a workflow's schema)."""
    path = OmegaConf.select(cfg, "space_file", default=None)
    if not path:
        return None
    from sensitivity.salib import read_problem

    space = read_problem(Path(str(path)).expanduser())
    log.info("space: %d parameters from SALib problem %s", len(space), path)
    return space


def repo_path(path: str | Path) -> Path:
    """A path from a config: as given when it is absolute or exists from the working directory, else relative
    to the packaged resources (the repository root, or the installed package holding ``conf/`` and ``data/``)
    when it exists there, so ``data/seir/...`` works from any directory and from a wheel; a path found
    nowhere is returned as given, for the error message."""
    from workflows.registry import RESOURCE_ROOT

    given = Path(path).expanduser()
    if given.is_absolute() or given.exists() or not (RESOURCE_ROOT / given).exists():
        return given
    return RESOURCE_ROOT / given
