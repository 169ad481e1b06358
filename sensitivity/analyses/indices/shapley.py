"""Shapley effects of every output, with standard errors, under the space's Gaussian copula (dependent inputs).

The Shapley effect of input ``i`` (Owen 2014, doi:10.1137/130936233) shares the output variance ``V`` among
the inputs as the Shapley value of the cost ``c(J) = E[Var(Y | x_{-J})]`` (the variance left when only the
inputs ``J`` vary; Song, Nelson & Staum 2016, doi:10.1137/15M1048070, Theorem 1: the same value as with
``Var(E[Y | x_J])``)::

    Sh_i = (1/V) sum_{J not containing i} w(|J|) [c(J + {i}) - c(J)],   w(k) = k! (d - k - 1)! / d!

It is defined for dependent inputs, every ``Sh_i >= 0`` and ``sum_i Sh_i = 1``; for independent inputs
``S1_i <= Sh_i <= ST_i`` (an interaction's share is split equally among its inputs: Ishigami's ``x1`` gets
``S1 + S13 / 2``).

Estimation (Song et al. 2016, Algorithm 1; Iooss & Prieur 2019, doi:10.1615/Int.J.UncertaintyQuantification.2019027950):
``V`` from ``n_variance`` draws of the inputs; each cost ``c(J)`` as the mean over ``n_outer`` draws of
``x_{-J}`` of the sample variance (``ddof=1``, unbiased) of ``n_inner`` draws of ``x_J`` given ``x_{-J}``. The
conditional draws are exact under the copula (:mod:`~sensitivity.inputs.copula`: the Cholesky
factor of ``R`` in the order ``(-J, J)``, keeping the first scores and redrawing the last). Two designs:

exact permutations
    every subset ``J`` (``2^d - 2`` of them, ``c(empty) = 0`` and ``c(all) = V``) once, with ``n_outer``
    outer draws each: ``(2^d - 2) n_outer n_inner + n_variance`` model runs. Each ``c(J)`` enters ``Sh_i``
    once, so with independent cost estimates the delta method gives its standard error::

        se(Sh_i)^2 = sum_J a_iJ^2 var(c_J) / V^2 + (Sh_i - 1/d)^2 var(V) / V^2

    with ``a_iJ = w(|J| - 1)`` when ``i`` is in ``J`` and ``-w(|J|)`` when not, ``var(c_J)`` the variance of
    the outer draws' conditional variances over ``n_outer`` and ``var(V) = (mu_4 - V^2) / n_variance``.
    The same costs give the full first-order ``S1_full_i = 1 - c(-i) / V`` and the independent total
    ``ST_ind_i = c({i}) / V`` (Mara et al. 2015) at no extra cost.
random permutations
    ``n_permutations`` uniformly random orders ``pi``; along each, the costs of ``J_j = {pi_1 .. pi_j}``
    (``j < d``) from one outer draw each (``n_outer = 1``, the allocation Song et al. recommend) and the
    increments ``Delta_{pi_j} = c(J_j) - c(J_{j-1})``, ``c(J_d) = V``: ``n_permutations (d - 1) n_inner +
    n_variance`` runs. ``Sh_i`` is the mean increment over the orders, its standard error that of a mean
    of i.i.d. increments plus the delta-method term of ``V`` as above (with ``1/d`` replaced by the share of
    orders that end in ``i``).

Both sum to 1 exactly (the increments telescope). Intervals are ``Sh_i -+ z se`` (normal approximation).

One pass. The design is block-wise: every estimate is a function of running statistics of per-draw terms, so
:func:`analyze_model` draws, evaluates and reduces each part :data:`BLOCK_DRAWS` outer draws at a time
(:meth:`Design.blocks`) and holds no array of the design's size: the variance draws' count, mean and second to
fourth central moments (Pebay's pairwise update, :class:`CentralMoments`), a subset's conditional variances'
:class:`~sensitivity.analyses.moments.Moments` (the cost and its error), the random orders' sums of increments
(a batch of orders, at most :data:`PART_ROWS` runs, is one block). :func:`analyze` reduces the same statistics
from held values, each part in one block.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Literal, Sequence

import numpy as np

from sensitivity.analyses.indices import dataset
from sensitivity.inputs.copula import NormalScores
from sensitivity.analyses.indices.design import Seed, as_values, check_rows, is_correlated
from sensitivity.analyses.moments import Moments
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace
from sensitivity.analyses.indices.intervals import LEVEL

xr = lazy_import("xarray")
stats = lazy_import("scipy.stats")

#: Model runs per part of a random-permutation design (about; whole orders per part).
PART_ROWS = 1 << 16
#: Outer draws (variance draws) per block of a part drawn and reduced in one pass (:meth:`Design.blocks`).
BLOCK_DRAWS = 1 << 12
#: ``status`` flag values.
STATUS_OK, STATUS_CONSTANT = 0, 1


@dataclass(frozen=True)
class Part:
    """One piece of a :class:`Design`: the variance draws, one subset's cost, or a batch of random orders."""

    kind: Literal["variance", "subset", "orders"]
    rows: int
    seed: np.random.SeedSequence
    subset: np.ndarray | None = None  # [d] bool: the inputs J that vary
    orders: np.ndarray | None = None  # [P, d] random permutations of the inputs


@dataclass(frozen=True)
class Design:
    """The points of a Shapley analysis, drawn part by part (:meth:`points`), so memory stays one part's."""

    scores: NormalScores
    parts: tuple[Part, ...]
    n_variance: int
    n_outer: int
    n_inner: int
    exact: bool

    @property
    def n_points(self) -> int:
        """Model runs of the whole design."""
        return sum(p.rows for p in self.parts)

    @property
    def n_permutations(self) -> int:
        """The number of input orders: ``d!`` (exact) or the random orders drawn."""
        if self.exact:
            return math.factorial(self.scores.d)
        return sum(len(p.orders) for p in self.parts if p.orders is not None)

    def points(self, k: int) -> np.ndarray:
        """``[rows, d]`` physical points of part ``k`` (the same for the same design, whenever drawn)."""
        return np.concatenate(list(self.blocks(k)))

    def blocks(self, k: int) -> Iterator[np.ndarray]:
        """:meth:`points` of part ``k`` in order, :data:`BLOCK_DRAWS` variance or outer draws at a time (a batch of
        random orders: at once); each block is whole outer draws."""
        part, d, draws = self.parts[k], self.scores.d, BLOCK_DRAWS
        rng = np.random.default_rng(part.seed)
        if part.kind == "orders":  # along each order pi the inputs J_j = pi_1..pi_j vary: reversed, fixed ones first
            orders = part.orders
            fixed = np.arange(d)[None, :] < d - np.arange(1, d)[:, None]  # [d - 1 steps, d]
            e = _redrawn(rng, (len(orders), d - 1), self.n_inner, fixed[:, None, :])
            yield self.scores.to_inputs(self.scores.in_order(orders[:, ::-1], e).reshape(-1, d))
            return
        total = part.rows if part.kind == "variance" else self.n_outer
        for start in range(0, total, draws):
            b = min(draws, total - start)
            if part.kind == "variance":
                z = rng.standard_normal((b, d)) @ np.linalg.cholesky(self.scores.correlation).T
            else:
                order = np.concatenate([np.flatnonzero(~part.subset), np.flatnonzero(part.subset)])
                fixed = np.arange(d) < d - part.subset.sum()
                z = self.scores.in_order(order[None], _redrawn(rng, (1, b), self.n_inner, fixed))
            yield self.scores.to_inputs(z.reshape(-1, d))

    def all_points(self) -> np.ndarray:
        """Every part's points, in order: the rows :func:`analyze` expects values of."""
        return np.concatenate([self.points(k) for k in range(len(self.parts))])


def _redrawn(rng: np.random.Generator, shape: tuple[int, ...], n_inner: int, fixed: np.ndarray) -> np.ndarray:
    """``[*shape, n_inner, d]`` normals: one outer draw per ``shape`` entry where ``fixed``, fresh ones elsewhere."""
    d = fixed.shape[-1]
    outer = rng.standard_normal((*shape, 1, d))
    inner = rng.standard_normal((*shape, n_inner, d))
    return np.where(fixed, outer, inner)


@dataclass(frozen=True)
class CentralMoments:
    """Count, mean and sums of the 2nd to 4th powers of the deviations from it, ``[m]`` each, of one sample;
    :meth:`merge` joins two (Pebay 2008, Sandia report SAND2008-6212, eqs. 2.1-2.3: exact, stable)."""

    count: int
    mean: np.ndarray
    m2: np.ndarray
    m3: np.ndarray
    m4: np.ndarray

    @classmethod
    def of(cls, y: np.ndarray) -> CentralMoments:
        dev = y - y.mean(axis=0)
        return cls(len(y), y.mean(axis=0), (dev**2).sum(axis=0), (dev**3).sum(axis=0), (dev**4).sum(axis=0))

    def merge(self, other: CentralMoments) -> CentralMoments:
        a, b = self.count, other.count
        n, delta = a + b, other.mean - self.mean
        m2 = self.m2 + other.m2 + delta**2 * a * b / n
        m3 = (self.m3 + other.m3 + delta**3 * a * b * (a - b) / n**2
              + 3 * delta * (a * other.m2 - b * self.m2) / n)
        m4 = (self.m4 + other.m4 + delta**4 * a * b * (a * a - a * b + b * b) / n**3
              + 6 * delta**2 * (a * a * other.m2 + b * b * self.m2) / n**2 + 4 * delta * (a * other.m3 - b * self.m3) / n)
        return CentralMoments(n, self.mean + delta * b / n, m2, m3, m4)


def sample(
    space: ParameterSpace,
    *,
    n_variance: int,
    n_outer: int,
    n_inner: int,
    n_permutations: int,
    exact_up_to: int,
    seed: Seed = None,
) -> Design:
    """The design of a Shapley analysis: exact permutations for ``d <= exact_up_to`` inputs, random ones beyond.

    Parameters
    ----------
    space
        The inputs, independent or coupled by a correlation matrix (Gaussian copula).
    n_variance
        Draws of the inputs for the output variance ``V``.
    n_outer
        Exact permutations: outer draws of ``x_{-J}`` per subset ``J`` (random orders use one).
    n_inner
        Draws of ``x_J`` given each outer draw, at least 2 (Song et al. recommend 3).
    n_permutations
        Random permutations: the number of random orders of the inputs.
    exact_up_to
        The largest number of inputs analysed by exact permutations (``2^d - 2`` subset costs).
    seed
        Seed of every draw (pseudo-random: the standard errors assume i.i.d. draws).

    Returns
    -------
    Design
        Its :meth:`Design.points` (part by part) or :meth:`Design.all_points` are where to run the model.
    """
    for name, value, low in (("n_variance", n_variance, 2), ("n_outer", n_outer, 2), ("n_inner", n_inner, 2),
                             ("n_permutations", n_permutations, 2), ("exact_up_to", exact_up_to, 1)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ConfigError(f"`{name}` must be an integer >= {low}, got {value!r}")
    scores = NormalScores.of(space)
    d = scores.d
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(2**63))
    root = np.random.SeedSequence(seed)
    exact = d <= exact_up_to
    if exact:
        masks = (np.arange(1, 2**d - 1)[:, None] >> np.arange(d)[None, :]) & 1 == 1
        seeds = root.spawn(1 + len(masks))
        parts = [Part("subset", n_outer * n_inner, s, subset=mask) for mask, s in zip(masks, seeds[1:])]
    else:
        rng = np.random.default_rng(root.spawn(1)[0])
        orders = np.argsort(rng.random((n_permutations, d)), axis=1)
        per_part = max(1, PART_ROWS // ((d - 1) * n_inner))
        batches = [orders[a:a + per_part] for a in range(0, n_permutations, per_part)]
        seeds = root.spawn(1 + len(batches))
        parts = [Part("orders", len(b) * (d - 1) * n_inner, s, orders=b) for b, s in zip(batches, seeds[1:])]
    variance = Part("variance", n_variance, seeds[0])
    return Design(scores, (variance, *parts), n_variance, n_outer if exact else 1, n_inner, exact)


def part_statistics(blocks: Iterable[np.ndarray], design: Design, k: int) -> dict[str, np.ndarray]:
    """The statistics the analysis needs from the model's values ``[rows, m]`` on part ``k``, given in
    consecutive blocks of whole outer draws (one block: all of them), reduced as they come."""
    part, stats, rows = design.parts[k], None, 0
    for block in blocks:
        y = as_values(block, what=f"values of part {k}")
        rows += len(y)
        if part.kind == "variance":
            new = CentralMoments.of(y)
        elif part.kind == "subset":
            conditional = y.reshape(-1, design.n_inner, y.shape[1]).var(axis=1, ddof=1)  # [outer draws, m]
            new = Moments.of(conditional[:, None], [[0, 0]])
        else:
            new = _order_sums(y, design, part)
        stats = new if stats is None else stats.merge(new)
    check_rows(rows, part.rows, what=f"values of part {k}")
    if part.kind == "variance":
        variance = stats.m2 / (stats.count - 1)
        return {"mean": stats.mean, "variance": variance,
                "variance_var": np.maximum(stats.m4 / stats.count - variance**2, 0) / stats.count}
    if part.kind == "subset":
        return {"cost": stats.mean[0], "cost_var": stats.comoment[0] / (stats.count - 1) / design.n_outer}
    return stats.sums


@dataclass(frozen=True)
class _OrderSums:
    """The sums of a batch of random orders' increments (:func:`part_statistics`): they merge by addition."""

    sums: dict[str, np.ndarray]

    def merge(self, other: _OrderSums) -> _OrderSums:
        return _OrderSums({key: value + other.sums[key] for key, value in self.sums.items()})


def _order_sums(y: np.ndarray, design: Design, part: Part) -> _OrderSums:
    """The increments' sums of the values ``y`` of a whole batch of random orders."""
    orders, d = part.orders, design.scores.d
    cost = y.reshape(len(orders), d - 1, design.n_inner, -1).var(axis=2, ddof=1)  # [P, d - 1, m]
    zero = np.zeros_like(cost[:, :1])
    increments = np.diff(np.concatenate([zero, cost, zero], axis=1), axis=1)  # [P, d, m] along pi; last: -c(J_{d-1})
    natural = np.take_along_axis(increments, np.argsort(orders, axis=1)[:, :, None], axis=1)
    last = (orders[:, -1][:, None] == np.arange(d))[:, :, None]  # the increment that adds V
    return _OrderSums({"sum": natural.sum(axis=0), "sum_squares": (natural**2).sum(axis=0),
                       "sum_last": (natural * last).sum(axis=0),
                       "count_last": last.sum(axis=0)[:, 0].astype(np.float64), "count": np.array(float(len(orders)))})


def analyze(
    values: np.ndarray,
    design: Design,
    space: ParameterSpace,
    *,
    level: float | None = LEVEL,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Shapley effects of every output from the values ``[rows, m]`` on :meth:`Design.all_points`.

    Parameters
    ----------
    values
        Model values on every row of the design, in order.
    design
        The design of :func:`sample`.
    space
        The parameter space it was drawn from.
    level
        Level of the normal-approximation intervals ``Sh -+ z se``; None: standard errors only.
    output_names, output_units
        Labels and UDUNITS-2 units of the ``m`` outputs.

    Returns
    -------
    xarray.Dataset
        ``effect (parameter, output)`` [1] with ``effect_se`` and ``effect_interval (parameter, output,
        bound)`` (left out with ``level=None``), ``variance (output)`` with ``variance_se``, with exact
        permutations also ``S1_full`` and ``ST_ind`` ``(parameter, output)`` with their ``*_se``, and
        ``status (output)`` (1 where an output is constant: its effects are NaN).
    """
    y = as_values(values)
    check_rows(y.shape[0], design.n_points, what="values")
    bounds = np.cumsum([0] + [p.rows for p in design.parts])
    stats_ = [part_statistics([y[a:b]], design, k) for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
    return _dataset(stats_, design, space, level, output_names, output_units)


def analyze_model(
    model: Callable[[np.ndarray], np.ndarray],
    design: Design,
    space: ParameterSpace,
    **kwargs: object,
) -> xr.Dataset:
    """:func:`analyze` with the model run block by block (``model(points [rows, d]) -> [rows, m]``,
    :meth:`Design.blocks`) and each block reduced as it comes: memory does not grow with the design.

    Keywords as :func:`analyze`.
    """
    stats_ = [part_statistics((model(x) for x in design.blocks(k)), design, k) for k in range(len(design.parts))]
    return _dataset(stats_, design, space, **kwargs)  # type: ignore[arg-type]


def _dataset(statistics: Sequence[dict[str, np.ndarray]], design: Design, space: ParameterSpace,
             level: float | None = LEVEL, output_names: Sequence[str] | None = None,
             output_units: Sequence[str] | None = None) -> xr.Dataset:
    """The labeled Shapley effects (:func:`analyze`) from every part's :func:`part_statistics`, in part order."""
    if level is not None and not 0.0 < level < 1.0:
        raise ConfigError(f"`level` must lie in (0, 1), got {level!r}")
    head, rest = statistics[0], statistics[1:]
    mean, v, v_var = head["mean"], head["variance"], head["variance_var"]
    constant = np.sqrt(v) <= np.finfo(np.float64).eps * np.maximum(np.abs(mean), np.finfo(np.float64).tiny)
    v = np.where(constant, np.nan, v)
    d = len(space)
    estimates = _exact(rest, design, v, v_var) if design.exact else _random(rest, v, v_var)

    coords = {**dataset.parameter_axis(space), **dataset.output_axis(len(mean), output_names, output_units)}
    var_units, var_coords = dataset.units_table(
        "variance_units", ("output",), dataset.squared_units(output_units), "units of the output variance")
    coords.update(var_coords)
    ref = next(iter(var_coords), None)
    data = {
        "variance": dataset.variable(("output",), v, "output variance V", var_units, units_coordinate=ref),
        "variance_se": dataset.variable(("output",), np.sqrt(v_var), "standard error of the output variance",
                                        var_units, units_coordinate=ref),
        "status": xr.Variable("output", np.where(constant, STATUS_CONSTANT, STATUS_OK).astype(np.int8),
                              {"long_name": "Shapley analysis status", "flag_values": np.array([0, 1], np.int8),
                               "flag_meanings": "ok constant_output"}),
    }
    names = {"effect": "Shapley effect", "S1_full": "full first-order Sobol' index Var(E[Y|x_i])/V",
             "ST_ind": "independent total Sobol' index E[Var(Y|x_~i)]/V"}
    z = None if level is None else stats.norm.ppf(0.5 + level / 2)
    for key, (estimate, se) in estimates.items():
        data[key] = dataset.variable(("parameter", "output"), estimate, names[key], "1")
        data[f"{key}_se"] = dataset.variable(("parameter", "output"), se, f"standard error of the {names[key]}", "1")
        if z is not None:
            coords.update(dataset.BOUND_COORDS)
            data[f"{key}_interval"] = dataset.variable(
                ("parameter", "output", "bound"), np.stack([estimate - z * se, estimate + z * se], axis=-1),
                f"{names[key]}, normal-approximation {level:g} confidence interval from the standard error", "1")
    attrs = {
        "method": "Shapley effects (Owen 2014) by " + (
            f"exact permutations (all {2**d - 2} subset costs)" if design.exact else
            f"{design.n_permutations} random permutations") + " (Song, Nelson & Staum 2016, Algorithm 1) under "
            "the space's Gaussian copula",
        "references": "doi:10.1137/130936233 doi:10.1137/15M1048070 doi:10.1615/Int.J.UncertaintyQuantification."
                      "2019027950",
        "inputs": "dependent (Gaussian copula)" if is_correlated(space) else "independent",
        "permutations": "exact" if design.exact else "random",
        "n_permutations": design.n_permutations,
        "n_variance": design.n_variance,
        "n_outer": design.n_outer,
        "n_inner": design.n_inner,
        "n_points": design.n_points,
        "intervals": "none" if level is None else "standard_error",
        **({} if level is None else {"level": level}),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _exact(parts: Sequence[dict[str, np.ndarray]], design: Design, v: np.ndarray,
           v_var: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Shapley effects, full first-order and independent total indices, each ``(estimate, se)`` ``[d, m]``."""
    d = design.scores.d
    masks = np.array([p.subset for p in design.parts[1:]]).reshape(-1, d)  # [S, d]
    cost = np.array([p["cost"] for p in parts]).reshape(len(masks), len(v))  # [S, m]
    cost_var = np.array([p["cost_var"] for p in parts]).reshape(len(masks), len(v))
    size = masks.sum(axis=1)
    weight = np.array([math.factorial(k) * math.factorial(d - k - 1) / math.factorial(d) for k in range(d)])
    a = np.where(masks.T, weight[np.maximum(size - 1, 0)], -weight[np.minimum(size, d - 1)])  # [d, S]
    effect = a @ cost / v + 1.0 / d
    effect_var = (a**2 @ cost_var) / v**2 + (effect - 1.0 / d) ** 2 * v_var / v**2
    out = {"effect": (effect, np.sqrt(effect_var))}
    if d > 1:
        single = [int(np.flatnonzero((size == 1) & masks[:, i])[0]) for i in range(d)]
        rest = [int(np.flatnonzero((size == d - 1) & ~masks[:, i])[0]) for i in range(d)]
        total, others = cost[single] / v, cost[rest] / v
        out["ST_ind"] = (total, np.sqrt(cost_var[single] / v**2 + total**2 * v_var / v**2))
        out["S1_full"] = (1.0 - others, np.sqrt(cost_var[rest] / v**2 + others**2 * v_var / v**2))
    return out


def _random(parts: Sequence[dict[str, np.ndarray]], v: np.ndarray,
            v_var: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Shapley effects ``(estimate, se)`` ``[d, m]`` from the increments along random orders."""
    total = {key: sum(p[key] for p in parts) for key in parts[0]}
    m, last = total["count"], total["count_last"][:, None]
    mean = (total["sum"] + last * v) / m
    second = (total["sum_squares"] + 2 * v * total["sum_last"] + last * v**2) / m
    spread = np.maximum(second - mean**2, 0) * m / (m - 1)
    effect = mean / v
    effect_var = spread / (m * v**2) + (total["sum"] / (m * v)) ** 2 * v_var / v**2
    return {"effect": (effect, np.sqrt(effect_var))}


