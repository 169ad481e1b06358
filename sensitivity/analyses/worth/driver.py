"""The verb of a data-worth study: forecasts, their uncertainty, and the worth of data, on a compiled surrogate.

:func:`worth` linearises the model at the calibration's best fit (exact Jacobians of the observed outputs, the
candidates and the forecasts from the compiled engine) and runs the FOSM analysis of :mod:`.linear`, the
contributions of :mod:`.contributions` and the data worth and greedy designs of :mod:`.data_worth`. Given
posterior draws, it repeats the analysis at each draw with that draw's own Jacobian (in batches) and averages the
forecast variances and the worth over the draws; where the linear posterior standard deviation of a forecast
differs from the averaged one by more than ``rtol``, the forecast is flagged (the linearisation at one point does
not stand for the posterior). On a linear model the two agree exactly.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from sensitivity.analyses.worth.contributions import parameter_contributions
from sensitivity.analyses.worth.data_worth import added_importance, next_most_important, removed_importance
from sensitivity.analyses.worth.dataset import worth_dataset
from sensitivity.analyses.worth.linear import FOSM, fosm
from sensitivity.analyses.worth.plan import Plan, WorthSettings, plan
from sensitivity.analyses.worth.settings import DesignSettings
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.members import member_count
from sensitivity.outputs.spec import OutputSpec
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

if TYPE_CHECKING:
    from sensitivity.engine.jacobian import CompiledJacobian

#: ``points [K, n] -> (values [K, *out], jacobians [K, *out, n])``: a compiled engine, or any such callable.
ValueAndJacobian = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def worth(model: CompiledJacobian, space: ParameterSpace, settings: WorthSettings, *, best_fit: np.ndarray,
          observed_values: np.ndarray, noise: np.ndarray, prior_covariance: np.ndarray | None = None,
          draws: np.ndarray | None = None, seed: int = 0) -> xr.Dataset:
    """Forecast variances, parameter contributions, observation worth and greedy designs at the best fit.

    Parameters
    ----------
    model
        The compiled surrogate (:func:`sensitivity.engine.jacobian.compile_jacobian`); its
        ``surrogate.output`` labels the result.
    space
        The parameter space: names, units, and (without ``prior_covariance``) the prior, its marginals'
        covariance (:meth:`~sensitivity.inputs.space.ParameterSpace.moments`).
    settings
        The study (:class:`~sensitivity.analyses.worth.plan.WorthSettings`).
    best_fit
        ``[n_par]`` the calibration's estimate [parameter units].
    observed_values
        ``[*out]`` observations, NaN where not observed [output units].
    noise
        ``[*out]`` noise standard deviations or ``[m, m]`` covariance of the outputs [output units (squared)].
    prior_covariance
        ``[n_par, n_par]`` the calibration's prior [parameter units squared]; None: the space's.
    draws
        ``[n_draws, n_par]`` posterior draws: adds the posterior-averaged analysis; None: linear only.
    seed
        Unused by the math (it is deterministic: draws are thinned evenly); recorded.

    Returns
    -------
    xarray.Dataset
        See :func:`~sensitivity.analyses.worth.dataset.worth_dataset`.
    """
    if member_count(model):  # an ensemble: the mean's study, each member's, their spread and the ranking verdict
        from sensitivity.analyses.worth.ensemble import worth_ensemble

        return worth_ensemble(model, space, settings, best_fit=best_fit, observed_values=observed_values,
                              noise=noise, prior_covariance=prior_covariance, draws=draws, seed=seed)
    study, x = prepare(model.surrogate.output, space, settings, best_fit, observed_values, noise, prior_covariance)
    values, jac = model(x)
    linear = analyse(study, settings, values, jac, space.names, with_designs=True)
    averaged = None
    if draws is not None:
        averaged = posterior_averaged(model, study, settings, thinned(draws, settings.max_draws), space.names)
    return worth_dataset(study, settings, space, linear, averaged, seed=seed)


def prepare(spec: OutputSpec, space: ParameterSpace, settings: WorthSettings, best_fit: np.ndarray,
            observed_values: np.ndarray, noise: np.ndarray, prior_covariance: np.ndarray | None
            ) -> tuple[Plan, np.ndarray]:
    """The study's plan (:func:`~sensitivity.analyses.worth.plan.plan`: the prior the space's when None) and the
    best fit as one checked point ``[1, n_par]``."""
    prior = space.moments()[1] if prior_covariance is None else np.asarray(prior_covariance, dtype=float)
    noise = np.asarray(noise, dtype=float)
    noise = noise if noise.shape == (spec.size, spec.size) else noise.reshape(-1)
    study = plan(spec, settings, observed_values, noise, prior)
    x = np.asarray(best_fit, dtype=float).reshape(1, -1)
    if x.shape[1] == len(space):  # a fit on a bound of a log-scale parameter comes back from exp(log(bound)):
        low, high = space.bounds.T  # within rounding of the bound, it is the bound
        rounding = 1e-12 * np.maximum(np.abs(low), np.abs(high))
        x = np.where((x < low) & (x >= low - rounding), low, np.where((x > high) & (x <= high + rounding), high, x))
    return study, space.check_points(x, what="best_fit")


def analyse(study: Plan, settings: WorthSettings, values: np.ndarray, jac: np.ndarray, names: list[str], *,
            with_designs: bool) -> dict:
    """The linear analysis at one point: values ``[1, *out]`` and Jacobians ``[1, *out, n]``."""
    forecast, dforecast = study.functionals.apply(values, jac)
    flat, dflat = values.reshape(-1), jac.reshape(values.size, -1)
    labels = study.spec.flat_names()
    problem = fosm(dflat[study.observed], study.prior_covariance, study.noise, dforecast[0].T,
                   parameter_names=names, observation_names=[labels[i] for i in study.observed],
                   forecast_names=study.functionals.names)
    sigma = settings.candidate_sigma + settings.candidate_relative_sigma * np.abs(flat[study.candidates])
    if np.any(sigma <= 0):
        bad = study.spec.flat_names()[study.candidates[int(np.argmin(sigma))]]
        raise ConfigError(f"candidate_sigma: the noise of candidate {bad} is 0 (its value is 0 and candidate_sigma "
                          "is 0); give candidate_sigma > 0")
    candidates = dict(candidates=dflat[study.candidates], candidate_noise=sigma**2,
                      candidate_names=[labels[i] for i in study.candidates], groups=study.candidate_groups)
    result = dict(forecast=forecast[0], problem=problem,
                  removed=removed_importance(problem, study.observation_groups) if study.observed.size else None,
                  added=added_importance(problem, **candidates))
    if with_designs:
        result["contributions"] = parameter_contributions(problem) if len(names) > 1 else None
        result["designs"] = [next_most_important(problem, settings=s, **candidates)
                             for s in _designs(settings.design, problem, len(result["added"].group_names))]
    return result


def posterior_averaged(model: ValueAndJacobian, study: Plan, settings: WorthSettings, draws: np.ndarray,
                       names: list[str]) -> dict:
    """Prior and posterior forecast variances and the worth averaged over ``draws``, each at its own Jacobian."""
    average = Average(study, settings, names)
    for start in range(0, len(draws), settings.batch_size):
        average.add(*model(draws[start:start + settings.batch_size]))
    return average.result()


class Average:
    """The running average over points of the analysis at each point's own Jacobian (no designs)."""

    def __init__(self, study: Plan, settings: WorthSettings, names: list[str]) -> None:
        self.study, self.settings, self.names = study, settings, names
        self.count, self.totals = 0, {}

    def add(self, values: np.ndarray, jac: np.ndarray) -> None:
        """Add the points of ``values [K, *out]`` and ``jac [K, *out, n]``."""
        for k in range(len(values)):
            one = analyse(self.study, self.settings, values[k:k + 1], jac[k:k + 1], self.names, with_designs=False)
            for key, value in (("prior_variance", one["problem"].prior_variance),
                               ("posterior_variance", one["problem"].posterior_variance),
                               ("added_worth", one["added"].worth),
                               ("removed_worth", None if one["removed"] is None else one["removed"].worth)):
                if value is not None:
                    self.totals[key] = self.totals.get(key, 0.0) + value
        self.count += len(values)

    def result(self) -> dict:
        """``n_draws`` and the averages, as :func:`posterior_averaged` returns them."""
        return {"n_draws": self.count, **{key: value / self.count for key, value in self.totals.items()}}


def _designs(design: DesignSettings, problem: FOSM, n_groups: int) -> list[DesignSettings]:
    """The designs to run: one per forecast for the variance criterion with no forecast named, else the one."""
    k = min(design.k, n_groups)
    if design.criterion == "variance" and design.forecast is None:
        return [DesignSettings("variance", k, name) for name in problem.forecast_names]
    return [DesignSettings(design.criterion, k, design.forecast)]


def thinned(draws: np.ndarray, most: int) -> np.ndarray:
    """At most ``most`` rows of ``[n_draws, n_par]`` (or ``[chain, draw, n_par]``) draws, evenly spaced
    (deterministic)."""
    draws = np.asarray(draws, dtype=float)
    if draws.ndim == 3:  # [chain, draw, parameter]
        draws = draws.reshape(-1, draws.shape[-1])
    if draws.ndim != 2 or len(draws) == 0:
        raise ConfigError(f"draws must be [n_draws, n_par] with n_draws >= 1, got shape {draws.shape}")
    return draws if len(draws) <= most else draws[np.linspace(0, len(draws) - 1, most).round().astype(int)]
