"""The first-order probability of a series system: the union of the half-spaces of several design points.

References
----------
Hohenbichler, M. & Rackwitz, R. (1983), First-order concepts in system reliability, Structural Safety 1(3),
177-188, doi:10.1016/0167-4730(82)90024-8.
Genz, A. (1992), Numerical computation of multivariate normal probabilities, Journal of Computational and
Graphical Statistics 1(2), 141-149, doi:10.1080/10618600.1992.10477010.
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from sensitivity.analyses.reliability._checks import choice
from sensitivity.runtime.lazy import lazy_import

stats = lazy_import("scipy.stats")


def union_probability(beta: np.ndarray, alpha: np.ndarray, method: Literal["series", "sum"] = "series") -> float:
    """First-order probability of the union of half-spaces ``{alpha_i . U > beta_i}``.

    Parameters
    ----------
    beta
        ``[k]`` signed reliability indices.
    alpha
        ``[k, n]`` unit normals.
    method
        ``'series'``: ``1 - Phi_k(beta; rho)``, ``rho = alpha alpha^T``, as a sum of disjoint parts (no
        cancellation at small probabilities); ``'sum'``: ``sum_i Phi(-beta_i)``.
    """
    choice("method", method, ("series", "sum"))
    beta, alpha = np.asarray(beta, dtype=float), np.asarray(alpha, dtype=float)
    if method == "sum" or len(beta) == 1:
        return float(np.sum(stats.norm.sf(beta)))
    order = np.argsort(beta)
    beta, alpha = beta[order], alpha[order]
    rho = np.clip(alpha @ alpha.T, -1.0, 1.0)
    np.fill_diagonal(rho, 1.0)
    total = float(stats.norm.sf(beta[0]))
    for i in range(1, len(beta)):
        flip = np.ones(i + 1)
        flip[i] = -1.0
        cov = rho[: i + 1, : i + 1] * np.outer(flip, flip)
        upper = np.concatenate([beta[:i], [-beta[i]]])
        mvn = stats.multivariate_normal(np.zeros(i + 1), cov, allow_singular=True, abseps=1e-300, releps=1e-6,
                                        maxpts=200_000 * (i + 1))
        total += float(max(mvn.cdf(upper), 0.0))
    return total
