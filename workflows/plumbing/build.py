"""Turn composed config nodes into library objects: the space, surrogate, engine and grid every workflow shares."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
from omegaconf import DictConfig, OmegaConf

from sensitivity.errors import ConfigError
from sensitivity.sweep.designs import Grid, GridDesign
from sensitivity.inputs.space import ParameterSpace
from workflows.plumbing.values import fingerprint, plain, repo_path  # noqa: F401 (the commands' `build.plain`)

log = logging.getLogger(__name__)


def space_from(cfg: DictConfig) -> ParameterSpace:
    """The ParameterSpace of ``cfg.space_file`` (a SALib problem file) when set, else of ``cfg.space``."""
    from_file = space_from_problem_file(cfg)
    if from_file is not None:
        return from_file
    records = [{k: v for k, v in p.items() if v is not None} for p in plain(cfg.space.parameters)]
    return ParameterSpace.from_records(records, plain(cfg.space.correlation))


def check_study(cfg: DictConfig) -> None:
    """Build what a config describes that needs no TensorFlow, the parameter space and the model's output
    description, so that a bad one fails in one line before any work (the command line calls this before Hydra
    makes the run directory); each workflow builds them again where it uses them."""
    from sensitivity.outputs.spec import OutputSpec
    from sensitivity.settings import check_memory_budget

    if "jacobian" in cfg:
        check_memory_budget(cfg.jacobian.memory_budget_mb)
    if "space" in cfg:
        space = space_from(cfg)
        for key in ("grid", "starts"):  # the sweep's design; calibrate's starts
            if key in cfg:
                check_design_size(cfg[key], len(space), key)
    if OmegaConf.select(cfg, "points_per_part", default=None) is not None:
        from sensitivity.settings import check_points_per_part

        check_points_per_part(cfg.points_per_part)
    if "model" in cfg:
        from workflows.plumbing.model_inputs import declared_inputs

        declared_inputs(cfg)  # a missing `model.depends_on` path
    if "model" in cfg and OmegaConf.select(cfg, "model.output", default=None) is not None:
        OutputSpec.from_dict(plain(cfg.model.output))


def tensorflow() -> None:
    """Import TensorFlow quietly (:func:`sensitivity.runtime.tf_import.import_tensorflow`), once every check of the config
    that needs no TensorFlow has passed: each workflow calls this (through :func:`surrogate_from`) where it first
    needs a model, so a bad config fails in about a second."""
    from sensitivity.runtime.tf_import import import_tensorflow

    import_tensorflow()


def surrogate_from(cfg: DictConfig, space: ParameterSpace, dtype: str | None = None):
    """Load ``cfg.model`` with the space's names and units, in ``dtype`` (default ``cfg.jacobian.dtype``)."""
    tensorflow()
    from sensitivity.surrogates.load import load_surrogate

    source = cfg.model.source
    if not (":" in source and not Path(source).exists()):
        source = str(repo_path(source))
    return load_surrogate(source, input_names=space.names, input_units=space.units, output=plain(cfg.model.output) or None,
                          kwargs=plain(cfg.model.kwargs), scaling=plain(cfg.model.scaling) or None, dtype=dtype or cfg.jacobian.dtype,
                          trusted=cfg.model.trusted)


def engine_from(cfg: DictConfig, surrogate, space: ParameterSpace):
    """Compile the Jacobian engine with ``cfg.jacobian``; a fallback form of forward mode is checked at the
    :func:`probe_points` of the space."""
    from sensitivity.engine.jacobian import compile_jacobian

    j = cfg.jacobian
    return compile_jacobian(surrogate, j.mode, jit_compile=j.jit_compile, chunk_size=j.chunk_size,
                            memory_budget_mb=j.memory_budget_mb, probe_points=probe_points(space))


def ensemble_from(cfg: DictConfig, surrogate, space: ParameterSpace | None = None):
    """Compile every member's values and Jacobians of an ensemble surrogate in one engine, with ``cfg.jacobian``
    (:func:`sensitivity.engine.ensemble.compile_ensemble`), checked at the :func:`probe_points` of ``space`` like
    :func:`engine_from` (the engine's default points without one); None for a single model."""
    if surrogate.n_members < 2:
        return None
    from sensitivity.engine.ensemble import compile_ensemble

    j = cfg.jacobian
    return compile_ensemble(surrogate, j.mode, jit_compile=j.jit_compile, chunk_size=j.chunk_size,
                            memory_budget_mb=j.memory_budget_mb,
                            probe_points=None if space is None else probe_points(space))


def probe_points(space: ParameterSpace) -> np.ndarray:
    """``[2, n]`` points where the model is defined, for an engine's check of forward mode by double reverse: the
    space's nominal point and 70 % of every range."""
    low, high = space.bounds.T
    return np.stack([space.nominal, low + 0.7 * (high - low)])


def any_engine(cfg: DictConfig, surrogate, space: ParameterSpace):
    """The compiled engine of ``surrogate`` as every study verb takes it: an ensemble's (:func:`ensemble_from`, the
    verb handles its members), else one model's (:func:`engine_from`)."""
    return ensemble_from(cfg, surrogate, space) or engine_from(cfg, surrogate, space)


def check_design_size(node: DictConfig, d: int, key: str) -> None:
    """Refuse the size ``node.n`` of a drawn design (sobol, halton, lhs, random) of ``d`` parameters in one line
    naming ``<key>.n`` (:func:`sensitivity.sweep.designs.check_grid_size`)."""
    if node.kind in ("sobol", "halton", "lhs", "random"):
        from sensitivity.sweep.designs import check_grid_size

        check_grid_size(node.n, node.kind, d, key=f"{key}.n")


def grid_from(cfg: DictConfig, space: ParameterSpace, node: DictConfig | None = None, key: str = "grid") -> Grid:
    """The design of ``cfg.grid`` (or of another grid node of the config, e.g. calibrate's ``starts``, whose key
    names it in errors)."""
    g = cfg.grid if node is None else node
    check_design_size(g, len(space), key)
    return grid_design(g).grid(space)


def grid_design(node: DictConfig) -> GridDesign:
    """The :class:`~sensitivity.sweep.designs.GridDesign` of a grid node (what a sweep records of its grid)."""
    levels = plain(node.levels)
    return settings(GridDesign, node, levels=None if levels is None else tuple(levels))


def settings(cls: type, node: Any, **given: Any) -> Any:
    """The frozen settings ``cls`` built by keyword from the config ``node``: each field of ``cls`` that the node
    has, plus ``given`` (values the config does not hold, e.g. arrays); the class keeps its own defaults for the rest.

    By keyword, never by position, so a field added to a settings class cannot be mis-mapped.
    """
    import dataclasses

    fields = [f.name for f in dataclasses.fields(cls) if f.init]
    return cls(**{name: plain(node[name]) for name in fields if name in node and name not in given}, **given)


def config_yaml(cfg: DictConfig) -> str:
    """The resolved config as YAML (recorded in every result)."""
    return OmegaConf.to_yaml(cfg, resolve=True)


#: Keys that change where or how a run reports, not what it computes: outside every result's fingerprint.
RUN_ONLY_KEYS = ("output_dir", "progress", "plots", "replace_other_settings", "recompute")


def result_set(cfg: DictConfig, workflow: str, inputs: Iterable[str | Path | None] = (), *,
               recorded: Mapping[str, str] | None = None, simulator: str | None = None):
    """The result set of this run (:class:`sensitivity.datasets.publish.ResultSet`), fingerprinted by the config
    (its run-only keys left out), the content of its input files, of everything the model reads and of the code of
    the ``simulator`` it runs (its identity, :attr:`workflows.plumbing.simulation.Simulation.identity`: an edit of a
    simulator's module, of one it imports from its folder, or of a program's files, is a new computation).

    ``recorded`` gives input files by the checksums recorded beside them (``{path: sha256}``, e.g. a merge's
    shards, verified as they are read) instead of hashing them again.

    Use as ``with build.result_set(cfg, "calibrate", [observations]) as results:`` and write into
    ``results.staging``; ``results.complete`` says the directory holds this computation's set already.
    """
    from sensitivity.datasets import content_hash
    from sensitivity.datasets.publish import ResultSet
    from workflows.plumbing.model_inputs import model_inputs_hash
    from workflows.plumbing.schema import workflow_keys

    check_study(cfg)  # a bad space or output description is refused before the run directory is touched
    files = {str(p): content_hash(p) for p in (Path(str(i)) for i in inputs if i) if p.is_file()}
    files.update(recorded or {})
    own = workflow_keys(workflow)  # the other studies' sections an experiment file sets do not change this result
    config = {k: v for k, v in plain(cfg).items() if k in own and k not in RUN_ONLY_KEYS}
    return ResultSet(output_dir(cfg), workflow=workflow, inputs=files,
                     fingerprint=fingerprint(config, sorted(files.values()), model_inputs_hash(cfg),
                                             *([simulator] if simulator else [])),
                     replace=bool(cfg.get("replace_other_settings", False)),
                     recompute=bool(cfg.get("recompute", False)))


def announce_complete(results, workflow: str) -> None:
    """Log that a run found its complete, verified result set in place (a rerun does no work)."""
    log.info("%s: %s already holds this computation's complete, verified results; nothing to do (another run "
             "directory, or other settings, computes again)", workflow, results.directory)


def output_dir(cfg: DictConfig) -> Path:
    """The run directory (Hydra's, or ``output_dir=...`` given when composing in a test), made if needed.

    Raises
    ------
    DataError
        It cannot be made (a read-only file system, no permission, a full disk): one line naming it.
    """
    from sensitivity.errors import disk_error

    path = Path(cfg.output_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise disk_error(path, err) from None
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
    """The space of the SALib problem file ``cfg.space_file`` (JSON or YAML, see :mod:`sensitivity.interop.salib`),
    or None when no such key is set (it may be absent from a workflow's schema)."""
    path = OmegaConf.select(cfg, "space_file", default=None)
    if not path:
        return None
    from sensitivity.interop.salib import read_problem

    return read_problem(Path(str(path)).expanduser())


def with_space_file(cfg: DictConfig) -> DictConfig:
    """``cfg`` with its ``space`` replaced by the space of the SALib problem file ``cfg.space_file`` when one is
    set (``space_file`` kept), else ``cfg`` itself: the space a run computes with is then the one its result
    records in its config, fingerprints (an edited problem file reruns the stages it feeds) and is compared with
    by the runs that consume it (:func:`workflows.plumbing.chain.consumed`)."""
    space = space_from_problem_file(cfg)
    if space is None or "space" not in cfg:
        return cfg
    log.info("space: %d parameters from SALib problem %s", len(space), cfg.space_file)
    from workflows.plumbing.schema import SpaceConf

    resolved = cfg.copy()
    resolved.space = OmegaConf.merge(OmegaConf.structured(SpaceConf), space.records())
    return resolved


# ----------------------------------------------------------------------------- the calibration problem


def prior_from(node: DictConfig, space) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Prior mean ``[n]`` and covariance ``[n, n]`` of ``cfg.prior`` (None, None when off).

    ``prior.from_space``: the Gaussian with each marginal's mean and standard deviation (truncation included)
    and the space's correlation, :meth:`sensitivity.inputs.space.ParameterSpace.moments`.
    """
    mean, std, cov = plain(node.mean) or {}, plain(node.std) or {}, plain(node.cov)
    if node.get("from_space", False):
        if mean or std or cov is not None:
            raise ConfigError("`prior.from_space` takes the prior from the space: drop `prior.mean`, `prior.std` and "
                              "`prior.cov`, or set prior.from_space=false")
        mean, cov = space.moments()
        bad = [n for n, m, v in zip(space.names, mean, np.diag(cov))
               if not (np.isfinite(m) and np.isfinite(v) and v > 0)]
        if bad:
            raise ConfigError(f"`prior.from_space`: the distributions of {bad} have no finite mean and positive std")
        return mean, cov
    for key, table in (("prior.mean", mean), ("prior.std", std)):
        for name in table:
            if name not in space.names:
                _unknown(key, name, space)
    if not std and cov is None:
        if mean:
            raise ConfigError("`prior.mean` is set but neither `prior.std` nor `prior.cov`: give one of them")
        return None, None
    if std and cov is not None:
        raise ConfigError("give either `prior.std` or `prior.cov`, not both")
    center = np.array([float(mean.get(n, p.nominal)) for n, p in zip(space.names, space.parameters)])
    if cov is not None:
        try:
            return center, np.asarray(cov, dtype=float)
        except (TypeError, ValueError):
            raise ConfigError(f"`prior.cov` must be a matrix of numbers, got {cov!r}") from None
    missing = [n for n in space.names if n not in std]
    if missing:
        raise ConfigError(f"`prior.std` must give every parameter a standard deviation; missing {missing}")
    for name, value in std.items():
        if not value > 0:
            raise ConfigError(f"`prior.std` for {name!r} must be > 0, got {value}")
    return center, np.diag([float(std[n]) ** 2 for n in space.names])


def _unknown(key: str, name: str, space) -> None:
    raise ConfigError(f"`{key}`: unknown parameter {name!r}; the space has {space.names}")


def calibration_minima(path: Path, names: list[str]) -> np.ndarray:
    """``[M, n]`` the lowest-cost start of each distinct minimum of the calibration ``path``, best first, in the order
    ``names`` (:func:`sensitivity.analyses.calibration.minimum_points`)."""
    from sensitivity.analyses.calibration import minimum_points
    from sensitivity.datasets import open_result

    with open_result(path) as ds:
        order = [list(map(str, ds["parameter_name"].values)).index(n) for n in names]
        return minimum_points(ds["estimate"].values[:, order], ds["cost"].values, ds["minimum"].values)


def log_mask_from(names: list[str] | None, space) -> np.ndarray:
    """``[n]`` bool: parameters fitted in log space: ``names``, or by default the ``scale: log`` ones and those whose
    distribution is a law of ``log x`` (lognormal, log-uniform: :attr:`~sensitivity.inputs.space.Distribution.of_log`).

    A positive scale parameter identified through ratios or products (a clearance over a volume, a rate times a
    period) has a posterior ridge whose width grows with its distance from zero in ``x`` but is constant in
    ``log x``, where one step size resolves it."""
    if names is None:
        return np.array([p.scale == "log" or (p.distribution.of_log and p.low > 0) for p in space.parameters])
    mask = np.zeros(len(space), bool)
    for name in names:
        if name not in space.names:
            _unknown("log_parameters", name, space)
        if space.parameters[space.index(name)].low <= 0:
            raise ConfigError(f"`log_parameters`: {name!r} needs low > 0 to be fitted in log space, "
                              f"got low={space.parameters[space.index(name)].low}")
        mask[space.index(name)] = True
    return mask


def log_summary(logger: logging.Logger, summary, prefix: str = "") -> None:
    """Log a result's library summary (:func:`sensitivity.datasets.summary.log_lines`): the lines the study report
    renders from the same dataset, its failed verdicts and warnings at WARNING."""
    from sensitivity.datasets.summary import log_lines

    for level, line in log_lines(summary, prefix):
        logger.log(level, "%s", line)
