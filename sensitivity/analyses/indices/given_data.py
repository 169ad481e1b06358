"""Given-data first-order indices of any sample of inputs and outputs (a stored sweep, a file): no new model runs.

The rank-based estimator of Gamboa, Klein & Lagnoux (2018, doi:10.1137/16M1097791) — Chatterjee's (2021,
doi:10.1080/01621459.2020.1758115) rank correlation applied to Sobol' indices — pairs each point with its
neighbour in the order of ``x_i``: with ``pi`` the permutation that sorts ``x_i`` and ``N(j)`` the point right
after ``j`` in that order (the last wraps to the first)::

    S1_i = [ (1/N) sum_j Y_j Y_N(j) - Ybar^2 ] / [ (1/N) sum_j Y_j^2 - Ybar^2 ]

Neighbours in ``x_i`` share ``x_i`` (nearly) and nothing else, so their covariance estimates
``Var(E[Y | x_i])``: consistent and asymptotically normal at rate ``sqrt(N)`` for any ``N`` points drawn from
the input distribution, one sample for every input and output at once (ties in ``x_i`` are broken at random).
The indices are those of the distribution the points were drawn from; with dependent inputs that is the
full first-order index ``Var(E[Y | x_i]) / V`` (Mara, Tarantola & Annoni 2015), which needs no other design.
The points must be i.i.d. draws (or a Latin hypercube, whose other columns are independent permutations):
in a Sobol' or Halton net, points next to each other in ``x_i`` are correlated in the other inputs, and the
estimator is biased (measured on Ishigami at ``N = 8192``: errors of 0.1-0.5, against 0.02 for i.i.d. or
Latin hypercube points), so a stored sweep must be on a ``random`` or ``lhs`` grid.

Error: the points are split at random into ``batches`` disjoint batches of ``N / batches`` points, the
estimator is applied to each, and the standard error of the pooled estimate is ``sd(batch estimates) /
sqrt(batches)`` (each batch estimate has ``batches`` times the pooled variance), with the Student-t interval
``S1 -+ t_{batches - 1} se`` — valid for exchangeable (i.i.d.) points. Memory: the values of every point
(``N m``) and one ordering per input. This estimator serves data whose law is known only through them (a samples
file, a stored sweep); points drawn here from the space's known marginals are reduced in one pass by the partition
estimator of :mod:`~sensitivity.analyses.indices.given_data_bins` instead (memory independent of ``N``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sensitivity.analyses.indices import bootstrap, dataset, design
from sensitivity.analyses.indices.design import Seed
from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace
from sensitivity.analyses.indices.intervals import LEVEL

xr = lazy_import("xarray")
stats = lazy_import("scipy.stats")


def sample(space: ParameterSpace, n: int, *, seed: Seed = None) -> np.ndarray:
    """``[n, d]`` i.i.d. draws of the input distribution (the space's copula), when no data are at hand."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 16:
        raise ConfigError(f"`n` must be an integer >= 16, got {n!r}")
    from sensitivity.inputs.uncertainty import inputs_from_space

    return inputs_from_space(space).sample(int(n), seed=seed, sampler="random")


def analyze(
    points: np.ndarray,
    values: np.ndarray,
    space: ParameterSpace,
    *,
    batches: int = 8,
    level: float = LEVEL,
    seed: Seed = None,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """First-order indices of every output from given points and values.

    Parameters
    ----------
    points
        ``[N, d]`` inputs, draws of the input distribution, columns in the space's order.
    values
        ``[N, m]`` outputs at the same points.
    space
        The parameter space (names and units).
    batches
        Random disjoint batches for the standard error and interval, at least 2; 0: neither.
    level
        Level of the Student-t interval.
    seed
        Seed of the random tie-breaking and of the batches.
    output_names, output_units
        Labels and UDUNITS-2 units of the ``m`` outputs.

    Returns
    -------
    xarray.Dataset
        ``S1 (parameter, output)`` [1] with ``S1_se`` and ``S1_interval (parameter, output, bound)`` (none
        with ``batches=0``), ``variance (output)`` and ``n_points``.
    """
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(space):
        raise DataError(f"`points` must have shape [N, {len(space)}], got {list(x.shape)}")
    y = design.as_values(values)
    design.check_rows(y.shape[0], x.shape[0], what="values")
    if not np.isfinite(x).all() or not np.isfinite(y).all():
        raise DataError("`points` and `values` must be finite (drop the points with NaN or inf)")
    if not isinstance(batches, (int, np.integer)) or isinstance(batches, bool) or batches == 1 or batches < 0:
        raise ConfigError(f"`batches` must be 0 (no error estimate) or an integer >= 2, got {batches!r}")
    if batches and len(x) < 4 * batches:
        raise DataError(f"{len(x)} points are too few for {batches} batches of at least 4")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"`level` must lie in (0, 1), got {level!r}")
    rng = np.random.default_rng(seed)
    s1, variance = estimate(x, y, rng)
    parts = None
    if batches:
        size = len(x) // batches
        rows = rng.permutation(len(x))[: size * batches].reshape(batches, size)
        parts = np.stack([estimate(x[r], y[r], rng)[0] for r in rows])  # [batches, d, m]
    ds = indices_dataset(s1, variance, parts, space, level=level, output_names=output_names,
                         output_units=output_units)
    return ds.assign_attrs(n_points=len(x))


def indices_dataset(s1: np.ndarray, variance: np.ndarray, parts: np.ndarray | None, space: ParameterSpace, *,
                    level: float, output_names: Sequence[str] | None,
                    output_units: Sequence[str] | None) -> xr.Dataset:
    """:func:`analyze`'s dataset from the estimate ``S1 [d, m]``, the variance ``[m]`` and the estimates of the
    random batches ``[batches, d, m]`` (None: no error estimate)."""
    batches = 0 if parts is None else len(parts)
    data = {
        "S1": dataset.variable(("parameter", "output"), s1, "first-order Sobol' index from given data "
                               "(rank-based, Gamboa, Klein & Lagnoux 2018)", "1"),
    }
    var_units, var_coords = dataset.units_table(
        "variance_units", ("output",), dataset.squared_units(output_units), "units of the output variance")
    data["variance"] = dataset.variable(("output",), variance, "output variance of the given data", var_units,
                                        units_coordinate=next(iter(var_coords), None))
    coords = {**dataset.parameter_axis(space), **dataset.output_axis(s1.shape[1], output_names, output_units),
              **var_coords}
    if batches:
        se = np.std(parts, axis=0, ddof=1) / np.sqrt(batches)
        half = stats.t.ppf(0.5 + level / 2, batches - 1) * se
        data["S1_se"] = dataset.variable(("parameter", "output"), se, "standard error of the given-data "
                                         f"first-order index over {batches} random batches", "1")
        data["S1_interval"] = dataset.variable(
            ("parameter", "output", "bound"), np.stack([s1 - half, s1 + half], axis=-1),
            f"given-data first-order index, Student-t {level:g} confidence interval over {batches} "
            "random batches", "1")
        coords.update(dataset.BOUND_COORDS)
    attrs = {
        "method": "given-data first-order indices, rank-based (Gamboa, Klein & Lagnoux 2018; Chatterjee 2021)",
        "references": "doi:10.1137/16M1097791 doi:10.1080/01621459.2020.1758115",
        "inputs": "dependent (full first-order indices)" if design.is_correlated(space) else "independent",
        "intervals": "batches" if batches else "none",
        **({"batches": batches, "level": level} if batches else {}),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


def estimate(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``S1 [d, m]`` (NaN for a constant output) and the variance ``[m]`` of points ``x [N, d]`` and values ``y [N, m]``.

    ``rng`` breaks ties in ``x`` at random.
    """
    centred = y - y.mean(axis=0)
    variance = (centred**2).mean(axis=0)
    constant = variance <= (np.finfo(np.float64).eps * np.abs(y).max(axis=0)) ** 2
    inverse = 1.0 / np.where(constant, np.nan, variance)
    n, m = y.shape
    chunk = max(1, bootstrap.CHUNK_ELEMENTS // n)
    s1 = np.empty((x.shape[1], m))
    for i in range(x.shape[1]):
        order = np.lexsort((rng.random(n), x[:, i]))  # sorted by x_i, ties in random order
        for a in range(0, m, chunk):
            sorted_ = centred[order, a:a + chunk]
            s1[i, a:a + chunk] = (sorted_ * np.roll(sorted_, -1, axis=0)).mean(axis=0) * inverse[a:a + chunk]
    return s1, variance
