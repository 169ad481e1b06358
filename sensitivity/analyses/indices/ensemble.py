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

The one-pass methods (Sobol' with randomised-QMC intervals or none, DGSM on fresh draws, Morris, per-output
active subspaces) see the mean and the members side by side as ``K + 1`` copies of the flat outputs
(:class:`_SideBySide`): each block of the design is evaluated once and reduced into every copy's statistics at once,
so memory does not grow with the design's size for an ensemble either, and a killed run resumes from its kept
groups. The other methods hold their designs' values anyway; they read one shared evaluation per design.

The members share the designs, so their sampling errors are strongly correlated and the spread of their
indices is mostly the surrogate's; the same idea for kriging surrogates is Le Gratiet, Cannamela & Iooss
(2014), doi:10.1137/130926869 (the Sobol' indices of Gaussian-process sample paths, R ``sensitivity::sobolGP``).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from sensitivity.outputs.members import with_member_spread
from sensitivity.analyses.indices.driver import assemble, plan, run_by_method
from sensitivity.analyses.indices.flat_model import FlatModel
from sensitivity.analyses.indices.methods import ActiveSubspaces, Context, Dgsm, Intervals, Method, Morris
from sensitivity.analyses.indices.sobol_method import Sobol
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
    keep: Callable[[str], Any] | None = None,
) -> xr.Dataset:
    """The indices of the ensemble mean with every member's, their spread and the combined intervals.

    Parameters are those of :func:`~sensitivity.analyses.indices.driver.compute`, with the compiled ensemble
    (:func:`sensitivity.engine.ensemble.compile_ensemble`) in place of one engine; ``keep`` serves the one-pass
    methods, which reduce the mean and the members together.

    Returns
    -------
    xarray.Dataset
        :func:`~sensitivity.analyses.indices.driver.compute`'s dataset of the ensemble mean, plus per index with
        a sampling interval ``X_member``, ``X_member_mean``, ``X_surrogate_std`` and ``X_combined_interval``
        (see the module docstring), the ``member`` coordinate and the attribute ``ensemble_members``.
    """
    if designs is None:
        designs = plan(space, methods, seed=seed, intervals=intervals, top_k=top_k)
    k, m = ensemble.members, ensemble.surrogate.output_size
    streamed = {name: method for name, method in methods.items() if _streams(method, designs[name], intervals)}
    log.info("indices of the ensemble mean and of each of its %d members: %s in one pass over each design (the "
             "mean and the members side by side), the others on shared evaluations", k,
             ", ".join(streamed) or "none")
    side = Context(_SideBySide(_Wide(ensemble)), space, seed, intervals, keep)
    wide = run_by_method(side, streamed, designs)
    rest = {name: method for name, method in methods.items() if name not in wide}
    shared, views = _Evaluations(ensemble), []
    for j, member in enumerate([None, *range(k)]):
        ctx, results = Context(FlatModel(_View(shared, member)), space, seed, intervals), {}
        own = run_by_method(ctx, rest, designs)
        for name in methods:
            results.update({key: _copy(ds, j, m) for key, ds in wide[name].items()} if name in wide else own[name])
        views.append(assemble(results, ctx.model.spec, len(space), top_k))
    return with_member_spread(views[0], views[1:], intervals.level)


def _streams(method: Method, design: Any, intervals: Intervals) -> bool:
    """Whether ``method`` (with its ``design`` from :func:`plan`) is one pass over its design, per output value."""
    one_pass = intervals.plan(qmc=True).kind != "bootstrap"
    if isinstance(method, Sobol):
        return method.merge is None and all(points is None for points in design.values())
    if isinstance(method, (Dgsm, ActiveSubspaces)):
        return one_pass and getattr(method, "sweep", None) is None and getattr(method, "quantity", None) is None
    return isinstance(method, Morris)


def _copy(ds: xr.Dataset, j: int, m: int) -> xr.Dataset:
    """Copy ``j`` (0 the mean, ``k + 1`` member ``k``) of a side-by-side result: outputs ``[j m, (j + 1) m)``."""
    part = ds.isel(output=slice(j * m, (j + 1) * m))
    return part.assign_coords(output=ds["output"].values[:m]) if "output" in ds.coords else part


@dataclass(frozen=True)
class _Wide:
    """The ensemble mean and its ``K`` members side by side as one engine: values ``[N, K + 1, *out]`` and Jacobians
    ``[N, K + 1, *out, n]`` (copy 0 the mean), from one evaluation of the members."""

    ensemble: CompiledEnsemble

    @property
    def surrogate(self) -> Any:
        return self.ensemble.surrogate

    def values(self, points: np.ndarray) -> np.ndarray:
        return _with_mean(self.ensemble.values(points))

    def __call__(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, jacobian = self.ensemble(points)
        return _with_mean(values), _with_mean(jacobian)


def _with_mean(stacked: np.ndarray) -> np.ndarray:
    """``[K, N, ...]`` -> ``[N, K + 1, ...]``: the members' mean, then each member."""
    return np.concatenate([stacked.mean(axis=0, keepdims=True), stacked]).swapaxes(0, 1)


@dataclass(frozen=True)
class _SideBySide(FlatModel):
    """:class:`~sensitivity.analyses.indices.ensemble._Wide` seen through one flat output axis of ``(K + 1) m``
    values, the output labels repeated per copy."""

    @property
    def identity(self) -> str:
        return f"{super().identity} mean and members"

    @property
    def labels(self) -> dict[str, list[str]]:
        copies = self.engine.ensemble.members + 1
        return {key: names * copies for key, names in super().labels.items()}


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
