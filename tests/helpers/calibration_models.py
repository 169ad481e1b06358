"""Small analytic models for the calibration workflow tests (TF-traceable, closed-form derivatives)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import tensorflow as tf

#: Output times of :func:`decay` [day], on its output dim ``day`` (a duration, as in the demo model).
TIMES = np.arange(0.0, 20.0)

#: Config overrides that load :func:`decay` with its output series and a three-parameter space.
DECAY_OVERRIDES = [
    "model=function",
    "model.source=tests.helpers.calibration_models:decay",
    "model.output={name: y, units: '1', long_name: decaying signal, "
    "dims: [{name: day, values: {start: 0, stop: 20}, units: day, long_name: time since release}]}",
    "space.parameters=[{name: a, units: '1', low: 0.5, high: 5.0}, "
    "{name: k, units: day-1, low: 0.02, high: 1.0, scale: log}, {name: c, units: '1', low: -1.0, high: 1.0}]",
]


def decay(x: tf.Tensor) -> tf.Tensor:
    """``y(t) = a exp(-k t) + c`` at :data:`TIMES`, as ``[B, 20]``."""
    t = tf.constant(TIMES[None, :], dtype=x.dtype)
    return x[:, :1] * tf.exp(-x[:, 1:2] * t) + x[:, 2:3]


def decay_numpy(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values ``[K, 20]`` and exact Jacobian ``[K, 20, 3]`` of :func:`decay` in float64 numpy."""
    a, k, c = p[:, :1], p[:, 1:2], p[:, 2:3]
    e = np.exp(-k * TIMES)
    return a * e + c, np.stack([e, -a * TIMES * e, np.ones_like(e)], axis=-1)


#: Config overrides that load :func:`product`: two parameters of which only the product is identifiable.
PRODUCT_OVERRIDES = [
    "model=function",
    "model.source=tests.helpers.calibration_models:product",
    "model.output={name: y, units: '1', long_name: growing signal, "
    "dims: [{name: day, values: {start: 0, stop: 20}, units: day, long_name: time since release}]}",
    "space.parameters=[{name: a, units: '1', low: 0.5, high: 5.0}, {name: b, units: '1', low: 0.5, high: 5.0}]",
]


def product(x: tf.Tensor) -> tf.Tensor:
    """``y(t) = a b t`` at :data:`TIMES`, as ``[B, 20]``: the data determine ``a b`` only."""
    t = tf.constant(TIMES[None, :], dtype=x.dtype)
    return x[:, :1] * x[:, 1:2] * t


#: Config overrides of a linear model of two parameters with five named outputs in mixed units.
LINEAR_W = np.array([[1.0, 0.5], [0.2, 2.0], [1.5, -1.0], [0.0, 1.0], [3.0, 0.3]])
LINEAR = ["model=function", "model.source=sensitivity.simulators.analytic:linear",
          f"+model.kwargs.weights={LINEAR_W.tolist()}",
          "model.output={name: y, units: [m, m, s, s, m], names: [o1, o2, o3, o4, o5]}",
          "space.parameters=[{name: p, units: '1', low: -10.0, high: 10.0}, {name: q, units: '1', low: -10.0, "
          "high: 10.0}]", "starts.n=4",
          "step_dtype=null", "jacobian.jit_compile=false", "plots=false"]  # closed forms to 1e-9: float64 steps


def linear_observations(tmp_path):
    """Noisy observations of the :data:`LINEAR` model at p = 1.2, q = -0.7, as a CSV in shuffled order; returns
    ``(path, y [5] in model order, sigma [5])``."""
    rng = np.random.default_rng(1)
    sigma = rng.uniform(0.1, 0.5, 5)
    y = LINEAR_W @ np.array([1.2, -0.7]) + sigma * rng.standard_normal(5)
    path = tmp_path / "linear.csv"
    pd.DataFrame({"output": ["o5", "o1", "o2", "o3", "o4"], "value": np.roll(y, 1),
                  "sigma": np.roll(sigma, 1)}).to_csv(path, index=False)
    return path, y, sigma
