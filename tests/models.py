"""Small TF-traceable models used by the tests only."""
from __future__ import annotations

import tensorflow as tf


def sqrt_model(x: tf.Tensor) -> tf.Tensor:
    """``sqrt(x1) + x2``: NaN for x1 < 0, infinite derivative at x1 = 0."""
    return (tf.sqrt(x[:, 0]) + x[:, 1])[:, None]
