"""The propagation's config sections and what they read: its methods' settings and the input uncertainty.

Shared by the commands that propagate (``propagate``, ``verify``'s propagation check, ``worth``'s posterior
average), so that no command imports another.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

from omegaconf import DictConfig

from sensitivity.analyses.propagation import MonteCarlo, Propagation, Unscented, Verdict
from sensitivity.settings import HESSIAN_MAX_ROWS
from workflows.plumbing import build
from workflows.plumbing.schema import schema_of

SOURCES = ("space", "calibration", "posterior")


@dataclass
class UncertaintyConf:
    """Where the input uncertainty comes from."""

    source: str = "space"
    path: Optional[str] = None  # calibration result, when source=calibration
    estimate: str = "estimate"  # variable names in that file
    covariance: str = "covariance"
    start: Optional[int] = None  # start of a multi-start calibration (null: its best_start)
    truncate: bool = False  # keep the posterior inside the space's bounds (truncated-normal marginals + copula)


@dataclass
class PropagationConf(schema_of(Propagation, "MethodsConf", keys=("methods", "quantiles", "level")),
                      schema_of(MonteCarlo, "MonteCarloConf"), schema_of(Unscented, "UnscentedConf"),
                      schema_of(Verdict, "VerdictConf", keys=("k_sigma", "rtol"),  # the reference: see _global
                                extra=[("hessian_max_rows", int, HESSIAN_MAX_ROWS)])):  # compile_hessian's max_rows
    """The methods and their settings (:class:`sensitivity.analyses.propagation.Propagation`), one flat section."""


def propagation_from(node: DictConfig, reference: str | None = None) -> Propagation:
    """The immutable settings of the ``propagation`` section (``reference``: the verdict's, None: the default)."""
    def part(settings: type) -> dict:
        return {f.name: build.plain(node[f.name]) for f in fields(settings) if f.name in node}

    return Propagation(methods=tuple(node.methods), quantiles=tuple(node.quantiles), level=float(node.level),
                       unscented=Unscented(**part(Unscented)), monte_carlo=MonteCarlo(**part(MonteCarlo)),
                       verdict=Verdict(**part(Verdict), reference=reference))


@dataclass
class PredictiveConf:
    """MCMC draws whose posterior predictive joins the methods (and becomes the verdict's reference)."""

    path: Optional[str] = None  # a posterior.nc of `posterior`; null: none (propagate=posterior: its own path)


def inputs_from(cfg: DictConfig, space):
    """The input uncertainty of ``cfg.uncertainty`` and the result files it was read from."""
    import numpy as np

    from sensitivity.inputs.uncertainty import gaussian_inputs, inputs_from_space, truncated_gaussian_inputs
    from sensitivity.datasets import read_estimate
    from sensitivity.errors import ConfigError, DataError

    u = cfg.uncertainty
    build.check_choice(u.source, SOURCES, "uncertainty.source")
    if u.source == "space":
        if u.truncate:
            raise ConfigError("`uncertainty.truncate` applies to uncertainty.source=calibration; with the space's "
                              "distributions use `kind: truncnormal`, got truncate=true")
        return inputs_from_space(space), []
    if not u.path:
        raise ConfigError(f"`uncertainty.path` must name a {u.source} result ({u.source}.nc) when "
                          f"uncertainty.source={u.source}, got null")
    if u.source == "posterior":
        from sensitivity.inputs.uncertainty import draws_inputs

        draws = posterior_draws(u.path, space)
        return draws_inputs(draws.values, space.names, space.units, space.bounds), [u.path]
    estimate = read_estimate(u.path, u.estimate, u.covariance, u.start, names=space.names, finite_covariance=False)
    if not np.isfinite(estimate.covariance).all():
        raise DataError(f"uncertainty.path={u.path}: `{u.covariance}` is not finite (a rank-deficient fit: the data "
                        "do not determine every parameter), so there is no Gaussian to propagate; sample the "
                        f"posterior (sensitivity posterior calibration={u.path}) and propagate its draws "
                        "(propagate=posterior uncertainty.path=<its posterior.nc>)")
    if estimate.units is not None and estimate.units != space.units:
        raise DataError(f"{u.path}: parameter units {estimate.units} are not the space's {space.units}")
    make = truncated_gaussian_inputs if u.truncate else gaussian_inputs
    try:
        return make(estimate.mean, estimate.covariance, space=space), [u.path]
    except ConfigError as err:
        raise DataError(f"uncertainty.path={u.path}: {err}") from None


def posterior_draws(path: str, space):
    """The draws of a ``posterior.nc`` in the space's parameter order, checked against its units."""
    from sensitivity.datasets import read_draws
    from sensitivity.errors import DataError

    draws = read_draws(path, space.names)
    if draws.units is not None and draws.units != space.units:
        raise DataError(f"{path}: parameter units {draws.units} are not the space's {space.units}")
    return draws


def unconverged_warning(path: str, space) -> str | None:
    """What a propagation result records when the posterior it draws from failed its convergence checks."""
    draws = posterior_draws(path, space)
    return None if draws.converged else (f"{path}: the chains failed convergence checks ({draws.diagnostics}): the "
                                         "predictive inherits their error")
