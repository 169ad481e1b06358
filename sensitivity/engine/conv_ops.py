"""The convolution and pooling arithmetic of the reverse path (:mod:`sensitivity.engine.reverse_path`): paddings,
windows, convolutions as shifted products, and their transposes as matmuls and sums of shifted slices.

References
----------
Dumoulin, V. & Visin, F. (2016), A guide to convolution arithmetic for deep learning, arXiv:1603.07285
(transposed convolutions).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.dense_path import with_slope
from sensitivity.engine.layers import LinearStep

#: No padding, per spatial dim.
NO_PADS = ((0, 0),)


def windowed(layer: Any) -> bool:
    """Is ``layer`` a channels-last max pool with non-overlapping windows (``pool_size == strides``)?"""
    return channels_last(layer) and hasattr(layer, "pool_size") and tuple(layer.pool_size) == tuple(layer.strides)


def single_input_channel(step: LinearStep) -> bool:
    """Is the linear ``step`` a unit-stride convolution of a single input channel (a field)?"""
    return unit_conv(step.layer) and step.kernel.shape[-2] == 1


def forward_op(step: LinearStep, dtype: str) -> LinearStep:
    """The linear ``step`` with its convolution as shifted products (:func:`shifted_products`) when it has a
    single input channel, else the step itself."""
    if not single_input_channel(step):
        return step
    pads = conv_pads(step.layer, step.kernel.shape[:-2])
    return dataclasses.replace(step, op=shifted_products(step.kernel, pads, dtype))


def unit_conv(layer: Any) -> bool:
    """Is ``layer`` a channels-last, unit-stride, undilated, ungrouped 'valid'/'same' Keras convolution?"""
    return (type(layer).__name__ in ("Conv1D", "Conv2D", "Conv3D") and layer.data_format == "channels_last"
            and layer.groups == 1 and layer.padding in ("valid", "same") and set(layer.strides) == {1}
            and set(layer.dilation_rate) == {1})


def channels_last(layer: Any) -> bool:
    return getattr(layer, "data_format", "channels_last") == "channels_last"


def conv_pads(layer: Any, kernel: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Padding ``(before, after)`` per spatial dim of a unit-stride convolution (TF's 'same': more after)."""
    if layer.padding == "valid":
        return NO_PADS * len(kernel)
    return tuple(((k - 1) // 2, k - 1 - (k - 1) // 2) for k in kernel)


def pool_pads(layer: Any, spatial: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Padding ``(before, after)`` per spatial dim of a non-overlapping pool (TF's 'same': more after)."""
    if layer.padding == "valid":
        return NO_PADS * len(spatial)
    totals = [-n % p for n, p in zip(spatial, layer.pool_size)]
    return tuple((total // 2, total - total // 2) for total in totals)


def windows(h: tf.Tensor, pool: tuple[int, ...], pads: tuple[tuple[int, int], ...], fill: float) -> tf.Tensor:
    """``h [B, *S, C]`` cut into its non-overlapping windows: ``[B, prod(pool), *sites, C]``, one strided slice
    per window offset (row-major order; padded with ``fill``, the remainder of a 'valid' pool dropped). The
    channels stay innermost, so the elementwise work on windows vectorises over them."""
    if any(before or after for before, after in pads):
        h = tf.pad(h, [[0, 0], *pads, [0, 0]], constant_values=fill)
    sites = [n // p for n, p in zip(h.shape[1:-1], pool)]
    return tf.stack([h[(slice(None), *[slice(o, o + s * p, p) for o, s, p in zip(offset, sites, pool)])]
                     for offset in itertools.product(*map(range, pool))], 1)


def with_slopes(maps: list[Callable], h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor | None]:
    """``h`` through the elementwise ``maps`` and the product of their derivatives (``None`` for no maps)."""
    slope = None
    for f in maps:
        h, s = with_slope(f, h)
        slope = s if slope is None else slope * s
    return h, slope


def first_max(windows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The maximum of each window ``[B, W, ...]`` (over axis 1) and a one-hot mask ``[B, W, ...]`` of its first
    position (TF's choice among ties: ``tf.argmax`` returns the first)."""
    mask = tf.one_hot(tf.argmax(windows, 1), windows.shape[1], axis=1, dtype=windows.dtype)
    return tf.reduce_max(windows, 1), mask


def shifted_products(kernel: np.ndarray, pads: tuple[tuple[int, int], ...],
                      dtype: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """A unit-stride convolution of a single input channel with ``kernel [*k, 1, C_out]``: the sum over the
    window's offsets of the shifted input times that offset's ``C_out`` weights, one elementwise fusion under
    XLA (a field ``[64, 64, 64, 1] -> 8`` channels: 12x XLA's convolution in a scratch run)."""
    window, taps = kernel.shape[:-2], tf.constant(kernel.reshape(-1, kernel.shape[-1]), dtype)

    def conv(x: tf.Tensor) -> tf.Tensor:
        if any(before or after for before, after in pads):
            x = tf.pad(x, [[0, 0], *pads, [0, 0]])
        out = [n - k + 1 for n, k in zip(x.shape[1:-1], window)]
        offsets = itertools.product(*map(range, window))
        return tf.add_n([x[(slice(None), *[slice(o, o + n) for o, n in zip(offset, out)])] * taps[i]
                         for i, offset in enumerate(offsets)])

    return conv


def col2im(patches: tf.Tensor, stride: tuple[int, ...]) -> tf.Tensor:
    """Sum of patches placed at a stride: ``[N, *sites, *window, C] -> [N, *L, C]``, where the patch of site
    ``s`` lands on positions ``stride * s + w`` (``L = (sites + ceil(window / stride) - 1) stride``).

    The placement is separable: one spatial dim at a time (:func:`_place`), the others folded into the
    neighbouring axes, so no tensor has more than six axes (TF's plain ops take at most eight).
    """
    rank = len(stride)
    for dim, p in enumerate(stride):  # dims before `dim` are already positions; window dims `dim..` remain
        shape = patches.shape
        before, sites, between = shape[1 : 1 + dim], shape[1 + dim], shape[2 + dim : 1 + rank]
        window, after = shape[1 + rank], shape[2 + rank :]
        folded = tf.reshape(patches, [-1, sites, math.prod(between), window, math.prod(after)])
        placed = _place(folded, p)  # [A, L, between, after]
        patches = tf.reshape(placed, [-1, *before, placed.shape[1], *between, *after])
    return patches


def _place(patches: tf.Tensor, stride: int) -> tf.Tensor:
    """``[A, sites, M, window, R] -> [A, L, M, R]``: the patch of site ``s`` summed onto ``stride * s + w``.

    Each window offset ``w = stride * a + r`` (``a < q = ceil(window / stride)``) is one shifted slice: ``q``
    padded slices summed, and one transpose.
    """
    sites, window = patches.shape[1], patches.shape[3]
    q = -(-window // stride)
    patches = tf.pad(patches, [[0, 0], [0, 0], [0, 0], [0, q * stride - window], [0, 0]])
    split = tf.reshape(patches, [-1, sites, patches.shape[2], q, stride, patches.shape[-1]])
    total = tf.add_n([tf.pad(split[:, :, :, a], [[0, 0], [a, q - 1 - a], [0, 0], [0, 0], [0, 0]])
                      for a in range(q)])  # [A, sites + q - 1, M, stride, R]
    return tf.reshape(tf.transpose(total, [0, 1, 3, 2, 4]), [-1, (sites + q - 1) * stride, *total.shape[2:3],
                                                             total.shape[-1]])


def cut_to(h: tf.Tensor, pads: tuple[tuple[int, int], ...], spatial: tuple[int, ...]) -> tf.Tensor:
    """``h [N, *S, C]`` on a grid padded by ``pads`` cut back to ``spatial``, zero-filled where it is short."""
    index = (slice(None), *[slice(before, before + n) for (before, _), n in zip(pads, spatial)])
    h = h[index]
    short = [[0, n - m] for n, m in zip(spatial, h.shape[1:-1])]
    return tf.pad(h, [[0, 0], *short, [0, 0]]) if any(s for _, s in short) else h


def patch_transpose(kernel: np.ndarray, pads: tuple[tuple[int, int], ...], in_shape: tuple[int, ...],
                     dtype: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The transpose of a unit-stride convolution with ``kernel [*k, C_in, C_out]``: ``g [N, *S_out, C_out]``
    times ``[C_out, prod(k) C_in]``, each output position's patch summed onto the input grid (:func:`col2im`)."""
    window, (c_in, c_out) = kernel.shape[:-2], kernel.shape[-2:]
    matrix = tf.constant(np.moveaxis(kernel, -1, 0).reshape(c_out, -1), dtype)
    padded = tuple(n + before + after for n, (before, after) in zip(in_shape[:-1], pads))

    def transpose(g: tf.Tensor) -> tf.Tensor:
        out = g.shape[1:-1]
        patches = tf.reshape(tf.matmul(tf.reshape(g, [-1, c_out]), matrix), [-1, *out, *window, c_in])
        full = cut_to(col2im(patches, (1,) * len(window)), NO_PADS * len(window), padded)
        return full[(slice(None), *[slice(before, before + n) for n, (before, _) in zip(in_shape[:-1], pads)])]

    return transpose


def autodiff_transpose(op: Callable[[tf.Tensor], tf.Tensor], in_shape: tuple[int, ...],
                        dtype: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The transpose of a linear map ``op`` of each point by autodiff: its gradient at zero, applied to ``g``
    (TF's ``Conv*DBackpropInput`` for a convolution; the forward op on zeros is dead code, pruned)."""
    def transpose(g: tf.Tensor) -> tf.Tensor:
        zeros = tf.zeros([tf.shape(g)[0], *in_shape], dtype)
        with tf.GradientTape() as tape:
            tape.watch(zeros)
            y = op(zeros)
        return tape.gradient(y, zeros, output_gradients=g)

    return transpose
