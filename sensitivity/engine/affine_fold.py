"""Diagonal affine maps as steps of a chain, folded into the Dense kernels they touch.

A surrogate's scaling (a config's ``model.scaling``, the :mod:`sensitivity.surrogates.scaling` layers of a trained
model, Keras' ``Rescaling`` and ``Normalization``) maps each number on its own, ``h -> h s + c`` (after the log of
some inputs, before the exponential of the outputs). Next to a Dense layer it is just more of its affine map,

    (h s + c) W + b = h (diag(s) W) + (c W + b),        (h W + b) s + c = h (W diag(s)) + (b s + c),

so :func:`fold_affine` merges it into the kernel and bias (in float64, rounded once) and the chain carries no step
for it; two such maps in a row are one. Elsewhere (before the reshape and convolution of a field input, after a
convolution) it stays an elementwise step, whose derivative the chain multiplies in.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import tensorflow as tf

from sensitivity.engine.steps import AffineStep, ElementwiseStep, Step, dense_step
from sensitivity.surrogates.scaling import log_where


def affine_step(scale: Any, offset: Any, dtype: str, f: Any = None) -> ElementwiseStep:
    """The diagonal affine step ``h scale + offset`` (``scale``, ``offset`` broadcasting against ``[B, *point]``),
    computed by ``f`` when given (a Keras layer's own call), else from the coefficients in ``dtype``."""
    scale, offset = np.asarray(scale, np.float64), np.asarray(offset, np.float64)
    if f is None:
        f = functools.partial(_affine_map, tf.constant(scale, dtype), tf.constant(offset, dtype))
    return ElementwiseStep(f, (scale, offset))


def input_steps(offset: np.ndarray, scale: np.ndarray, log_mask: np.ndarray, dtype: str) -> list[Step]:
    """The steps of ``x -> (t(x) - offset) / scale``, ``t = log`` where ``log_mask`` (per input, ``[n_in]``)."""
    mask = np.asarray(log_mask, bool)
    scale, offset = np.asarray(scale, np.float64), np.asarray(offset, np.float64)
    logs = [ElementwiseStep(functools.partial(_log_where, mask))] if mask.any() else []
    return logs + [affine_step(1 / scale, -offset / scale, dtype)]


def output_steps(offset: Any, scale: Any, log: bool, dtype: str) -> list[Step]:
    """The steps of ``z -> z scale + offset``, exponentiated when ``log``."""
    return [affine_step(scale, offset, dtype)] + ([ElementwiseStep(tf.exp)] if log else [])


def scaling_layer_steps(layer: Any, call: Any, dtype: str) -> list[Step]:
    """The steps of a Keras scaling layer: ``InputScaling`` / ``OutputScaling`` (:mod:`sensitivity.surrogates.scaling`),
    ``Rescaling`` (``x scale + offset``) or ``Normalization`` (``(x - mean) / max(sqrt(var), eps)``, or its inverse);
    Keras' own keep their ``call`` (``h -> layer(h)``), with their coefficients beside it."""
    import keras

    name = type(layer).__name__
    if name == "InputScaling":
        return input_steps(np.asarray(layer.offset), np.asarray(layer.scale), np.asarray(layer.log), dtype)
    if name == "OutputScaling":
        return output_steps(np.asarray(layer.offset), np.asarray(layer.scale), layer.log, dtype)
    if name == "Rescaling":
        if np.ndim(layer.scale) and keras.config.image_data_format() == "channels_first":
            return [ElementwiseStep(call)]  # Keras reshapes the scale against the channels: left to the layer
        # as the layer casts them (a Python float through float32 first, on TensorFlow)
        scale, offset = (keras.ops.cast(v, layer.compute_dtype) for v in (layer.scale, layer.offset))
        return [affine_step(scale, offset, dtype, call)]
    spread = np.maximum(np.sqrt(np.asarray(layer.variance, np.float64)), keras.config.epsilon())
    mean = np.asarray(layer.mean, np.float64)
    return [affine_step(spread, mean, dtype, call) if layer.invert else affine_step(1 / spread, -mean / spread, dtype, call)]


def fold_affine(steps: list[Step], dtype: str) -> list[Step]:
    """``steps`` with every diagonal affine step that touches a Dense step folded into its kernel and bias, and
    consecutive diagonal affine steps merged into one (see the module docstring)."""
    out: list[Step] = []
    for step in steps:
        out.append(step)
        while len(out) >= 2 and (merged := _merged(out[-2], out[-1], dtype)) is not None:
            out[-2:] = [merged]
    return out


def _merged(first: Step, second: Step, dtype: str) -> Step | None:
    """One step doing ``first`` then ``second``, where one is diagonal affine and the other a Dense step or
    another diagonal affine step; else ``None``."""
    diagonal_first = isinstance(first, ElementwiseStep) and first.affine is not None
    diagonal_second = isinstance(second, ElementwiseStep) and second.affine is not None
    if diagonal_first and diagonal_second:
        (s1, c1), (s2, c2) = first.affine, second.affine
        return affine_step(s1 * s2, c1 * s2 + c2, dtype)
    if diagonal_first and isinstance(second, AffineStep):
        coefficients = _vectors(first.affine, second.kernel.shape[0])
        if coefficients is None:
            return None
        (s, c), (kernel, bias) = coefficients, _weights(second)
        return dense_step(s[:, None] * kernel, c @ kernel + bias, dtype)
    if isinstance(first, AffineStep) and diagonal_second:
        coefficients = _vectors(second.affine, first.kernel.shape[1])
        if coefficients is None:
            return None
        (s, c), (kernel, bias) = coefficients, _weights(first)
        return dense_step(kernel * s, bias * s + c, dtype)
    return None


def _vectors(affine: tuple[np.ndarray, np.ndarray], width: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The coefficients ``(scale, offset)`` of a diagonal affine map as vectors ``[width]`` (its numbers per point),
    or ``None`` where they do not broadcast against a flat ``[B, width]`` batch."""
    try:
        return tuple(np.broadcast_to(v, (1, width)).reshape(width) for v in affine)
    except ValueError:
        return None


def _weights(step: AffineStep) -> tuple[np.ndarray, np.ndarray]:
    """A Dense step's kernel and bias in float64 (a zero bias for none)."""
    kernel = np.asarray(step.kernel, np.float64)
    bias = np.zeros(kernel.shape[1]) if step.bias is None else np.asarray(step.bias, np.float64)
    return kernel, bias


def _affine_map(scale: tf.Tensor, offset: tf.Tensor, h: tf.Tensor) -> tf.Tensor:
    return h * scale + offset


def _log_where(mask: np.ndarray, h: tf.Tensor) -> tf.Tensor:
    return log_where(h, mask)
