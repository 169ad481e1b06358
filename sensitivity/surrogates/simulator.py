"""A user's simulator as one checked, batched float64 map: what training, verification and refinement run.

A simulator is any Python callable (or an importable ``"package.module:function"``) that maps parameter
points ``[N, n]`` to outputs ``[N, *out]`` with numpy; a simulator of one scalar may return ``[N]`` (one
named output, as for a surrogate function). :func:`simulator_from` binds its keyword arguments and checks
the shape of every result, so a wrong return fails in one line naming the simulator.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import numpy as np

from sensitivity.errors import ModelError

#: A batched simulator: ``[N, n]`` float64 parameter points -> ``[N, *out]`` float64 outputs.
Simulator = Callable[[np.ndarray], np.ndarray]


def simulator_from(source: str | Callable[..., Any], kwargs: Mapping[str, Any] | None = None, *,
                   what: str = "`training.simulator`") -> Simulator:
    """The simulator ``source`` as a float64 numpy map ``[N, n] -> [N, *out]``.

    Parameters
    ----------
    source
        A callable, or ``"package.module:function"`` imported from ``sys.path``
        (:func:`sensitivity.surrogates.load.import_callable`).
    kwargs
        Keyword arguments bound to it (e.g. ``{"scale": 1.0}``).
    what
        How error messages name it (the config key).

    Raises
    ------
    ModelError
        ``source`` cannot be imported, or a call returns something other than ``[N, ...]`` for ``N`` points.
    """
    from sensitivity.surrogates.load import import_callable

    target = import_callable(source, what=what) if isinstance(source, str) else source
    bound = functools.partial(target, **dict(kwargs or {}))
    label = source if isinstance(source, str) else getattr(source, "__qualname__", repr(source))

    def simulate(points: np.ndarray) -> np.ndarray:
        points = np.asarray(points, dtype=np.float64)
        values = np.asarray(bound(points), dtype=np.float64)
        if values.ndim == 1 and values.shape[0] == len(points):  # one scalar per point: one named output
            values = values[:, None]
        if values.ndim < 2 or values.shape[0] != len(points):
            raise ModelError(f"simulator {label}: expected outputs [N, ...] for {len(points)} points, "
                             f"got shape {list(values.shape)}")
        return values

    return simulate


#: A batched simulator Jacobian: ``[N, n]`` float64 points -> ``[N, *out, n]`` float64 ``dy/dx``.
SimulatorJacobian = Callable[[np.ndarray], np.ndarray]


def simulator_jacobian_from(source: str | Callable[..., Any], kwargs: Mapping[str, Any] | None = None, *,
                            output_shape: tuple[int, ...] | None = None,
                            what: str = "`training.simulator_jacobian`") -> SimulatorJacobian:
    """The simulator's Jacobian function ``source`` as a float64 numpy map ``[N, n] -> [N, *out, n]``.

    Parameters
    ----------
    source
        A callable, or ``"package.module:function"`` imported from ``sys.path``.
    kwargs
        Keyword arguments bound to it (the simulator's, e.g. ``{"scale": 1.0}``).
    output_shape
        The simulator's per-point output shape ``out``; None: only ``[N, ..., n]`` is checked.
    what
        How error messages name it (the config key).

    Raises
    ------
    ModelError
        ``source`` cannot be imported, or a call returns another shape than ``[N, *out, n]`` (one line naming
        ``what``).
    """
    from sensitivity.surrogates.load import import_callable

    target = import_callable(source, what=what) if isinstance(source, str) else source
    bound = functools.partial(target, **dict(kwargs or {}))

    def jacobian(points: np.ndarray) -> np.ndarray:
        points = np.asarray(points, dtype=np.float64)
        values = np.asarray(bound(points), dtype=np.float64)
        n = points.shape[1]
        expected = None if output_shape is None else [len(points), *output_shape, n]
        if (expected is not None and list(values.shape) != expected) or values.ndim < 2 or \
                values.shape[0] != len(points) or values.shape[-1] != n:
            shape = f"{expected}" if expected is not None else f"[{len(points)}, *out, {n}]"
            raise ModelError(f"{what} must return [N, *out, n] = {shape} for {len(points)} points of {n} parameters, "
                             f"got shape {list(values.shape)}")
        return values

    return jacobian
