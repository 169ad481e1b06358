"""The model as every analysis calls it: batched callables on points in physical units.

``values_fn: [K, n] -> [K, m]`` (outputs at ``K`` points), ``value_and_jacobian: [K, n] -> ([K, m], [K, m, n])``
(outputs and d output / d parameter [output units / parameter units]) and ``hessian: [K, n] -> [K, m, n, n]``.
A compiled surrogate (:mod:`sensitivity.engine.jacobian`, :mod:`sensitivity.engine.hessian`) provides them; any numpy
function of that shape will do. Each analysis checks what they return (e.g.
:mod:`~sensitivity.analyses.propagation.evaluation`, :mod:`~sensitivity.analyses.calibration.model_calls`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sensitivity.outputs.spec import OutputSpec

ValuesFn = Callable[[np.ndarray], np.ndarray]
ValueAndJacobianFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
HessianFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class BatchedModel:
    """The model a study verb runs: its batched callables and its output description. A study uses only the
    callables it needs, and names a missing one in its error.

    Parameters
    ----------
    values
        ``[K, n] -> [K, m]``, outputs in output units (values only, the cheap call).
    value_and_jacobian
        ``[K, n] -> ([K, m], [K, m, n])``, outputs and d output / d parameter [output units / parameter units].
    hessian
        ``[K, n] -> [K, m, n, n]`` [output units / parameter units^2].
    output
        What the model returns per point (:class:`~sensitivity.outputs.spec.OutputSpec`): the results are labeled
        by it and put back on its dims. None: a flat ``output`` axis labeled ``y0 ..``, units ``1``.
    step_jacobian
        A cheaper ``value_and_jacobian`` whose Jacobian may build calibration steps (a float32 engine).
    """

    values: ValuesFn | None = None
    value_and_jacobian: ValueAndJacobianFn | None = None
    hessian: HessianFn | None = None
    output: OutputSpec | None = None
    step_jacobian: ValueAndJacobianFn | None = None

    @classmethod
    def of(cls, engine: Any, *, hessian: HessianFn | None = None,
           step_engine: Any = None) -> "BatchedModel":
        """The model of a compiled surrogate (:func:`sensitivity.engine.jacobian.compile_jacobian`): its flat values
        and Jacobians, its output spec, and optionally a compiled Hessian and a step engine of lower precision."""
        return cls(values=engine.flat_values, value_and_jacobian=engine.flat_value_and_jacobian, hessian=hessian,
                   output=engine.surrogate.output,
                   step_jacobian=None if step_engine is None else step_engine.flat_value_and_jacobian)

    def labels(self) -> dict[str, list[str] | None]:
        """``output_names`` and ``output_units`` of the flat outputs (None each without an output spec)."""
        if self.output is None:
            return {"output_names": None, "output_units": None}
        return {"output_names": self.output.flat_names(), "output_units": self.output.flat_units()}
