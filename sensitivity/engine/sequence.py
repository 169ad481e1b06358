"""The one compile sequence of the engines, for one model (:func:`sensitivity.engine.jacobian.compile_jacobian`) and an
ensemble's members (:func:`sensitivity.engine.ensemble.compile_ensemble`) alike.

Each engine finds its own functions (a layer chain, the members' chains, or autodiff); everything after is here, once:
:func:`checked_request` refuses a bad mode, path, dtype or memory budget in one line and resolves ``mode="auto"``;
:func:`compile_functions` wraps the values and the values-and-Jacobian functions on the chunking core
(:class:`~sensitivity.engine.chunks.ChunkedFunction`), chooses the form of forward mode with its check at the caller's
probe points (:func:`~sensitivity.engine.modes.choose_form`), and sizes the chunks from the memory budget
(:func:`chunk_size_for`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.chunks import ChunkedFunction, activation_size, auto_chunk_size, checked_chunk_size
from sensitivity.engine.modes import choose_form, resolve_mode
from sensitivity.engine.reverse_path import ConvChain
from sensitivity.errors import ConfigError
from sensitivity.settings import DTYPES, MODES, PATHS, Mode, PathChoice, check_memory_budget
from sensitivity.surrogates.load import Surrogate


@dataclass(frozen=True)
class CompiledFunctions:
    """What :func:`compile_functions` made of an engine's functions.

    Attributes
    ----------
    mode, forward_form
        The mode and the form of forward mode chosen (:class:`~sensitivity.engine.modes.Differentiation`).
    jacobian, values
        The compiled values-and-Jacobian and values-only functions.
    chunk_size
        Points per compiled call [points].
    activation_size
        Numbers per point of the model's intermediate tensors (a chain's widths, or read off the traced graph).
    jit_compile
        Full chunks through XLA.
    traces
        ``{"jacobian": n, "value": n}``: how many times each function has been traced.
    """

    mode: str
    forward_form: str
    jacobian: ChunkedFunction
    values: ChunkedFunction
    chunk_size: int
    activation_size: int
    jit_compile: bool
    traces: dict[str, int]


def checked_request(surrogate: Surrogate, mode: Mode, path: PathChoice, memory_budget_mb: float) -> tuple[str, float]:
    """The resolved mode (:func:`~sensitivity.engine.modes.resolve_mode`) and the memory budget [MiB] of an engine of
    ``surrogate``; a mode, path, compute dtype or memory budget outside its range refused in one line
    (:class:`~sensitivity.errors.ConfigError`)."""
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}, got {mode!r}")
    if path not in PATHS:
        raise ConfigError(f"`path` must be one of {PATHS}, got {path!r}")
    if surrogate.dtype not in DTYPES:
        raise ConfigError(f"`dtype` must be one of {DTYPES}, got {surrogate.dtype!r}")
    return resolve_mode(mode, surrogate.n_in, surrogate.output_size), check_memory_budget(memory_budget_mb)


def compile_functions(surrogate: Surrogate, functions: Callable[[str, str], tuple[Callable, Callable]],
                      requested: Mode, resolved: str, *, chain: Any, autodiff: bool, jit_compile: bool | None,
                      chunk_size: int | None, memory_budget_mb: float, probe_points: np.ndarray | None,
                      point_axis: int = 0) -> CompiledFunctions:
    """Compile an engine's functions on the chunking core, choose its form of forward mode and size its chunks.

    Parameters
    ----------
    surrogate
        The model (one, or an ensemble): its inputs, outputs, dtype and name.
    functions
        ``functions(mode, forward_form) -> (values, value_and_jacobian)``: the engine's untraced functions,
        ``x [B, n_in] -> y`` and ``x -> (y, dy/dx)``, the points on axis ``point_axis`` of every result.
    requested, resolved
        The mode asked for, and what :func:`checked_request` resolved it to.
    chain
        The engine's layer chain (:class:`~sensitivity.engine.dense_path.DenseChain`,
        :class:`~sensitivity.engine.reverse_path.ConvChain`, or a member or mean chain of
        :mod:`sensitivity.engine.member_path`), or ``None`` where the functions are the model's own, traced with
        AutoGraph.
    autodiff
        Does any function take the autodiff path (whose forward mode may need the double reverse form)?
    jit_compile
        Full chunks through XLA; ``None``: yes.
    chunk_size
        Points per compiled call [points]; ``None``: :func:`chunk_size_for` the memory budget.
    memory_budget_mb
        Working memory of one chunk [MiB], as :func:`checked_request` returned it.
    probe_points
        ``[k, n_in]`` points inside the model's domain for the check of forward mode by double reverse
        (:func:`~sensitivity.engine.modes.choose_form`).
    point_axis
        The axis of the points in every result (1 behind an ensemble's member axis).
    """
    n_in, n_out, dtype, source = surrogate.n_in, surrogate.output_size, surrogate.dtype, surrogate.source
    jit_compile = True if jit_compile is None else jit_compile
    autograph = chain is None  # a user's model function; the project's own chains need no AutoGraph
    traces = {"jacobian": 0, "value": 0}
    flat_values = functions(resolved, "vectorized")[0]

    def values_only(x: tf.Tensor) -> tuple[tf.Tensor]:
        traces["value"] += 1
        return (flat_values(x),)

    def build(mode: str, form: str) -> ChunkedFunction:
        flat_jacobian = functions(mode, form)[1]
        traces["jacobian"] = 0

        def value_and_jacobian(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            traces["jacobian"] += 1
            return tuple(flat_jacobian(x))

        return ChunkedFunction(value_and_jacobian, n_in, dtype, jit_compile, autograph, source, point_axis)

    values = ChunkedFunction(values_only, n_in, dtype, jit_compile, autograph, source, point_axis)
    chosen = choose_form(build, flat_values, requested, resolved, autodiff=autodiff, n_in=n_in, dtype=dtype,
                         source=source, probe_points=probe_points, point_axis=point_axis)
    # on a chain, read off the weights (no trace before the first call); else traced once, the trace calls reuse
    activation = sum(chain.widths) if chain is not None else activation_size(values.plain, n_in)
    if chunk_size is None:
        chunk_size = chunk_size_for(chain, activation, chosen.mode, n_in, n_out, np.dtype(dtype).itemsize,
                                    memory_budget_mb)
    return CompiledFunctions(chosen.mode, chosen.forward_form, chosen.jacobian, values, checked_chunk_size(chunk_size),
                             activation, jit_compile, traces)


def chunk_size_for(chain: Any, activation: int, mode: str, n_in: int, n_out: int, itemsize: int,
                   memory_budget_mb: float) -> int:
    """Points per chunk [points] within ``memory_budget_mb`` [MiB]: a layer chain's own (a cache-sized block), else
    :func:`~sensitivity.engine.chunks.auto_chunk_size` of the per-point ``activation`` read off the traced graph."""
    if isinstance(chain, ConvChain):
        return chain.chunk_size(itemsize, memory_budget_mb)
    if chain is not None:  # a dense, member or mean chain
        return chain.chunk_size(mode, n_in, n_out, itemsize, memory_budget_mb)
    return auto_chunk_size(activation, n_in, n_out, mode, itemsize, memory_budget_mb)
