"""The verb :func:`calibrate`: validate the inputs, run the batched solve, compute the statistics, label them."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sensitivity.analyses.calibration.dataset import Labels, to_dataset
from sensitivity.analyses.calibration.iteration import solve
from sensitivity.analyses.callables import ValueAndJacobianFn, ValuesFn
from sensitivity.analyses.calibration.model_calls import ModelCalls
from sensitivity.analyses.calibration.observation_model import ObservationModel
from sensitivity.analyses.calibration.problem import build_problem, check_starts
from sensitivity.analyses.calibration.solvers import (FAILED, GaussNewton, LevenbergMarquardt, Solver, Status,
                                                      TrustRegion)
from sensitivity.analyses.calibration.statistics import distinct_minima, posterior
from sensitivity.errors import ConfigError, SensitivityError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


class CalibrationError(SensitivityError, RuntimeError):
    """Every start of a calibration failed (raised by :func:`calibrate` when ``throw=True``)."""


def calibrate(
    value_and_jacobian: ValueAndJacobianFn,
    y_obs: np.ndarray,
    starts: np.ndarray,
    *,
    sigma: np.ndarray | float | None = None,
    cov: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    prior_mean: np.ndarray | None = None,
    prior_cov: np.ndarray | None = None,
    bounds: np.ndarray | None = None,
    log_parameters: np.ndarray | None = None,
    solver: Solver = TrustRegion(),
    throw: bool = True,
    parameter_names: Sequence[str] | None = None,
    parameter_units: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
    rcond: float = 1e-8,
    level: float = 0.95,
    minima_rtol: float = 1e-4,
    record_history: bool = True,
    values: ValuesFn | None = None,
    step_jacobian: ValueAndJacobianFn | None = None,
) -> xr.Dataset:
    """Fit parameters to observations from K starts at once; return a labeled dataset.

    Parameters
    ----------
    value_and_jacobian
        Batched model ``points [K, n] -> (values [K, m], jacobian [K, m, n])``, float64.
    y_obs
        ``[m]`` observations in output units; NaN marks a missing one.
    starts
        ``[K, n]`` starting points in parameter units (a single ``[n]`` start is accepted).
    sigma, cov
        Observation errors: a standard deviation per output (``[m]`` or scalar) or a full
        ``[m, m]`` covariance (whitened through its Cholesky factor). With neither, unit
        weights are used and the covariance is scaled by ``s^2 = chi^2 / (m_o - n)``.
    mask
        ``[m]`` bool; False drops an output from the fit (as NaN in ``y_obs`` does).
    prior_mean, prior_cov
        Gaussian prior on the parameters, in physical units (MAP fit). Needs ``sigma`` or ``cov``.
    bounds
        ``[n, 2]`` (low, high); ``±inf`` for none. Respected by projection (see :mod:`.iteration`).
    log_parameters
        ``[n]`` bool: fit ``log(x)`` for these parameters (they must stay > 0).
    solver
        :class:`TrustRegion` (default), :class:`LevenbergMarquardt` or :class:`GaussNewton` settings.
    throw
        Raise :class:`CalibrationError` when every start failed (``max_iter`` or
        non-finite); otherwise failures are only reported in ``status``.
    parameter_names, parameter_units, output_names, output_units
        Labels and UDUNITS strings for the dataset.
    rcond
        Relative singular-value cutoff of the column-equilibrated weighted Jacobian
        for rank, pseudo-inverse and identifiability: condition numbers above
        ``1/rcond`` (default 1e8, where a float64 covariance has lost its digits)
        count as rank-deficient.
    level
        Probability of the parameter intervals and the output band.
    minima_rtol
        Relative tolerance for grouping final estimates into distinct minima: every parameter within
        ``minima_rtol`` times the larger of the two magnitudes and its bounds' width.
    record_history
        Keep the per-iteration history (memory ``K * iterations * n``).
    values
        Values-only model ``points [K, n] -> values [K, m]`` (float64), cheaper than
        ``value_and_jacobian``. When given, trial points are evaluated with it and a
        Jacobian is computed only where a step is accepted; without it, every trial
        is one ``value_and_jacobian`` call.
    step_jacobian
        Model whose Jacobian builds the steps (needs ``values``), e.g. a float32
        engine: a step tolerates a Jacobian accurate to ~1e-6, while the cost and
        the convergence tests use ``values`` and every statistic (covariance,
        identifiability, band) the ``value_and_jacobian`` Jacobian at the estimates.

    Returns
    -------
    xarray.Dataset
        Dims ``start``, ``iteration``, ``parameter``, ``output``, ``parameter_i``/
        ``parameter_j``, ``component``, ``bound``. Per start: ``history_*`` on
        ``iteration``; ``estimate``, ``status`` (+ ``message``), ``n_iterations``,
        ``cost``, ``chi2``, ``reduced_chi2``, ``aic``, ``bic``, ``covariance``,
        ``standard_error``, ``correlation``, ``parameter_interval``, ``model_output``,
        ``residual``, ``prediction_std``, ``prediction_band``, ``singular_value``,
        ``singular_vector``, ``rank``, ``condition_number``, ``identifiability``,
        ``minimum``; scalars ``best_start`` and ``n_minima``. With a prior, ``prior_mean``, ``prior_std``,
        ``prior_covariance`` and per start ``prior_std_reduction``, ``1 - standard error / prior std``: what the
        data add to the prior (0: nothing); ``identifiability`` is then relative to the prior
        (:func:`~sensitivity.analyses.calibration.statistics.prior_scaled_identifiability`).

        Covariance ``(J^T W J + P^{-1})^{-1}`` (``P`` the prior covariance), times ``s^2``
        when the noise is unknown; NaN when the weighted Jacobian (with prior rows)
        is rank-deficient, in which case ``status`` is ``SINGULAR`` and the band uses
        the pseudo-inverse (outputs are identifiable even when parameters are not).
        ``aic = -2 ln L + 2 k``, ``bic = -2 ln L + k ln m_o`` with the Gaussian
        log-likelihood of the data at the estimate: ``-2 ln L = chi^2 + m_o ln 2 pi +
        ln det C`` for known noise (``k = n``); ``m_o (ln(2 pi chi^2 / m_o) + 1)``
        with the variance profiled out for unknown noise (``k = n + 1``).

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0.0, 4.0, 9)
    >>> def model(p):  # y = a exp(-b t), batched over the rows of p
    ...     a, b = p[:, :1], p[:, 1:]
    ...     e = np.exp(-b * t)
    ...     return a * e, np.stack([e, -a * t * e], axis=-1)
    >>> y = 2.0 * np.exp(-0.7 * t)
    >>> ds = calibrate(model, y, np.array([[1.0, 0.1], [5.0, 2.0]]), sigma=0.01,
    ...                parameter_names=["a", "b"], parameter_units=["1", "s-1"])
    >>> ds["estimate"].sel(start=int(ds["best_start"])).values.round(6)
    array([2. , 0.7])
    """
    if not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ConfigError(f"`level` must lie in (0, 1), got {level!r}")
    if not isinstance(rcond, (int, float)) or not 0 < rcond < 1:
        raise ConfigError(f"`rcond` must lie in (0, 1), got {rcond!r}")
    if not isinstance(solver, (TrustRegion, LevenbergMarquardt, GaussNewton)):
        raise ConfigError(f"`solver` must be TrustRegion(...), LevenbergMarquardt(...) or GaussNewton(...), "
                          f"got {solver!r}")
    n = len(parameter_names) if parameter_names is not None else (np.shape(starts)[-1] if np.ndim(starts) else 0)
    names = _names_or_default(parameter_names, n, "parameter_names", "p")
    observations = ObservationModel.from_arrays(y_obs, sigma=sigma, cov=cov, mask=mask, output_names=output_names)
    m = observations.y_obs.size
    onames = _names_or_default(output_names, m, "output_names", "y")
    problem = build_problem(observations, n, m, names, bounds, log_parameters, prior_mean, prior_cov)
    x0 = check_starts(starts, problem, names)
    if step_jacobian is not None and values is None:
        raise ConfigError("`step_jacobian` needs `values` (the cost must come from full-precision values)")
    calls = ModelCalls(value_and_jacobian, values, step_jacobian, m, n)
    fits, history = solve(problem, calls, x0, solver, rcond)
    post = posterior(problem, fits, rcond)
    converged = fits.status > 0
    fits.status[converged & (post.rank < n)] = Status.SINGULAR
    ok = ~np.isin(fits.status, FAILED)
    if throw and not ok.any():
        counts = {Status(s).name: int(c) for s, c in zip(*np.unique(fits.status, return_counts=True))}
        raise CalibrationError(f"calibrate: all {len(ok)} starts failed ({counts}); see `status` with throw=False")
    width = np.zeros(n) if bounds is None else np.diff(np.asarray(bounds, dtype=float), axis=1)[:, 0]
    minimum = distinct_minima(fits.x, fits.cost, ok, minima_rtol, scale=np.where(np.isfinite(width), width, 0.0))
    labels = Labels(names, parameter_units, onames, output_units)
    settings = {"solver": repr(solver), "rcond": rcond, "level": level}
    return to_dataset(problem, fits, history if record_history else None, post, x0, minimum, labels, settings,
                      solver.DAMPING)


def _names_or_default(names: Sequence[str] | None, n: int, what: str, prefix: str) -> list[str]:
    if names is None:
        return [f"{prefix}{i}" for i in range(n)]
    names = list(names)
    if len(names) != n:
        raise ConfigError(f"`{what}` must have {n} entries, got {len(names)}")
    return names
