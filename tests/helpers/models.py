"""Small TF-traceable models used by the tests only."""
from __future__ import annotations

import keras
import tensorflow as tf


def sqrt_model(x: tf.Tensor) -> tf.Tensor:
    """``sqrt(x1) + x2``: NaN for x1 < 0, infinite derivative at x1 = 0."""
    return (tf.sqrt(x[:, 0]) + x[:, 1])[:, None]


def decay(x: tf.Tensor, days: int = 10) -> tf.Tensor:
    """A time series ``a exp(-k t)`` for ``t = 0 .. days - 1``: ``[B, days]`` from ``x = [a, k]``."""
    t = tf.range(days, dtype=x.dtype)
    return x[:, :1] * tf.exp(-x[:, 1:2] * t[None, :])


def sequential(layers: list, dtype: str, n_in: int = 3) -> keras.Sequential:
    """``keras.Sequential`` of fresh copies of ``layers`` in ``dtype``, on ``n_in`` flat inputs."""
    copies = [layer.__class__.from_config({**layer.get_config(), "dtype": dtype}) for layer in layers]
    return keras.Sequential([keras.Input((n_in,), dtype=dtype)] + copies)


def linear_members(weights, biases, names: list[str], output: dict) -> list[keras.Model]:
    """Exactly linear Keras members ``y = x W_k^T + b_k`` (``weights [K, m, n]``, ``biases [K, m]``) with identity
    scaling layers: an ensemble whose every index, moment and fit has a closed form."""
    import numpy as np

    from sensitivity.surrogates.scaling import InputScaling, OutputScaling

    models = []
    for w, b in zip(np.asarray(weights, float), np.asarray(biases, float)):
        m, n = w.shape
        inputs = keras.Input((n,))
        h = InputScaling([0.0] * n, [1.0] * n, [False] * n, names=names, units=["1"] * n)(inputs)
        dense = keras.layers.Dense(m)
        h = dense(h)
        dense.set_weights([w.T, b])
        models.append(keras.Model(inputs, OutputScaling([0.0] * m, [1.0] * m, False, output_spec=output)(h)))
    return models
