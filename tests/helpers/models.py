"""Small TF-traceable models used by the tests only."""
from __future__ import annotations

import keras
import numpy as np
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


def linear_members(weights, biases, names: list[str], output: dict, units: list[str] | None = None
                   ) -> list[keras.Model]:
    """Exactly linear Keras members ``y = x W_k^T + b_k`` (``weights [K, m, n]``, ``biases [K, m]``) with identity
    scaling layers (inputs in ``units``, default ``"1"``): an ensemble whose every index, moment and fit has a
    closed form."""
    from sensitivity.surrogates.scaling import InputScaling, OutputScaling

    models = []
    for w, b in zip(np.asarray(weights, float), np.asarray(biases, float)):
        m, n = w.shape
        inputs = keras.Input((n,))
        h = InputScaling([0.0] * n, [1.0] * n, [False] * n, names=names, units=list(units or ["1"] * n))(inputs)
        dense = keras.layers.Dense(m)
        h = dense(h)
        dense.set_weights([w.T, b])
        models.append(keras.Model(inputs, OutputScaling([0.0] * m, [1.0] * m, False, output_spec=output)(h)))
    return models


#: Daily rain of the reservoir models [mm day-1].
RAIN = (3.0, 0.0, 5.0, 1.0, 0.0, 2.0)


@keras.saving.register_keras_serializable(package="tests")
class Reservoir(keras.layers.Layer):
    """A nonlinear reservoir stepped by ``tf.scan`` as a Keras layer, whose TensorList state ``ForwardAccumulator``
    cannot carry: storage ``s_0 = a``, outflow ``q_t = gain k s_t^2 / (1 + s_t)``, ``s_{t+1} = s_t - q_t / gain +
    rain_t``; ``x = [k, a] -> q [B, days]`` (:func:`reservoir_numpy` is its numpy twin)."""

    def __init__(self, gain: float = 1.0, rain: tuple = RAIN, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gain, self.rain = float(gain), tuple(float(r) for r in rain)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        k, a = x[:, :1], x[:, 1:]

        def step(state, rain):
            s, _ = state
            q = k * s**2 / (1 + s)
            return s - q + rain, self.gain * q

        _, q = tf.scan(step, tf.constant(self.rain, x.dtype), initializer=(a, tf.zeros_like(a)))
        return tf.transpose(q[:, :, 0])

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], len(self.rain))

    def get_config(self) -> dict:
        return {**super().get_config(), "gain": self.gain, "rain": list(self.rain)}


def reservoir_fn(x, identity=tf.identity, rain=RAIN):
    """:class:`Reservoir` as a plain TF function, stepped by tf.scan (whose TensorList state ForwardAccumulator cannot
    carry): storage s_0 = a, outflow q_t = k s_t^2 / (1 + s_t), s_{t+1} = s_t - q_t + rain_t; x = [k, a] -> q [B, days];
    ``identity`` wraps ``k`` (e.g. :func:`cotangent_stopped`)."""
    k, a = identity(x[:, :1]), x[:, 1:]

    def step(state, rain):
        s, _ = state
        q = k * s**2 / (1 + s)
        return s - q + rain, q

    _, q = tf.scan(step, tf.constant(rain, x.dtype), initializer=(a, tf.zeros_like(a)))
    return tf.transpose(q[:, :, 0])


@tf.custom_gradient
def cotangent_stopped(k):
    """The identity, with a gradient that passes the cotangent on but stops it: right as a first derivative, not
    differentiable with respect to its cotangent (double reverse would see zero columns)."""
    return tf.identity(k), lambda u: tf.stop_gradient(u)


def reservoir_numpy(x, gain: float = 1.0, rain: tuple = RAIN):
    """The numpy twin of :class:`Reservoir` (float64)."""
    k, s = x[:, 0], x[:, 1].copy()
    out = []
    for r in rain:
        q = k * s**2 / (1 + s)
        out.append(gain * q)
        s = s - q + r
    return np.stack(out, axis=1)


@keras.saving.register_keras_serializable(package="tests")
class Guarded(keras.layers.Layer):
    """``[gain sin(x_0) x_0, gain sin(x_1) x_0, x_1^2]`` behind a guard that never fires, an explicit ``tf.cond``
    on a tensor: neither XLA nor forward mode's ``vectorized_map`` of ``ForwardAccumulator`` takes it
    (:func:`guarded_numpy` is its numpy twin)."""

    def __init__(self, gain: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gain = float(gain)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        def zeros():
            return tf.zeros_like(tf.concat([x, x[:, :1]], axis=1))

        def model():
            return tf.concat([self.gain * tf.sin(x) * x[:, :1], x[:, 1:] ** 2], axis=1)

        return tf.cond(tf.reduce_max(tf.abs(x)) > 1e6, zeros, model)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], 3)

    def get_config(self) -> dict:
        return {**super().get_config(), "gain": self.gain}


def guarded_numpy(x, gain: float = 1.0):
    """The numpy twin of :class:`Guarded` (float64)."""
    return np.column_stack([gain * np.sin(x) * x[:, :1], x[:, 1] ** 2])


def one_layer_model(layer: keras.layers.Layer, n_in: int = 2) -> keras.Model:
    """A Keras functional model of ``n_in`` inputs through ``layer`` alone."""
    inputs = keras.Input((n_in,))
    return keras.Model(inputs, layer(inputs))


def ishigami_biased(x: tf.Tensor, a: float = 7.0, b: float = 0.1) -> tf.Tensor:
    """Ishigami plus a smooth error ``0.8 sin x3 + 0.5 x1``: a surrogate of R^2 ~ 0.97 whose S1(x1) is ~0.47
    against the exact 0.31 (the simulator is :func:`tests.helpers.functions.ishigami`)."""
    y = tf.sin(x[:, 0]) + a * tf.sin(x[:, 1]) ** 2 + b * x[:, 2] ** 4 * tf.sin(x[:, 0])
    return (y + 0.8 * tf.sin(x[:, 2]) + 0.5 * x[:, 0])[:, None]


def decay_numpy(x: np.ndarray, days: int = 10) -> np.ndarray:
    """:func:`decay` in numpy, ``[N, days]``: a simulator of a series."""
    return x[:, :1] * np.exp(-x[:, 1:2] * np.arange(days)[None, :])
