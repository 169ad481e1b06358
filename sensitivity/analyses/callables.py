"""The model as every analysis calls it: batched callables on points in physical units.

``values_fn: [K, n] -> [K, m]`` (outputs at ``K`` points), ``value_and_jacobian: [K, n] -> ([K, m], [K, m, n])``
(outputs and d output / d parameter [output units / parameter units]) and ``hessian: [K, n] -> [K, m, n, n]``.
A compiled surrogate (:mod:`sensitivity.engine.jacobian`, :mod:`sensitivity.engine.hessian`) provides them; any numpy
function of that shape will do. Each analysis checks what they return (e.g.
:mod:`~sensitivity.analyses.propagation.evaluation`, :mod:`~sensitivity.analyses.calibration.model_calls`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

ValuesFn = Callable[[np.ndarray], np.ndarray]
ValueAndJacobianFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
HessianFn = Callable[[np.ndarray], np.ndarray]
