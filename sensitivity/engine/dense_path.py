"""The engine's fast path for chains of linear layers and elementwise maps (Keras MLPs and conv nets).

A multilayer perceptron with input/output scaling is a chain ``x -> e_0 -> A_1 -> e_1 -> ... -> A_L -> e_L``
of affine maps ``A_k(h) = h W_k + b_k`` and elementwise maps ``e_k`` (activations, :mod:`sensitivity.surrogates.scaling`
layers). Its Jacobian is the matrix chain

    J(x) = D_L W_L^T D_{L-1} ... W_1^T D_0,     D_k = diag(e_k'(z_k)),

so forward mode carries the ``n_in`` tangents of every point as one ``[B n_in, h]`` block through each
``W_k`` (one large matmul per layer, no per-tangent bookkeeping), and reverse mode carries the ``n_out``
cotangents through ``W_k^T`` the same way. The first product of the chain needs no matmul (``D W`` is a
broadcast), and reverse mode ends in the ``[B, n_out, n_in]`` layout the engine returns, with no transpose.
Where the result is small (:data:`FOLD_BYTES`), the first two kernels of the chain are folded into one:
the tangents after the second, ``diag(c) W_1 diag(s) W_2`` per point (``c``, ``s`` elementwise derivatives),
are ``c_i (s F)[i, j]`` with ``F[k, i, j] = W_1[i, k] W_2[k, j]`` computed once (:func:`fold`), one
``[B, k] @ [k, t h]`` matmul with no tangent block built before it (reverse mode: the last two ``W^T``).
The elementwise derivatives ``e_k'`` come from autodiff of each map (one cheap ``[B, h]`` gradient), so
any elementwise activation works and the scaling stays inside, in physical units.

The same holds for any chain of linear maps ``L_k`` (convolutions, reshapes, upsampling, padding, cropping, average
pooling) and elementwise maps (activations, batch normalisation in inference): forward mode applies each layer's own
linear op to the tangents folded into the batch axis, one ``[B n_in, ...]`` block (the JVP of a linear map is the
map itself), and multiplies by the elementwise derivatives in between (a one-filter convolution, the usual last
layer of a field surrogate, runs as a matmul and a sum of shifted slices, see ``_shift_add`` in
:mod:`sensitivity.engine.layers`). Reverse mode through such a chain, and through max pooling, is
:mod:`sensitivity.engine.reverse_path` (each op's transpose, from the same steps).

Detection is structural and then verified: :func:`sensitivity.engine.layers.layer_steps` reads a Keras model
as named steps; :func:`chain_of` builds the chain, whose values must reproduce the
surrogate's own on probe points, or the engine keeps its generic path.

References
----------
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM, ch. 3 (tangent propagation,
vector mode) and ch. 9 (Jacobian accumulation by matrix chains), doi:10.1137/1.9780898717761.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.chunks import CONV_BLOCK_BYTES, DENSE_BLOCK_BYTES, dense_chunk_size
from sensitivity.engine.layers import AffineStep, ElementwiseStep, LinearStep, Step, layer_steps

#: Largest folded kernel of the first two products of the chain (see :func:`fold`) [bytes]. The fold does the
#: same FLOPs as the unfolded products and saves the elementwise pass that builds the first tangent block; on
#: shape C of ``benchmarks/bench_jacobian.py`` (1 MiB folded kernel) the XLA chunks ran 1.03x and 1.06x the
#: unfolded chain in two scratch interleaved runs, on A (2 MiB) 1.3x in one. A larger kernel (B: 32 tangents
#: through 512 x 512 kernels, 32 MiB) leaves the cache and would be read from memory at every chunk.
FOLD_BYTES = 4 * 2**20


@dataclass(frozen=True)
class DenseChain:
    """A model as a chain of affine, linear and elementwise steps.

    Attributes
    ----------
    steps
        :class:`~sensitivity.engine.layers.AffineStep`, :class:`~sensitivity.engine.layers.LinearStep` and
        :class:`~sensitivity.engine.layers.ElementwiseStep` in application order
        (:func:`~sensitivity.engine.layers.layer_steps`); at least one affine or linear step.
    widths
        Numbers per point after each affine or linear step, input first (read off one probe point).
    fold_forward, fold_reverse
        The first two kernels of the chain folded into one (forward mode), or the last two (reverse mode),
        by :func:`fold`; ``None`` where the chain does not start (end) with two affine steps with elementwise
        steps between them, or where the folded kernel exceeds :data:`FOLD_BYTES`.
    """

    steps: tuple[Step, ...]
    widths: tuple[int, ...] = ()
    fold_forward: tf.Tensor | None = None
    fold_reverse: tf.Tensor | None = None

    @property
    def reversible(self) -> bool:
        """Has the chain a reverse mode here (affine and elementwise steps only)?"""
        return not any(isinstance(step, LinearStep) for step in self.steps)

    def chunk_size(self, mode: str, n_in: int, n_out: int, itemsize: int, memory_budget_mb: float,
                   share: int = 1) -> int:
        """Points per chunk [points]: the widest tangent block of ``share`` copies of the chain (the members of an
        ensemble, :mod:`sensitivity.engine.member_path`) within a cache-sized block,
        :data:`~sensitivity.engine.chunks.DENSE_BLOCK_BYTES` (an MLP) or
        :data:`~sensitivity.engine.chunks.CONV_BLOCK_BYTES` (convolutions), and within ``memory_budget_mb`` [MiB]."""
        block = min(DENSE_BLOCK_BYTES if self.reversible else CONV_BLOCK_BYTES, int(memory_budget_mb * 2**20))
        return dense_chunk_size([share * w for w in self.widths], n_in, n_out, mode, itemsize, block)

    def values(self, x: tf.Tensor) -> tf.Tensor:
        """The chain's outputs, flattened: ``[B, n_out]``."""
        for step in self.steps:
            x = step.apply(x)
        return tf.reshape(x, [-1, math.prod(x.shape[1:])]) if x.shape.rank != 2 else x

    def forward(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[B, n_out]`` and Jacobian ``[B, n_out, n_in]``, the ``n_in`` tangents carried together."""
        h, tangents = x, Block(self.fold_forward)  # [B, n_in, *point]
        batch, n_in = tf.shape(x)[0], x.shape[-1]
        for step in self.steps:
            if isinstance(step, AffineStep):
                tangents.kernel(step.kernel)
                h = step.apply(h)
            elif isinstance(step, LinearStep):
                tangents.linear(step.op, batch, n_in, x.dtype)
                h = step.apply(h)
            else:
                h, slope = with_slope(step.f, h)
                tangents.slope(slope)
        n_out = math.prod(h.shape[1:])
        block = tf.broadcast_to(tf.reshape(tangents.block, [-1, n_in, n_out]), [batch, n_in, n_out])
        return tf.reshape(h, [-1, n_out]), tf.transpose(block, [0, 2, 1])

    def reverse(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[B, n_out]`` and Jacobian ``[B, n_out, n_in]``, the ``n_out`` cotangents carried together."""
        h, slopes = x, []
        for step in self.steps:  # primal pass, keeping every elementwise slope
            if isinstance(step, AffineStep):
                h = step.apply(h)
                slopes.append(None)
            else:
                h, slope = with_slope(step.f, h)
                slopes.append(slope)
        cotangents = Block(self.fold_reverse)  # [B, n_out, width]
        for step, slope in zip(reversed(self.steps), reversed(slopes)):
            if isinstance(step, AffineStep):
                cotangents.kernel(step.kernel_t)
            else:
                cotangents.slope(slope)
        return h, tf.broadcast_to(cotangents.block, [tf.shape(x)[0], h.shape[-1], x.shape[-1]])


class Block:
    """The tangent block ``[B, t, width]`` of a chain (cotangents in reverse mode), built one step at a time.

    While no kernel has been met the map is diagonal, ``diag(scale)``; the first kernel makes the block a
    broadcast of it. With a folded kernel ``fold`` (:func:`fold`), the first kernel waits for the slopes
    that follow it and the second one makes the block in one matmul (:func:`_unfold`).
    """

    def __init__(self, fold: tf.Tensor | None) -> None:
        self.scale: tf.Tensor | None = None  # [B, t], the diagonal before the first kernel (None: identity)
        self.block: tf.Tensor | None = None
        self._fold, self._between, self._waiting = fold, None, False

    def kernel(self, kernel: tf.Tensor) -> None:
        """Apply the kernel ``[width, width']`` of an affine step (``W`` forward, ``W^T`` in reverse)."""
        if self._waiting:
            self.block, self._fold, self._waiting = _unfold(self._between, self._fold, self.scale), None, False
        elif self.block is None and self._fold is not None:
            self._waiting = True
        elif self.block is None:  # diag(scale) W: a broadcast, no matmul
            kernel = tf.expand_dims(kernel, -3)  # [1, k, h]
            self.block = kernel if self.scale is None else self.scale[..., None] * kernel
        else:
            self.block = _right_matmul(self.block, kernel)

    def linear(self, op: Callable[[tf.Tensor], tf.Tensor], batch: tf.Tensor, n_in: int, dtype: tf.DType) -> None:
        """Apply a linear step ``op`` (forward mode only) to each of the ``n_in`` tangents of ``batch`` points."""
        if self.block is None:  # diag(scale) itself, as n_in tangents per point
            eye = tf.eye(n_in, dtype=dtype)[None]
            self.block = eye if self.scale is None else self.scale[:, :, None] * eye
        self.block = _folded(op, tf.broadcast_to(self.block, [batch, *self.block.shape[1:]]))

    def slope(self, slope: tf.Tensor) -> None:
        """Apply an elementwise step's derivatives ``[B, width]``."""
        if self._waiting:
            self._between = slope if self._between is None else self._between * slope
        elif self.block is None:
            self.scale = slope if self.scale is None else self.scale * slope
        else:
            self.block = self.block * slope[:, None]


def dense_chain(fn: Callable[[tf.Tensor], tf.Tensor], n_in: int, dtype: str) -> DenseChain | None:
    """The :class:`DenseChain` of ``fn`` when it is a verified Keras MLP or conv chain, else ``None``.

    ``fn`` qualifies when it is a Keras model, or a function referring to exactly one (closure or global
    name), whose layers are all dense, convolutional (``Conv1D/2D/3D``), linear reshaping or pooling, elementwise
    or no-ops (:func:`~sensitivity.engine.layers.layer_steps`), and when the chain reproduces ``fn`` on
    random probe points to within a few hundred ulps of the output scale (so a wrapper that does more than
    call the model is caught).
    """
    steps = layer_steps(fn, dtype)
    chain = None if isinstance(steps, str) else chain_of(steps, fn, n_in, dtype)
    return chain if isinstance(chain, DenseChain) else None


def chain_of(steps: list[Step], fn: Callable, n_in: int, dtype: str) -> DenseChain | str:
    """The verified :class:`DenseChain` of ``steps`` (from :func:`~sensitivity.engine.layers.layer_steps` of ``fn``),
    or why not."""
    if not all(isinstance(step, (AffineStep, LinearStep, ElementwiseStep)) for step in steps):
        return "max pooling has no forward mode on the fast path"
    try:
        widths = _widths(steps, n_in, dtype)
    except Exception:  # any shape or type failure: not the chain we assumed
        return "the layers do not apply in sequence to a batch of flat inputs"
    chain = DenseChain(tuple(steps), widths, *_folds(steps, dtype))
    return chain if reproduces(chain.values, fn, n_in, dtype) else \
        "the layer chain does not reproduce the model's values on probe points"


def flat_outputs(chain: DenseChain, dtype: str) -> DenseChain:
    """``chain`` without a last ``Reshape`` or ``Flatten`` (the engine's outputs are flat: C-order reshapes of
    the flat outputs are the identity), e.g. the ``output_shape`` layer of a trained field surrogate; its folded
    kernels are those of the steps that remain."""
    steps = list(chain.steps)
    while steps and isinstance(steps[-1], LinearStep) and type(steps[-1].layer).__name__ in ("Reshape", "Flatten"):
        steps.pop()
    if len(steps) == len(chain.steps):
        return chain
    return DenseChain(tuple(steps), chain.widths[: len(chain.widths) - (len(chain.steps) - len(steps))],
                      *_folds(steps, dtype))


def _folds(steps: list[Step], dtype: str) -> tuple[tf.Tensor | None, tf.Tensor | None]:
    """The folded first two kernels (forward mode) and last two (reverse mode, as ``W^T``) of the chain
    ``steps`` (:func:`fold`), each where both are affine steps with elementwise steps between them."""
    kernels = [i for i, step in enumerate(steps) if not isinstance(step, ElementwiseStep)]  # affine and linear

    def foldable(i: int, j: int) -> bool:
        return isinstance(steps[i], AffineStep) and isinstance(steps[j], AffineStep) and j - i > 1

    forward = reverse = None
    if len(kernels) >= 2 and foldable(kernels[0], kernels[1]):
        forward = fold(np.asarray(steps[kernels[0]].kernel), np.asarray(steps[kernels[1]].kernel), dtype)
    if len(kernels) >= 2 and foldable(kernels[-2], kernels[-1]) and all(not isinstance(s, LinearStep) for s in steps):
        reverse = fold(np.asarray(steps[kernels[-1]].kernel_t), np.asarray(steps[kernels[-2]].kernel_t), dtype)
    return forward, reverse


def _widths(steps: list[Step], n_in: int, dtype: str) -> tuple[int, ...]:
    """Numbers per point after each affine or linear step of ``steps``, input first (one probe point)."""
    h, widths = tf.ones([1, n_in], dtype), [n_in]
    for step in steps:
        if isinstance(step, ElementwiseStep):
            continue
        h = step.apply(h)
        widths.append(math.prod(h.shape[1:]))
    return tuple(widths)


def reproduces(values: Callable[[tf.Tensor], tf.Tensor], fn: Callable, n_in: int, dtype: str) -> bool:
    """Do a chain's ``values`` (``[B, n_in] -> [B, n_out]``) match ``fn``'s on 64 probe points (in-domain for
    log-scaled inputs)?"""
    probe = tf.constant(np.random.default_rng(12345).uniform(0.5, 2.0, (64, n_in)), dtype)
    try:
        expected = tf.reshape(fn(probe), [64, -1]).numpy()
        got = values(probe).numpy()
    except Exception:  # any shape or type failure: not the chain we assumed
        return False
    if got.shape != expected.shape or not np.all(np.isfinite(expected)):
        return False
    tolerance = 256 * np.finfo(dtype).eps * max(1.0, float(np.max(np.abs(expected))))
    return bool(np.max(np.abs(got - expected)) <= tolerance)


def _folded(op: Callable, tangents: tf.Tensor) -> tf.Tensor:
    """A linear map of each point applied to ``tangents [B, n_in, *point]`` as one ``[B n_in, *point]`` batch."""
    flat = op(tf.reshape(tangents, [-1, *tangents.shape[2:]]))
    return tf.reshape(flat, [-1, tangents.shape[1], *flat.shape[1:]])


def _right_matmul(stack: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
    """``[B, t, k] @ [k, h] -> [B, t, h]`` as one 2-D matmul (a batched one would broadcast the kernel)."""
    shape = tf.shape(stack)
    flat = tf.matmul(tf.reshape(stack, [-1, stack.shape[-1]]), kernel)
    return tf.reshape(flat, [shape[0], stack.shape[1], kernel.shape[-1]])


def fold(first: np.ndarray, second: np.ndarray, dtype: str) -> tf.Tensor | None:
    """The kernels ``first [t, k]`` and ``second [k, h]`` folded into ``F [k, t, h]``, ``F[k, i, j] =
    first[i, k] second[k, j]`` (in float64, then rounded once), or ``None`` beyond :data:`FOLD_BYTES`.

    For tangents ``diag(c) first diag(s)`` (``c [t]`` and ``s [k]`` elementwise derivatives of one point),
    ``(diag(c) first diag(s) second)[i, j] = c_i (s F)[i, j]``: see :func:`_unfold`.
    """
    (t, k), h = first.shape, second.shape[1]
    if k * t * h * np.dtype(dtype).itemsize > FOLD_BYTES:
        return None
    folded = np.einsum("ik,kj->kij", first.astype(np.float64), second.astype(np.float64))
    return tf.constant(folded, dtype)


def _unfold(between: tf.Tensor, fold: tf.Tensor, scale: tf.Tensor | None) -> tf.Tensor:
    """The block ``[B, t, h]`` of a folded pair of kernels (:func:`fold`) from the slopes ``between [B, k]``
    after the first kernel and the diagonal ``scale [B, t]`` before it (``None``: identity)."""
    k, t, h = fold.shape
    block = tf.reshape(tf.matmul(between, tf.reshape(fold, [k, t * h])), [-1, t, h])
    return block if scale is None else block * scale[:, :, None]


def with_slope(f: Callable[[tf.Tensor], tf.Tensor], z: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``f(z)`` and its elementwise derivative ``f'(z)`` (the gradient of ``sum f(z)``, exact for elementwise f)."""
    with tf.GradientTape() as tape:
        tape.watch(z)
        y = f(z)
    return y, tape.gradient(y, z)
