"""The verb :func:`calibrate`: validate the inputs, run the batched solve, compute the statistics, label them."""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from sensitivity.analyses.calibration.dataset import Labels, to_dataset
from sensitivity.analyses.calibration.iteration import solve
from sensitivity.analyses.calibration.model_calls import ModelCalls
from sensitivity.analyses.calibration.observation_model import ObservationModel
from sensitivity.analyses.calibration.problem import build_problem, check_starts
from sensitivity.analyses.calibration.solvers import (FAILED, GaussNewton, LevenbergMarquardt, Solver, Status,
                                                      TrustRegion)
from sensitivity.analyses.calibration.statistics import distinct_minima, minima_max_delta_cost, posterior
from sensitivity.analyses.callables import BatchedModel
from sensitivity.errors import ConfigError, SensitivityError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

log = logging.getLogger(__name__)


class CalibrationError(SensitivityError, RuntimeError):
    """Every start of a calibration failed (raised by :func:`calibrate` when ``throw=True``)."""


@dataclass(frozen=True)
class Emulator:
    """How :func:`calibrate` fits an ensemble with its predictive variance in the observation model
    (:func:`~sensitivity.analyses.calibration.emulator.calibrate_ensemble`, Kennedy & O'Hagan 2001).

    Attributes
    ----------
    iterations
        Largest number of emulator-variance fits (>= 1).
    tol
        Stop when the estimate moves less than ``tol`` standard errors in every parameter [1].
    """

    iterations: int = 5
    tol: float = 0.01

    def check(self) -> None:
        """Refuse a setting out of its range, in one line naming it."""
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) or self.iterations < 1:
            raise ConfigError(f"`iterations` must be an integer >= 1, got {self.iterations!r}")
        if not isinstance(self.tol, (int, float)) or not self.tol > 0:
            raise ConfigError(f"`tol` must be > 0, got {self.tol!r}")


@dataclass(frozen=True)
class Fit:
    """How :func:`calibrate` fits and what it reports: the only defaults of a calibration.

    Attributes
    ----------
    solver
        :class:`TrustRegion` (default), :class:`LevenbergMarquardt` or :class:`GaussNewton` settings.
    rcond
        Relative singular-value cutoff [1] of the column-equilibrated weighted Jacobian for rank, pseudo-inverse
        and identifiability: condition numbers above ``1/rcond`` (default 1e8, where a float64 covariance has
        lost its digits) count as rank-deficient.
    level
        Probability [1] of the parameter intervals and the output band.
    minima_rtol
        Relative tolerance [1] for grouping final estimates into distinct minima: every parameter within
        ``minima_rtol`` times the larger of the two magnitudes and its bounds' width.
    minima_level
        Probability [1] of the likelihood-ratio region around the best fit within which a converged start counts as
        a minimum: its cost at most ``chi2.ppf(minima_level, n) / 2`` above the best one's (the cost is half the
        chi-square; times ``s^2`` when the noise is unknown), 9.2 for 4 parameters at the default 0.999 (Wilks
        1938). A start that ends further up (held on a bound, or in a far basin, at a cost thousands of times the
        best) is a *rejected start*, not a minimum: the posterior does not start chains there.
    record_history
        Keep the per-iteration history (memory ``K * iterations * n``).
    throw
        Raise :class:`CalibrationError` when every start failed (``max_iter`` or non-finite); otherwise failures
        are only reported in ``status``.
    emulator
        Of an ensemble: each member's fit and the fit with the members' predictive variance (:class:`Emulator`);
        None: the members' mean fitted alone.
    """

    solver: Solver = TrustRegion()
    rcond: float = 1e-8
    level: float = 0.95
    minima_rtol: float = 1e-4
    minima_level: float = 0.999
    record_history: bool = True
    throw: bool = True
    emulator: Emulator | None = Emulator()

    def check(self) -> None:
        """Refuse a setting out of its range, in one line naming it."""
        if self.emulator is not None:
            if not isinstance(self.emulator, Emulator):
                raise ConfigError(f"`emulator` must be Emulator(...) or None, got {self.emulator!r}")
            self.emulator.check()
        if not isinstance(self.level, (int, float)) or not 0 < self.level < 1:
            raise ConfigError(f"`level` must lie in (0, 1), got {self.level!r}")
        if not isinstance(self.minima_level, (int, float)) or not 0 < self.minima_level < 1:
            raise ConfigError(f"`minima_level` must lie in (0, 1), got {self.minima_level!r}")
        if not isinstance(self.rcond, (int, float)) or not 0 < self.rcond < 1:
            raise ConfigError(f"`rcond` must lie in (0, 1), got {self.rcond!r}")
        if not isinstance(self.solver, (TrustRegion, LevenbergMarquardt, GaussNewton)):
            raise ConfigError(f"`solver` must be TrustRegion(...), LevenbergMarquardt(...) or GaussNewton(...), "
                              f"got {self.solver!r}")


def calibrate(
    model: BatchedModel,
    observations: ObservationModel,
    settings: Fit = Fit(),
    *,
    starts: np.ndarray,
    space: ParameterSpace | None = None,
    bounds: np.ndarray | None = None,
    log_parameters: np.ndarray | None = None,
    prior_mean: np.ndarray | None = None,
    prior_cov: np.ndarray | None = None,
) -> xr.Dataset:
    """Fit parameters to observations from K starts at once; return a labeled dataset.

    Parameters
    ----------
    model
        The batched model (:meth:`BatchedModel.of` a compiled surrogate or ensemble): ``value_and_jacobian``
        ``points [K, n] -> (values [K, m], jacobian [K, m, n])``, float64, is required. With ``values``
        (values only, cheaper) trial points are evaluated with it and a Jacobian is computed only where a step is
        accepted; without it, every trial is one ``value_and_jacobian`` call. ``step_jacobian`` (needs
        ``values``; e.g. a float32 engine) builds the steps: a step tolerates a Jacobian accurate to ~1e-6, while
        the cost and the convergence tests use ``values`` and every statistic (covariance, identifiability, band)
        the ``value_and_jacobian`` Jacobian at the estimates. Its ``output`` spec labels the outputs (else
        ``y0 ..``).
    observations
        The observations, which of them count, and their errors (:meth:`ObservationModel.from_arrays`: ``[m]``
        values in output units, NaN for a missing one; ``sigma`` per output or a full ``cov``, whitened through its
        Cholesky factor; ``mask``). With no errors, unit weights are used and the covariance is scaled by
        ``s^2 = chi^2 / (m_o - n)``.
    settings
        The solver and the reported statistics (:class:`Fit`).
    starts
        ``[K, n]`` starting points in parameter units (a single ``[n]`` start is accepted).
    space
        The parameters: their names and units label the result, their bounds bound the fit. None: ``p0 ..``,
        unbounded.
    bounds
        ``[n, 2]`` (low, high), ``+-inf`` for none, in place of the space's (a sub-box). Respected by projection
        (see :mod:`.iteration`).
    log_parameters
        ``[n]`` bool: fit ``log(x)`` for these parameters (they must stay > 0).
    prior_mean, prior_cov
        Gaussian prior on the parameters, in physical units (MAP fit). Needs observation errors.

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
        ``minimum`` (-1: failed, -2: a rejected start, its cost more than ``minima_max_delta_cost`` above the
        best); scalars ``best_start``, ``n_minima`` (accepted minima only), ``n_rejected`` and
        ``minima_max_delta_cost``. With a prior, ``prior_mean``, ``prior_std``,
        ``prior_covariance`` and per start ``prior_std_reduction``, ``1 - standard error / prior std``: what the
        data add to the prior (0: nothing); ``identifiability`` is then relative to the prior
        (:func:`~sensitivity.analyses.calibration.statistics.prior_scaled_identifiability`).
        Of an ensemble (``model.members``) with ``settings.emulator`` and observation errors: also each member's
        estimate, the emulator-variance fit and the combined interval
        (:func:`~sensitivity.analyses.calibration.emulator.calibrate_ensemble`).

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
    >>> ds = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=0.01),
    ...                starts=np.array([[1.0, 0.1], [5.0, 2.0]]))
    >>> ds["estimate"].sel(start=int(ds["best_start"])).values.round(6)
    array([2. , 0.7])
    """
    settings.check()
    if not isinstance(model, BatchedModel) or model.value_and_jacobian is None:
        raise ConfigError(f"`model` must be BatchedModel(value_and_jacobian=...), got {model!r}")
    if model.members is not None:  # an ensemble: its mean's fit, each member's and the emulator-variance fit
        problem = dict(space=space, bounds=bounds, log_parameters=log_parameters, prior_mean=prior_mean,
                       prior_cov=prior_cov)
        mean = replace(model, members=None)
        if settings.emulator is not None and not observations.known_noise:
            log.warning("calibrate: the observations carry no errors, so the ensemble's emulator variance cannot "
                        "join them: the plain fit only")
        elif settings.emulator is not None:
            from sensitivity.analyses.calibration.emulator import calibrate_ensemble

            members = model.members
            return calibrate_ensemble(mean, [members.value_and_jacobian(k) for k in range(members.count)],
                                      members.values, observations, settings, starts=starts,
                                      iterations=settings.emulator.iterations, tol=settings.emulator.tol, **problem)
        model = mean
    if not isinstance(observations, ObservationModel):
        raise ConfigError(f"`observations` must be ObservationModel.from_arrays(...), "
                          f"got {type(observations).__name__}")
    n = len(space) if space is not None else (np.shape(starts)[-1] if np.ndim(starts) else 0)
    names = space.names if space is not None else [f"p{i}" for i in range(n)]
    m = observations.y_obs.size
    output = model.labels()
    onames = output["output_names"] or [f"y{i}" for i in range(m)]
    if len(onames) != m:
        raise ConfigError(f"the model's output spec has {len(onames)} outputs, the observations {m}")
    bounds = space.bounds if bounds is None and space is not None else bounds
    problem = build_problem(observations, n, m, names, bounds, log_parameters, prior_mean, prior_cov)
    x0 = check_starts(starts, problem, names)
    if model.step_jacobian is not None and model.values is None:
        raise ConfigError("`step_jacobian` needs `values` (the cost must come from full-precision values)")
    calls = ModelCalls(model.value_and_jacobian, model.values, model.step_jacobian, m, n)
    solver, rcond = settings.solver, settings.rcond
    fits, history = solve(problem, calls, x0, solver, rcond)
    post = posterior(problem, fits, rcond)
    converged = fits.status > 0
    fits.status[converged & (post.rank < n)] = Status.SINGULAR
    ok = ~np.isin(fits.status, FAILED)
    if settings.throw and not ok.any():
        counts = {Status(s).name: int(c) for s, c in zip(*np.unique(fits.status, return_counts=True))}
        raise CalibrationError(f"calibrate: all {len(ok)} starts failed ({counts}); see `status` with throw=False")
    width = np.zeros(n) if bounds is None else np.diff(np.asarray(bounds, dtype=float), axis=1)[:, 0]
    max_delta = minima_max_delta_cost(settings.minima_level, n, post, fits.cost, ok)
    minimum = distinct_minima(fits.x, fits.cost, ok, settings.minima_rtol,
                              scale=np.where(np.isfinite(width), width, 0.0), max_delta_cost=max_delta)
    labels = Labels(names, None if space is None else space.units, onames, output["output_units"])
    attrs = {"solver": repr(solver), "rcond": rcond, "level": settings.level, "minima_level": settings.minima_level}
    return to_dataset(problem, fits, history if settings.record_history else None, post, x0, minimum, labels, attrs,
                      solver.DAMPING, max_delta)
