"""First-order second-moment (FOSM) analysis of a linear Gaussian model: the Schur complement of pyEMU.

The model is ``d = J x + e`` with the prior ``x ~ N(mu, C_p)`` and the noise ``e ~ N(0, C_e)``; a forecast is
``s = y^T x`` with ``y`` the forecast's sensitivities ``ds/dx``. Bayes' rule gives the posterior parameter
covariance and the forecast variances (Tarantola 2005, eq. 3.38; the notation of pyEMU's ``Schur``, White et al.
2016)::

    P = (C_p^-1 + J^T C_e^-1 J)^-1 = C_p - C_p J^T (J C_p J^T + C_e)^-1 J C_p
    prior variance  y^T C_p y,       posterior variance  y^T P y.

How it is computed, and why
---------------------------
Neither of the two textbook forms is used as written. The information form inverts ``C_p`` (pyEMU's ``Schur``
does: ``(parcov.inv + xtqx).inv``) and squares the condition number in the normal matrix; the Schur form
subtracts two nearly equal matrices wherever the data determine a direction much better than the prior does,
and can return a forecast variance that is negative by round-off. Here the problem is whitened first: with the
Cholesky factors ``C_p = L L^T`` and ``C_e = R_e R_e^T`` and the whitened Jacobian ``A = R_e^-1 J L``, ::

    P = L (I + A^T A)^-1 L^T,     I + A^T A = R^T R,     R from the QR factorisation of [A; I],

so that ``P = F F^T`` with ``F = L R^-1`` and a forecast variance is a sum of squares ``|R^-T L^T y|^2``:
never negative, no subtraction, no inverse of ``C_p`` (a prior with tiny variances is as easy as a wide one), and
``I + A^T A`` has every eigenvalue at least 1, so the triangular solves are well conditioned wherever the data
are not far more informative than the prior; QR on ``[A; I]`` rather than Cholesky on ``I + A^T A`` keeps the
error at ``eps cond(R)`` instead of ``eps cond(R)^2`` (Bjorck 1996, sec. 2.2). ``R`` is also the factor that a
new observation updates by appending a row (:mod:`.data_worth`).

References
----------
Tarantola, A. (2005). Inverse Problem Theory and Methods for Model Parameter Estimation. SIAM.
https://doi.org/10.1137/1.9780898717921

White, J. T., Fienen, M. N., and Doherty, J. E. (2016). A python framework for environmental model uncertainty
analysis. Environmental Modelling & Software 85, 217-228. https://doi.org/10.1016/j.envsoft.2016.08.017

Bjorck, A. (1996). Numerical Methods for Least Squares Problems. SIAM. https://doi.org/10.1137/1.9781611971484
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sensitivity.errors import ConfigError

#: Relative asymmetry of a covariance matrix above which it is refused (``|C - C^T| > tol * max|C|``).
SYMMETRY_TOLERANCE = 1e-10


@dataclass(frozen=True)
class FOSM:
    """The linear Gaussian problem, its factors, and its prior and posterior forecast variances.

    Attributes
    ----------
    jacobian
        ``[n_obs, n_par]`` observation Jacobian ``J`` [observation units / parameter units].
    prior_covariance
        ``[n_par, n_par]`` prior parameter covariance ``C_p`` [parameter units squared].
    noise_covariance
        ``[n_obs, n_obs]`` observation noise covariance ``C_e`` [observation units squared].
    noise_is_diagonal
        Whether ``C_e`` was given as (or is) diagonal: removing an observation then drops a row of ``A``.
    forecasts
        ``[n_par, n_fore]`` forecast sensitivities ``y``, a column per forecast [forecast units / parameter units].
    parameter_names, observation_names, forecast_names
        Names of the columns of ``J``, its rows, and the columns of ``y``.
    prior_factor
        ``[n_par, n_par]`` lower Cholesky factor ``L`` of ``C_p``.
    whitened_jacobian
        ``[n_obs, n_par]`` noise-whitened Jacobian ``R_e^-1 J`` (not yet multiplied by ``L``).
    information_factor
        ``[n_par, n_par]`` upper triangular ``R`` with ``R^T R = I + A^T A``, ``A = R_e^-1 J L``.
    posterior_factor
        ``[n_par, n_par]`` ``F = L R^-1``; the posterior covariance is ``F F^T``.
    prior_variance, posterior_variance
        ``[n_fore]`` forecast variances ``y^T C_p y`` and ``y^T P y`` [forecast units squared].
    """

    jacobian: np.ndarray
    prior_covariance: np.ndarray
    noise_covariance: np.ndarray
    noise_is_diagonal: bool
    forecasts: np.ndarray
    parameter_names: tuple[str, ...]
    observation_names: tuple[str, ...]
    forecast_names: tuple[str, ...]
    prior_factor: np.ndarray
    whitened_jacobian: np.ndarray
    information_factor: np.ndarray
    posterior_factor: np.ndarray
    prior_variance: np.ndarray
    posterior_variance: np.ndarray

    @property
    def posterior_covariance(self) -> np.ndarray:
        """``[n_par, n_par]`` posterior parameter covariance ``P = F F^T`` [parameter units squared]."""
        return self.posterior_factor @ self.posterior_factor.T

    @property
    def variance_reduction(self) -> np.ndarray:
        """``[n_fore]`` fraction of each forecast's prior variance the data remove, ``1 - post / prior``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.prior_variance > 0, 1.0 - self.posterior_variance / self.prior_variance, 0.0)

    @property
    def log_det_posterior(self) -> float:
        """``ln det P`` (the D-optimality criterion, smaller is better)."""
        return log_det(self.prior_factor, self.information_factor)

    @property
    def trace_posterior(self) -> float:
        """``trace P`` (the A-optimality criterion, smaller is better) [parameter units squared]."""
        return float(np.sum(self.posterior_factor**2))

    def forecast_index(self, name: str) -> int:
        """Position of the forecast ``name``; a ConfigError names an unknown one."""
        if name not in self.forecast_names:
            raise ConfigError(f"forecast {name!r} is not one of the forecasts {list(self.forecast_names)}")
        return self.forecast_names.index(name)


def fosm(jacobian: np.ndarray, prior_covariance: np.ndarray, noise: np.ndarray, forecasts: np.ndarray, *,
         parameter_names: Sequence[str] | None = None, observation_names: Sequence[str] | None = None,
         forecast_names: Sequence[str] | None = None) -> FOSM:
    """Posterior parameter covariance and prior and posterior forecast variances of a linear Gaussian model.

    Parameters
    ----------
    jacobian
        ``[n_obs, n_par]`` observation Jacobian ``J = dd/dx`` [observation units / parameter units]; ``n_obs`` may
        be 0 (no data yet: the posterior is the prior).
    prior_covariance
        ``[n_par, n_par]`` prior covariance ``C_p``, or ``[n_par]`` prior variances [parameter units squared];
        symmetric positive definite.
    noise
        ``[n_obs, n_obs]`` noise covariance ``C_e``, or ``[n_obs]`` noise variances [observation units squared];
        symmetric positive definite.
    forecasts
        ``[n_par, n_fore]`` forecast sensitivities ``y`` (a column per forecast), or ``[n_par]`` for one forecast.
    parameter_names, observation_names, forecast_names
        Names of the parameters, observations and forecasts; by default ``par_0``, ``obs_0``, ``forecast_0``, ...

    Returns
    -------
    FOSM
        The problem, its factors, and the forecast variances.

    Raises
    ------
    ConfigError
        A shape that does not match, a non-finite entry, a covariance that is not symmetric positive definite
        (a singular prior), duplicate or miscounted names.
    """
    jac = finite_array(jacobian, "jacobian")
    if jac.ndim != 2 or jac.shape[1] == 0:
        raise ConfigError(f"jacobian must be a 2-D array [n_obs, n_par] with n_par >= 1, got shape {jac.shape}")
    n_obs, n_par = jac.shape
    prior = covariance_matrix(prior_covariance, n_par, "prior_covariance")
    noise_cov = covariance_matrix(noise, n_obs, "noise")
    diagonal = bool(np.all(noise_cov == np.diag(np.diag(noise_cov))))
    if diagonal and np.any(np.diag(noise_cov) <= 0):
        bad = int(np.argmin(np.diag(noise_cov)))
        raise ConfigError(f"noise must be positive definite, got variance {noise_cov[bad, bad]:g} at position {bad}")
    fore = finite_array(forecasts, "forecasts")
    if fore.ndim == 1:
        fore = fore[:, None]
    if fore.ndim != 2 or fore.shape[0] != n_par or fore.shape[1] == 0:
        raise ConfigError(f"forecasts must be [n_par={n_par}, n_fore >= 1], got shape {np.shape(forecasts)}")
    par_names = names_of(parameter_names, n_par, "parameter_names", "par")
    obs_names = names_of(observation_names, n_obs, "observation_names", "obs")
    fore_names = names_of(forecast_names, fore.shape[1], "forecast_names", "forecast")
    lower = cholesky(prior, "prior_covariance")
    whitened = whiten(jac, noise_cov, diagonal)
    info = information_factor(whitened @ lower)
    factor = posterior_factor(lower, info)
    return FOSM(jacobian=jac, prior_covariance=prior, noise_covariance=noise_cov, noise_is_diagonal=diagonal,
                forecasts=fore, parameter_names=par_names, observation_names=obs_names, forecast_names=fore_names,
                prior_factor=lower, whitened_jacobian=whitened, information_factor=info, posterior_factor=factor,
                prior_variance=np.sum((lower.T @ fore) ** 2, axis=0),
                posterior_variance=np.sum((factor.T @ fore) ** 2, axis=0))


def information_factor(whitened: np.ndarray) -> np.ndarray:
    """Upper triangular ``R`` with ``R^T R = I + A^T A``, from the QR factorisation of ``[A; I]``.

    ``whitened`` is ``[..., m, n]`` (a stack works; ``m`` may be 0); the result is ``[..., n, n]``.
    """
    n = whitened.shape[-1]
    eye = np.broadcast_to(np.eye(n), whitened.shape[:-2] + (n, n))
    return np.linalg.qr(np.concatenate([whitened, eye], axis=-2), mode="r")


def posterior_factor(lower: np.ndarray, info: np.ndarray) -> np.ndarray:
    """``F = L R^-1`` (``[..., n, n]``), so that the posterior covariance is ``F F^T``."""
    return np.swapaxes(np.linalg.solve(np.swapaxes(info, -1, -2), np.swapaxes(lower, -1, -2)), -1, -2)


def log_det(lower: np.ndarray, info: np.ndarray) -> np.ndarray:
    """``ln det P = 2 sum ln|diag L| - 2 sum ln|diag R|`` (``[...]``) of ``P = L (R^T R)^-1 L^T``."""
    diag = np.abs(np.diagonal(info, axis1=-2, axis2=-1))
    return 2.0 * np.sum(np.log(np.abs(np.diagonal(lower, axis1=-2, axis2=-1))), axis=-1) - 2.0 * np.sum(
        np.log(diag), axis=-1)


def whiten(jacobian: np.ndarray, noise_cov: np.ndarray, diagonal: bool) -> np.ndarray:
    """``R_e^-1 J`` with ``C_e = R_e R_e^T`` (row scaling when ``C_e`` is diagonal)."""
    if jacobian.shape[0] == 0:
        return jacobian.copy()
    if diagonal:
        return jacobian / np.sqrt(np.diag(noise_cov))[:, None]
    return np.linalg.solve(cholesky(noise_cov, "noise"), jacobian)


def covariance_matrix(value: np.ndarray, n: int, field: str) -> np.ndarray:
    """A ``[n, n]`` covariance from ``[n]`` variances or a ``[n, n]`` matrix, checked finite and symmetric.

    Positive definiteness is checked where the matrix is factorised (:func:`cholesky`).
    """
    arr = finite_array(value, field)
    if arr.ndim == 1 and arr.shape == (n,):
        if np.any(arr <= 0):
            bad = int(np.argmin(arr))
            raise ConfigError(f"{field} must hold positive variances, got {arr[bad]:g} at position {bad}")
        return np.diag(arr)
    if arr.shape != (n, n):
        raise ConfigError(f"{field} must be [{n}] variances or a [{n}, {n}] covariance, got shape {arr.shape}")
    scale = np.max(np.abs(arr)) if arr.size else 0.0
    if np.max(np.abs(arr - arr.T), initial=0.0) > SYMMETRY_TOLERANCE * scale:
        raise ConfigError(f"{field} must be symmetric, got max |C - C^T| = {np.max(np.abs(arr - arr.T)):.3g}")
    return 0.5 * (arr + arr.T)


def cholesky(matrix: np.ndarray, field: str) -> np.ndarray:
    """Lower Cholesky factor of a symmetric matrix; a ConfigError names a singular or indefinite one."""
    try:
        lower = np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError:
        smallest = float(np.linalg.eigvalsh(matrix)[0])
        raise ConfigError(f"{field} must be positive definite, got a singular or indefinite matrix "
                          f"(smallest eigenvalue {smallest:.3g})") from None
    # scale-free: the fraction of each variance left once the variables before it are known (units cancel)
    if np.any(np.diag(lower) <= np.sqrt(np.finfo(float).eps) * np.sqrt(np.diag(matrix))):
        smallest = float(np.linalg.eigvalsh(matrix)[0])
        raise ConfigError(f"{field} must be positive definite, got a numerically singular matrix "
                          f"(smallest eigenvalue {smallest:.3g})")
    return lower


def names_of(names: Sequence[str] | None, n: int, field: str, prefix: str) -> tuple[str, ...]:
    """``n`` unique names, ``prefix_0``, ... by default; a ConfigError for a wrong count or a duplicate."""
    if names is None:
        return tuple(f"{prefix}_{i}" for i in range(n))
    if isinstance(names, str):
        raise ConfigError(f"{field} must be a sequence of names, got the string {names!r}")
    out = tuple(str(name) for name in names)
    if len(out) != n:
        raise ConfigError(f"{field} must hold {n} names, got {len(out)}")
    seen = set()
    for name in out:
        if name in seen:
            raise ConfigError(f"{field} holds {name!r} twice")
        seen.add(name)
    return out


def finite_array(value: np.ndarray, field: str) -> np.ndarray:
    """``value`` as a float array; a ConfigError names a non-numeric or non-finite one."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{field} must be an array of numbers, got {type(value).__name__}") from None
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{field} must be finite, got {int(np.sum(~np.isfinite(arr)))} non-finite entries")
    return arr
