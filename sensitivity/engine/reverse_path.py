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

Each transpose takes the form that measured fastest (the measurements: docs/performance.md, "The measurements
behind the engine's forms"):

- a convolution: TF's own input gradient (autodiff of the convolution: ``Conv*DBackpropInput``, lowered by
  XLA), for any stride, dilation and padding. A unit-stride convolution of a single input channel (the field
  itself) runs forward as shifted products (:func:`~sensitivity.engine.conv_ops.shifted_products`) and its
  transpose as a matmul ``[B t S, C_out] @ [C_out, prod(k)]`` and a sum of shifted slices
  (:func:`~sensitivity.engine.conv_ops.patch_transpose`, :func:`~sensitivity.engine.conv_ops.col2im`); with two
  input channels or more, TF's own forms.
- batch normalisation right after a convolution or Dense: folded into its kernel and bias
  (:func:`sensitivity.engine.dense_path.layer_steps`); elsewhere an elementwise step.
- max pooling with non-overlapping windows (``pool_size == strides``): the windows in place (the field
  reshaped to ``[B, s_1, p_1, ..., s_r, p_r, C]``, no copy), and a mask of each window's first maximum (TF's
  choice among ties: the least row-major position among the maxima) times the derivatives of the
  elementwise maps before the pool, kept from the primal pass in the field's own layout; the transpose
  repeats the cotangent over each window and multiplies it by the mask, with no transpose
  (:class:`~sensitivity.engine.pullbacks.WindowedMaxPullback`). Overlapping windows: TF's gradient on the
  primal input repeated per cotangent (:class:`~sensitivity.engine.pullbacks.TiledPoolPullback`). Global max
  pooling: a one-hot mask of the argmax over the whole field.
- a unit-stride convolution followed by elementwise maps and a non-overlapping 'valid' max pool, when
  ``prod(P + k - 1) C_in <= t prod(P)`` (few input channels, several outputs; typically the input layer):
  one per-point operator ``E [sites, C_out, prod(P + k - 1) C_in]``, the kernel placed at each window's
  argmax and scaled by the elementwise derivative there (:class:`~sensitivity.engine.pullbacks.ConvPoolPullback`,
  built as a sum of ``prod(P)`` products of the mask with the placed kernels). Its transpose is one batched
  matmul of the pooled cotangents with ``E`` and one sum of shifted slices; the cotangent block of the
  convolution's output, ``prod(P)`` times the pooled one, is never built.
- an affine/elementwise tail on flat tensors (the Dense head): :class:`sensitivity.engine.dense_path.Block`,
  whose first kernel is a broadcast and whose last two kernels may be folded into one.

In float32 the Jacobians stay within ``3e-7`` (cnn) and ``6e-7`` (deep) of float64 autodiff, relative to
the largest entry (``tests/engine/test_reverse_path.py`` allows ``2e-5``).

The steps and their transposes are in :mod:`sensitivity.engine.pullbacks`, the convolution arithmetic in
:mod:`sensitivity.engine.conv_ops`. Detection is that of the dense path, then verified twice: the chain's values
must reproduce the model's on probe points, and its Jacobian must match the model's autodiff on probe points (one
random cotangent per point, :func:`_matches_autodiff`); otherwise the engine keeps its autodiff path.

References
----------
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM, ch. 3 (adjoint propagation,
vector mode), doi:10.1137/1.9780898717761.
Dumoulin, V. & Visin, F. (2016), A guide to convolution arithmetic for deep learning, arXiv:1603.07285
(transposed convolutions).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.conv_ops import unit_conv, windowed
from sensitivity.engine.dense_path import Block, fold, reproduces
from sensitivity.engine.layers import ElementwiseStep, LinearStep, MaxPoolStep, Step
from sensitivity.engine.pullbacks import (AffinePullback, ConvPoolPullback, ElementwisePullback, Pullback,
                                          WindowedMaxPullback, pullback_of)

#: Bytes of the largest cotangent block of one chunk with the kept tensors (see :meth:`ConvChain.chunk_size`):
#: the last-level cache of the development machine (32 MiB). On the ``cnn`` and ``deep`` shapes of
#: ``benchmarks/bench_jacobian.py`` it gives chunks of 64 points, the fastest of 16-128 in one interleaved run
#: (1.2x the 16 points of 8 MiB on both; 128, past the cache, 0.6-0.75x).
BLOCK_BYTES = 32 * 2**20
#: Bounds on the automatic chunk size [points]: the blocks of a conv chain are large per point, so a
#: cache-sized chunk is smaller than the engine's lower bound for MLPs.
MIN_CHUNK, MAX_CHUNK = 8, 1024


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

    steps: tuple[Pullback, ...]
    tail: int
    fold: tf.Tensor | None
    n_out: int
    widths: tuple[int, ...]

    @property
    def description(self) -> str:
        """Each step's transpose, in the order the cotangents meet them (for the engine's report)."""
        parts = [f"{step.name} ({step.form})" for step in reversed(self.steps[: self.tail])
                 if not isinstance(step, ElementwisePullback)]
        head = sum(isinstance(step, AffinePullback) for step in self.steps[self.tail:])
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
            if isinstance(step, AffinePullback):
                cotangents.kernel(step.step.kernel_t)
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


def conv_chain(steps: list[Step], fn: Callable, n_in: int, dtype: str) -> ConvChain | str:
    """The verified :class:`ConvChain` of ``steps`` (:func:`sensitivity.engine.layers.layer_steps` of ``fn``),
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
            conv, j = steps[i], i + fused
            maps = [step.f for step in steps[i + 1 : j]]
            name = f"{conv.layer.name}+{steps[j].layer.name}"
            built.append(ConvPoolPullback(conv, maps, steps[j].layer, shapes[i], shapes[j + 1], name, dtype))
            i = j + 1
            continue
        j = i
        while isinstance(steps[j], ElementwiseStep) and j + 1 < len(steps):
            j += 1
        if isinstance(steps[j], MaxPoolStep) and windowed(steps[j].layer):  # the maps' derivatives go into its mask
            layer = steps[j].layer
            maps = [step.f for step in steps[i:j]]
            built.append(WindowedMaxPullback(layer, maps, shapes[i], shapes[j + 1], layer.name))
            i = j + 1
            continue
        built.append(pullback_of(steps[i], shapes[i], shapes[i + 1], dtype))
        i += 1
    tail = len(built)
    while tail and isinstance(built[tail - 1], (AffinePullback, ElementwisePullback)) \
            and len(built[tail - 1].in_shape) == 1 \
            and len(built[tail - 1].out_shape) == 1:
        tail -= 1
    chain = ConvChain(tuple(built), tail, _tail_fold(built[tail:], dtype), n_out,
                      tuple(math.prod(s) for s in shapes))
    if not reproduces(chain.values, fn, n_in, dtype):
        return "the layer chain does not reproduce the model's values on probe points"
    return chain if _matches_autodiff(chain, fn, n_in, dtype) else \
        "the reverse chain's Jacobian does not match the model's autodiff on probe points"


def _fusable(steps: list[Step], i: int, n_out: int) -> int:
    """``j - i`` where ``steps[i]`` is a unit-stride convolution, ``steps[i + 1 : j]`` elementwise and
    ``steps[j]`` a non-overlapping 'valid' max pool worth fusing into a :class:`~sensitivity.engine.pullbacks.ConvPoolPullback`, else 0."""
    conv = steps[i]
    if not isinstance(conv, LinearStep) or not unit_conv(conv.layer):
        return 0
    j = i + 1
    while j < len(steps) and isinstance(steps[j], ElementwiseStep):
        j += 1
    if j == len(steps) or not isinstance(steps[j], MaxPoolStep):
        return 0
    pool = steps[j].layer
    if not (windowed(pool) and pool.padding == "valid"):
        return 0
    kernel_shape = conv.kernel.shape
    window = math.prod(p + k - 1 for p, k in zip(pool.pool_size, kernel_shape[:-2]))
    return j - i if window * kernel_shape[-2] <= n_out * math.prod(pool.pool_size) else 0


def _shapes(steps: list[Step], n_in: int, dtype: str) -> list[tuple[int, ...]]:
    """Per-point shapes before each step and after the last, input first (one probe point)."""
    h, shapes = tf.ones([1, n_in], dtype), [(n_in,)]
    for step in steps:
        h = step.apply(h)
        shapes.append(tuple(h.shape[1:]))
    return shapes


def _tail_fold(tail: list[Pullback], dtype: str) -> tf.Tensor | None:
    """The last two kernels of the Dense head folded (:func:`sensitivity.engine.dense_path.fold`), where the head
    ends in two affine steps with elementwise steps between them; else ``None``."""
    kernels = [i for i, step in enumerate(tail) if isinstance(step, AffinePullback)]
    if len(kernels) < 2 or kernels[-1] - kernels[-2] < 2:
        return None
    last, before = tail[kernels[-1]].step.kernel_t, tail[kernels[-2]].step.kernel_t
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
