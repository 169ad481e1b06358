"""The pick-freeze estimators as functions of one-pass statistics, and their accumulator over a streamed design.

Every Sobol' estimator of :mod:`~sensitivity.analyses.indices.sobol` is a ratio of means of per-row terms of the
``N`` row blocks ``(A, A_B^(1..G), [B_A^(1..G)], B)`` of the design. With ``D_i = f(A_B^(i)) - f(A)`` and
``mu``, ``s`` the mean and deviation of every value the analysis centres and scales by, they are::

    V     = (C_AA + C_BB) / 2N + ((m_A - m_B) / 2)^2                    variance of [f(A); f(B)]
    S1_i  = (C_B,Di / N + (m_B - mu) m_Di) / V                           Saltelli 2010 (b), centred
    ST_i  = (C_Di,Di / N + m_Di^2) / 2V                                   Jansen 1999 (f)
    S2_ij = (C_BAi,ABj / N + (m_BAi - mu)(m_ABj - mu) - C_AB / N - (m_A - mu)(m_B - mu)) / V - S1_i - S1_j

with ``m`` the means and ``C`` the co-moments of :class:`~sensitivity.analyses.moments.Moments` over the
variables :func:`variables` (the ``P`` values of a block, then the ``G`` differences ``D_i``: an inert factor's
``ST`` is then exactly 0) and the pairs :func:`pairs`; ``mu`` and ``s^2`` are the mean and variance of all
``N P`` values, from the same statistics. These are exactly SALib's centred and scaled means of products
(the scaling cancels in every ratio; ``s`` only decides which outputs are constant), so the in-memory route
(the design's values held, reduced block by block here) and the one-pass route (the design generated and
evaluated block by block, :func:`sensitivity.analyses.indices.sobol_onepass.analyze_model`) share one formula, and
replicates, prefixes and shards of a design merge exactly.

:class:`Accumulator` keeps one set of statistics per segment of the design between the edges of its
randomised-QMC scramblings and of the prefix sizes of the convergence record (a scrambling's, a prefix's and the
pooled statistics are merges of segments), and the first values for the heavy-tail check
(:func:`~sensitivity.analyses.indices.tails.sample_rows` of them, in the model's dtype;
:mod:`~sensitivity.analyses.indices.tails`, which needs order statistics, not moments): its memory does not grow
with ``N``, and the statistics of any row range (a shard, a checkpointed group of blocks) are a dataset that
merges exactly with its neighbours'.
"""
from __future__ import annotations

from bisect import bisect_right
from functools import reduce
from typing import Sequence

import numpy as np

from sensitivity.analyses.indices import tails
from sensitivity.analyses.moments import Moments, sums_of_products
from sensitivity.errors import DataError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: Bytes of float64 per-row variables an update reduces at a time (a block of 1,024 rows x 14 variables x 100
#: outputs in one: chunks that stay in a core's 1 MB L2 cache cost more in NumPy calls than they save).
CHUNK_BYTES = 1 << 24
#: ``status`` flag values.
STATUS_OK, STATUS_CONSTANT = 0, 1


def variables(blocks: np.ndarray, g: int) -> np.ndarray:
    """``[N, P + G, m]`` float64 per-row variables of ``blocks [N, P, m]`` (any float dtype): the ``P`` values,
    then ``D_i = AB_i - A`` (the differences of the float64 values)."""
    n, p = blocks.shape[:2]
    out = np.empty((n, p + g, *blocks.shape[2:]))
    out[:, :p] = blocks
    np.subtract(out[:, 1 : g + 1], out[:, :1], out=out[:, p:])
    return out


def block_moments(blocks: np.ndarray, g: int, pairs: np.ndarray, buffer: np.ndarray) -> Moments:
    """The statistics of the per-row variables of ``blocks [N, P, m]`` (any float dtype, e.g. the engine's
    float32): the ``P`` values, then ``D_i = AB_i - A`` (differences of the float64 values), their means and the
    co-moments of ``pairs``, in one read of ``blocks``.

    The rows are taken ``buffer.shape[1]`` at a time into ``buffer`` (float64, ``[W, rows, m]`` variable-major),
    each value less a shift per output (the mean of the block's ``A``
    values, in the values' dtype: a constant output's deviations are then exactly 0), and summed with the
    products of the pairs; the statistics are then ``mean = shift + S / N`` and ``C = S_ij - S_i S_j / N``
    (the shifted-data algorithm, Chan, Golub & LeVeque 1983, doi:10.1080/00031305.1983.10483115: exact in real
    arithmetic, stable as the shift is within a few deviations of the mean). Against the two-pass
    :meth:`~sensitivity.analyses.moments.Moments.of` (the variables written out, their mean, the centring, the
    products: four passes over ~11.5 MB per block of 1,024 rows) it makes no centring pass and sums by BLAS:
    1.97 against 2.34 ms per such block.
    """
    n, p, m = blocks.shape
    shift = blocks[:, 0].mean(axis=0, dtype=np.float64).astype(blocks.dtype).astype(np.float64)
    ones, step = np.ones(buffer.shape[1]), buffer.shape[1]
    sums, prods = np.zeros((buffer.shape[0], m)), np.zeros((len(pairs), m))
    for a in range(0, n, step):
        k = min(step, n - a)
        x = buffer[:, :k]
        np.copyto(x[:p], blocks[a : a + k].transpose(1, 0, 2))
        x[:p] -= shift
        np.subtract(x[1 : g + 1], x[:1], out=x[p:])
        sums += np.matmul(ones[:k], x)
        prods += sums_of_products(x.transpose(1, 0, 2), pairs)
    mean = sums / n
    comoment = prods - n * mean[pairs[:, 0]] * mean[pairs[:, 1]]
    mean[:p] += shift
    return Moments(pairs, n, mean, comoment)


def _variables_buffer(width: int, m: int) -> np.ndarray:
    """A float64 ``[width, rows, m]`` buffer for :func:`block_moments` of :data:`CHUNK_BYTES` (at least 16 rows),
    each variable's rows contiguous: the differences ``D_i`` then subtract contiguous runs that NumPy sees do
    not overlap (in the row-major layout it copies both operands first, 4x slower)."""
    return np.empty((width, max(16, CHUNK_BYTES // (8 * width * m)), m))


def pairs(g: int, second: bool) -> np.ndarray:
    """``[q, 2]`` co-moments the estimators read, in this order: ``(j, j)`` for the ``P`` values, ``(B, D_i)``,
    ``(D_i, D_i)``, and with ``second`` ``(BA_i, AB_j)`` for all ``i, j`` then ``(A, B)``."""
    p = 2 * g + 2 if second else g + 2
    d = p + np.arange(g)
    out = [np.stack([np.arange(p)] * 2, 1), np.stack([np.full(g, p - 1), d], 1), np.stack([d, d], 1)]
    if second:
        i, j = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
        out += [np.stack([g + 1 + i.ravel(), 1 + j.ravel()], 1), np.array([[0, p - 1]])]
    return np.concatenate(out)


def estimates(mean: np.ndarray, comoment: np.ndarray, count: np.ndarray | int, g: int, second: bool, *,
              shared_centre: bool = False) -> dict[str, np.ndarray]:
    """``S1``, ``ST`` ``[K, G, m]``, ``S2`` ``[K, G, G, m]`` (with ``second``), ``variance`` ``[K, m]`` and
    ``status`` ``[m]`` from ``K`` sets of statistics: ``mean [p, K, m]``, ``comoment [q, K, m]``, ``count``
    (a number or ``[K, 1]``).

    Each set is centred on its own values, unless ``shared_centre`` (bootstrap resamples, centred as SALib on
    all rows: the first set). ``status`` (and NaN indices) where the first set's values are constant.
    """
    p = 2 * g + 2 if second else g + 2
    n, cols = count, mean[:p]
    mu = cols.mean(axis=0)
    spread = (comoment[:p].sum(axis=0) + n * ((cols - mu) ** 2).sum(axis=0)) / (n * p)
    if shared_centre:
        mu, spread = mu[:1], spread[:1]
    constant = np.sqrt(spread) <= np.finfo(np.float64).eps * np.maximum(np.abs(mu), np.finfo(np.float64).tiny)
    m_a, m_b, m_d = mean[0], mean[p - 1], mean[p:]
    variance = (comoment[0] + comoment[p - 1]) / (2 * n) + ((m_a - m_b) / 2) ** 2
    inv = 1.0 / np.where(constant, np.nan, variance)
    s1 = (comoment[p : p + g] / n + (m_b - mu) * m_d) * inv
    out = {
        "S1": np.moveaxis(s1, 0, 1),
        "ST": np.moveaxis(0.5 * (comoment[p + g : p + 2 * g] / n + m_d**2) * inv, 0, 1),
        "variance": np.where(constant, 0.0, variance),
        "status": np.where(constant[0], STATUS_CONSTANT, STATUS_OK),
    }
    if second:
        cross = comoment[p + 2 * g : p + 2 * g + g * g].reshape((g, g) + comoment.shape[1:])
        centred = (mean[g + 1 : 2 * g + 1, None] - mu) * (mean[None, 1 : g + 1] - mu)
        v = (cross / n + centred - comoment[-1] / n - (m_a - mu) * (m_b - mu)) * inv
        s2 = np.moveaxis(v - s1[:, None] - s1[None, :], 2, 0)  # [K, G, G, m]
        upper = np.triu(np.ones((g, g), dtype=bool), 1)[None, :, :, None]
        s2 = np.where(upper, s2, np.swapaxes(s2, 1, 2))
        s2[:, np.arange(g), np.arange(g)] = np.nan
        out["S2"] = s2
    return out


def stacked(sets: Sequence[Moments], g: int, second: bool) -> dict[str, np.ndarray]:
    """:func:`estimates` of each of ``sets`` (unweighted statistics, each centred on its own values)."""
    count = np.array([s.count for s in sets], dtype=np.float64)[:, None]
    return estimates(np.stack([s.mean for s in sets], 1), np.stack([s.comoment for s in sets], 1), count, g,
                     second)


class Accumulator:
    """Statistics of base rows ``span = [start, stop)`` of a pick-freeze design of ``n`` base rows, fed in order,
    block by block (:meth:`update`); the statistics of adjacent spans join exactly (:meth:`merge`).

    The rows are cut into segments at the edges of the ``replicates`` consecutive scramblings of ``n / replicates``
    rows each and at the prefix sizes ``sizes`` (base rows) of the convergence record; each segment keeps its own
    statistics, so a scrambling or a prefix is the merge of its segments, whichever shard, checkpointed group or
    block fed them. ``m`` is the number of outputs. The first ``tail_rows`` values of the design (those in the
    span; default :func:`~sensitivity.analyses.indices.tails.sample_rows` of ``m``) are kept, in the model's
    dtype, for the heavy-tail check: memory does not grow with ``n``.
    """

    def __init__(self, n: int, g: int, second: bool, m: int, *, replicates: int = 1, sizes: Sequence[int] = (),
                 span: tuple[int, int] | None = None, tail_rows: int | None = None):
        self.n, self.g, self.second, self.m, self.replicates = n, g, second, m, replicates
        self.per_part, self.sizes = n // replicates, sorted(set(sizes))
        self.tail_rows = tails.sample_rows(m) if tail_rows is None else tail_rows
        self.cuts = sorted({*range(0, n + 1, self.per_part), *self.sizes})
        self.span = (0, n) if span is None else (int(span[0]), int(span[1]))
        if not 0 <= self.span[0] < self.span[1] <= n:
            raise DataError(f"rows {list(self.span)} must be a non-empty range of the design's [0, {n})")
        self.pairs = pairs(g, second)
        self.width = (2 * g + 2 if second else g + 2) + g
        self.segments: dict[int, Moments] = {}
        self.tail: list[np.ndarray] = []
        #: The heavy-tail check of :meth:`tail_values` (``tails.tail_variables``) where made while the rows were fed.
        self.tail_check: dict | None = None
        self.done = self.span[0]
        self._scratch = _variables_buffer(self.width, m)

    def update(self, blocks: np.ndarray) -> None:
        """Add the next ``blocks [k, P, m]`` (base rows ``done .. done + k``)."""
        start, stop = self.done, self.done + len(blocks)
        if stop > self.span[1]:
            raise DataError(f"rows [{start}, {stop}) run past the statistics' rows {list(self.span)}")
        room = self.tail_rows - start * blocks.shape[1]  # values of the first tail_rows not yet kept
        if room > 0:
            self.tail.append(np.array(blocks.reshape(-1, blocks.shape[2])[:room]))
        edges = [start, *(c for c in self.cuts if start < c < stop), stop]
        for lo, hi in zip(edges[:-1], edges[1:]):
            key = self.cuts[bisect_right(self.cuts, lo) - 1]
            stats = block_moments(blocks[lo - start : hi - start], self.g, self.pairs, self._scratch)
            self.segments[key] = self.segments[key].merge(stats) if key in self.segments else stats
        self.done = stop

    def merge(self, other: Accumulator) -> Accumulator:
        """The statistics of this span and the adjacent ``other``'s (which starts where this one stops)."""
        mine = (self.n, self.g, self.second, self.m, self.replicates, self.sizes, self.tail_rows)
        theirs = (other.n, other.g, other.second, other.m, other.replicates, other.sizes, other.tail_rows)
        if mine != theirs:
            raise DataError("statistics of (n, factors, second order, outputs, replicates, prefix sizes, tail rows) "
                            f"= {mine} cannot merge with {theirs}: they are not of the same design")
        if self.done != self.span[1] or other.done != other.span[1] or other.span[0] != self.span[1]:
            raise DataError(f"statistics of rows {list(self.span)} (fed to {self.done}) cannot merge with rows "
                            f"{list(other.span)} (fed to {other.done}): only finished, adjacent ranges join")
        out = Accumulator(self.n, self.g, self.second, self.m, replicates=self.replicates, sizes=self.sizes,
                          span=(self.span[0], other.span[1]), tail_rows=self.tail_rows)
        out.segments = dict(self.segments)
        for key, stats in other.segments.items():
            out.segments[key] = out.segments[key].merge(stats) if key in out.segments else stats
        out.tail, out.done, out.tail_check = [*self.tail, *other.tail], other.done, self.tail_check
        return out

    def rows(self, start: int, stop: int) -> Moments:
        """The statistics of the segments in base rows ``[start, stop)`` (edges among the cuts), merged in order."""
        parts = [self.segments[k] for k in sorted(self.segments) if start <= k < stop]
        return reduce(Moments.merge, parts, Moments.empty(self.width, self.pairs, (self.m,)))

    def pooled(self) -> Moments:
        """The statistics of every row fed so far (the merge of the scramblings')."""
        return self.rows(0, self.n)

    def replicate_estimates(self) -> dict[str, np.ndarray]:
        """:func:`estimates` on all rows, then (with more than one scrambling) on each scrambling alone."""
        self._require_whole()
        parts = [self.rows(r * self.per_part, (r + 1) * self.per_part) for r in range(self.replicates)]
        return stacked([self.pooled(), *(parts if len(parts) > 1 else [])], self.g, self.second)

    def convergence(self) -> list[dict[str, np.ndarray]]:
        """First and total order on each prefix of ``sizes``, in increasing order."""
        self._require_whole()
        return [stacked([self.rows(0, k)], self.g, self.second) for k in self.sizes]

    @property
    def tail_complete(self) -> bool:
        """Whether the values kept are the whole design's heavy-tail sample (its first ``tail_rows``, or all)."""
        return self.span[0] == 0 and (sum(map(len, self.tail)) >= self.tail_rows or self.done == self.n)

    def tail_values(self) -> np.ndarray:
        """``[rows, m]`` the first ``tail_rows`` values of the design (of the span), in the model's dtype."""
        if len(self.tail) > 1:  # joined once (17 MB of float32 on 100 outputs): a second call is free
            self.tail = [np.concatenate(self.tail)[: self.tail_rows]]
        return self.tail[0] if self.tail else np.empty((0, self.m))

    def _require_whole(self) -> None:
        if self.span != (0, self.n) or self.done != self.n:
            raise DataError(f"the statistics cover rows [{self.span[0]}, {self.done}) of the design's [0, {self.n}):"
                            " the indices need every row (merge every shard first)")

    def to_dataset(self) -> xr.Dataset:
        """The finished statistics as a dataset (a shard's file, a checkpoint); :meth:`from_dataset` reads it."""
        if self.done != self.span[1]:
            raise DataError(f"statistics of rows {list(self.span)} are unfinished (fed up to {self.done})")
        keys = sorted(self.segments)
        one = {"units": "1"}
        return xr.Dataset(
            {"mean": (("segment", "variable", "output"), np.stack([self.segments[k].mean for k in keys]),
                      {"long_name": "mean of the per-row variable over the segment's rows", **one}),
             "comoment": (("segment", "pair", "output"), np.stack([self.segments[k].comoment for k in keys]),
                          {"long_name": "sum of products of the deviations from the means", **one}),
             "count": ("segment", np.array([self.segments[k].count for k in keys], np.int64),
                       {"long_name": "base rows of the segment in the span", **one}),
             "segment_start": ("segment", np.array(keys, np.int64),
                               {"long_name": "first base row of the design's segment", **one}),
             "pairs": (("pair", "side"), self.pairs.astype(np.int32), {"long_name": "variables of the co-moment", **one}),
             "tail": (("tail_row", "output"), self.tail_values(),
                      {"long_name": "model values of the design's first rows, for the heavy-tail check", **one})},
            attrs={"base_rows": self.n, "factors": self.g, "second_order": int(self.second),
                   "replicates": self.replicates, "convergence_sizes": np.array(self.sizes, np.int64),
                   "rows_start": self.span[0], "rows_stop": self.span[1], "tail_rows": self.tail_rows},
        )

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> Accumulator:
        """The statistics written by :meth:`to_dataset`."""
        a = ds.attrs
        out = cls(int(a["base_rows"]), int(a["factors"]), bool(a["second_order"]), ds.sizes["output"],
                  replicates=int(a["replicates"]), sizes=[int(k) for k in np.atleast_1d(a["convergence_sizes"])],
                  span=(int(a["rows_start"]), int(a["rows_stop"])), tail_rows=int(a["tail_rows"]))
        mean, comoment = np.asarray(ds["mean"].values, np.float64), np.asarray(ds["comoment"].values, np.float64)
        for i, (key, count) in enumerate(zip(ds["segment_start"].values, ds["count"].values)):
            out.segments[int(key)] = Moments(out.pairs, int(count), mean[i], comoment[i])
        tail = np.asarray(ds["tail"].values)
        out.tail, out.done = ([tail] if len(tail) else []), out.span[1]
        return out
