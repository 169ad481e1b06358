"""Compiled Hessians of a TF-traceable model, for second-order propagation.

:func:`compile_hessian` builds one ``tf.function`` with the fixed input signature ``[None, n_in]`` that
returns the Hessian of every flattened output at a batch of points, so calls with any number of points
never retrace. The scheme is reverse-over-forward and fully vectorised: every point is repeated ``n``
times with one-hot tangents, one ``ForwardAccumulator`` pass gives the Jacobian ``[B, m, n]``, and
``GradientTape.batch_jacobian`` differentiates it once more. Cost ~ ``n`` forward plus ``m n``
reverse sweeps per point; the model must treat the rows of a batch independently.

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

from sensitivity.errors import ConfigError, ModelError
from sensitivity.settings import DTYPES, HESSIAN_MAX_ROWS


@dataclass
class CompiledHessian:
    """Hessians of a model's flattened outputs, compiled once; build with :func:`compile_hessian`.

    Calling it on ``points [K, n_in]`` returns ``[K, m, n_in, n_in]`` float64 numpy
    (d^2 output / d parameter_i d parameter_j, in the model's physical units), evaluated in chunks of
    ``chunk_size`` points.
    """

    n_in: int
    output_size: int
    dtype: str
    chunk_size: int
    _fn: Callable[[tf.Tensor], tf.Tensor] = field(repr=False)
    _traces: list[int] = field(repr=False)

    @property
    def function(self) -> Callable[[tf.Tensor], tf.Tensor]:
        """The traced function of one chunk, ``x [B, n_in] -> [B, m, n_in, n_in]`` in ``dtype``, for use
        inside another TensorFlow graph (e.g. an exported module)."""
        return self._fn

    @property
    def trace_count(self) -> int:
        """How many times the Hessian function has been traced (1 after first use, whatever K)."""
        return self._traces[0]

    def __call__(self, points: np.ndarray) -> np.ndarray:
        x = np.asarray(points, dtype=self.dtype)
        if x.ndim != 2 or x.shape[1] != self.n_in:
            raise ConfigError(f"points must have shape [K, {self.n_in}], got {list(np.shape(points))}")
        out = np.empty((len(x), self.output_size, self.n_in, self.n_in))
        for start in range(0, len(x), self.chunk_size):
            chunk = x[start : start + self.chunk_size]
            out[start : start + len(chunk)] = self._fn(tf.constant(chunk)).numpy()
        return out


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
        Bound on the working memory: rows of the expanded batch per compiled call, counting ``n``
        forward copies and ``m n`` reverse copies per point. The chunk is
        ``max_rows // (n (m + 1))`` points, at least 1.

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

    def hessian(x: tf.Tensor) -> tf.Tensor:
        traces[0] += 1
        batch = tf.shape(x)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            x_rep = tf.repeat(x, n_in, axis=0)  # [B * n, n], point-major
            with tf.autodiff.ForwardAccumulator(x_rep, tf.tile(tf.eye(n_in, dtype=x.dtype), [batch, 1])) as acc:
                y = tf.reshape(fn(x_rep), [-1, m])
            jac_t = tf.reshape(acc.jvp(y), [batch, n_in, m])  # d y_k / d x_i at [b, i, k]
            jac = tf.reshape(tf.transpose(jac_t, [0, 2, 1]), [batch, m * n_in])
        return tf.reshape(tape.batch_jacobian(jac, x), [batch, m, n_in, n_in])

    chunk = max(1, max_rows // (n_in * (m + 1)))
    return CompiledHessian(n_in, m, dtype, chunk, tf.function(hessian, input_signature=signature), traces)


def _traced_output_size(fn: Callable[[tf.Tensor], tf.Tensor], signature: list[tf.TensorSpec]) -> int:
    """Number of outputs per point, from the static shape of ``fn`` traced on the signature."""
    shape = tf.function(fn).get_concrete_function(*signature).structured_outputs.shape
    if shape.rank is None or shape.rank < 1 or not shape[1:].is_fully_defined():
        raise ModelError(f"the output shape of `fn` is not static ({shape}); pass `output_size`")
    return int(np.prod(shape[1:], dtype=int))
