"""Data worth of an ensemble surrogate: the ensemble mean's, each member's, their spread and whether the members rank
the data alike.

:func:`worth_ensemble` evaluates every member at the best fit (and at the posterior draws) once
(:class:`~sensitivity.engine.ensemble.CompiledEnsemble`) and runs the analysis of :mod:`.driver` on the ensemble
mean (values and Jacobians averaged over the members: the surrogate every other analysis uses) and on each member.
Beside each result ``X`` of the mean (forecast values and variances, each parameter's contribution to them, the
worth of every observation and candidate, their posterior-averaged counterparts) it adds ``X_member``,
``X_member_mean``, ``X_surrogate_std`` and ``X_combined_interval``
(:func:`~sensitivity.outputs.members.with_member_spread`: the members treated as draws of
the surrogate's error, Lakshminarayanan et al. 2017, arXiv:1612.01474), each member's greedy designs, and the
verdict the brief of a data-worth study needs: is the ranking of the data robust to the surrogate's error? For each
forecast and each of the candidates (added) and the observations (removed), every member's Spearman rank
correlation of its worth with the ensemble mean's (Spearman 1904, doi:10.2307/1412159) and the member's most
valuable one; the ranking is robust when every correlation reaches ``min_rank_correlation`` and every member
finds the mean's most valuable candidate and observation.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sensitivity.analyses.worth.dataset import FORECAST, worth_dataset
from sensitivity.analyses.worth.driver import Average, analyse, prepare, thinned
from sensitivity.analyses.worth.plan import WorthSettings
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.members import MEMBER, with_member_spread
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")
stats = lazy_import("scipy.stats")

if TYPE_CHECKING:
    from sensitivity.engine.ensemble import CompiledEnsemble

#: The results of a worth dataset that get each member's value and the members' spread (when present).
SPREAD = ("forecast_value", "prior_variance", "posterior_variance", "variance_reduction", "contribution",
          "posterior_variance_parameter_known", "prior_variance_parameter_known", "added_worth", "removed_worth",
          "averaged_prior_variance", "averaged_posterior_variance", "averaged_added_worth", "averaged_removed_worth")
#: The worth whose ranking the verdict compares: ``(kind of ObservationWorth in the analysis, what it ranks)``.
RANKED = (("added", "candidates"), ("removed", "observations"))


def worth_ensemble(ensemble: CompiledEnsemble, space: ParameterSpace, settings: WorthSettings, *,
                   best_fit: np.ndarray, observed_values: np.ndarray, noise: np.ndarray,
                   prior_covariance: np.ndarray | None = None, draws: np.ndarray | None = None,
                   seed: int = 0) -> xr.Dataset:
    """The worth study of the ensemble mean with each member's, their spread and the ranking verdict.

    Parameters are those of :func:`~sensitivity.analyses.worth.driver.worth`, with the compiled ensemble
    (:func:`sensitivity.engine.ensemble.compile_ensemble`) in place of one engine.

    Returns
    -------
    xarray.Dataset
        :func:`~sensitivity.analyses.worth.driver.worth`'s dataset of the ensemble mean, plus for each ``X`` of
        :data:`SPREAD` in it ``X_member``, ``X_member_mean``, ``X_surrogate_std`` and ``X_combined_interval`` (at
        ``settings.level``), ``design_choice_member(member, design, step)``, per ranked worth
        ``{added,removed}_worth_rank_correlation(member, forecast)`` [1] and ``..._best_member(member, forecast)``,
        the verdict ``worth_ranking_robust(forecast)`` and the attribute ``ensemble_members``.
    """
    study, x = prepare(ensemble.surrogate.output, space, settings, best_fit, observed_values, noise,
                       prior_covariance)
    views = _views(*ensemble(x))
    linear = [analyse(study, settings, values, jac, space.names, with_designs=True) for values, jac in views]
    averaged: list[dict | None] = [None] * len(views)
    if draws is not None:
        points = thinned(draws, settings.max_draws)
        averages = [Average(study, settings, space.names) for _ in views]
        for start in range(0, len(points), settings.batch_size):
            for average, (values, jac) in zip(averages, _views(*ensemble(points[start:start + settings.batch_size]))):
                average.add(values, jac)
        averaged = [average.result() for average in averages]
    datasets = [worth_dataset(study, settings, space, one, mean, seed=seed) for one, mean in zip(linear, averaged)]
    return with_member_worth(datasets[0], datasets[1:], linear[0], linear[1:], settings)


def with_member_worth(mean: xr.Dataset, members: list[xr.Dataset], mean_analysis: dict, member_analyses: list[dict],
                      settings: WorthSettings) -> xr.Dataset:
    """``mean`` with every member's results and their spread (:func:`~sensitivity.outputs.members.with_member_spread`
    of :data:`SPREAD`, the surrogate's interval alone: a linear analysis samples nothing), the members' designs and
    the ranking verdict."""
    k = len(members)
    out = with_member_spread(mean, members, settings.level, [n for n in SPREAD if n in mean.data_vars])
    steps = mean.sizes["step"]
    choices = np.full((k, mean.sizes["design"], steps), "", dtype=object)
    for i, m in enumerate(members):  # a member's design that stopped early is padded with ''
        n = min(steps, m.sizes["step"])
        choices[i, :, :n] = m["design_choice"].values[:, :n]
    out["design_choice_member"] = ((MEMBER, "design", "step"), choices,
                                   {"long_name": "the candidate (group) each member's design chooses at each step"})
    robust = np.ones(mean.sizes[FORECAST], dtype=bool)
    for kind, what in RANKED:
        if mean_analysis[kind] is None:
            continue
        correlation, best, agrees = _ranking(mean_analysis[kind], [m[kind] for m in member_analyses])
        robust &= (correlation >= settings.min_rank_correlation).all(axis=0) & agrees.all(axis=0)
        out[f"{kind}_worth_rank_correlation"] = ((MEMBER, FORECAST), correlation, {
            "long_name": f"Spearman rank correlation of each member's worth of the {what} with the ensemble mean's",
            "units": "1"})
        out[f"{kind}_worth_best_member"] = ((MEMBER, FORECAST), best, {
            "long_name": f"the most valuable of the {what} by each member's worth"})
    out["worth_ranking_robust"] = ((FORECAST,), robust.astype(np.int8), {
        "long_name": "every member ranks the candidates and observations as the ensemble mean does", "units": "1",
        "flag_values": np.array([0, 1], np.int8), "flag_meanings": "differs robust",
        "min_rank_correlation": float(settings.min_rank_correlation)})
    return out


def _ranking(mean, members: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[K, F]`` Spearman correlations of each member's worth with the mean's, each member's best group's name,
    and whether it is the mean's best."""
    names = np.asarray(mean.group_names, dtype=object)
    correlation = np.ones((len(members), mean.worth.shape[1]))
    if len(names) > 1:
        for i, member in enumerate(members):
            for f in range(mean.worth.shape[1]):
                correlation[i, f] = stats.spearmanr(mean.worth[:, f], member.worth[:, f]).statistic
    best = np.stack([names[np.argmax(member.worth, axis=0)] for member in members])
    return np.nan_to_num(correlation, nan=-1.0), best, best == names[np.argmax(mean.worth, axis=0)]


def _views(values: np.ndarray, jac: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The ensemble mean's then each member's ``(values [N, *out], jacobians [N, *out, n])`` from ``[K, N, ...]``."""
    return [(values.mean(axis=0), jac.mean(axis=0))] + [(values[k], jac[k]) for k in range(len(values))]
