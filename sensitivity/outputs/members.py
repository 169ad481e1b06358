"""What every analysis of an ensemble shares: the ``member`` axis, the members of a compiled engine, the predictive
spread ``(1 + 1/K) s^2`` of a result over the members, and the interval that combines it with the analysis's own
sampling interval; the one place that writes them (:func:`predictive_variance`, :func:`spread_variables`,
:func:`with_member_spread`).

An ensemble of ``K`` surrogates (:mod:`sensitivity.surrogates.ensemble`) predicts with the mean of its members; the spread of
a result over the members estimates how much of that result is the surrogate. Treating the unknown truth as one
more draw from the distribution the members were drawn from (exchangeable with them: the members differ by
seed and bootstrap resample, Lakshminarayanan et al. 2017, arXiv:1612.01474), the truth lies within

    mean -+ t_{K-1, (1 + c)/2} sqrt(1 + 1/K) s,        s = sd(member results, ddof=1)

with probability ``c``: a prediction interval for a new draw from ``K`` (Student's ``t`` with ``K - 1`` degrees of
freedom for an ``s`` estimated from few members; Geisser 1993, Predictive Inference, ch. 2). A result that also
has a sampling interval (a Monte Carlo or quasi-Monte Carlo error, independent of the surrogate's) gets the
combined interval of :func:`combined_bounds`: each side's half-width is the root sum of squares of the two
half-widths, the sum of two independent errors' variances.
"""
from __future__ import annotations

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")
stats = lazy_import("scipy.stats")

#: The dim of an ensemble's members in every result (reserved: no model output may use it).
MEMBER = "member"
#: Suffixes of the variables beside a result ``X`` of an ensemble (:func:`spread_variables`): each member's
#: ``X_member``, their mean ``X_member_mean``, their standard deviation ``X_surrogate_std`` and the combined
#: interval ``X_combined_interval``.
PER_MEMBER, MEMBER_MEAN, SURROGATE_STD, COMBINED_INTERVAL = ("_member", "_member_mean", "_surrogate_std",
                                                             "_combined_interval")


def member_coords(k: int) -> dict[str, xr.Variable]:
    """The ``member`` index coordinate of ``k`` members."""
    return {MEMBER: xr.Variable(MEMBER, np.arange(k, dtype=np.int32), {"long_name": "member of the surrogate ensemble",
                                                                        "units": "1"})}


def member_count(engine: object) -> int:
    """``K``, the members of a compiled ensemble (:class:`sensitivity.engine.ensemble.CompiledEnsemble`); 0 for one
    model (a compiled surrogate, a :class:`~sensitivity.analyses.callables.BatchedModel`, a function)."""
    k = getattr(engine, "members", 0)
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 1 else 0


def flat_mean_values(engine: object):
    """``[N, n] -> [N, m]``: the flat values of any compiled engine, the members' mean of an ensemble (its prediction)."""
    k = member_count(engine)
    if not k:
        return engine.flat_values

    def mean(points: np.ndarray) -> np.ndarray:
        return np.asarray(engine.values(points)).reshape(k, len(points), -1).mean(axis=0)

    return mean


def flat_mean_value_and_jacobian(engine: object):
    """``[N, n] -> ([N, m], [N, m, n])``: the flat values and Jacobians of any compiled engine, the members' mean of an
    ensemble (:func:`flat_mean_values` and its Jacobian)."""
    k = member_count(engine)
    if not k:
        return engine.flat_value_and_jacobian

    def mean(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, jacobian = engine.stacked_value_and_jacobian(points)  # [N, K m], [N, K m, n]
        n = len(points)
        return (values.reshape(n, k, -1).mean(axis=1),
                jacobian.reshape(n, k, -1, jacobian.shape[-1]).mean(axis=1))

    return mean


def flat_mean_hessian(hessian, k: int):
    """``[N, n] -> [N, m, n, n]``: the members' mean of the Hessians ``[N, K m, n, n]`` of ``K`` members side by side
    (member-major, :func:`sensitivity.engine.hessian.hessian_of` of an ensemble engine)."""
    def mean(points: np.ndarray) -> np.ndarray:
        h = np.asarray(hessian(points))
        return h.reshape(len(h), k, -1, *h.shape[2:]).mean(axis=1)

    return mean


def predictive_factor(k: int) -> float:
    """``1 + 1/K``: the variance of a new draw about the mean of ``K`` members, per unit of the members' variance
    (the truth as one more member: Geisser 1993, ch. 2)."""
    if k < 2:
        raise ConfigError(f"an ensemble's spread needs at least 2 members, got {k}")
    return 1.0 + 1.0 / k


def predictive_variance(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """``(1 + 1/K) s^2``: the predictive variance of the members' values along ``axis`` (``K`` long; ``s^2`` their
    variance, ``ddof=1``), in the values' units squared."""
    values = np.asarray(values, float)
    return predictive_factor(values.shape[axis]) * values.var(axis=axis, ddof=1)


def spread_factor(k: int, level: float) -> float:
    """``t_{K-1, (1 + level)/2} sqrt(1 + 1/K)``: the half-width of the surrogate interval per unit of member sd."""
    factor = predictive_factor(k)
    if not 0 < level < 1:
        raise ConfigError(f"`level` must lie in (0, 1), got {level!r}")
    return float(stats.t.ppf(0.5 + level / 2, k - 1) * np.sqrt(factor))


def combined_bounds(estimate: np.ndarray, low: np.ndarray | None, high: np.ndarray | None, std: np.ndarray, k: int,
                    level: float) -> np.ndarray:
    """``[..., 2]`` (low, high): the sampling interval ``[low, high]`` of ``estimate`` widened by the surrogate's.

    Each side's half-width is ``sqrt(h_sampling^2 + h_surrogate^2)`` with ``h_surrogate`` the member spread's
    (:func:`spread_factor` times ``std``); without a sampling interval (``low``/``high`` None) the surrogate's alone.
    """
    estimate = np.asarray(estimate, float)
    half = spread_factor(k, level) * np.asarray(std, float)
    below = 0.0 if low is None else estimate - np.asarray(low, float)
    above = 0.0 if high is None else np.asarray(high, float) - estimate
    return np.stack([estimate - np.hypot(below, half), estimate + np.hypot(above, half)], axis=-1)


def surrogate_std(stacked: xr.DataArray, long_name: str, units: dict[str, str]) -> xr.DataArray:
    """``X_surrogate_std``: the standard deviation over the ``member`` dim (``ddof=1``, NaN members left out) of
    ``X_member`` ``stacked``, how much of ``X`` is the surrogate, in ``X``'s ``units`` (its ``units*`` attributes)."""
    return stacked.std(MEMBER, ddof=1).assign_attrs(
        long_name=f"{long_name}, standard deviation over the members (surrogate uncertainty)", **units)


def spread_variables(name: str, estimate: xr.DataArray, stacked: xr.DataArray, level: float,
                     interval: xr.DataArray | None = None) -> dict[str, xr.DataArray]:
    """The variables that put a result ``name`` of the ensemble mean beside its members'.

    Parameters
    ----------
    name
        The result's variable name ``X``.
    estimate
        ``X`` of the ensemble mean.
    stacked
        ``X`` of each member on a leading ``member`` dim.
    level
        Probability of the combined interval, in (0, 1).
    interval
        ``X``'s own sampling interval on ``(*estimate.dims, bound)`` in any order; None: the surrogate's alone.

    Returns
    -------
    dict
        ``X_member`` (each member's), ``X_member_mean``, ``X_surrogate_std`` (their sd, ``ddof=1``: how much of
        ``X`` is the surrogate) and ``X_combined_interval(..., bound)`` (:func:`combined_bounds`), in ``X``'s units.
    """
    k = stacked.sizes[MEMBER]
    long_name = estimate.attrs.get("long_name", name)
    units = {key: value for key, value in estimate.attrs.items() if key.startswith("units")}
    std = surrogate_std(stacked, long_name, units)
    low, high = (None, None) if interval is None else (
        interval.isel(bound=i).transpose(*estimate.dims).values for i in (0, 1))
    bounds = combined_bounds(estimate.values, low, high, std.transpose(*estimate.dims).values, k, level)
    what = "sampling and surrogate error combined" if interval is not None else "surrogate error"
    combined = xr.DataArray(bounds, dims=(*estimate.dims, "bound"), coords=estimate.coords,
                            attrs={**units, "long_name": f"{long_name}, {level:g} interval of {what}"})
    return {
        name + PER_MEMBER: stacked.assign_attrs(long_name=f"{long_name} of each member", **units),
        name + MEMBER_MEAN: stacked.mean(MEMBER).assign_attrs(long_name=f"{long_name}, mean of the members", **units),
        name + SURROGATE_STD: std,
        name + COMBINED_INTERVAL: combined if interval is None else combined.transpose(*interval.dims),
    }


def spread_arrays(stacked: np.ndarray, level: float, axis: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays of :func:`spread_variables` for a block of a streamed result whose estimate is the members' mean
    (a sweep's values): of ``stacked`` (``K`` members along ``axis``), their mean, their standard deviation
    (``ddof=1``; ``X_surrogate_std``) and the surrogate's interval at ``level`` about the mean, ``[..., 2]``
    (``X_combined_interval`` without a sampling interval, :func:`combined_bounds`)."""
    stacked = np.asarray(stacked)
    mean, std = stacked.mean(axis=axis), stacked.std(axis=axis, ddof=1)
    return mean, std, combined_bounds(mean, None, None, std, stacked.shape[axis], level).astype(stacked.dtype)


def with_member_spread(mean: xr.Dataset, members: list[xr.Dataset], level: float,
                       names: list[str] | None = None) -> xr.Dataset:
    """``mean`` (a result of the ensemble mean) with, beside each result ``X`` of ``names`` (default: every ``X``
    with an ``X_interval`` in ``mean``), the members' ``X`` from ``members`` (one result each, the same analysis on
    the same samples) and their spread: :func:`spread_variables` with ``X_interval`` as the sampling interval; the
    ``member`` coordinate and the attribute ``ensemble_members``."""
    k = len(members)
    out = mean.assign_coords(member_coords(k))
    for name in names if names is not None else [v for v in mean.data_vars if f"{v}_interval" in mean.data_vars]:
        stacked = xr.concat([m[name] for m in members], dim=MEMBER, coords="minimal", compat="override",
                            join="override")
        for key, value in spread_variables(name, mean[name], stacked, level, mean.get(f"{name}_interval")).items():
            out[key] = value
    out.attrs["ensemble_members"] = k
    return out
