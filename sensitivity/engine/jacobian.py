"""The compiled Jacobian engine of one model: which path and mode, compiled once, run in chunks.

:func:`compile_jacobian` builds, once per surrogate, a ``tf.function`` with a fixed input signature ``[None, n_in]``
that returns the values and the Jacobian of a whole batch of points, and feeds it chunks of ``chunk_size`` points
through the engine's one chunking core (:mod:`sensitivity.engine.chunks`), by the one compile sequence of
:mod:`sensitivity.engine.sequence` (settings checked, probe points, chunk size from the memory budget; both shared with
the ensemble engine): XLA for
full chunks, the plain graph for a shorter one, so it never retraces and small problems never pay seconds of
compilation before their first result.

Two paths compute the same numbers. A Keras MLP (dense, activation and scaling
layers, detected and verified by :mod:`sensitivity.engine.dense_path`) takes the dense
path: the tangents (or cotangents) of a chunk travel as one block through each
weight matrix, one large matmul per layer; in forward mode a chain with
convolutions and reshaping layers too, each applied to the folded tangent block;
in reverse mode a chain with convolutions, pooling and reshaping layers
(:mod:`sensitivity.engine.reverse_path`), each layer's transpose applied to the block of
cotangents. The engine records which path it took and why (``path``,
``path_reason``, and a log line). Anything else takes the autodiff path
(:mod:`sensitivity.engine.autodiff`). ``mode="auto"`` picks forward when ``n_in <= n_out``; a model whose
tangents TensorFlow cannot carry forward (a ``tf.scan``, a ``tf.cond``) gets forward mode by double reverse
(:mod:`sensitivity.engine.modes`, Townsend 2017). The chunk size follows from a memory budget and the
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
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from sensitivity.engine.autodiff import autodiff_functions
from sensitivity.engine.chunks import ChunkedFunction, checked_points, settings_text
from sensitivity.engine.dense_path import DenseChain, chain_of
from sensitivity.engine.layers import AffineStep, LinearStep, MaxPoolStep, Step, layer_steps
from sensitivity.engine.member_path import MeanChain, member_chain
from sensitivity.engine.reverse_path import ConvChain, conv_chain
from sensitivity.engine.sequence import checked_request, compile_functions
from sensitivity.errors import ConfigError
from sensitivity.settings import EngineSettings, Mode, PathChoice
from sensitivity.surrogates.load import Surrogate

log = logging.getLogger(__name__)


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
    _jacobian: ChunkedFunction = field(repr=False)
    _values: ChunkedFunction = field(repr=False)
    _traces: dict[str, int] = field(repr=False)
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
        if out is not None and tuple(np.shape(a) for a in out) != tuple(self._shapes(len(x))):
            raise ConfigError(f"`out` must be arrays of shapes {[list(s) for s in self._shapes(len(x))]}, got "
                              f"{[list(np.shape(a)) for a in out]}")
        values, jacobian = self._jacobian.evaluate(x, self.chunk_size, self._shapes, out)
        return values, jacobian

    def values(self, points: np.ndarray) -> np.ndarray:
        """Values only at ``points [N, n_in]``, compiled and chunked like the Jacobian: ``[N, *out]``."""
        out_shape = self.surrogate.output.shape
        return self._values.evaluate(self._check(points), self.chunk_size, lambda rows: [(rows, *out_shape)])[0]

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
        for start, (values, jacobian) in self._jacobian.chunks(self._check(points), self.chunk_size, self._shapes):
            yield start, values, jacobian

    def _shapes(self, rows: int) -> list[tuple[int, ...]]:
        """The shapes of the values and the Jacobian at ``rows`` points."""
        out_shape = self.surrogate.output.shape
        return [(rows, *out_shape), (rows, *out_shape, self.surrogate.n_in)]

    def _check(self, points: np.ndarray) -> np.ndarray:
        return checked_points(points, self.dtype, self.surrogate.n_in)


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
    resolved, memory_budget_mb = checked_request(surrogate, mode, path, memory_budget_mb)
    chain, reason = (None, "path 'autodiff' was asked for") if path == "autodiff" else layer_chain(surrogate, resolved)
    if path == "dense" and chain is None:
        raise ConfigError(f"`path` 'dense' needs a Keras model of Dense/Conv/pooling/reshaping/elementwise "
                          f"layers; {surrogate.source} is not one: {reason}")
    path = "autodiff" if chain is None else "dense"
    log.info("%s: %s path, %s mode: %s", surrogate.source, path, resolved, reason)

    def functions(mode: str, form: str) -> tuple[Callable, Callable]:
        return engine_functions(surrogate, mode, chain, form)

    c = compile_functions(surrogate, functions, mode, resolved, chain=chain, autodiff=chain is None,
                          jit_compile=jit_compile, chunk_size=chunk_size, memory_budget_mb=memory_budget_mb,
                          probe_points=probe_points)
    return CompiledJacobian(surrogate, c.mode, path, c.jit_compile, surrogate.dtype, c.chunk_size, c.activation_size,
                            c.jacobian, c.values, c.traces, path_reason=reason, forward_form=c.forward_form)


def jacobian_functions(surrogate: Surrogate, mode: str, forward_form: str = "vectorized") -> tuple[Callable, Callable]:
    """The untraced TF functions the engine compiles: flat values, and flat values with the Jacobian.

    Parameters
    ----------
    surrogate
        The model in physical units.
    mode
        ``"forward"`` (all ``n_in`` tangents pushed at once) or ``"reverse"`` (all ``n_out`` cotangents
        pulled back at once); see :func:`sensitivity.engine.modes.resolve_mode`. A Keras MLP takes the dense path
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
    return engine_functions(surrogate, mode, layer_chain(surrogate, mode)[0], forward_form)


def layer_chain(surrogate: Surrogate, mode: str) -> tuple[DenseChain | ConvChain | None, str]:
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
    if mode == "reverse" and any(isinstance(step, (LinearStep, MaxPoolStep)) for step in steps):
        chain = conv_chain(steps, fn, n_in, dtype)
        how = f"the {surrogate.output_size} cotangents as one block through {chain.description}" \
            if isinstance(chain, ConvChain) else ""
    else:
        chain = chain_of(steps, fn, n_in, dtype)
        how = f"the {n_in if mode == 'forward' else surrogate.output_size} " \
              f"{'tangents' if mode == 'forward' else 'cotangents'} as one block through {layers}"
    return (chain, how) if not isinstance(chain, str) else (None, f"{chain} ({layers})")


def ensemble_chain(surrogate: Surrogate, mode: str) -> tuple[Any, str]:
    """The ensemble mean of ``surrogate``'s members as one chain, each member's layer chain in turn
    (:class:`~sensitivity.engine.member_path.MeanChain`), and a sentence saying why; ``None`` and the reason where the
    members are not networks of one architecture on a layer path (the engine then differentiates the mean by
    autodiff)."""
    k = surrogate.n_members
    chain = member_chain(surrogate.members, surrogate.n_in, surrogate.dtype, mode)
    if isinstance(chain, str):
        return None, f"an ensemble of {k} whose members are not networks of one architecture on a layer path: {chain}"
    tangents = f"{surrogate.n_in} tangents" if mode == "forward" else f"{surrogate.output_size} cotangents"
    return MeanChain(chain), f"the mean of {k} members, each member's {tangents} as one block through its {chain.kind}"


def _layer_names(steps: list[Step]) -> str:
    """The Keras layers of ``steps`` by kind, in order of first appearance: ``"Conv2D x2, Dense"``."""
    names = Counter()
    for step in steps:
        if isinstance(step, AffineStep):
            names["Dense"] += 1
        elif isinstance(step, (LinearStep, MaxPoolStep)):
            names[type(step.layer).__name__] += 1
    return ", ".join(name if count == 1 else f"{name} x{count}" for name, count in names.items())


def engine_functions(surrogate: Surrogate, mode: str, chain: DenseChain | ConvChain | MeanChain | None,
               forward_form: str = "vectorized") -> tuple[Callable, Callable]:
    """:func:`jacobian_functions` with the layer chain of ``surrogate`` (or ``None``) already found."""
    if mode not in ("forward", "reverse"):
        raise ConfigError(f"`mode` must be 'forward' or 'reverse' here, got {mode!r}")
    if chain is not None:
        return chain.values, (chain.forward if mode == "forward" else chain.reverse)
    return autodiff_functions(surrogate.fn, surrogate.n_in, surrogate.output_size, mode, forward_form)
