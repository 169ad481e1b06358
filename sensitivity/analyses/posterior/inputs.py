"""Posterior draws as propagation inputs: the posterior predictive beside the moment methods.

:class:`DrawInputs` is an input uncertainty (:class:`~sensitivity.analyses.propagation.InputUncertainty`)
whose law is the empirical distribution of MCMC draws. Its mean and covariance are the draws' own, so the
delta methods and the unscented transform propagate the moment-matched Gaussian of the posterior, and a
unit-cube point ``u`` picks draw ``floor(u_1 N)``: Monte Carlo (stratified by a scrambled Sobol' first
coordinate) resamples the draws and pushes them through the model, i.e. the posterior predictive of the
model output, which then is the reference of the nonlinearity verdict. Only the first coordinate of each
point is used; the draws' own dependence is kept because whole draws are resampled.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy import special

from sensitivity.analyses.propagation import InputUncertainty
from sensitivity.errors import ConfigError


@dataclass(frozen=True)
class DrawInputs(InputUncertainty):
    """The empirical distribution of ``[N, n]`` draws; build with :func:`draws_inputs`."""

    draws: np.ndarray = field(repr=False)

    @property
    def description(self) -> str:
        return f"empirical distribution of {len(self.draws)} posterior draws"

    def from_unit_cube(self, u: np.ndarray) -> np.ndarray:
        index = np.minimum((np.asarray(u)[:, 0] * len(self.draws)).astype(np.int64), len(self.draws) - 1)
        return self.draws[index]

    def from_standard_normal(self, z: np.ndarray) -> np.ndarray:
        return self.from_unit_cube(special.ndtr(np.asarray(z)))


def draws_inputs(draws: np.ndarray, names: Sequence[str], units: Sequence[str] | None = None,
                 bounds: np.ndarray | None = None) -> DrawInputs:
    """Inputs from ``[N, n]`` finite draws (e.g. ``posterior.nc``'s ``draws`` stacked over chains)."""
    x = np.asarray(draws, float)
    if x.ndim != 2 or x.shape[1] != len(names) or len(x) < x.shape[1] + 1:
        raise ConfigError(f"`draws` must have shape [N > {len(names)}, {len(names)}], got {list(x.shape)}")
    if not np.all(np.isfinite(x)):
        raise ConfigError("`draws` must be finite")
    cov = np.cov(x, rowvar=False).reshape(x.shape[1], x.shape[1])
    if np.linalg.eigvalsh(cov).min() <= 0:
        raise ConfigError("`draws`: their covariance is singular (constant or collinear parameters)")
    return DrawInputs(tuple(names), None if units is None else tuple(units), x.mean(axis=0), cov,
                      None if bounds is None else np.asarray(bounds, float), draws=x)
