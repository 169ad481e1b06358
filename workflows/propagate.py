"""Workflow `propagate`: input uncertainty through a surrogate, four methods side by side -> propagation.nc.

The input uncertainty is the space's distributions (``propagate=space``: marginals joined by a
Gaussian copula with ``space.correlation``) or a calibration result (``propagate=calibration
uncertainty.path=.../calibration.nc``: multivariate normal with its estimate and covariance). With
``pointwise.sweep=.../sweep.nc`` the same input covariance is also propagated linearly through every
stored Jacobian of a sweep (sigma_y at every sweep point) -> local_propagation.nc, without evaluating the model.
With ``posterior.path=.../posterior.nc`` (and always with ``propagate=posterior``) the posterior draws are
pushed through the surrogate as a fifth method, ``posterior``, the verdict's reference. Through an ensemble
surrogate every method also reports each member's mean and standard deviation and their spread
(:func:`sensitivity.analyses.propagation.propagate` does it itself, given the ensemble's engine).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.propagation import pointwise_analysis, propagate
from sensitivity.sweep.stored import StoredSweep
from workflows.plumbing import build, chain
from workflows.plumbing.propagation_settings import (PredictiveConf, PropagationConf, UncertaintyConf, inputs_from,
                                                     posterior_draws, propagation_from, unconverged_warning)
from workflows.plumbing.schema import SurrogateStudyConf, schema_of

log = logging.getLogger(__name__)


PointwiseConf = schema_of(StoredSweep.map_to, "PointwiseConf", keys=("block_size",), rename={"block_size": "block"},
                          extra=[("sweep", Optional[str], None)])  # linear propagation through a stored sweep


@dataclass
class PropagateConf(SurrogateStudyConf):
    uncertainty: UncertaintyConf = field(default_factory=UncertaintyConf)
    propagation: PropagationConf = field(default_factory=PropagationConf)
    pointwise: PointwiseConf = field(default_factory=PointwiseConf)
    posterior: PredictiveConf = field(default_factory=PredictiveConf)
    seed: int = 0
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = PropagateConf


def run(cfg: DictConfig) -> Path:
    """Run the propagation described by ``cfg``; return the path of ``propagation.nc``
    (``local_propagation.nc`` when only pointwise propagation was asked for)."""
    from sensitivity.inputs.uncertainty import SAMPLERS
    from sensitivity.analyses.propagation import METHODS
    from sensitivity.errors import ConfigError

    methods = list(cfg.propagation.methods)
    for method in methods:
        build.check_choice(method, METHODS, "propagation.methods")
    build.check_choice(cfg.propagation.sampler, SAMPLERS, "propagation.sampler")
    if not methods and not cfg.pointwise.sweep:
        raise ConfigError("nothing to do: `propagation.methods` is empty and `pointwise.sweep` is null")
    space = build.space_from(cfg)
    for key in ("uncertainty.path", "posterior.path", "pointwise.sweep"):  # verified and from this space
        if OmegaConf.select(cfg, key):
            chain.consumed(cfg, OmegaConf.select(cfg, key), key, space=space)
    inputs, sources = inputs_from(cfg, space)
    log.info("propagate: inputs %s%s", inputs.description, f" from {sources[0]}" if sources else "")
    main = "propagation.nc" if methods else "local_propagation.nc"
    with build.result_set(cfg, "propagate", [cfg.uncertainty.path, cfg.posterior.path, cfg.pointwise.sweep]) as results:
        if results.complete:
            build.announce_complete(results, "propagate")
            return results.path(main)
        if methods:
            _global(cfg, space, inputs, sources, results.staging)
        if cfg.pointwise.sweep:  # resumable: its parts and file live in the run directory, adopted into the set
            results.adopt(_pointwise(cfg, inputs, sources, results.directory).name)
        results.publish()
    return results.path(main)


def with_replicate_plan(ds, p: DictConfig):
    """``ds`` with one recorded warning when Monte Carlo ran another number of samples or replicates than
    configured (whole replicates of equal size: a power of two each for Sobol', within ``max_bytes``)."""
    from sensitivity.datasets.summary import with_warning

    ran = ds.attrs.get("monte_carlo_n_samples"), ds.attrs.get("monte_carlo_n_replicates")
    if ran[0] is None or ran == (p.n_samples, p.n_replicates):
        return ds
    sobol = p.sampler == "sobol"
    return with_warning(ds, f"monte_carlo ran {ran[0]} samples in {ran[1]} replicates of {ran[0] // ran[1]}, not "
                            f"propagation.n_samples={p.n_samples} in propagation.n_replicates={p.n_replicates} (whole "
                            f"replicates of equal size{', a power of two each for sampler=sobol' if sobol else ''}); "
                            f"give n_samples = n_replicates x {'a power of two' if sobol else 'a whole number'} to "
                            "run exactly what is asked")


def _global(cfg: DictConfig, space, inputs, sources: list[str], out_dir: Path) -> Path:
    """All configured methods on the compiled surrogate -> ``out_dir/propagation.nc`` (+ figure)."""
    from sensitivity.datasets import provenance, write_atomic
    from sensitivity.datasets.summary import with_warning
    from sensitivity.engine.hessian import hessian_of

    surrogate = build.surrogate_from(cfg, space)
    for key in ("uncertainty.path", "posterior.path"):  # computed with this surrogate
        if OmegaConf.select(cfg, key):
            chain.consumed(cfg, OmegaConf.select(cfg, key), key, surrogate_hash=surrogate.content_hash)
    engine = build.any_engine(cfg, surrogate, space)
    p, spec = cfg.propagation, surrogate.output
    hessian = hessian_of(engine, max_rows=p.hessian_max_rows) if "second_order" in p.methods else None
    inputs_path = cfg.uncertainty.path if cfg.uncertainty.source == "posterior" else None
    draws_path = cfg.posterior.path or inputs_path
    draws = None
    if draws_path:
        stacked = posterior_draws(draws_path, space)
        draws = stacked.values.reshape(stacked.n_chains, -1, len(space.names))
        sources = list(dict.fromkeys([*sources, draws_path]))
    # the posterior predictive judges the methods only when they propagate an approximation of that posterior
    reference = "posterior" if draws is not None and cfg.uncertainty.source != "space" else "monte_carlo"
    if draws is not None and reference != "posterior":
        log.info("propagate: the posterior predictive of %s stands beside the space's distributions, a different "
                 "input uncertainty, so the verdict's reference is monte_carlo (propagate=calibration or "
                 "propagate=posterior judges the methods against it)", draws_path)
    settings = propagation_from(p, reference)
    # an ensemble's: every method's mean and std per member too, the same samples through all members
    ds = propagate(BatchedModel.of(engine, hessian=hessian), inputs, settings, seed=cfg.seed, draws=draws)
    ds = with_replicate_plan(ds, p)
    if reference == "posterior":
        ds["nonlinear"].attrs["verdict_reference_description"] += f" of {draws_path} (prior: {stacked.prior})"
    ds.attrs.update(provenance(title=f"uncertainty propagation through {surrogate.source}", workflow="propagate",
                               config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                               surrogate_hash=surrogate.content_hash, seed=cfg.seed, inputs=sources,
                               settings=settings),
                    input_source=_describe(cfg), output_variable=spec.name, output_long_name=spec.long_name)
    for path in dict.fromkeys(p for p in (inputs_path, draws_path) if p):
        if (warning := unconverged_warning(path, space)) is not None:
            ds = with_warning(ds, warning)
    out = write_atomic(ds, out_dir / "propagation.nc")
    _log_verdict(ds, cfg.uncertainty.source == "calibration" and not cfg.uncertainty.truncate)
    if cfg.plots:
        build.file_backend()
        from sensitivity.plots.propagation import propagation_figure

        log.info("figure: %s", propagation_figure(out, out_dir / "propagation.png").name)
    return out


def _pointwise(cfg: DictConfig, inputs, sources: list[str], out_dir: Path) -> Path:
    """Linear sigma_y at every point of a stored sweep -> ``out_dir/local_propagation.nc`` (resumable)."""
    from sensitivity.datasets import provenance

    with StoredSweep(cfg.pointwise.sweep) as sweep:
        attrs = provenance(title=f"local linear propagation over the sweep {cfg.pointwise.sweep}",
                           workflow="propagate", config_yaml=build.config_yaml(cfg),
                           surrogate_source=sweep.attrs.get("surrogate"), surrogate_hash=sweep.surrogate_hash,
                           seed=cfg.seed, inputs=[cfg.pointwise.sweep, *sources])
        attrs.update(input_source=_describe(cfg), input_distribution=inputs.description)
        key = build.fingerprint(inputs.names, inputs.covariance.tolist())
        out = sweep.map_to(out_dir / "local_propagation.nc", pointwise_analysis(sweep, inputs), attrs=attrs,
                           fingerprint=key, block=cfg.pointwise.block_size, progress=cfg.progress)
    return out


def _describe(cfg: DictConfig) -> str:
    u = cfg.uncertainty
    if u.source == "space":
        return "space: space.parameters[*].distribution joined by a Gaussian copula with space.correlation"
    if u.source == "posterior":
        return (f"posterior draws {u.path}: Monte Carlo resamples them, `posterior` evaluates every draw (the "
                "posterior predictive)")
    kind = "truncated to the bounds" if u.truncate else "normal"
    return (f"calibration {u.path}: `{u.estimate}`, `{u.covariance}`, start {'best' if u.start is None else u.start}, "
            f"{kind}")


def _log_verdict(ds, can_truncate: bool) -> None:
    """Log the propagation's summary (:func:`sensitivity.analyses.propagation.summary.summary`), and where model
    evaluations left the bounds of a calibration's normal inputs, how to keep them inside."""
    from sensitivity.analyses.propagation.summary import summary

    found = summary(ds)
    build.log_summary(log, found, "propagate: ")
    if can_truncate and any("outside the parameter bounds" in w for w in found.warnings):
        log.info("propagate: uncertainty.truncate=true keeps the draws inside the parameter bounds")
