"""The named steps of a chain: what the engine's layer paths read a Keras model as (:mod:`sensitivity.engine.layers`).

:class:`AffineStep` (a Dense layer, ``h W + b``), :class:`LinearStep` (a linear map of each point plus a bias: a
convolution, a reshape...), :class:`ElementwiseStep` (an activation, a scaling layer, batch normalisation in
inference; a diagonal affine map carries its coefficients) and :class:`MaxPoolStep`; each applies itself to a batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Union

import numpy as np
import tensorflow as tf


@dataclass(frozen=True, eq=False)
class AffineStep:
    """A Dense layer: ``h W + b``. ``kernel_t`` (``W^T``) is stored, not traced: XLA would constant-fold the
    transpose at every compilation, seconds for a 256 x 256 kernel."""

    kernel: tf.Tensor
    bias: tf.Tensor | None
    kernel_t: tf.Tensor

    kind: ClassVar[str] = "affine"

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        """``h [B, k] W + b``."""
        z = tf.matmul(h, self.kernel)
        return z if self.bias is None else tf.nn.bias_add(z, self.bias)


@dataclass(frozen=True, eq=False)
class LinearStep:
    """A linear map ``op`` of each point (applied to a ``[B, ...]`` batch) plus ``bias`` (broadcast against its
    output), from the Keras ``layer``; ``kernel`` is a convolution's kernel as a numpy array, else ``None``."""

    op: Callable[[tf.Tensor], tf.Tensor]
    bias: tf.Tensor | None
    layer: Any
    kernel: np.ndarray | None = None

    kind: ClassVar[str] = "linear"

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        """``op(h) + b``."""
        z = self.op(h)
        return z if self.bias is None else z + self.bias


@dataclass(frozen=True, eq=False)
class ElementwiseStep:
    """A map ``f`` of each number on its own (an activation, a scaling layer, batch normalisation in inference).

    ``affine``: for a diagonal affine map ``f(h) = h scale + offset``, the pair ``(scale, offset)`` (float64
    arrays broadcasting against a ``[B, *point]`` batch), which lets it fold into a neighbouring Dense kernel
    (:func:`sensitivity.engine.affine_fold.fold_affine`); else ``None``.
    """

    f: Callable[[tf.Tensor], tf.Tensor]
    affine: tuple[np.ndarray, np.ndarray] | None = None

    kind: ClassVar[str] = "elementwise"

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return self.f(h)


@dataclass(frozen=True, eq=False)
class MaxPoolStep:
    """A Keras max-pooling ``layer`` (piecewise linear, reverse mode only)."""

    layer: Any

    kind: ClassVar[str] = "maxpool"

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return self.layer(h)


Step = Union[AffineStep, LinearStep, ElementwiseStep, MaxPoolStep]


def dense_step(kernel: np.ndarray, bias: np.ndarray | None, dtype: str) -> AffineStep:
    """The :class:`AffineStep` ``h kernel + bias`` in ``dtype`` (``kernel [k, h]``, ``bias [h]`` or ``None``)."""
    tf_bias = None if bias is None else tf.constant(bias, dtype)
    return AffineStep(tf.constant(kernel, dtype), tf_bias, tf.constant(np.transpose(kernel).copy(), dtype))
