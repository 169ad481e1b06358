"""Analytic test functions with exact gradients and closed-form sensitivity indices (numpy, float64).

Ishigami & Homma (1990), doi:10.1109/ISUMA.1990.151285, on ``[-pi, pi]^3``; the
Sobol' G-function (Saltelli & Sobol' 1995, doi:10.1016/0951-8320(95)00099-2) on
``[0, 1]^d``; and a linear model. Indices follow Saltelli et al. (2008), Global
Sensitivity Analysis: The Primer, doi:10.1002/9780470725184, and Sobol' &
Kucherenko (2009), doi:10.1016/j.matcom.2009.01.023, for the DGSM.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from sensitivity.inputs.space import ParameterSpace


def uniform_space(n: int, low: float, high: float, units: str = "1") -> ParameterSpace:
    """``n`` independent uniform inputs ``x0 .. x{n-1}`` on ``[low, high]``."""
    return ParameterSpace.from_records([dict(name=f"x{i}", units=units, low=low, high=high) for i in range(n)])


# ----------------------------------------------------------------------------- Ishigami
def ishigami(x: np.ndarray, a: float = 7.0, b: float = 0.1) -> np.ndarray:
    """``[N, 1]`` values ``sin x1 + a sin^2 x2 + b x3^4 sin x1``."""
    return (np.sin(x[:, 0]) + a * np.sin(x[:, 1]) ** 2 + b * x[:, 2] ** 4 * np.sin(x[:, 0]))[:, None]


def ishigami_and_offset(x: np.ndarray) -> np.ndarray:
    """``[N, 2]``: Ishigami and a shifted, rescaled second output of mean ~1e6 (one-pass statistics must keep
    its variance: no sum of raw squares)."""
    y = ishigami(x)[:, 0]
    return np.stack([y, 1e6 + np.exp(0.3 * y) + x[:, 2]], axis=1)


def ishigami_jacobian(x: np.ndarray, a: float = 7.0, b: float = 0.1) -> np.ndarray:
    """``[N, 1, 3]`` exact gradient."""
    g = np.stack(
        [np.cos(x[:, 0]) * (1 + b * x[:, 2] ** 4), a * np.sin(2 * x[:, 1]), 4 * b * x[:, 2] ** 3 * np.sin(x[:, 0])], axis=1
    )
    return g[:, None, :]


def ishigami_indices(a: float = 7.0, b: float = 0.1) -> dict[str, np.ndarray]:
    """Closed-form variance, first/total indices, S13 and DGSM nu for uniform inputs on ``[-pi, pi]``."""
    pi = math.pi
    v1 = 0.5 * (1 + b * pi**4 / 5) ** 2
    v2 = a**2 / 8
    v13 = b**2 * pi**8 * (1 / 18 - 1 / 50)
    var = v1 + v2 + v13
    # E[x^4] = pi^4/5, E[x^6] = pi^6/7, E[x^8] = pi^8/9 for x ~ U(-pi, pi); E[cos^2] = E[sin^2] = 1/2
    nu = np.array([0.5 * (1 + 2 * b * pi**4 / 5 + b**2 * pi**8 / 9), a**2 / 2, 8 * b**2 * pi**6 / 7])
    return {
        "variance": np.array(var),
        "S1": np.array([v1, v2, 0.0]) / var,
        "ST": np.array([v1 + v13, v2, v13]) / var,
        "S13": np.array(v13 / var),
        "nu": nu,
    }


# ----------------------------------------------------------------------------- Sobol' G
def sobol_g(x: np.ndarray, a: Sequence[float]) -> np.ndarray:
    """``[N, 1]`` values ``prod_i (|4 x_i - 2| + a_i) / (1 + a_i)``."""
    a = np.asarray(a, dtype=float)
    return np.prod((np.abs(4 * x - 2) + a) / (1 + a), axis=1)[:, None]


def sobol_g_jacobian(x: np.ndarray, a: Sequence[float]) -> np.ndarray:
    """``[N, 1, d]`` gradient (defined except on the measure-zero set ``x_i = 1/2``)."""
    a = np.asarray(a, dtype=float)
    factors = (np.abs(4 * x - 2) + a) / (1 + a)
    d = x.shape[1]
    others = np.stack([np.prod(np.delete(factors, i, axis=1), axis=1) for i in range(d)], axis=1)
    return (4 * np.sign(4 * x - 2) / (1 + a) * others)[:, None, :]


def sobol_g_indices(a: Sequence[float]) -> dict[str, np.ndarray]:
    """Closed-form variance, first/total indices and DGSM nu of the G-function.

    ``V_i = 1 / (3 (1 + a_i)^2)``, ``V = prod (1 + V_i) - 1``, ``S_i = V_i / V``,
    ``ST_i = V_i prod_{j != i} (1 + V_j) / V``; ``E[g_j^2] = 1 + V_j`` so
    ``nu_i = 16 / (1 + a_i)^2 prod_{j != i} (1 + V_j)``.
    """
    a = np.asarray(a, dtype=float)
    vi = 1 / (3 * (1 + a) ** 2)
    var = np.prod(1 + vi) - 1
    rest = np.prod(1 + vi) / (1 + vi)
    return {"variance": np.array(var), "S1": vi / var, "ST": vi * rest / var, "nu": 16 / (1 + a) ** 2 * rest}


# ----------------------------------------------------------------------------- linear
def linear(x: np.ndarray, weights: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """``[N, m]`` values ``x W^T + c``."""
    return x @ np.asarray(weights).T + offset


def linear_jacobian(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``[N, m, n]``: ``W`` at every point."""
    return np.broadcast_to(np.asarray(weights, dtype=float), (x.shape[0],) + np.shape(weights)).copy()
