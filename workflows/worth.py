"""Workflow `worth`: what to measure next after a calibration: forecast uncertainty and the worth of data -> worth.nc.

At the calibration's best fit (``calibration=.../calibration.nc``, fitted to ``observations.path``), the compiled
surrogate's exact Jacobian linearises the model, and :func:`sensitivity.analyses.worth.worth` computes the prior and
posterior variance of each forecast (``forecasts``: functionals of the outputs, :mod:`sensitivity.outputs.functionals`),
each parameter's contribution to it, the worth of every observation (removed) and of every candidate (an output not
observed, with noise ``candidate_sigma + candidate_relative_sigma |y|``), and a greedy design of the next
``design.k`` observations. The prior is the calibration's own (``prior_source: calibration``; the space's
distributions when it was fitted without one) or the space's (``prior_source: space``); the noise is the
observation file's ``sigma`` or ``cov``. With ``posterior.path=.../posterior.nc`` the same analysis is averaged over
the NUTS draws (at most ``max_draws``, each at its own Jacobian) and each forecast gets a verdict: does the linear
answer at the best fit stand for the posterior? On an ensemble surrogate the analysis is the ensemble mean's with
each member's, their spread and a verdict per forecast: do the members rank the candidates and observations as the
mean does (:func:`sensitivity.analyses.worth.worth_ensemble`)? Every check that needs no model (a forecast over an unknown dim, a
candidate already observed, a singular prior, missing noise) fails in one line before the model loads.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sensitivity.analyses.worth import WorthSettings, worth
from sensitivity.errors import ConfigError, DataError
from workflows.plumbing import build, chain
from workflows.plumbing.propagation_settings import PredictiveConf
from workflows.plumbing.schema import ObservationsConf, SurrogateStudyConf, schema_of

log = logging.getLogger(__name__)


SettingsConf = schema_of(WorthSettings, "WorthSettingsConf", keys=(
    "forecasts", "candidates", "candidate_sigma", "candidate_relative_sigma", "group_observations_by",
    "group_candidates_by", "max_draws", "batch_size", "rtol", "level", "min_rank_correlation"))
DesignConf = schema_of(WorthSettings().design, "DesignConf")  # WorthSettings' own default design
RunConf = schema_of(worth, "WorthRunConf", keys=("seed",))

#: Where the prior comes from: the calibration's (the space's when it had none), or the space's distributions.
PRIOR_SOURCES = ("calibration", "space")


@dataclass
class WorthConf(RunConf, SettingsConf, SurrogateStudyConf):
    calibration: str = "???"
    observations: ObservationsConf = field(default_factory=ObservationsConf)
    posterior: PredictiveConf = field(default_factory=PredictiveConf)  # its draws: the posterior-averaged analysis
    prior_source: str = "calibration"  # calibration (its prior, else the space's) | space (the space's moments)
    design: DesignConf = field(default_factory=DesignConf)
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = WorthConf


def check(cfg: DictConfig) -> tuple[Any, WorthSettings]:
    """Check the settings that need neither the calibration nor the model (``sensitivity run`` checks its worth
    stage with it before the study's first stage); return ``(space, settings)``."""
    from sensitivity.outputs.functionals import resolve
    from sensitivity.outputs.spec import OutputSpec

    build.check_choice(cfg.prior_source, PRIOR_SOURCES, "prior_source")
    space = build.space_from(cfg)
    settings = build.settings(WorthSettings, cfg, design=build.plain(cfg.design))
    declared = OmegaConf.select(cfg, "model.output", default=None)
    if declared is not None:  # the model's outputs are in the config: the forecasts are checked against them now
        resolve(settings.forecasts, OutputSpec.from_dict(build.plain(declared)))
    return space, settings


def run(cfg: DictConfig) -> Path:
    """Run the data-worth study of ``cfg``; return the path of ``worth.nc``."""
    from sensitivity.analyses.calibration.observations import check_path

    for key in ("calibration", "observations.path"):
        if OmegaConf.is_missing(cfg, key) if key == "calibration" else OmegaConf.is_missing(cfg.observations, "path"):
            raise ConfigError(f"`{key}` is required (sensitivity worth calibration=.../calibration.nc "
                              "observations.path=...)")
    space, settings = check(cfg)
    obs_path = check_path(build.repo_path(cfg.observations.path))
    calibration = chain.consumed(cfg, cfg.calibration, "calibration", observations=obs_path, space=space)
    draws_path = cfg.posterior.path and chain.consumed(cfg, cfg.posterior.path, "posterior.path", space=space)
    problem = _problem(cfg, space, settings, calibration, obs_path, draws_path)
    with build.result_set(cfg, "worth", [calibration, obs_path, draws_path]) as results:
        if results.complete:
            build.announce_complete(results, "worth")
            return results.path("worth.nc")
        _compute(cfg, space, settings, problem, results.staging)
        results.publish()
    return results.path("worth.nc")


def _problem(cfg: DictConfig, space, settings: WorthSettings, calibration: Path, obs_path: Path,
             draws_path: Path | None) -> dict[str, Any]:
    """The verb's arrays, read and checked by its plan (:func:`sensitivity.analyses.worth.plan.plan`) before the
    model loads: best fit, observations, noise, prior covariance and the draws."""
    from sensitivity.analyses.calibration.observations import read_observations
    from sensitivity.analyses.worth.plan import plan
    from sensitivity.datasets import read_draws, read_estimate, read_prior

    spec = _output_spec(calibration)
    obs = read_observations(obs_path, spec)
    noise = obs.cov if obs.cov is not None else obs.sigma
    if noise is None:
        raise DataError(f"observations.path={obs_path}: no `sigma` or `cov` variable, and the worth of data needs the "
                        "observations' noise (docs/how-to/observations.md)")
    recorded = read_prior(calibration, space.names) if cfg.prior_source == "calibration" else None
    prior = recorded[1] if recorded is not None else space.moments()[1]
    log.info("worth: prior %s", "the calibration's Gaussian" if recorded is not None else
             "the space's distributions (mean and std of each marginal" +
             (", the calibration had none)" if cfg.prior_source == "calibration" else ")"))
    plan(spec, settings, obs.values, noise, prior)
    draws = None
    if draws_path:
        found = read_draws(draws_path, space.names)
        if not found.converged:
            log.warning("worth: the chains of %s failed convergence checks (%s); the posterior-averaged analysis "
                        "uses them anyway", draws_path, found.diagnostics)
        draws = found.values
    return dict(best_fit=read_estimate(calibration, names=space.names, finite_covariance=False).mean,
                observed_values=obs.values, noise=noise, prior_covariance=prior, draws=draws, spec=spec)


def _output_spec(calibration: Path):
    """The model's outputs as the calibration recorded them (its ``model_output`` on the output dims)."""
    from sensitivity.datasets import open_result
    from sensitivity.datasets.build import output_spec_from

    with open_result(calibration) as ds:
        if "model_output" not in ds.data_vars or "start" not in ds["model_output"].dims:
            raise DataError(f"calibration={calibration}: no `model_output` on (start, *outputs): not a calibration")
        name = str(ds.attrs.get("output_variable") or "model_output")
        spec = output_spec_from(ds[["model_output"]].rename({"start": "sample", "model_output": name}), exclude=())
        return dataclasses.replace(spec, long_name=str(ds.attrs.get("output_long_name", spec.long_name)))


def _compute(cfg: DictConfig, space, settings: WorthSettings, problem: dict, out_dir: Path) -> Path:
    """The verb on the compiled surrogate -> ``out_dir/worth.nc`` (+ figures)."""
    import time

    from sensitivity.analyses.worth import summary
    from sensitivity.datasets import content_hash, provenance, write_atomic

    surrogate = build.surrogate_from(cfg, space)
    chain.consumed(cfg, cfg.calibration, "calibration", surrogate_hash=surrogate.content_hash)
    if surrogate.output.flat_names() != problem["spec"].flat_names():
        raise DataError(f"calibration={cfg.calibration}: its outputs {problem['spec'].flat_names()[:3]}... are not "
                        f"the model's {surrogate.output.flat_names()[:3]}... ({surrogate.source})")
    engine = build.any_engine(cfg, surrogate, space)  # an ensemble's members: each one's worth, their spread
    if surrogate.n_members > 1:
        log.info("worth: the %d-member ensemble's mean, then each member, from one evaluation of all members",
                 surrogate.n_members)
    draws = problem["draws"]
    log.info("worth: %d forecasts, %s engine (%s)%s", len(settings.forecasts), engine.mode, engine.dtype,
             "" if draws is None else f", averaged over at most {settings.max_draws} of {len(draws)} posterior draws")
    t0 = time.perf_counter()
    ds = worth(engine, space, settings, best_fit=problem["best_fit"], observed_values=problem["observed_values"],
              noise=problem["noise"], prior_covariance=problem["prior_covariance"], draws=draws, seed=cfg.seed)
    seconds = time.perf_counter() - t0
    inputs = [Path(cfg.calibration), Path(cfg.observations.path), *([Path(cfg.posterior.path)] if draws is not None
                                                                     else [])]
    ds.attrs.update(provenance(title=f"Forecast uncertainty and data worth of {surrogate.source}", workflow="worth",
                               config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                               surrogate_hash=surrogate.content_hash, seed=cfg.seed,
                               inputs=[build.repo_path(p) for p in inputs]))
    ds.attrs.update(calibration=str(cfg.calibration), calibration_hash=content_hash(build.repo_path(cfg.calibration)),
                    prior_source=cfg.prior_source, analysis_seconds=f"{seconds:.3f}")
    path = write_atomic(ds, out_dir / "worth.nc")
    log.info("worth: %d observed, %d candidates in %.2f s", ds.attrs["n_observed"], ds.attrs["n_candidates"], seconds)
    build.log_summary(log, summary(ds), "worth: ")
    if cfg.plots:
        build.file_backend()
        from sensitivity.plots.worth import worth_figures

        for figure in worth_figures(path, out_dir):
            log.info("figure: %s", figure.name)
    return path
