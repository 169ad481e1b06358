"""The step map on a 2-D slice against closed forms: a linear model and a model with two minima."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.calibration import least_identifiable, slice_box, step_slice
from sensitivity.errors import ConfigError


def linear_model(a_matrix):
    def f(x):
        return x @ a_matrix.T, np.broadcast_to(a_matrix, (len(x),) + a_matrix.shape).copy()
    return f


def test_linear_model_every_gauss_newton_step_lands_on_the_minimum():
    """F(x) = A x: the cost on the slice is the closed-form quadratic, every Gauss-Newton step from the grid
    lands on the minimum of the slice (the least-squares estimate), and the basin is the whole slice."""
    rng = np.random.default_rng(3)
    a_matrix = rng.standard_normal((8, 3)) * [1.0, 10.0, 0.1]
    sigma = rng.uniform(0.5, 2.0, 8)
    y = a_matrix @ np.array([1.0, -0.5, 4.0]) + sigma * rng.standard_normal(8)
    w = a_matrix / sigma[:, None]
    x_hat = np.linalg.lstsq(w, y / sigma, rcond=None)[0]
    pair = (2, 0)
    box = np.array([[x_hat[2] - 3.0, x_hat[2] + 5.0], [x_hat[0] - 1.0, x_hat[0] + 0.5]])
    out = step_slice(linear_model(a_matrix), y, x_hat, pair, box, points=7, sigma=sigma)
    mesh = np.stack(np.meshgrid(out.grid_a, out.grid_b, indexing="ij"), axis=-1).reshape(-1, 2)
    np.testing.assert_allclose(out.grid_a, np.linspace(*box[0], 7))
    np.testing.assert_allclose(mesh + out.steps.step, np.broadcast_to(x_hat[[2, 0]], mesh.shape), rtol=1e-9)
    x = np.repeat(x_hat[None], len(mesh), axis=0)
    x[:, [2, 0]] = mesh
    cost = 0.5 * np.sum(((x @ a_matrix.T - y) / sigma) ** 2, axis=1)
    cost_min = 0.5 * np.sum(((a_matrix @ x_hat - y) / sigma) ** 2)
    np.testing.assert_allclose(out.steps.cost, cost, rtol=1e-12)
    np.testing.assert_allclose(out.steps.predicted_decrease, cost - cost_min, rtol=1e-8, atol=1e-10 * cost_min)
    np.testing.assert_allclose(out.best, x_hat[[2, 0]], rtol=1e-9)
    np.testing.assert_allclose(out.fit, np.broadcast_to(x_hat[[2, 0]], mesh.shape), rtol=1e-8)
    assert out.in_basin.all()


def two_minima(x):
    """F = (a^2, b, c) with y = (1, 0, 0.5): minima at a = +1 and a = -1 on every slice over (a, b)."""
    a = x[:, 0]
    jac = np.zeros((len(x), 3, 3))
    jac[:, 0, 0], jac[:, 1, 1], jac[:, 2, 2] = 2 * a, 1.0, 1.0
    return np.stack([a**2, x[:, 1], x[:, 2]], axis=1), jac


def test_basin_of_the_best_minimum_is_the_half_plane_it_lies_in():
    y = np.array([1.0, 0.0, 0.5])
    out = step_slice(two_minima, y, np.array([1.0, 0.0, 0.5]), (0, 1), np.array([[-1.8, 2.2], [-1.0, 1.0]]),
                     points=11, sigma=0.1)
    a = np.repeat(out.grid_a, out.grid_b.size)
    np.testing.assert_allclose(out.best, [1.0, 0.0], atol=1e-10)
    # a = 0 has a zero Jacobian column (a stationary point): no grid point there (grid step 0.4 from -1.8)
    assert out.in_basin.tolist() == (a > 0).tolist()
    np.testing.assert_allclose(out.fit[a < 0, 0], -1.0, atol=1e-8)
    # Gauss-Newton on a^2 = 1: a + (1 - a^2) / (2 a) = (a^2 + 1) / (2 a); b -> 0 in one step
    mesh_b = np.tile(out.grid_b, out.grid_a.size)
    np.testing.assert_allclose(a + out.steps.step[:, 0], (a**2 + 1) / (2 * a), rtol=1e-10)
    np.testing.assert_allclose(mesh_b + out.steps.step[:, 1], 0.0, atol=1e-12)


def test_a_log_parameter_slice_starts_on_its_bound():
    """A slice clipped at a log parameter's lower bound has grid points on it, where exp(log(0.01)) rounds
    above 0.01: every fit starts there and reaches the closed-form minimum of F = x inside the box."""
    assert np.exp(np.log(0.01)) > 0.01  # the rounding this is about
    y, sigma = np.array([0.02, 0.5]), 0.01
    out = step_slice(linear_model(np.eye(2)), y, y.copy(), (0, 1), np.array([[0.01, 0.1], [0.1, 1.0]]), points=5,
                     sigma=sigma, log_parameters=np.array([True, True]))
    assert out.grid_a[0] == 0.01 and out.grid_b[0] == 0.1
    np.testing.assert_allclose(out.fit, np.broadcast_to(y, out.fit.shape), rtol=1e-6)
    assert out.in_basin.all()


def test_a_start_outside_a_log_parameters_bounds_is_named():
    from sensitivity.analyses.calibration import BatchedModel, ObservationModel, calibrate
    from sensitivity.inputs.space import ParameterSpace

    with pytest.raises(ConfigError, match=r"`starts`: 'k' = 0.005 at start 0 is outside its bounds \[0.01, 0.1\]"):
        calibrate(BatchedModel(value_and_jacobian=linear_model(np.eye(2))),
                  ObservationModel.from_arrays(np.array([0.02, 0.5]), sigma=0.01), starts=np.array([[0.005, 0.5]]),
                  space=ParameterSpace.from_records([{"name": "k", "units": "1", "low": 0.01, "high": 0.1},
                                                     {"name": "porosity", "units": "1", "low": 0.1, "high": 1.0}]),
                  log_parameters=np.array([True, True]))


def test_dataset_is_labelled_per_parameter():
    y = np.array([1.0, 0.0, 0.5])
    out = step_slice(two_minima, y, np.array([1.0, 0.0, 0.5]), (1, 0), np.array([[-1.0, 1.0], [0.2, 2.2]]),
                     points=5, sigma=0.1)
    ds = out.to_dataset(["a", "b", "c"], ["m", "s", "1"])
    assert ds["cost"].dims == ("slice_a", "slice_b") and ds["cost"].attrs["units"] == "1"
    assert ds["slice_a"].attrs == {"long_name": "b", "units": "s"}
    assert ds["gn_step_b"].attrs["units"] == "m" and ds["fit_a"].attrs["units"] == "s"
    assert ds.attrs["slice_parameters"] == "b a" and float(ds.attrs["basin_share"]) == 1.0
    np.testing.assert_allclose(ds["cost"].sel(slice_a=0.0, slice_b=1.2).values, 0.5 * (1.2**2 - 1) ** 2 / 0.01)
    assert list(ds["parameter_name"].values) == ["a", "b", "c"]


def test_least_identifiable_and_box():
    assert least_identifiable(np.array([0.9, 0.2, 1.0, 0.5])) == (1, 3)
    assert least_identifiable(np.array([np.nan, 0.2, 1.0])) == (0, 1)  # undefined counts as unidentifiable
    # full rank: every identifiability 1, the weakest singular direction decides
    vectors = np.array([[0.9, 0.1, 0.3, 0.3], [0.1, -0.7, 0.2, 0.68], [0.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    assert least_identifiable(np.ones(4), np.array([3.0, 0.01, 1.0, 0.0]), vectors) == (1, 3)
    bounds = np.array([[0.0, 10.0], [-1.0, 1.0], [5.0, 6.0]])
    np.testing.assert_allclose(slice_box(np.array([1.0, 0.0, 5.9]), bounds, (0, 2), 0.25),
                               [[0.0, 3.5], [5.65, 6.0]])


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(pair=(0, 0)), "pair"),
    (dict(points=1), "points"),
    (dict(box=np.array([[1.0, 0.0], [0.0, 1.0]])), "box"),
])
def test_bad_input_names_the_argument(kwargs, match):
    args = dict(pair=(0, 1), points=3, box=np.array([[0.5, 1.5], [-1.0, 1.0]]))
    args.update(kwargs)
    with pytest.raises(ConfigError, match=match):
        step_slice(two_minima, np.array([1.0, 0.0, 0.5]), np.array([1.0, 0.0, 0.5]), args.pop("pair"),
                   args.pop("box"), **args)
    with pytest.raises(ConfigError, match="width"):
        slice_box(np.zeros(2), np.array([[0.0, 1.0], [0.0, 1.0]]), (0, 1), 0.0)
