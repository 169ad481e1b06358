"""Batched calibration: Levenberg-Marquardt / Gauss-Newton over many starts at once.

The fit minimises the weighted least-squares cost (half the squared norm of the
whitened residuals, plus whitened prior rows for a MAP fit)::

    cost(x) = 1/2 |L^{-1} (F(x) - y)|^2 + 1/2 |L_p^{-1} (x - mu_p)|^2

with ``L L^T`` the observation covariance (``diag(sigma^2)`` or ``cov``, restricted
to the observed outputs) and ``L_p L_p^T`` the prior covariance. All K starts are
advanced together as one vectorised computation, and every start keeps its own damping,
step acceptance and convergence test; a start that has converged is frozen. Each
iteration makes one model call with the trial points of every start still running
(values only, when a ``values`` function is given) and, for the starts whose step was
accepted, one Jacobian call (or keeps the Jacobian that came with the trial values).

Method
------
* Step: the damped normal equations ``(J^T J + lam D) dz = -J^T r``, scaled by
  ``D^{-1/2}`` so that their diagonal is at most 1, are solved by LU (Gauss-Newton:
  the pseudo-inverse from their eigen-decomposition, eigenvalues below ``rcond^2``
  times the largest counted as zero). Between iterations a start keeps only
  ``J^T J`` and ``J^T r`` ([n, n] and [n]), not its [m, n] Jacobian; squaring the
  condition number there is harmless because the gradient ``J^T r`` that decides
  where the fit stops is exact, and the statistics at the estimates are computed from
  the SVD of the full Jacobian (see below). ``lam >= 1e-15`` keeps the system regular.
  ``D`` is Marquardt's diagonal scaling, the running maximum of ``diag(J^T J)``
  (More, 1978); without it, ``D`` is the running maximum of its largest entry times
  the identity (Levenberg's isotropic damping), so ``lam`` is dimensionless either way.
* Damping update (Nielsen, 1999): a step is accepted when the gain ratio
  ``rho = actual / predicted cost reduction`` exceeds 1e-4; then
  ``lam *= max(1/3, 1 - (2 rho - 1)^3)``, else ``lam *= nu`` and ``nu`` doubles.
* Gauss-Newton: the undamped (pseudo-inverse) step scaled by a step fraction
  ``alpha``; with ``line_search`` a step is accepted under the same gain-ratio test
  and ``alpha`` is halved until it is (backtracking), restarting at 1 after success.
* Bounds: an active set with projection. Parameters sitting on a bound whose
  gradient pushes outward are held fixed for the step. When the step would still
  take parameters out of the box, those are moved onto the bound they cross and the
  step of the others is solved again with that move fixed (the minimiser of the same
  quadratic model on the remaining subspace), so the step is not bent by clipping:
  on the demo SEIR calibration this cut the iterations per start from 74 to 31. The
  predicted reduction is that of the step taken, and the gradient test uses the
  projected gradient.
* Precision: with ``step_jacobian`` (e.g. a float32 engine) only the steps use it; the
  cost, the acceptance and convergence tests use float64 values, and every statistic
  uses one ``value_and_jacobian`` call at the estimates.
* Log parameters: the solver works in ``z = log(x)`` for them (chain rule
  ``dF/dz = dF/dx * x`` on the Jacobian). Bounds, prior, covariance and all outputs
  stay in physical units; since ``J_z = J_x diag(x)``, the covariance at the
  optimum is the same in either parametrisation.
* Convergence (MINPACK-style, More 1978): ``gtol`` on the largest cosine between
  the residual and a Jacobian column, ``max_j |J_j^T r| / (|J_j| |r|)``; ``ftol``
  when both the actual and the predicted relative cost reductions are below it;
  ``xtol`` when every component of the tried step satisfies
  ``|dz_j| <= xtol (xtol + |z_j|)`` (relative per parameter, so a parameter of
  small magnitude is not judged on the scale of a large one).

References
----------
Marquardt, D. W. (1963). An algorithm for least-squares estimation of nonlinear
parameters. J. SIAM 11(2), 431-441. https://doi.org/10.1137/0111030

More, J. J. (1978). The Levenberg-Marquardt algorithm: implementation and theory.
Lecture Notes in Mathematics 630, 105-116. https://doi.org/10.1007/BFb0067700

Nielsen, H. B. (1999). Damping parameter in Marquardt's method. Report
IMM-REP-1999-05, Technical University of Denmark.

Akaike, H. (1974). A new look at the statistical model identification. IEEE Trans.
Automatic Control 19(6), 716-723. https://doi.org/10.1109/TAC.1974.1100705

Schwarz, G. (1978). Estimating the dimension of a model. Ann. Statist. 6(2),
461-464. https://doi.org/10.1214/aos/1176344136
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Callable, Sequence

import numpy as np
import xarray as xr
from scipy import linalg, stats

from sensitivity.analyses import identifiability as ident
from sensitivity.errors import ConfigError, DataError, ModelError, SensitivityError
from sensitivity.labels import matrix_coords, output_coords, parameter_coords
from sensitivity.units import product

ValueAndJacobian = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
ValuesFn = Callable[[np.ndarray], np.ndarray]

_BLOCK = 1024  # starts whose [block, m, n] Jacobians are reduced together: they stay in cache
_GAIN_THRESHOLD = 1e-4  # minimum gain ratio for a step to count as a decrease (MINPACK's p0001)
_MIN_DAMPING = 1e-15  # floor of lam relative to the unit-bounded scaled diagonal: keeps A + lam I regular


class CalibrationError(SensitivityError, RuntimeError):
    """Every start of a calibration failed (raised by :func:`calibrate` when ``throw=True``)."""


class Status(IntEnum):
    """Termination of one fit; positive values are convergence."""

    SINGULAR = -2
    NON_FINITE = -1
    MAX_ITER = 0
    GTOL = 1
    FTOL = 2
    XTOL = 3


_RUNNING = 100  # internal: still iterating

STATUS_MESSAGES: dict[int, str] = {
    Status.SINGULAR: "converged, but the weighted Jacobian is rank-deficient: some parameters are not identifiable",
    Status.NON_FINITE: "the model returned non-finite values or Jacobian at the start",
    Status.MAX_ITER: "stopped at max_iter without meeting a tolerance",
    Status.GTOL: "converged: scaled gradient below gtol",
    Status.FTOL: "converged: relative cost reduction below ftol",
    Status.XTOL: "converged: relative step below xtol",
}

#: Statuses that :func:`calibrate` counts as failed fits.
FAILED = (Status.NON_FINITE, Status.MAX_ITER)


# ----------------------------------------------------------------------------- solvers
@dataclass(frozen=True)
class _Tolerances:
    """Stopping rules shared by the solvers (see the module docstring)."""

    max_iter: int = 200
    ftol: float = 1e-12
    xtol: float = 1e-12
    gtol: float = 1e-12

    def __post_init__(self) -> None:
        name = type(self).__name__
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ConfigError(f"{name}: `max_iter` must be an integer >= 1, got {self.max_iter!r}")
        for attr in ("ftol", "xtol", "gtol"):
            value = getattr(self, attr)
            if not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ConfigError(f"{name}: `{attr}` must be a number in [0, 1), got {value!r}")

    def _scaling(self, colnorm2: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
        """Running maximum of the squared column norms; columns never seen non-zero get 1."""
        current = colnorm2 if previous is None else np.maximum(previous, colnorm2)
        return np.where(current > 0, current, 1.0)


@dataclass(frozen=True)
class LevenbergMarquardt(_Tolerances):
    """Levenberg-Marquardt with Nielsen's damping update (immutable settings).

    Parameters
    ----------
    max_iter
        Cap on iterations (= trial points after the start) per start.
    ftol, xtol, gtol
        Relative cost-reduction, relative step and scaled-gradient tolerances.
    initial_damping
        Starting ``lam``, relative to the scaling ``D`` (dimensionless, > 0).
    marquardt_scaling
        Scale the damping per parameter by ``diag(J^T J)`` (Marquardt) instead of
        isotropically (Levenberg).
    """

    initial_damping: float = 1e-3
    marquardt_scaling: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.initial_damping, (int, float)) or not 0 < self.initial_damping < np.inf:
            raise ConfigError(f"LevenbergMarquardt: `initial_damping` must be > 0, got {self.initial_damping!r}")
        if not isinstance(self.marquardt_scaling, bool):
            raise ConfigError(f"LevenbergMarquardt: `marquardt_scaling` must be a bool, got {self.marquardt_scaling!r}")

    def _scaling(self, colnorm2: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
        if not self.marquardt_scaling:
            colnorm2 = np.broadcast_to(colnorm2.max(axis=1, keepdims=True), colnorm2.shape)
        return super()._scaling(colnorm2, previous)

    def _start_damping(self) -> float:
        return float(self.initial_damping)

    def _solve(self, normal: np.ndarray, g: np.ndarray, damping: np.ndarray, rcond: float) -> np.ndarray:
        """Damped step ``-(A + lam I)^-1 g`` for the scaled normal matrix ``A`` (unit-bounded diagonal)."""
        system = normal + damping[:, None, None] * np.eye(g.shape[1])
        try:
            return -np.linalg.solve(system, g[..., None])[..., 0]
        except np.linalg.LinAlgError:  # an exactly singular system in the batch: minimum-norm steps for all
            return -np.einsum("kij,kj->ki", np.linalg.pinv(system, hermitian=True), g)

    def _accepts(self, rho: np.ndarray, finite: np.ndarray) -> np.ndarray:
        return finite & (rho > _GAIN_THRESHOLD)

    def _update(self, damping: np.ndarray, nu: np.ndarray, rho: np.ndarray, accepted: np.ndarray):
        with np.errstate(invalid="ignore", over="ignore"):
            shrink = np.maximum(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
        new_damping = np.where(accepted, np.maximum(damping * shrink, _MIN_DAMPING), damping * nu)
        new_nu = np.where(accepted, 2.0, nu * 2.0)
        return new_damping, new_nu


@dataclass(frozen=True)
class GaussNewton(_Tolerances):
    """Gauss-Newton with an optional backtracking line search (immutable settings).

    Parameters
    ----------
    max_iter, ftol, xtol, gtol
        As for :class:`LevenbergMarquardt`.
    line_search
        Halve the step fraction until the cost decreases sufficiently (gain ratio
        > 1e-4); without it every finite full step is taken.
    """

    line_search: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.line_search, bool):
            raise ConfigError(f"GaussNewton: `line_search` must be a bool, got {self.line_search!r}")

    def _start_damping(self) -> float:
        return 1.0

    def _solve(self, normal: np.ndarray, g: np.ndarray, damping: np.ndarray, rcond: float) -> np.ndarray:
        """Step ``-alpha A^+ g`` with the pseudo-inverse of the scaled normal matrix ``A``, its eigenvalues
        below ``rcond^2`` (singular values of the Jacobian below ``rcond``) times the largest, or below
        what float64 resolves in ``A``, counted as zero."""
        w, v = np.linalg.eigh(normal)
        floor = max(rcond**2, 10 * g.shape[1] * np.finfo(float).eps)
        keep = w > floor * w[:, -1:]
        inverse = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
        return -damping[:, None] * np.einsum("kij,kj->ki", v, inverse * np.einsum("kji,kj->ki", v, g))

    def _accepts(self, rho: np.ndarray, finite: np.ndarray) -> np.ndarray:
        return finite & (rho > _GAIN_THRESHOLD) if self.line_search else finite

    def _update(self, damping: np.ndarray, nu: np.ndarray, rho: np.ndarray, accepted: np.ndarray):
        return np.where(accepted, 1.0, 0.5 * damping), nu


Solver = LevenbergMarquardt | GaussNewton


# ------------------------------------------------------------------------ observations
@dataclass(frozen=True)
class ObservationModel:
    """Observations, which of them count, and their whitening.

    Build with :meth:`from_arrays`. ``observed`` indexes the outputs used (finite
    ``y_obs`` and ``mask`` True); the whitening ``W = L^{-1}`` acts on those only.

    Attributes
    ----------
    y_obs
        ``[m]`` observations in output units (NaN = missing).
    observed
        Indices of the outputs that enter the fit.
    whitening
        ``[m_o]`` inverse standard deviations, or ``[m_o, m_o]`` inverse Cholesky factor.
    log_det_cov
        ``log det`` of the observed block of the observation covariance (0 when unknown).
    known_noise
        False when neither ``sigma`` nor ``cov`` was given (unit weights; the
        covariance is then scaled by the residual variance).
    """

    y_obs: np.ndarray
    observed: np.ndarray
    whitening: np.ndarray
    log_det_cov: float
    known_noise: bool

    @classmethod
    def from_arrays(
        cls,
        y_obs: np.ndarray,
        *,
        sigma: np.ndarray | float | None = None,
        cov: np.ndarray | None = None,
        mask: np.ndarray | None = None,
        output_names: Sequence[str] | None = None,
    ) -> "ObservationModel":
        """Validate observations and their errors and build the whitening.

        Parameters
        ----------
        y_obs
            ``[m]`` observed outputs; NaN marks a missing observation.
        sigma
            ``[m]`` (or scalar) standard deviation per observation, > 0 where observed.
        cov
            ``[m, m]`` observation covariance, symmetric positive definite on the observed outputs.
        mask
            ``[m]`` bool, False drops an output from the fit.
        output_names
            Names used in error messages.
        """
        y = np.asarray(y_obs, dtype=float)
        if y.ndim != 1 or y.size == 0:
            raise DataError(f"`y_obs` must be a non-empty 1-D array [m], got shape {list(y.shape)}")
        m = y.size
        names = list(output_names) if output_names is not None else [f"y{i}" for i in range(m)]
        if len(names) != m:
            raise ConfigError(f"`output_names` must have {m} entries like `y_obs`, got {len(names)}")
        if np.isinf(y).any():
            i = int(np.flatnonzero(np.isinf(y))[0])
            raise DataError(f"`y_obs` must be finite or NaN (missing), got {y[i]} at output {names[i]!r}")
        use = np.isfinite(y)
        if mask is not None:
            mask_arr = np.asarray(mask)
            if mask_arr.shape != (m,) or mask_arr.dtype != bool:
                raise DataError(f"`mask` must be a bool array of shape [{m}], "
                                f"got {mask_arr.dtype} {list(mask_arr.shape)}")
            use &= mask_arr
        observed = np.flatnonzero(use)
        if observed.size == 0:
            raise DataError("`y_obs`: no observation left after removing NaN and masked outputs")
        if sigma is not None and cov is not None:
            raise ConfigError("give either `sigma` or `cov`, not both")
        if cov is not None:
            whitening, log_det = _cov_whitening(cov, observed, names, m)
        elif sigma is not None:
            whitening, log_det = _sigma_whitening(sigma, observed, names, m)
        else:
            whitening, log_det = np.ones(observed.size), 0.0
        return cls(y_obs=y, observed=observed, whitening=whitening, log_det_cov=log_det,
                   known_noise=sigma is not None or cov is not None)

    @property
    def n_observed(self) -> int:
        """Number of observations that enter the fit."""
        return int(self.observed.size)

    def observation_std(self) -> np.ndarray:
        """``[m]`` standard deviation of each observation (NaN where not observed or unknown)."""
        std = np.full(self.y_obs.shape, np.nan)
        if not self.known_noise:
            return std
        if self.whitening.ndim == 1:
            std[self.observed] = 1.0 / self.whitening
        else:  # rows of L = W^{-1} have norm sqrt(diag(L L^T))
            chol = linalg.solve_triangular(self.whitening, np.eye(self.n_observed), lower=True)
            std[self.observed] = np.linalg.norm(chol, axis=1)
        return std

    @property
    def rows(self) -> slice | np.ndarray:
        """The observed outputs as an index: a slice when they are contiguous (no copy when applied)."""
        o = self.observed
        return slice(int(o[0]), int(o[-1]) + 1) if o[-1] - o[0] + 1 == o.size else o

    def residual(self, values: np.ndarray) -> np.ndarray:
        """``[K, m_o]`` whitened residuals ``W (F - y)`` of model values ``[K, m]``."""
        diff = values[:, self.rows] - self.y_obs[self.observed]
        if self.whitening.ndim == 1:
            return diff * self.whitening
        return diff @ self.whitening.T

    def jacobian(self, jacobian: np.ndarray) -> np.ndarray:
        """``[K, m_o, n]`` whitened Jacobian ``W dF/dx`` of a raw Jacobian ``[K, m, n]``."""
        return self.jacobian_transposed(jacobian).transpose(0, 2, 1)

    def jacobian_transposed(self, jacobian: np.ndarray) -> np.ndarray:
        """``[K, n, m_o]`` float64 ``(W dF/dx)^T`` of a raw Jacobian ``[K, m, n]`` of any float dtype: the
        layout in which its products with itself and with residuals are fastest (one pass over the input)."""
        jac = jacobian[:, self.rows, :].transpose(0, 2, 1)
        if self.whitening.ndim == 1:
            return np.multiply(jac, self.whitening, dtype=float)
        return np.matmul(jac.astype(float), self.whitening.T)


def _sigma_whitening(sigma, observed: np.ndarray, names: list[str], m: int) -> tuple[np.ndarray, float]:
    s = np.broadcast_to(np.asarray(sigma, dtype=float), (m,)) if np.ndim(sigma) == 0 else np.asarray(sigma, float)
    if s.shape != (m,):
        raise DataError(f"`sigma` must have shape [{m}] like `y_obs`, got {list(s.shape)}")
    for i in observed:
        if not np.isfinite(s[i]):
            raise DataError(f"`sigma` must be finite, got {s[i]} at observed output {names[i]!r}")
        if s[i] <= 0:
            raise DataError(f"`sigma` must be > 0, got {s[i]} at output {names[i]!r}")
    so = s[observed]
    return 1.0 / so, float(2.0 * np.log(so).sum())


def _cov_whitening(cov, observed: np.ndarray, names: list[str], m: int) -> tuple[np.ndarray, float]:
    c = np.asarray(cov, dtype=float)
    if c.shape != (m, m):
        raise DataError(f"`cov` must have shape [{m}, {m}] like `y_obs`, got {list(c.shape)}")
    block = c[np.ix_(observed, observed)]
    if not np.all(np.isfinite(block)):
        i, _ = np.argwhere(~np.isfinite(block))[0]
        raise DataError(f"`cov` must be finite on observed outputs, got a non-finite entry at {names[observed[i]]!r}")
    if not np.allclose(block, block.T, rtol=1e-10, atol=0.0):
        raise DataError("`cov` must be symmetric on the observed outputs")
    chol, info = linalg.lapack.dpotrf(block, lower=True, clean=True)
    if info != 0:
        where = names[observed[info - 1]] if info > 0 else "?"
        raise DataError(f"`cov` must be positive definite on the observed outputs, failed at output {where!r}")
    inv_chol = linalg.solve_triangular(chol, np.eye(block.shape[0]), lower=True)
    return inv_chol, float(2.0 * np.log(np.diag(chol)).sum())


# ----------------------------------------------------------------------------- problem
@dataclass(frozen=True)
class _Problem:
    """Everything about one calibration except the starts and the solver."""

    observations: ObservationModel
    n: int
    m: int
    log_mask: np.ndarray  # [n] bool
    lower: np.ndarray  # [n] internal (log where log_mask)
    upper: np.ndarray
    prior_mean: np.ndarray | None  # [n] physical
    prior_whitening: np.ndarray | None  # [n, n] inverse Cholesky factor of the prior covariance

    def to_physical(self, z: np.ndarray) -> np.ndarray:
        return _from_log(z, self.log_mask)

    def to_internal(self, x: np.ndarray) -> np.ndarray:
        return _to_log(x, self.log_mask)

    def augmented_residual(self, x: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Whitened residuals ``[K, M]``, prior rows appended."""
        r = self.observations.residual(values)
        if self.prior_whitening is None:
            return r
        return np.concatenate([r, (x - self.prior_mean) @ self.prior_whitening.T], axis=1)

    def augmented_jacobian(self, x: np.ndarray, jacobian: np.ndarray) -> np.ndarray:
        """Whitened physical Jacobian ``[K, M, n]``, prior rows appended."""
        jac = self.observations.jacobian(jacobian)
        if self.prior_whitening is None:
            return jac
        return np.concatenate([jac, np.broadcast_to(self.prior_whitening, (x.shape[0], self.n, self.n))], axis=1)


def _build_problem(observations, n, m, names, bounds, log_parameters, prior_mean, prior_cov) -> _Problem:
    log_mask = np.zeros(n, bool) if log_parameters is None else np.asarray(log_parameters)
    if log_mask.shape != (n,) or log_mask.dtype != bool:
        raise ConfigError(f"`log_parameters` must be a bool array of shape [{n}], "
                          f"got {log_mask.dtype} {list(log_mask.shape)}")
    if bounds is None:
        lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
    else:
        b = np.asarray(bounds, dtype=float)
        if b.shape != (n, 2):
            raise ConfigError(f"`bounds` must have shape [{n}, 2], got {list(b.shape)}")
        lo, hi = b[:, 0], b[:, 1]
        for j in range(n):
            if np.isnan(b[j]).any() or not lo[j] < hi[j]:
                raise ConfigError(f"`bounds` for {names[j]!r} must be low < high, got ({lo[j]}, {hi[j]})")
    for j in np.flatnonzero(log_mask):
        if bounds is not None and lo[j] < 0:
            raise ConfigError(f"`bounds` for log parameter {names[j]!r} must have low >= 0, got {lo[j]}")
    lo = np.where(log_mask, np.maximum(lo, 0.0), lo)
    prior_whitening = None
    if prior_cov is not None or prior_mean is not None:
        if prior_cov is None or prior_mean is None:
            raise ConfigError("a prior needs both `prior_mean` and `prior_cov`")
        if not observations.known_noise:
            raise ConfigError("a prior needs observation errors: give `sigma` or `cov` with `prior_cov`")
        prior_mean = np.asarray(prior_mean, dtype=float)
        if prior_mean.shape != (n,) or not np.all(np.isfinite(prior_mean)):
            raise ConfigError(f"`prior_mean` must be a finite array of shape [{n}], got {prior_mean!r}")
        pc = np.asarray(prior_cov, dtype=float)
        if pc.shape != (n, n) or not np.all(np.isfinite(pc)) or not np.allclose(pc, pc.T, rtol=1e-10, atol=0.0):
            raise ConfigError(f"`prior_cov` must be a finite symmetric [{n}, {n}] matrix, got shape {list(pc.shape)}")
        chol, info = linalg.lapack.dpotrf(pc, lower=True, clean=True)
        if info != 0:
            raise ConfigError(f"`prior_cov` must be positive definite, failed at parameter {names[max(info, 1) - 1]!r}")
        prior_whitening = linalg.solve_triangular(chol, np.eye(n), lower=True)
    return _Problem(observations, n, m, log_mask, _to_log(lo, log_mask), _to_log(hi, log_mask),
                    prior_mean, prior_whitening)


def _to_log(x: np.ndarray, log_mask: np.ndarray) -> np.ndarray:
    """Solver variables: ``log(x)`` where ``log_mask`` (``log(0) = -inf``), ``x`` elsewhere."""
    with np.errstate(divide="ignore"):
        return np.where(log_mask, np.log(np.where(log_mask, x, 1.0)), x)


def _from_log(z: np.ndarray, log_mask: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_to_log`."""
    with np.errstate(over="ignore"):
        return np.where(log_mask, np.exp(np.where(log_mask, z, 0.0)), z)


def _check_starts(starts, problem: _Problem, names: list[str]) -> np.ndarray:
    x = np.asarray(starts, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != problem.n or x.shape[0] == 0:
        raise ConfigError(f"`starts` must have shape [K, {problem.n}], got {list(np.shape(starts))}")
    bad = ~np.isfinite(x)
    if bad.any():
        k, j = np.argwhere(bad)[0]
        raise ConfigError(f"`starts`: {names[j]!r} is not finite at start {k}: {x[k, j]}")
    lo, hi = problem.to_physical(problem.lower), problem.to_physical(problem.upper)
    outside = (x < lo) | (x > hi) | (problem.log_mask & (x <= 0))
    if outside.any():
        k, j = np.argwhere(outside)[0]
        low = f"{lo[j]}" + (" (exclusive, log parameter)" if problem.log_mask[j] else "")
        raise ConfigError(f"`starts`: {names[j]!r} = {x[k, j]} at start {k} is outside its bounds [{low}, {hi[j]}]")
    return x


def _evaluate(fn: Callable, x: np.ndarray, m: int, n: int, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Call a model on ``x [K, n]``; check and return float64 ``values [K, m]`` and ``jacobian [K, m, n]``
    (None for a values-only model)."""
    out = fn(x)
    values, jacobian = (out, None) if what == "values" else out
    values = np.asarray(values, dtype=float)
    k = x.shape[0]
    if jacobian is None:
        if values.shape != (k, m):
            raise ModelError(f"`values` must return [{k}, {m}], got {list(values.shape)}")
        return values, None
    jacobian = np.asarray(jacobian)  # float32 stays float32 here: whitening reads it once into float64
    if values.shape != (k, m) or jacobian.shape != (k, m, n) or jacobian.dtype.kind != "f":
        raise ModelError(
            f"`{what}` must return values [{k}, {m}] and jacobian [{k}, {m}, {n}], "
            f"got {list(values.shape)} and {jacobian.dtype} {list(jacobian.shape)}"
        )
    return values, jacobian


@dataclass(frozen=True)
class _Calls:
    """The model calls of a solve.

    Trial points need values only; Jacobians are needed only where a step is accepted. With
    ``values`` given, trials call it and accepted points call ``step_jacobian`` (or
    ``value_and_jacobian``); without it, each trial is one ``value_and_jacobian`` call whose
    Jacobian is kept when the step is accepted.
    """

    value_and_jacobian: ValueAndJacobian
    values: ValuesFn | None
    step_jacobian: ValueAndJacobian | None
    m: int
    n: int

    def trial(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values at ``x`` and, when they came with it, the Jacobian."""
        if self.values is not None:  # values-only calls are cheap per point: one call, the model's own chunks
            return _evaluate(self.values, x, self.m, self.n, "values")
        return self.in_blocks(self.value_and_jacobian, x, "value_and_jacobian")

    def in_blocks(self, fn: Callable, x: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray | None]:
        """:func:`_evaluate` on blocks of :data:`_BLOCK` points (about the fastest Jacobian call size of a
        compiled model on CPU, where bigger calls fall out of cache), results joined."""
        if len(x) <= _BLOCK:
            return _evaluate(fn, x, self.m, self.n, what)
        parts = [_evaluate(fn, x[i : i + _BLOCK], self.m, self.n, what) for i in range(0, len(x), _BLOCK)]
        values = np.concatenate([p[0] for p in parts])
        return values, None if parts[0][1] is None else np.concatenate([p[1] for p in parts])

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """The Jacobian the steps use, at accepted points ``x``."""
        if self.step_jacobian is not None:
            return _evaluate(self.step_jacobian, x, self.m, self.n, "step_jacobian")[1]
        return _evaluate(self.value_and_jacobian, x, self.m, self.n, "value_and_jacobian")[1]


# ------------------------------------------------------------------------------ solving
@dataclass
class _Fits:
    """Mutable per-start state of the batched solve (internal).

    The iterations keep only ``[K, n]``-sized summaries of the weighted Jacobian (its normal
    matrix and the gradient); the full residuals and Jacobians at the estimates are filled in
    by one last model call (:func:`_finish`).
    """

    x: np.ndarray  # [K, n] physical, current accepted point
    cost: np.ndarray  # [K]
    normal: np.ndarray  # [K, n, n] J_z^T J_z, whitened, in the solver's variables
    gradient: np.ndarray  # [K, n] J_z^T r
    scaling: np.ndarray  # [K, n] the D of the module docstring
    damping: np.ndarray  # [K]
    nu: np.ndarray  # [K]
    status: np.ndarray  # [K] int
    n_iter: np.ndarray  # [K] int
    values: np.ndarray | None = None  # [K, m] at the estimates (after _finish)
    jacobian: np.ndarray | None = None  # [K, m, n] raw
    r: np.ndarray | None = None  # [K, M] whitened (with prior rows)
    jx: np.ndarray | None = None  # [K, M, n] whitened, physical

    def put(self, idx: np.ndarray, **arrays: np.ndarray) -> None:
        for key, value in arrays.items():
            getattr(self, key)[idx] = value


@dataclass
class _History:
    """Per-iteration records; column i holds every start's state after iteration i."""

    parameters: list[np.ndarray]
    cost: list[np.ndarray]
    gradient_norm: list[np.ndarray]
    damping: list[np.ndarray]
    step_norm: list[np.ndarray]
    accepted: list[np.ndarray]

    @classmethod
    def empty(cls) -> "_History":
        return cls([], [], [], [], [], [])

    def record(self, fits: _Fits, active: np.ndarray, gnorm: np.ndarray, step_norm: np.ndarray | None,
               accepted: np.ndarray | None) -> None:
        k, n = fits.x.shape
        row = np.full(k, np.nan)
        params = np.full((k, n), np.nan)
        params[active] = fits.x[active]
        self.parameters.append(params)
        for name, source in (("cost", fits.cost[active]), ("gradient_norm", gnorm), ("damping", fits.damping[active]),
                             ("step_norm", step_norm)):
            column = row.copy()
            if source is not None:
                column[active] = source
            getattr(self, name).append(column)
        flags = np.full(k, -1, dtype=np.int8)
        if accepted is not None:
            flags[active] = accepted.astype(np.int8)
        self.accepted.append(flags)


def _gradient_cosine(normal: np.ndarray, g: np.ndarray, cost: np.ndarray, free: np.ndarray) -> np.ndarray:
    """MINPACK's scaled gradient ``max_j |J_j^T r| / (|J_j| |r|)`` over free columns (0 when r = 0)."""
    col = np.sqrt(np.einsum("kii->ki", normal))
    rn = np.sqrt(2.0 * cost)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.abs(g) / (col * rn[:, None])
    cosine = np.where(free & (col > 0), cosine, 0.0)
    return np.where(rn > 0, cosine.max(axis=1), 0.0)


def _free(z: np.ndarray, g: np.ndarray, problem: _Problem) -> np.ndarray:
    """Parameters not held on a bound: a bound is active when the descent direction -g leaves the box."""
    return ~(((z <= problem.lower) & (g > 0)) | ((z >= problem.upper) & (g < 0)))


def _step(solver: Solver, normal: np.ndarray, g: np.ndarray, scaling: np.ndarray, damping: np.ndarray,
          free: np.ndarray, rcond: float) -> np.ndarray:
    """Solver step ``dz`` from the scaled normal equations restricted to the free parameters."""
    root = np.sqrt(scaling)
    pair = free[:, :, None] & free[:, None, :]
    eye = np.eye(g.shape[1], dtype=bool)
    scaled = np.where(pair, normal / (root[:, :, None] * root[:, None, :]), np.where(eye, 1.0, 0.0))
    dz_scaled = solver._solve(scaled, np.where(free, g / root, 0.0), damping, rcond)
    return np.where(free, dz_scaled / root, 0.0)  # exactly 0: a held parameter stays on its bound


def _projected_step(problem: _Problem, solver: Solver, z: np.ndarray, normal: np.ndarray, g: np.ndarray,
                    scaling: np.ndarray, damping: np.ndarray, rcond: float) -> np.ndarray:
    """The step with the active set of :func:`_free`; where it would leave the box, the parameters that
    cross a bound are moved onto it and the others solved again with that move fixed (the minimiser of
    the same quadratic model in the remaining subspace), so the step keeps its quality instead of being
    bent by clipping."""
    free = _free(z, g, problem)
    step = _step(solver, normal, g, scaling, damping, free, rcond)
    target = z + step
    crossing = (target < problem.lower) | (target > problem.upper)
    redo = np.flatnonzero(crossing.any(axis=1))
    if redo.size:
        fixed = np.where(crossing[redo], np.clip(target[redo], problem.lower, problem.upper) - z[redo], 0.0)
        g_fixed = g[redo] + np.einsum("kij,kj->ki", normal[redo], fixed)
        step[redo] = fixed + _step(solver, normal[redo], g_fixed, scaling[redo], damping[redo],
                                   free[redo] & ~crossing[redo], rcond)
    return step


def _summaries(problem: _Problem, x: np.ndarray, r: np.ndarray, jacobian: np.ndarray):
    """Normal matrix ``J_z^T J_z [K, n, n]``, gradient ``J_z^T r [K, n]`` and finiteness ``[K]`` of the
    whitened Jacobian (prior rows included) in the solver's variables.

    Only the observed rows of ``jacobian`` are touched, once; the prior rows and the chain rule of log
    parameters (``J_z = J_x diag(x)``) are applied to the ``[n, n]`` products.
    """
    m_o = problem.observations.n_observed
    jt = problem.observations.jacobian_transposed(jacobian)
    normal = jt @ jt.transpose(0, 2, 1)
    g = (jt @ r[:, :m_o, None])[:, :, 0]
    if problem.prior_whitening is not None:
        w = problem.prior_whitening
        normal += w.T @ w
        g += r[:, m_o:] @ w
    if problem.log_mask.any():
        chain = np.where(problem.log_mask, x, 1.0)
        normal *= chain[:, :, None] * chain[:, None, :]
        g *= chain
    finite = np.all(np.isfinite(normal), axis=(1, 2)) & np.all(np.isfinite(g), axis=1)
    normal[~finite], g[~finite] = 0.0, 0.0
    return normal, g, finite


def _jacobian_summaries(problem: _Problem, calls: _Calls, x: np.ndarray, r: np.ndarray,
                        jacobian: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_summaries` at accepted points ``x`` in blocks of :data:`_BLOCK` starts, each block's
    Jacobian computed (when not given) and reduced while it is in cache."""
    k, n = x.shape
    normal, g, finite = np.empty((k, n, n)), np.empty((k, n)), np.empty(k, bool)
    for start in range(0, k, _BLOCK):
        rows = slice(start, start + _BLOCK)
        jac = calls.jacobian(x[rows]) if jacobian is None else jacobian[rows]
        normal[rows], g[rows], finite[rows] = _summaries(problem, x[rows], r[rows], jac)
    return normal, g, finite


def _solve(problem: _Problem, calls: _Calls, x0: np.ndarray, solver: Solver,
           rcond: float) -> tuple[_Fits, _History]:
    k = x0.shape[0]
    values, jacobian = calls.trial(x0.copy())
    r = problem.augmented_residual(x0, values)
    with np.errstate(over="ignore", invalid="ignore"):
        cost = 0.5 * np.sum(r**2, axis=1)
    ok = np.isfinite(cost)
    normal, g = np.zeros((k, problem.n, problem.n)), np.zeros((k, problem.n))
    normal[ok], g[ok], finite = _jacobian_summaries(problem, calls, x0[ok], r[ok],
                                                    None if jacobian is None else jacobian[ok])
    ok[ok] = finite
    fits = _Fits(x=x0.copy(), cost=cost, normal=normal, gradient=g,
                 scaling=solver._scaling(np.einsum("kii->ki", normal), None),
                 damping=np.full(k, solver._start_damping()), nu=np.full(k, 2.0),
                 status=np.where(ok, _RUNNING, Status.NON_FINITE).astype(np.int16), n_iter=np.zeros(k, np.int32))
    gnorm = _gradient_cosine(normal[ok], g[ok], cost[ok], _free(problem.to_internal(x0[ok]), g[ok], problem))
    fits.status[np.flatnonzero(ok)[gnorm <= solver.gtol]] = Status.GTOL
    history = _History.empty()
    history.record(fits, np.flatnonzero(ok), gnorm, None, None)
    for _ in range(solver.max_iter):
        active = np.flatnonzero(fits.status == _RUNNING)
        if active.size == 0:
            break
        _iterate(problem, calls, solver, fits, history, active, rcond)
    fits.status[fits.status == _RUNNING] = Status.MAX_ITER
    _finish(problem, calls, fits)
    return fits, history


def _iterate(problem: _Problem, calls: _Calls, solver: Solver, fits: _Fits, history: _History, a: np.ndarray,
             rcond: float) -> None:
    """One batched iteration over the active starts ``a``: one trial call for all of them, and a
    Jacobian call for those whose step was accepted (unless the trial call brought it)."""
    x, cost_old, scaling = fits.x[a], fits.cost[a], fits.scaling[a]
    z, normal, g = problem.to_internal(x), fits.normal[a], fits.gradient[a]
    step = _projected_step(problem, solver, z, normal, g, scaling, fits.damping[a], rcond)
    z_try = np.clip(z + step, problem.lower, problem.upper)
    dz = z_try - z
    pred = -np.sum(g * dz, axis=1) - 0.5 * np.einsum("ki,kij,kj->k", dz, normal, dz)
    x_try = problem.to_physical(z_try)
    values, jacobian = calls.trial(x_try)
    r_try = problem.augmented_residual(x_try, values)
    with np.errstate(over="ignore", invalid="ignore"):
        cost_try = 0.5 * np.sum(r_try**2, axis=1)
    finite = np.isfinite(cost_try)
    ared = cost_old - cost_try
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(finite & (pred > 0), ared / pred, -np.inf)
    accepted = solver._accepts(rho, finite)
    took = np.flatnonzero(accepted)
    if took.size:
        normal_new, g_new, jac_finite = _jacobian_summaries(problem, calls, x_try[took], r_try[took],
                                                            None if jacobian is None else jacobian[took])
        accepted[took[~jac_finite]] = False  # a non-finite Jacobian rejects the step like a non-finite value
        kept = took[jac_finite]
        fits.put(a[kept], x=x_try[kept], cost=cost_try[kept], normal=normal_new[jac_finite], gradient=g_new[jac_finite])
    fits.damping[a], fits.nu[a] = solver._update(fits.damping[a], fits.nu[a], rho, accepted)
    fits.n_iter[a] += 1
    normal_now, g_now = fits.normal[a], fits.gradient[a]
    fits.scaling[a] = np.where(accepted[:, None], solver._scaling(np.einsum("kii->ki", normal_now), scaling), scaling)
    gnorm = _gradient_cosine(normal_now, g_now, fits.cost[a], _free(problem.to_internal(fits.x[a]), g_now, problem))
    xtol_hit = np.all(np.abs(dz) <= solver.xtol * (solver.xtol + np.abs(z)), axis=1)
    ftol_hit = finite & (np.abs(ared) <= solver.ftol * cost_old) & (pred <= solver.ftol * cost_old)
    fits.status[a] = np.select([gnorm <= solver.gtol, ftol_hit, xtol_hit],
                               [Status.GTOL, Status.FTOL, Status.XTOL], _RUNNING)
    history.record(fits, a, gnorm, np.linalg.norm(np.sqrt(scaling) * dz, axis=1), accepted)


def _finish(problem: _Problem, calls: _Calls, fits: _Fits) -> None:
    """Values, Jacobians and whitened residuals at the estimates from ``value_and_jacobian`` (one call per
    block of starts), so the statistics use its (full-precision) Jacobian whatever the steps used."""
    values, jacobian = calls.in_blocks(calls.value_and_jacobian, fits.x, "value_and_jacobian")
    r = problem.augmented_residual(fits.x, values)
    fits.values, fits.jacobian, fits.r = values, jacobian.astype(float, copy=False), r
    fits.jx = problem.augmented_jacobian(fits.x, jacobian)
    with np.errstate(over="ignore", invalid="ignore"):
        fits.cost = np.where(fits.status == Status.NON_FINITE, fits.cost, 0.5 * np.sum(r**2, axis=1))


# --------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class _Posterior:
    """Per-start statistics at the final estimates (physical units)."""

    chi2: np.ndarray
    dof: int
    residual_variance: np.ndarray
    covariance: np.ndarray
    band_covariance: np.ndarray
    rank: np.ndarray
    data_svd: ident.EquilibratedSVD
    data_rank: np.ndarray
    identifiability: np.ndarray
    condition_number: np.ndarray
    neg2_log_likelihood: np.ndarray
    n_fitted: int


def _posterior(problem: _Problem, fits: _Fits, rcond: float) -> _Posterior:
    obs = problem.observations
    m_o, n = obs.n_observed, problem.n
    usable = fits.status != Status.NON_FINITE
    jx = np.where(usable[:, None, None], fits.jx, np.nan)
    chi2 = np.where(usable, np.sum(fits.r[:, :m_o] ** 2, axis=1), np.nan)
    dof = m_o - n
    if obs.known_noise:
        s2 = np.ones_like(chi2)
        neg2 = chi2 + m_o * np.log(2 * np.pi) + obs.log_det_cov
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            s2 = chi2 / dof if dof > 0 else np.full_like(chi2, np.nan)
            neg2 = m_o * (np.log(2 * np.pi * chi2 / m_o) + 1.0)
    full_svd = ident.equilibrated_svd(jx)
    rank = full_svd.rank(rcond)
    band_cov = ident.pseudo_inverse_covariance(full_svd, rank) * s2[:, None, None]
    covariance = np.where((rank == n)[:, None, None], band_cov, np.nan)
    data_svd = full_svd if problem.prior_whitening is None else ident.equilibrated_svd(jx[:, :m_o])
    data_rank = data_svd.rank(rcond)
    return _Posterior(chi2=chi2, dof=dof, residual_variance=s2, covariance=covariance, band_covariance=band_cov,
                      rank=rank, data_svd=data_svd, data_rank=data_rank,
                      identifiability=ident.identifiability(data_svd, data_rank),
                      condition_number=data_svd.condition_number(), neg2_log_likelihood=neg2,
                      n_fitted=n + (0 if obs.known_noise else 1))


def distinct_minima(estimates: np.ndarray, cost: np.ndarray, ok: np.ndarray, rtol: float) -> np.ndarray:
    """Label each start with the index of its minimum, minima numbered by increasing cost.

    Two estimates belong to the same minimum when every parameter agrees within
    ``rtol`` relative to the larger magnitude. Greedy in order of cost: the
    lowest-cost start not yet labeled founds a minimum and takes every unlabeled
    start that agrees with it (cost ``O(K x minima)``).

    Parameters
    ----------
    estimates
        ``[K, n]`` final parameter values.
    cost
        ``[K]`` final costs.
    ok
        ``[K]`` bool, starts to cluster (others get -1).
    rtol
        Relative tolerance (dimensionless).

    Returns
    -------
    ``[K]`` int minimum index, -1 for starts not clustered.
    """
    labels = np.full(cost.shape, -1, dtype=np.int32)
    pending = np.flatnonzero(ok)[np.argsort(cost[ok], kind="stable")]
    while pending.size:
        founder = estimates[pending[0]]
        rest = estimates[pending]
        close = np.all(np.abs(rest - founder) <= rtol * np.maximum(np.abs(rest), np.abs(founder)), axis=1)
        close[0] = True
        labels[pending[close]] = labels.max() + 1
        pending = pending[~close]
    return labels


# ------------------------------------------------------------------------------ the verb
def calibrate(
    value_and_jacobian: ValueAndJacobian,
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
    solver: Solver = LevenbergMarquardt(),
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
    step_jacobian: ValueAndJacobian | None = None,
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
        ``[n, 2]`` (low, high); ``±inf`` for none. Respected by projection (see module docstring).
    log_parameters
        ``[n]`` bool: fit ``log(x)`` for these parameters (they must stay > 0).
    solver
        :class:`LevenbergMarquardt` (default) or :class:`GaussNewton` settings.
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
        Relative tolerance for grouping final estimates into distinct minima.
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
        ``minimum``; scalars ``best_start`` and ``n_minima``.

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
    if not isinstance(solver, (LevenbergMarquardt, GaussNewton)):
        raise ConfigError(f"`solver` must be LevenbergMarquardt(...) or GaussNewton(...), got {solver!r}")
    n = len(parameter_names) if parameter_names is not None else (np.shape(starts)[-1] if np.ndim(starts) else 0)
    names = _labels(parameter_names, n, "parameter_names", "p")
    observations = ObservationModel.from_arrays(y_obs, sigma=sigma, cov=cov, mask=mask, output_names=output_names)
    m = observations.y_obs.size
    onames = _labels(output_names, m, "output_names", "y")
    problem = _build_problem(observations, n, m, names, bounds, log_parameters, prior_mean, prior_cov)
    x0 = _check_starts(starts, problem, names)
    if step_jacobian is not None and values is None:
        raise ConfigError("`step_jacobian` needs `values` (the cost must come from full-precision values)")
    calls = _Calls(value_and_jacobian, values, step_jacobian, m, n)
    fits, history = _solve(problem, calls, x0, solver, rcond)
    post = _posterior(problem, fits, rcond)
    converged = fits.status > 0
    fits.status[converged & (post.rank < n)] = Status.SINGULAR
    ok = ~np.isin(fits.status, FAILED)
    if throw and not ok.any():
        counts = {Status(s).name: int(c) for s, c in zip(*np.unique(fits.status, return_counts=True))}
        raise CalibrationError(f"calibrate: all {len(ok)} starts failed ({counts}); see `status` with throw=False")
    minimum = distinct_minima(fits.x, fits.cost, ok, minima_rtol)
    labels = _Labels(names, parameter_units, onames, output_units)
    settings = {"solver": repr(solver), "rcond": rcond, "level": level}
    return _to_dataset(problem, fits, history if record_history else None, post, x0, minimum, labels, settings)


def _labels(names: Sequence[str] | None, n: int, what: str, prefix: str) -> list[str]:
    if names is None:
        return [f"{prefix}{i}" for i in range(n)]
    names = list(names)
    if len(names) != n:
        raise ConfigError(f"`{what}` must have {n} entries, got {len(names)}")
    return names


# ------------------------------------------------------------------------------ dataset
@dataclass(frozen=True)
class _Labels:
    """Names and units of the two labeled axes."""

    names: list[str]
    punits: Sequence[str] | None
    onames: list[str]
    ounits: Sequence[str] | None


@dataclass(frozen=True)
class _Units:
    """CF attributes of variables on the parameter or output axis.

    A labeled axis whose entries share one unit gives that ``units``; when they
    differ, ``units_coordinate`` names the coordinate that holds them per entry.
    """

    parameter: str | None
    parameter_ref: str | None
    output: str | None
    output_ref: str | None
    known_noise: bool

    @classmethod
    def of(cls, labels: _Labels, known_noise: bool) -> "_Units":
        def common(units):
            return units[0] if units is not None and len(set(units)) == 1 else None

        return cls(common(labels.punits), "parameter_units" if labels.punits is not None else None,
                   common(labels.ounits), "output_units" if labels.ounits is not None else None, known_noise)

    @staticmethod
    def _attrs(long_name: str, units: str | None, ref: str | None) -> dict:
        if units is not None:
            return {"long_name": long_name, "units": units}
        return {"long_name": long_name, "units_coordinate": ref} if ref is not None else {"long_name": long_name}

    def param(self, long_name: str) -> dict:
        return self._attrs(long_name, self.parameter, self.parameter_ref)

    def param_squared(self, long_name: str) -> dict:
        units = product(self.parameter, self.parameter) if self.parameter is not None else None
        return self._attrs(long_name, units, self.parameter_ref)

    def out(self, long_name: str) -> dict:
        return self._attrs(long_name, self.output, self.output_ref)

    def cost(self, long_name: str) -> dict:
        """Whitened squares are dimensionless; unweighted ones carry squared output units."""
        if self.known_noise:
            return {"long_name": long_name, "units": "1"}
        return self._attrs(long_name, product(self.output, self.output) if self.output else None, self.output_ref)


def _one(long_name: str, **extra) -> dict:
    """Attributes of a dimensionless variable."""
    return {"long_name": long_name, "units": "1", **extra}


def _to_dataset(problem: _Problem, fits: _Fits, history: _History | None, post: _Posterior, x0: np.ndarray,
                minimum: np.ndarray, labels: _Labels, settings: dict) -> xr.Dataset:
    units = _Units.of(labels, problem.observations.known_noise)
    data = {**_observation_vars(problem.observations, problem.m, units),
            **_fit_vars(fits, x0, minimum, units),
            **_statistics_vars(problem, fits, post, settings["level"], units)}
    if problem.prior_mean is not None:
        prior_cov = np.linalg.inv(problem.prior_whitening.T @ problem.prior_whitening)
        data["prior_mean"] = (("parameter",), problem.prior_mean, units.param("prior mean"))
        data["prior_std"] = (("parameter",), np.sqrt(np.diag(prior_cov)), units.param("prior standard deviation"))
    if history is not None:
        data.update(_history_vars(history, units, settings["solver"].startswith("GaussNewton")))
    k, n = fits.x.shape
    coords = {
        "start": xr.Variable("start", np.arange(k, dtype=np.int32), _one("start index")),
        "component": xr.Variable("component", np.arange(n, dtype=np.int32), _one("singular component")),
        "bound": xr.Variable("bound", np.array(["low", "high"], dtype=object), {"long_name": "interval bound"}),
        **parameter_coords(labels.names, labels.punits),
        **output_coords(labels.onames, labels.ounits),
        **matrix_coords("parameter", labels.names, labels.punits),
    }
    if history is not None:
        coords["iteration"] = xr.Variable("iteration", np.arange(len(history.cost), dtype=np.int32),
                                          _one("solver iteration (0: start)"))
    attrs = {"title": "calibration", **settings,
             "log_parameters": " ".join(nm for nm, lg in zip(labels.names, problem.log_mask) if lg),
             "noise": "known (sigma or cov)" if units.known_noise else "unknown (covariance scaled by s^2)",
             "aic_bic": "-2 ln L + 2k, -2 ln L + k ln m_observed; Gaussian data likelihood at the estimate, "
                        "k = n parameters (+1 when the noise variance is estimated)"}
    variables = {key: xr.Variable(dims, values, attrs) for key, (dims, values, attrs) in data.items()}
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def _observation_vars(obs: ObservationModel, m: int, units: _Units) -> dict:
    observed = np.zeros(m, dtype=np.int8)
    observed[obs.observed] = 1
    return {
        "y_obs": (("output",), obs.y_obs, units.out("observed output")),
        "observation_std": (("output",), obs.observation_std(), units.out("standard deviation of the observation")),
        "observed": (("output",), observed, {"long_name": "output enters the fit",
                                              "flag_values": np.array([0, 1], np.int8),
                                              "flag_meanings": "missing_or_masked observed"}),
    }


def _fit_vars(fits: _Fits, x0: np.ndarray, minimum: np.ndarray, units: _Units) -> dict:
    failed = fits.status == Status.NON_FINITE
    ok = minimum >= 0
    best = int(np.flatnonzero(ok)[np.argmin(fits.cost[ok])]) if ok.any() else -1
    status_flags = {"flag_values": np.array([int(s) for s in Status], dtype=np.int16),
                    "flag_meanings": " ".join(s.name.lower() for s in Status)}
    messages = np.array([STATUS_MESSAGES[int(s)] for s in fits.status], dtype=object)
    return {
        "start_value": (("start", "parameter"), x0, units.param("starting parameter value")),
        "estimate": (("start", "parameter"), np.where(failed[:, None], np.nan, fits.x),
                     units.param("fitted parameter value")),
        "status": (("start",), fits.status.astype(np.int16), {"long_name": "termination status", **status_flags}),
        "message": (("start",), messages, {"long_name": "termination message"}),
        "n_iterations": (("start",), fits.n_iter, _one("solver iterations (trial points after the start)")),
        "cost": (("start",), np.where(failed, np.nan, fits.cost),
                 units.cost("half the squared norm of the whitened residuals, prior rows included")),
        "minimum": (("start",), minimum, _one("index of the distinct minimum reached (-1: failed)")),
        "best_start": ((), np.int32(best), {"long_name": "start of lowest cost among successful fits (-1: none)"}),
        "n_minima": ((), np.int32(minimum.max() + 1), _one("number of distinct minima")),
        "model_output": (("start", "output"), np.where(failed[:, None], np.nan, fits.values),
                         units.out("model output at the estimate")),
    }


def _statistics_vars(problem: _Problem, fits: _Fits, post: _Posterior, level: float, units: _Units) -> dict:
    obs = problem.observations
    failed = (fits.status == Status.NON_FINITE)
    estimate = np.where(failed[:, None], np.nan, fits.x)
    model_output = np.where(failed[:, None], np.nan, fits.values)
    se = np.sqrt(np.einsum("kii->ki", post.covariance))
    q = stats.norm.ppf(0.5 + level / 2) if obs.known_noise else stats.t.ppf(0.5 + level / 2, post.dof)
    band_sd = ident.delta_method_std(np.where(failed[:, None, None], np.nan, fits.jacobian), post.band_covariance)
    with np.errstate(invalid="ignore", divide="ignore"):
        reduced = post.chi2 / post.dof if post.dof > 0 else np.full(post.chi2.shape, np.nan)
    neg2, k = post.neg2_log_likelihood, post.n_fitted
    ps, po, pij = ("start", "parameter"), ("start", "output"), ("start", "parameter_i", "parameter_j")
    return {
        "residual": (po, obs.y_obs[None, :] - model_output, units.out("observation minus model output")),
        "chi2": (("start",), post.chi2, units.cost("sum of squared whitened data residuals")),
        "reduced_chi2": (("start",), reduced, units.cost("chi2 / (m_observed - n_parameters)")),
        "residual_variance": (("start",), post.residual_variance,
                              {"long_name": "factor applied to the covariance (s^2 when sigma is unknown, else 1)"}),
        "aic": (("start",), neg2 + 2 * k, _one("Akaike information criterion -2 ln L + 2 k")),
        "bic": (("start",), neg2 + k * np.log(obs.n_observed), _one("Bayesian information criterion -2 ln L + k ln m")),
        "covariance": (pij, post.covariance, units.param_squared("parameter covariance (NaN when rank-deficient)")),
        "standard_error": (ps, se, units.param("standard error of the estimate")),
        "correlation": (pij, ident.correlation(post.covariance), _one("parameter correlation")),
        "parameter_interval": (ps + ("bound",), _parameter_interval(estimate, se, problem.log_mask, q),
                               units.param(f"{level:.0%} interval of the parameter (symmetric in log x for "
                                           "log parameters)")),
        "prediction_std": (po, band_sd, units.out("delta-method standard deviation of the model output")),
        "prediction_band": (po + ("bound",), np.stack([model_output - q * band_sd, model_output + q * band_sd], -1),
                            units.out(f"{level:.0%} delta-method band of the model output (no observation noise)")),
        "singular_value": (("start", "component"), post.data_svd.singular_values,
                           _one("singular value of the column-equilibrated weighted data Jacobian")),
        "singular_vector": (("start", "component", "parameter"), post.data_svd.vt,
                            _one("right singular vector in equilibrated parameter space")),
        "rank": (("start",), post.data_rank.astype(np.int32), _one("numerical rank of the weighted data Jacobian")),
        "condition_number": (("start",), post.condition_number,
                             _one("condition number of the column-equilibrated weighted data Jacobian")),
        "identifiability": (ps, post.identifiability, _one("parameter identifiability (Doherty and Hunt 2009)")),
    }


def _parameter_interval(estimate: np.ndarray, se: np.ndarray, log_mask: np.ndarray, q: float) -> np.ndarray:
    """``[K, n, 2]`` estimate -/+ q se; for log parameters ``x exp(-/+ q se / x)`` (symmetric in log x)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        factor = np.exp(q * se / estimate)
    low = np.where(log_mask, estimate / factor, estimate - q * se)
    high = np.where(log_mask, estimate * factor, estimate + q * se)
    return np.stack([low, high], axis=-1)


def _history_vars(history: _History, units: _Units, gauss_newton: bool) -> dict:
    damping = "step fraction alpha (Gauss-Newton)" if gauss_newton else "damping lambda relative to the scaling D"
    si = ("start", "iteration")
    return {
        "history_parameter": (si + ("parameter",), np.stack(history.parameters, axis=1),
                              units.param("parameter value after the iteration")),
        "history_cost": (si, np.stack(history.cost, axis=1), units.cost("cost after the iteration")),
        "history_gradient_norm": (si, np.stack(history.gradient_norm, axis=1),
                                  _one("scaled gradient max_j |J_j^T r| / (|J_j| |r|)")),
        "history_damping": (si, np.stack(history.damping, axis=1), _one(damping)),
        "history_step_norm": (si, np.stack(history.step_norm, axis=1), _one("scaled norm |D^(1/2) dz| of the step")),
        "history_accepted": (si, np.stack(history.accepted, axis=1),
                             {"long_name": "step accepted", "flag_values": np.array([-1, 0, 1], np.int8),
                              "flag_meanings": "no_step rejected accepted"}),
    }
