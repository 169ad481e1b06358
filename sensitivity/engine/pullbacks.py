"""The steps of the reverse path's chain (:mod:`sensitivity.engine.reverse_path`), each with its transpose.

Each :class:`Pullback` sits between per-point shapes ``in_shape`` and ``out_shape``; its ``primal`` pass returns the
step's output and what its transpose needs (elementwise derivatives, argmax masks, per-point operators), and its
``pullback`` maps the cotangent block ``[B, t, *out_shape]`` to ``[B, t, *in_shape]``. Which form each transpose takes,
and why, is in the docstring of :mod:`sensitivity.engine.reverse_path`.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.conv_ops import (NO_PADS, autodiff_transpose, channels_last, col2im, conv_pads, cut_to,
                                         first_max, forward_op, patch_transpose, pool_pads, single_input_channel,
                                         windowed, windows, with_slopes)
from sensitivity.engine.dense_path import with_slope
from sensitivity.engine.layers import AffineStep, ElementwiseStep, LinearStep, Step


class Pullback:
    """One step of the chain, between per-point shapes ``in_shape`` and ``out_shape``.

    ``primal`` returns the step's output and what its transpose needs; ``pullback`` maps the cotangent block
    ``[B, t, *out_shape]`` to ``[B, t, *in_shape]``; ``form`` names the transpose's form (for the report).
    """

    form = ""

    def __init__(self, in_shape: tuple[int, ...], out_shape: tuple[int, ...], name: str) -> None:
        self.in_shape, self.out_shape, self.name = in_shape, out_shape, name

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def primal(self, h: tf.Tensor) -> tuple[tf.Tensor, Any]:
        return self.apply(h), None

    def pullback(self, block: tf.Tensor, saved: Any) -> tf.Tensor:
        raise NotImplementedError

    @property
    def block_width(self) -> int:
        """Numbers per point and cotangent of the largest block the pullback builds."""
        return max(math.prod(self.in_shape), math.prod(self.out_shape))

    @property
    def saved_width(self) -> int:
        """Numbers per point the primal pass keeps for the pullback (slopes, masks, operators)."""
        return 0


class AffinePullback(Pullback):
    form = "matmul"

    def __init__(self, step: AffineStep, *shapes: Any) -> None:
        super().__init__(*shapes)
        self.step = step

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return self.step.apply(h)

    def pullback(self, block: tf.Tensor, saved: Any) -> tf.Tensor:
        kernel_t = self.step.kernel_t
        flat = tf.matmul(tf.reshape(block, [-1, kernel_t.shape[0]]), kernel_t)
        return tf.reshape(flat, [-1, block.shape[1], *self.in_shape])


class ElementwisePullback(Pullback):
    form = "derivative product"

    def __init__(self, f: Callable, *shapes: Any) -> None:
        super().__init__(*shapes)
        self.f = f

    @property
    def saved_width(self) -> int:
        return math.prod(self.in_shape)

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return self.f(h)

    def primal(self, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return with_slope(self.f, h)

    def pullback(self, block: tf.Tensor, saved: tf.Tensor) -> tf.Tensor:
        return block * saved[:, None]


class LinearPullback(Pullback):
    """A linear ``step`` (a map of each point plus a bias), with its transpose ``transpose: [N, *out] -> [N, *in]``."""

    def __init__(self, step: LinearStep, transpose: Callable, form: str, *shapes: Any) -> None:
        super().__init__(*shapes)
        self.step, self.transpose, self.form = step, transpose, form

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return self.step.apply(h)

    def pullback(self, block: tf.Tensor, saved: Any) -> tf.Tensor:
        flat = self.transpose(tf.reshape(block, [-1, *self.out_shape]))
        return tf.reshape(flat, [-1, block.shape[1], *self.in_shape])


class WindowedMaxPullback(Pullback):
    """Elementwise maps ``maps`` (none or more) and a max pool with non-overlapping windows (channels last):
    the argmax mask times the maps' derivatives, and its scatter."""

    form = "argmax mask"

    def __init__(self, layer: Any, maps: list[Callable], *shapes: Any) -> None:
        super().__init__(*shapes)
        self.layer, self.maps, self.pool = layer, maps, tuple(layer.pool_size)
        self.pads = pool_pads(layer, self.in_shape[:-1])

    @property
    def saved_width(self) -> int:
        return math.prod(self.in_shape)

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        for f in self.maps:
            h = f(h)
        return self.layer(h)

    def primal(self, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        h, slope = with_slopes(self.maps, h)
        grid = self._grid(h, -np.inf)  # [B, *(s p), C]
        pooled, position = self._pool(grid, tf.reduce_max), self._position(h.dtype)  # [B, *s, C]
        first = tf.where(grid == self._spread(pooled), position, np.inf)
        mask = tf.cast(tf.equal(position, self._spread(self._pool(first, tf.reduce_min))), h.dtype)
        if slope is not None:  # the maps' derivatives, at each window's first maximum (TF's choice among ties)
            mask = mask * self._grid(slope, 0.0)
        return pooled, mask

    def pullback(self, block: tf.Tensor, saved: tf.Tensor) -> tf.Tensor:
        t, grid = block.shape[1], saved.shape[1:]
        spread = tf.reshape(self._spread(tf.reshape(block, [-1, *self.out_shape])), [-1, t, *grid])
        full = tf.reshape(spread * saved[:, None], [-1, *grid])
        return tf.reshape(cut_to(full, self.pads, self.in_shape[:-1]), [-1, t, *self.in_shape])

    def _position(self, dtype: tf.DType) -> tf.Tensor:
        """Each grid site's row-major position in its window, ``[1, *(s p), 1]``."""
        order = np.arange(math.prod(self.pool)).reshape(self.pool)
        return tf.constant(np.tile(order, self.out_shape[:-1])[None, ..., None], dtype)

    def _grid(self, h: tf.Tensor, fill: float) -> tf.Tensor:
        """``h [B, *S, C]`` padded with ``fill`` ('same') or cut to whole windows ('valid'): ``[B, *(s p), C]``."""
        if any(before or after for before, after in self.pads):
            h = tf.pad(h, [[0, 0], *self.pads, [0, 0]], constant_values=fill)
        return h[(slice(None), *[slice(0, s * p) for s, p in zip(self.out_shape[:-1], self.pool)])]

    def _pool(self, grid: tf.Tensor, reduce: Callable) -> tf.Tensor:
        """``reduce`` over each window of ``grid [B, *(s p), C]``: ``[B, *s, C]`` (the windows in place, a reshape)."""
        sites = self.out_shape[:-1]
        tiled = tf.reshape(grid, [-1, *itertools.chain(*zip(sites, self.pool)), grid.shape[-1]])
        return reduce(tiled, list(range(2, 2 * len(sites) + 1, 2)))

    def _spread(self, pooled: tf.Tensor) -> tf.Tensor:
        """``pooled [N, *s, C]`` repeated over each window: ``[N, *(s p), C]`` (TF's kernels broadcast at most
        five collapsed axes, so the windows are repeated one axis at a time)."""
        for axis, p in enumerate(self.pool, start=1):
            pooled = tf.repeat(pooled, p, axis=axis)
        return pooled


class PoolLayerPullback(Pullback):
    """A pooling step applied as its Keras ``layer``, keeping a tensor of its input's size for the pullback."""

    def __init__(self, layer: Any, *shapes: Any) -> None:
        super().__init__(*shapes)
        self.layer = layer

    @property
    def saved_width(self) -> int:
        return math.prod(self.in_shape)

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return self.layer(h)


class GlobalMaxPullback(PoolLayerPullback):
    """Global max pooling (channels last): a one-hot mask of each channel's argmax over the field."""

    form = "argmax mask"

    def primal(self, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        flat = tf.reshape(h, [-1, math.prod(self.in_shape[:-1]), self.in_shape[-1]])
        mask = tf.one_hot(tf.argmax(flat, 1), flat.shape[1], axis=1, dtype=h.dtype)  # [B, S, C]
        return self.layer(h), mask

    def pullback(self, block: tf.Tensor, saved: tf.Tensor) -> tf.Tensor:
        t, channels = block.shape[1], self.in_shape[-1]
        spread = tf.reshape(block, [-1, t, 1, channels]) * saved[:, None]
        return tf.reshape(spread, [-1, t, *self.in_shape])


class TiledPoolPullback(PoolLayerPullback):
    """Any other max pooling: TF's gradient of the layer on the primal input repeated once per cotangent."""

    form = "TF gradient on the repeated input"

    def primal(self, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return self.layer(h), h

    def pullback(self, block: tf.Tensor, saved: tf.Tensor) -> tf.Tensor:
        t = block.shape[1]
        repeated = tf.repeat(saved, t, axis=0)
        with tf.GradientTape() as tape:
            tape.watch(repeated)
            y = self.layer(repeated)
        grad = tape.gradient(y, repeated, output_gradients=tf.reshape(block, [-1, *self.out_shape]))
        return tf.reshape(grad, [-1, t, *self.in_shape])


class ConvPoolPullback(Pullback):
    """A unit-stride convolution, elementwise maps and a non-overlapping max pool, pulled back through one
    per-point operator ``E [B, *sites, C_out, prod(P + k - 1) C_in]`` (see the module docstring)."""

    form = "per-point operator at the argmax"

    def __init__(self, conv: LinearStep, maps: list[Callable], pool: Any, in_shape: tuple[int, ...],
                 out_shape: tuple[int, ...], name: str, dtype: str) -> None:
        super().__init__(in_shape, out_shape, name)
        layer, kernel = conv.layer, np.asarray(conv.kernel, np.float64)  # [*k, C_in, C_out]
        self.conv, self.maps, self.pool_size = forward_op(conv, dtype), maps, tuple(pool.pool_size)
        self.window = tuple(p + k - 1 for p, k in zip(self.pool_size, kernel.shape[:-2]))
        self.conv_pads = conv_pads(layer, kernel.shape[:-2])
        placed = np.zeros((*self.pool_size, kernel.shape[-1], *self.window, kernel.shape[-2]))
        for offset in itertools.product(*map(range, self.pool_size)):  # the kernel at each window position
            where = tuple(slice(o, o + k) for o, k in zip(offset, kernel.shape[:-2]))
            placed[(*offset, slice(None), *where)] = np.moveaxis(kernel, -1, 0)
        self.placed = tf.constant(placed.reshape(math.prod(self.pool_size), kernel.shape[-1], -1), dtype)

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        a = self.conv.apply(h)
        for f in self.maps:
            a = f(a)
        return tf.reduce_max(windows(a, self.pool_size, NO_PADS * len(self.pool_size), 0.0), 1)

    def primal(self, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        a, slope = with_slopes(self.maps, self.conv.apply(h))
        pads = NO_PADS * len(self.pool_size)
        pooled, mask = first_max(windows(a, self.pool_size, pads, 0.0))  # [B, prod(P), *sites, C_out]
        if slope is not None:
            mask = mask * windows(slope, self.pool_size, pads, 0.0)
        rank = len(self.pool_size)
        placed = tf.reshape(self.placed, [self.placed.shape[0], *[1] * rank, *self.placed.shape[1:]])
        return pooled, tf.add_n([mask[:, o, ..., None] * placed[o] for o in range(self.placed.shape[0])])

    def pullback(self, block: tf.Tensor, saved: tf.Tensor) -> tf.Tensor:
        t, sites = block.shape[1], block.shape[2:-1]
        rank = len(sites)
        s = "ijk"[:rank]
        placed = tf.einsum(f"bt{s}c,b{s}cw->bt{s}w", block, saved)  # [B, t, *sites, W]
        c_in = self.in_shape[-1]
        full = col2im(tf.reshape(placed, [-1, *sites, *self.window, c_in]), self.pool_size)
        padded = tuple(n + before + after for n, (before, after) in zip(self.in_shape[:-1], self.conv_pads))
        full = cut_to(full, NO_PADS * rank, padded)  # [B t, *padded input, C_in]
        full = full[(slice(None), *[slice(b, b + n) for n, (b, _) in zip(self.in_shape[:-1], self.conv_pads)])]
        return tf.reshape(full, [-1, t, *self.in_shape])

    @property
    def block_width(self) -> int:
        return max(math.prod(self.in_shape), math.prod(self.out_shape[:-1]) * self.operator_width)

    @property
    def saved_width(self) -> int:
        return math.prod(self.out_shape) * self.operator_width

    @property
    def operator_width(self) -> int:
        """Numbers of the operator per site and output channel: ``prod(P + k - 1) C_in``."""
        return math.prod(self.window) * self.in_shape[-1]


def pullback_of(step: Step, in_shape: tuple[int, ...], out_shape: tuple[int, ...], dtype: str) -> Pullback:
    """The :class:`Pullback` of one step of :func:`sensitivity.engine.layers.layer_steps`."""
    shapes = (in_shape, out_shape)
    if isinstance(step, AffineStep):
        return AffinePullback(step, *shapes, "Dense")
    if isinstance(step, ElementwiseStep):
        return ElementwisePullback(step.f, *shapes, "elementwise")
    if isinstance(step, LinearStep):
        layer, kernel = step.layer, step.kernel
        if single_input_channel(step):
            transpose = patch_transpose(kernel, conv_pads(layer, kernel.shape[:-2]), in_shape, dtype)
            return LinearPullback(forward_op(step, dtype), transpose, "matmul and shifted sums", *shapes, layer.name)
        form = "TF conv backprop" if kernel is not None else "transpose"
        return LinearPullback(step, autodiff_transpose(step.op, in_shape, dtype), form, *shapes, layer.name)
    layer = step.layer  # max pooling
    if channels_last(layer) and type(layer).__name__.startswith("Global"):
        return GlobalMaxPullback(layer, *shapes, layer.name)
    if windowed(layer):
        return WindowedMaxPullback(layer, [], *shapes, layer.name)
    return TiledPoolPullback(layer, *shapes, layer.name)
