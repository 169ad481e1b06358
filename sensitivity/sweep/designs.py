"""Designs: parameter grids of any size, generated block by block, and deterministic shards.

A :class:`Grid` knows its size and returns any contiguous block of its points in
physical units, so a sweep of 10^7 points never materialises the whole design.
Quasi-random designs come from :mod:`scipy.stats.qmc`. ``shard(i, n)`` is a
contiguous, disjoint slice of the global index; the shards concatenated equal the
full grid, and every point keeps its global index as its ``sample`` coordinate.
"""
from __future__ import annotations

import hashlib
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace

qmc = lazy_import("scipy.stats.qmc")

GRID_KINDS = ("factorial", "sobol", "halton", "lhs", "random", "oat", "file")
Through = Literal["bounds", "distribution"]
THROUGH = ("bounds", "distribution")


class Grid:
    """Base class: ``size`` points in physical units, readable by contiguous blocks."""

    space: ParameterSpace
    size: int

    def block(self, start: int, stop: int) -> np.ndarray:
        """Points ``start:stop`` of the design, ``[stop - start, n]`` in physical units."""
        raise NotImplementedError

    def points(self) -> np.ndarray:
        """The whole design (use :meth:`block` for designs larger than memory)."""
        return self.block(0, self.size)

    def digest(self) -> str:
        """SHA-256 of the design's content, cheap for generated designs: its size, first 1,024 points and
        last point (a generated design is a function of its settings, all of which move these points)."""
        h = hashlib.sha256(f"{type(self).__name__} {self.size}".encode())
        for points in (self.block(0, min(self.size, 1024)), self.block(max(self.size - 1, 0), self.size)):
            h.update(np.ascontiguousarray(points, dtype=np.float64).tobytes())
        return h.hexdigest()


@dataclass
class FactorialGrid(Grid):
    """Full factorial design: every combination of per-parameter levels (last parameter varies fastest).

    ``levels`` per parameter; parameters with ``scale="log"`` get geometrically spaced levels.
    """

    space: ParameterSpace
    levels: Sequence[int]

    def __post_init__(self) -> None:
        if len(self.levels) != len(self.space):
            raise ConfigError(f"grid.levels: need one level count per parameter ({len(self.space)}), got {list(self.levels)}")
        for name, k in zip(self.space.names, self.levels):
            if not isinstance(k, (int, np.integer)) or k < 1:
                raise ConfigError(f"grid.levels for {name!r} must be an integer >= 1, got {k!r}")
        self._axes = [
            _axis(p.low, p.high, k, p.scale) if k > 1 else np.array([p.nominal])
            for p, k in zip(self.space.parameters, self.levels)
        ]
        self.size = int(np.prod(self.levels, dtype=np.int64))

    def block(self, start: int, stop: int) -> np.ndarray:
        index = np.unravel_index(np.arange(start, stop), tuple(self.levels))
        return np.stack([axis[i] for axis, i in zip(self._axes, index)], axis=1)


@dataclass
class QmcGrid(Grid):
    """Scrambled Sobol' or Halton sequence mapped to the bounds (log-scaled parameters geometrically).

    The engine is seeded and scrambled once; a block that starts where the last one ended continues it,
    any other start rewinds it (``reset``) and fast-forwards, so any block equals the corresponding rows of
    the whole sequence and a sweep's consecutive slices cost no rebuild each.
    """

    space: ParameterSpace
    size: int
    kind: Literal["sobol", "halton"] = "sobol"
    seed: int = 0
    scramble: bool = True
    through: Through = "bounds"

    def __post_init__(self) -> None:
        check_grid_size(self.size, self.kind, len(self.space))

    _engine: qmc.QMCEngine | None = field(default=None, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def block(self, start: int, stop: int) -> np.ndarray:
        with self._lock:
            if self._engine is None:
                cls = qmc.Sobol if self.kind == "sobol" else qmc.Halton
                self._engine = cls(d=len(self.space), scramble=self.scramble, rng=np.random.default_rng(self.seed))
            if self._engine.num_generated != start:
                self._engine.reset()
                if start:
                    self._engine.fast_forward(start)
            with warnings.catch_warnings():  # scipy warns when n is not a power of 2; sizes are the user's choice
                warnings.simplefilter("ignore", UserWarning)
                unit = self._engine.random(stop - start)
        return to_space(self.space, unit, self.through)


@dataclass
class MaterialisedGrid(Grid):
    """A design held in memory: Latin hypercube, uniform random, one-at-a-time, or read from a file."""

    space: ParameterSpace
    array: np.ndarray

    def __post_init__(self) -> None:
        self.array = self.space.check_points(self.array, what="grid points")
        self.size = len(self.array)

    def block(self, start: int, stop: int) -> np.ndarray:
        return self.array[start:stop]

    def digest(self) -> str:
        """SHA-256 of every point (a design read from a file is identified by its content, not its path)."""
        return hashlib.sha256(np.ascontiguousarray(self.array, dtype=np.float64).tobytes()).hexdigest()


def make_grid(space: ParameterSpace, kind: str, *, n: int | None = None, levels: Sequence[int] | None = None,
              seed: int = 0, scramble: bool = True, steps: int = 5, path: str | Path | None = None,
              through: Through = "bounds") -> Grid:
    """Build the design named ``kind``.

    Parameters
    ----------
    space
        The parameter space.
    kind
        ``factorial`` (``levels``), ``sobol`` / ``halton`` (``n``, ``seed``, ``scramble``), ``lhs`` / ``random``
        (``n``, ``seed``), ``oat`` (``steps`` per parameter around nominal), ``file`` (``path`` to .nc or .csv).
    through
        How the random designs (``sobol``, ``halton``, ``lhs``, ``random``) leave the unit cube:
        ``bounds`` (linearly, or geometrically for ``scale="log"``: even coverage of the range) or
        ``distribution`` (each marginal's quantile function, restricted to the bounds: points
        distributed as the inputs, see :func:`to_space`).
    """
    if kind not in GRID_KINDS:
        raise ConfigError(f"grid.kind must be one of {GRID_KINDS}, got {kind!r}")
    if through not in THROUGH:
        raise ConfigError(f"grid.through must be one of {THROUGH}, got {through!r}")
    if kind == "factorial":
        if levels is None:
            raise ConfigError("grid.levels is required for a factorial grid")
        return FactorialGrid(space, list(levels))
    if kind == "oat":
        return MaterialisedGrid(space, one_at_a_time(space, steps))
    if kind == "file":
        if path is None:
            raise ConfigError("grid.path is required for a grid read from a file")
        from sensitivity.sweep.from_file import read_points

        return MaterialisedGrid(space, read_points(path, space.names, "grid.path"))
    check_grid_size(n, kind, len(space))
    if kind in ("sobol", "halton"):
        return QmcGrid(space, int(n), kind, seed, scramble, through)
    rng = np.random.default_rng(seed)
    unit = qmc.LatinHypercube(d=len(space), rng=rng).random(n) if kind == "lhs" else rng.random((n, len(space)))
    return MaterialisedGrid(space, to_space(space, unit, through))


@dataclass(frozen=True)
class GridDesign:
    """The settings of a design (:func:`make_grid`'s arguments but the space): what a sweep records of its grid, so
    a study reading the sweep (DGSM from its points) knows how the points were drawn."""

    kind: str
    n: int | None = None
    levels: tuple[int, ...] | None = None
    seed: int = 0
    scramble: bool = True
    steps: int = 5
    path: str | None = None
    through: Through = "bounds"

    def grid(self, space: ParameterSpace) -> Grid:
        """The design over ``space``."""
        return make_grid(space, self.kind, n=self.n, levels=self.levels, seed=self.seed, scramble=self.scramble,
                         steps=self.steps, path=self.path, through=self.through)


def shard_bounds(size: int, shard: int, num_shards: int) -> tuple[int, int]:
    """Global index range ``[start, stop)`` of shard ``shard`` of ``num_shards`` (contiguous, disjoint, covering)."""
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ConfigError(f"grid.num_shards must be an integer >= 1, got {num_shards!r}")
    if not isinstance(shard, int) or not 0 <= shard < num_shards:
        raise ConfigError(f"grid.shard must be an integer in [0, {num_shards}), got {shard!r}")
    if size < 1:
        raise ConfigError(f"the grid is empty ({size} points); check grid.n or the file of grid.path")
    start, stop = size * shard // num_shards, size * (shard + 1) // num_shards
    if stop <= start:
        raise ConfigError(f"grid.num_shards: shard {shard} of {num_shards} holds no points (the grid has {size}); "
                          f"use at most {size} shards")
    return start, stop


def to_bounds(space: ParameterSpace, unit: np.ndarray) -> np.ndarray:
    """Map points of the unit hypercube to the bounds (geometrically for ``scale="log"`` parameters)."""
    low, high = space.bounds.T
    points = low + unit * (high - low)
    for j, p in enumerate(space.parameters):
        if p.scale == "log":  # low > 0 (checked by the space)
            points[:, j] = np.exp(np.log(low[j]) + unit[:, j] * np.log(high[j] / low[j]))
    return np.clip(points, low, high, out=points)


def to_space(space: ParameterSpace, unit: np.ndarray, through: Through = "bounds") -> np.ndarray:
    """Map unit-cube points to the space: :func:`to_bounds`, or through each parameter's quantile function.

    With ``through="distribution"`` column ``j`` becomes ``F_j^-1(F_j(low_j) + u (F_j(high_j) - F_j(low_j)))``,
    the marginal restricted to the parameter's bounds, so every point is a valid grid point. A space with a
    correlation matrix ``R`` couples the columns first through its Gaussian copula, as every sampler of the
    inputs does: ``u <- Phi(Phi^-1(u) L^T)`` with ``L L^T = R`` (the normal scores of a low-discrepancy net,
    correlated by ``L``, stay a low-discrepancy sample of the copula).
    """
    if through == "bounds":
        return to_bounds(space, unit)
    from scipy import special

    from sensitivity.inputs.copula import standard_normal
    from sensitivity.inputs.marginals import truncated

    if space.correlation is not None and not np.allclose(space.correlation, np.eye(len(space))):
        unit = special.ndtr(standard_normal(unit) @ np.linalg.cholesky(space.correlation).T)
    columns = []
    for j, p in enumerate(space.parameters):
        inside = truncated(p.frozen_distribution(), (p.low, p.high), f"parameter {p.name!r}")
        columns.append(np.clip(inside.ppf(unit[:, j]), p.low, p.high))
    return np.column_stack(columns)


def one_at_a_time(space: ParameterSpace, steps: int) -> np.ndarray:
    """The nominal point, then ``steps`` levels of each parameter across its bounds with the others at nominal."""
    if not isinstance(steps, int) or steps < 2:
        raise ConfigError(f"grid.steps must be an integer >= 2, got {steps!r}")
    rows = [space.nominal]
    for j, p in enumerate(space.parameters):
        for value in _axis(p.low, p.high, steps, p.scale):
            row = space.nominal.copy()
            row[j] = value
            rows.append(row)
    return np.array(rows)


def _axis(low: float, high: float, k: int, scale: str) -> np.ndarray:
    return np.geomspace(low, high, k) if scale == "log" else np.linspace(low, high, k)


#: Points a scipy Sobol' or Halton sequence can index (its engine counts in uint32).
MAX_QMC_POINTS = 2**32
#: Share of the machine's memory a design held in memory (lhs, random) may take.
MEMORY_SHARE = 0.5


def check_grid_size(n: int | None, kind: str, d: int, key: str = "grid.n") -> None:
    """Refuse a grid size that cannot be made, in one line with the estimate: not a positive integer, beyond what
    a Sobol'/Halton sequence indexes, or (lhs, random: drawn whole) larger than half the machine's memory; ``key``
    names the size in the message (``starts.n`` for calibrate's starts)."""
    import os

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError(f"{key} must be an integer >= 1, got {n!r}")
    if kind in ("sobol", "halton") and n > MAX_QMC_POINTS:
        raise ConfigError(f"{key} = {n:.3g} exceeds the 2^32 points a {kind} sequence can index; give at most 2^32")
    if kind in ("lhs", "random"):
        need = float(n) * d * 8 * (2 if kind == "lhs" else 1)
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else float("inf")
        if need > MEMORY_SHARE * have:
            raise ConfigError(f"{key} = {n:.3g} {kind} points are drawn whole: {need / 2**30:.3g} GiB of memory, more "
                              f"than half of this machine's {have / 2**30:.3g} GiB; use grid=sobol or grid=halton "
                              "(generated block by block) or fewer points")
