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

from dataclasses import dataclass
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


def own_threshold_values(values: np.ndarray, events: np.ndarray, thresholds: Sequence[float] | np.ndarray,
                         direction: Direction) -> np.ndarray:
    """``g [K, ...]`` of event ``events[k]`` (``e = i t + j``: output ``i``, threshold ``j``) at row ``k`` of
    outputs ``values [K, ..., m]`` (the dims between, e.g. an ensemble's copies, kept)."""
    y = np.asarray(values, dtype=float)
    t, sign = _thresholds(thresholds), _sign(direction)
    output, threshold = np.divmod(np.asarray(events, dtype=int), t.size)
    if y.ndim < 2 or output.shape != (len(y),) or (output.size and output.max() >= y.shape[-1]):
        raise ConfigError(f"`events` must be [K] indices of the {y.shape[-1] * t.size} events of `values` [K, ..., m]"
                          f", got shapes {output.shape} and {y.shape}")
    lead = (-1,) + (1,) * (y.ndim - 1)
    picked = np.take_along_axis(y, output.reshape(lead), axis=-1)[..., 0]
    return sign * (t[threshold].reshape(lead[:-1]) - picked)


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


@dataclass(frozen=True)
class ThresholdLimitState:
    """The FORM limit state of all outputs x thresholds of ``model: u [K, n] -> (y [K, m], dy/du [K, m, n])``.

    Called, every event at every point (``g [K, m t]``, ``grad [K, m t, n]``); :meth:`own`, each point's own
    event only, which :func:`~sensitivity.analyses.reliability.form.form` takes when it is there: a batched FORM
    run steps ``E S`` points (every event from every start) and needs one event of each, so the ``[K, E, n]``
    gradients of every event at every point (``E^2 S n`` numbers) are never formed.
    """

    model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    thresholds: np.ndarray
    direction: Direction

    def __post_init__(self) -> None:
        object.__setattr__(self, "thresholds", _thresholds(self.thresholds))
        _sign(self.direction)

    def __call__(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``g [K, m t]`` and ``grad [K, m t, n]`` of every event at ``u [K, n]``."""
        y, jac = self.model(u)
        return threshold_events(y, jac, self.thresholds, self.direction)

    def own(self, u: np.ndarray, events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``g [K]`` and ``grad [K, n]`` of event ``events[k]`` (``e = i t + j``) at ``u[k]``."""
        y, jac = (np.asarray(a, dtype=float) for a in self.model(u))
        if y.ndim != 2 or jac.ndim != 3 or jac.shape[:2] != y.shape:
            raise ConfigError(f"`values` [K, m] and `jacobians` [K, m, n] must agree, got shapes {y.shape} and "
                              f"{jac.shape}")
        g = own_threshold_values(y, events, self.thresholds, self.direction)
        output = np.asarray(events, dtype=int) // self.thresholds.size
        return g, -_sign(self.direction) * jac[np.arange(len(y)), output]


def threshold_limit_state(model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                          thresholds: Sequence[float] | np.ndarray, direction: Direction) -> ThresholdLimitState:
    """A FORM limit state of all outputs x thresholds from ``model: u [K, n] -> (y [K, m], dy/du [K, m, n])``."""
    return ThresholdLimitState(model, thresholds, direction)


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
