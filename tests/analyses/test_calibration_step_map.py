"""Gauss-Newton step map against closed forms of the linearised least-squares problem."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from sensitivity.analyses.calibration import gauss_newton_map, read_stored_sweep, write_step_map
from sensitivity.datasets import PartWriter, sweep_dataset, write_atomic
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs import OutputDim, OutputSpec


def random_block(seed, n_points=7, m=9, n=3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n_points, m)), rng.standard_normal((n_points, m, n)) * rng.uniform(0.1, 10.0, n),
            rng.standard_normal(m), rng.uniform(0.5, 2.0, m))


def test_steps_solve_the_normal_equations_at_every_point():
    values, jac, y, sigma = random_block(0)
    lam = 0.3
    out = gauss_newton_map(values, jac, y, sigma=sigma, damping=lam)
    for k in range(len(values)):
        j = jac[k] / sigma[:, None]
        r = (values[k] - y) / sigma
        gn = np.linalg.lstsq(j, -r, rcond=None)[0]
        damped = np.linalg.solve(j.T @ j + lam * np.diag(np.diag(j.T @ j)), -j.T @ r)
        np.testing.assert_allclose(out.step[k], gn, rtol=1e-10)
        np.testing.assert_allclose(out.damped_step[k], damped, rtol=1e-10)
        # predicted decrease of the linear model, cost(0) - cost(step)
        for step, predicted in ((gn, out.predicted_decrease[k]), (damped, out.damped_predicted_decrease[k])):
            np.testing.assert_allclose(predicted, 0.5 * (r @ r - np.sum((r + j @ step) ** 2)), rtol=1e-10)
        equilibrated = j / np.linalg.norm(j, axis=0)
        np.testing.assert_allclose(out.condition_number[k], np.linalg.cond(equilibrated), rtol=1e-10)
    np.testing.assert_allclose(out.cost, 0.5 * np.sum(((values - y) / sigma) ** 2, axis=1), rtol=1e-12)


def test_a_linear_model_is_solved_in_one_step_from_anywhere():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 2))
    x = rng.uniform(-5, 5, (4, 2))
    y = a @ np.array([1.0, -2.0])
    out = gauss_newton_map(x @ a.T, np.broadcast_to(a, (4, 6, 2)), y, cov=np.eye(6) * 0.04)
    np.testing.assert_allclose(x + out.step, np.broadcast_to([1.0, -2.0], (4, 2)), rtol=1e-10)
    np.testing.assert_allclose(out.predicted_decrease, out.cost, rtol=1e-10)  # exact fit: all cost removed


def test_rank_deficient_and_non_finite_points_are_reported_not_raised():
    values, jac, y, _ = random_block(2, n_points=3)
    jac[0, :, 1] = 2.0 * jac[0, :, 0]  # two columns proportional: rank 2 of 3
    values[2, 0] = np.nan
    out = gauss_newton_map(values, jac, y)
    assert out.rank.tolist() == [2, 3, -1]
    assert np.isinf(out.condition_number[0]) or out.condition_number[0] > 1e12
    assert np.isfinite(out.step[0]).all()  # minimum-norm step
    assert np.isnan(out.step[2]).all() and np.isnan(out.predicted_decrease[2]) and np.isnan(out.cost[2])


def test_missing_observations_and_dataset():
    values, jac, y, sigma = random_block(3)
    y_missing = y.copy()
    y_missing[4] = np.nan
    keep = np.arange(9) != 4
    full = gauss_newton_map(values[:, keep], jac[:, keep], y[keep], sigma=sigma[keep])
    out = gauss_newton_map(values, jac, y_missing, sigma=sigma)
    np.testing.assert_allclose(out.step, full.step, rtol=1e-12)
    ds = out.to_dataset(["a", "b", "c"], ["m", "m", "m"])
    assert ds["gn_step"].attrs["units"] == "m" and ds["cost"].attrs["units"] == "1"
    assert list(ds["parameter_name"].values) == ["a", "b", "c"] and ds.sizes["sample"] == 7


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [(dict(damping=0.0), ConfigError), (dict(sigma=-np.ones(9)), DataError), (dict(y_obs=np.ones(4)), DataError)],
)
def test_bad_inputs(kwargs, error):
    values, jac, y, _ = random_block(4)
    args = dict(y_obs=y)
    args.update(kwargs)
    with pytest.raises(error):
        gauss_newton_map(values, jac, args.pop("y_obs"), **args)


def stored_sweep(path, points, values, jacobian):
    """A sweep file of the given arrays on a ``time`` output axis, as the sweep workflow writes it."""
    spec = OutputSpec(name="y", units="m", dims=(OutputDim("time", tuple(range(values.shape[1])), "day"),))
    ds = sweep_dataset(np.arange(len(points)), points, values, jacobian, parameter_names=["a", "b", "c"],
                       parameter_units=["s", "s", "s"], parameter_long_names=None, output=spec)
    return write_atomic(ds, path)


def test_step_map_of_a_stored_sweep_block_by_block_equals_the_whole_and_resumes(tmp_path):
    values, jac, y, sigma = random_block(5, n_points=7)
    points = np.random.default_rng(5).uniform(size=(7, 3))
    sweep = read_stored_sweep(stored_sweep(tmp_path / "sweep.nc", points, values, jac))
    assert (sweep.size, sweep.parameter_names, sweep.parameter_units) == (7, ["a", "b", "c"], ["s", "s", "s"])
    writer = PartWriter(tmp_path / "gn.nc", "key")
    write_step_map(sweep, y, writer, sigma=sigma, damping=0.1, block=3)
    assert writer.done() == {(0, 3), (3, 6), (6, 7)}
    kept = {p.name: p.stat().st_ino for p in writer.parts.glob("part-*.nc")}  # a rewritten part is a new file
    lost = writer.parts / "part-000000000003-000000000006.nc"
    lost.unlink()  # an interrupted run: only this block is computed again
    write_step_map(sweep, y, writer, sigma=sigma, damping=0.1, block=3)
    assert all(p.stat().st_ino == kept[p.name] for p in writer.parts.glob("part-*.nc") if p != lost)
    ds = xr.open_dataset(writer.finalize({"title": "step map"}))
    whole = gauss_newton_map(values, jac, y, sigma=sigma, damping=0.1)
    np.testing.assert_array_equal(ds["sample"].values, np.arange(7))
    np.testing.assert_array_equal(ds["x"].values, points)
    np.testing.assert_allclose(ds["gn_step"].values, whole.step, rtol=1e-12)
    np.testing.assert_allclose(ds["damped_step"].values, whole.damped_step, rtol=1e-12)
    np.testing.assert_allclose(ds["cost"].values, 0.5 * np.sum(((values - y) / sigma) ** 2, axis=1), rtol=1e-12)


@pytest.mark.parametrize("block", [0, 2.5, True])
def test_step_map_block_must_be_a_positive_integer(tmp_path, block):
    values, jac, y, _ = random_block(6, n_points=2)
    sweep = read_stored_sweep(stored_sweep(tmp_path / "sweep.nc", np.zeros((2, 3)), values, jac))
    with pytest.raises(ConfigError, match="`block` must be an integer >= 1"):
        write_step_map(sweep, y, PartWriter(tmp_path / "gn.nc", "key"), block=block)
