"""The space's Gaussian copula in normal scores: Cholesky factors in any input order, and the physical inputs.

A :class:`~sensitivity.inputs.space.ParameterSpace` with a correlation matrix ``R`` couples its marginals through a
Gaussian copula (:mod:`sensitivity.inputs.uncertainty`): ``x_i = F_i^-1(Phi(z_i))`` with normal
scores ``z ~ N(0, R)``. Every conditional law of the inputs is a conditional law of the scores, Gaussian and
exact. Put the inputs in an order ``rho`` and factor ``R_rho = L L^T`` (rows and columns of ``R`` in that
order): ``z_rho = L e`` with ``e ~ N(0, I)``, and because ``L`` is lower triangular, the first ``k`` scores of
``rho`` depend only on ``e_1 .. e_k``. Keeping ``e_1 .. e_k`` and redrawing ``e_{k+1} .. e_d`` is then an exact
draw of the last ``d - k`` inputs of ``rho`` given the first ``k`` — the Rosenblatt transform of the Gaussian
copula (Rosenblatt 1952; Mara, Tarantola & Annoni 2015, doi:10.1016/j.envsoft.2015.07.010). Shapley effects
and the dependent Sobol' indices sample this way, and map the scores to physical values through the
marginals' quantile functions last. Independent inputs are ``R = I`` (every factor the identity).

References
----------
Rosenblatt, M. (1952), Remarks on a multivariate transformation, Ann. Math. Stat. 23, 470-472,
doi:10.1214/aoms/1177729394.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sensitivity.inputs.uncertainty import inputs_from_space
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.quantiles import quantile_from_normal
from sensitivity.inputs.space import ParameterSpace

special = lazy_import("scipy.special")

#: Unit-cube points are clipped to [U_MIN, 1 - U_MIN] before Phi^-1, as the propagation samplers do (|z| <= 8.2).
U_MIN = 2.0**-53


@dataclass(frozen=True)
class NormalScores:
    """The marginals and copula correlation of a space; build with :meth:`of`."""

    marginals: tuple[Any, ...]
    correlation: np.ndarray

    @classmethod
    def of(cls, space: ParameterSpace) -> NormalScores:
        """The space's marginals and copula correlation (the identity for independent inputs)."""
        inputs = inputs_from_space(space)
        correlation = np.eye(len(space)) if space.correlation is None else np.asarray(space.correlation, float)
        return cls(inputs.marginals, correlation)

    @property
    def d(self) -> int:
        """Number of inputs."""
        return len(self.marginals)

    def to_inputs(self, z: np.ndarray) -> np.ndarray:
        """Physical points ``[..., d]`` of normal scores ``z [..., d]`` (each column through its marginal)."""
        z = np.asarray(z, dtype=np.float64)
        return np.stack([quantile_from_normal(m, z[..., i]) for i, m in enumerate(self.marginals)], axis=-1)

    def cholesky(self, orders: np.ndarray) -> np.ndarray:
        """``[P, d, d]`` lower Cholesky factors of ``R`` with rows and columns in each order of ``orders [P, d]``."""
        orders = np.asarray(orders)
        return np.linalg.cholesky(self.correlation[orders[:, :, None], orders[:, None, :]])

    def in_order(self, orders: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Scores ``z [P, ..., d]`` in natural order from independent normals ``e [P, ..., d]`` in ``orders [P, d]``.

        ``z_rho = L e`` with ``L`` the factor of :meth:`cholesky` for each order, then put back in the
        inputs' own order.
        """
        orders = np.asarray(orders)
        factors = self.cholesky(orders)
        ordered = np.einsum("pab,p...b->p...a", factors, e)
        inverse = np.argsort(orders, axis=1)
        shape = (len(orders),) + (1,) * (e.ndim - 2) + (self.d,)
        return np.take_along_axis(ordered, inverse.reshape(shape), axis=-1)


def standard_normal(u: np.ndarray) -> np.ndarray:
    """``Phi^-1(u)`` of unit-cube points, clipped to ``[U_MIN, 1 - U_MIN]`` so the scores stay finite."""
    return special.ndtri(np.clip(np.asarray(u, dtype=np.float64), U_MIN, 1.0 - U_MIN))
