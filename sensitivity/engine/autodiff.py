"""The engine's autodiff path: values and Jacobians of any TF-traceable model, all tangents (or cotangents) at once.

Forward mode pushes all ``n_in`` unit tangents through the model at once (``ForwardAccumulator`` inside
``vectorized_map``); reverse mode pulls all ``n_out`` cotangents back at once (``GradientTape.batch_jacobian``). The
cost of each is proportional to the number of tangents. A model whose tangents TensorFlow cannot carry forward (a
``tf.scan`` or ``tf.while_loop`` over time steps: its TensorList state has no forward-mode rule; a ``tf.cond`` of
tangents inside ``vectorized_map``) gets forward mode by double reverse: each column ``J e_i`` as the gradient, with
respect to the cotangent ``u``, of the reverse pass ``u^T J`` (Townsend 2017), about three passes per input instead
of one reverse pass per output; :mod:`sensitivity.engine.modes` decides which form a model gets.

References
----------
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM,
doi:10.1137/1.9780898717761 (forward vs reverse cost).
Townsend, J. (2017), A new trick for calculating Jacobian vector products,
https://j-towns.github.io/2017/06/12/A-new-trick.html (forward mode by double reverse).
"""
from __future__ import annotations

from typing import Callable

import tensorflow as tf

from sensitivity.errors import ConfigError

#: How the autodiff path's forward mode runs: ``ForwardAccumulator`` in ``vectorized_map``, or by double reverse.
FORWARD_FORMS = ("vectorized", "double reverse")


def autodiff_functions(fn: Callable[[tf.Tensor], tf.Tensor], n_in: int, n_out: int, mode: str,
                       forward_form: str = "vectorized") -> tuple[Callable, Callable]:
    """The untraced values and values-and-Jacobian functions of a model ``fn: x [B, n_in] -> y [B, ...]``.

    Parameters
    ----------
    fn
        The model; its outputs have ``n_out`` numbers per point.
    n_in, n_out
        Inputs and outputs per point.
    mode
        ``"forward"`` or ``"reverse"``.
    forward_form
        One of :data:`FORWARD_FORMS` (forward mode only).

    Returns
    -------
    ``(values, value_and_jacobian)``: ``x -> y [B, n_out]`` and ``x -> (y [B, n_out], dy/dx [B, n_out, n_in])``.
    """
    if mode not in ("forward", "reverse"):
        raise ConfigError(f"`mode` must be 'forward' or 'reverse' here, got {mode!r}")
    if forward_form not in FORWARD_FORMS:
        raise ConfigError(f"`forward_form` must be one of {FORWARD_FORMS}, got {forward_form!r}")

    def flat_values(x: tf.Tensor) -> tf.Tensor:
        return tf.reshape(fn(x), [-1, n_out])

    def forward(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        def directional(tangent: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            with tf.autodiff.ForwardAccumulator(x, tf.broadcast_to(tangent, tf.shape(x))) as acc:
                y = flat_values(x)
            return y, acc.jvp(y)

        ys, jvps = tf.vectorized_map(directional, tf.eye(n_in, dtype=x.dtype))  # [n_in, B, n_out] each
        return ys[0], tf.transpose(jvps, [1, 2, 0])

    def forward_by_double_reverse(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # copy i of each point carries the unit tangent e_i; the reverse pass u -> u^T J is linear in the
        # cotangent u, so its gradient with respect to u along e_i is J e_i (the value of u does not matter)
        batch = tf.shape(x)[0]
        copies = tf.repeat(x, n_in, axis=0)  # [B n_in, n_in]
        zero = tf.UnconnectedGradients.ZERO
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                inner.watch(copies)
                ys = flat_values(copies)
            cotangents = tf.zeros_like(ys)
            outer.watch(cotangents)
            pulled = inner.gradient(ys, copies, output_gradients=cotangents, unconnected_gradients=zero)
        tangents = tf.tile(tf.eye(n_in, dtype=x.dtype), [batch, 1])
        jvps = outer.gradient(pulled, cotangents, output_gradients=tangents, unconnected_gradients=zero)
        return ys[::n_in], tf.transpose(tf.reshape(jvps, [batch, n_in, n_out]), [0, 2, 1])

    def reverse(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = flat_values(x)
        return y, tape.batch_jacobian(y, x)

    if mode == "reverse":
        return flat_values, reverse
    return flat_values, (forward if forward_form == "vectorized" else forward_by_double_reverse)
