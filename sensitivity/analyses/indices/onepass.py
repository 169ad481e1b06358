"""The scrambled-Sobol' input sample drawn block by block, and one-pass statistics per scrambling over it.

The derivative-based estimators (DGSM's ``nu = E[(dy/dx)^2]``, the active-subspace matrix ``E[grad grad^T]``)
are means and co-moments of per-point terms on the sample of :func:`sensitivity.analyses.indices.dgsm.sample`:
``R`` independent scramblings of a Sobol' sequence, stacked. :func:`sample_blocks` yields that sample's points
``block`` at a time (the same points, :class:`~sensitivity.analyses.indices.design.SobolBase` fast-forwarded to
each block), and :class:`Replicates` keeps one set of :class:`~sensitivity.analyses.moments.Moments` per
scrambling, so the pooled estimate (their merge, Chan et al.) and the randomised-QMC replicates of
:mod:`~sensitivity.analyses.indices.intervals` come from statistics whose size does not grow with ``N``.

Both estimators read the same points for the same :class:`Draws` (size, seed, scramblings, block), so
:func:`evaluate` feeds any number of their reductions (:class:`Reduction`) from one model call per block: DGSM and
active subspaces run together evaluate the Jacobians once.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from sensitivity.analyses.indices import bootstrap, design, tails
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.analyses.moments import Moments
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace

#: Points per model call of the one-pass derivative-based analyses.
BLOCK_POINTS = 1 << 12


def sample_blocks(space: ParameterSpace, n: int, *, seed: Seed, replicates: int,
                  block: int = BLOCK_POINTS) -> Iterator[np.ndarray]:
    """``[<= block, d]`` consecutive points of ``dgsm.sample(space, n, seed=seed, replicates=replicates)``."""
    block = design.check_power_of_two(block, what="block", minimum=1)
    base = design.SobolBase(len(space), n, seed, replicates)
    for start in range(0, n, block):
        yield design.to_distribution(space, base.rows(start, min(n, start + block)))


@dataclass(frozen=True)
class Draws:
    """The sample of a one-pass derivative analysis: ``n`` points of ``dgsm.sample(space, n, seed=seed,
    replicates=replicates)``, evaluated ``block`` at a time. Equal draws are the same points in the same blocks."""

    n: int
    seed: Seed
    replicates: int
    block: int = BLOCK_POINTS

    @classmethod
    def of(cls, plan: IntervalPlan, n: int, *, seed: Seed, block: int = BLOCK_POINTS, what: str) -> Draws:
        """The draws of ``n`` points under the checked interval ``plan`` (its scramblings under ``rqmc``, else one);
        ``what`` names the analysis (``"the one-pass DGSM makes"``) in the refusal of bootstrap intervals, which
        resample all ``n`` points."""
        if plan.kind == "bootstrap":
            raise ConfigError(f"{what} randomised-QMC intervals or none, got `intervals` = 'bootstrap' (analyze the "
                              "sample's Jacobians in memory for it)")
        return cls(n, seed, plan.check_rows(n) if plan.kind == "rqmc" else 1, block)


class Reduction(Protocol):
    """The statistics of one analysis over :class:`Draws`, fed block by block by :func:`evaluate`."""

    def update(self, values: np.ndarray, jacobian: np.ndarray) -> None:
        """Add the next block's ``values [b, m]`` and ``jacobian [b, m, n]``."""

    def result(self) -> Any:
        """The analysis' dataset once every block is in."""


@dataclass(frozen=True)
class Then:
    """``reduction`` whose result goes through ``then`` (a relabelling)."""

    reduction: Reduction
    then: Callable[[Any], Any]

    def update(self, values: np.ndarray, jacobian: np.ndarray) -> None:
        self.reduction.update(values, jacobian)

    def result(self) -> Any:
        return self.then(self.reduction.result())


def evaluate(model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], space: ParameterSpace, draws: Draws,
             reductions: Sequence[Reduction]) -> None:
    """Draw ``draws``' points block by block, call ``model`` once per block (``points [b, n] -> (values [b, m],
    jacobian [b, m, n])``) and feed the block to every one of ``reductions``."""
    for points in sample_blocks(space, draws.n, seed=draws.seed, replicates=draws.replicates, block=draws.block):
        values, jacobian = model(points)
        for reduction in reductions:
            reduction.update(values, jacobian)


class Replicates:
    """Statistics of ``p`` per-row variables (``pairs`` co-moments) of ``n`` rows fed in order, one set per each
    of ``replicates`` consecutive scramblings of ``n / replicates`` rows.

    Each block is reduced in row chunks of at most :data:`~sensitivity.analyses.indices.bootstrap.CHUNK_ELEMENTS`
    products, so a wide block (many outputs, many pairs) stays within that memory.
    """

    def __init__(self, n: int, replicates: int, pairs: np.ndarray):
        self.size, self.pairs, self.done = n // replicates, np.asarray(pairs, dtype=np.intp).reshape(-1, 2), 0
        self.parts: list[Moments | None] = [None] * replicates

    def update(self, block: np.ndarray) -> None:
        """Add the next rows ``block [b, p, *shape]``."""
        width = max(block.shape[1], len(self.pairs)) * int(np.prod(block.shape[2:], dtype=np.int64))
        step = max(1, bootstrap.CHUNK_ELEMENTS // max(1, width))
        start = self.done
        cuts = sorted({0, len(block), *range(-start % self.size, len(block), self.size),
                       *range(0, len(block), step)})
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            stats = Moments.of(block[lo:hi], self.pairs)
            k = (start + lo) // self.size
            self.parts[k] = stats if self.parts[k] is None else self.parts[k].merge(stats)
        self.done += len(block)

    def sets(self) -> list[Moments]:
        """All rows' statistics (the scramblings' merged), then with more than one scrambling each one's."""
        parts = [p for p in self.parts if p is not None]
        return [reduce(Moments.merge, parts), *(parts if len(self.parts) > 1 else [])]


def stacked_means(sets: list[Moments]) -> np.ndarray:
    """``[K, p, *shape]`` the means of each set."""
    return np.stack([s.mean for s in sets])


def stacked_covariances(sets: list[Moments]) -> np.ndarray:
    """``[K, q, *shape]`` the (``ddof=0``) covariances of each set's pairs."""
    return np.stack([s.covariance() for s in sets])


class Head:
    """The first ``rows`` rows of a stream of ``[b, m]`` blocks (the heavy-tail check's sample; default
    :func:`~sensitivity.analyses.indices.tails.sample_rows` of ``m``)."""

    def __init__(self, rows: int | None = None):
        self.rows, self.kept, self.blocks = rows, 0, []

    def update(self, block: np.ndarray) -> None:
        if self.rows is None:
            self.rows = tails.sample_rows(block.shape[1])
        if self.kept < self.rows:
            self.blocks.append(np.array(block[: self.rows - self.kept]))
            self.kept += len(self.blocks[-1])

    def values(self) -> np.ndarray:
        return np.concatenate(self.blocks)
