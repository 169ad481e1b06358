"""The compiled Jacobian engine.

:func:`compile_jacobian` builds, once per surrogate, a ``tf.function`` with a
fixed input signature ``[None, n_in]`` that returns the values and the Jacobian
of a whole batch of points, and feeds it chunks of ``chunk_size`` points so it
never retraces. With XLA, only full chunks go through the XLA-compiled function
(one shape, compiled once); a shorter chunk (the last one, or a small call) goes
through the same function without XLA, so small problems never pay seconds of
compilation before their first result.

Two paths compute the same numbers. A Keras MLP (dense, activation and scaling
layers, detected and verified by :mod:`sensitivity.engine.dense_path`) takes the dense
path: the tangents (or cotangents) of a chunk travel as one block through each
weight matrix, one large matmul per layer; in forward mode a chain with
convolutions and reshaping layers too, each applied to the folded tangent block;
in reverse mode a chain with convolutions, pooling and reshaping layers
(:mod:`sensitivity.engine.reverse_path`), each layer's transpose applied to the block of
cotangents. The engine records which path it took and why (``path``,
``path_reason``, and a log line). Anything else takes the autodiff path:
forward mode pushes all ``n_in`` unit tangents through the model at once
(``ForwardAccumulator`` inside ``vectorized_map``); reverse mode pulls all
``n_out`` cotangents back at once (``GradientTape.batch_jacobian``). The cost of
each is proportional to the number of tangents, so ``mode="auto"`` picks forward
when ``n_in <= n_out``. A model whose tangents TensorFlow cannot carry forward (a
``tf.scan`` or ``tf.while_loop`` over time steps: its TensorList state has no
forward-mode rule) gets forward mode by double reverse: each column ``J e_i`` as
the gradient, with respect to the cotangent ``u``, of the reverse pass
``u^T J`` (Townsend 2017), about three passes per input instead of one reverse
pass per output. The chunk size follows from a memory budget and the
model's per-point activation size measured on its traced graph, so memory stays
bounded whatever the number of points.

References
----------
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM,
doi:10.1137/1.9780898717761 (forward vs reverse cost).
Townsend, J. (2017), A new trick for calculating Jacobian vector products,
https://j-towns.github.io/2017/06/12/A-new-trick.html (forward mode by double reverse).
"""
from __future__ import annotations

import logging
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf

from sensitivity.engine.dense_path import DenseChain, chain_of, layer_steps
from sensitivity.errors import ConfigError, ModelError
from sensitivity.engine.reverse_path import ConvChain, conv_chain
from sensitivity.settings import DTYPES, MODES, PATHS, EngineSettings, Mode, PathChoice, check_memory_budget
from sensitivity.surrogates.load import Surrogate

log = logging.getLogger(__name__)

#: Bounds on the automatic chunk size [points]: below the lower one, call overhead dominates;
#: above the upper one, throughput no longer improves on CPU (measured in benchmarks/bench_chunk_size.py).
MIN_CHUNK, MAX_CHUNK = 64, 8192
#: Bytes of the widest tangent block of one dense-path chunk (see :func:`dense_chunk_size`): with XLA, chunks
#: of 512 points on shape A (4.5 MiB blocks), 512-2048 on C (2.5-10 MiB) and 64-128 on B (4-8 MiB) were the
#: fastest of 64-8192 in one ``benchmarks/bench_jacobian.py --chunks --rounds 7`` run (XLA at those chunks
#: 1.1-1.2x the plain TF ops on A and C, level on B); 8 MiB rounded down to a power of two picks 512, 1024 and
#: 64. Re-tune with that sweep.
DENSE_BLOCK_BYTES = 8 * 2**20
#: The same for a chain with convolutions (no cache to stay in; larger batches feed the convolution kernels
#: better): on the conv surrogate of ``benchmarks/bench_jacobian.py --chunks --shapes conv --rounds 3``,
#: chunks of 256 points (20 MiB blocks) were the fastest of 64-1024, XLA or not; 32 MiB picks 256.
CONV_BLOCK_BYTES = 32 * 2**20
#: How the autodiff path's forward mode runs (see :attr:`CompiledJacobian.forward_form`).
FORWARD_FORMS = ("vectorized", "double reverse")
#: What TensorFlow raises when it cannot build a model's derivative (a missing gradient, a forward-mode rule or a
#: vectorisation it lacks); running one adds ``tf.errors.OpError``.
_BUILD_ERRORS = (ValueError, TypeError, NotImplementedError, LookupError)


@dataclass
class CompiledJacobian:
    """Values and Jacobians of a surrogate, compiled once and evaluated in fixed-size chunks.

    Build with :func:`compile_jacobian`. Calling it on ``[N, n_in]`` points returns numpy arrays
    ``values [N, *out]`` and ``jacobian [N, *out, n_in]`` in physical units (d output / d parameter).
    ``path`` is ``"dense"`` or ``"autodiff"``; ``path_reason`` says why, and on the dense path through
    which layers (in reverse mode through a conv chain: each layer's transpose, in the cotangents' order).
    ``forward_form`` is how the autodiff path's forward mode runs: ``"vectorized"`` (``ForwardAccumulator``
    in ``vectorized_map``) or ``"double reverse"`` (see the module docstring).
    """

    surrogate: Surrogate
    mode: str
    path: str
    jit_compile: bool
    dtype: str
    chunk_size: int
    activation_size: int
    _jacobian_fn: dict[bool, tf.types.experimental.PolymorphicFunction] = field(repr=False)
    _value_fn: dict[bool, tf.types.experimental.PolymorphicFunction] = field(repr=False)
    _traces: dict[str, int] = field(repr=False)
    _concretes: dict = field(default_factory=dict, repr=False)
    path_reason: str = ""
    forward_form: str = "vectorized"

    @property
    def settings(self) -> str:
        """The engine's settings as the datasets' ``engine`` attribute records them."""
        return settings_text(self)

    @property
    def trace_count(self) -> int:
        """How many times the Jacobian function has been traced, whatever N: once (without XLA), or once
        for full chunks with XLA and once for shorter ones without."""
        return self._traces["jacobian"]

    @property
    def value_trace_count(self) -> int:
        """How many times the values-only function has been traced."""
        return self._traces["value"]

    def __call__(self, points: np.ndarray, out: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Values and Jacobians at ``points [N, n_in]``: ``([N, *out], [N, *out, n_in])``.

        ``out``: the caller's arrays of those shapes (any dtype, byte order or strides, e.g. the fields of
        a record buffer), filled chunk by chunk and returned: each chunk's numbers go from TensorFlow's
        buffer straight into them, the only copy. Without it a call of one chunk returns that chunk's
        arrays, and a longer one fills new arrays the same way.
        """
        x = self._check(points)
        n, out_shape = x.shape[0], self.surrogate.output.shape
        shapes = ((n, *out_shape), (n, *out_shape, self.surrogate.n_in))
        if out is None:
            if n <= self.chunk_size:  # one chunk: its arrays are the result
                return tuple(self._run(self._jacobian_fn, x))
            out = (np.empty(shapes[0], self.dtype), np.empty(shapes[1], self.dtype))
        elif tuple(np.shape(a) for a in out) != shapes:
            raise ConfigError(f"`out` must be arrays of shapes {[list(s) for s in shapes]}, got "
                              f"{[list(np.shape(a)) for a in out]}")
        values, jacobian = out
        for start, chunk in _chunks(x, self.chunk_size):  # each chunk's buffers copied once, into the result
            stop = start + len(chunk)
            values[start:stop], jacobian[start:stop] = self._run(self._jacobian_fn, chunk, view=True)
        return values, jacobian

    def values(self, points: np.ndarray) -> np.ndarray:
        """Values only at ``points [N, n_in]``, compiled and chunked like the Jacobian: ``[N, *out]``."""
        x = self._check(points)
        if x.shape[0] <= self.chunk_size:
            return self._run(self._value_fn, x)[0]
        out = np.empty((x.shape[0], *self.surrogate.output.shape), self.dtype)
        for start, chunk in _chunks(x, self.chunk_size):
            out[start : start + len(chunk)] = self._run(self._value_fn, chunk, view=True)[0]
        return out

    def flat_value_and_jacobian(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`__call__` with the output dims flattened (C order, views): ``([N, n_out], [N, n_out, n_in])``."""
        values, jacobian = self(points)
        n = len(values)
        return values.reshape(n, -1), jacobian.reshape(n, -1, self.surrogate.n_in)

    def flat_values(self, points: np.ndarray) -> np.ndarray:
        """:meth:`values` with the output dims flattened (C order, a view): ``[N, n_out]``."""
        values = self.values(points)
        return values.reshape(len(values), -1)

    def iter_chunks(self, points: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Yield ``(start, values, jacobian)`` per chunk of ``points``; memory is one chunk's worth."""
        x = self._check(points)
        for start, chunk in _chunks(x, self.chunk_size):
            values, jacobian = self._run(self._jacobian_fn, chunk)
            yield start, values, jacobian

    def _run(self, fns: dict[bool, tf.types.experimental.PolymorphicFunction], chunk: np.ndarray,
             view: bool = False) -> list[np.ndarray]:
        """Evaluate one chunk and unflatten the outputs.

        ``fns[True]`` (XLA when ``jit_compile``) takes full chunks of ``chunk_size`` rows, the one shape XLA
        compiles; ``fns[False]`` (never XLA) takes any shorter chunk, unpadded, so a small call (a
        calibration step, a first-order propagation at one point) never waits seconds for an XLA
        compilation and no padded rows are computed. The outputs are writable copies of TF's buffers
        (``Tensor.numpy`` copies), or with ``view`` read-only views of them, for a caller that copies them
        into its own array anyway: one copy of the Jacobian instead of two (on shape C of
        ``benchmarks/bench_jacobian.py``, 8 chunks of 1024 points, the second copy cost ~7 % of the time).
        """
        rows = len(chunk)
        x, fn = tf.constant(chunk, dtype=self.dtype), fns[rows == self.chunk_size]
        first_xla = fn is not fns[False] and fn not in self._concretes
        results = self._first_xla_call(fns, x) if first_xla else self._concrete(fn)(x)
        out_shape, n_in = self.surrogate.output.shape, self.surrogate.n_in
        shapes = [(rows, *out_shape), (rows, *out_shape, n_in)]
        return [(np.asarray(r) if view else r.numpy()).reshape(s) for r, s in zip(results, shapes)]

    def _first_xla_call(self, fns: dict[bool, tf.types.experimental.PolymorphicFunction], x: tf.Tensor) -> Any:
        """The first full chunk through XLA. Where XLA cannot compile or run the model (a user's function with
        a Python ``if`` on a tensor, which AutoGraph makes a ``tf.cond``, fails under XLA with "Incompatible
        shapes"), a warning, and the plain function for this chunk and every later one: a sweep larger than one
        chunk does not fail at its first full chunk for what the plain function computes."""
        try:
            return self._concrete(fns[True])(x)
        except tf.errors.OpError as err:
            reason = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
            log.warning("%s: XLA failed on the first full chunk of %d points (%s); continuing without XLA "
                        "(jacobian.jit_compile=false skips the attempt)", self.surrogate.source, len(x), reason[:160])
            fns[True] = fns[False]
            return self._concrete(fns[False])(x)

    def _concrete(self, fn: tf.types.experimental.PolymorphicFunction) -> Callable:
        """The one concrete function of ``fn`` (fixed signature): calling it skips the argument binding
        of a ``tf.function`` call, about 0.3 ms per call on a 2-core CPU."""
        if fn not in self._concretes:
            self._concretes[fn] = fn.get_concrete_function()
        return self._concretes[fn]

    def _check(self, points: np.ndarray) -> np.ndarray:
        return checked_points(points, self.dtype, self.surrogate.n_in)


def settings_text(engine: Any) -> str:
    """``mode=... dtype=... jit_compile=... chunk_size=...`` of a compiled engine (one model or an ensemble), the
    form of its forward mode included where it is not the vectorised one."""
    form = getattr(engine, "forward_form", "vectorized")
    mode = engine.mode + (f" ({form})" if engine.mode == "forward" and form != "vectorized" else "")
    return f"mode={mode} dtype={engine.dtype} jit_compile={engine.jit_compile} chunk_size={engine.chunk_size}"


def checked_points(points: np.ndarray, dtype: Any, n_in: int) -> np.ndarray:
    """``points`` as an ``[N, n_in]`` array of the engine's ``dtype``; refused in one line otherwise."""
    x = np.asarray(points, dtype=dtype)
    if x.ndim != 2 or x.shape[1] != n_in:
        raise ConfigError(f"points must have shape [N, {n_in}], got {list(np.shape(points))}")
    return x


def compile_jacobian(
    surrogate: Surrogate,
    mode: Mode = EngineSettings.mode,
    *,
    jit_compile: bool | None = EngineSettings.jit_compile,
    chunk_size: int | None = EngineSettings.chunk_size,
    memory_budget_mb: float = EngineSettings.memory_budget_mb,
    path: PathChoice = EngineSettings.path,
    probe_points: np.ndarray | None = None,
) -> CompiledJacobian:
    """Compile the values-and-Jacobian function of ``surrogate``.

    The defaults are those of :class:`sensitivity.settings.EngineSettings` (the command line's ``jacobian.*``).

    Parameters
    ----------
    surrogate
        The model (see :func:`sensitivity.load_surrogate`); its dtype is the compute dtype.
    mode
        ``"forward"`` (cost ~ n_in tangents), ``"reverse"`` (cost ~ n_out cotangents) or ``"auto"``:
        forward when ``n_in <= n_out``.
    jit_compile
        Compile full chunks with XLA (one compile, at the first full chunk; shorter chunks never wait for
        it). ``None``: XLA on both paths; it speeds up vectorised forward mode on the autodiff path, and on
        the dense path it fuses each layer's elementwise derivative product with its neighbours, 1.1-1.2x the
        plain TF ops on shapes A and C of ``benchmarks/bench_jacobian.py --chunks``.
    chunk_size
        Points per compiled call [points]; derived from ``memory_budget_mb`` when omitted.
    memory_budget_mb
        Working memory allowed for one chunk [MiB]: intermediate tangents plus outputs (autodiff path).
    path
        ``"dense"`` (a Keras chain of dense, convolution, pooling, reshaping and elementwise layers, max
        pooling in reverse mode only; an error for anything else), ``"autodiff"`` (any model) or ``"auto"``:
        dense whenever :mod:`sensitivity.engine.dense_path` (forward mode, MLPs in reverse mode) or
        :mod:`sensitivity.engine.reverse_path` (reverse mode through convolutions) recognises and verifies the
        model. The choice and its reason are logged (INFO) and kept in ``path_reason``.
    probe_points
        ``[k, n_in]`` points inside the model's domain (a space's nominal point) where forward mode by double
        reverse, when the model needs it, is checked against a plain reverse pass; default: two points drawn
        uniformly from [0.5, 2] in every input, which a model may not be defined at (then the check says so).

    Returns
    -------
    CompiledJacobian
    """
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}, got {mode!r}")
    if surrogate.dtype not in DTYPES:
        raise ConfigError(f"`dtype` must be one of {DTYPES}, got {surrogate.dtype!r}")
    memory_budget_mb = check_memory_budget(memory_budget_mb)
    n_in, n_out = surrogate.n_in, surrogate.output_size
    resolved = resolve_mode(mode, n_in, n_out)
    traces = {"jacobian": 0, "value": 0}
    signature = [tf.TensorSpec([None, n_in], surrogate.dtype)]
    if path not in PATHS:
        raise ConfigError(f"`path` must be one of {PATHS}, got {path!r}")
    chain, reason = (None, "path 'autodiff' was asked for") if path == "autodiff" else _chain(surrogate, resolved)
    if path == "dense" and chain is None:
        raise ConfigError(f"`path` 'dense' needs a Keras model of Dense/Conv/pooling/reshaping/elementwise "
                          f"layers; {surrogate.source} is not one: {reason}")
    path = "autodiff" if chain is None else "dense"
    log.info("%s: %s path, %s mode: %s", surrogate.source, path, resolved, reason)
    if jit_compile is None:
        jit_compile = True
    flat_values, flat_jacobian = _functions(surrogate, resolved, chain)

    def values_only(x: tf.Tensor) -> tuple[tf.Tensor]:
        traces["value"] += 1
        return (flat_values(x),)

    def value_and_jacobian(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        traces["jacobian"] += 1
        return flat_jacobian(x)

    autograph = chain is None  # a user's model function; the project's own chains need no AutoGraph
    value_fn = chunk_functions(values_only, signature, jit_compile, autograph)
    jacobian_fn = chunk_functions(value_and_jacobian, signature, jit_compile, autograph)
    failure = _trace_failure(jacobian_fn[False]) if chain is None and resolved == "forward" else None
    forward_form = "vectorized"
    if failure:  # the model's tangents cannot be carried forward: the same columns by double reverse
        flat_jacobian, traces["jacobian"] = _functions(surrogate, resolved, None, "double reverse")[1], 0
        jacobian_fn = chunk_functions(value_and_jacobian, signature, jit_compile, autograph)
        second = _trace_failure(jacobian_fn[False]) or _reverse_disagreement(surrogate, jacobian_fn[False],
                                                                              probe_points)
        if second is None:
            forward_form = "double reverse"
            log.warning("%s: forward mode cannot carry the model's tangents (%s); forward mode by double reverse "
                        "instead (each column J e_i as the gradient of a reverse pass: ~3 passes per input)",
                        surrogate.source, failure)
        elif mode == "forward":
            raise ModelError(f"{surrogate.source}: forward mode cannot carry the model's tangents ({failure}), nor "
                             f"differentiate its reverse pass ({second}); set jacobian.mode=reverse, or write a "
                             "branch on a tensor as tf.where")
        else:  # "auto" chose forward: reverse mode takes the model's control flow
            log.warning("%s: forward mode cannot carry the model's tangents (%s), nor differentiate its reverse pass "
                        "(%s); reverse mode instead", surrogate.source, failure, second)
            resolved, traces["jacobian"] = "reverse", 0
            flat_jacobian = _functions(surrogate, resolved, None)[1]
            jacobian_fn = chunk_functions(value_and_jacobian, signature, jit_compile, autograph)
    if chain is not None:  # read off the weights: no trace before the first call
        activation = sum(chain.widths)
    else:
        activation = _activation_size(value_fn[False], n_in)  # traces it once; later calls reuse that trace
    if chunk_size is None and isinstance(chain, ConvChain):
        chunk_size = chain.chunk_size(np.dtype(surrogate.dtype).itemsize, memory_budget_mb)
    elif chunk_size is None and chain is not None:  # a cache-sized block, within the budget
        block = DENSE_BLOCK_BYTES if chain.reversible else CONV_BLOCK_BYTES
        chunk_size = dense_chunk_size(list(chain.widths), n_in, n_out, resolved, np.dtype(surrogate.dtype).itemsize,
                                      min(block, int(memory_budget_mb * 2**20)))
    elif chunk_size is None:
        chunk_size = auto_chunk_size(activation, n_in, n_out, resolved, np.dtype(surrogate.dtype).itemsize,
                                     memory_budget_mb)
    elif not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(f"`chunk_size` must be a positive integer, got {chunk_size!r}")
    return CompiledJacobian(surrogate, resolved, path, jit_compile, surrogate.dtype, chunk_size, activation,
                            jacobian_fn, value_fn, traces, path_reason=reason, forward_form=forward_form)


def chunk_functions(f: Callable, signature: list[tf.TensorSpec], jit_compile: bool,
                    autograph: bool = True) -> dict[bool, tf.types.experimental.PolymorphicFunction]:
    """``{full chunk: fn, shorter: fn}`` of an engine function: an XLA one for full chunks (with ``jit_compile``)
    and a plain one, each traced once for its fixed ``signature``.

    ``autograph=False`` traces ``f`` as plain Python, for the project's own layer chains (no tensor-dependent
    Python control flow): AutoGraph converts every function a trace calls, which took 60-70 % of the first
    call of a 5-member ensemble's engine on the demo (1.3 s against 0.45 s without). A user's own model
    function keeps it (its ``if`` on a tensor needs it).

    TensorFlow's frequent-tracing detector counts traces per code object, across every engine of a process (a study
    compiles one or more per stage), and would take each new engine's single trace for retracing; the functions
    never retrace (``trace_count``, tested), so its warning is switched off for them.
    """
    plain = tf.function(f, input_signature=signature, jit_compile=False, reduce_retracing=False, autograph=autograph)
    xla = tf.function(f, input_signature=signature, jit_compile=True, reduce_retracing=False,
                      autograph=autograph) if jit_compile else plain
    for fn in (plain, xla):
        fn._omit_frequent_tracing_warning = True  # noqa: SLF001 - TF's own switch (polymorphic_function.py)
    return {True: xla, False: plain}


def _trace_failure(jacobian_fn: tf.types.experimental.PolymorphicFunction) -> str | None:
    """Trace an autodiff path's forward-mode Jacobian now (the trace its first call would make); the last line
    of the error when TensorFlow cannot build it, else None: ``tf.vectorized_map`` cannot take the model's tangents
    (a ``tf.cond`` of ``ForwardAccumulator`` tangents: "Required handle data not set"), or ``ForwardAccumulator``
    cannot carry them (a ``tf.scan``: "`dtype` variant is not compatible"). TensorFlow's own log of the failed op
    (a 200-line ERROR of its node definition) is held back: the engine reports the failure in one line."""
    tf_log = logging.getLogger("tensorflow")
    level = tf_log.level
    tf_log.setLevel(logging.CRITICAL)
    try:
        jacobian_fn.get_concrete_function()
    except _BUILD_ERRORS as err:
        return _message(err)
    finally:
        tf_log.setLevel(level)
    return None


def _reverse_disagreement(surrogate: Surrogate, jacobian_fn: tf.types.experimental.PolymorphicFunction,
                          probe_points: np.ndarray | None) -> str | None:
    """Run the double-reverse Jacobian at ``probe_points`` (see :func:`compile_jacobian`) and check it against one
    plain reverse pass: ``w^T J`` for a random cotangent ``w`` must be the gradient of ``w^T y``. None when they
    agree; else what went wrong: an op of the reverse pass that fails when it runs (a ``tf.numpy_function``), or a
    gradient that is not linear in its cotangent (a custom gradient that stops it), which would give wrong columns
    silently. Where the model is not finite at any probe point the check cannot be made, and a warning says so."""
    rng = np.random.default_rng(12345)
    probe = rng.uniform(0.5, 2.0, (2, surrogate.n_in)) if probe_points is None else np.atleast_2d(probe_points)
    points = len(probe)
    x = tf.constant(checked_points(probe, surrogate.dtype, surrogate.n_in))
    w = tf.constant(rng.standard_normal((points, surrogate.output_size)), surrogate.dtype)

    @tf.function
    def pulled(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reshape(surrogate.fn(x), [points, -1])
        return tape.gradient(y, x, output_gradients=w, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    try:
        jacobian = jacobian_fn(x)[1].numpy()
        expected = pulled(x).numpy()
    except (*_BUILD_ERRORS, tf.errors.OpError) as err:
        return _message(err)
    got = np.einsum("bo,boi->bi", w.numpy(), jacobian)
    if not np.isfinite(expected).any():
        log.warning("%s: forward mode by double reverse could not be checked against a reverse pass: the model is "
                    "not finite at the probe points%s", surrogate.source,
                    "" if probe_points is not None else " (pass probe_points inside its domain)")
        return None
    rtol = 1e-4 if surrogate.dtype == "float32" else 1e-9
    if not np.allclose(got, expected, rtol=rtol, atol=rtol * np.nanmax(np.abs(expected), initial=0.0),
                       equal_nan=True):
        return ("its columns disagree with a reverse pass at probe points (a gradient not linear in its "
                "cotangent, e.g. a custom gradient that stops it)")
    return None


def _message(err: Exception) -> str:
    """TensorFlow's error in one line: its last line that is not a node name (``[[{{node ...}}]]``, ``[Op:...]``),
    cut to 160 characters."""
    text = re.sub(r"\s*(\[\[.*?\]\]|\[Op:[^\]]*\])", "", str(getattr(err, "message", err)))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else type(err).__name__)[:160]


def resolve_mode(mode: Mode, n_in: int, n_out: int) -> str:
    """``"forward"`` or ``"reverse"``: ``mode`` itself, or for ``"auto"`` forward when ``n_in <= n_out``."""
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}, got {mode!r}")
    return ("forward" if n_in <= n_out else "reverse") if mode == "auto" else mode


def jacobian_functions(surrogate: Surrogate, mode: str, forward_form: str = "vectorized") -> tuple[Callable, Callable]:
    """The untraced TF functions the engine compiles: flat values, and flat values with the Jacobian.

    Parameters
    ----------
    surrogate
        The model in physical units.
    mode
        ``"forward"`` (all ``n_in`` tangents pushed at once) or ``"reverse"`` (all ``n_out`` cotangents
        pulled back at once); see :func:`resolve_mode`. A Keras MLP takes the dense path
        (:mod:`sensitivity.engine.dense_path`), anything else ``ForwardAccumulator`` in ``vectorized_map`` or
        ``GradientTape.batch_jacobian``.
    forward_form
        How the autodiff path's forward mode runs: ``"vectorized"`` or ``"double reverse"``
        (:attr:`CompiledJacobian.forward_form`).

    Returns
    -------
    ``(values, value_and_jacobian)``: ``x [B, n_in] -> y [B, n_out]`` and
    ``x -> (y [B, n_out], dy/dx [B, n_out, n_in])``, to be wrapped in ``tf.function`` (by
    :func:`compile_jacobian`, or by :mod:`sensitivity.interop.export` for a standalone SavedModel).
    """
    return _functions(surrogate, mode, _chain(surrogate, mode)[0], forward_form)


def _chain(surrogate: Surrogate, mode: str) -> tuple[DenseChain | ConvChain | None, str]:
    """The verified layer chain of ``surrogate`` for ``mode`` and a sentence saying which path and why:
    :class:`DenseChain` in forward mode and for MLPs in reverse mode, :class:`ConvChain` in reverse mode
    through convolutions, pooling and reshaping layers; ``None`` and the reason where there is none."""
    if surrogate.members:
        return ensemble_chain(surrogate, mode)
    fn, n_in, dtype = surrogate.fn, surrogate.n_in, surrogate.dtype
    steps = layer_steps(fn, dtype)
    if isinstance(steps, str):
        return None, steps
    layers = _layer_names(steps)
    if mode == "reverse" and any(kind in ("linear", "maxpool") for kind, _ in steps):
        chain = conv_chain(steps, fn, n_in, dtype)
        how = f"the {surrogate.output_size} cotangents as one block through {chain.description}" \
            if isinstance(chain, ConvChain) else ""
    else:
        chain = chain_of(steps, fn, n_in, dtype)
        how = f"the {n_in if mode == 'forward' else surrogate.output_size} " \
              f"{'tangents' if mode == 'forward' else 'cotangents'} as one block through {layers}"
    return (chain, how) if not isinstance(chain, str) else (None, f"{chain} ({layers})")


def ensemble_chain(surrogate: Surrogate, mode: str) -> tuple[Any, str]:
    """The ensemble mean of ``surrogate``'s members as one chain, each member's dense chain in turn
    (:class:`~sensitivity.engine.member_path.MeanChain`), and a sentence saying why; ``None`` and the reason where the
    members are not MLPs of one architecture (the engine then differentiates the mean by autodiff)."""
    from sensitivity.engine.member_path import MeanChain, member_chain

    k = surrogate.n_members
    chain = member_chain(surrogate.members, surrogate.n_in, surrogate.dtype)
    if isinstance(chain, str):
        return None, f"an ensemble of {k} whose members are not MLPs of one architecture: {chain}"
    tangents = f"{surrogate.n_in} tangents" if mode == "forward" else f"{surrogate.output_size} cotangents"
    return MeanChain(chain), f"the mean of {k} members, each member's {tangents} as one block through its dense chain"


def _layer_names(steps: list[tuple[str, Any]]) -> str:
    """The Keras layers of ``steps`` by kind, in order of first appearance: ``"Conv2D x2, Dense"``."""
    names = Counter()
    for kind, step in steps:
        if kind != "elementwise":
            names[type(step[2] if kind == "linear" else step).__name__ if kind != "affine" else "Dense"] += 1
    return ", ".join(name if count == 1 else f"{name} x{count}" for name, count in names.items())


def _functions(surrogate: Surrogate, mode: str, chain: DenseChain | ConvChain | None,
               forward_form: str = "vectorized") -> tuple[Callable, Callable]:
    """:func:`jacobian_functions` with the dense chain of ``surrogate`` (or ``None``) already found."""
    if mode not in ("forward", "reverse"):
        raise ConfigError(f"`mode` must be 'forward' or 'reverse' here, got {mode!r}")
    if chain is not None:
        return chain.values, (chain.forward if mode == "forward" else chain.reverse)
    n_in, n_out = surrogate.n_in, surrogate.output_size

    def flat_values(x: tf.Tensor) -> tf.Tensor:
        return tf.reshape(surrogate.fn(x), [-1, n_out])

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
    if forward_form not in FORWARD_FORMS:
        raise ConfigError(f"`forward_form` must be one of {FORWARD_FORMS}, got {forward_form!r}")
    return flat_values, (forward if forward_form == "vectorized" else forward_by_double_reverse)


def auto_chunk_size(activation_size: int, n_in: int, n_out: int, mode: str, itemsize: int,
                    memory_budget_mb: float) -> int:
    """Points per chunk so that one chunk's working memory fits ``memory_budget_mb`` [MiB].

    Per point, forward mode holds the primal activations and one tangent copy per input
    (``(n_in + 1) * activation_size`` numbers); reverse mode one cotangent copy per output
    (``(n_out + 1) * activation_size``); both hold the ``n_out * n_in`` Jacobian.
    """
    if not memory_budget_mb > 0:
        raise ConfigError(f"`memory_budget_mb` must be > 0, got {memory_budget_mb!r}")
    copies = (n_in if mode == "forward" else n_out) + 1
    per_point = itemsize * (copies * activation_size + n_out * (n_in + 1) + n_in)
    fit = int(memory_budget_mb * 2**20 // per_point)
    return int(min(MAX_CHUNK, max(MIN_CHUNK, 2 ** int(math.log2(max(fit, 1))))))


def dense_chunk_size(widths: list[int], n_in: int, n_out: int, mode: str, itemsize: int,
                     block_bytes: int = DENSE_BLOCK_BYTES) -> int:
    """Points per chunk on the dense path: the widest tangent block fits ``block_bytes``
    (:data:`DENSE_BLOCK_BYTES` for an MLP, :data:`CONV_BLOCK_BYTES` for a chain with convolutions).

    One layer's block is ``chunk * (tangents + 1) * width`` numbers; a block that stays in cache between
    the matmul and the elementwise product that follows runs faster than a larger chunk with fewer calls.
    """
    tangents = n_in if mode == "forward" else n_out
    per_point = itemsize * (tangents + 1) * max(widths)
    fit = max(block_bytes // per_point, 1)
    return int(min(MAX_CHUNK, max(MIN_CHUNK, 1 << (int(fit).bit_length() - 1))))


def _activation_size(value_fn: tf.types.experimental.PolymorphicFunction, n_in: int) -> int:
    """Numbers per point held by the model's intermediate tensors, read off its traced graph (see
    :func:`_graph_activation`)."""
    return max(_graph_activation(value_fn.get_concrete_function().graph), n_in)


def _graph_activation(graph: tf.Graph) -> int:
    """Per-row sizes of every op output of ``graph`` whose leading dimension is the (unknown) batch; a while
    loop's body (a ``tf.scan`` over time steps) counts once per iteration where its trip count is a constant,
    since reverse mode keeps every iteration's tensors (a 365-day scan of a bucket model: 79 numbers per point
    per day, 9x the rest of its graph)."""
    total = 0
    for op in graph.get_operations():
        for out in op.outputs:
            shape = out.shape
            if shape.rank and shape.rank >= 1 and shape[0] is None and shape[1:].is_fully_defined():
                total += int(np.prod(shape[1:].as_list(), dtype=np.int64))
        if op.type in ("While", "StatelessWhile"):  # while_v2's inputs: loop counter, maximum iterations, ...
            trips = tf.get_static_value(op.inputs[1])
            body = graph._get_function(op.get_attr("body").name)  # noqa: SLF001 - the body's FuncGraph
            if trips is not None and int(trips) > 0 and body is not None:
                total += int(trips) * _graph_activation(body.graph)
    return total


def _chunks(x: np.ndarray, size: int) -> Iterator[tuple[int, np.ndarray]]:
    for start in range(0, x.shape[0], size):
        yield start, x[start : start + size]
