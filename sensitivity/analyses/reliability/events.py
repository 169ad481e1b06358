"""Failure events of vector outputs: outputs x thresholds as one batch of limit states, and their unions.

A model ``u -> y [K, m]`` with Jacobian ``dy/du [K, m, n]`` and thresholds ``T [t]`` give ``m * t`` limit
states, event ``e = i * t + j`` for output ``i`` and threshold ``j``:

``'above'`` (failure ``y_i > T_j``): ``g = T_j - y_i``, ``grad g = -dy_i/du``, ``dg/dT = +1``;
``'below'`` (failure ``y_i < T_j``): ``g = y_i - T_j``, ``grad g = dy_i/du``, ``dg/dT = -1``.

Solved together by :func:`~sensitivity.analyses.reliability.form.form`, one run gives a fragility curve
(``Pf`` against the threshold) for every output. For the sampling estimators, :func:`union` (failure when any
event fails: ``min_e g_e``) and :func:`intersection` (all fail: ``max_e g_e``) make one event of several.
"""
from __future__ import annotations

from typing import Callable, Literal, Sequence

import numpy as np

from sensitivity.analyses.reliability._checks import choice, event_values
from sensitivity.errors import ConfigError

Direction = Literal["above", "below"]


def _thresholds(thresholds: Sequence[float] | np.ndarray) -> np.ndarray:
    t = np.atleast_1d(np.asarray(thresholds, dtype=float))
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
        raise ConfigError(f"`thresholds` must be a non-empty 1-D array of finite numbers, got {thresholds!r}")
    return t


def _sign(direction: str) -> float:
    return 1.0 if choice("direction", direction, ("above", "below")) == "above" else -1.0


def threshold_values(values: np.ndarray, thresholds: Sequence[float] | np.ndarray, direction: Direction
                     ) -> np.ndarray:
    """``g [K, m * t]`` of outputs ``values [K, m]`` (or ``[K]``) against ``thresholds [t]``."""
    y = np.asarray(values, dtype=float)
    y = y[:, None] if y.ndim == 1 else y
    if y.ndim != 2:
        raise ConfigError(f"`values` must be [K] or [K, m], got shape {y.shape}")
    t, sign = _thresholds(thresholds), _sign(direction)
    return (sign * (t[None, None, :] - y[:, :, None])).reshape(len(y), -1)


def threshold_events(values: np.ndarray, jacobians: np.ndarray, thresholds: Sequence[float] | np.ndarray,
                     direction: Direction) -> tuple[np.ndarray, np.ndarray]:
    """Limit states and gradients of every output x threshold.

    Parameters
    ----------
    values
        ``[K, m]`` outputs (outputs' units).
    jacobians
        ``[K, m, n]`` ``dy/du`` (outputs' units per standard unit).
    thresholds
        ``[t]`` thresholds (outputs' units; the same for every output).
    direction
        ``'above'`` or ``'below'``: on which side of the threshold failure lies.

    Returns
    -------
    g : ``[K, m * t]``
    grad : ``[K, m * t, n]``
    """
    y, jac = np.asarray(values, dtype=float), np.asarray(jacobians, dtype=float)
    if y.ndim != 2 or jac.ndim != 3 or jac.shape[:2] != y.shape:
        raise ConfigError(f"`values` [K, m] and `jacobians` [K, m, n] must agree, got shapes {y.shape} and {jac.shape}")
    t, sign = _thresholds(thresholds), _sign(direction)
    k, m, n = jac.shape
    g = threshold_values(y, t, direction)
    grad = np.broadcast_to(-sign * jac[:, :, None, :], (k, m, t.size, n)).reshape(k, m * t.size, n)
    return g, grad


def threshold_hessians(hessians: np.ndarray, thresholds: Sequence[float] | np.ndarray, direction: Direction
                       ) -> np.ndarray:
    """``[K, m * t, n, n]`` Hessians of every output x threshold from the outputs' ``[K, m, n, n]``."""
    h = np.asarray(hessians, dtype=float)
    if h.ndim != 4 or h.shape[2] != h.shape[3]:
        raise ConfigError(f"`hessians` must be [K, m, n, n], got shape {h.shape}")
    t, sign = _thresholds(thresholds), _sign(direction)
    k, m, n, _ = h.shape
    return np.broadcast_to(-sign * h[:, :, None], (k, m, t.size, n, n)).reshape(k, m * t.size, n, n)


def threshold_derivative(n_outputs: int, thresholds: Sequence[float] | np.ndarray, direction: Direction
                         ) -> np.ndarray:
    """``dg/dT [m * t]`` of every event (+1 for ``'above'``, -1 for ``'below'``)."""
    return np.full(n_outputs * _thresholds(thresholds).size, _sign(direction))


def threshold_limit_state(model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                          thresholds: Sequence[float] | np.ndarray, direction: Direction
                          ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A FORM limit state of all outputs x thresholds from ``model: u [K, n] -> (y [K, m], dy/du [K, m, n])``."""
    t, _ = _thresholds(thresholds), _sign(direction)

    def limit_state(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        y, jac = model(u)
        return threshold_events(y, jac, t, direction)

    return limit_state


def union(limit_state: Callable[[np.ndarray], np.ndarray], columns: Sequence[int] | None = None
          ) -> Callable[[np.ndarray], np.ndarray]:
    """One event that fails when any of ``columns`` (default all) of ``limit_state``'s ``[K, E]`` fails: ``min g``."""
    return _combined(limit_state, columns, np.min)


def intersection(limit_state: Callable[[np.ndarray], np.ndarray], columns: Sequence[int] | None = None
                 ) -> Callable[[np.ndarray], np.ndarray]:
    """One event that fails when all ``columns`` (default all) of ``limit_state``'s ``[K, E]`` fail: ``max g``."""
    return _combined(limit_state, columns, np.max)


def _combined(limit_state, columns, reduce):
    picked = None if columns is None else np.asarray(columns, dtype=int)
    if picked is not None and (picked.ndim != 1 or picked.size == 0):
        raise ConfigError(f"`columns` must be a non-empty list of event indices, got {columns!r}")

    def combined(u: np.ndarray) -> np.ndarray:
        g = event_values(limit_state, u)
        if picked is not None and (picked.max() >= g.shape[1] or picked.min() < -g.shape[1]):
            raise ConfigError(f"`columns` must index the {g.shape[1]} events, got {picked.tolist()}")
        return reduce(g if picked is None else g[:, picked], axis=1)

    return combined
