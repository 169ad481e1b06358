"""Local sensitivities: the linear model in closed form, Hill & Tiedeman's scaled sensitivities, FD of the test gradients."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import derivatives
from sensitivity.errors import ConfigError, DataError
from tests.helpers.functions import (
    ishigami,
    ishigami_jacobian,
    linear,
    linear_jacobian,
    sobol_g,
    sobol_g_jacobian,
    uniform_space,
)

W = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]])
C = np.array([1.0, -4.0])
SPACE = uniform_space(3, 0.0, 6.0, units="m")


def test_sweep_of_a_linear_model():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 0.5, 2.0], [2.0, 1.5, 1.0]])
    y = linear(x, W, C)
    ds = derivatives.analyze(x, y, linear_jacobian(x, W), SPACE, sigma_y=[2.0, 4.0], output_units=["s", "s"])
    assert dict(ds.sizes) == {"sample": 3, "output": 2, "parameter": 3}
    np.testing.assert_array_equal(ds.derivative.values, np.broadcast_to(W, (3, 2, 3)))
    np.testing.assert_allclose(ds.elasticity.values, W[None] * x[:, None, :] / y[:, :, None], rtol=1e-14)
    sigma_x = 6.0 / np.sqrt(12)  # sd of U(0, 6)
    np.testing.assert_allclose(ds.sigma_normalized.values[0], W * sigma_x / np.array([[2.0], [4.0]]), rtol=1e-14)
    assert ds.derivative.attrs["units"] == "s m-1" and ds.elasticity.attrs["units"] == "1"


def test_composite_scaled_sensitivity_by_hand():
    # Hill & Tiedeman (2007): dss_kj = J_kj x_j w_k^(1/2), css_j = sqrt(sum_k dss_kj^2 / m).
    jac = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = np.array([2.0, 1.0])
    space = uniform_space(2, 0.0, 5.0)
    ds = derivatives.analyze(x, np.array([1.0, 1.0]), jac, space, weights=[1.0, 4.0])
    np.testing.assert_allclose(ds.dss.values, [[2.0, 2.0], [12.0, 8.0]])
    np.testing.assert_allclose(ds.css.values, [np.sqrt(74.0), np.sqrt(34.0)])
    assert "sample" not in ds.dims and ds.css.attrs["units"] == "1"


def test_sigma_y_from_an_output_sample_and_zero_outputs():
    rng = np.random.default_rng(0)
    sample_y = rng.normal(size=(50, 2)) * [1.0, 3.0]
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([0.0, 2.0])  # y = 0: the elasticity of output 0 is undefined (NaN), not an error
    ds = derivatives.analyze(x, y, W, SPACE, output_sample=sample_y)
    sigma_y = sample_y.std(axis=0, ddof=1)
    np.testing.assert_allclose(ds.sigma_normalized.values, W * (6 / np.sqrt(12)) / sigma_y[:, None], rtol=1e-14)
    assert np.isnan(ds.elasticity.values[0]).all() and np.isfinite(ds.elasticity.values[1]).all()


@pytest.mark.parametrize(
    ("f", "jac", "low", "high"),
    [
        (ishigami, ishigami_jacobian, -np.pi, np.pi),
        (lambda x: sobol_g(x, (0.0, 1.0, 9.0)), lambda x: sobol_g_jacobian(x, (0.0, 1.0, 9.0)), 0.0, 1.0),
    ],
)
def test_test_function_gradients_match_central_differences(f, jac, low, high):
    # The analytic gradients feed the DGSM and active-subspace tests; check them against float64
    # central differences (step 1e-6: truncation ~h^2 f''' ~ 1e-11, rounding ~eps f / h ~ 1e-9).
    x = np.random.default_rng(1).uniform(low, high, size=(20, 3))
    h = 1e-6
    fd = np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(3)], axis=-1)
    np.testing.assert_allclose(jac(x), fd, atol=1e-6)


def test_bad_inputs_are_clear_errors():
    x = np.array([1.0, 2.0, 3.0])
    y = linear(x[None], W, C)[0]
    with pytest.raises(ConfigError, match="at most one of `sigma_y` and `output_sample`"):
        derivatives.analyze(x, y, W, SPACE, sigma_y=[1.0, 1.0], output_sample=np.ones((4, 2)))
    with pytest.raises(ConfigError, match="`sigma_y` must be > 0, got -1.0 at output 'b'"):
        derivatives.analyze(x, y, W, SPACE, sigma_y=[1.0, -1.0], output_names=["a", "b"])
    with pytest.raises(ConfigError, match=r"`weights` must give one value per output \(2\)"):
        derivatives.analyze(x, y, W, SPACE, weights=[1.0])
    with pytest.raises(DataError, match="`points` must have 3 parameters"):
        derivatives.analyze(x[:2], y, W, SPACE)
    with pytest.raises(DataError, match="`jacobian` must have 2 outputs"):
        derivatives.analyze(x, y, W[:1], SPACE)
