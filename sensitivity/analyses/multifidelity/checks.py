"""Checks shared by the multifidelity estimators: value arrays, the nested sample layout, levels and seeds.

Every estimator of the package takes the simulator (high fidelity) on ``n`` points and the surrogate
(low fidelity) on ``N >= n`` points whose first ``n`` are the simulator's points (the nested layout of
MFMC). These helpers turn user arrays into float64 ``[rows, m]`` arrays or refuse them with one line that
names the argument and the offending value.
"""
from __future__ import annotations

import numpy as np

from sensitivity.errors import ConfigError, DataError

#: What the verbs accept as a seed.
Seed = int | np.random.Generator | None


def values(array: object, name: str, *, min_rows: int = 2) -> np.ndarray:
    """``array`` as a finite float64 ``[rows, m]`` array (a vector is one output); a :class:`DataError` if not."""
    y = np.asarray(array, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2:
        raise DataError(f"`{name}` must be [rows, outputs] values, got shape {y.shape}")
    if y.shape[0] < min_rows:
        raise DataError(f"`{name}` must have at least {min_rows} rows, got {y.shape[0]}")
    if not np.isfinite(y).all():
        row = int(np.argmax(~np.isfinite(y).all(axis=1)))
        raise DataError(f"`{name}` must be finite, row {row} is {y[row].tolist()[:4]}")
    return y


def nested(sim: object, sur: object, *, min_rows: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Simulator ``[n, m]`` and surrogate ``[N, m]`` values, ``N >= n``, the first ``n`` surrogate rows shared."""
    y0 = values(sim, "sim", min_rows=min_rows)
    y1 = values(sur, "sur", min_rows=min_rows)
    if y1.shape[1] != y0.shape[1]:
        raise DataError(f"`sur` must have the {y0.shape[1]} outputs of `sim`, got {y1.shape[1]}")
    if y1.shape[0] < y0.shape[0]:
        raise DataError(f"`sur` must have at least the {y0.shape[0]} rows of `sim` (its first rows are the "
                        f"simulator's points), got {y1.shape[0]}")
    return y0, y1


def level(value: float) -> float:
    """A confidence level in (0, 1)."""
    if not 0.0 < value < 1.0:
        raise ConfigError(f"`level` must be in (0, 1), got {value}")
    return float(value)


def count(value: int, name: str, minimum: int) -> int:
    """An integer setting ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    return int(value)


def choice(value: str, name: str, allowed: tuple[str, ...]) -> str:
    """A string setting from ``allowed``."""
    if value not in allowed:
        raise ConfigError(f"`{name}` must be one of {list(allowed)}, got {value!r}")
    return value


def rng(seed: Seed) -> np.random.Generator:
    """A numpy Generator from an int, a Generator (used as is) or None (fresh entropy)."""
    if isinstance(seed, bool) or not (seed is None or isinstance(seed, (int, np.integer, np.random.Generator))):
        raise ConfigError(f"`seed` must be an int, a numpy Generator or None, got {seed!r}")
    return np.random.default_rng(seed)


def z_value(level: float) -> float:
    """The two-sided standard-normal quantile of a confidence level (0.95 -> 1.95996)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)
