"""Reliability test helpers: a compiled float64 function surrogate over a space of given marginals."""
from __future__ import annotations

from sensitivity.inputs.space import ParameterSpace


def engine(fn, space, output):
    """The compiled float64 Jacobian of the TensorFlow function ``fn`` over ``space``, with output ``output``."""
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.surrogates.load import load_surrogate

    surrogate = load_surrogate(fn, input_names=space.names, input_units=space.units, output=output, dtype="float64")
    return compile_jacobian(surrogate, jit_compile=False)


def space_of(kinds):
    """A space of parameters ``x0, x1, ...`` [1] with the distributions ``kinds``."""
    return ParameterSpace.from_records([{"name": f"x{i}", "units": "1", "distribution": d} for i, d in enumerate(kinds)])
