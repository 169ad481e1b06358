"""Independent references for the linear-Gaussian data-worth tests: random problems and Bayes' rule by direct inversion.

Nothing here shares code with :mod:`sensitivity.analyses.worth`: the posterior is ``inv(inv(C_p) + J^T inv(C_e) J)``
in float64, as a textbook writes it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Problem:
    """A random linear Gaussian problem with candidates: ``J``, ``C_p``, ``C_e`` (variances), ``y``, ``J_c``,
    ``s_c``."""

    jacobian: np.ndarray
    prior: np.ndarray
    noise: np.ndarray
    forecasts: np.ndarray
    candidates: np.ndarray
    candidate_noise: np.ndarray


def random_problem(seed: int, n_obs: int = 12, n_par: int = 5, n_fore: int = 3, n_cand: int = 9) -> Problem:
    """A well-conditioned problem with a correlated prior and diagonal noise."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(n_par, n_par))
    return Problem(jacobian=rng.normal(size=(n_obs, n_par)), prior=g @ g.T / n_par + np.eye(n_par),
                   noise=rng.uniform(0.3, 1.5, n_obs), forecasts=rng.normal(size=(n_par, n_fore)),
                   candidates=rng.normal(size=(n_cand, n_par)), candidate_noise=rng.uniform(0.2, 2.0, n_cand))


def posterior(jacobian: np.ndarray, prior: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """``inv(inv(C_p) + J^T inv(C_e) J)``; ``noise`` is variances ``[n_obs]`` or a covariance ``[n_obs, n_obs]``."""
    noise_cov = np.diag(noise) if np.ndim(noise) == 1 else noise
    if jacobian.shape[0] == 0:
        return prior.copy()
    return np.linalg.inv(np.linalg.inv(prior) + jacobian.T @ np.linalg.inv(noise_cov) @ jacobian)


def forecast_variance(covariance: np.ndarray, forecasts: np.ndarray) -> np.ndarray:
    """``diag(y^T C y)``: one variance per forecast column."""
    return np.diag(forecasts.T @ covariance @ forecasts)
