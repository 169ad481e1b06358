"""The row bootstrap shared by every index: one resampling drawn once and applied to every output, and its intervals.

References
----------
Efron, B. & Tibshirani, R. J. (1993), An Introduction to the Bootstrap, Chapman & Hall,
doi:10.1007/978-1-4899-4541-9.
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

stats = lazy_import("scipy.stats")

IntervalKind = Literal["percentile", "normal"]
INTERVAL_KINDS: tuple[str, ...] = ("percentile", "normal")

#: Budget of float64 elements for one chunk of per-row terms (128 MiB): outputs are processed in chunks.
CHUNK_ELEMENTS = 1 << 24


def check_bootstrap(n_resamples: int, level: float, interval: str) -> None:
    """Validate the bootstrap settings shared by every index."""
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 2:
        raise ConfigError(f"`n_resamples` must be 0 (no intervals) or an integer >= 2, got {n_resamples!r}")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"`level` must lie in (0, 1), got {level!r}")
    if interval not in INTERVAL_KINDS:
        raise ConfigError(f"`interval` must be one of {INTERVAL_KINDS}, got {interval!r}")


def resample_weights(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray:
    """``[1 + R, n]`` row weights: ones (the estimate itself) then the bootstrap multiplicities.

    Resample ``r`` draws ``n`` rows with replacement; row ``k`` of the weights counts how
    often each row was drawn. A statistic that is a mean of per-row terms is then one
    matrix product ``weights @ terms / n`` for the estimate and every resample at once.
    The draw is ``rng.integers(n, size=(n, R))`` with column ``r`` the resample, as SALib's
    ``sobol.analyze`` draws it, so equal seeds give equal resamples.
    """
    draws = rng.integers(n, size=(n, n_resamples))
    flat = draws.T + n * np.arange(n_resamples)[:, None]
    counts = np.bincount(flat.ravel(), minlength=n * n_resamples).reshape(n_resamples, n)
    return np.vstack([np.ones((1, n)), counts.astype(np.float64)])


def weighted_mean(weights: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``weights [K, N] @ terms [N, ...] / N``: the mean of per-row terms under each weighting."""
    n = terms.shape[0]
    return (weights @ terms.reshape(n, -1) / n).reshape((weights.shape[0],) + terms.shape[1:])


def interval(replicates: np.ndarray, level: float, kind: str) -> np.ndarray:
    """Confidence interval ``[..., 2]`` (low, high) from ``[1 + R, ...]`` estimate-then-replicates.

    ``percentile``: the bootstrap quantiles ``(1 -+ level) / 2`` of the replicates
    (Efron & Tibshirani 1993, doi:10.1007/978-1-4899-4541-9). ``normal``: the estimate
    ``-+ z * sd`` with ``z = Phi^-1((1 + level) / 2)`` and ``sd`` the replicates'
    standard deviation (``ddof=1``) — SALib's ``*_conf`` is this half-width.
    """
    estimate, boot = replicates[0], replicates[1:]
    if kind == "normal":
        half = stats.norm.ppf(0.5 + level / 2) * np.std(boot, axis=0, ddof=1)
        return np.stack([estimate - half, estimate + half], axis=-1)
    alpha = (1.0 - level) / 2
    return np.moveaxis(np.quantile(boot, [alpha, 1.0 - alpha], axis=0), 0, -1)
