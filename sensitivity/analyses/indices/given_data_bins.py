"""Given-data first-order indices in one pass: a partition estimator on bins of equal probability.

Each input's range is cut into ``B`` bins of equal probability under its known marginal law, bin ``b`` of
``x_i`` being ``F_i(x_i) in [b/B, (b+1)/B)`` (``F_i`` the space's marginal CDF), so the bins are fixed before any
point arrives. Within a bin ``x_i`` is nearly fixed and the other inputs vary as they do given ``x_i``, so the
spread of the bin means estimates ``Var(E[Y | x_i])`` (Plischke, Borgonovo & Smith 2013,
doi:10.1016/j.ejor.2012.11.047; Strong, Oakley & Chilcott 2012, doi:10.1111/j.1467-9876.2011.01014.x). With
``n_b`` points of mean ``ybar_b`` in bin ``b``, ``SS_b = sum_b n_b (ybar_b - ybar)^2`` (between bins),
``SS_w`` the sum of squares within the bins and ``SS = SS_b + SS_w``::

    S1_i = (SS_b - (B' - 1) SS_w / (N - B')) / SS

with ``B'`` the non-empty bins: the one-way analysis of variance's unbiased estimate of the between-bin variance
(``SS_b`` alone is biased up by ``(B' - 1) E[Var(Y | bin)] / N``). What is left is the binning bias,
``Var(E[Y | x_i]) - Var(E[Y | bin])``, of order ``B^-2`` for a smooth ``E[Y | x_i]`` (Ishigami's ``x2``, a
``sin^2``: 0.3 % of its index at the default ``B = 64``). The indices are those of the law the points were drawn
from: with dependent inputs the full first-order index ``Var(E[Y | x_i]) / V`` (Mara, Tarantola & Annoni 2015).

One pass. The sufficient statistics are, per input and bin, the count, the mean and the sum of squared deviations
of every output (:class:`BinStatistics`, joined by Chan, Golub & LeVeque's pairwise update, per bin), and the
overall :class:`~sensitivity.analyses.moments.Moments` of the outputs: ``d B m`` numbers, nothing of size ``N``.
The points of one analysis are split into ``batches`` consecutive, equal ranges (i.i.d. points: exchangeable
batches), each with its own statistics, so the error is the rank-based estimator's (``sd(batch estimates) /
sqrt(batches)``, Student-t interval) and shards of the points (any row ranges of the analysis) merge exactly.

Which route. The rank-based estimator of :mod:`~sensitivity.analyses.indices.given_data` needs no CDF and has no
binning bias, but sorts all ``N`` points per input: it serves data whose law is only known through them (a
``samples`` file, a stored sweep read whole). When the inputs' laws are the space's and the points are drawn and
evaluated here (``given_data`` without ``sweep`` or ``samples``), :func:`analyze_model` draws the same points as
:func:`~sensitivity.analyses.indices.given_data.sample`, ``block`` at a time, and reduces each block: memory does
not grow with ``N``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Callable, Iterator, Sequence

import numpy as np

from sensitivity.analyses.indices import design, given_data
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import LEVEL
from sensitivity.analyses.moments import Moments
from sensitivity.errors import ConfigError, DataError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.inputs.uncertainty import inputs_from_space, unit_cube_blocks
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: Bins of equal probability per input.
BINS = 64
#: Points per model call of :func:`analyze_model`.
BLOCK_POINTS = 1 << 12


def default_bins(n: int, batches: int) -> int:
    """:data:`BINS`, fewer where ``n`` points in ``batches`` batches would leave fewer than 4 points per bin in a
    batch on average (at least 2)."""
    return int(max(2, min(BINS, n // (4 * max(batches, 1)))))


def bin_of(space: ParameterSpace, x: np.ndarray, bins: int) -> np.ndarray:
    """``[N, d]`` the bin of each coordinate of ``x [N, d]``: ``floor(B F_i(x_i))``, in ``[0, B)``."""
    cdf = np.column_stack([p.frozen_distribution().cdf(x[:, i]) for i, p in enumerate(space.parameters)])
    return np.clip(np.floor(cdf * bins), 0, bins - 1).astype(np.intp)


@dataclass(frozen=True)
class BinStatistics:
    """Counts ``[d, B]``, means ``[d, B, m]`` and sums of squared deviations ``[d, B, m]`` of the outputs in each
    input's bins; :meth:`merge` joins two sets of points bin by bin (Chan et al.'s update; empty bins stay 0)."""

    count: np.ndarray
    mean: np.ndarray
    squares: np.ndarray

    @classmethod
    def of(cls, bins: np.ndarray, y: np.ndarray, n_bins: int) -> BinStatistics:
        """The statistics of values ``y [N, m]`` whose inputs fall in ``bins [N, d]``, two passes per bin."""
        onehot = (bins.T[:, None, :] == np.arange(n_bins)[None, :, None]).astype(np.float64)  # [d, B, N]
        count = onehot.sum(axis=2)
        mean = (onehot @ y) / np.maximum(count, 1)[..., None]
        dev = y[None] - np.take_along_axis(mean, bins.T[:, :, None], axis=1)  # [d, N, m]
        return cls(count, mean, np.einsum("dbn,dnm->dbm", onehot, dev**2))

    def merge(self, other: BinStatistics) -> BinStatistics:
        n = self.count + other.count
        share = np.divide(other.count, n, out=np.zeros_like(n), where=n > 0)[..., None]
        delta = other.mean - self.mean
        return BinStatistics(n, self.mean + delta * share,
                             self.squares + other.squares + delta**2 * (self.count[..., None] * share))


class Accumulator:
    """Per batch: :class:`BinStatistics` and the outputs' :class:`~sensitivity.analyses.moments.Moments`, of rows
    ``span = [start, stop)`` of an analysis of ``n`` points fed in order; batch ``k`` is rows ``[k s, (k + 1) s)``,
    ``s = n // batches`` (the last also takes the remainder). Adjacent or not, two spans' statistics merge."""

    def __init__(self, n: int, batches: int, bins: int, span: tuple[int, int] | None = None):
        self.n, self.batches, self.bins = n, max(batches, 1), bins
        self.size = n // self.batches
        self.span = (0, n) if span is None else span
        self.done = self.span[0]
        self.parts: dict[int, tuple[BinStatistics, Moments]] = {}

    def update(self, bins: np.ndarray, y: np.ndarray) -> None:
        """Add the next rows: their bins ``[b, d]`` (:func:`bin_of`) and values ``[b, m]``."""
        start, stop = self.done, self.done + len(y)
        if stop > self.span[1]:
            raise DataError(f"rows [{start}, {stop}) run past the statistics' rows {list(self.span)}")
        batch = np.minimum(np.arange(start, stop) // self.size, self.batches - 1)
        for k in np.unique(batch):
            rows = batch == k
            part = (BinStatistics.of(bins[rows], y[rows], self.bins), Moments.of(y[rows, None], [[0, 0]]))
            self.parts[int(k)] = part if k not in self.parts else _joined(self.parts[int(k)], part)
        self.done = stop

    def merge(self, other: Accumulator) -> Accumulator:
        """The statistics of both accumulators' rows (shards of one analysis: the same ``n``, batches and bins)."""
        if (self.n, self.batches, self.bins) != (other.n, other.batches, other.bins):
            raise DataError(f"statistics of (points, batches, bins) = {(self.n, self.batches, self.bins)} cannot "
                            f"merge with {(other.n, other.batches, other.bins)}: they are not of the same analysis")
        out = Accumulator(self.n, self.batches, self.bins, (min(self.span[0], other.span[0]),
                                                            max(self.span[1], other.span[1])))
        out.parts, out.done = dict(self.parts), out.span[1]
        for k, part in other.parts.items():
            out.parts[k] = part if k not in out.parts else _joined(out.parts[k], part)
        return out

    def estimates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``S1 [d, m]`` and the variance ``[m]`` of all rows, and ``[batches, d, m]`` each batch's ``S1``
        (None with one batch)."""
        if self.done != self.n or self.span != (0, self.n) or len(self.parts) != self.batches:
            raise DataError(f"the statistics cover rows [{self.span[0]}, {self.done}) of the analysis' [0, {self.n}):"
                            " the indices need every row (merge every shard first)")
        parts = [self.parts[k] for k in range(self.batches)]
        s1, variance = first_order(*reduce(_joined, parts))
        return s1, variance, (np.stack([first_order(*p)[0] for p in parts]) if self.batches > 1 else None)


def _joined(a: tuple[BinStatistics, Moments], b: tuple[BinStatistics, Moments]) -> tuple[BinStatistics, Moments]:
    return a[0].merge(b[0]), a[1].merge(b[1])


def first_order(binned: BinStatistics, total: Moments) -> tuple[np.ndarray, np.ndarray]:
    """``S1 [d, m]`` (NaN for a constant output; see the module docstring) and the variance ``[m]`` (``ddof=0``)."""
    n, ss = total.count, total.comoment[0]
    constant = np.sqrt(ss / n) <= np.finfo(np.float64).eps * np.maximum(np.abs(total.mean[0]),
                                                                        np.finfo(np.float64).tiny)
    between = (binned.count[..., None] * (binned.mean - total.mean[0]) ** 2).sum(axis=1)  # [d, m]
    within = binned.squares.sum(axis=1)
    filled = (binned.count > 0).sum(axis=1)[:, None]
    s1 = (between - (filled - 1) * within / (n - filled)) / np.where(constant, np.nan, ss)
    return s1, ss / n


def points(space: ParameterSpace, n: int, *, seed: Seed = None, block: int = BLOCK_POINTS) -> Iterator[np.ndarray]:
    """:func:`~sensitivity.analyses.indices.given_data.sample` ``(space, n, seed=seed)``'s points, ``block`` at a
    time (the same pseudo-random stream, drawn in order)."""
    inputs, rng = inputs_from_space(space), np.random.default_rng(seed)
    for u in unit_cube_blocks(n, len(space), block, "random", rng):
        yield inputs.from_unit_cube(u)


def analyze_model(
    model: Callable[[np.ndarray], np.ndarray],
    space: ParameterSpace,
    n: int,
    *,
    seed: Seed = None,
    bins: int = BINS,
    batches: int = 8,
    level: float = LEVEL,
    block: int = BLOCK_POINTS,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """First-order indices of ``model`` on ``n`` i.i.d. draws of the input law, drawn, evaluated and reduced
    ``block`` at a time: :func:`~sensitivity.analyses.indices.given_data.analyze`'s dataset, by the partition
    estimator (see the module docstring).

    Parameters
    ----------
    model
        Values ``[rows, m]`` at points ``[rows, d]`` in physical units.
    space, n, seed
        As :func:`~sensitivity.analyses.indices.given_data.sample`'s (the same points).
    bins
        Bins of equal probability per input, at least 2 and at most ``n / 4``.
    batches, level, output_names, output_units
        As :func:`~sensitivity.analyses.indices.given_data.analyze`'s.
    block
        Points per model call.
    """
    check(n, bins, batches, level)
    if not isinstance(block, (int, np.integer)) or block < 1:
        raise ConfigError(f"`block` must be a positive integer, got {block!r}")
    acc = Accumulator(n, batches, bins)
    for x in points(space, n, seed=seed, block=block):
        acc.update(bin_of(space, x, bins), design.as_values(model(x)))
    return analyze_statistics(acc, space, level=level, output_names=output_names,
                              output_units=output_units)


def check(n: int, bins: int, batches: int, level: float) -> None:
    """Refuse settings the estimator cannot use."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 16:
        raise ConfigError(f"`n` must be an integer >= 16, got {n!r}")
    if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool) or not 2 <= bins <= n // 4:
        raise ConfigError(f"`bins` must be an integer in [2, n / 4 = {n // 4}], got {bins!r}")
    if not isinstance(batches, (int, np.integer)) or isinstance(batches, bool) or batches == 1 or batches < 0:
        raise ConfigError(f"`batches` must be 0 (no error estimate) or an integer >= 2, got {batches!r}")
    if batches and n < 4 * bins * batches:
        raise ConfigError(f"{n} points are too few for {batches} batches of at least 4 points per bin ({bins} bins)")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"`level` must lie in (0, 1), got {level!r}")


def analyze_statistics(acc: Accumulator, space: ParameterSpace, *, level: float = LEVEL,
                       output_names: Sequence[str] | None = None,
                       output_units: Sequence[str] | None = None) -> xr.Dataset:
    """The dataset of the statistics of every point (one run's, or its shards' merged)."""
    s1, variance, parts = acc.estimates()
    ds = given_data.indices_dataset(s1, variance, parts, space, level=level, output_names=output_names,
                                    output_units=output_units)
    ds.S1.attrs["long_name"] = "first-order Sobol' index from given data (equal-probability bins)"
    return ds.assign_attrs(
        method="given-data first-order indices, partition estimator on bins of equal probability with the "
               "one-way ANOVA bias correction (Plischke, Borgonovo & Smith 2013; Strong, Oakley & Chilcott 2012)",
        references="doi:10.1016/j.ejor.2012.11.047 doi:10.1111/j.1467-9876.2011.01014.x", n_points=acc.n,
        bins=acc.bins)
