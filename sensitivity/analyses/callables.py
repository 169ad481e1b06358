"""The model as every analysis calls it: batched callables on points in physical units.

``values_fn: [K, n] -> [K, m]`` (outputs at ``K`` points), ``value_and_jacobian: [K, n] -> ([K, m], [K, m, n])``
(outputs and d output / d parameter [output units / parameter units]) and ``hessian: [K, n] -> [K, m, n, n]``.
A compiled surrogate (:mod:`sensitivity.engine.jacobian`, :mod:`sensitivity.engine.hessian`) provides them; any numpy
function of that shape will do. A compiled ensemble (:mod:`sensitivity.engine.ensemble`) provides its members' mean
(the surrogate's prediction) and its members side by side (:class:`Members`), from which each verb adds the members'
results itself. Each analysis checks what they return (e.g.
:mod:`~sensitivity.analyses.propagation.evaluation`, :mod:`~sensitivity.analyses.calibration.model_calls`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sensitivity.outputs.members import (flat_mean_hessian, flat_mean_value_and_jacobian, flat_mean_values,
                                         member_count)
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
    members
        An ensemble's members side by side (:class:`Members`), the callables above being their mean: the verbs
        add each member's result and their spread. None: one model.
    """

    values: ValuesFn | None = None
    value_and_jacobian: ValueAndJacobianFn | None = None
    hessian: HessianFn | None = None
    output: OutputSpec | None = None
    step_jacobian: ValueAndJacobianFn | None = None
    members: "Members | None" = None

    @classmethod
    def of(cls, engine: Any, *, hessian: HessianFn | None = None,
           step_engine: Any = None) -> "BatchedModel":
        """The model of any compiled engine, optionally with its compiled Hessian
        (:func:`sensitivity.engine.hessian.hessian_of` of the same engine) and a step engine of lower precision.

        One model's (:func:`sensitivity.engine.jacobian.compile_jacobian`): its flat values and Jacobians and its
        output spec. An ensemble's (:func:`sensitivity.engine.ensemble.compile_ensemble`): its members' mean
        (:func:`~sensitivity.outputs.members.flat_mean_values` and its Jacobians, Hessians) and its :class:`Members`.
        """
        step = None if step_engine is None else flat_mean_value_and_jacobian(step_engine)
        k = member_count(engine)
        if not k:
            return cls(values=engine.flat_values, value_and_jacobian=engine.flat_value_and_jacobian, hessian=hessian,
                       output=engine.surrogate.output, step_jacobian=step)
        output = engine.surrogate.output
        side_by_side = cls(values=engine.stacked_values, value_and_jacobian=engine.stacked_value_and_jacobian,
                           hessian=hessian, output=output)
        return cls(values=flat_mean_values(engine), value_and_jacobian=flat_mean_value_and_jacobian(engine),
                   hessian=None if hessian is None else flat_mean_hessian(hessian, k), output=output,
                   step_jacobian=step, members=Members(k, side_by_side))

    def labels(self) -> dict[str, list[str] | None]:
        """``output_names`` and ``output_units`` of the flat outputs (None each without an output spec)."""
        if self.output is None:
            return {"output_names": None, "output_units": None}
        return {"output_names": self.output.flat_names(), "output_units": self.output.flat_units()}


@dataclass(frozen=True)
class Members:
    """The ``K`` members of an ensemble side by side: one model of ``K m`` outputs, member-major (column ``k m + j``
    member ``k``'s output ``j``, :meth:`~sensitivity.engine.ensemble.CompiledEnsemble.stacked_values`).

    Parameters
    ----------
    count
        ``K`` (>= 2).
    model
        The members' callables ``[N, n] -> [N, K m]`` (``[N, K m, n]``, ``[N, K m, n, n]``) and ``output``, one
        member's spec (``m`` outputs).
    """

    count: int
    model: BatchedModel

    def values(self, points: np.ndarray) -> np.ndarray:
        """Every member's values ``[K, N, m]`` at ``points [N, n]``."""
        stacked = np.asarray(self.model.values(points))
        return stacked.reshape(len(stacked), self.count, -1).transpose(1, 0, 2)

    def value_and_jacobian(self, k: int) -> ValueAndJacobianFn:
        """Member ``k``'s ``[N, n] -> ([N, m], [N, m, n])`` (every member evaluated, its columns kept)."""
        def member(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            values, jacobian = self.model.value_and_jacobian(points)
            m = values.shape[1] // self.count
            return values[:, k * m:(k + 1) * m], jacobian[:, k * m:(k + 1) * m]

        return member
