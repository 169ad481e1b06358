"""Variance-based (Sobol') first, total and second-order indices of every output at once.

``sample`` builds Saltelli's design from a scrambled Sobol' sequence (``sample_rows`` any base rows of it
alone); ``analyze`` turns the values ``[N (G + 2), m]`` (or ``[N (2G + 2), m]`` with second order) into a
labeled dataset with intervals (:mod:`~sensitivity.analyses.indices.intervals`: by default randomised-QMC
over independent scramblings of the design) and a convergence record;
:func:`sensitivity.analyses.indices.sobol_onepass.analyze_model` does the same in one pass, generating,
evaluating and reducing the design block by block, in memory independent of ``N``. Both reduce the values through
the one-pass statistics of :mod:`~sensitivity.analyses.indices.pickfreeze`.

Estimators (Saltelli et al. 2010, doi:10.1016/j.cpc.2009.09.018, Table 2), for a
factor (parameter or group) ``i`` with ``A_B^(i)`` the matrix ``A`` whose ``i``
columns come from ``B``, and ``V`` the variance of the stacked ``[f(A); f(B)]``::

    S1_i = mean( f(B) (f(A_B^(i)) - f(A)) ) / V           Saltelli 2010, (b)
    ST_i = mean( (f(A) - f(A_B^(i)))^2 ) / (2 V)           Jansen 1999, (f)
    S2_ij = mean( f(B_A^(i)) f(A_B^(j)) - f(A) f(B) ) / V - S1_i - S1_j   Saltelli 2002

Before the estimators the values of each output are centred and scaled by the mean
and standard deviation of all its rows. This is SALib 1.6's ``sobol.analyze``
convention (centring removes the bias of the first-order estimator for outputs
with a large mean), and the layout of ``sample`` is SALib's ``sample.sobol``
layout, so the same rows fed to SALib give the same numbers.

Inputs must be independent: the estimators swap columns between ``A`` and ``B``,
which breaks any dependence, so a space with a correlation matrix is refused; the error names
:mod:`~sensitivity.analyses.indices.sobol_dependent` (the same estimators after the copula's
Rosenblatt transform) and :mod:`~sensitivity.analyses.indices.shapley`.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from sensitivity.analyses.indices import bootstrap, dataset, design, pickfreeze, tails
from sensitivity.analyses.moments import Moments
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import RQMC, IntervalPlan, REPLICATES
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.labels import axis_coords, matrix_coords
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace
from sensitivity.inputs.uncertainty import CopulaInputs

xr = lazy_import("xarray")

Groups = Mapping[str, Sequence[str]]

#: The way out offered when a space with a correlation matrix is refused.
DEPENDENT = ("method `sobol_dependent` (full and independent Sobol' indices) or `shapley` (Shapley effects), "
             "which sample the space's Gaussian copula")



def sample(
    space: ParameterSpace,
    n: int,
    *,
    seed: Seed = None,
    calc_second_order: bool = False,
    groups: Groups | None = None,
    replicates: int = REPLICATES,
) -> np.ndarray:
    """Saltelli's design of ``n`` base rows: ``[n (G + 2), d]`` (``[n (2G + 2), d]`` with second order).

    A scrambled Sobol' sequence of ``2d`` columns gives ``A`` (first ``d``) and ``B``
    (last ``d``); row block ``k`` holds ``A_k``, ``A_B^(1..G)_k``, (``B_A^(1..G)_k``),
    ``B_k`` in that order, exactly as SALib's ``sample.sobol``. Unit-cube values go
    through each parameter's quantile function. With ``replicates = R`` the ``n`` base
    rows are ``R`` independent scramblings of ``n / R`` rows each, one after the other
    (the total budget is split), for randomised-QMC intervals; ``R = 1`` is SALib's design.

    Parameters
    ----------
    space
        Independent inputs (a correlation matrix is refused).
    n
        Base sample size ``N``, a power of two.
    seed
        Seed of the scrambling (int, Generator or None).
    calc_second_order
        Also build ``B_A^(i)`` for second-order indices.
    groups
        Optional ``{group_name: [parameter names]}``, a partition of the parameters;
        columns of a group are swapped together and ``G`` is the number of groups.
    replicates
        Number ``R`` of independent scramblings, a power of two with ``n / R >= 2``.

    Returns
    -------
    numpy.ndarray
        Points in physical units, one row per model evaluation.
    """
    design.require_independent(space, method="Sobol' sampling", instead=DEPENDENT)
    base = design.SobolBase(2 * len(space), n, seed, replicates)
    return sample_rows(space, base, 0, n, groups=groups, calc_second_order=calc_second_order)


def sample_rows(space: ParameterSpace, base: design.SobolBase, start: int, stop: int, *,
                calc_second_order: bool = False, groups: Groups | None = None,
                inputs: CopulaInputs | None = None) -> np.ndarray:
    """The points of :func:`sample`'s base rows ``start .. stop - 1`` (``(stop - start) (G + 2)`` rows, or
    ``(2G + 2)``), from their unit-cube base rows (``base``: ``2d`` columns) alone.

    The base rows' ``A`` and ``B`` are mapped to physical values (``inputs``: as
    :func:`~sensitivity.analyses.indices.design.to_distribution`'s) and the mixed rows copied from them: the
    quantile functions are elementwise, so these are the points of mapping every row, at a quarter of the cost
    on six parameters."""
    members = membership(space, groups)
    d = len(space)
    rows = base.rows(start, stop)
    x = design.to_distribution(space, rows.reshape(-1, d), inputs).reshape(rows.shape)
    a, b = x[:, :d], x[:, d:]
    blocks = [a[:, None], np.where(members[None], b[:, None], a[:, None])]
    if calc_second_order:
        blocks.append(np.where(members[None], a[:, None], b[:, None]))
    blocks.append(b[:, None])
    return np.concatenate(blocks, axis=1).reshape(-1, d)


def analyze(
    values: np.ndarray,
    space: ParameterSpace,
    *,
    groups: Groups | None = None,
    calc_second_order: bool = False,
    intervals: IntervalPlan = RQMC,
    convergence_start: int = 64,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """First and total (and second) order Sobol' indices of every output, with confidence intervals.

    Parameters
    ----------
    values
        ``[N (G + 2), m]`` model values on the rows of :func:`sample` (``[N (2G + 2), m]``
        with ``calc_second_order``), ``N`` a power of two, one column per output.
    space
        The parameter space the design was drawn from.
    groups
        The same ``{group_name: [parameter names]}`` given to :func:`sample`.
    calc_second_order
        The design includes ``B_A^(i)``; adds ``S2``.
    intervals
        The interval plan (:class:`~sensitivity.analyses.indices.intervals.IntervalPlan`, passed whole):
        ``rqmc`` (default), Student-t intervals over the ``replicates`` scramblings the design was drawn
        with (:func:`sample`'s ``replicates``); ``bootstrap``, over ``n_resamples`` resamples of the ``N`` base
        rows (i.i.d. designs; one resampling shared by all outputs and factors; 0: no intervals), ``interval``
        ``percentile`` or ``normal`` (estimate -+ z sd, SALib's ``*_conf``), its ``seed`` an integer ``s`` that
        draws the resamples SALib draws with ``seed=s``; ``none``. The estimate is the pooled one on all ``N``
        base rows either way.
    convergence_start
        Smallest base size of the convergence record, a power of two: indices are
        recomputed on the nested prefixes ``N' = start, 2 start, ..., N`` of the design
        (each prefix of a scrambled Sobol' sequence is itself balanced).
    output_names, output_units
        Labels and UDUNITS-2 units of the ``m`` outputs.

    Returns
    -------
    xarray.Dataset
        ``S1``, ``ST`` ``(factor, output)`` with ``*_interval`` ``(factor, output, bound)``
        (left out with no intervals),
        ``S2`` ``(factor_i, factor_j, output)`` (symmetric, NaN diagonal) when asked,
        ``variance (output)``, ``S1_convergence``/``ST_convergence`` ``(n_samples, factor, output)``
        ``status (output)`` (1 where an output is constant: its indices are NaN) and the
        heavy-tail check of every output on the first rows (65,536, fewer on many outputs:
        :func:`~sensitivity.analyses.indices.tails.sample_rows`; ``tail_share``, ``tail_index``,
        ``tail_flag``; :mod:`~sensitivity.analyses.indices.tails`).
        ``factor`` is ``parameter``, or ``group`` (with ``group_member (group, parameter)``).
    """
    design.require_independent(space, method="Sobol' analysis", instead=DEPENDENT)
    plan = intervals.check()
    g = membership(space, groups).shape[0]
    y = design.as_values(values)
    per_block = 2 * g + 2 if calc_second_order else g + 2
    n = base_size(y.shape[0], per_block, g, calc_second_order)
    blocks = y.reshape(n, per_block, y.shape[1])
    acc = accumulate(blocks, g, calc_second_order, plan, convergence_sizes(convergence_start, n))
    reps = _bootstrap(blocks, g, calc_second_order, plan) if plan.kind == "bootstrap" else acc.replicate_estimates()
    return indices_dataset(acc, reps, y, space, groups=groups, calc_second_order=calc_second_order, plan=plan,
                    output_names=output_names, output_units=output_units)


def convergence_sizes(start: int, n: int) -> list[int]:
    """The prefix sizes of the convergence record: ``start, 2 start, ..., n`` (``[n]`` when ``start > n``)."""
    start = design.check_power_of_two(start, what="convergence_start")
    return [2**k for k in range(start.bit_length() - 1, n.bit_length())] or [n]


def indices_dataset(acc: pickfreeze.Accumulator, reps: dict[str, np.ndarray], values: np.ndarray, space: ParameterSpace, *,
             groups: Groups | None, calc_second_order: bool, plan: IntervalPlan,
             output_names: Sequence[str] | None, output_units: Sequence[str] | None) -> xr.Dataset:
    """:func:`analyze`'s dataset from the replicate estimates, the accumulator's convergence record and the
    design's values (the first :func:`~sensitivity.analyses.indices.tails.sample_rows` of them suffice; their
    heavy-tail check is the accumulator's where it made it)."""
    members = membership(space, groups)
    n, y = acc.n, values
    sizes, conv = acc.sizes, acc.convergence()
    factor = "parameter" if groups is None else "group"
    coords = {
        **(dataset.parameter_axis(space) if groups is None else axis_coords("group", list(groups))),
        **dataset.output_axis(y.shape[1], output_names, output_units),
        **dataset.BOUND_COORDS,
        "n_samples": xr.Variable(
            "n_samples", np.asarray(sizes, dtype=np.int32), {"long_name": "base sample size N of the prefix", "units": "1"}
        ),
    }
    data, var_coords = summary_variables(reps, y, output_units, tail=acc.tail_check)
    coords.update(var_coords)
    for key, long_name in (("S1", "first-order Sobol' index"), ("ST", "total Sobol' index")):
        data.update(index_variables(key, reps[key], (factor, "output"), long_name, plan))
        data[f"{key}_convergence"] = dataset.variable(
            ("n_samples", factor, "output"), np.stack([c[key][0] for c in conv]),
            f"{long_name} from the first N base rows of the design", "1",
        )
    if calc_second_order:
        pair = (f"{factor}_i", f"{factor}_j", "output")
        coords.update(matrix_coords(factor, list(coords[f"{factor}_name"].values)))
        data["S2"] = dataset.variable(pair, reps["S2"][0], "second-order Sobol' index", "1")
        if plan.kind != "none":
            data["S2_interval"] = dataset.variable(
                pair + ("bound",), plan.bounds(reps["S2"]), f"second-order Sobol' index, {plan.describe()}", "1"
            )
    if groups is not None:
        coords.update(dataset.parameter_axis(space))
        data["group_member"] = xr.Variable(
            ("group", "parameter"), members.astype(np.int8), {"long_name": "1 where the parameter belongs to the group", "units": "1"}
        )
    attrs = {
        "method": "Sobol' indices: Saltelli 2010 first order, Jansen total order, Saltelli 2002 second order",
        "references": "doi:10.1016/j.cpc.2009.09.018 doi:10.1016/S0010-4655(02)00280-1",
        "base_sample_size": n,
        **plan.attrs(),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


def index_variables(key: str, reps: np.ndarray, dims: tuple[str, ...], long_name: str,
                    plan: IntervalPlan, units: str | None = "1", **attrs: object) -> dict[str, xr.Variable]:
    """``key`` (the estimate, row 0 of ``reps [K, ...]``) and, unless ``plan`` makes none, ``key_interval``."""
    out = {key: dataset.variable(dims, reps[0], long_name, units, **attrs)}
    if plan.kind != "none":
        out[f"{key}_interval"] = dataset.variable(dims + ("bound",), plan.bounds(reps),
                                                  f"{long_name}, {plan.describe()}", units, **attrs)
    return out


def summary_variables(reps: dict[str, np.ndarray], y: np.ndarray, output_units: Sequence[str] | None, *,
                      tail: dict[str, xr.Variable] | None = None
                      ) -> tuple[dict[str, xr.Variable], dict[str, xr.Variable]]:
    """``variance``, ``status`` and the heavy-tail check of a pick-freeze analysis, and their coordinates.

    ``reps`` is :func:`replicate_estimates`' result, ``y`` the model values on the design's rows in order: the
    heavy-tail check reads the first :func:`~sensitivity.analyses.indices.tails.sample_rows` of them, unless
    ``tail`` is that check already made (:func:`~sensitivity.analyses.indices.tails.tail_variables`).
    """
    var_units, var_coords = dataset.units_table(
        "variance_units", ("output",), dataset.squared_units(output_units), "units of the output variance"
    )
    data = {
        "variance": dataset.variable(
            ("output",), reps["variance"][0], "output variance of [f(A); f(B)]", var_units,
            units_coordinate=next(iter(var_coords), None),
        ),
        "status": xr.Variable(
            "output",
            reps["status"].astype(np.int8),
            {"long_name": "Sobol' analysis status", "flag_values": np.array([0, 1], np.int8),
             "flag_meanings": "ok constant_output"},
        ),
        **(tails.tail_variables(y[: tails.sample_rows(y.shape[1])]) if tail is None else tail),
    }
    return data, var_coords


def check(space: ParameterSpace, groups: Groups | None = None) -> None:
    """Refuse a space with correlated inputs and ``groups`` that are not a partition of its parameters."""
    design.require_independent(space, method="Sobol' sampling", instead=DEPENDENT)
    membership(space, groups)


def membership(space: ParameterSpace, groups: Groups | None) -> np.ndarray:
    """``[G, d]`` boolean membership of parameters in factors (the identity without groups)."""
    d = len(space)
    if groups is None:
        return np.eye(d, dtype=bool)
    if not groups:
        raise ConfigError("`groups` must name at least one group, got none")
    members = np.zeros((len(groups), d), dtype=bool)
    for k, (name, names) in enumerate(groups.items()):
        for p in names:
            if p not in space.names:
                raise ConfigError(f"`groups`: group {name!r} names unknown parameter {p!r}; the space has {space.names}")
            members[k, space.names.index(p)] = True
    count = members.sum(axis=0)
    if (count != 1).any():
        j = int(np.argmax(count != 1))
        raise ConfigError(
            f"`groups` must put every parameter in exactly one group, {space.names[j]!r} is in {int(count[j])}"
        )
    return members


def base_size(rows: int, per_block: int, g: int, second: bool) -> int:
    """The base size ``N`` implied by the number of rows; a :class:`DataError` when unusable."""
    n = rows // per_block
    if rows % per_block or n < 2 or n & (n - 1):
        raise DataError(
            f"`values` must have N*{per_block} rows with N a power of two >= 2 ({g} factors, "
            f"calc_second_order={second}), got {rows} rows"
        )
    return n


def accumulate(blocks: np.ndarray, g: int, second: bool, plan: IntervalPlan,
               sizes: Sequence[int] = ()) -> pickfreeze.Accumulator:
    """The one-pass statistics of the values ``blocks [N, rows per block, m]`` held in memory, reduced in row
    blocks of bounded memory: one set per randomised-QMC scrambling under ``rqmc``, else one."""
    n, _, m = blocks.shape
    replicates = plan.check_rows(n) if plan.kind == "rqmc" else 1
    acc = pickfreeze.Accumulator(n, g, second, m, replicates=replicates, sizes=sizes)
    step = max(1, bootstrap.CHUNK_ELEMENTS // (len(acc.pairs) * m))
    for start in range(0, n, step):
        acc.update(blocks[start : start + step])
    return acc


def replicate_estimates(blocks: np.ndarray, g: int, second: bool, plan: IntervalPlan) -> dict[str, np.ndarray]:
    """The estimates on all rows (first), then on each randomised-QMC scrambling or bootstrap resample.

    ``S1``, ``ST`` ``[K, G, m]``, ``S2`` ``[K, G, G, m]``, ``variance`` ``[K, m]`` in output units squared,
    ``status`` ``[m]`` (:func:`~sensitivity.analyses.indices.pickfreeze.estimates`). A scrambling's estimate is
    computed on its rows alone (centred on their own mean), so the replicates are independent; bootstrap
    resamples share the centring of all rows, as SALib's.
    """
    if plan.kind == "bootstrap":
        return _bootstrap(blocks, g, second, plan)
    return accumulate(blocks, g, second, plan).replicate_estimates()


def _bootstrap(blocks: np.ndarray, g: int, second: bool, plan: IntervalPlan) -> dict[str, np.ndarray]:
    """The estimate and every bootstrap resample's, from weighted statistics of the rows, in output chunks."""
    n, _, m = blocks.shape
    weights, pairs = plan.weights(n), pickfreeze.pairs(g, second)
    chunk = max(1, bootstrap.CHUNK_ELEMENTS // (n * len(pairs)))
    parts = []
    for s in range(0, m, chunk):
        stats = Moments.of(pickfreeze.variables(blocks[:, :, s : s + chunk], g), pairs, weights)
        parts.append(pickfreeze.estimates(stats.mean, stats.comoment, n, g, second, shared_centre=True))
    return {key: np.concatenate([p[key] for p in parts], axis=-1) for key in parts[0]}
