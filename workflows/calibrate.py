"""Workflow `calibrate`: fit parameters to observations from many starts at once -> calibration.nc.

The observations (netCDF or CSV, see :mod:`sensitivity.analyses.calibration.observations`) are aligned to the model's
outputs; every start of the ``starts`` design (64 Sobol' points by default, plus the nominal point) is fitted
together by
:func:`sensitivity.analyses.calibration.calibrate` with exact Jacobians from the compiled engine,
within the space's bounds, in log space for ``scale: log`` parameters, with an optional Gaussian
prior. On an ensemble surrogate, each member is calibrated too, and the fit is repeated with the ensemble's
predictive variance at the data added to the observation covariance (``emulator.*``; Kennedy & O'Hagan 2001):
:func:`sensitivity.analyses.calibration.calibrate` does both itself, given the ensemble's engine. With ``step_slice.enabled``
(the default) the step map on a 2-D slice through the best estimate is
written too (``step_slice.nc``, :func:`sensitivity.analyses.calibration.step_slice`); with ``sweep_path`` the
Gauss-Newton step map of a stored sweep (``step_map.nc``, :func:`sensitivity.analyses.calibration.step_map_analysis`),
block by block and without evaluating the model.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import numpy as np
from omegaconf import DictConfig, OmegaConf

from sensitivity.analyses.calibration import (
    BatchedModel, Emulator, Fit, GaussNewton, LevenbergMarquardt, ObservationModel, TrustRegion, calibrate,
    member_steps_note, step_map_analysis, step_slice)
from sensitivity.analyses.calibration.summary import summary
from sensitivity.errors import ConfigError
from sensitivity.sweep.stored import StoredSweep
from workflows.plumbing import build, chain
from workflows.plumbing.schema import (GridConf, ObservationsConf, PriorConf, SurrogateStudyConf, kinds_schema, schema_of,
                              settings_from)

log = logging.getLogger(__name__)


#: solver.kind -> its settings class; conf/solver/ holds a preset of each
SOLVERS = {"trust_region": TrustRegion, "levenberg_marquardt": LevenbergMarquardt, "gauss_newton": GaussNewton}


SolverConf = kinds_schema("SolverConf", SOLVERS)


@dataclass
class StepMapConf(schema_of(StoredSweep.map_to, "BlockConf", keys=("block",)),  # sweep points per block
                  schema_of(step_map_analysis, "StepMapSettings", keys=("damping",),
                            extra=[("plot_parameters", Optional[List[str]], None)])):
    pass
StepSliceConf = schema_of(step_slice, "StepSliceConf", keys=("points", "damping"), extra=[
    ("enabled", bool, True), ("parameters", Optional[List[str]], None), ("width", float, 0.25)])
FitConf = schema_of(Fit, "FitConf", keys=("level", "rcond", "minima_rtol", "minima_level",
                                                      "record_history"))
EmulatorConf = schema_of(Emulator, "EmulatorConf", keys=("iterations", "tol"),
                         extra=[("enabled", bool, True)])  # on an ensemble surrogate: its variance in the likelihood


@dataclass
class CalibrateConf(FitConf, SurrogateStudyConf):
    solver: SolverConf = field(default_factory=SolverConf)
    emulator: EmulatorConf = field(default_factory=EmulatorConf)
    observations: ObservationsConf = field(default_factory=ObservationsConf)
    prior: PriorConf = field(default_factory=PriorConf)
    include_nominal: bool = True
    log_parameters: Optional[List[str]] = None
    step_dtype: Optional[str] = "float32"
    fit: bool = True
    sweep_path: Optional[str] = None
    starts: GridConf = field(default_factory=lambda: GridConf(n=64))  # the design of the starts (any grid kind)
    step_map: StepMapConf = field(default_factory=StepMapConf)
    step_slice: StepSliceConf = field(default_factory=StepSliceConf)
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = CalibrateConf


def run(cfg: DictConfig) -> Path:
    """Run the calibration described by ``cfg``; return the path of ``calibration.nc``
    (of ``step_map.nc`` when ``fit=false``)."""
    if OmegaConf.is_missing(cfg.observations, "path"):
        raise ConfigError("`observations.path` is required: a .nc or .csv file of observed outputs")
    if not cfg.fit and not cfg.sweep_path:
        raise ConfigError("nothing to do: `fit` is false and `sweep_path` is null")
    build.check_choice(cfg.solver.kind, tuple(SOLVERS), "solver.kind")
    if cfg.step_dtype is not None:
        build.check_choice(cfg.step_dtype, ("float32", "float64"), "step_dtype")
    main = "calibration.nc" if cfg.fit else "step_map.nc"
    if cfg.sweep_path:  # verified as indices and propagate verify a sweep: its record, its parameter space
        chain.consumed(cfg, cfg.sweep_path, "sweep_path", space=build.space_from(cfg))
    with build.result_set(cfg, "calibrate", [build.repo_path(cfg.observations.path), cfg.sweep_path]) as results:
        if results.complete:
            build.announce_complete(results, "calibrate")
            return results.path(main)
        if cfg.fit:
            fit(cfg, results.staging)
        if cfg.sweep_path:  # resumable: its parts and file live in the run directory, adopted into the set
            results.adopt(step_map(cfg, results.directory, figures=results.staging).name)
        results.publish()
    return results.path(main)


# ----------------------------------------------------------------------------- config -> objects


def solver_from(node: DictConfig):
    """The immutable solver settings of ``cfg.solver``."""
    build.check_choice(node.kind, tuple(SOLVERS), "solver.kind")
    return SOLVERS[node.kind](**settings_from(SOLVERS[node.kind], node))


def starts_from(cfg: DictConfig, space) -> np.ndarray:
    """``[K, n]`` starts: the ``starts`` design, then the nominal point when ``include_nominal``."""
    points = build.grid_from(cfg, space, cfg.starts, "starts").points()
    return np.vstack([points, space.nominal[None, :]]) if cfg.include_nominal else points


# ----------------------------------------------------------------------------- the fit


def fit(cfg: DictConfig, out_dir: Path) -> Path:
    """Calibrate the surrogate of ``cfg`` to ``cfg.observations``; write ``calibration.nc`` (+ step slice, figures)
    into ``out_dir``."""
    import time

    from sensitivity.datasets import index_string_dims, provenance, write_atomic
    from sensitivity.analyses.calibration.observations import check_path, read_observations, with_true_parameters
    from sensitivity.outputs.axes import unstack_output

    space = build.space_from(cfg)
    solver = solver_from(cfg.solver)
    prior_mean, prior_cov = build.prior_from(cfg.prior, space)
    if cfg.prior.from_space:
        log.info("calibrate: prior from the space, %s", _space_prior_words(space))
    log_mask = build.log_mask_from(build.plain(cfg.log_parameters), space)
    starts = starts_from(cfg, space)
    slice_names = slice_parameters_from(cfg.step_slice, space)
    obs_path = check_path(build.repo_path(cfg.observations.path))  # fail before loading the model
    surrogate = build.surrogate_from(cfg, space)
    obs = read_observations(obs_path, surrogate.output)
    if prior_cov is not None and obs.sigma is None and obs.cov is None:
        raise ConfigError(f"`prior`: a prior needs the observations' errors, and observations.path={obs_path} has no "
                          "`sigma` or `cov` variable (the noise is then unknown, estimated from the residuals); add "
                          "one (docs/how-to/observations.md) or drop `prior`")
    jac = build.any_engine(cfg, surrogate, space)
    step_engine = None
    if cfg.step_dtype is not None and cfg.step_dtype != jac.dtype:
        step_engine = build.any_engine(cfg, build.surrogate_from(cfg, space, dtype=cfg.step_dtype), space)
    out = out_dir / "calibration.nc"
    log.info("calibrate: %d starts, %d of %d outputs observed, %s, %s engine (%s, steps %s)", len(starts),
             obs.n_observed, surrogate.output_size, solver, jac.mode, jac.dtype, (step_engine or jac).dtype)
    t0 = time.perf_counter()
    model = BatchedModel.of(jac, step_engine=step_engine)
    observations = ObservationModel.from_arrays(obs.values, **obs.errors(), output_names=surrogate.output.flat_names())
    settings = Fit(solver=solver, rcond=cfg.rcond, level=cfg.level, minima_rtol=cfg.minima_rtol,
                   minima_level=cfg.minima_level, record_history=cfg.record_history,
                   emulator=Emulator(cfg.emulator.iterations, cfg.emulator.tol) if cfg.emulator.enabled else None)
    problem = dict(space=space, log_parameters=log_mask, prior_mean=prior_mean, prior_cov=prior_cov)
    ds = calibrate(model, observations, settings, starts=starts, **problem)  # an ensemble's members too
    seconds = time.perf_counter() - t0
    ds = unstack_output(ds, surrogate.output).assign_coords(
        parameter_long_name=("parameter", np.array([p.long_name for p in space.parameters], dtype=object),
                             {"long_name": "parameter description"}))
    ds = index_string_dims(with_true_parameters(ds, obs.true_parameters))
    attrs = provenance(title=f"Calibration of {surrogate.source} to {obs.path.name}", workflow="calibrate",
                       config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                       surrogate_hash=surrogate.content_hash, seed=cfg.starts.seed, inputs=[obs.path])
    ds.attrs = {**{k: str(v) for k, v in ds.attrs.items() if k != "title"}, **attrs,
                "engine": f"{jac.settings} step_dtype={(step_engine or jac).dtype}",
                "output_variable": surrogate.output.name, "output_long_name": surrogate.output.long_name,
                "fit_seconds": f"{seconds:.3f}"}
    path = write_atomic(ds, out)
    build.log_summary(log, summary(ds), "calibrate: ")
    if cfg.plots:
        build.file_backend()
        from sensitivity.plots.calibration import calibration_figures

        for figure in calibration_figures(path, out_dir):
            log.info("figure: %s", figure.name)
    if cfg.step_slice.enabled and len(space) < 2:
        log.info("step_slice: none, a slice needs two parameters and the space has one")
    elif cfg.step_slice.enabled:
        step_slice_of(cfg, ds, path, jac, obs, space, log_mask, solver, slice_names, surrogate)
    return path


def _space_prior_words(space) -> str:
    """``normal x 25 as they are; lognorm (recharge) by mean and std (...)``: which marginals the Gaussian prior
    of ``prior.from_space`` is exact for."""
    kinds = [p.distribution.scipy_form(p.low, p.high)[0] for p in space.parameters]
    exact = [n for n, k, p in zip(space.names, kinds, space.parameters)
             if k == "norm" and not np.isfinite(p.frozen_distribution().support()).any()]
    other = [f"{k} ({n})" for n, k, p in zip(space.names, kinds, space.parameters) if n not in exact]
    words = ([f"normal x {len(exact)} as they are"] if exact else []) + (
        [", ".join(other) + " by mean and std (a Gaussian with the same first two moments)"] if other else [])
    return "; ".join(words) + ("" if space.correlation is None else ", correlated by space.correlation")


# ----------------------------------------------------------------------------- the step maps


def _has_prior(prior: DictConfig) -> bool:
    """Whether ``cfg.prior`` sets a prior (the step maps leave it out)."""
    return bool(build.plain(prior.std)) or prior.cov is not None or bool(prior.from_space)


def slice_parameters_from(node: DictConfig, space) -> list[str] | None:
    """The two parameters of ``step_slice.parameters`` (checked), or None for the two least identifiable."""
    names = build.plain(node.parameters)
    if names is not None and (len(names) != 2 or len(set(names)) != 2 or any(n not in space.names for n in names)):
        raise ConfigError(f"`step_slice.parameters` must name two different parameters of {space.names}, got {names}")
    if isinstance(node.points, bool) or not isinstance(node.points, int) or node.points < 2:
        raise ConfigError(f"`step_slice.points` must be an integer >= 2, got {node.points!r}")
    if not node.width > 0:
        raise ConfigError(f"`step_slice.width` must be > 0, got {node.width!r}")
    return names


def step_slice_of(cfg: DictConfig, ds, calibration_path: Path, jac, obs, space, log_mask, solver,
                  names: list[str] | None, surrogate) -> Path:
    """The step map on a 2-D slice through the best estimate of ``ds`` -> ``step_slice.nc`` (+ figure), beside
    ``calibration_path``."""
    from sensitivity.analyses.calibration import least_identifiable, slice_box
    from sensitivity.datasets import provenance, write_atomic

    best = int(ds["best_start"])
    center = ds["estimate"].values[best]
    pair = (least_identifiable(*(ds[key].values[best] for key in ("identifiability", "singular_value",
                                                                  "singular_vector")))
            if names is None else (space.index(names[0]), space.index(names[1])))
    box = slice_box(center, space.bounds, pair, cfg.step_slice.width)
    if _has_prior(cfg.prior):
        log.warning("step_slice: the slice ignores the prior (cost and steps of the data misfit only)")
    out = calibration_path.with_name("step_slice.nc")
    log.info("step_slice: %d x %d grid over %s and %s through the best estimate", cfg.step_slice.points,
             cfg.step_slice.points, space.names[pair[0]], space.names[pair[1]])
    model = BatchedModel.of(jac)  # an ensemble's mean
    result = step_slice(model.value_and_jacobian, obs.values, center, pair, box, points=cfg.step_slice.points,
                        **obs.errors(), log_parameters=log_mask, damping=cfg.step_slice.damping, rcond=cfg.rcond,
                        solver=solver, values=model.values)
    sliced = result.to_dataset(space.names, space.units, output_units=surrogate.output.flat_units())
    sliced.attrs.update(provenance(
        title=f"Step map on the {sliced.attrs['slice_parameters']} slice through the best estimate",
        workflow="calibrate", config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
        surrogate_hash=surrogate.content_hash, inputs=[(calibration_path.name, calibration_path), obs.path]))
    path = write_atomic(sliced, out)
    log.info("step_slice: %.0f%% of the grid converges to the best minimum", 100 * result.in_basin.mean())
    if cfg.plots:
        from sensitivity.plots.calibration import step_slice_figure

        log.info("figure: %s", step_slice_figure(path, out.with_name("step_slice.png")).name)
    return path


def step_map(cfg: DictConfig, out_dir: Path, *, figures: Path) -> Path:
    """Gauss-Newton steps at every point of ``cfg.sweep_path`` -> ``out_dir/step_map.nc`` (chunked, resumable: its
    parts stay in ``out_dir``), its figure into ``figures``."""
    from sensitivity.datasets import content_hash, provenance
    from sensitivity.analyses.calibration.observations import read_observations

    if not isinstance(cfg.step_map.block, int) or cfg.step_map.block < 1:
        raise ConfigError(f"`step_map.block` must be an integer >= 1, got {cfg.step_map.block!r}")
    sweep_path = build.repo_path(cfg.sweep_path)  # verified by run()
    with StoredSweep(sweep_path) as sweep:
        names = list(sweep.parameter_names)
        pair = build.plain(cfg.step_map.plot_parameters)
        if pair is not None and (len(pair) != 2 or any(p not in names for p in pair)):
            raise ConfigError(f"`step_map.plot_parameters` must name two of {names}, got {pair}")
        obs = read_observations(build.repo_path(cfg.observations.path), sweep.output)
        if _has_prior(cfg.prior):
            log.warning("step_map: the step map ignores the prior (steps of the data misfit only)")
        out = out_dir / "step_map.nc"
        attrs = provenance(title=f"Gauss-Newton step map of {sweep_path.name} toward {obs.path.name}",
                           workflow="calibrate", config_yaml=build.config_yaml(cfg),
                           surrogate_source=sweep.attrs.get("surrogate"),
                           surrogate_hash=sweep.surrogate_hash,
                           inputs=[sweep_path, obs.path])
        attrs.update(damping=str(cfg.step_map.damping), rcond=str(cfg.rcond))
        note = member_steps_note(sweep)
        if note:
            attrs["member_steps"] = note
        log.info("step_map: %d sweep points in blocks of %d%s", sweep.size, cfg.step_map.block,
                 f"; ensemble members: {note}" if note else "")
        analysis = step_map_analysis(sweep, obs.values, **obs.errors(), damping=cfg.step_map.damping,
                                     rcond=cfg.rcond)
        path = sweep.map_to(out, analysis, fingerprint=build.fingerprint(cfg.step_map, cfg.rcond,
                                                                         content_hash(obs.path)),
                            attrs=attrs, block=cfg.step_map.block, progress=cfg.progress)
    if cfg.plots:
        build.file_backend()
        from sensitivity.plots.calibration import step_map_figure

        log.info("figure: %s", step_map_figure(path, figures / "step_map.png", pair).name)
    return path
