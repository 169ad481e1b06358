"""The engine's fast path for chains of dense layers and elementwise maps (Keras MLPs).

A multilayer perceptron with input/output scaling is a chain ``x -> e_0 -> A_1 -> e_1 -> ... -> A_L -> e_L``
of affine maps ``A_k(h) = h W_k + b_k`` and elementwise maps ``e_k`` (activations, :mod:`sensitivity.scaling`
layers). Its Jacobian is the matrix chain

    J(x) = D_L W_L^T D_{L-1} ... W_1^T D_0,     D_k = diag(e_k'(z_k)),

so forward mode carries the ``n_in`` tangents of every point as one ``[B n_in, h]`` block through each
``W_k`` (one large matmul per layer, no per-tangent bookkeeping), and reverse mode carries the ``n_out``
cotangents through ``W_k^T`` the same way. The first product of the chain needs no matmul (``D W`` is a
broadcast), and reverse mode ends in the ``[B, n_out, n_in]`` layout the engine returns, with no transpose.
The elementwise derivatives ``e_k'`` come from autodiff of each map (one cheap ``[B, h]`` gradient), so
any elementwise activation works and the scaling stays inside, in physical units.

Detection is structural and then verified: :func:`dense_chain` accepts a Keras model whose layers are
only ``InputLayer``, ``Dense``, ``Activation`` and the scaling layers, applied in sequence; the chain's
values must reproduce the surrogate's own on probe points, or the engine keeps its generic path.

References
----------
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM, ch. 9 (Jacobian accumulation by
matrix chains), doi:10.1137/1.9780898717761.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tensorflow as tf

#: Keras layers the fast path understands: affine ones, elementwise ones, and no-ops.
_ELEMENTWISE = ("Activation", "InputScaling", "OutputScaling")
_NO_OP = ("InputLayer", "Dropout")


@dataclass(frozen=True)
class DenseChain:
    """A model as alternating affine and elementwise steps.

    Attributes
    ----------
    steps
        ``("affine", (W [k, h], b [h] | None, W^T))`` or ``("elementwise", f)`` in application order, where
        ``f`` maps a ``[B, h]`` tensor elementwise. At least one affine step. ``W^T`` is stored, not traced:
        XLA would constant-fold the transpose at every compilation, seconds for a 256 x 256 kernel.
    """

    steps: tuple[tuple[str, Any], ...]

    def widths(self, n_in: int) -> list[int]:
        """Numbers per point after each step, input first."""
        return [n_in] + [step[0].shape[-1] for kind, step in self.steps if kind == "affine"]

    def values(self, x: tf.Tensor) -> tf.Tensor:
        """The chain's outputs ``[B, n_out]``."""
        for kind, step in self.steps:
            x = _affine(x, step) if kind == "affine" else step(x)
        return x

    def forward(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[B, n_out]`` and Jacobian ``[B, n_out, n_in]``, the ``n_in`` tangents carried together."""
        h, scale, tangents = x, None, None  # tangents [B, n_in, width], or None while the map so far is diagonal
        n_in = x.shape[-1]
        for kind, step in self.steps:
            if kind == "affine":
                kernel = step[0]
                if tangents is None:  # diag(scale) W: a broadcast, no matmul
                    tangents = kernel[None] if scale is None else scale[:, :, None] * kernel[None]
                else:
                    tangents = _right_matmul(tangents, kernel)
                h = _affine(h, step)
            else:
                h, slope = _with_slope(step, h)
                if tangents is None:
                    scale = slope if scale is None else scale * slope
                else:
                    tangents = tangents * slope[:, None, :]
        batch = tf.shape(x)[0]
        tangents = tf.broadcast_to(tangents, [batch, n_in, h.shape[-1]])
        return h, tf.transpose(tangents, [0, 2, 1])

    def reverse(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Values ``[B, n_out]`` and Jacobian ``[B, n_out, n_in]``, the ``n_out`` cotangents carried together."""
        h, slopes = x, []
        for kind, step in self.steps:  # primal pass, keeping every elementwise slope
            if kind == "affine":
                h = _affine(h, step)
                slopes.append(None)
            else:
                h, slope = _with_slope(step, h)
                slopes.append(slope)
        scale, cotangents = None, None  # cotangents [B, n_out, width], or None while the map so far is diagonal
        for (kind, step), slope in zip(reversed(self.steps), reversed(slopes)):
            if kind == "affine":
                kernel_t = step[2]
                if cotangents is None:
                    cotangents = kernel_t[None] if scale is None else scale[:, :, None] * kernel_t[None]
                else:
                    cotangents = _right_matmul(cotangents, kernel_t)
            elif cotangents is None:
                scale = slope if scale is None else scale * slope
            else:
                cotangents = cotangents * slope[:, None, :]
        return h, tf.broadcast_to(cotangents, [tf.shape(x)[0], h.shape[-1], x.shape[-1]])


def dense_chain(fn: Callable[[tf.Tensor], tf.Tensor], n_in: int, dtype: str) -> DenseChain | None:
    """The :class:`DenseChain` of ``fn`` when it is a verified Keras MLP, else ``None``.

    ``fn`` qualifies when it is a Keras model, or a function referring to exactly one (closure or global
    name), whose layers are all
    dense, elementwise or no-ops, and when the chain reproduces ``fn`` on random probe points to within a few
    hundred ulps of the output scale (so a wrapper that does more than call the model is caught).
    """
    model = _keras_model(fn)
    if model is None:
        return None
    steps = []
    for layer in model.layers:
        name = type(layer).__name__
        if name in _NO_OP:
            continue
        if name == "Dense":
            kernel = np.asarray(layer.kernel)
            bias = tf.constant(np.asarray(layer.bias), dtype) if layer.use_bias else None
            steps.append(("affine", (tf.constant(kernel, dtype), bias, tf.constant(kernel.T.copy(), dtype))))
            if layer.activation is not None and layer.activation.__name__ != "linear":
                steps.append(("elementwise", functools.partial(_call_activation, layer.activation)))
        elif name in _ELEMENTWISE:
            steps.append(("elementwise", layer))
        else:
            return None
    if not any(kind == "affine" for kind, _ in steps):
        return None
    chain = DenseChain(tuple(steps))
    return chain if _reproduces(chain, fn, n_in, dtype) else None


def _keras_model(fn: Any) -> Any:
    import keras

    if isinstance(fn, keras.Model):
        return fn
    referenced = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _filled(c)]
    code, scope = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    referenced += [scope[name] for name in (code.co_names if code else ()) if name in scope]
    models = {id(c): c for c in referenced if isinstance(c, keras.Model)}
    return next(iter(models.values())) if len(models) == 1 else None


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty closure cell
        return False
    return True


def _reproduces(chain: DenseChain, fn: Callable, n_in: int, dtype: str) -> bool:
    """Do the chain's values match ``fn``'s on 64 probe points (in-domain for log-scaled inputs)?"""
    probe = tf.constant(np.random.default_rng(12345).uniform(0.5, 2.0, (64, n_in)), dtype)
    try:
        expected = tf.reshape(fn(probe), [64, -1]).numpy()
        got = chain.values(probe).numpy()
    except Exception:  # any shape or type failure: not the chain we assumed
        return False
    if got.shape != expected.shape or not np.all(np.isfinite(expected)):
        return False
    tolerance = 256 * np.finfo(dtype).eps * max(1.0, float(np.max(np.abs(expected))))
    return bool(np.max(np.abs(got - expected)) <= tolerance)


def _call_activation(activation: Callable, x: tf.Tensor) -> tf.Tensor:
    return activation(x)


def _affine(h: tf.Tensor, step: tuple[tf.Tensor, tf.Tensor | None, tf.Tensor]) -> tf.Tensor:
    kernel, bias, _ = step
    z = tf.matmul(h, kernel)
    return z if bias is None else tf.nn.bias_add(z, bias)


def _right_matmul(stack: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
    """``[B, t, k] @ [k, h] -> [B, t, h]`` as one 2-D matmul (a batched one would broadcast the kernel)."""
    shape = tf.shape(stack)
    flat = tf.matmul(tf.reshape(stack, [-1, stack.shape[-1]]), kernel)
    return tf.reshape(flat, [shape[0], stack.shape[1], kernel.shape[-1]])


def _with_slope(f: Callable[[tf.Tensor], tf.Tensor], z: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``f(z)`` and its elementwise derivative ``f'(z)`` (the gradient of ``sum f(z)``, exact for elementwise f)."""
    with tf.GradientTape() as tape:
        tape.watch(z)
        y = f(z)
    return y, tape.gradient(y, z)
