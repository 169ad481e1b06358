"""Indices of an ensemble surrogate: the ensemble mean's, each member's, their spread and a combined interval.

:func:`compute_ensemble` runs :func:`~sensitivity.analyses.indices.driver.compute` on the ensemble mean (the
surrogate every other analysis uses) and on each member, from ONE evaluation of every member at every design
(:class:`~sensitivity.engine.ensemble.CompiledEnsemble`; the mean and the members read the same values and
Jacobians), so each index has ``K + 1`` estimates on one design. Beside each index ``X`` of the ensemble mean
that has a sampling interval ``X_interval`` (randomised QMC or bootstrap, :mod:`.intervals`) it adds, as
separate variables:

``X_member(member, ...)``
    the index of each member;
``X_member_mean``
    their mean;
``X_surrogate_std``
    their standard deviation (``ddof=1``): how much of the index is the surrogate;
``X_combined_interval(..., bound)``
    the sampling interval widened by the surrogate's
    (:func:`~sensitivity.outputs.members.combined_bounds`): each side's half-width the root sum of
    squares of the sampling half-width and ``t_{K-1} sqrt(1 + 1/K) X_surrogate_std``.

The members share the designs, so their sampling errors are strongly correlated and the spread of their
indices is mostly the surrogate's; the same idea for kriging surrogates is Le Gratiet, Cannamela & Iooss
(2014), doi:10.1137/130926869 (the Sobol' indices of Gaussian-process sample paths, R ``sensitivity::sobolGP``).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from sensitivity.outputs.members import with_member_spread
from sensitivity.analyses.indices.driver import compute, plan
from sensitivity.analyses.indices.methods import Intervals, Method
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace

log = logging.getLogger(__name__)

xr = lazy_import("xarray")

if TYPE_CHECKING:
    from sensitivity.engine.ensemble import CompiledEnsemble


def compute_ensemble(
    ensemble: CompiledEnsemble,
    space: ParameterSpace,
    methods: Mapping[str, Method],
    *,
    seed: int = 0,
    intervals: Intervals = Intervals(),
    top_k: int | None = None,
    designs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The indices of the ensemble mean with every member's, their spread and the combined intervals.

    Parameters are those of :func:`~sensitivity.analyses.indices.driver.compute`, with the compiled ensemble
    (:func:`sensitivity.engine.ensemble.compile_ensemble`) in place of one engine.

    Returns
    -------
    xarray.Dataset
        :func:`~sensitivity.analyses.indices.driver.compute`'s dataset of the ensemble mean, plus per index with
        a sampling interval ``X_member``, ``X_member_mean``, ``X_surrogate_std`` and ``X_combined_interval``
        (see the module docstring), the ``member`` coordinate and the attribute ``ensemble_members``.
    """
    if designs is None:
        designs = plan(space, methods, seed=seed, intervals=intervals, top_k=top_k)
    options = {"seed": seed, "intervals": intervals, "top_k": top_k, "designs": designs}
    shared = _Evaluations(ensemble)
    log.info("indices of the ensemble mean, then of each of its %d members on the same evaluations",
             ensemble.members)
    mean = compute(_View(shared, None), space, methods, **options)
    members = []
    for k in range(ensemble.members):
        log.info("indices of member %d of %d", k + 1, ensemble.members)
        members.append(compute(_View(shared, k), space, methods, **options))
    return with_member_spread(mean, members, intervals.level)


@dataclass
class _Evaluations:
    """Every member's values (and Jacobians) at each set of points, evaluated once and shared by the views."""

    ensemble: CompiledEnsemble
    _cache: dict[tuple, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)

    def at(self, points: np.ndarray, jacobian: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """``([K, N, *out], [K, N, *out, n] | None)`` at ``points``; Jacobians computed when asked for."""
        x = np.ascontiguousarray(points)
        key = (x.shape, x.dtype.str, hashlib.sha1(x.tobytes()).hexdigest())
        hit = self._cache.get(key)
        if hit is None or (jacobian and hit[1] is None):
            hit = self.ensemble(x) if jacobian else (self.ensemble.values(x), None)
            self._cache[key] = hit
        return hit


@dataclass(frozen=True)
class _View:
    """The ensemble mean (``member`` None) or one member, seen as an engine by the indices' ``FlatModel``."""

    evaluations: _Evaluations
    member: int | None

    @property
    def surrogate(self) -> Any:
        return self.evaluations.ensemble.surrogate

    def values(self, points: np.ndarray) -> np.ndarray:
        return self._pick(self.evaluations.at(points, jacobian=False)[0])

    def __call__(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, jacobian = self.evaluations.at(points, jacobian=True)
        return self._pick(values), self._pick(jacobian)

    def _pick(self, stacked: np.ndarray) -> np.ndarray:
        return stacked.mean(axis=0) if self.member is None else stacked[self.member]
