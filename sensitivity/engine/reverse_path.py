"""The engine's reverse-mode fast path for convolutional chains (field inputs -> a few outputs).

A Keras model of dense, convolutional, pooling, reshaping and elementwise layers
(:func:`sensitivity.engine.dense_path.layer_steps`) is a chain ``h_k = f_k(h_{k-1})``; its Jacobian, transposed, is
the product of the layers' input gradients at the point,

    J(x)^T = f_1'(x)^T f_2'(h_1)^T ... f_L'(h_{L-1})^T,

so reverse mode carries the ``t = n_out`` unit cotangents of every point of a chunk as one block
``[B, t, *shape]`` through each ``f_k'^T``, one op per layer on the ``[B t, *shape]`` batch: a matmul with
``W^T`` (Dense), the transpose of a linear map (convolution, reshape, average pooling, padding...), the
product with elementwise derivatives (activations, batch normalisation in inference; fused with their
neighbours under XLA), and for max pooling a scatter of each window's cotangent to its argmax. The primal
pass keeps what the transposes need: elementwise derivatives, argmax masks, per-point operators.

Each transpose takes the form that measured fastest (2-core CPU, float32, XLA, chunks of 32-128 points of
the ``cnn`` and ``deep`` shapes of ``benchmarks/bench_jacobian.py``, scratch runs on a shared machine):

- a convolution: TF's own input gradient (autodiff of the convolution: ``Conv*DBackpropInput``, lowered by
  XLA), for any stride, dilation and padding. A unit-stride convolution of a single input channel (the
  field itself) runs forward as shifted products (:func:`_shifted_products`: ``[64, 64, 64, 1] -> 8``
  channels 1.9 ms against 24 ms for XLA's convolution) and its transpose as a matmul ``[B t S, C_out] @
  [C_out, prod(k)]`` and a sum of shifted slices (:func:`_patch_transpose`, :func:`_col2im`: 5.2 ms against
  18 ms for XLA's backprop of ``[64, 64, 64, 8] -> 1``); with two input channels or more, both forms were
  slower than TF's.
- batch normalisation right after a convolution or Dense: folded into its kernel and bias
  (:func:`sensitivity.engine.dense_path.layer_steps`); elsewhere an elementwise step.
- max pooling with non-overlapping windows (``pool_size == strides``): the windows in place (the field
  reshaped to ``[B, s_1, p_1, ..., s_r, p_r, C]``, no copy), and a mask of each window's first maximum (TF's
  choice among ties: the least row-major position among the maxima) times the derivatives of the
  elementwise maps before the pool, kept from the primal pass in the field's own layout; the transpose
  repeats the cotangent over each window and multiplies it by the mask, with no transpose
  (:class:`_MaxPool`). On the ``deep`` shape's chain at 64 points this is 1.55x the windows as strided
  slices with a one-hot argmax and a transposing scatter (one interleaved run, 30 rounds; ``cnn``, whose
  one plain pool takes 10 cotangents, 0.93x, within the run's noise). Overlapping windows: TF's gradient on
  the primal input repeated per cotangent (:class:`_TiledPool`). Global max pooling: a one-hot mask of the
  argmax over the whole field.
- a unit-stride convolution followed by elementwise maps and a non-overlapping 'valid' max pool, when
  ``prod(P + k - 1) C_in <= t prod(P)`` (few input channels, several outputs; typically the input layer):
  one per-point operator ``E [sites, C_out, prod(P + k - 1) C_in]``, the kernel placed at each window's
  argmax and scaled by the elementwise derivative there (:class:`_ConvPool`; built as a sum of ``prod(P)``
  products of the mask with the placed kernels, 1.1-1.3x an einsum). Its transpose is one batched
  matmul of the pooled cotangents with ``E`` and one sum of shifted slices; the cotangent block of the
  convolution's output, ``prod(P)`` times the pooled one, is never built. On the ``cnn`` shape (10
  outputs) at 128 points: 4.5 ms for the matmul with ``E`` against 48 ms for the mask product and 16 ms for
  the transpose after it.
- an affine/elementwise tail on flat tensors (the Dense head): :class:`sensitivity.engine.dense_path.Block`, whose
  first kernel is a broadcast and whose last two kernels may be folded into one.

In float32 the Jacobians stay within ``3e-7`` (cnn) and ``6e-7`` (deep) of float64 autodiff, relative to
the largest entry (``tests/engine/test_reverse_path.py`` allows ``2e-5``).

Detection is that of the dense path, then verified twice: the chain's values must reproduce the model's on
probe points, and its Jacobian must match the model's autodiff on probe points (one random cotangent per
point, :func:`_matches_autodiff`); otherwise the engine keeps its autodiff path.

References
----------
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM, ch. 3 (adjoint propagation,
vector mode), doi:10.1137/1.9780898717761.
Dumoulin, V. & Visin, F. (2016), A guide to convolution arithmetic for deep learning, arXiv:1603.07285
(transposed convolutions).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.dense_path import Block, affine, fold, linear, reproduces, with_slope

#: Bytes of the largest cotangent block of one chunk with the kept tensors (see :meth:`ConvChain.chunk_size`):
#: the last-level cache of the development machine (32 MiB). On the ``cnn`` and ``deep`` shapes of
#: ``benchmarks/bench_jacobian.py`` it gives chunks of 64 points, the fastest of 16-128 in one interleaved run
#: (1.2x the 16 points of 8 MiB on both; 128, past the cache, 0.6-0.75x).
BLOCK_BYTES = 32 * 2**20
#: Bounds on the automatic chunk size [points]: the blocks of a conv chain are large per point, so a
#: cache-sized chunk is smaller than the engine's lower bound for MLPs.
MIN_CHUNK, MAX_CHUNK = 8, 1024


class _Step:
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


class _Affine(_Step):
    form = "matmul"

    def __init__(self, step: tuple, *shapes: Any) -> None:
        super().__init__(*shapes)
        self.step = step

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return affine(h, self.step)

    def pullback(self, block: tf.Tensor, saved: Any) -> tf.Tensor:
        kernel_t = self.step[2]
        flat = tf.matmul(tf.reshape(block, [-1, kernel_t.shape[0]]), kernel_t)
        return tf.reshape(flat, [-1, block.shape[1], *self.in_shape])


class _Elementwise(_Step):
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


class _Linear(_Step):
    """A linear map ``op`` of each point plus ``bias``, with its transpose ``transpose: [N, *out] -> [N, *in]``."""

    def __init__(self, op: Callable, bias: tf.Tensor | None, transpose: Callable, form: str, *shapes: Any) -> None:
        super().__init__(*shapes)
        self.op, self.bias, self.transpose, self.form = op, bias, transpose, form

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return linear(h, (self.op, self.bias))

    def pullback(self, block: tf.Tensor, saved: Any) -> tf.Tensor:
        flat = self.transpose(tf.reshape(block, [-1, *self.out_shape]))
        return tf.reshape(flat, [-1, block.shape[1], *self.in_shape])


class _MaxPool(_Step):
    """Elementwise maps ``maps`` (none or more) and a max pool with non-overlapping windows (channels last):
    the argmax mask times the maps' derivatives, and its scatter."""

    form = "argmax mask"

    def __init__(self, layer: Any, maps: list[Callable], *shapes: Any) -> None:
        super().__init__(*shapes)
        self.layer, self.maps, self.pool = layer, maps, tuple(layer.pool_size)
        self.pads = _pool_pads(layer, self.in_shape[:-1])

    @property
    def saved_width(self) -> int:
        return math.prod(self.in_shape)

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        for f in self.maps:
            h = f(h)
        return self.layer(h)

    def primal(self, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        h, slope = _with_slopes(self.maps, h)
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
        return tf.reshape(_fit(full, self.pads, self.in_shape[:-1]), [-1, t, *self.in_shape])

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


class _PoolLayer(_Step):
    """A pooling step applied as its Keras ``layer``, keeping a tensor of its input's size for the pullback."""

    def __init__(self, layer: Any, *shapes: Any) -> None:
        super().__init__(*shapes)
        self.layer = layer

    @property
    def saved_width(self) -> int:
        return math.prod(self.in_shape)

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        return self.layer(h)


class _GlobalMaxPool(_PoolLayer):
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


class _TiledPool(_PoolLayer):
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


class _ConvPool(_Step):
    """A unit-stride convolution, elementwise maps and a non-overlapping max pool, pulled back through one
    per-point operator ``E [B, *sites, C_out, prod(P + k - 1) C_in]`` (see the module docstring)."""

    form = "per-point operator at the argmax"

    def __init__(self, conv: tuple, maps: list[Callable], pool: Any, in_shape: tuple[int, ...],
                 out_shape: tuple[int, ...], name: str, dtype: str) -> None:
        super().__init__(in_shape, out_shape, name)
        layer, kernel = conv[2], np.asarray(conv[3], np.float64)  # [*k, C_in, C_out]
        self.op, self.bias, self.maps, self.pool_size = _forward_op(conv, dtype), conv[1], maps, tuple(pool.pool_size)
        self.window = tuple(p + k - 1 for p, k in zip(self.pool_size, kernel.shape[:-2]))
        self.conv_pads = _conv_pads(layer, kernel.shape[:-2])
        placed = np.zeros((*self.pool_size, kernel.shape[-1], *self.window, kernel.shape[-2]))
        for offset in itertools.product(*map(range, self.pool_size)):  # the kernel at each window position
            where = tuple(slice(o, o + k) for o, k in zip(offset, kernel.shape[:-2]))
            placed[(*offset, slice(None), *where)] = np.moveaxis(kernel, -1, 0)
        self.placed = tf.constant(placed.reshape(math.prod(self.pool_size), kernel.shape[-1], -1), dtype)

    def apply(self, h: tf.Tensor) -> tf.Tensor:
        a = linear(h, (self.op, self.bias))
        for f in self.maps:
            a = f(a)
        return tf.reduce_max(_windows(a, self.pool_size, _NO_PADS * len(self.pool_size), 0.0), 1)

    def primal(self, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        a, slope = _with_slopes(self.maps, linear(h, (self.op, self.bias)))
        pads = _NO_PADS * len(self.pool_size)
        pooled, mask = _first_max(_windows(a, self.pool_size, pads, 0.0))  # [B, prod(P), *sites, C_out]
        if slope is not None:
            mask = mask * _windows(slope, self.pool_size, pads, 0.0)
        rank = len(self.pool_size)
        placed = tf.reshape(self.placed, [self.placed.shape[0], *[1] * rank, *self.placed.shape[1:]])
        return pooled, tf.add_n([mask[:, o, ..., None] * placed[o] for o in range(self.placed.shape[0])])

    def pullback(self, block: tf.Tensor, saved: tf.Tensor) -> tf.Tensor:
        t, sites = block.shape[1], block.shape[2:-1]
        rank = len(sites)
        s = "ijk"[:rank]
        placed = tf.einsum(f"bt{s}c,b{s}cw->bt{s}w", block, saved)  # [B, t, *sites, W]
        c_in = self.in_shape[-1]
        full = _col2im(tf.reshape(placed, [-1, *sites, *self.window, c_in]), self.pool_size)
        padded = tuple(n + before + after for n, (before, after) in zip(self.in_shape[:-1], self.conv_pads))
        full = _fit(full, _NO_PADS * rank, padded)  # [B t, *padded input, C_in]
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


_NO_PADS = ((0, 0),)


@dataclass(frozen=True)
class ConvChain:
    """A model as a chain of steps with transposes, for reverse mode (see the module docstring).

    Attributes
    ----------
    steps
        The steps in application order.
    tail
        ``steps[tail:]`` are affine and elementwise steps on flat tensors (the Dense head), pulled back by
        :class:`sensitivity.engine.dense_path.Block` with ``fold`` (the last two kernels folded, or ``None``).
    n_out
        Numbers per point of the output (the cotangents per point).
    widths
        Numbers per point after each step, input first.
    """

    steps: tuple[_Step, ...]
    tail: int
    fold: tf.Tensor | None
    n_out: int
    widths: tuple[int, ...]

    @property
    def description(self) -> str:
        """Each step's transpose, in the order the cotangents meet them (for the engine's report)."""
        parts = [f"{step.name} ({step.form})" for step in reversed(self.steps[: self.tail])
                 if not isinstance(step, _Elementwise)]
        head = sum(isinstance(step, _Affine) for step in self.steps[self.tail:])
        if head:
            parts.insert(0, f"{head} Dense ({'folded ' if self.fold is not None else ''}matmul)")
        return ", ".join(parts)

    def values(self, x: tf.Tensor) -> tf.Tensor:
        """The chain's outputs, flattened: ``[B, n_out]``."""
        for step in self.steps:
            x = step.apply(x)
        return tf.reshape(x, [-1, self.n_out])

    def reverse(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[B, n_out]`` and Jacobian ``[B, n_out, n_in]``, the ``n_out`` cotangents carried together."""
        h, kept = x, []
        for step in self.steps:
            h, saved = step.primal(h)
            kept.append(saved)
        cotangents = Block(self.fold)
        for step, saved in zip(reversed(self.steps[self.tail:]), reversed(kept[self.tail:])):
            if isinstance(step, _Affine):
                cotangents.kernel(step.step[2])
            else:
                cotangents.slope(saved)
        block = _materialise(cotangents, tf.shape(x)[0], self.n_out, x.dtype)
        shape = self.steps[self.tail].in_shape if self.tail < len(self.steps) else self.steps[-1].out_shape
        block = tf.reshape(block, [-1, self.n_out, *shape])
        for step, saved in zip(reversed(self.steps[: self.tail]), reversed(kept[: self.tail])):
            block = step.pullback(block, saved)
        return tf.reshape(h, [-1, self.n_out]), tf.reshape(block, [-1, self.n_out, x.shape[-1]])

    def chunk_size(self, itemsize: int, memory_budget_mb: float) -> int:
        """Points per chunk (a power of two within :data:`MIN_CHUNK` .. :data:`MAX_CHUNK`): the largest
        cotangent block and what the primal pass keeps fit :data:`BLOCK_BYTES`, and one chunk's working
        memory (two blocks, the kept tensors, the primal activations and the Jacobian) fits
        ``memory_budget_mb`` [MiB]."""
        widest = max(step.block_width for step in self.steps[: self.tail] or self.steps) * self.n_out
        kept = sum(step.saved_width for step in self.steps)
        fit = max(BLOCK_BYTES // (itemsize * (widest + kept)), 1)
        per_point = itemsize * (2 * widest + kept + sum(self.widths) + self.n_out * (self.widths[0] + 1))
        fit = min(fit, max(int(memory_budget_mb * 2**20 // per_point), 1))
        return int(min(MAX_CHUNK, max(MIN_CHUNK, 1 << (int(fit).bit_length() - 1))))


def conv_chain(steps: list[tuple[str, Any]], fn: Callable, n_in: int, dtype: str) -> ConvChain | str:
    """The verified :class:`ConvChain` of ``steps`` (:func:`sensitivity.engine.dense_path.layer_steps` of ``fn``),
    or a sentence saying why there is none."""
    try:
        shapes = _shapes(steps, n_in, dtype)
    except Exception:  # any shape or type failure: not the chain we assumed
        return "the layers do not apply in sequence to a batch of flat inputs"
    n_out = math.prod(shapes[-1])
    built, i = [], 0
    while i < len(steps):
        fused = _fusable(steps, i, n_out)
        if fused:
            conv, j = steps[i][1], i + fused
            maps = [step for _, step in steps[i + 1 : j]]
            name = f"{conv[2].name}+{steps[j][1].name}"
            built.append(_ConvPool(conv, maps, steps[j][1], shapes[i], shapes[j + 1], name, dtype))
            i = j + 1
            continue
        j = i
        while steps[j][0] == "elementwise" and j + 1 < len(steps):
            j += 1
        if steps[j][0] == "maxpool" and _windowed(steps[j][1]):  # the maps' derivatives go into its mask
            layer = steps[j][1]
            built.append(_MaxPool(layer, [step for _, step in steps[i:j]], shapes[i], shapes[j + 1], layer.name))
            i = j + 1
            continue
        built.append(_step(steps[i], shapes[i], shapes[i + 1], dtype))
        i += 1
    tail = len(built)
    while tail and isinstance(built[tail - 1], (_Affine, _Elementwise)) and len(built[tail - 1].in_shape) == 1 \
            and len(built[tail - 1].out_shape) == 1:
        tail -= 1
    chain = ConvChain(tuple(built), tail, _tail_fold(built[tail:], dtype), n_out,
                      tuple(math.prod(s) for s in shapes))
    if not reproduces(chain.values, fn, n_in, dtype):
        return "the layer chain does not reproduce the model's values on probe points"
    return chain if _matches_autodiff(chain, fn, n_in, dtype) else \
        "the reverse chain's Jacobian does not match the model's autodiff on probe points"


def _step(step: tuple[str, Any], in_shape: tuple[int, ...], out_shape: tuple[int, ...], dtype: str) -> _Step:
    """The :class:`_Step` of one ``(kind, step)`` of :func:`sensitivity.engine.dense_path.layer_steps`."""
    kind, payload = step
    shapes = (in_shape, out_shape)
    if kind == "affine":
        return _Affine(payload, *shapes, "Dense")
    if kind == "elementwise":
        return _Elementwise(payload, *shapes, "elementwise")
    if kind == "linear":
        op, bias, layer, kernel = payload
        if _single_input_channel(payload):
            transpose = _patch_transpose(kernel, _conv_pads(layer, kernel.shape[:-2]), in_shape, dtype)
            return _Linear(_forward_op(payload, dtype), bias, transpose, "matmul and shifted sums", *shapes,
                           layer.name)
        form = "TF conv backprop" if kernel is not None else "transpose"
        return _Linear(op, bias, _autodiff_transpose(op, in_shape, dtype), form, *shapes, layer.name)
    layer = payload  # max pooling
    if _channels_last(layer) and type(layer).__name__.startswith("Global"):
        return _GlobalMaxPool(layer, *shapes, layer.name)
    if _windowed(layer):
        return _MaxPool(layer, [], *shapes, layer.name)
    return _TiledPool(layer, *shapes, layer.name)


def _windowed(layer: Any) -> bool:
    """Is ``layer`` a channels-last max pool with non-overlapping windows (``pool_size == strides``)?"""
    return _channels_last(layer) and hasattr(layer, "pool_size") and tuple(layer.pool_size) == tuple(layer.strides)


def _single_input_channel(payload: tuple) -> bool:
    """Is the linear step ``payload`` a unit-stride convolution of a single input channel (a field)?"""
    return _unit_conv(payload[2]) and payload[3].shape[-2] == 1


def _forward_op(payload: tuple, dtype: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The convolution of a linear step, as shifted products (:func:`_shifted_products`) when it has a single
    input channel, else the step's own op."""
    if not _single_input_channel(payload):
        return payload[0]
    kernel = payload[3]
    return _shifted_products(kernel, _conv_pads(payload[2], kernel.shape[:-2]), dtype)


def _fusable(steps: list[tuple[str, Any]], i: int, n_out: int) -> int:
    """``j - i`` where ``steps[i]`` is a unit-stride convolution, ``steps[i + 1 : j]`` elementwise and
    ``steps[j]`` a non-overlapping 'valid' max pool worth fusing into a :class:`_ConvPool`, else 0."""
    kind, payload = steps[i]
    if kind != "linear" or not _unit_conv(payload[2]):
        return 0
    j = i + 1
    while j < len(steps) and steps[j][0] == "elementwise":
        j += 1
    if j == len(steps) or steps[j][0] != "maxpool":
        return 0
    pool = steps[j][1]
    if not (_windowed(pool) and pool.padding == "valid"):
        return 0
    kernel_shape = payload[3].shape
    window = math.prod(p + k - 1 for p, k in zip(pool.pool_size, kernel_shape[:-2]))
    return j - i if window * kernel_shape[-2] <= n_out * math.prod(pool.pool_size) else 0


def _unit_conv(layer: Any) -> bool:
    """Is ``layer`` a channels-last, unit-stride, undilated, ungrouped 'valid'/'same' Keras convolution?"""
    return (type(layer).__name__ in ("Conv1D", "Conv2D", "Conv3D") and layer.data_format == "channels_last"
            and layer.groups == 1 and layer.padding in ("valid", "same") and set(layer.strides) == {1}
            and set(layer.dilation_rate) == {1})


def _channels_last(layer: Any) -> bool:
    return getattr(layer, "data_format", "channels_last") == "channels_last"


def _conv_pads(layer: Any, kernel: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Padding ``(before, after)`` per spatial dim of a unit-stride convolution (TF's 'same': more after)."""
    if layer.padding == "valid":
        return _NO_PADS * len(kernel)
    return tuple(((k - 1) // 2, k - 1 - (k - 1) // 2) for k in kernel)


def _pool_pads(layer: Any, spatial: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Padding ``(before, after)`` per spatial dim of a non-overlapping pool (TF's 'same': more after)."""
    if layer.padding == "valid":
        return _NO_PADS * len(spatial)
    totals = [-n % p for n, p in zip(spatial, layer.pool_size)]
    return tuple((total // 2, total - total // 2) for total in totals)


def _windows(h: tf.Tensor, pool: tuple[int, ...], pads: tuple[tuple[int, int], ...], fill: float) -> tf.Tensor:
    """``h [B, *S, C]`` cut into its non-overlapping windows: ``[B, prod(pool), *sites, C]``, one strided slice
    per window offset (row-major order; padded with ``fill``, the remainder of a 'valid' pool dropped). The
    channels stay innermost, so the elementwise work on windows vectorises over them."""
    if any(before or after for before, after in pads):
        h = tf.pad(h, [[0, 0], *pads, [0, 0]], constant_values=fill)
    sites = [n // p for n, p in zip(h.shape[1:-1], pool)]
    return tf.stack([h[(slice(None), *[slice(o, o + s * p, p) for o, s, p in zip(offset, sites, pool)])]
                     for offset in itertools.product(*map(range, pool))], 1)


def _with_slopes(maps: list[Callable], h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor | None]:
    """``h`` through the elementwise ``maps`` and the product of their derivatives (``None`` for no maps)."""
    slope = None
    for f in maps:
        h, s = with_slope(f, h)
        slope = s if slope is None else slope * s
    return h, slope


def _first_max(windows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The maximum of each window ``[B, W, ...]`` (over axis 1) and a one-hot mask ``[B, W, ...]`` of its first
    position (TF's choice among ties: ``tf.argmax`` returns the first)."""
    mask = tf.one_hot(tf.argmax(windows, 1), windows.shape[1], axis=1, dtype=windows.dtype)
    return tf.reduce_max(windows, 1), mask


def _shifted_products(kernel: np.ndarray, pads: tuple[tuple[int, int], ...],
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


def _col2im(patches: tf.Tensor, stride: tuple[int, ...]) -> tf.Tensor:
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


def _fit(h: tf.Tensor, pads: tuple[tuple[int, int], ...], spatial: tuple[int, ...]) -> tf.Tensor:
    """``h [N, *S, C]`` on a grid padded by ``pads`` cut back to ``spatial``, zero-filled where it is short."""
    index = (slice(None), *[slice(before, before + n) for (before, _), n in zip(pads, spatial)])
    h = h[index]
    short = [[0, n - m] for n, m in zip(spatial, h.shape[1:-1])]
    return tf.pad(h, [[0, 0], *short, [0, 0]]) if any(s for _, s in short) else h


def _patch_transpose(kernel: np.ndarray, pads: tuple[tuple[int, int], ...], in_shape: tuple[int, ...],
                     dtype: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The transpose of a unit-stride convolution with ``kernel [*k, C_in, C_out]``: ``g [N, *S_out, C_out]``
    times ``[C_out, prod(k) C_in]``, each output position's patch summed onto the input grid (:func:`_col2im`)."""
    window, (c_in, c_out) = kernel.shape[:-2], kernel.shape[-2:]
    matrix = tf.constant(np.moveaxis(kernel, -1, 0).reshape(c_out, -1), dtype)
    padded = tuple(n + before + after for n, (before, after) in zip(in_shape[:-1], pads))

    def transpose(g: tf.Tensor) -> tf.Tensor:
        out = g.shape[1:-1]
        patches = tf.reshape(tf.matmul(tf.reshape(g, [-1, c_out]), matrix), [-1, *out, *window, c_in])
        full = _fit(_col2im(patches, (1,) * len(window)), _NO_PADS * len(window), padded)
        return full[(slice(None), *[slice(before, before + n) for n, (before, _) in zip(in_shape[:-1], pads)])]

    return transpose


def _autodiff_transpose(op: Callable[[tf.Tensor], tf.Tensor], in_shape: tuple[int, ...],
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


def _shapes(steps: list[tuple[str, Any]], n_in: int, dtype: str) -> list[tuple[int, ...]]:
    """Per-point shapes before each step and after the last, input first (one probe point)."""
    h, shapes = tf.ones([1, n_in], dtype), [(n_in,)]
    for kind, step in steps:
        h = affine(h, step) if kind == "affine" else linear(h, step) if kind == "linear" else step(h)
        shapes.append(tuple(h.shape[1:]))
    return shapes


def _tail_fold(tail: list[_Step], dtype: str) -> tf.Tensor | None:
    """The last two kernels of the Dense head folded (:func:`sensitivity.engine.dense_path.fold`), where the head
    ends in two affine steps with elementwise steps between them; else ``None``."""
    kernels = [i for i, step in enumerate(tail) if isinstance(step, _Affine)]
    if len(kernels) < 2 or kernels[-1] - kernels[-2] < 2:
        return None
    last, before = tail[kernels[-1]].step[2], tail[kernels[-2]].step[2]
    return fold(np.asarray(last), np.asarray(before), dtype)


def _materialise(cotangents: Block, batch: tf.Tensor, t: int, dtype: tf.DType) -> tf.Tensor:
    """The cotangent block ``[B, t, width]`` after the Dense head (the identity when the head is empty)."""
    block = cotangents.block
    if block is None:  # elementwise steps only: diag(scale)
        eye = tf.eye(t, dtype=dtype)[None]
        block = eye if cotangents.scale is None else cotangents.scale[:, :, None] * eye
    return tf.broadcast_to(block, [batch, *block.shape[1:]])


def _matches_autodiff(chain: ConvChain, fn: Callable, n_in: int, dtype: str) -> bool:
    """Does ``u^T J`` of the chain match the model's gradient of ``u^T y`` (one random ``u`` per point) on
    4 probe points, to within a thousand ulps of the gradient's scale?"""
    rng = np.random.default_rng(54321)
    x = tf.constant(rng.uniform(0.5, 2.0, (4, n_in)), dtype)
    u = tf.constant(rng.normal(size=(4, chain.n_out)), dtype)
    try:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reshape(fn(x), [4, -1])
        expected = tape.gradient(y, x, output_gradients=u).numpy()
        got = tf.einsum("bo,boi->bi", u, chain.reverse(x)[1]).numpy()
    except Exception:  # any shape or type failure: not the chain we assumed
        return False
    tolerance = 1024 * np.finfo(dtype).eps * max(1.0, float(np.max(np.abs(expected))))
    return bool(np.all(np.isfinite(expected)) and np.max(np.abs(got - expected)) <= tolerance)
