"""Gauss-Newton step map against closed forms of the linearised least-squares problem."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from sensitivity.analyses.calibration import gauss_newton_map, member_steps_note, step_map, step_map_analysis
from sensitivity.datasets import record_checksum
from sensitivity.sweep.stored import StoredSweep
from sensitivity.errors import ConfigError, DataError
from tests.helpers.blocks import ensemble_sweep_file, sweep_file
from tests.helpers.cf import cf_errors


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


def test_step_map_of_a_stored_sweep_block_by_block_equals_the_whole_and_a_killed_run_resumes(tmp_path, monkeypatch):
    values, jac, y, sigma = random_block(5, n_points=7)
    points = np.random.default_rng(5).uniform(size=(7, 3))
    path = sweep_file(tmp_path / "sweep.nc", points, values, jac)
    record_checksum(path)
    computed, killed = [], []
    block_map = step_map.step_map_block

    def killed_at_second_block(blk, *args, **kwargs):
        if computed == [0] and not killed:
            killed.append(True)
            raise KeyboardInterrupt("killed")
        computed.append(blk.start)
        return block_map(blk, *args, **kwargs)

    monkeypatch.setattr(step_map, "step_map_block", killed_at_second_block)
    options = dict(fingerprint="key", attrs={"title": "step map"}, block=3)
    with StoredSweep(path) as sweep:
        assert (sweep.size, sweep.parameter_names, sweep.parameter_units) == (7, ("a", "b", "c"), ("s", "s", "s"))
        analysis = step_map_analysis(sweep, y, sigma=sigma, damping=0.1)
        with pytest.raises(KeyboardInterrupt):
            sweep.map_to(tmp_path / "gn.nc", analysis, **options)
        assert not (tmp_path / "gn.nc").exists()
        resumed = sweep.map_to(tmp_path / "gn.nc", analysis, **options)  # only the missing blocks
        assert computed == [0, 3, 6]
        monkeypatch.undo()
        uninterrupted = sweep.map_to(tmp_path / "gn_whole.nc", analysis, **options)
    with xr.open_dataset(resumed) as ds, xr.open_dataset(uninterrupted) as whole_run:
        xr.testing.assert_identical(ds, whole_run)
        whole = gauss_newton_map(values, jac, y, sigma=sigma, damping=0.1)
        np.testing.assert_array_equal(ds["sample"].values, np.arange(7))
        np.testing.assert_array_equal(ds["x"].values, points)
        np.testing.assert_allclose(ds["gn_step"].values, whole.step, rtol=1e-12)
        np.testing.assert_allclose(ds["damped_step"].values, whole.damped_step, rtol=1e-12)
        np.testing.assert_allclose(ds["cost"].values, 0.5 * np.sum(((values - y) / sigma) ** 2, axis=1), rtol=1e-12)


def test_step_map_refuses_a_sweep_that_does_not_match_its_checksum(tmp_path):
    values, jac, y, sigma = random_block(7, n_points=4)
    path = sweep_file(tmp_path / "sweep.nc", np.zeros((4, 3)), values, jac)
    record_checksum(path)
    sweep_file(path, np.zeros((4, 3)), values + 1.0, jac)  # changed after its record was written
    with StoredSweep(path) as sweep, pytest.raises(DataError, match="does not match its checksum record sweep.nc"):
        sweep.map_to(tmp_path / "gn.nc", step_map_analysis(sweep, y, sigma=sigma), fingerprint="key", attrs={})
    assert not (tmp_path / "gn.nc").exists() and not (tmp_path / "gn.nc.parts").exists()


@pytest.mark.parametrize("block", [0, 2.5, True])
def test_step_map_block_must_be_a_positive_integer(tmp_path, block):
    values, jac, y, _ = random_block(6, n_points=2)
    with StoredSweep(sweep_file(tmp_path / "sweep.nc", np.zeros((2, 3)), values, jac)) as sweep, \
            pytest.raises(ConfigError, match="`block` must be an integer >= 1"):
        sweep.map_to(tmp_path / "gn.nc", step_map_analysis(sweep, y), fingerprint="key", attrs={}, block=block)



def random_members(seed, k=4, n_points=7, m=9):
    """Each of ``k`` members' values ``[k, N, m]`` and Jacobians ``[k, N, m, 3]``, points, observations, sigma."""
    rng = np.random.default_rng(seed)
    values, jac, y, sigma = random_block(seed, n_points=k * n_points, m=m)
    return (values.reshape(k, n_points, m), jac.reshape(k, n_points, m, 3), rng.uniform(size=(n_points, 3)), y,
            sigma)


def test_step_map_of_an_ensemble_sweep_reports_the_spread_of_each_members_own_steps(tmp_path):
    """Oracle: at every point and for each member, numpy's least-squares solution and the closed-form damped step of
    that member's own whitened Jacobian and residual; the member mean and std (ddof=1) over them. The mean-J step
    is the step of the members' mean, as without members."""
    values, jac, points, y, sigma = random_members(8)
    lam = 0.2
    path = ensemble_sweep_file(tmp_path / "sweep.nc", points, values, jac)
    with StoredSweep(path) as sweep:
        assert (sweep.members, sweep.surrogate_std) == (4, True) and "4 members" in member_steps_note(sweep)
        out = sweep.map_to(tmp_path / "gn.nc", step_map_analysis(sweep, y, sigma=sigma, damping=lam),
                           fingerprint="key", attrs={"title": "step map"}, block=3)  # blocks of 3, 3, 1 points
    assert cf_errors(out) == []
    ds = xr.open_dataset(out)
    mean = gauss_newton_map(values.mean(0), jac.mean(0), y, sigma=sigma, damping=lam)
    np.testing.assert_allclose(ds["gn_step"].values, mean.step, rtol=1e-10)
    steps = np.zeros((2, *values.shape[:2], 3))  # (Gauss-Newton, damped), member, point, parameter
    for k, i in np.ndindex(*values.shape[:2]):
        j = jac[k, i] / sigma[:, None]
        r = (values[k, i] - y) / sigma
        steps[0, k, i] = np.linalg.lstsq(j, -r, rcond=None)[0]
        steps[1, k, i] = np.linalg.solve(j.T @ j + lam * np.diag(np.diag(j.T @ j)), -j.T @ r)
    cost = 0.5 * np.sum(((values - y) / sigma) ** 2, axis=2)
    for name, each in (("gn_step", steps[0]), ("damped_step", steps[1]), ("cost", cost)):
        np.testing.assert_allclose(ds[f"{name}_member_mean"].values, each.mean(axis=0), rtol=1e-9)
        np.testing.assert_allclose(ds[f"{name}_member_std"].values, each.std(axis=0, ddof=1), rtol=1e-9)
        for stat in ("mean", "std"):
            var = ds[f"{name}_member_{stat}"]
            assert var.dims == ds[name].dims and var.attrs["long_name"].startswith(ds[name].attrs["long_name"])
            assert {a: v for a, v in var.attrs.items() if a != "long_name"} == \
                   {a: v for a, v in ds[name].attrs.items() if a != "long_name"}
    assert ds["gn_step_member_std"].attrs["units"] == "s" and ds["cost_member_std"].attrs["units"] == "1"


def test_step_map_of_an_ensemble_sweep_without_its_members_says_what_they_need(tmp_path):
    values, jac, points, y, sigma = random_members(9)
    path = ensemble_sweep_file(tmp_path / "sweep.nc", points, values, jac, store_members=False)
    with StoredSweep(path) as sweep:
        assert (sweep.members, sweep.surrogate_std) == (0, True) and "store_members=true" in member_steps_note(sweep)
        out = sweep.map_to(tmp_path / "gn.nc", step_map_analysis(sweep, y, sigma=sigma), fingerprint="key",
                           attrs={})
    ds = xr.open_dataset(out)
    assert not [name for name in ds.data_vars if "member" in str(name)]
    np.testing.assert_allclose(ds["gn_step"].values, gauss_newton_map(values.mean(0), jac.mean(0), y,
                                                                      sigma=sigma).step, rtol=1e-10)
    with StoredSweep(sweep_file(tmp_path / "one.nc", points, values[0], jac[0])) as one:
        assert (one.members, one.surrogate_std, member_steps_note(one)) == (0, False, None)
