"""Morris elementary effects (mu, mu*, sigma) of every output on one-at-a-time trajectory designs.

A trajectory of ``d + 1`` points on a ``p``-level grid of the unit cube moves one
parameter at a time by ``Delta = p / (2 (p - 1))`` (Morris 1991,
doi:10.1080/00401706.1991.10484804). The elementary effect of parameter ``i`` is
``(y(after) - y(before)) / Delta`` signed by the direction of the move, i.e. the
change of the output per unit of the parameter's quantile (for a uniform input:
per full range ``b - a``), as in SALib's ``analyze.morris``. Over ``r`` trajectories::

    mu_i = mean(EE_i),   mu*_i = mean(|EE_i|) (Campolongo et al. 2007,
    doi:10.1016/j.envsoft.2006.10.004),   sigma_i = sd(EE_i, ddof=1)

Inputs must be independent. The design visits the quantiles 0 and 1, so a marginal that is
unbounded on a side (normal, lognormal, gamma ...) is truncated to the parameter's bounds
(``low``/``high``: given, or derived from the distribution, the 0.1 % / 99.9 % quantile of an
open side, see :class:`sensitivity.inputs.space.Parameter`); bounded marginals (uniform, truncated on
both sides, beta, triangular) are used as they are.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from sensitivity.analyses.indices import dataset, design, onepass
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.labels import common_units
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace

xr = lazy_import("xarray")


def delta(levels: int) -> float:
    """The Morris step ``p / (2 (p - 1))`` in unit-cube units for ``p`` even levels."""
    if not isinstance(levels, (int, np.integer)) or levels < 2 or levels % 2:
        raise ConfigError(f"`levels` must be an even integer >= 2, got {levels!r}")
    return levels / (2.0 * (levels - 1))


def sample(space: ParameterSpace, r: int, *, levels: int = 4, seed: Seed = None) -> np.ndarray:
    """``r`` random Morris trajectories, ``[r (d + 1), d]`` points in physical units.

    Each trajectory starts at a random grid point ``x*`` in ``{0, 1/(p-1), ..., 1 - Delta}``
    per coordinate, visits the parameters in a random order and moves each once, up
    from ``x*`` to ``x* + Delta`` or down from ``x* + Delta`` to ``x*`` (Morris 1991's
    ``B*`` construction, as SALib's ``sample.morris`` without trajectory optimisation).

    Parameters
    ----------
    space
        Independent inputs (unbounded marginals are truncated at the parameter's bounds).
    r
        Number of trajectories, ``>= 2``.
    levels
        Even number of grid levels ``p``.
    seed
        Seed of the draws (int, Generator or None).
    """
    return trajectories(space, r, levels=levels, seed=seed).points(0, r)


@dataclass(frozen=True)
class Trajectories:
    """The draws of :func:`sample`'s ``r`` trajectories (``[r, d]`` starts, move ranks and directions), whose
    points are made for any range of trajectories alone (:meth:`points`): ``3 r d`` numbers, not the design's
    ``r (d + 1) d``."""

    space: ParameterSpace
    step: float
    start: np.ndarray
    rank: np.ndarray
    down: np.ndarray

    @property
    def count(self) -> int:
        """The number of trajectories ``r``."""
        return len(self.start)

    def points(self, first: int, stop: int) -> np.ndarray:
        """``[(stop - first) (d + 1), d]`` points of trajectories ``first .. stop - 1`` in physical units."""
        d = self.start.shape[1]
        moved = self.rank[first:stop, None, :] < np.arange(d + 1)[None, :, None]  # [t, d+1, d]
        high = moved != self.down[first:stop, None, :]
        unit = self.start[first:stop, None, :] + self.step * high
        return design.to_distribution(self.space, unit.reshape(-1, d))


def trajectories(space: ParameterSpace, r: int, *, levels: int = 4, seed: Seed = None) -> Trajectories:
    """The draws of :func:`sample` (same arguments), its points not yet made."""
    step = delta(levels)
    design.require_independent(space, method="Morris screening")
    space = within_bounds(space)
    if not isinstance(r, (int, np.integer)) or r < 2:
        raise ConfigError(f"`r` must be an integer >= 2 (trajectories), got {r!r}")
    d = len(space)
    rng = np.random.default_rng(seed)
    start = rng.choice(np.linspace(0.0, 1.0 - step, levels // 2), size=(r, d))
    order = np.argsort(rng.random((r, d)), axis=1)  # a random permutation per trajectory
    down = rng.random((r, d)) < 0.5
    return Trajectories(space, step, start, np.argsort(order, axis=1), down)  # rank: when each parameter moves


def analyze(
    points: np.ndarray,
    values: np.ndarray,
    space: ParameterSpace,
    *,
    levels: int = 4,
    intervals: IntervalPlan = IntervalPlan(),
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Elementary-effect statistics of every output.

    Parameters
    ----------
    points
        ``[r (d + 1), d]`` trajectories (from :func:`sample`, or any one-at-a-time design
        whose consecutive points differ in exactly one parameter).
    values
        ``[r (d + 1), m]`` model outputs at ``points``.
    space
        The parameter space.
    levels
        The ``p`` the design was drawn with (sets ``Delta``).
    intervals
        The interval plan (:class:`~sensitivity.analyses.indices.intervals.IntervalPlan`; ``rqmc`` counts as the
        bootstrap, the trajectories being i.i.d.): bootstrap of ``mu*`` over trajectories; for each parameter in turn
        ``rng.integers(r, size=(R, r))`` as SALib's ``analyze.morris`` draws them, shared
        by all outputs, so an integer seed reproduces SALib's ``mu_star_conf``. The trajectories
        are i.i.d., so the bootstrap is valid here; ``n_resamples=0`` or ``none``: no interval.
    output_names, output_units
        Labels and UDUNITS-2 units of the ``m`` outputs.

    Returns
    -------
    xarray.Dataset
        ``mu``, ``mu_star``, ``sigma`` ``(parameter, output)`` in output units (per unit
        quantile of the parameter) and ``mu_star_interval (parameter, output, bound)``.
    """
    step = delta(levels)
    plan = intervals.iid().check()
    d = len(space)
    x = np.asarray(points, dtype=np.float64)
    y = design.as_values(values)
    if x.ndim != 2 or x.shape[1] != d or x.shape[0] % (d + 1) or x.shape[0] < 2 * (d + 1):
        raise DataError(f"`points` must have shape [r*{d + 1}, {d}] with r >= 2 trajectories, got {list(x.shape)}")
    design.check_rows(y.shape[0], x.shape[0], what="values")
    effects = _elementary_effects(x.reshape(-1, d + 1, d), y.reshape(-1, d + 1, y.shape[1]), step)  # [r, d, m]
    r = effects.shape[0]
    boot = None
    if plan.kind != "none":
        rng = np.random.default_rng(plan.seed)
        boot = np.stack([np.abs(effects[rng.integers(r, size=(plan.n_resamples, r)), j]).mean(axis=1)
                         for j in range(d)], axis=1)
    return _dataset(effects.mean(axis=0), np.abs(effects).mean(axis=0), effects.std(axis=0, ddof=1), boot, space,
                    plan=plan, levels=levels, r=r, output_names=output_names, output_units=output_units)


def analyze_model(
    model: Callable[[np.ndarray], np.ndarray],
    drawn: Trajectories,
    space: ParameterSpace,
    *,
    levels: int = 4,
    intervals: IntervalPlan = IntervalPlan(),
    block: int = onepass.BLOCK_POINTS,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """:func:`analyze` of ``model`` on the trajectories ``drawn`` (:func:`trajectories`), in one pass.

    The trajectories' points are made, evaluated and reduced about ``block`` points at a time: the means of the
    elementary effects and of their absolute values and the effects' co-moments
    (:class:`~sensitivity.analyses.moments.Moments`), and for the bootstrap of ``mu*`` each resample's sum of
    ``|EE|``, ``sum_t c_kt |EE_t|`` with ``c_kt`` how often resample ``k`` drew trajectory ``t`` (the draws of
    :func:`analyze`, made first: ``d n_resamples r`` counts, independent of the number of outputs). No values
    or effects of all trajectories are held. The result is :func:`analyze`'s of the same points to float64
    round-off.

    Parameters
    ----------
    model
        Values ``[rows, m]`` at points ``[rows, d]`` in physical units.
    drawn
        The trajectories, drawn with ``levels``.
    space, levels, intervals, output_names, output_units
        As :func:`analyze`'s.
    block
        About this many points per model call (whole trajectories, at least one).
    """
    step, plan, d, r = delta(levels), intervals.iid().check(), len(space), drawn.count
    if drawn.step != step or drawn.start.shape[1] != d:
        raise DataError(f"the trajectories of {drawn.start.shape[1]} parameters with step {drawn.step} do not "
                        f"belong to {d} parameters and {levels} levels")
    counts = None
    if plan.kind != "none":
        rng = np.random.default_rng(plan.seed)
        counts = np.stack([_counts(rng.integers(r, size=(plan.n_resamples, r)), r) for _ in range(d)])  # [d, R, r]
    stats, boot = onepass.Replicates(r, 1, np.stack([np.arange(d)] * 2, axis=1)), None
    per_call = max(1, block // (d + 1))
    for first in range(0, r, per_call):
        stop = min(r, first + per_call)
        x = drawn.points(first, stop)
        y = design.as_values(model(x))
        design.check_rows(y.shape[0], x.shape[0], what="values")
        effects = _elementary_effects(x.reshape(-1, d + 1, d), y.reshape(-1, d + 1, y.shape[1]), step)  # [t, d, m]
        stats.update(np.concatenate([effects, np.abs(effects)], axis=1))
        if counts is not None:
            part = np.einsum("jkt,tjm->kjm", counts[:, :, first:stop], np.abs(effects))
            boot = part if boot is None else boot + part
    total = stats.sets()[0]
    sigma = np.sqrt(total.covariance(ddof=1))
    return _dataset(total.mean[:d], total.mean[d:], sigma, None if boot is None else boot / r, space, plan=plan,
                    levels=levels, r=r, output_names=output_names, output_units=output_units)


def _counts(draws: np.ndarray, r: int) -> np.ndarray:
    """``[K, r]`` how often each of ``r`` trajectories is drawn in each row of ``draws [K, r]``."""
    flat = draws + r * np.arange(len(draws))[:, None]
    return np.bincount(flat.ravel(), minlength=r * len(draws)).reshape(len(draws), r).astype(np.int32)


def _dataset(mu: np.ndarray, mu_star: np.ndarray, sigma: np.ndarray, boot: np.ndarray | None,
             space: ParameterSpace, *, plan: IntervalPlan, levels: int, r: int,
             output_names: Sequence[str] | None, output_units: Sequence[str] | None) -> xr.Dataset:
    """The dataset of ``mu``, ``mu*``, ``sigma`` ``[d, m]`` and the bootstrap means of ``|EE|`` ``[R, d, m]``."""
    units = common_units(output_units)
    ref = None if output_units is None else "output_units"
    coords = {
        **dataset.parameter_axis(space),
        **dataset.output_axis(mu.shape[1], output_names, output_units),
        **dataset.BOUND_COORDS,
    }
    dims = ("parameter", "output")
    data = {
        "mu": dataset.variable(dims, mu, "Morris mean elementary effect mu", units, units_coordinate=ref),
        "mu_star": dataset.variable(
            dims, mu_star, "Morris mean absolute elementary effect mu*", units, units_coordinate=ref
        ),
        "sigma": dataset.variable(
            dims, sigma, "Morris standard deviation of elementary effects", units, units_coordinate=ref,
        ),
    }
    if boot is not None:
        data["mu_star_interval"] = dataset.variable(
            dims + ("bound",), plan.bounds(np.concatenate([mu_star[None], boot])),
            f"Morris mu*, {plan.describe()}", units, units_coordinate=ref,
        )
    attrs = {
        "method": "Morris elementary effects (Morris 1991; mu* of Campolongo et al. 2007)",
        "references": "doi:10.1080/00401706.1991.10484804 doi:10.1016/j.envsoft.2006.10.004",
        "levels": levels,
        "delta": delta(levels),
        "n_trajectories": r,
        **plan.attrs(),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


def within_bounds(space: ParameterSpace) -> ParameterSpace:
    """``space`` with each marginal that is unbounded on a side truncated to the parameter's bounds."""
    parameters = []
    for p in space.parameters:
        low, high = p.frozen_distribution().support()
        if np.isfinite(low) and np.isfinite(high):
            parameters.append(p)
            continue
        truncate = (max(low, p.low), min(high, p.high))
        parameters.append(replace(p, distribution=replace(p.distribution, truncate=truncate)))
    return replace(space, parameters=tuple(parameters))


def _elementary_effects(x: np.ndarray, y: np.ndarray, step: float) -> np.ndarray:
    """``[r, d, m]`` elementary effects from trajectories ``x [r, d+1, d]`` and outputs ``y [r, d+1, m]``."""
    dx = np.diff(x, axis=1)  # [r, d, d]: step s changes one parameter
    changed = dx != 0
    if (changed.sum(axis=2) != 1).any():
        t, s = np.argwhere(changed.sum(axis=2) != 1)[0]
        raise DataError(
            f"`points`: step {s} of trajectory {t} changes {int(changed[t, s].sum())} parameters, expected exactly 1"
        )
    which = np.argmax(changed, axis=2)  # [r, d] parameter moved at each step
    sign = np.sign(np.take_along_axis(dx, which[:, :, None], axis=2))  # [r, d, 1]
    repeated = (np.sort(which, axis=1) != np.arange(x.shape[2])).any(axis=1)
    if repeated.any():
        raise DataError(f"`points`: trajectory {int(np.argmax(repeated))} does not move every parameter exactly once")
    ee_by_step = sign * np.diff(y, axis=1) / step  # [r, d, m]
    effects = np.empty_like(ee_by_step)
    np.put_along_axis(effects, which[:, :, None], ee_by_step, axis=1)
    return effects
