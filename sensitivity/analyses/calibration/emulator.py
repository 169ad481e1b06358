"""Calibration with an ensemble surrogate: each member's estimate, and the ensemble's predictive variance at the
data as emulator variance in the observation model.

Kennedy & O'Hagan (2001, doi:10.1111/1467-9868.00294, sections 4.2-4.3) calibrate a simulator ``f`` known only
through an emulator: the observations ``y = f(x) + e``, ``e ~ N(0, C_obs)``, and the emulator's belief about
``f(x)`` (mean ``m(x)``, covariance ``C_emu(x)``) combine into the likelihood

    y | x ~ N(m(x), C_obs + C_emu(x)),

so where the emulator is unsure of the simulator's output at the data, the data say less about ``x`` (their
model discrepancy term is not modelled here). For an ensemble of ``K`` members with outputs ``f_k(x)``, ``m`` is
their mean and ``C_emu(x) = (1 + 1/K) S(x)`` (the predictive covariance of a new member, as in
:mod:`sensitivity.outputs.members`), spread calibrated by the ensemble's ``spread_scale`` where it has
one, with ``S`` the members' sample covariance with its correlations shrunk toward zero
(:func:`shrunk_covariance`): the raw sample covariance has rank ``K - 1`` and would declare the surrogate exact
in every other direction of the outputs. Its dependence on ``x`` is handled as in iteratively reweighted least squares: ``C_emu`` is evaluated at the
current estimate and held fixed during a weighted least-squares fit (:func:`~.driver.calibrate` with
``cov = C_obs + C_emu``), which is repeated from the new estimate until it moves less than ``tol`` of its
standard errors (at most ``iterations`` fits). The covariance of the last fit, ``(J^T (C_obs + C_emu)^{-1} J)^{-1}``,
is the estimate's covariance with the surrogate's uncertainty in it; the plain fit's ignores it.

Beside it, each member is calibrated on its own from the plain fit's minima, so the spread of the members'
estimates shows how far the surrogate alone moves the answer; :func:`estimate_combined_interval` combines that
spread with the plain fit's own interval, the definition every analysis of an ensemble shares
(:func:`~sensitivity.outputs.members.combined_bounds`): each side's half-width the root sum of squares of the fit's
(``q`` standard errors, from its covariance) and the surrogate's (``t_{K-1} sqrt(1 + 1/K)`` times the members'
standard deviation of the estimate), in ``log x`` for log parameters. The emulator-variance fit carries the
surrogate's error at the data inside its covariance instead; the combined interval carries it at the estimate, and
needs no refit.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from sensitivity.analyses.calibration.driver import Emulator, Fit, calibrate
from sensitivity.analyses.calibration.observation_model import ObservationModel
from sensitivity.analyses.calibration.statistics import minimum_points
from sensitivity.analyses.callables import BatchedModel, ValueAndJacobianFn
from sensitivity.outputs.members import MEMBER, combined_bounds, member_coords, predictive_factor, surrogate_std
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: Variables of the emulator-variance fit kept (of its best start), renamed ``<name>_emulator``.
EMULATOR_VARIABLES = ("estimate", "covariance", "standard_error", "parameter_interval", "chi2", "status",
                      "prediction_std")


def calibrate_ensemble(
    model: BatchedModel,
    members: Sequence[ValueAndJacobianFn],
    member_values: Callable[[np.ndarray], np.ndarray],
    observations: ObservationModel,
    settings: Fit = Fit(),
    *,
    starts: np.ndarray,
    iterations: int = Emulator.iterations,
    tol: float = Emulator.tol,
    **problem: Any,
) -> xr.Dataset:
    """Calibrate the ensemble mean plainly and with the emulator variance, and each member on its own.

    Parameters
    ----------
    model
        The ensemble mean as :func:`~.driver.calibrate` takes it.
    members
        Each member's ``value_and_jacobian`` (``K`` of them).
    member_values
        Every member's values at points ``[P, n]``: ``[K, P, m]``.
    observations, settings, starts
        As for :func:`~.driver.calibrate`; the observation errors are required.
    iterations
        Largest number of emulator-variance fits (>= 1).
    tol
        Stop when the estimate moves less than ``tol`` standard errors in every parameter.
    **problem
        The rest of :func:`~.driver.calibrate`'s problem (``space``, ``bounds``, ``log_parameters``, prior), used by
        every fit.

    Returns
    -------
    xarray.Dataset
        The plain fit of the ensemble mean (:func:`~.driver.calibrate`'s dataset) with, added:
        ``estimate_member(member, parameter)``, ``cost_member(member)`` and ``status_member(member)`` (each member's
        best fit from the plain fit's minima), ``estimate_surrogate_std(parameter)`` (their standard deviation,
        :func:`~sensitivity.outputs.members.surrogate_std`); ``emulator_std(output)`` (``sqrt diag C_emu`` at the final
        estimate); ``estimate_emulator(parameter)``, ``covariance_emulator(parameter_i, parameter_j)``,
        ``standard_error_emulator(parameter)``, ``parameter_interval_emulator(parameter, bound)``,
        ``chi2_emulator``, ``status_emulator`` and ``prediction_std_emulator(output)`` of the last
        emulator-variance fit's best start; ``estimate_combined_interval(parameter, bound)``
        (:func:`estimate_combined_interval`); the attributes ``emulator_fits`` (how many were run) and
        ``emulator_shrinkage`` (the correlations' shrinkage ``lambda`` at the final estimate).
    """
    if not observations.known_noise:
        raise ConfigError("calibration with the emulator variance needs observation errors: give `sigma` or `cov`")
    Emulator(iterations, tol).check()
    model = replace(model, members=None)  # the mean's own fits
    plain = calibrate(model, observations, settings, starts=starts, **problem)
    best = int(plain["best_start"])
    minima = minimum_points(plain["estimate"].values, plain["cost"].values, plain["minimum"].values)
    refit = replace(settings, record_history=False)
    mean_only = BatchedModel(value_and_jacobian=model.value_and_jacobian, output=model.output)
    observed = np.zeros(observations.y_obs.size, bool)
    observed[observations.observed] = True
    estimate, fit, fits = plain["estimate"].values[best], plain, 0
    for fits in range(1, iterations + 1):
        emulator_cov, _ = emulator_covariance(member_values, estimate)
        widened = ObservationModel.from_arrays(observations.y_obs, cov=observations.covariance() + emulator_cov,
                                               mask=observed)
        fit = calibrate(mean_only, widened, refit, starts=np.vstack([estimate, minima]), **problem)
        new = fit["estimate"].values[int(fit["best_start"])]
        se = fit["standard_error"].values[int(fit["best_start"])]
        moved = np.abs(new - estimate) / np.where(np.isfinite(se) & (se > 0), se, np.inf)
        estimate = new
        if np.all(moved < tol):
            break
    emulator_cov, shrinkage = emulator_covariance(member_values, estimate)
    per_member = [calibrate(BatchedModel(value_and_jacobian=f, output=model.output), observations,
                            replace(refit, throw=False), starts=minima, **problem) for f in members]
    return _assemble(plain, fit, per_member, emulator_cov, fits).assign_attrs(emulator_shrinkage=shrinkage)


def emulator_covariance(member_values: Callable[[np.ndarray], np.ndarray], x: np.ndarray
                        ) -> tuple[np.ndarray, float]:
    """``([m, m], lambda)``: the members' predictive covariance of the outputs at the point ``x [n]``, ``(1 + 1/K)``
    times their sample covariance with its correlations shrunk toward zero by ``lambda`` (:func:`shrunk_covariance`)."""
    stacked = np.asarray(member_values(np.asarray(x, float)[None]), float)  # [K, 1, m]
    values = stacked.reshape(stacked.shape[0], -1)
    k = values.shape[0]
    if k < 2:
        raise ConfigError(f"the emulator variance needs an ensemble of at least 2 members, got {k}")
    covariance, lam = shrunk_covariance(values)
    return predictive_factor(k) * covariance, lam


def shrunk_covariance(samples: np.ndarray) -> tuple[np.ndarray, float]:
    """``([m, m], lambda)``: the covariance of ``K`` samples ``[K, m]`` with the correlations shrunk toward zero.

    A sample covariance of ``K`` members has rank ``K - 1``: outside the span of their deviations it claims the
    surrogate is exact, and a weighted fit would trust the data there without limit. The shrinkage estimate of
    Schäfer & Strimmer (2005, doi:10.2202/1544-6115.1175, target "D": the variances kept, the correlations
    ``r_ij`` shrunk by ``1 - lambda``) picks ``lambda = sum_{i != j} Var(r_ij) / sum_{i != j} r_ij^2`` (clipped to
    [0, 1]) from the samples themselves; with few members it is large (about 0.8 for 5 members of independent
    outputs).
    """
    k = samples.shape[0]
    sd = samples.std(axis=0, ddof=1)
    w = np.divide(samples - samples.mean(axis=0), sd, out=np.zeros_like(samples), where=sd > 0)
    products = w[:, :, None] * w[:, None, :]  # [K, m, m]
    r = products.sum(axis=0) / (k - 1)
    variance = k / (k - 1) ** 3 * ((products - products.mean(axis=0)) ** 2).sum(axis=0)
    off = ~np.eye(len(sd), dtype=bool)
    denominator = (r[off] ** 2).sum()
    lam = 1.0 if denominator == 0 else float(np.clip(variance[off].sum() / denominator, 0.0, 1.0))
    shrunk = np.where(off, (1 - lam) * r, 1.0)
    return shrunk * sd[:, None] * sd[None, :], lam


def estimate_combined_interval(ds: xr.Dataset) -> xr.DataArray:
    """``(parameter, bound)``: the best start's interval ``parameter_interval`` widened by the members' spread of
    ``estimate_member``, the one definition of :func:`~sensitivity.outputs.members.combined_bounds` at the fit's
    ``level``; symmetric in ``log x`` for the ``log_parameters``, as the fit's own interval is. The members whose
    fit failed (NaN estimate) are left out; with fewer than 2 left, or without the fit's interval (a rank-deficient
    best start), NaN.

    Parameters
    ----------
    ds
        A calibration (:func:`~.driver.calibrate`'s dataset) with ``estimate_member(member, parameter)``.

    Returns
    -------
    xarray.DataArray
        ``estimate_combined_interval`` [parameter units], attribute ``level``.
    """
    best, level = int(ds["best_start"]), float(ds.attrs["level"])
    names = [str(name) for name in ds["parameter_name"].values]
    logged = np.isin(names, str(ds.attrs.get("log_parameters", "")).split())
    members = ds["estimate_member"].transpose(MEMBER, "parameter").values
    members = members[np.isfinite(members).all(axis=1)]
    bounds = np.full((len(names), 2), np.nan)
    if best >= 0 and len(members) >= 2:
        low, high = _logged(ds["parameter_interval"].values[best].T, logged)
        wide = combined_bounds(_logged(ds["estimate"].values[best], logged), low, high,
                               _logged(members, logged).std(axis=0, ddof=1), len(members), level)
        bounds = np.where(logged[:, None], np.exp(wide), wide)
    units = {k: v for k, v in ds["parameter_interval"].attrs.items() if k.startswith("units")}
    return xr.DataArray(bounds, dims=("parameter", "bound"), attrs={
        **units, "level": level,
        "long_name": f"{level:.0%} interval of the parameter, the fit's and the members' spread of their estimates "
                     "combined (root sum of squares of the half-widths; in log x for log parameters)"})


def _logged(values: np.ndarray, logged: np.ndarray) -> np.ndarray:
    """``values [..., n]`` with the ``logged`` parameters' as ``log x`` (NaN where not > 0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(logged, np.log(np.where(logged, values, 1.0)), values)


def _assemble(plain: xr.Dataset, fit: xr.Dataset, per_member: list[xr.Dataset], emulator_cov: np.ndarray,
              fits: int) -> xr.Dataset:
    """The plain fit with the members' estimates and the emulator-variance fit beside it."""
    best = int(fit["best_start"])
    out = plain.assign_coords(member_coords(len(per_member)))
    for name in EMULATOR_VARIABLES:
        var = fit[name].isel(start=best)
        out[f"{name}_emulator"] = var.assign_attrs(
            long_name=f"{var.attrs.get('long_name', name)}, with the ensemble's predictive variance in the "
                      "observation model (Kennedy and O'Hagan 2001)")
    units = {k: v for k, v in plain["model_output"].attrs.items() if k.startswith("units")}
    out["emulator_std"] = xr.DataArray(np.sqrt(np.clip(np.diag(emulator_cov), 0, None)), dims=("output",), attrs={
        **units, "long_name": "predictive standard deviation sqrt((1 + 1/K) s^2) of the ensemble members at the "
                              "emulator-variance estimate"})
    picks = [int(ds["best_start"]) for ds in per_member]
    out["estimate_member"] = xr.concat([ds["estimate"].isel(start=max(i, 0)).where(i >= 0)
                                        for ds, i in zip(per_member, picks)], dim=MEMBER, coords="minimal",
                                       compat="override").assign_attrs(
        {**plain["estimate"].attrs, "long_name": "estimate of each member calibrated on its own"})
    out["cost_member"] = (MEMBER, np.array([float(ds["cost"].values[i]) if i >= 0 else np.nan
                                            for ds, i in zip(per_member, picks)]),
                          {**plain["cost"].attrs, "long_name": "cost of each member's best fit"})
    out["status_member"] = (MEMBER, np.array([int(ds["status"].values[i]) if i >= 0 else -1 for ds, i in
                                              zip(per_member, picks)], np.int16),
                            {"long_name": "termination status of each member's best fit (-1: every start failed)",
                             "units": "1"})
    out["estimate_surrogate_std"] = surrogate_std(out["estimate_member"], "estimate", {
        k: v for k, v in plain["estimate"].attrs.items() if k.startswith("units")})
    out["estimate_combined_interval"] = estimate_combined_interval(out)
    out.attrs.update(emulator_fits=fits, emulator_variance="Kennedy and O'Hagan (2001) doi:10.1111/1467-9868.00294: "
                     "C_obs + (1 + 1/K) S(x), S the members' covariance at the estimate, refitted until the estimate "
                     "is stable")
    return out
