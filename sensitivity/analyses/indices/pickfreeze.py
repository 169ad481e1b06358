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
evaluated block by block, :func:`sensitivity.analyses.indices.sobol.analyze_model`) share one formula, and
replicates, prefixes and shards of a design merge exactly.

:class:`Accumulator` keeps one set of statistics per randomised-QMC scrambling (the pooled estimate is their
merge), a copy at each prefix size of the convergence record, and the first :data:`TAIL_ROWS` values for the
heavy-tail check (:mod:`~sensitivity.analyses.indices.tails`, which needs order statistics, not moments): its
memory does not grow with ``N``.
"""
from __future__ import annotations

from functools import reduce
from typing import Sequence

import numpy as np

from sensitivity.analyses.moments import Moments

#: Values kept for the heavy-tail check: the first this many rows of the design (all of them below it).
TAIL_ROWS = 1 << 16
#: ``status`` flag values.
STATUS_OK, STATUS_CONSTANT = 0, 1


def variables(blocks: np.ndarray, g: int) -> np.ndarray:
    """``[N, P + G, m]`` per-row variables of ``blocks [N, P, m]``: the ``P`` values, then ``D_i = AB_i - A``."""
    return np.concatenate([blocks, blocks[:, 1 : g + 1] - blocks[:, :1]], axis=1)


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
    """Statistics of a pick-freeze design of ``n`` base rows fed in order, block by block (:meth:`update`).

    ``replicates`` consecutive scramblings of ``n / replicates`` rows each are kept apart; ``sizes`` are the
    prefix sizes (base rows) of the convergence record; ``m`` the number of outputs.
    """

    def __init__(self, n: int, g: int, second: bool, m: int, *, replicates: int = 1, sizes: Sequence[int] = (),
                 tail_rows: int = TAIL_ROWS):
        self.n, self.g, self.second, self.per_part = n, g, second, n // replicates
        self.cuts = sorted({*range(self.per_part, n + 1, self.per_part), *sizes})
        self.sizes, self.tail_rows = set(sizes), tail_rows
        self.pairs = pairs(g, second)
        width = (2 * g + 2 if second else g + 2) + g
        self.parts = [Moments.empty(width, self.pairs, (m,)) for _ in range(replicates)]
        self.prefixes: dict[int, Moments] = {}
        self.tail: list[np.ndarray] = []
        self.done = 0

    def update(self, blocks: np.ndarray) -> None:
        """Add the next ``blocks [k, P, m]`` (base rows ``done .. done + k``)."""
        if sum(len(t) for t in self.tail) < self.tail_rows:
            self.tail.append(blocks.reshape(-1, blocks.shape[2])[: self.tail_rows].copy())
        start, stop = self.done, self.done + len(blocks)
        edges = [start, *(c for c in self.cuts if start < c < stop), stop]
        for lo, hi in zip(edges[:-1], edges[1:]):
            part = lo // self.per_part
            self.parts[part] = self.parts[part].update(variables(blocks[lo - start : hi - start], self.g))
            if hi in self.sizes:
                self.prefixes[hi] = self.pooled()
        self.done = stop

    def pooled(self) -> Moments:
        """The statistics of every row fed so far (the merge of the scramblings')."""
        return reduce(Moments.merge, self.parts)

    def replicate_estimates(self) -> dict[str, np.ndarray]:
        """:func:`estimates` on all rows, then (with more than one scrambling) on each scrambling alone."""
        sets = [self.pooled(), *(self.parts if len(self.parts) > 1 else [])]
        return stacked(sets, self.g, self.second)

    def convergence(self) -> list[dict[str, np.ndarray]]:
        """First and total order on each prefix of ``sizes``, in increasing order."""
        return [stacked([self.prefixes[k]], self.g, self.second) for k in sorted(self.prefixes)]

    def tail_values(self) -> np.ndarray:
        """``[rows, m]`` the first :data:`TAIL_ROWS` values of the design."""
        return np.concatenate(self.tail)[: self.tail_rows]
