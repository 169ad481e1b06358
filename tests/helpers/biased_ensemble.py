"""A linear Gaussian model and a deliberately biased ensemble of it, for the combined intervals' tests.

The simulator is ``A x + c_0``, its ``K`` members ``A x + c_k``, the offsets ``c`` i.i.d. ``N(0, TAU^2)`` per
output: the simulator is exchangeable with the members (one more draw, the premise of
:mod:`sensitivity.outputs.members`), and the ensemble mean is biased by ``mean(c_1..K)``, a bias the noise-only
intervals of the mean's fit know nothing of. :func:`ensemble_predictive` pushes the closed-form posterior of the
mean's fit through the mean and every member.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.calibration import ObservationModel
from sensitivity.analyses.propagation import Propagation, member_moments, merge_members, propagate
from sensitivity.inputs.uncertainty import gaussian_inputs
from sensitivity.outputs.spec import OutputSpec

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


#: The propagation of the predictive tests: first order beside the posterior predictive, its band 95 %.
SETTINGS = Propagation(methods=("first_order",), quantiles=(0.025, 0.5, 0.975))
#: Six named outputs.
OUTPUT = OutputSpec.from_dict({"name": "y", "units": "m",
                               "dims": [{"name": "output", "values": [f"y{j}" for j in range(len(A))]}]})


def ensemble_predictive(seed: int, chains: int = 4, draws: int = 500):
    """The ensemble's predictive of the closed-form posterior of the mean's fit (flat prior, known noise:
    ``N(lstsq(A, y - mean c), SIGMA^2 (A'A)^-1)``), and a new draw of the simulator's predictive."""
    rng = np.random.default_rng(seed)
    e = biased_ensemble(rng, rng.uniform(-1, 1, 2))
    estimate = np.linalg.lstsq(A, e.observations.y_obs - e.offsets[1:].mean(axis=0), rcond=None)[0]
    cov = SIGMA**2 * np.linalg.inv(A.T @ A)
    x = rng.multivariate_normal(estimate, cov, (chains, draws))
    inputs = gaussian_inputs(estimate, cov, names=["p0", "p1"], units=["1", "1"])
    mean = e.mean.value_and_jacobian
    primary = propagate(BatchedModel(values=lambda p: mean(p)[0], value_and_jacobian=mean, output=OUTPUT), inputs,
                        SETTINGS, seed=seed, draws=x)
    stacked = BatchedModel(values=e.stacked, value_and_jacobian=lambda p: (e.stacked(p), np.tile(
        np.broadcast_to(A, (len(p), *A.shape)), (1, K, 1))), output=OUTPUT)
    ds = merge_members(primary, member_moments(stacked, inputs, K, SETTINGS, seed=seed, draws=x), SETTINGS.level)
    simulator = A @ rng.multivariate_normal(estimate, cov) + e.offsets[0]
    return ds, e, simulator
