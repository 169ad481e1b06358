"""Monte Carlo or randomised QMC propagation of the full input distribution, in bounded memory.

Plain Monte Carlo or randomised QMC (Owen-scrambled Sobol) from the full input distribution, in
``R`` independent replicates of ``N_r`` points, each evaluated in blocks. Memory is bounded by one
replicate of outputs (``N_r * m`` floats, ``N_r`` chosen from ``max_bytes``; float32 when the model
returns float32, as a float32 surrogate does, since the order statistics are the same numbers) and
one ``m x m`` covariance, whatever the total number of samples:

* mean and covariance are pooled over blocks, then over replicates, with the update of Chan, Golub &
  LeVeque (1983): each block of outputs is centred on its own mean in float64 and its scatter matrix
  is one BLAS product, while the block is still in cache;
* quantiles are the average of the replicates' sample quantiles (the batch-quantile estimator:
  its bias, ``O(1 / N_r)``, is far below its standard error, ``O(1 / sqrt(R N_r))``, for the
  replicate sizes used here, and it needs no second pass or per-sample state such as P^2); each
  replicate's are exact (numpy's linear interpolation) from a few single-rank partitions of each
  output's contiguous values (:func:`sensitivity.inputs.quantiles.sample_quantiles`), no sort;
* the model runs on a worker thread up to three blocks ahead of this numpy work
  (:func:`~sensitivity.analyses.propagation.evaluation.evaluate_ahead`), which fills the core a
  compiled surrogate leaves idle: 1.4-1.5x the bare evaluations on the demo, against 1.9-2.2x in turn
  (``benchmarks/bench_workflows.py --only mc``);
* every standard error is the spread of the ``R`` replicate estimates divided by ``sqrt(R)``; for
  RQMC the replicates are independent scrambles, the only valid error estimate for QMC
  (L'Ecuyer 2018). The standard errors of the std and of the quantiles are those of the replicate
  averages, used for the pooled estimates too.

References
----------
Chan, T. F., Golub, G. H. & LeVeque, R. J. (1983), Algorithms for computing the sample variance,
Am. Stat. 37, 242-247, doi:10.1080/00031305.1983.10483115.
L'Ecuyer, P. (2018), Randomized quasi-Monte Carlo: an introduction for practitioners, MCQMC 2016,
doi:10.1007/978-3-319-91436-7_2.
"""
from __future__ import annotations

import math
from contextlib import closing
from typing import Iterator, Sequence

import numpy as np

from sensitivity.analyses.propagation.dataset import DEFAULT_QUANTILES, OutputLabels, checked_quantiles, method_result
from sensitivity.analyses.propagation.evaluation import ValuesFn, evaluate, evaluate_ahead
from sensitivity.inputs.uncertainty import InputUncertainty, Sampler, unit_cube_blocks
from sensitivity.analyses.propagation.settings import MonteCarlo
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.quantiles import sample_quantiles

xr = lazy_import("xarray")


def monte_carlo(
    inputs: InputUncertainty,
    values_fn: ValuesFn,
    *,
    n_samples: int = MonteCarlo.n_samples,
    n_replicates: int = MonteCarlo.n_replicates,
    sampler: Sampler = MonteCarlo.sampler,
    block_size: int = MonteCarlo.block_size,
    max_bytes: int = MonteCarlo.max_bytes,
    seed: int | np.random.Generator | None = None,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Monte Carlo or randomised QMC propagation of the full input distribution.

    Parameters
    ----------
    values_fn
        ``points [K, n] -> values [K, m]``, batched; called once per block of ``block_size`` points
        (plus once at the mean to learn ``m``).
    n_samples
        Target total number of model evaluations, >= 2 * n_replicates. For ``"sobol"`` the replicate
        size is a power of 2, so the total is the largest multiple of it not above ``n_samples``.
    n_replicates
        Minimum number of independent replicates (scrambles for ``"sobol"``), >= 2; more are used when
        one replicate of outputs would exceed ``max_bytes``.
    sampler
        ``"sobol"`` (randomised QMC) or ``"random"`` (plain Monte Carlo).
    block_size
        Points per model call (a power of 2 for ``"sobol"``).
    max_bytes
        Memory allowed for one replicate of float64 outputs [bytes].
    seed
        Seed or generator; the replicates draw from it in turn.

    Returns
    -------
    xarray.Dataset
        As :func:`~sensitivity.analyses.propagation.first_order`, with sample quantiles and Monte Carlo
        standard errors ``output_mean_se``, ``output_std_se``, ``output_covariance_se``,
        ``output_quantile_se``; attributes ``n_samples``, ``n_replicates``, ``sampler``.
    """
    probabilities = checked_quantiles(quantiles)
    rng = np.random.default_rng(seed)
    probe = evaluate(values_fn, inputs.mean[None, :], keep_float32=True)
    m = probe.shape[1]
    outputs = OutputLabels.of(m, output_names, output_units)
    n_rep, rep_size, points = _sample(inputs, m, n_samples, n_replicates, sampler, block_size, max_bytes, rng)
    pooled, spread = _PooledMoments(m), _Spread()
    outside = 0
    buffer = np.empty((m, rep_size), probe.dtype)  # one replicate, each output's values contiguous
    replicate, start = _PooledMoments(m), 0
    with closing(evaluate_ahead(values_fn, points, keep_float32=True)) as evaluated:  # closed on an error too
        for x, y in evaluated:
            outside += _count_outside(inputs, x)
            buffer[:, start : start + len(x)] = y.T
            replicate.merge_block(y)
            start += len(x)
            if start == rep_size:  # a replicate complete: its blocks sum to rep_size
                q = sample_quantiles(buffer, probabilities)  # reorders each output's values
                cov = replicate.covariance
                pooled.merge(rep_size, replicate.mean, replicate.scatter)
                spread.add(mean=replicate.mean, std=np.sqrt(np.diag(cov)), covariance=cov, quantile=q)
                replicate, start = _PooledMoments(m), 0
    result = method_result(pooled.mean, pooled.covariance, probabilities, outputs, outside / (n_rep * rep_size),
                           quantile_values=spread.mean["quantile"], se=spread.standard_error())
    result.attrs.update(n_samples=n_rep * rep_size, n_replicates=n_rep, sampler=sampler)
    return result


def sample_points(
    inputs: InputUncertainty,
    m: int,
    *,
    n_samples: int = MonteCarlo.n_samples,
    n_replicates: int = MonteCarlo.n_replicates,
    sampler: Sampler = MonteCarlo.sampler,
    block_size: int = MonteCarlo.block_size,
    max_bytes: int = MonteCarlo.max_bytes,
    seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    """``[N, n]`` the points :func:`monte_carlo` evaluates a model of ``m`` (flat) outputs at with these settings
    and seed, in its order (replicate after replicate): its sample redrawn, as
    :func:`~sensitivity.analyses.verify.propagation.verify_propagation` runs the simulator on it."""
    _, _, points = _sample(inputs, m, n_samples, n_replicates, sampler, block_size, max_bytes,
                           np.random.default_rng(seed))
    return np.vstack(list(points))


def _sample(inputs: InputUncertainty, m: int, n_samples: int, n_replicates: int, sampler: Sampler, block_size: int,
            max_bytes: int, rng: np.random.Generator) -> tuple[int, int, Iterator[np.ndarray]]:
    """``(replicates, replicate size, blocks of points)``: the replicate plan of ``m`` outputs and its points, drawn
    from ``rng`` block by block (lazily)."""
    n_rep, rep_size = replicate_plan(n_samples, n_replicates, m, max_bytes, power_of_two=sampler == "sobol")
    block = min(_checked_positive_int(block_size, "block_size"), rep_size)
    points = (inputs.from_unit_cube(u) for _ in range(n_rep)
              for u in unit_cube_blocks(rep_size, inputs.n, block, sampler, rng))
    return n_rep, rep_size, points


def replicate_plan(n_samples: int, n_replicates: int, m: int, max_bytes: int, *,
                   power_of_two: bool) -> tuple[int, int]:
    """``(replicates, replicate size)`` for about ``n_samples`` points in at least ``n_replicates``
    replicates whose ``[size, m]`` float64 outputs fit ``max_bytes``."""
    n_samples = _checked_positive_int(n_samples, "n_samples")
    n_replicates = _checked_positive_int(n_replicates, "n_replicates")
    max_bytes = _checked_positive_int(max_bytes, "max_bytes")
    if n_replicates < 2:
        raise ConfigError(f"`n_replicates` must be >= 2 (standard errors need two), got {n_replicates}")
    size = min(n_samples // n_replicates, max_bytes // (8 * m))
    if power_of_two and size >= 2:
        size = 2 ** int(math.log2(size))
    if size < 2:
        raise ConfigError(
            f"`n_samples` = {n_samples} with `n_replicates` = {n_replicates} and `max_bytes` = {max_bytes} for "
            f"{m} outputs leaves < 2 samples per replicate"
        )
    return n_samples // size, size


class _PooledMoments:
    """Streaming mean and scatter matrix, merged group by group (Chan, Golub & LeVeque 1983)."""

    def __init__(self, m: int) -> None:
        self.count, self.mean, self.scatter = 0, np.zeros(m), np.zeros((m, m))

    def merge(self, count: int, mean: np.ndarray, scatter: np.ndarray) -> None:
        total = self.count + count
        delta = mean - self.mean
        self.scatter += scatter + np.outer(delta, delta) * (self.count * count / total)
        self.mean += delta * (count / total)
        self.count = total

    def merge_block(self, values: np.ndarray) -> None:
        """Merge a block of ``values [K, m]`` (any float dtype), centred on its own mean in float64."""
        centred = values.astype(float)  # a float64 copy
        mean = np.ones(len(values)) @ centred / len(values)  # BLAS: a third of the time of mean(axis=0)
        centred -= mean
        self.merge(len(values), mean, centred.T @ centred)  # BLAS syrk

    @property
    def covariance(self) -> np.ndarray:
        return self.scatter / (self.count - 1)


class _Spread:
    """Welford running mean and variance of named replicate estimates."""

    def __init__(self) -> None:
        self.count, self.mean, self.m2 = 0, {}, {}

    def add(self, **estimates: np.ndarray) -> None:
        self.count += 1
        for key, value in estimates.items():
            previous = self.mean.get(key, np.zeros_like(value))
            delta = value - previous
            self.mean[key] = previous + delta / self.count
            self.m2[key] = self.m2.get(key, np.zeros_like(value)) + delta * (value - self.mean[key])

    def standard_error(self) -> dict[str, np.ndarray]:
        """Standard error of each replicate average: sqrt(sample variance / count)."""
        return {key: np.sqrt(m2 / (self.count - 1) / self.count) for key, m2 in self.m2.items()}


def _count_outside(inputs: InputUncertainty, x: np.ndarray) -> int:
    """Number of points ``x [K, n]`` outside the inputs' bounds; two column reductions when none is."""
    if inputs.bounds is None or ((x.min(axis=0) >= inputs.bounds[:, 0]).all()
                                 and (x.max(axis=0) <= inputs.bounds[:, 1]).all()):
        return 0
    return int(inputs.outside_bounds(x).sum())


def _checked_positive_int(value: int, what: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"`{what}` must be a positive integer, got {value!r}")
    return int(value)
