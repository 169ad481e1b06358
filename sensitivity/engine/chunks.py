"""The one chunking core of the compiled engines (one model, :mod:`sensitivity.engine.jacobian`; an ensemble's members,
:mod:`sensitivity.engine.ensemble`).

An engine function maps a chunk of points ``x [B, n_in]`` to a tuple of tensors (values, or values and Jacobians),
each with the points on one axis (``point_axis``: 0 for one model, 1 behind an ensemble's member axis).
:class:`ChunkedFunction` compiles it once per chunk kind with the fixed input signature ``[None, n_in]``, so it
never retraces: full chunks of ``chunk_size`` rows through XLA (one shape, compiled once), a shorter chunk (the last
one, or a small call) through the same function without XLA, unpadded, so a small problem never waits seconds for an
XLA compilation and no padded rows are computed. Where XLA cannot compile or run the function at its first full chunk
(a ``tf.cond`` on a tensor: "Incompatible shapes"), a warning, once, and the plain graph for that chunk and every later
one. Each call goes to the function's one concrete function, which skips a ``tf.function``'s argument binding.

The chunk size follows from a memory budget: :func:`auto_chunk_size` from the model's per-point activation size
read off its traced graph (:func:`activation_size`), :func:`dense_chunk_size` from a layer chain's widths.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from sensitivity.errors import ConfigError

log = logging.getLogger(__name__)

#: Bounds on the automatic chunk size [points]: below the lower one, call overhead dominates; above the upper one,
#: throughput no longer improves on CPU (``benchmarks/bench_jacobian.py --chunks`` sweeps the chunk size).
MIN_CHUNK, MAX_CHUNK = 64, 8192
#: Bytes of the widest tangent block of one dense-path chunk (see :func:`dense_chunk_size`): the fastest chunks of
#: one ``benchmarks/bench_jacobian.py --chunks`` sweep on its MLP shapes held 4-10 MiB blocks (docs/performance.md);
#: 8 MiB rounded down to a power of two. Re-tune with that sweep.
DENSE_BLOCK_BYTES = 8 * 2**20
#: The same for a chain with convolutions (no cache to stay in; larger batches feed the convolution kernels
#: better): the fastest chunks of ``bench_jacobian.py --chunks --shapes conv`` held ~20 MiB blocks; 32 MiB picks 256.
CONV_BLOCK_BYTES = 32 * 2**20

PolymorphicFunction = tf.types.experimental.PolymorphicFunction


class ChunkedFunction:
    """An engine function ``x [B, n_in] -> (tensor, ...)``, compiled once per chunk kind and run chunk by chunk.

    Parameters
    ----------
    f
        The untraced function; every result has the points on axis ``point_axis``.
    n_in
        Inputs per point.
    dtype
        Compute dtype of the points.
    jit_compile
        Full chunks through XLA (see the module docstring).
    autograph
        Trace ``f`` with AutoGraph (see :func:`chunk_functions`).
    source
        The model's name, for the log.
    point_axis
        The axis of the points in every result.
    """

    def __init__(self, f: Callable, n_in: int, dtype: str, jit_compile: bool, autograph: bool, source: str,
                 point_axis: int = 0) -> None:
        signature = [tf.TensorSpec([None, n_in], dtype)]
        self.functions = chunk_functions(f, signature, jit_compile, autograph)
        self.dtype, self.source, self.point_axis = dtype, source, point_axis
        self._concretes: dict[PolymorphicFunction, Callable] = {}

    @property
    def plain(self) -> PolymorphicFunction:
        """The function without XLA (the one shorter chunks take): what a trace check or a probe runs."""
        return self.functions[False]

    def call(self, chunk: np.ndarray, chunk_size: int) -> list[tf.Tensor]:
        """The results of one chunk of at most ``chunk_size`` rows: a full one through XLA (when compiled with it)."""
        x = tf.constant(chunk, dtype=self.dtype)
        fn = self.functions[len(chunk) == chunk_size]
        if fn is not self.functions[False] and fn not in self._concretes:
            return list(self._first_xla_call(x))
        return list(self._concrete(fn)(x))

    def evaluate(self, x: np.ndarray, chunk_size: int, shapes: Callable[[int], Sequence[tuple[int, ...]]],
                 out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """The results at all points ``x [N, n_in]``, chunk by chunk, each reshaped to ``shapes(rows)``.

        ``out``: the caller's arrays of shapes ``shapes(N)`` (any dtype, byte order or strides), filled chunk by
        chunk and returned: each chunk's numbers go from TensorFlow's buffer straight into them, the only copy.
        Without it a call of one chunk returns that chunk's arrays (writable copies), and a longer one fills new
        arrays the same way.
        """
        n = len(x)
        if out is None and n <= chunk_size:  # one chunk: its arrays are the result
            return [r.numpy().reshape(s) for r, s in zip(self.call(x, chunk_size), shapes(n))]
        if out is None:
            out = [np.empty(s, self.dtype) for s in shapes(n)]
        before = (slice(None),) * self.point_axis
        for start, results in self.chunks(x, chunk_size, shapes, copy=False):
            for target, result in zip(out, results):
                target[(*before, slice(start, start + result.shape[self.point_axis]))] = result
        return list(out)

    def chunks(self, x: np.ndarray, chunk_size: int, shapes: Callable[[int], Sequence[tuple[int, ...]]],
               copy: bool = True) -> Iterator[tuple[int, list[np.ndarray]]]:
        """Yield ``(start, results)`` per chunk of ``x``, each result reshaped to ``shapes(rows)``: writable copies
        of TF's buffers, or without ``copy`` read-only views of them, for a caller that copies them into its own
        array anyway (one copy of the Jacobian instead of two: on shape C of ``benchmarks/bench_jacobian.py``,
        8 chunks of 1024 points, the second copy cost ~7 % of the time)."""
        for start in range(0, len(x), chunk_size):
            chunk = x[start : start + chunk_size]
            results = self.call(chunk, chunk_size)
            arrays = [r.numpy() if copy else np.asarray(r) for r in results]
            yield start, [a.reshape(s) for a, s in zip(arrays, shapes(len(chunk)))]

    def _first_xla_call(self, x: tf.Tensor) -> Any:
        """The first full chunk through XLA. Where XLA cannot compile or run the function (a user's function with a
        Python ``if`` on a tensor, which AutoGraph makes a ``tf.cond``, fails under XLA with "Incompatible shapes"),
        a warning, and the plain function for this chunk and every later one: a sweep larger than one chunk does
        not fail at its first full chunk for what the plain function computes."""
        try:
            return self._concrete(self.functions[True])(x)
        except tf.errors.OpError as err:
            reason = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
            log.warning("%s: XLA failed on the first full chunk of %d points (%s); continuing without XLA "
                        "(jacobian.jit_compile=false skips the attempt)", self.source, len(x), reason[:160])
            self.functions[True] = self.functions[False]
            return self._concrete(self.functions[False])(x)

    def _concrete(self, fn: PolymorphicFunction) -> Callable:
        """The one concrete function of ``fn`` (fixed signature): calling it skips the argument binding
        of a ``tf.function`` call, about 0.3 ms per call on a 2-core CPU."""
        if fn not in self._concretes:
            self._concretes[fn] = fn.get_concrete_function()
        return self._concretes[fn]


def chunk_functions(f: Callable, signature: list[tf.TensorSpec], jit_compile: bool,
                    autograph: bool = True) -> dict[bool, PolymorphicFunction]:
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


def checked_points(points: np.ndarray, dtype: Any, n_in: int) -> np.ndarray:
    """``points`` as an ``[N, n_in]`` array of the engine's ``dtype``; refused in one line otherwise."""
    x = np.asarray(points, dtype=dtype)
    if x.ndim != 2 or x.shape[1] != n_in:
        raise ConfigError(f"points must have shape [N, {n_in}], got {list(np.shape(points))}")
    return x


def checked_chunk_size(chunk_size: Any) -> int:
    """A chunk size the caller gave [points]; refused in one line unless a positive integer."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(f"`chunk_size` must be a positive integer, got {chunk_size!r}")
    return chunk_size


def settings_text(engine: Any) -> str:
    """``mode=... dtype=... jit_compile=... chunk_size=...`` of a compiled engine (one model or an ensemble), the
    form of its forward mode included where it is not the vectorised one."""
    form = getattr(engine, "forward_form", "vectorized")
    mode = engine.mode + (f" ({form})" if engine.mode == "forward" and form != "vectorized" else "")
    return f"mode={mode} dtype={engine.dtype} jit_compile={engine.jit_compile} chunk_size={engine.chunk_size}"


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


def activation_size(value_fn: PolymorphicFunction, n_in: int) -> int:
    """Numbers per point held by the intermediate tensors of a values function, read off its traced graph (see
    :func:`graph_activation`); tracing it here is the trace every later call reuses."""
    return max(graph_activation(value_fn.get_concrete_function().graph), n_in)


def graph_activation(graph: tf.Graph) -> int:
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
                total += int(trips) * graph_activation(body.graph)
    return total
