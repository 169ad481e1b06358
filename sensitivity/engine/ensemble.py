"""The compiled engine of an ensemble: every member's values and Jacobians in one call, the members as a batch axis.

:func:`compile_ensemble` builds, once per ensemble surrogate (:mod:`sensitivity.surrogates.ensemble`), a
``tf.function`` with the engine's fixed input signature ``[None, n_in]`` that returns the values
``[K, B, n_out]`` and Jacobians ``[K, B, n_out, n_in]`` of all ``K`` members at a batch of points, fed in
chunks by the engine's one chunking core (:class:`~sensitivity.engine.chunks.ChunkedFunction`, the members as a
batch axis before the points': full chunks through XLA, a shorter one without, so it never retraces; the plain
graph where XLA fails), compiled by the one compile sequence of the single engine (:mod:`sensitivity.engine.sequence`:
the settings checked, the probe points, the chunk size from the memory budget). The mode and the form of forward mode
are chosen as for one model (:func:`sensitivity.engine.modes.choose_form`: forward mode by double reverse for members
whose tangents TensorFlow cannot carry, a ``tf.scan`` or a ``tf.cond``). Members of one architecture whose layers a layer path reads (MLPs,
and conv nets over a field of inputs) take the member path (:mod:`sensitivity.engine.member_path`: each member's
dense or reverse conv chain in turn, in chunks sized for it); other ensembles stack each member's own engine
function (:func:`~sensitivity.engine.jacobian.jacobian_functions`) inside the same compiled call, and the log and
``path_reason`` say why (the member and its layer that no layer path reads).

The results come back member-major, ``[K, N, *out]`` and ``[K, N, *out, n_in]``
(:meth:`CompiledEnsemble.__call__`), or as the flat member-major views the analyses stack into one output
axis, ``[N, K m]`` with column ``k m + j`` member ``k``'s output ``j`` (:meth:`CompiledEnsemble.stacked_values`).
An ensemble whose manifest calibrates its spread (``spread_scale``, :mod:`sensitivity.surrogates.ensemble`) returns its members
spread about their mean by that factor per output (:func:`sensitivity.surrogates.load.recentred`), values and
Jacobians alike. The ensemble's prediction, the mean of its members, is the surrogate itself:
:func:`sensitivity.engine.jacobian.compile_jacobian` of the ensemble compiles the mean on the same stacked chain.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import tensorflow as tf

from sensitivity.engine.chunks import ChunkedFunction, checked_points, settings_text
from sensitivity.engine.jacobian import engine_functions, layer_chain
from sensitivity.engine.member_path import MemberChain, member_chain
from sensitivity.engine.sequence import checked_request, compile_functions
from sensitivity.errors import ConfigError
from sensitivity.settings import EngineSettings, Mode, PathChoice
from sensitivity.surrogates.load import Surrogate, recentred

log = logging.getLogger(__name__)


@dataclass
class CompiledEnsemble:
    """Every member's values and Jacobians, compiled once and evaluated in fixed-size chunks.

    Build with :func:`compile_ensemble`. ``members`` is ``K``; ``path`` is ``"member"`` (the members' layer chains) or
    ``"stacked"`` (each member's own function in one call), ``path_reason`` says why. ``forward_form`` is how the
    stacked members' forward mode runs (see :attr:`sensitivity.engine.jacobian.CompiledJacobian.forward_form`);
    ``activation_size`` the numbers per point its chunks are sized by (member 0's chain widths on the member path, every
    member's intermediate tensors read off the traced graph on the stacked one).
    """

    surrogate: Surrogate
    members: int
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
        """How many times the Jacobian function has been traced (once, or with XLA once per chunk kind)."""
        return self._traces["jacobian"]

    def __call__(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every member's values and Jacobians at ``points [N, n_in]``: ``([K, N, *out], [K, N, *out, n_in])``."""
        values, jacobian = self._flat(self._jacobian, points)
        out = self.surrogate.output.shape
        return (values.reshape(self.members, -1, *out),
                jacobian.reshape(self.members, -1, *out, self.surrogate.n_in))

    def values(self, points: np.ndarray) -> np.ndarray:
        """Every member's values at ``points [N, n_in]``: ``[K, N, *out]``."""
        return self._flat(self._values, points)[0].reshape(self.members, -1, *self.surrogate.output.shape)

    def stacked_values(self, points: np.ndarray) -> np.ndarray:
        """Every member's values as one flat output axis, member-major: ``[N, K m]`` (column ``k m + j``)."""
        values = self._flat(self._values, points)[0]  # [K, N, m]
        return np.ascontiguousarray(values.transpose(1, 0, 2)).reshape(values.shape[1], -1)

    def stacked_value_and_jacobian(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`stacked_values` and the Jacobians on the same axis: ``([N, K m], [N, K m, n_in])``."""
        values, jacobian = self._flat(self._jacobian, points)  # [K, N, m], [K, N, m, n]
        n = values.shape[1]
        return (np.ascontiguousarray(values.transpose(1, 0, 2)).reshape(n, -1),
                np.ascontiguousarray(jacobian.transpose(1, 0, 2, 3)).reshape(n, -1, jacobian.shape[-1]))

    def member_function(self, k: int) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """Member ``k``'s flat ``value_and_jacobian`` ``[N, n_in] -> ([N, m], [N, m, n_in])`` (computed with all
        members: for the small calls of a calibration, where one member's own engine would save little)."""
        if not 0 <= k < self.members:
            raise ConfigError(f"`k` must be a member index in [0, {self.members}), got {k!r}")

        def value_and_jacobian(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            values, jacobian = self._flat(self._jacobian, points)
            return values[k], jacobian[k]

        return value_and_jacobian

    def iter_chunks(self, points: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Yield ``(start, values [K, n, *out], jacobian [K, n, *out, n_in])`` per chunk of ``points``."""
        x = self._check(points)
        for start in range(0, len(x), self.chunk_size):
            yield (start, *self(x[start : start + self.chunk_size]))

    def _flat(self, function: ChunkedFunction, points: np.ndarray) -> list[np.ndarray]:
        """The flat results ``[K, N, m]`` (and ``[K, N, m, n]``) of ``function``, chunk by chunk, each chunk's
        buffers copied once, into the result."""
        k, m, n = self.members, self.surrogate.output_size, self.surrogate.n_in
        return function.evaluate(self._check(points), self.chunk_size, lambda rows: [(k, rows, m), (k, rows, m, n)])

    def _check(self, points: np.ndarray) -> np.ndarray:
        return checked_points(points, self.dtype, self.surrogate.n_in)


def compile_ensemble(
    surrogate: Surrogate,
    mode: Mode = EngineSettings.mode,
    *,
    jit_compile: bool | None = EngineSettings.jit_compile,
    chunk_size: int | None = EngineSettings.chunk_size,
    memory_budget_mb: float = EngineSettings.memory_budget_mb,
    path: PathChoice = EngineSettings.path,
    probe_points: np.ndarray | None = None,
) -> CompiledEnsemble:
    """Compile every member's values and Jacobians of an ensemble ``surrogate`` into one function.

    The settings are those of :func:`sensitivity.engine.jacobian.compile_jacobian` (the command line's ``jacobian.*``),
    checked and applied by the same sequence (:mod:`sensitivity.engine.sequence`: mode, path, dtype and memory budget
    refused alike, the probe points, the chunk size from the budget); a single model is an ensemble of one.
    ``path="dense"`` demands the member path (members of one architecture whose layers a layer path reads),
    ``"autodiff"`` each member's autodiff function, ``"auto"`` the member path where it applies.
    Stacked members whose forward-mode tangents TensorFlow cannot carry get forward mode by double reverse, checked
    at ``probe_points`` (as :func:`~sensitivity.engine.jacobian.compile_jacobian`'s), or reverse mode (see
    :func:`sensitivity.engine.modes.choose_form`).

    Returns
    -------
    CompiledEnsemble
    """
    resolved, memory_budget_mb = checked_request(surrogate, mode, path, memory_budget_mb)
    members = surrogate.members or (surrogate,)
    k, n_in = len(members), surrogate.n_in
    chain: MemberChain | str = "path 'autodiff' was asked for" if path == "autodiff" else \
        member_chain(members, n_in, surrogate.dtype, resolved)
    if path == "dense" and isinstance(chain, str):
        raise ConfigError(f"`path` 'dense' needs members that are Keras networks of one architecture on a layer "
                          f"path; {surrogate.source} is not: {chain}")
    chains: dict[str, list] = {}  # stacked: each member's layer chain (None: autodiff) per mode, found once

    def member_chains(mode: str) -> list:
        if mode not in chains:
            chains[mode] = [None if path == "autodiff" else layer_chain(m, mode)[0] for m in members]
        return chains[mode]

    if isinstance(chain, MemberChain):
        kind, reason, autodiff = "member", f"{k} members' {chain.kind}s in turn, in one call", False

        def functions(mode: str, form: str) -> tuple[Callable, Callable]:
            return _recentring(chain.values, chain.forward if mode == "forward" else chain.reverse, surrogate)
    else:
        kind, reason = "stacked", f"each member's own function in one call ({chain})"
        autodiff = any(c is None for c in member_chains(resolved))

        def functions(mode: str, form: str) -> tuple[Callable, Callable]:
            return _recentring(*_stacked_functions(members, member_chains(mode), mode, form), surrogate)
    if surrogate.spread_scale:
        reason += "; members spread about their mean by the ensemble's calibration"
    log.info("%s: ensemble engine, %s mode: %s", surrogate.source, resolved, reason)
    c = compile_functions(surrogate, functions, mode, resolved, chain=chain if kind == "member" else None,
                          autodiff=autodiff, jit_compile=jit_compile, chunk_size=chunk_size,
                          memory_budget_mb=memory_budget_mb, probe_points=probe_points, point_axis=1)
    return CompiledEnsemble(surrogate, k, c.mode, kind, c.jit_compile, surrogate.dtype, c.chunk_size,
                            c.activation_size, c.jacobian, c.values, c.traces, path_reason=reason,
                            forward_form=c.forward_form)


def stacked_model(surrogate: Surrogate) -> Callable[[tf.Tensor], tf.Tensor]:
    """The members side by side as one TF model ``x [B, n_in] -> [B, K m]``, member-major (column ``k m + j``), as
    :meth:`CompiledEnsemble.stacked_values` returns them: what a compiled Hessian of every member differentiates."""
    k = surrogate.n_members

    def stacked(x: tf.Tensor) -> tf.Tensor:
        members = tf.reshape(surrogate.member_fn(x), [k, tf.shape(x)[0], -1])
        return tf.reshape(tf.transpose(members, [1, 0, 2]), [tf.shape(x)[0], -1])

    return stacked


def _recentring(values_fn: Callable, jacobian_fn: Callable, surrogate: Surrogate) -> tuple[Callable, Callable]:
    """The stacked functions with the members spread about their mean by the ensemble's ``spread_scale [m]``
    (:func:`sensitivity.surrogates.load.recentred`; Jacobian rows by the same factor as their output); the functions
    themselves where it has none."""
    if not surrogate.spread_scale:
        return values_fn, jacobian_fn
    factor = tf.constant(np.asarray(surrogate.spread_scale), surrogate.dtype)

    def values(x: tf.Tensor) -> tf.Tensor:
        return recentred(values_fn(x), factor)

    def value_and_jacobian(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        v, j = jacobian_fn(x)
        return recentred(v, factor), recentred(j, factor[:, None])

    return values, value_and_jacobian


def _stacked_functions(members: tuple[Surrogate, ...], chains: list, mode: str, forward_form: str
                       ) -> tuple[Callable, Callable]:
    """Every member's engine function (on its layer chain in ``chains``, or autodiff with its forward mode in
    ``forward_form``) stacked on a leading member axis."""
    pairs = [engine_functions(member, mode, chain, forward_form) for member, chain in zip(members, chains)]

    def values(x: tf.Tensor) -> tf.Tensor:
        return tf.stack([v(x) for v, _ in pairs])

    def value_and_jacobian(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        results = [f(x) for _, f in pairs]
        return tf.stack([r[0] for r in results]), tf.stack([r[1] for r in results])

    return values, value_and_jacobian
