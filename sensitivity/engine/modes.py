"""How an engine differentiates: the mode (forward or reverse) and the form of forward mode, for one model and an
ensemble alike.

``mode="auto"`` picks forward when ``n_in <= n_out`` (:func:`resolve_mode`: the cost of each mode is proportional to
its number of tangents, Griewank & Walther 2008). On the autodiff path, :func:`choose_form` traces forward mode's
vectorised form once; where TensorFlow cannot build it (a ``tf.scan``, a ``tf.cond`` of tangents) it takes forward
mode by double reverse (:mod:`sensitivity.engine.autodiff`), checked at probe points against one plain reverse pass
(:func:`reverse_disagreement`), and where even that fails, reverse mode ("auto") or a one-line error ("forward").
Each choice is said once in the log.

References
----------
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM, doi:10.1137/1.9780898717761.
Townsend, J. (2017), A new trick for calculating Jacobian vector products,
https://j-towns.github.io/2017/06/12/A-new-trick.html.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.chunks import ChunkedFunction, PolymorphicFunction, checked_points
from sensitivity.errors import ConfigError, ModelError
from sensitivity.settings import MODES, Mode

log = logging.getLogger(__name__)

#: What TensorFlow raises when it cannot build a model's derivative (a missing gradient, a forward-mode rule or a
#: vectorisation it lacks); running one adds ``tf.errors.OpError``.
BUILD_ERRORS = (ValueError, TypeError, NotImplementedError, LookupError)


@dataclass(frozen=True)
class Differentiation:
    """What :func:`choose_form` chose: ``mode``, ``forward_form`` and the compiled values-and-Jacobian function."""

    mode: str
    forward_form: str
    jacobian: ChunkedFunction


def resolve_mode(mode: Mode, n_in: int, n_out: int) -> str:
    """``"forward"`` or ``"reverse"``: ``mode`` itself, or for ``"auto"`` forward when ``n_in <= n_out``."""
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}, got {mode!r}")
    return ("forward" if n_in <= n_out else "reverse") if mode == "auto" else mode


def choose_form(build: Callable[[str, str], ChunkedFunction], values: Callable[[tf.Tensor], tf.Tensor],
                requested: Mode, resolved: str, *, autodiff: bool, n_in: int, dtype: str, source: str,
                probe_points: np.ndarray | None = None, point_axis: int = 0) -> Differentiation:
    """The mode, the form of forward mode and the compiled Jacobian function of an engine.

    Parameters
    ----------
    build
        ``build(mode, forward_form)``: the engine's compiled values-and-Jacobian function in that mode and form.
    values
        The engine's values function (untraced; what the probe check differentiates by one reverse pass).
    requested, resolved
        The mode asked for and the one :func:`resolve_mode` made of it.
    autodiff
        Does any of the engine's functions take the autodiff path (the only one whose forward mode can fail)?
    n_in, dtype, source
        Inputs per point, compute dtype, and the model's name for the log.
    probe_points
        ``[k, n_in]`` points inside the model's domain for the double-reverse check; default: two points drawn
        uniformly from [0.5, 2] in every input.
    point_axis
        The axis of the points in the engine's results.

    Raises
    ------
    ModelError
        ``requested`` is ``"forward"`` and neither form of forward mode can differentiate the model.
    """
    jacobian = build(resolved, "vectorized")
    failure = trace_failure(jacobian.plain) if autodiff and resolved == "forward" else None
    if failure is None:
        return Differentiation(resolved, "vectorized", jacobian)
    jacobian = build(resolved, "double reverse")
    second = trace_failure(jacobian.plain) or reverse_disagreement(values, jacobian.plain, n_in, dtype, source,
                                                                   probe_points, point_axis)
    if second is None:
        log.warning("%s: forward mode cannot carry the model's tangents (%s); forward mode by double reverse "
                    "instead (each column J e_i as the gradient of a reverse pass: ~3 passes per input)",
                    source, failure)
        return Differentiation("forward", "double reverse", jacobian)
    if requested == "forward":
        raise ModelError(f"{source}: forward mode cannot carry the model's tangents ({failure}), nor "
                         f"differentiate its reverse pass ({second}); set jacobian.mode=reverse, or write a "
                         "branch on a tensor as tf.where")
    log.warning("%s: forward mode cannot carry the model's tangents (%s), nor differentiate its reverse pass "
                "(%s); reverse mode instead", source, failure, second)
    return Differentiation("reverse", "vectorized", build("reverse", "vectorized"))


def trace_failure(jacobian_fn: PolymorphicFunction) -> str | None:
    """Trace a forward-mode Jacobian function now (the trace its first call would make); the last line of the error
    when TensorFlow cannot build it, else None: ``tf.vectorized_map`` cannot take the model's tangents (a ``tf.cond``
    of ``ForwardAccumulator`` tangents: "Required handle data not set"), or ``ForwardAccumulator`` cannot carry them
    (a ``tf.scan``: "`dtype` variant is not compatible"). TensorFlow's own log of the failed op (a 200-line ERROR of
    its node definition) is held back: the engine reports the failure in one line."""
    tf_log = logging.getLogger("tensorflow")
    level = tf_log.level
    tf_log.setLevel(logging.CRITICAL)
    try:
        jacobian_fn.get_concrete_function()
    except BUILD_ERRORS as err:
        return message(err)
    finally:
        tf_log.setLevel(level)
    return None


def reverse_disagreement(values: Callable[[tf.Tensor], tf.Tensor], jacobian_fn: PolymorphicFunction, n_in: int,
                         dtype: str, source: str, probe_points: np.ndarray | None = None,
                         point_axis: int = 0) -> str | None:
    """Run a double-reverse Jacobian function at ``probe_points`` (see :func:`choose_form`) and check it against
    one plain reverse pass of ``values``: ``w^T J`` for a random cotangent ``w`` must be the gradient of ``w^T y``.
    None when they agree; else what went wrong: an op of the reverse pass that fails when it runs (a
    ``tf.numpy_function``), or a gradient that is not linear in its cotangent (a custom gradient that stops it),
    which would give wrong columns silently. Where the model is not finite at any probe point the check cannot be
    made, and a warning says so."""
    rng = np.random.default_rng(12345)
    probe = rng.uniform(0.5, 2.0, (2, n_in)) if probe_points is None else np.atleast_2d(probe_points)
    x = tf.constant(checked_points(probe, dtype, n_in))
    try:
        w = tf.constant(rng.standard_normal(values(x).shape), dtype)

        @tf.function
        def pulled(x: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = values(x)
            return tape.gradient(y, x, output_gradients=w, unconnected_gradients=tf.UnconnectedGradients.ZERO)

        jacobian = jacobian_fn(x)[1].numpy()
        expected = pulled(x).numpy()
    except (*BUILD_ERRORS, tf.errors.OpError) as err:
        return message(err)
    weighted = w.numpy()[..., None] * jacobian
    got = weighted.sum(axis=tuple(a for a in range(weighted.ndim - 1) if a != point_axis))
    if not np.isfinite(expected).any():
        log.warning("%s: forward mode by double reverse could not be checked against a reverse pass: the model is "
                    "not finite at the probe points%s", source,
                    "" if probe_points is not None else " (pass probe_points inside its domain)")
        return None
    rtol = 1e-4 if dtype == "float32" else 1e-9
    if not np.allclose(got, expected, rtol=rtol, atol=rtol * np.nanmax(np.abs(expected), initial=0.0),
                       equal_nan=True):
        return ("its columns disagree with a reverse pass at probe points (a gradient not linear in its "
                "cotangent, e.g. a custom gradient that stops it)")
    return None


def message(err: Exception) -> str:
    """TensorFlow's error in one line: its last line that is not a node name (``[[{{node ...}}]]``, ``[Op:...]``),
    cut to 160 characters."""
    text = re.sub(r"\s*(\[\[.*?\]\]|\[Op:[^\]]*\])", "", str(getattr(err, "message", err)))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else type(err).__name__)[:160]
