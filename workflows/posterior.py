"""Workflow `posterior`: the calibration's posterior by NUTS with exact gradients -> posterior.nc.

The posterior of the calibration problem (same surrogate, observations and prior) is sampled by many TensorFlow
Probability NUTS chains at once, started from the calibration's distinct minima and overdispersed draws of its
Laplace approximation, which also preconditions the sampler (a rank-deficient calibration has none: then the extra
starts are uniform over the bounds, and the warm-up alone sets the sampler's metric; where the Gaussian
approximation fails outright, the posterior is what remains). The prior is the calibration's own (``prior_source:
calibration``, the default: the Gaussian ``prior.*`` it was fitted with, or flat within the bounds), so the
posterior and its Laplace approximation describe one target; or the space's marginals (``prior_source: space``;
without the space's correlation, with a warning), or flat within the bounds (``prior_source: flat``). Convergence
checks that fail are logged as warnings and recorded in the file; chains that do not mix, or a stuck chain (far below
the others' log density, named with it), end the run with an error. The chains start only at the calibration's
minima, never at its rejected starts (converged far above the best fit, e.g. held on a bound).
On an ensemble surrogate the likelihood is the members' mean with their predictive variance added to the observation
covariance (``emulator_variance``, Kennedy & O'Hagan 2001).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import numpy as np
from omegaconf import DictConfig, OmegaConf

from workflows.plumbing import build, chain
from sensitivity.analyses.posterior import NUTS, Sampling, initial_points, sample_posterior
from sensitivity.analyses.posterior.summary import summary
from sensitivity.runtime.progress import progress_bar
from workflows.plumbing.schema import ObservationsConf, PriorConf, SurrogateStudyConf, schema_of

log = logging.getLogger(__name__)


NUTSConf = schema_of(NUTS, "NUTSConf")
@dataclass
class RunConf(schema_of(sample_posterior, "PosteriorRunConf", keys=("seed", "model_dtype")),
              schema_of(Sampling, "SamplingConf", keys=("throw", "jit_compile", "stuck_level"))):
    """The run's seed and model dtype, and the sampling settings but the sampler (``nuts``)."""
StartsConf = schema_of(initial_points, "PosteriorStartsConf", keys=("spread",),
                       extra=[("n_chains", int, 16)])  # 16 measured best on 2 CPU cores (benchmarks/bench_sampling.py)


@dataclass
class PosteriorConf(RunConf, StartsConf, SurrogateStudyConf):
    calibration: str = "???"
    observations: ObservationsConf = field(default_factory=ObservationsConf)
    prior: PriorConf = field(default_factory=PriorConf)
    prior_source: str = "calibration"  # calibration (its own prior) | space (the space's marginals) | flat
    emulator_variance: bool = True  # an ensemble surrogate: its members' predictive variance in the likelihood
    log_parameters: Optional[List[str]] = None
    nuts: NUTSConf = field(default_factory=NUTSConf)
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = PosteriorConf


def _advise_chain_groups(sampler, n_chains: int) -> None:
    """Log a hint when NUTS runs ``n_chains >= 8`` chains as one group on a CPU of several cores and no GPU."""
    import os

    import tensorflow as tf

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if sampler.algorithm != "nuts" or sampler.chain_groups > 1 or n_chains < 8 or cores < 2 or \
            tf.config.list_physical_devices("GPU"):
        return
    groups = min(cores, n_chains // 4)
    log.info("posterior: the %d chains advance as one batched call, which keeps about 1.3 CPU cores busy; on this "
             "CPU's %d cores nuts.chain_groups=%d would run them side by side (0.47-0.61x the time on 2 cores, "
             "docs/performance.md)", n_chains, cores, groups)


def run(cfg: DictConfig) -> Path:
    """Sample the posterior of the calibration ``cfg.calibration``; return the path of ``posterior.nc``."""
    from sensitivity.errors import ConfigError
    from sensitivity.analyses.calibration.observations import check_path

    for key in ("calibration", "observations.path"):
        if OmegaConf.is_missing(cfg, key) if key == "calibration" else OmegaConf.is_missing(cfg.observations, "path"):
            raise ConfigError(f"`{key}` is required (sensitivity posterior calibration=.../calibration.nc "
                              "observations.path=...)")
    space = build.space_from(cfg)
    obs_path = check_path(build.repo_path(cfg.observations.path))
    calibration = chain.consumed(cfg, check_path(build.repo_path(cfg.calibration)), "calibration",
                                 observations=obs_path, space=space)
    with build.result_set(cfg, "posterior", [calibration, obs_path]) as results:
        if results.complete:
            build.announce_complete(results, "posterior")
            return results.path("posterior.nc")
        _sample(cfg, space, calibration, obs_path, results.staging)
        results.publish()
    return results.path("posterior.nc")


def _sample(cfg: DictConfig, space, calibration: Path, obs_path: Path, out_dir: Path) -> Path:
    """Sample the posterior of ``calibration`` -> ``out_dir/posterior.nc`` (+ figures)."""
    import warnings

    from sensitivity.analyses.calibration import ObservationModel
    from sensitivity.analyses.posterior import PosteriorWarning, Support
    from sensitivity.datasets import content_hash, provenance, read_estimate, write_atomic
    from sensitivity.analyses.calibration.observations import read_observations

    laplace = read_estimate(calibration, names=space.names, finite_covariance=False)
    covariance = laplace.covariance if np.isfinite(laplace.covariance).all() else None
    if covariance is None:
        log.warning("posterior: %s has no covariance (a rank-deficient fit: the data do not determine every "
                    "parameter); the chains start at its minima and uniformly over the bounds, and the sampler's "
                    "metric comes from the warm-up alone", calibration.name)
    minima = build.calibration_minima(calibration, space.names)
    prior = prior_of(cfg, space, calibration)
    log_mask = build.log_mask_from(build.plain(cfg.log_parameters), space)
    sampler = NUTS(**build.plain(cfg.nuts))
    surrogate = build.surrogate_from(cfg, space, dtype=cfg.model_dtype)
    chain.consumed(cfg, calibration, "calibration", surrogate_hash=surrogate.content_hash)
    obs = read_observations(obs_path, surrogate.output)
    observations = ObservationModel.from_arrays(obs.values, **obs.errors(), output_names=surrogate.output.flat_names())
    members = surrogate.member_fn if surrogate.n_members > 1 and cfg.emulator_variance else None
    if members is not None:
        log.info("posterior: the %d-member ensemble's predictive variance joins the observation covariance",
                 surrogate.n_members)
    support = Support.of(space.bounds, log_mask, len(space), space.names)
    start = initial_points(minima, support.interior(laplace.mean), covariance, support, cfg.n_chains,
                           spread=cfg.spread, seed=cfg.seed)
    out = out_dir / "posterior.nc"
    log.info("posterior: %d NUTS chains x (%d warm-up + %d draws), %d distinct minima, prior %s", cfg.n_chains,
             sampler.num_warmup, sampler.num_draws, len(minima), prior.description())
    _advise_chain_groups(sampler, cfg.n_chains)
    transitions = cfg.n_chains * (sampler.num_warmup + sampler.num_draws)
    with warnings.catch_warnings(record=True) as caught, \
            progress_bar(transitions, desc="NUTS", unit="step", enabled=cfg.progress) as bar:
        warnings.simplefilter("always", PosteriorWarning)
        settings = Sampling(sampler=sampler, throw=cfg.throw, jit_compile=cfg.jit_compile,
                            stuck_level=cfg.stuck_level)
        ds = sample_posterior(surrogate.fn, observations, settings, prior=prior, initial=start, space=space,
                              log_parameters=log_mask, laplace_mean=laplace.mean, laplace_cov=covariance,
                              seed=cfg.seed, model_dtype=cfg.model_dtype, members=members, output=surrogate.output,
                              progress=bar.update)
    for warning in caught:  # the chains' convergence is the summary's, from the dataset (logged below)
        if not issubclass(warning.category, PosteriorWarning):
            log.warning("%s", warning.message)
    ds = ds.assign_coords(parameter_long_name=("parameter", np.array([p.long_name for p in space.parameters], object),
                                               {"long_name": "parameter description"}))
    attrs = provenance(title=f"Posterior of the calibration {calibration.name} by NUTS", workflow="posterior",
                       config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                       surrogate_hash=surrogate.content_hash, seed=cfg.seed, inputs=[calibration, obs.path])
    ds.attrs = {**ds.attrs, **attrs, "calibration": str(calibration), "calibration_hash": content_hash(calibration),
                "prior_source": cfg.prior_source}
    path = write_atomic(ds, out)
    build.log_summary(log, summary(ds), "posterior: ")
    if cfg.plots:
        from sensitivity.plots.posterior import posterior_figures

        for figure in posterior_figures(path, out_dir):
            log.info("figure: %s", figure.name)
    return path


PRIOR_SOURCES = ("calibration", "space", "flat")


def prior_of(cfg: DictConfig, space, calibration: Path):
    """The posterior's prior: the calibration's (``prior_source=calibration``), the space's marginals or flat.

    ``prior.*`` given here must be the prior the calibration was fitted with (one target for the fit, its
    Laplace approximation and the posterior); with ``prior_source`` space or flat it must be unset.
    """
    from sensitivity.analyses.posterior import check_prior_families, flat_prior, gaussian_prior, space_prior
    from sensitivity.datasets import read_prior
    from sensitivity.errors import ConfigError

    build.check_choice(cfg.prior_source, PRIOR_SOURCES, "prior_source")
    given = build.prior_from(cfg.prior, space)
    if cfg.prior_source == "space":
        check_prior_families(space)  # every family has a TF log-density: refused here, before TensorFlow loads
    if cfg.prior_source != "calibration":
        if given[0] is not None:
            raise ConfigError(f"`prior.*` sets a Gaussian prior, but prior_source={cfg.prior_source}: give one of them")
        if cfg.prior_source == "space" and space.correlation is not None:
            log.warning("posterior: prior_source=space takes the space's marginals only; its `space.correlation` (a "
                        "Gaussian copula for propagation and the indices) is not part of the prior")
        return space_prior(space) if cfg.prior_source == "space" else flat_prior()
    recorded = read_prior(calibration, space.names)
    if given[0] is not None and (recorded is None or not all(
            np.allclose(a, b, rtol=1e-12, atol=0) for a, b in zip(given, recorded))):
        raise ConfigError(f"`prior.*` differs from the prior {calibration.name} was fitted with "
                          f"({'none' if recorded is None else 'another Gaussian'}): calibrate with this prior, or "
                          "leave prior.* unset to sample the calibration's own")
    return flat_prior() if recorded is None else gaussian_prior(*recorded)


