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

from dataclasses import replace
from typing import Sequence

import numpy as np

from sensitivity.analyses.indices import dataset, design
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
    rank = np.argsort(order, axis=1)  # when each parameter moves
    moved = rank[:, None, :] < np.arange(d + 1)[None, :, None]  # [r, d+1, d]
    high = moved != down[:, None, :]
    unit = start[:, None, :] + step * high
    return design.to_distribution(space, unit.reshape(-1, d))


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

    rng = np.random.default_rng(plan.seed)
    r = effects.shape[0]
    mu_star = np.abs(effects).mean(axis=0)

    units = common_units(output_units)
    ref = None if output_units is None else "output_units"
    coords = {
        **dataset.parameter_axis(space),
        **dataset.output_axis(y.shape[1], output_names, output_units),
        **dataset.BOUND_COORDS,
    }
    dims = ("parameter", "output")
    data = {
        "mu": dataset.variable(
            dims, effects.mean(axis=0), "Morris mean elementary effect mu", units, units_coordinate=ref
        ),
        "mu_star": dataset.variable(
            dims, mu_star, "Morris mean absolute elementary effect mu*", units, units_coordinate=ref
        ),
        "sigma": dataset.variable(
            dims, effects.std(axis=0, ddof=1), "Morris standard deviation of elementary effects", units,
            units_coordinate=ref,
        ),
    }
    if plan.kind != "none":
        boot = np.stack([np.abs(effects[rng.integers(r, size=(plan.n_resamples, r)), j]).mean(axis=1)
                         for j in range(d)], axis=1)
        data["mu_star_interval"] = dataset.variable(
            dims + ("bound",), plan.bounds(np.concatenate([mu_star[None], boot])),
            f"Morris mu*, {plan.describe()}", units, units_coordinate=ref,
        )
    attrs = {
        "method": "Morris elementary effects (Morris 1991; mu* of Campolongo et al. 2007)",
        "references": "doi:10.1080/00401706.1991.10484804 doi:10.1016/j.envsoft.2006.10.004",
        "levels": levels,
        "delta": step,
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
