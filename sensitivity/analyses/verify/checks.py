"""The simulator run at the points an analysis depends on, and the surrogate's error there against the analysis's
own uncertainty: one verdict per analysis.

Each check takes the simulator and the surrogate as batched maps on flat outputs (``[P, n] -> [P, m]``) and the
analysis's own numbers (arrays the caller read from its result), runs the simulator only at those points, and
returns a labeled dataset on a flat ``output`` axis with ``<prefix>_flag`` variables (why a value is flagged,
:mod:`.verdict`) and a ``<prefix>_verdict`` (1 holds: nothing flagged, 0 fails; 2 inconclusive: a check from a
sample that could not have seen a factor-2 error, :mod:`sensitivity.analyses.agreement`). A value is flagged only
when the surrogate's error exceeds both the analysis's own uncertainty and an absolute tolerance
(:class:`~.verdict.VerdictSettings`), or changes a conclusion; a non-finite value is always flagged. The error
is the surrogate's minus the simulator's. Where an ensemble's members are given, each member's error beside the
ensemble's and their spread (``X_member``, ``X_surrogate_std``, ``X_combined_interval`` of the error ``X``:
:func:`sensitivity.outputs.members.spread_variables`) show whether the ensemble knew. Given the model's output spec
(``output``), every variable on ``output`` is put on the model's own dims, labelled and in its units
(:func:`labelled`).

``calibration`` (points: the best fit, then the other distinct minima)
    The surrogate error ``e`` at the best fit moves the estimate by ``dx = (J_w^T J_w)^{-1} J_w^T W e`` (the
    Gauss-Newton step a fit to the simulator's outputs would take from there; ``W`` the whitening, ``J_w`` the
    whitened Jacobian): the verdict holds when ``|dx_j| <= se_j`` for every parameter, the shift below the
    estimate's standard error (or the absolute floor).
``posterior`` (points: a subset of the draws)
    Importance weights ``w_i ~ L_sim(x_i) / L_sur(x_i)`` (the same prior cancels) turn the draws of the
    surrogate's posterior into draws of the simulator's; the verdict holds when the reweighted mean moves less
    than the posterior's Monte Carlo standard error of the mean (or the absolute floor) in every parameter. The
    weights' effective sample size is reported too (a small one: the posteriors differ more than the subset can
    tell).
``sobol`` (points: the first base rows of the Sobol' design)
    The first and total indices on those rows from the simulator's and the surrogate's values, paired (the same
    rows, so the design's sampling error cancels): the verdict holds when every ``|S_sur - S_sim|`` is below the
    half-width of the index's sampling interval on the full design or the absolute tolerance, and the surrogate
    keeps the ranking of the influential inputs and the side of the threshold of importance each is on.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from sensitivity.analyses.agreement import VERDICT
from sensitivity.analyses.calibration import ObservationModel
from sensitivity.analyses.indices import sobol
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.analyses.verify.verdict import FLAGS, VerdictSettings, index_flags, shift_flags
from sensitivity.errors import DataError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.axes import flat_coords, unstack_output
from sensitivity.outputs.labels import axis_units_attrs
from sensitivity.outputs.members import with_member_spread
from sensitivity.outputs.spec import OutputSpec
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: A batched map on flat outputs: ``[P, n]`` points -> ``[P, m]`` values.
FlatFn = Callable[[np.ndarray], np.ndarray]
#: An ensemble's members on flat outputs: ``[P, n]`` points -> ``[K, P, m]`` values.
MembersFn = Callable[[np.ndarray], np.ndarray]


def verify_calibration(simulate: FlatFn, surrogate: FlatFn, jacobian: np.ndarray, points: np.ndarray,
                       standard_error: np.ndarray, observations: ObservationModel, *,
                       members: MembersFn | None = None, floor: np.ndarray | None = None,
                       output: OutputSpec | None = None, level: float = 0.95) -> xr.Dataset:
    """The surrogate's error at a calibration's best fit and minima, and the shift it makes in the estimate.

    Parameters
    ----------
    simulate, surrogate
        ``[P, n] -> [P, m]``.
    jacobian
        ``[m, n]`` the surrogate's Jacobian at the best fit (``points[0]``).
    points
        ``[P, n]`` the best fit, then the other distinct minima.
    standard_error
        ``[n]`` the best fit's standard errors.
    observations
        The calibration's observations and their whitening.
    members
        An ensemble's members ``[P, n] -> [K, P, m]``: their errors and spread beside the ensemble's.
    floor
        ``[n]`` absolute shift below which no parameter is flagged [parameter units]
        (:meth:`VerdictSettings.shift_floor`); None: the standard error alone.
    output
        The model's output spec: the outputs on its dims, labelled, in its units (None: a flat ``output`` axis).
    level
        Probability of the members' combined interval.

    Returns
    -------
    xarray.Dataset
        ``calibration_point(fit_point, parameter)``, ``calibration_surrogate_error(fit_point, output)``,
        ``calibration_whitened_error_rms(fit_point)``, ``calibration_estimate_shift(parameter)``,
        ``calibration_standard_error(parameter)``, ``calibration_shift_ratio(parameter)`` (``|dx| / se``),
        ``calibration_flag(parameter)`` (:data:`~.verdict.ERROR`: ``|dx| > max(se, floor)``) and
        ``calibration_verdict`` (no flag); with ``members`` ``calibration_surrogate_error_member``,
        ``_member_mean``, ``_surrogate_std`` and ``_combined_interval`` (:func:`with_members`).
    """
    points = np.atleast_2d(np.asarray(points, float))
    truth, approx = _values(simulate, points), _values(surrogate, points)
    error = approx - truth
    whitened = observations.residual(approx) - observations.residual(truth)  # W e, observed outputs only
    j_w = observations.jacobian(np.asarray(jacobian, float)[None])[0]
    shift = np.linalg.lstsq(j_w, whitened[0], rcond=None)[0]
    se = np.asarray(standard_error, float)
    ratio = np.abs(shift) / se
    flags = shift_flags(shift, se, floor)
    data = {
        "calibration_point": (("fit_point", "parameter"), points, {"long_name": "verified point: the best fit, then "
                                                                                "the other distinct minima"}),
        "calibration_surrogate_error": (("fit_point", "output"), error,
                                        {"long_name": "surrogate minus simulator at the point", **_units(output)}),
        "calibration_whitened_error_rms": ("fit_point", np.sqrt((whitened**2).mean(axis=1)), {
            "long_name": "root mean square of the whitened surrogate error over the observed outputs (1: the "
                         "observation noise)", "units": "1"}),
        "calibration_estimate_shift": ("parameter", shift, {"long_name": "shift of the estimate a fit to the "
                                                                         "simulator makes from the best fit"}),
        "calibration_standard_error": ("parameter", se, {"long_name": "standard error of the estimate"}),
        "calibration_shift_ratio": ("parameter", ratio, {"long_name": "|estimate shift| / standard error",
                                                         "units": "1"}),
        **_floor("calibration", floor),
        "calibration_flag": ("parameter", flags, {"long_name": "why the shift of the estimate is flagged", **FLAGS}),
        "calibration_verdict": ((), np.int8(not flags.any()), {
            "long_name": "the surrogate's shift of the estimate is below its standard error or the absolute floor",
            **VERDICT}),
    }
    ds = xr.Dataset(data, coords=_index("fit_point", len(points), "verified point (0: the best fit)"))
    if members is not None:
        ds = with_members(ds, {"calibration_surrogate_error": member_values(members, points) - truth}, level)
    return labelled(ds, output)


def verify_posterior(simulate: FlatFn, surrogate_log_likelihood: np.ndarray, draws: np.ndarray, mcse: np.ndarray,
                     observations: ObservationModel, *, surrogate: FlatFn,
                     members: MembersFn | None = None, floor: np.ndarray | None = None,
                     output: OutputSpec | None = None, level: float = 0.95) -> xr.Dataset:
    """The surrogate's error at a subset of posterior draws and how far it moves the posterior mean.

    Parameters
    ----------
    simulate, surrogate
        ``[P, n] -> [P, m]``.
    surrogate_log_likelihood
        ``[P]`` the log-likelihood the posterior was sampled with at ``draws`` (up to a constant).
    draws
        ``[P, n]`` the subset of draws.
    mcse
        ``[n]`` the posterior's Monte Carlo standard error of the mean.
    observations
        The observations and their whitening (the simulator's likelihood is the plain Gaussian one).
    members
        An ensemble's members ``[P, n] -> [K, P, m]``: their errors and spread beside the ensemble's.
    floor
        ``[n]`` absolute shift below which no parameter is flagged [parameter units]; None: the MCSE alone.
    output, level
        As :func:`verify_calibration`.

    Returns
    -------
    xarray.Dataset
        ``posterior_draw(posterior_point, parameter)``, ``posterior_surrogate_error(posterior_point, output)``,
        ``posterior_whitened_error_rms``, ``posterior_log_likelihood_error``, ``posterior_weight``,
        ``posterior_mean_shift(parameter)``, ``posterior_mcse(parameter)``, ``posterior_shift_ratio``,
        ``posterior_importance_ess``, ``posterior_flag(parameter)`` (:data:`~.verdict.ERROR`: ``|shift| >
        max(mcse, floor)``) and ``posterior_verdict`` (no flag); with ``members`` the members' variables of
        ``posterior_surrogate_error`` (:func:`with_members`).
    """
    draws = np.atleast_2d(np.asarray(draws, float))
    truth, approx = _values(simulate, draws), _values(surrogate, draws)
    r = observations.residual(truth)
    log_ratio = -0.5 * (r**2).sum(axis=1) - np.asarray(surrogate_log_likelihood, float)
    weights = np.exp(log_ratio - log_ratio.max())
    weights /= weights.sum()
    shift = weights @ draws - draws.mean(axis=0)
    ratio = np.abs(shift) / np.asarray(mcse, float)
    flags = shift_flags(shift, np.asarray(mcse, float), floor)
    dims = ("posterior_point", "parameter")
    whitened = observations.residual(approx) - r
    data = {
        "posterior_draw": (dims, draws, {"long_name": "verified posterior draw"}),
        "posterior_surrogate_error": (("posterior_point", "output"), approx - truth,
                                      {"long_name": "surrogate minus simulator at the draw", **_units(output)}),
        "posterior_whitened_error_rms": ("posterior_point", np.sqrt((whitened**2).mean(axis=1)), {
            "long_name": "root mean square of the whitened surrogate error (1: the observation noise)", "units": "1"}),
        "posterior_log_likelihood_error": ("posterior_point", log_ratio, {
            "long_name": "simulator's minus the sampled log-likelihood at the draw", "units": "1"}),
        "posterior_weight": ("posterior_point", weights, {"long_name": "normalised importance weight toward the "
                                                                       "simulator's posterior", "units": "1"}),
        "posterior_mean_shift": ("parameter", shift, {"long_name": "importance-reweighted minus plain mean of the "
                                                                   "verified draws"}),
        "posterior_mcse": ("parameter", np.asarray(mcse, float), {"long_name": "Monte Carlo standard error of the "
                                                                               "posterior mean"}),
        "posterior_shift_ratio": ("parameter", ratio, {"long_name": "|mean shift| / Monte Carlo standard error",
                                                       "units": "1"}),
        "posterior_importance_ess": ((), float(1.0 / (weights**2).sum() / len(weights)), {
            "long_name": "effective sample size of the importance weights per draw", "units": "1"}),
        **_floor("posterior", floor),
        "posterior_flag": ("parameter", flags, {"long_name": "why the shift of the posterior mean is flagged",
                                                **FLAGS}),
        "posterior_verdict": ((), np.int8(not flags.any()), {
            "long_name": "the surrogate's shift of the posterior mean is below its Monte Carlo standard error or the "
                         "absolute floor", **VERDICT}),
    }
    ds = xr.Dataset(data, coords=_index("posterior_point", len(draws), "verified posterior draw"))
    if members is not None:
        ds = with_members(ds, {"posterior_surrogate_error": member_values(members, draws) - truth}, level)
    return labelled(ds, output)


def verify_sobol(simulate: FlatFn, surrogate: FlatFn, rows: np.ndarray, space: ParameterSpace,
                 half_widths: dict[str, np.ndarray], *, members: MembersFn | None = None,
                 settings: VerdictSettings = VerdictSettings(), output: OutputSpec | None = None,
                 level: float = 0.95) -> xr.Dataset:
    """Paired Sobol' indices of the simulator and the surrogate on the first base rows of the design.

    Parameters
    ----------
    simulate, surrogate
        ``[P, n] -> [P, m]``.
    rows
        ``[N' (d + 2), d]`` the first ``N'`` base rows (a power of two) of the indices' Saltelli design.
    space
        The parameter space of the design.
    half_widths
        ``{"S1": [d, m], "ST": [d, m]}`` half-widths of the sampling intervals on the full design.
    members
        An ensemble's members ``[P, n] -> [K, P, m]``: each member's index errors and their spread beside the
        ensemble's.
    settings
        The tolerances and conclusions an index is flagged by (:class:`VerdictSettings`).
    output, level
        As :func:`verify_calibration`.

    Returns
    -------
    xarray.Dataset
        ``sobol_S1_simulator``/``sobol_ST_simulator`` and ``sobol_S1_error``/``sobol_ST_error`` (surrogate minus
        simulator) on ``(parameter, output)``, ``sobol_S1_error_ratio``/``sobol_ST_error_ratio`` (``|error| /
        half-width``), ``sobol_S1_flag``/``sobol_ST_flag`` (why an index is flagged:
        :func:`~.verdict.index_flags`), ``sobol_surrogate_rmse(output)`` and ``sobol_output_std(output)`` on the
        rows, and ``sobol_verdict`` (no flag); with ``members`` the members' variables of ``sobol_S1_error`` and
        ``sobol_ST_error`` (:func:`with_members`).
    """
    truth, approx = _values(simulate, rows), _values(surrogate, rows)
    n = len(rows) // (len(space) + 2)
    options = {"intervals": IntervalPlan("none"), "convergence_start": n}
    exact, estimate = sobol.analyze(truth, space, **options), sobol.analyze(approx, space, **options)
    data, flagged = {}, False
    for key in ("S1", "ST"):
        error = estimate[key].values - exact[key].values
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.abs(error) / np.asarray(half_widths[key], float)
        flags = index_flags(key, estimate[key].values, exact[key].values, half_widths[key], settings)
        flagged = flagged or bool(flags.any())
        data[f"sobol_{key}_flag"] = (("parameter", "output"), flags,
                                     {"long_name": f"why the surrogate's {key} is flagged", **FLAGS})
        data[f"sobol_{key}_simulator"] = (("parameter", "output"), exact[key].values,
                                          {"long_name": f"{key} of the simulator on the verified rows", "units": "1"})
        data[f"sobol_{key}_error"] = (("parameter", "output"), error, {
            "long_name": f"{key} of the surrogate minus the simulator's on the verified rows", "units": "1"})
        data[f"sobol_{key}_error_ratio"] = (("parameter", "output"), ratio, {
            "long_name": f"|{key} error| / half-width of the sampling interval on the full design", "units": "1"})
    data.update(
        sobol_surrogate_rmse=("output", np.sqrt(((approx - truth) ** 2).mean(axis=0)),
                              {"long_name": "root-mean-square surrogate error on the verified rows", **_units(output)}),
        sobol_output_std=("output", truth.std(axis=0, ddof=1),
                          {"long_name": "standard deviation of the simulator's output on the verified rows",
                           **_units(output)}),
        sobol_verdict=((), np.int8(not flagged), {
            "long_name": "no index is flagged: every surrogate error is below its sampling half-width or the absolute "
                         "tolerance, and the influential inputs' ranking and threshold hold", **VERDICT}),
    )
    ds = xr.Dataset(data)
    if members is not None:
        each = [sobol.analyze(values, space, **options) for values in member_values(members, rows)]
        ds = with_members(ds, {f"sobol_{key}_error": np.stack([e[key].values for e in each]) - exact[key].values
                               for key in ("S1", "ST")}, level)
    return labelled(ds, output)


def gaussian_log_likelihood(values: np.ndarray, observations: ObservationModel,
                            spread: np.ndarray | None = None) -> np.ndarray:
    """``[P]`` Gaussian log-likelihood (up to a constant) of model values ``[P, m]``: the plain one, or with an
    ensemble's predictive variance ``spread [P, m]`` added to a diagonal observation covariance (as the posterior's
    emulator likelihood, :func:`sensitivity.analyses.posterior.density.log_posterior`)."""
    if spread is None:
        r = observations.residual(values)
        return -0.5 * (r**2).sum(axis=1)
    if observations.whitening.ndim != 1:
        raise DataError("the emulator likelihood of correlated observations is not reproduced here; verify a "
                        "posterior sampled with a diagonal observation covariance")
    rows = observations.observed
    total = 1.0 / observations.whitening**2 + spread[:, rows]
    diff = values[:, rows] - observations.y_obs[rows]
    return -0.5 * (diff**2 / total + np.log(total)).sum(axis=1)


def with_members(ds: xr.Dataset, stacked: dict[str, np.ndarray], level: float) -> xr.Dataset:
    """``ds`` with, beside each of its variables ``X`` of ``stacked`` (each member's ``X``: ``[K, *X.shape]``), the
    members' ``X_member``, ``X_member_mean``, ``X_surrogate_std`` and ``X_combined_interval`` at ``level`` (the
    surrogate's interval alone) and the ``member`` coordinate
    (:func:`sensitivity.outputs.members.with_member_spread`)."""
    k = len(next(iter(stacked.values())))
    each = [xr.Dataset({name: (ds[name].dims, values[i]) for name, values in stacked.items()}) for i in range(k)]
    return with_member_spread(ds, each, level, names=list(stacked))


def labelled(ds: xr.Dataset, output: OutputSpec | None) -> xr.Dataset:
    """``ds``'s variables on the flat ``output`` axis put on the model's own dims and labelled by its spec
    (:func:`~sensitivity.outputs.axes.flat_coords`, :func:`~sensitivity.outputs.axes.unstack_output`); ``ds`` as it
    is without a spec."""
    if output is None:
        return ds
    return unstack_output(ds.assign_coords(flat_coords(output)), output)


def _units(output: OutputSpec | None) -> dict[str, str]:
    """The units attributes of a variable on the flat ``output`` axis in the outputs' units ({} without a spec)."""
    return {} if output is None else axis_units_attrs(output.flat_units(), "output")


def member_values(members: MembersFn, points: np.ndarray) -> np.ndarray:
    """``[K, P, m]`` the members' flat values at ``points``."""
    values = np.asarray(members(points), float)
    return values.reshape(len(values), len(points), -1)


def _floor(prefix: str, floor: np.ndarray | None) -> dict:
    if floor is None:
        return {}
    return {f"{prefix}_shift_floor": ("parameter", np.asarray(floor, float), {
        "long_name": "absolute shift below which the parameter is not flagged"})}


def _index(dim: str, size: int, long_name: str) -> dict[str, xr.Variable]:
    return {dim: xr.Variable(dim, np.arange(size, dtype=np.int32), {"long_name": long_name, "units": "1"})}


def _values(fn: FlatFn, points: np.ndarray) -> np.ndarray:
    values = np.asarray(fn(points), float)
    return values.reshape(len(points), -1)
