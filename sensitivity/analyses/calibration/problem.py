"""One calibration problem: observations, bounds, log-space parameters and a Gaussian prior.

The solver works in its own variables ``z``: ``z = log(x)`` for log parameters (chain rule
``dF/dz = dF/dx * x`` on the Jacobian), ``z = x`` for the others. Bounds, prior,
covariance and all outputs stay in physical units; since ``J_z = J_x diag(x)``, the
covariance at the optimum is the same in either parametrisation. Residuals and Jacobians
are whitened, with the prior's whitened rows appended for a MAP fit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sensitivity.analyses.calibration.observation_model import ObservationModel
from sensitivity.inputs.covariance import checked_covariance
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

linalg = lazy_import("scipy.linalg")


@dataclass(frozen=True)
class Problem:
    """Everything about one calibration except the starts and the solver."""

    observations: ObservationModel
    n: int
    m: int
    log_mask: np.ndarray  # [n] bool
    lower: np.ndarray  # [n] internal (log where log_mask)
    upper: np.ndarray
    prior_mean: np.ndarray | None  # [n] physical
    prior_whitening: np.ndarray | None  # [n, n] inverse Cholesky factor of the prior covariance

    @property
    def prior_covariance(self) -> np.ndarray | None:
        """``[n, n]`` the prior covariance (physical units), None without a prior."""
        if self.prior_whitening is None:
            return None
        return np.linalg.inv(self.prior_whitening.T @ self.prior_whitening)

    def from_internal(self, z: np.ndarray) -> np.ndarray:
        """Physical parameters ``x`` of the solver's variables ``z`` (``exp`` for log parameters)."""
        return _from_log(z, self.log_mask)

    def to_internal(self, x: np.ndarray) -> np.ndarray:
        """The solver's variables ``z`` of physical parameters ``x`` (``log`` for log parameters)."""
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


def build_problem(observations, n, m, names, bounds, log_parameters, prior_mean, prior_cov) -> Problem:
    """Validate bounds, log parameters and prior (errors name the parameter) and build the :class:`Problem`."""
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
        _, chol = checked_covariance(prior_cov, n, "`prior_cov`", labels=[f"parameter {name!r}" for name in names])
        prior_whitening = linalg.solve_triangular(chol, np.eye(n), lower=True)
    return Problem(observations, n, m, log_mask, _to_log(lo, log_mask), _to_log(hi, log_mask),
                   prior_mean, prior_whitening)


def _to_log(x: np.ndarray, log_mask: np.ndarray) -> np.ndarray:
    """Solver variables: ``log(x)`` where ``log_mask`` (``log(0) = -inf``), ``x`` elsewhere."""
    with np.errstate(divide="ignore"):
        return np.where(log_mask, np.log(np.where(log_mask, x, 1.0)), x)


def _from_log(z: np.ndarray, log_mask: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_to_log`."""
    with np.errstate(over="ignore"):
        return np.where(log_mask, np.exp(np.where(log_mask, z, 0.0)), z)


def check_starts(starts, problem: Problem, names: list[str]) -> np.ndarray:
    """``[K, n]`` float starts, each finite and inside the bounds (a single ``[n]`` start is accepted)."""
    x = np.asarray(starts, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != problem.n or x.shape[0] == 0:
        raise ConfigError(f"`starts` must have shape [K, {problem.n}], got {list(np.shape(starts))}")
    bad = ~np.isfinite(x)
    if bad.any():
        k, j = np.argwhere(bad)[0]
        raise ConfigError(f"`starts`: {names[j]!r} is not finite at start {k}: {x[k, j]}")
    # compared in the solver's variables, where the bounds are held: a start on a log parameter's bound is
    # inside, though exp(log(low)) may round above low
    with np.errstate(invalid="ignore"):
        z = problem.to_internal(np.where(problem.log_mask & (x <= 0), np.nan, x))
    outside = np.isnan(z) | (z < problem.lower) | (z > problem.upper)
    if outside.any():
        k, j = np.argwhere(outside)[0]
        lo, hi = problem.from_internal(problem.lower)[j], problem.from_internal(problem.upper)[j]
        low = f"{lo:.10g}" + (" (exclusive, log parameter)" if problem.log_mask[j] and lo == 0 else "")
        raise ConfigError(f"`starts`: {names[j]!r} = {x[k, j]} at start {k} is outside its bounds [{low}, {hi:.10g}]")
    return x
