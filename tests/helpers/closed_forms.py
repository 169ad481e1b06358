"""Closed-form references of the multi-output and dependent-input index tests (shared by the in-memory and the
one-pass tests of tests/analyses/indices).

A linear multi-output field ``Y_k = sum_i A_ki x_i`` over a 3 x 4 lat/lon grid of independent uniform inputs: its
aggregated indices with weights ``w_k`` are ``sum_k w_k A_ki^2 Var(x_i) / sum_k,j w_k A_kj^2 Var(x_j)`` (Gamboa et al.
2014). A linear model ``Y_k = beta_k^T x`` of correlated Gaussian inputs ``x ~ N(mu, S)``: every conditional variance
is exact by Gaussian conditioning, ``Var(E[Y | x_u]) = beta^T S_{:,u} S_uu^-1 S_{u,:} beta``, and from them the
Shapley effects (Owen's formula over every subset) and the full and independent Sobol' indices (Mara et al. 2015).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from sensitivity.outputs.spec import OutputDim, OutputSpec
from sensitivity.inputs.space import ParameterSpace

A = np.random.default_rng(7).normal(size=(12, 3)) * np.array([1.0, 2.0, 0.5])  # [lat x lon, parameter]
LAT = (-60.0, 0.0, 45.0)
FIELD = OutputSpec("t", "K", (OutputDim("lat", LAT, "degrees_north"), OutputDim("lon", (0.0, 90.0, 180.0, 270.0),
                                                                                    "degrees_east")))
UNIFORM = ParameterSpace.from_records([dict(name=f"x{i}", units="1", low=0, high=1) for i in range(3)])
VAR_X = np.full(3, 1 / 12)
AREA = np.repeat(np.cos(np.deg2rad(LAT)), 4)


def closed_form(weights: np.ndarray, variance: np.ndarray = VAR_X) -> np.ndarray:
    """``[d]`` aggregated indices of ``Y = A x`` over every element with ``weights [12]``."""
    part = (weights[:, None] * A**2 * variance).sum(axis=0)
    return part / part.sum()


MU = np.array([1.0, -2.0, 0.5])
SD = np.array([1.0, 2.0, 0.5])
CORRELATION = np.array([[1.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 1.0]])
BETA = np.array([[1.0, 0.7, -2.0], [0.5, -1.0, 3.0]])  # two outputs
SPACE = ParameterSpace.from_records(
    [dict(name=f"x{i}", units="m", distribution=dict(kind="norm", loc=float(MU[i]), scale=float(SD[i])))
     for i in range(3)], CORRELATION.tolist())


def linear(x: np.ndarray) -> np.ndarray:
    return x @ BETA.T


def explained(u: tuple[int, ...]) -> np.ndarray:
    """``Var(E[Y_k | x_u]) / Var(Y_k)`` for every output, by Gaussian conditioning."""
    s = CORRELATION * np.outer(SD, SD)
    total = np.einsum("ki,ij,kj->k", BETA, s, BETA)
    if not u:
        return np.zeros(len(BETA))
    u = list(u)
    part = s[:, u] @ np.linalg.solve(s[np.ix_(u, u)], s[u, :])
    return np.einsum("ki,ij,kj->k", BETA, part, BETA) / total


def exact_indices() -> dict[str, np.ndarray]:
    """Shapley effects and the full/independent indices ``[d, m]`` of the linear model."""
    d = len(MU)
    effect = np.zeros((d, len(BETA)))
    for i in range(d):
        others = [j for j in range(d) if j != i]
        for k in range(d):
            for subset in itertools.combinations(others, k):
                w = math.factorial(k) * math.factorial(d - k - 1) / math.factorial(d)
                effect[i] += w * (explained(subset + (i,)) - explained(subset))
    full = np.stack([explained((i,)) for i in range(d)])
    ind = np.stack([1 - explained(tuple(j for j in range(d) if j != i)) for i in range(d)])
    return {"effect": effect, "S1_full": full, "ST_full": full, "S1_ind": ind, "ST_ind": ind}
