"""Shared checks of settings and batched callables (one-line :class:`~sensitivity.errors.ConfigError` messages)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from sensitivity.errors import ConfigError


def positive_int(name: str, value: object) -> int:
    """``value`` as an int >= 1, or a ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"`{name}` must be an integer >= 1, got {value!r}")
    return int(value)


def fraction(name: str, value: object, *, closed: bool = False) -> float:
    """``value`` in (0, 1) (``[0, 1]`` where ``closed``), or a ConfigError naming ``name``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and ((0.0 <= value <= 1.0) if closed else (0.0 < value < 1.0))
    if not ok:
        raise ConfigError(f"`{name}` must be in {'[0, 1]' if closed else '(0, 1)'}, got {value!r}")
    return float(value)


def positive(name: str, value: object) -> float:
    """``value`` as a finite float > 0, or a ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"`{name}` must be a finite number > 0, got {value!r}")
    return float(value)


def choice(name: str, value: object, options: tuple[str, ...]) -> str:
    """``value`` if one of ``options``, or a ConfigError naming ``name``."""
    if value not in options:
        raise ConfigError(f"`{name}` must be one of {', '.join(repr(o) for o in options)}, got {value!r}")
    return str(value)


def event_values(fn: Callable[[np.ndarray], np.ndarray], points: np.ndarray) -> np.ndarray:
    """``fn(points)`` as ``[K, E]`` float values (a ``[K]`` result is one event)."""
    values = np.asarray(fn(points), dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] != len(points):
        raise ConfigError(f"the limit state must return values [K] or [K, E] for K = {len(points)} points, "
                          f"got shape {values.shape}")
    return values
