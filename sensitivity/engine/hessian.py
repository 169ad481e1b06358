"""Compiled Hessians of a TF-traceable model, for second-order propagation.

:func:`compile_hessian` builds one ``tf.function`` with the fixed input signature ``[None, n_in]`` that
returns the Hessian of every flattened output at a batch of points, run in chunks by the engines' one chunking
core (:mod:`sensitivity.engine.chunks`), so calls with any number of points never retrace; :func:`hessian_of` builds
it for what a compiled engine (one model's, or an ensemble's members) evaluates.

The scheme is reverse-over-reverse on an expanded batch, with no vectorising loop: every point is repeated
``m n`` times, row ``(b, k, i)`` of the repeated batch takes the gradient of output ``k`` (one reverse sweep for
the whole batch, each row's own), keeps its entry ``i``, and a second reverse sweep differentiates that once more,
giving row ``(b, k, i)`` of the Hessian ``H[b, k, i, :]``. Cost ~ ``m n`` forward and ``2 m n`` reverse sweeps
per point (a point's Hessian is one batched call); the model must treat the rows of a batch independently.

The earlier reverse-over-forward scheme (one ``ForwardAccumulator`` pass for the Jacobian, then
``GradientTape.batch_jacobian``) did the same arithmetic, but ``batch_jacobian`` vectorises its ``m n``
reverse sweeps with ``pfor``, whose trace took 3.9-7 s on the demo surrogate for the Hessian at one
point (the propagate stage's single ``second_order`` call); the plain two-tape graph (693 ops) traces and
runs its first call in about 1 s on the same loaded 2-core machine.

Forward-over-forward (nested ``ForwardAccumulator`` s, cost ~ ``n (n + 1) / 2`` independent of ``m``)
was tried and rejected: in TF 2.21 it crashes in graph mode on models that read ``tf.shape`` of an
input with an unknown batch size (e.g. a Keras ``Reshape``), and it is reported to return wrong second
derivatives through chained products (tensorflow/tensorflow#127753).

References
----------
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM, ch. 13,
doi:10.1137/1.9780898717761 (second-order adjoints).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.chunks import ChunkedFunction, checked_points
from sensitivity.engine.ensemble import CompiledEnsemble, stacked_model
from sensitivity.engine.jacobian import CompiledJacobian
from sensitivity.errors import ConfigError, ModelError
from sensitivity.settings import DTYPES, HESSIAN_MAX_ROWS


@dataclass
class CompiledHessian:
    """Hessians of a model's flattened outputs, compiled once; build with :func:`compile_hessian`.

    Calling it on ``points [K, n_in]`` returns ``[K, m, n_in, n_in]`` float64 numpy
    (d^2 output / d parameter_i d parameter_j, in the model's physical units), evaluated in chunks of
    ``chunk_size`` points by the engines' chunking core (:class:`~sensitivity.engine.chunks.ChunkedFunction`,
    without XLA).
    """

    n_in: int
    output_size: int
    dtype: str
    chunk_size: int
    _chunks: ChunkedFunction = field(repr=False)
    _traces: list[int] = field(repr=False)

    @property
    def function(self) -> Callable[[tf.Tensor], tf.Tensor]:
        """The traced function of one chunk, ``x [B, n_in] -> [B, m, n_in, n_in]`` in ``dtype``, for use
        inside another TensorFlow graph (e.g. an exported module)."""
        plain = self._chunks.plain
        return lambda x: plain(x)[0]

    @property
    def trace_count(self) -> int:
        """How many times the Hessian function has been traced (1 after first use, whatever K)."""
        return self._traces[0]

    def __call__(self, points: np.ndarray) -> np.ndarray:
        x = checked_points(points, self.dtype, self.n_in)
        out = np.empty((len(x), self.output_size, self.n_in, self.n_in))
        return self._chunks.evaluate(x, self.chunk_size, lambda rows: [(rows, *out.shape[1:])], [out])[0]


def compile_hessian(
    fn: Callable[[tf.Tensor], tf.Tensor],
    n_in: int,
    *,
    output_size: int | None = None,
    dtype: str = "float32",
    max_rows: int = HESSIAN_MAX_ROWS,
) -> CompiledHessian:
    """Compile the Hessian of a TF-traceable ``fn: [B, n_in] -> [B, *out]``.

    Parameters
    ----------
    fn
        Differentiable model in physical units, e.g. ``Surrogate.fn``; the outputs are flattened to
        ``m = prod(out)`` per point.
    n_in
        Number of inputs.
    output_size
        ``m``; read from the traced output shape when omitted.
    dtype
        Compute dtype of the points (``"float32"`` or ``"float64"``); the result is float64.
    max_rows
        Bound on the working memory: rows of the expanded batch per compiled call (``m n`` per point,
        each through one forward and two reverse sweeps). The chunk is ``max_rows // (n (m + 1))``
        points, at least 1.

    Returns
    -------
    CompiledHessian
    """
    if not isinstance(n_in, int) or n_in < 1:
        raise ConfigError(f"`n_in` must be a positive integer, got {n_in!r}")
    if dtype not in DTYPES:
        raise ConfigError(f"`dtype` must be one of {DTYPES}, got {dtype!r}")
    if not isinstance(max_rows, int) or max_rows < 1:
        raise ConfigError(f"`max_rows` must be a positive integer, got {max_rows!r}")
    signature = [tf.TensorSpec([None, n_in], dtype)]
    m = _traced_output_size(fn, signature) if output_size is None else output_size
    if not isinstance(m, int) or m < 1:
        raise ConfigError(f"`output_size` must be a positive integer, got {m!r}")
    traces = [0]

    def hessian(x: tf.Tensor) -> tuple[tf.Tensor]:
        traces[0] += 1
        batch = tf.shape(x)[0]
        rows = tf.repeat(x, m * n_in, axis=0)  # [B * m * n, n]: point-major, then output k, then entry i
        picks = tf.tile(tf.repeat(tf.eye(m, dtype=x.dtype), n_in, axis=0), [batch, 1])  # e_k on row (b, k, i)
        entries = tf.tile(tf.eye(n_in, dtype=x.dtype), [batch * m, 1])  # e_i on row (b, k, i)
        with tf.GradientTape() as outer:
            outer.watch(rows)
            with tf.GradientTape() as inner:
                inner.watch(rows)
                picked = tf.reduce_sum(tf.reshape(fn(rows), [-1, m]) * picks, axis=1)  # y_k on row (b, k, i)
            gradient = inner.gradient(picked, rows, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            first = tf.reduce_sum(gradient * entries, axis=1)  # d y_k / d x_i
        second = outer.gradient(first, rows, unconnected_gradients=tf.UnconnectedGradients.ZERO)  # a linear model: 0
        return (tf.reshape(second, [batch, m, n_in, n_in]),)  # d^2 y_k / d x_i d x_j

    chunk = max(1, max_rows // (n_in * (m + 1)))
    return CompiledHessian(n_in, m, dtype, chunk, ChunkedFunction(hessian, n_in, dtype, False, True, "hessian"), traces)


def hessian_of(engine: CompiledJacobian | CompiledEnsemble, *, max_rows: int = HESSIAN_MAX_ROWS) -> CompiledHessian:
    """The compiled Hessian of what a compiled engine evaluates, in its dtype: one model's flattened outputs
    ``[m]`` (an ensemble surrogate's: its members' mean), or an ensemble engine's members side by side,
    member-major ``[K m]`` as :meth:`~sensitivity.engine.ensemble.CompiledEnsemble.stacked_values` returns them
    (:func:`~sensitivity.engine.ensemble.stacked_model`).

    Parameters
    ----------
    engine
        A :func:`~sensitivity.engine.jacobian.compile_jacobian` or
        :func:`~sensitivity.engine.ensemble.compile_ensemble` engine.
    max_rows
        The working memory of :func:`compile_hessian` [rows of its expanded batch].
    """
    s = engine.surrogate
    if isinstance(engine, CompiledEnsemble):
        return compile_hessian(stacked_model(s), s.n_in, output_size=engine.members * s.output_size,
                               dtype=engine.dtype, max_rows=max_rows)
    return compile_hessian(s.fn, s.n_in, output_size=s.output_size, dtype=engine.dtype, max_rows=max_rows)


def _traced_output_size(fn: Callable[[tf.Tensor], tf.Tensor], signature: list[tf.TensorSpec]) -> int:
    """Number of outputs per point, from the static shape of ``fn`` traced on the signature."""
    shape = tf.function(fn).get_concrete_function(*signature).structured_outputs.shape
    if shape.rank is None or shape.rank < 1 or not shape[1:].is_fully_defined():
        raise ModelError(f"the output shape of `fn` is not static ({shape}); pass `output_size`")
    return int(np.prod(shape[1:], dtype=int))
