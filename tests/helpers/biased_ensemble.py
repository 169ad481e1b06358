"""A linear Gaussian model and a deliberately biased ensemble of it, for the combined intervals' tests.

The simulator is ``A x + c_0``, its ``K`` members ``A x + c_k``, the offsets ``c`` i.i.d. ``N(0, TAU^2)`` per
output: the simulator is exchangeable with the members (one more draw, the premise of
:mod:`sensitivity.outputs.members`), and the ensemble mean is biased by ``mean(c_1..K)``, a bias the noise-only
intervals of the mean's fit know nothing of.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.calibration import ObservationModel

A = np.array([[1.0, 0.2], [0.5, 1.0], [1.0, -0.4], [0.3, 0.8], [0.9, 0.1], [0.2, 1.2]])
SIGMA, TAU, K = 0.02, 0.1, 5  # observation noise; the members' offsets, far larger


@dataclass(frozen=True)
class BiasedEnsemble:
    """The ensemble mean, each member's ``value_and_jacobian``, every member's values ``[K, P, m]``, the members
    side by side ``[P, K m]`` (member-major), the observations of the simulator and the offsets ``[K + 1, m]``
    (row 0 the simulator's)."""

    mean: BatchedModel
    members: list[Callable]
    values: Callable[[np.ndarray], np.ndarray]
    stacked: Callable[[np.ndarray], np.ndarray]
    observations: ObservationModel
    offsets: np.ndarray


def biased_ensemble(rng: np.random.Generator, truth: np.ndarray, a: np.ndarray = A, sigma: float = SIGMA,
                    tau: float = TAU, k: int = K) -> BiasedEnsemble:
    """Offsets drawn from ``rng``, then the observations ``a truth + c_0 + N(0, sigma^2)``."""
    m, n = a.shape
    offsets = rng.normal(0.0, tau, (k + 1, m))
    y = a @ truth + offsets[0] + rng.normal(0.0, sigma, m)
    own = offsets[1:]

    def member(j):
        return lambda x: (x @ a.T + own[j], np.broadcast_to(a, (len(x), m, n)))

    def values(x):
        return np.stack([x @ a.T + b for b in own])

    mean = BatchedModel(value_and_jacobian=lambda x: (x @ a.T + own.mean(axis=0), np.broadcast_to(a, (len(x), m, n))))
    return BiasedEnsemble(mean, [member(j) for j in range(k)], values,
                          lambda x: np.concatenate([x @ a.T + b for b in own], axis=1),
                          ObservationModel.from_arrays(y, sigma=sigma), offsets)
