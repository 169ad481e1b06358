"""Compiled Hessians against closed forms and float64 central finite differences."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from sensitivity.analyses.propagation import second_order
from sensitivity.inputs.uncertainty import gaussian_inputs
from sensitivity.errors import ConfigError
from sensitivity.engine.hessian import compile_hessian

A = np.array([[2.0, -1.0, 0.5], [-1.0, 3.0, 0.0], [0.5, 0.0, 1.0]])


def closed_form_model(x: tf.Tensor) -> tf.Tensor:
    """Four outputs with known Hessians (see ``closed_form_hessian``)."""
    x0, x1, x2 = x[:, 0], x[:, 1], x[:, 2]
    quad = tf.reduce_sum(x * (x @ tf.constant(A, x.dtype)), axis=1)
    return tf.stack([x0**2 * x1, tf.sin(x0) * x1**3 * x2, tf.exp(x2) * x0, quad], axis=1)


def closed_form_hessian(p: np.ndarray) -> np.ndarray:
    x0, x1, x2 = p
    s, c = np.sin(x0), np.cos(x0)
    return np.array([
        [[2 * x1, 2 * x0, 0.0], [2 * x0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        [[-s * x1**3 * x2, 3 * c * x1**2 * x2, c * x1**3],
         [3 * c * x1**2 * x2, 6 * s * x1 * x2, 3 * s * x1**2],
         [c * x1**3, 3 * s * x1**2, 0.0]],
        [[0.0, 0.0, np.exp(x2)], [0.0, 0.0, 0.0], [np.exp(x2), 0.0, x0 * np.exp(x2)]],
        2 * A,
    ])


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return np.random.default_rng(0).uniform(-1.0, 1.0, size=(7, 3))


def quadratic_form(x: tf.Tensor) -> tf.Tensor:
    """``x' A x`` as ``[B, 1]``: Hessian ``2 A`` everywhere."""
    return tf.reduce_sum(x * (x @ tf.constant(A, x.dtype)), axis=1, keepdims=True)


def test_hessian_matches_the_closed_form_and_never_retraces(points):
    # tracing the vectorised reverse pass takes a few seconds: one compiled Hessian for this test
    hessian = compile_hessian(closed_form_model, 3, dtype="float64", max_rows=30)
    assert hessian.output_size == 4 and hessian.chunk_size == 2  # 30 // (3 * (4 + 1)): 4 chunks for 7 points
    result = hessian(points)
    np.testing.assert_allclose(result, [closed_form_hessian(p) for p in points], rtol=1e-12, atol=1e-12)
    hessian(points[:1])
    hessian(points[:5])
    assert hessian.trace_count == 1  # one trace serves every batch size and chunk


def test_float32_hessian_is_accurate_to_single_precision(points):
    result = compile_hessian(quadratic_form, 3, dtype="float32")(points)
    assert result.dtype == np.float64 and result.shape == (7, 1, 3, 3)
    np.testing.assert_allclose(result, np.broadcast_to(2 * A, (7, 1, 3, 3)), rtol=1e-6)


def keras_model() -> tf.keras.Model:
    """A float64 MLP 3 -> [2, 3] (a field-like output that must be flattened to m = 6)."""
    tf.keras.utils.set_random_seed(4)
    return tf.keras.Sequential([
        tf.keras.Input((3,), dtype="float64"),
        tf.keras.layers.Dense(16, activation="tanh", dtype="float64"),
        tf.keras.layers.Dense(16, activation="softplus", dtype="float64"),
        tf.keras.layers.Dense(6, dtype="float64"),
        tf.keras.layers.Reshape((2, 3), dtype="float64"),
    ])


def central_difference_hessian(f, x: np.ndarray, h: float) -> np.ndarray:
    """``[m, n, n]`` by the four-point central second difference in float64."""
    n = len(x)
    eye = np.eye(n) * h
    hess = np.empty((f(x[None]).size, n, n))
    for i in range(n):
        for j in range(n):
            corners = np.stack([x + eye[i] + eye[j], x + eye[i] - eye[j], x - eye[i] + eye[j], x - eye[i] - eye[j]])
            y = f(corners).reshape(4, -1)
            hess[:, i, j] = (y[0] - y[1] - y[2] + y[3]) / (4 * h * h)
    return hess


def test_keras_hessian_matches_central_finite_differences(points):
    model = keras_model()
    hessian = compile_hessian(model, 3, dtype="float64")
    assert hessian.output_size == 6  # read from the traced output shape [None, 2, 3]
    f = lambda x: model(x).numpy()  # noqa: E731
    # h = 1e-3: truncation O(h^2 f'''') ~ 1e-7 for these O(1) weights, rounding eps |f| / h^2 ~ 1e-10;
    # the Hessian entries are O(0.1), so 1e-6 is a 1e-5 relative check
    for p in points[:3]:
        np.testing.assert_allclose(hessian(p[None])[0], central_difference_hessian(f, p, 1e-3), atol=1e-6)


def test_second_order_with_a_compiled_hessian_is_exact_for_a_quadratic():
    # y = x'Ax with x ~ N(mu, S): E y = tr(A S) + mu'A mu, Var y = 2 tr(ASAS) + 4 mu'ASA mu
    mu, cov = np.array([0.5, -1.0, 2.0]), np.diag([0.3, 0.2, 0.5])
    hessian = compile_hessian(quadratic_form, 3, dtype="float64")
    vj = lambda x: ((np.einsum("bi,ij,bj->b", x, A, x))[:, None], (2 * x @ A)[:, None, :])  # noqa: E731
    ds = second_order(gaussian_inputs(mu, cov), vj, hessian)
    assert float(ds.output_mean[0]) == pytest.approx(np.trace(A @ cov) + mu @ A @ mu, rel=1e-12)
    var = 2 * np.trace(A @ cov @ A @ cov) + 4 * mu @ A @ cov @ A @ mu
    assert float(ds.output_std[0]) ** 2 == pytest.approx(var, rel=1e-12)


def test_a_linear_or_constant_model_has_a_zero_hessian(points):
    """No second (or no first) derivative at all: zeros, not an unconnected-gradient error."""
    w = tf.constant([[1.0, -2.0], [0.5, 0.0], [3.0, 1.0]], tf.float64)
    for fn in (lambda x: x @ w, lambda x: 0.0 * x[:, :2] + 1.0):
        np.testing.assert_array_equal(compile_hessian(fn, 3, dtype="float64")(points), np.zeros((7, 2, 3, 3)))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_in": 0}, "`n_in`"),
        ({"n_in": 3, "dtype": "float16"}, "`dtype`"),
        ({"n_in": 3, "output_size": 0}, "`output_size`"),
        ({"n_in": 3, "max_rows": 0}, "`max_rows`"),
    ],
)
def test_bad_arguments_raise_one_line_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message) as err:
        compile_hessian(closed_form_model, **kwargs)
    assert "\n" not in str(err.value)


def test_wrong_point_shape_is_a_config_error():
    with pytest.raises(ConfigError, match=r"points must have shape \[N, 3\], got \[2, 4\]"):
        compile_hessian(closed_form_model, 3, dtype="float64")(np.zeros((2, 4)))


def test_the_hessian_of_an_engine_is_its_models_or_every_members_side_by_side(points):
    """``hessian_of`` an ensemble of two scaled copies of the closed-form model: the single engine's is the mean's
    (the mean gain times the closed form), the ensemble engine's every member's, member-major (column ``k m + j``)."""
    import dataclasses

    import sensitivity
    from sensitivity.engine.ensemble import compile_ensemble
    from sensitivity.engine.hessian import hessian_of

    gains = (1.0, 3.0)
    output = {"name": "y", "names": ["a", "b", "c", "d"]}
    members = [sensitivity.load_surrogate(lambda x, g=g: g * closed_form_model(x), input_names=["p", "q", "r"],
                                          input_units=["1"] * 3, output=output, dtype="float64") for g in gains]
    mean = lambda x: tf.reduce_mean(tf.stack([m.fn(x) for m in members]), axis=0)
    ensemble = dataclasses.replace(members[0], fn=mean, members=tuple(members))
    expected = np.array([closed_form_hessian(p) for p in points])  # [N, 4, 3, 3]
    of_mean = hessian_of(sensitivity.compile_jacobian(ensemble, "reverse", jit_compile=False), max_rows=40)
    assert of_mean.chunk_size == 2  # 40 // (3 * (4 + 1))
    np.testing.assert_allclose(of_mean(points), np.mean(gains) * expected, rtol=1e-12, atol=1e-12)
    of_members = hessian_of(compile_ensemble(ensemble, "reverse", jit_compile=False))
    np.testing.assert_allclose(of_members(points), np.concatenate([g * expected for g in gains], axis=1),
                               rtol=1e-12, atol=1e-12)
