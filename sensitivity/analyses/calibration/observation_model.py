"""Observations, which of them enter a fit, and their whitening ``W = L^{-1}`` (``L L^T`` the covariance).

Every residual and Jacobian of the calibration and of the step map is whitened here, so both
weigh the outputs by the same rule: ``diag(1/sigma)`` for independent errors, the inverse
Cholesky factor of ``cov`` (restricted to the observed outputs) for correlated ones, unit
weights when the noise is unknown.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from sensitivity.inputs.covariance import checked_covariance
from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import

linalg = lazy_import("scipy.linalg")


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
        _check_scale(y, observed, whitening, names)
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

    def covariance(self) -> np.ndarray:
        """``[m, m]`` observation covariance [output units^2] of the observed outputs (``L L^T``), zero elsewhere and
        where the noise is unknown."""
        m, o = self.y_obs.size, self.observed
        out = np.zeros((m, m))
        if not self.known_noise:
            return out
        if self.whitening.ndim == 1:
            out[o, o] = 1.0 / self.whitening**2
        else:
            chol = linalg.solve_triangular(self.whitening, np.eye(self.n_observed), lower=True)
            out[np.ix_(o, o)] = chol @ chol.T
        return out

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
    _, chol = checked_covariance(c[np.ix_(observed, observed)], observed.size, "`cov` on the observed outputs",
                                 labels=[f"output {names[i]!r}" for i in observed], error=DataError)
    inv_chol = linalg.solve_triangular(chol, np.eye(observed.size), lower=True)
    return inv_chol, float(2.0 * np.log(np.diag(chol)).sum())


#: Largest whitened observation whose square (a cost term) stays far inside float64.
_MAX_WHITENED = 1e100


def _check_scale(y: np.ndarray, observed: np.ndarray, whitening: np.ndarray, names: Sequence[str]) -> None:
    """Refuse observations whose whitened value cannot be squared in float64 (a 1e300 value, a 1e-300 sigma),
    naming the output, the value and its error, instead of a fit that fails at every start."""
    scale = np.abs(whitening) if whitening.ndim == 1 else np.abs(whitening).sum(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        whitened = np.abs(y[observed]) * scale
    bad = np.flatnonzero(~(whitened < _MAX_WHITENED))
    if bad.size:
        k = observed[bad[0]]
        raise DataError(f"observed output {names[k]!r} = {y[k]:.3g} with an error of {1 / scale[bad[0]]:.3g}: "
                        f"value / error = {whitened[bad[0]]:.3g} cannot be squared in float64; give the observations "
                        "and their errors in other units")
