"""The model as the propagation methods call it: batched callables, and checks of what they return.

Every method evaluates the model through one of the three batched callables of
:mod:`sensitivity.analyses.callables`, all in physical units:
``values_fn: [K, n] -> [K, m]``, ``value_and_jacobian: [K, n] -> ([K, m], [K, m, n])`` and
``hessian: [K, n] -> [K, m, n, n]``. A wrong shape is a :class:`~sensitivity.errors.ModelError`
naming the callable, never a broadcasting accident further down.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from sensitivity.analyses.callables import HessianFn, ValueAndJacobianFn, ValuesFn
from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.errors import ModelError

__all__ = ["HessianFn", "ValueAndJacobianFn", "ValuesFn", "checked_array", "evaluate", "evaluate_ahead",
           "value_and_jacobian_at_mean"]


def value_and_jacobian_at_mean(value_and_jacobian: ValueAndJacobianFn, inputs: InputUncertainty
                               ) -> tuple[np.ndarray, np.ndarray]:
    """Value ``[m]`` and Jacobian ``[m, n]`` at the input mean."""
    values, jac = value_and_jacobian(inputs.mean[None, :])
    values = checked_array(values, (1, None), "value_and_jacobian values")
    return values[0], checked_array(jac, (1, values.shape[1], inputs.n), "value_and_jacobian jacobian")[0]


def evaluate(values_fn: ValuesFn, points: np.ndarray, *, keep_float32: bool = False) -> np.ndarray:
    """``values_fn(points)`` as a float64 ``[K, m]`` array, with a clear error on a wrong shape.

    ``keep_float32``: float32 values are returned as they are, uncopied (for a caller that reads them
    in float64 anyway, at half the memory traffic).
    """
    values = values_fn(points)
    if keep_float32 and getattr(values, "dtype", None) == np.float32:
        return checked_array(values, (len(points), None), "values_fn", dtype=np.float32)
    return checked_array(values, (len(points), None), "values_fn")


def evaluate_ahead(values_fn: ValuesFn, blocks: Iterable[np.ndarray], *, keep_float32: bool = False,
                   depth: int = 3) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(points, values)`` for each block of ``blocks``, in order, as :func:`evaluate` gives them.

    The model runs in one worker thread up to ``depth`` blocks ahead of the consumer: while it evaluates
    the next blocks (TensorFlow and BLAS release the GIL), the calling thread draws the blocks after them
    and reduces the values it was given. A compiled surrogate keeps about 1.5 of 2 cores busy on its own
    (``benchmarks/bench_workflows.py --only mc``), so the consumer's numpy work fills the idle core instead
    of following each model call. Meanwhile numpy's BLAS runs on one thread (``threadpoolctl``): a second
    one would only spin against the model's threads (Monte Carlo of the demo surrogate: 2.35x the bare
    evaluations with OpenBLAS's default two threads, 1.70x with one), until the generator is exhausted or
    closed (use it in ``contextlib.closing`` when it may not be). ``values_fn`` is called from that one
    thread only, one block at a time, and must return a new array per call (it is read after the next
    call has started). An error in the model is raised here, at its block; the blocks not yet evaluated
    are dropped.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="values_fn") as pool, threadpool_limits(1, "blas"):
        pending: deque = deque()
        try:
            for points in blocks:
                pending.append((points, pool.submit(evaluate, values_fn, points, keep_float32=keep_float32)))
                if len(pending) > depth:
                    points, future = pending.popleft()
                    yield points, future.result()
            while pending:
                points, future = pending.popleft()
                yield points, future.result()
        finally:
            for _, future in pending:
                future.cancel()


def checked_array(array: np.ndarray, shape: tuple[int | None, ...], what: str, dtype: type = float) -> np.ndarray:
    """``array`` as ``dtype`` when it has ``shape`` (None: any size), else a :class:`ModelError` naming ``what``."""
    a = np.asarray(array, dtype=dtype)
    if a.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, a.shape)):
        expected = "[" + ", ".join("m" if s is None else str(s) for s in shape) + "]"
        raise ModelError(f"`{what}` returned shape {list(a.shape)}, expected {expected}")
    return a
