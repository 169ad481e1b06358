"""The model calls of a calibration: values and Jacobians of a batched model, checked, in blocks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from sensitivity.analyses.callables import ValueAndJacobianFn, ValuesFn
from sensitivity.errors import ModelError

BLOCK = 1024  # starts whose [block, m, n] Jacobians are reduced together: they stay in cache


def _evaluate(fn: Callable, x: np.ndarray, m: int, n: int, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Call a model on ``x [K, n]``; check and return float64 ``values [K, m]`` and ``jacobian [K, m, n]``
    (None for a values-only model)."""
    out = fn(x)
    values, jacobian = (out, None) if what == "values" else out
    values = np.asarray(values, dtype=float)
    k = x.shape[0]
    if jacobian is None:
        if values.shape != (k, m):
            raise ModelError(f"`values` must return [{k}, {m}], got {list(values.shape)}")
        return values, None
    jacobian = np.asarray(jacobian)  # float32 stays float32 here: whitening reads it once into float64
    if values.shape != (k, m) or jacobian.shape != (k, m, n) or jacobian.dtype.kind != "f":
        raise ModelError(
            f"`{what}` must return values [{k}, {m}] and jacobian [{k}, {m}, {n}], "
            f"got {list(values.shape)} and {jacobian.dtype} {list(jacobian.shape)}"
        )
    return values, jacobian


@dataclass(frozen=True)
class ModelCalls:
    """The model calls of a solve.

    Trial points need values only; Jacobians are needed only where a step is accepted. With
    ``values`` given, trials call it and accepted points call ``step_jacobian`` (or
    ``value_and_jacobian``); without it, each trial is one ``value_and_jacobian`` call whose
    Jacobian is kept when the step is accepted.
    """

    value_and_jacobian: ValueAndJacobianFn
    values: ValuesFn | None
    step_jacobian: ValueAndJacobianFn | None
    m: int
    n: int

    def trial(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values at ``x`` and, when they came with it, the Jacobian."""
        if self.values is not None:  # values-only calls are cheap per point: one call, the model's own chunks
            return _evaluate(self.values, x, self.m, self.n, "values")
        return self.in_blocks(self.value_and_jacobian, x, "value_and_jacobian")

    def in_blocks(self, fn: Callable, x: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray | None]:
        """:func:`_evaluate` on blocks of :data:`BLOCK` points (about the fastest Jacobian call size of a
        compiled model on CPU, where bigger calls fall out of cache), results joined."""
        if len(x) <= BLOCK:
            return _evaluate(fn, x, self.m, self.n, what)
        parts = [_evaluate(fn, x[i : i + BLOCK], self.m, self.n, what) for i in range(0, len(x), BLOCK)]
        values = np.concatenate([p[0] for p in parts])
        return values, None if parts[0][1] is None else np.concatenate([p[1] for p in parts])

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """The Jacobian the steps use, at accepted points ``x``."""
        if self.step_jacobian is not None:
            return _evaluate(self.step_jacobian, x, self.m, self.n, "step_jacobian")[1]
        return _evaluate(self.value_and_jacobian, x, self.m, self.n, "value_and_jacobian")[1]
