"""Analytic test functions as TensorFlow-traceable models, for validation.

Each function maps a batch of points ``x`` of shape ``[B, n]`` to outputs of shape
``[B, m]`` with TensorFlow ops only, so the engine can differentiate and compile
it exactly like a trained surrogate, and its derivatives are known in closed
form. Load one with ``load_surrogate("sensitivity.simulators.analytic:ishigami")``.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def linear(x: tf.Tensor, weights: Sequence[Sequence[float]] = ((1.0, 2.0, 3.0),), offset: Sequence[float] | None = None) -> tf.Tensor:
    """``y = x W^T + c``: the Jacobian is ``W`` everywhere.

    Parameters
    ----------
    x
        ``[B, n]`` inputs.
    weights
        ``[m, n]`` matrix ``W``.
    offset
        ``[m]`` vector ``c`` (zeros when omitted).
    """
    w = tf.constant(weights, dtype=x.dtype)
    y = tf.matmul(x, w, transpose_b=True)
    return y if offset is None else y + tf.constant(offset, dtype=x.dtype)


def quadratic(x: tf.Tensor, scale: float = 1.0) -> tf.Tensor:
    """Two outputs ``[s * sum_i x_i^2, s * sum_i i x_i x_{i+1}]``, with gradients ``2 s x`` and a tridiagonal form."""
    square = scale * tf.reduce_sum(x * x, axis=1)
    ranks = tf.range(1, tf.shape(x)[1], dtype=x.dtype)
    chain = scale * tf.reduce_sum(ranks * x[:, :-1] * x[:, 1:], axis=1)
    return tf.stack([square, chain], axis=1)


def ishigami(x: tf.Tensor, a: float = 7.0, b: float = 0.1) -> tf.Tensor:
    """Ishigami & Homma (1990) ``sin x1 + a sin^2 x2 + b x3^4 sin x1`` on ``[-pi, pi]^3``, as ``[B, 1]``.

    References
    ----------
    Ishigami, T. & Homma, T. (1990), doi:10.1109/ISUMA.1990.151285.
    """
    x1, x2, x3 = x[:, 0], x[:, 1], x[:, 2]
    y = tf.sin(x1) + a * tf.sin(x2) ** 2 + b * x3**4 * tf.sin(x1)
    return y[:, None]


def sobol_g(x: tf.Tensor, a: Sequence[float] = (0.0, 1.0, 4.5, 9.0, 99.0, 99.0, 99.0, 99.0)) -> tf.Tensor:
    """Sobol' G-function ``prod_i (|4 x_i - 2| + a_i) / (1 + a_i)`` on ``[0, 1]^d``, as ``[B, 1]``.

    Its derivative is undefined at ``x_i = 1/2``; the engine returns the one-sided value there.

    References
    ----------
    Saltelli, A. & Sobol', I. M. (1995), doi:10.1016/0951-8320(95)00099-2.
    """
    coef = tf.constant(a[: x.shape[1]], dtype=x.dtype)
    factors = (tf.abs(4.0 * x - 2.0) + coef) / (1.0 + coef)
    return tf.reduce_prod(factors, axis=1, keepdims=True)


def gaussian_plume(x: tf.Tensor, size: int = 16) -> tf.Tensor:
    """A 2-D field model: an anisotropic Gaussian bump on a ``size x size`` unit grid, ``[B, size, size]``.

    Parameters ``x = (amplitude, x0, y0, width)``; the field is
    ``A exp(-((u - x0)^2 + (v - y0)^2) / (2 w^2))`` with ``u`` along ``lon`` and ``v`` along ``lat``.
    A closed-form stand-in for a convolutional field emulator.
    """
    grid = tf.linspace(tf.constant(0.0, x.dtype), tf.constant(1.0, x.dtype), size)
    amplitude, x0, y0, width = (x[:, i, None, None] for i in range(4))
    lat, lon = grid[None, :, None], grid[None, None, :]
    return amplitude * tf.exp(-((lon - x0) ** 2 + (lat - y0) ** 2) / (2.0 * width**2))
