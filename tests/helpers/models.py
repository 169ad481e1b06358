"""Small TF-traceable models used by the tests only."""
from __future__ import annotations

import tensorflow as tf


def sqrt_model(x: tf.Tensor) -> tf.Tensor:
    """``sqrt(x1) + x2``: NaN for x1 < 0, infinite derivative at x1 = 0."""
    return (tf.sqrt(x[:, 0]) + x[:, 1])[:, None]


def decay(x: tf.Tensor, days: int = 10) -> tf.Tensor:
    """A time series ``a exp(-k t)`` for ``t = 0 .. days - 1``: ``[B, days]`` from ``x = [a, k]``."""
    t = tf.range(days, dtype=x.dtype)
    return x[:, :1] * tf.exp(-x[:, 1:2] * t[None, :])
