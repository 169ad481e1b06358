"""The model as the propagation methods call it: batched callables, and checks of what they return.

Every method evaluates the model through one of the three batched callables of
:mod:`sensitivity.analyses.callables`, all in physical units:
``values_fn: [K, n] -> [K, m]``, ``value_and_jacobian: [K, n] -> ([K, m], [K, m, n])`` and
``hessian: [K, n] -> [K, m, n, n]``. A wrong shape is a :class:`~sensitivity.errors.ModelError`
naming the callable, never a broadcasting accident further down.
"""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.callables import HessianFn, ValueAndJacobianFn, ValuesFn
from sensitivity.analyses.inputs import InputUncertainty
from sensitivity.errors import ModelError

__all__ = ["HessianFn", "ValueAndJacobianFn", "ValuesFn", "checked_array", "evaluate", "value_and_jacobian_at_mean"]


def value_and_jacobian_at_mean(value_and_jacobian: ValueAndJacobianFn, inputs: InputUncertainty
                               ) -> tuple[np.ndarray, np.ndarray]:
    """Value ``[m]`` and Jacobian ``[m, n]`` at the input mean."""
    values, jac = value_and_jacobian(inputs.mean[None, :])
    values = checked_array(values, (1, None), "value_and_jacobian values")
    return values[0], checked_array(jac, (1, values.shape[1], inputs.n), "value_and_jacobian jacobian")[0]


def evaluate(values_fn: ValuesFn, points: np.ndarray, *, keep_float32: bool = False) -> np.ndarray:
    """``values_fn(points)`` as a float64 ``[K, m]`` array, with a clear error on a wrong shape.

    ``keep_float32``: float32 values are returned as they are, uncopied (for a caller that reads them
    in float64 anyway, at half the memory traffic).
    """
    values = values_fn(points)
    if keep_float32 and getattr(values, "dtype", None) == np.float32:
        return checked_array(values, (len(points), None), "values_fn", dtype=np.float32)
    return checked_array(values, (len(points), None), "values_fn")


def checked_array(array: np.ndarray, shape: tuple[int | None, ...], what: str, dtype: type = float) -> np.ndarray:
    """``array`` as ``dtype`` when it has ``shape`` (None: any size), else a :class:`ModelError` naming ``what``."""
    a = np.asarray(array, dtype=dtype)
    if a.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, a.shape)):
        expected = "[" + ", ".join("m" if s is None else str(s) for s in shape) + "]"
        raise ModelError(f"`{what}` returned shape {list(a.shape)}, expected {expected}")
    return a
