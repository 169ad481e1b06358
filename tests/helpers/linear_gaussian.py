"""Independent references for the linear-Gaussian data-worth tests: random problems and Bayes' rule by direct inversion.

Nothing here shares code with :mod:`sensitivity.analyses.worth`: the posterior is ``inv(inv(C_p) + J^T inv(C_e) J)``
in float64, as a textbook writes it, or in exact rational arithmetic (:func:`exact_removed_worth`).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

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


def exact_removed_worth(jacobian: np.ndarray, prior: np.ndarray, noise: np.ndarray, forecasts: np.ndarray,
                        groups: list[list[int]] | None = None) -> np.ndarray:
    """``[n_groups, n_fore]`` increase of each forecast's posterior variance when a group of observations is removed,
    in exact rational arithmetic: the two variances ``y^T inv(inv(C_p) + J_k^T inv(C_kk) J_k) y`` (with and without
    the group) from the float64 inputs taken as exact fractions, subtracted exactly, then rounded once to float64.

    ``noise`` is variances ``[n_obs]`` or a covariance ``[n_obs, n_obs]``; ``groups`` lists positions (each
    observation alone by default). For small problems (Gauss-Jordan elimination on fractions).
    """
    n_obs, n = jacobian.shape
    jac = _fractions(jacobian)
    noise_cov = _fractions(np.diag(noise) if np.ndim(noise) == 1 else noise)
    ys = [[row[f] for row in _fractions(forecasts)] for f in range(forecasts.shape[1])]
    prior_inv = _inverse(_fractions(prior))
    # independent noise: each observation adds j j^T / s to the information; else inv(C_kk) of the kept block
    terms = [[[u * v / noise_cov[i][i] for v in jac[i]] for u in jac[i]] for i in range(n_obs)] \
        if np.ndim(noise) == 1 else None
    full = None if terms is None else [[prior_inv[a][b] + sum(t[a][b] for t in terms) for b in range(n)]
                                       for a in range(n)]

    def variances(kept: list[int]) -> list[Fraction]:
        if terms is not None:  # the full information less the removed observations' terms
            removed = [i for i in range(n_obs) if i not in kept]
            info = [[full[a][b] - sum(terms[i][a][b] for i in removed) for b in range(n)] for a in range(n)]
        else:
            noise_inv = _inverse([[noise_cov[a][b] for b in kept] for a in kept])
            weighted = [[sum(noise_inv[i][k] * jac[kept[k]][b] for k in range(len(kept))) for b in range(n)]
                        for i in range(len(kept))]
            info = [[prior_inv[a][b] + sum(jac[kept[i]][a] * weighted[i][b] for i in range(len(kept)))
                     for b in range(n)] for a in range(n)]
        return [sum(u * v for u, v in zip(y, _solve(info, y))) for y in ys]

    everyone = list(range(n_obs))
    base = variances(everyone)
    groups = [[i] for i in everyone] if groups is None else groups
    return np.array([[float(v - b) for v, b in zip(variances([i for i in everyone if i not in g]), base)]
                     for g in groups])


def _fractions(a: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(float(v)) for v in row] for row in np.asarray(a, dtype=float)]


def _solve(a: list[list[Fraction]], b: list[Fraction]) -> list[Fraction]:
    """``x`` with ``a x = b`` exactly (Gauss-Jordan elimination with the first non-zero pivot)."""
    n = len(a)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for c in range(n):
        p = next(r for r in range(c, n) if m[r][c] != 0)
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[r][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def _inverse(a: list[list[Fraction]]) -> list[list[Fraction]]:
    n = len(a)
    columns = [_solve(a, [Fraction(int(i == j)) for i in range(n)]) for j in range(n)]
    return [[columns[j][i] for j in range(n)] for i in range(n)]
