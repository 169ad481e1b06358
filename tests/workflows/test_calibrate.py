"""The `calibrate` workflow end to end: synthetic observations from known parameters, closed forms for a
linear model, the Gauss-Newton map of a stored sweep against numpy, CF output, bad files and configs."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from sensitivity.datasets import open_result
from sensitivity.errors import ConfigError, DataError
from tests.helpers import ROOT
from tests.helpers.propagation import sha256
from tests.helpers.calibration_models import (DECAY_OVERRIDES, LINEAR, LINEAR_W, PRODUCT_OVERRIDES, TIMES, decay_numpy,
                                              linear_observations)
from tests.helpers.cf import cf_errors
from workflows import calibrate, sweep

TRUTH = np.array([2.0, 0.15, 0.3])  # a, k, c of the decay model
SIGMA = 0.02
FAST = ["jacobian.jit_compile=false", "plots=false"]

def decay_observations(tmp_path, seed=0, missing=(7,), **extra):
    """Noisy observations of the decay model at TRUTH, stored with the true values in attributes."""
    rng = np.random.default_rng(seed)
    y = decay_numpy(TRUTH[None])[0][0] + SIGMA * rng.standard_normal(TIMES.size)
    y[list(missing)] = np.nan
    variables = {"observed": ("day", y), "sigma": ("day", np.full(TIMES.size, SIGMA)), **extra}
    path = tmp_path / "observations.nc"
    xr.Dataset(variables, coords={"day": TIMES},
               attrs={"true_parameters": json.dumps(dict(zip("akc", TRUTH.tolist())))}).to_netcdf(path)
    return path


def test_fit_recovers_known_parameters_with_labeled_cf_output(compose_config, tmp_path):
    obs_path = decay_observations(tmp_path)
    cfg = compose_config("calibrate", [*DECAY_OVERRIDES, f"observations.path={obs_path}", "starts.n=8",
                                       "jacobian.jit_compile=false"])
    path = calibrate.run(cfg)
    ds = open_result(path)
    best = int(ds["best_start"])
    assert ds.sizes["start"] == 9 and ds["status"].values[best] > 0  # 8 Sobol' starts + the nominal point
    est, se = ds["estimate"].values[best], ds["standard_error"].values[best]
    assert np.all(np.abs(est - TRUTH) < 4 * se), (est - TRUTH) / se
    # covariance: (J_w^T J_w)^-1 with the exact numpy Jacobian at the estimate, on the observed times
    jac = decay_numpy(est[None])[1][0]
    observed = np.isfinite(xr.open_dataset(obs_path)["observed"].values)
    jw = jac[observed] / SIGMA
    np.testing.assert_allclose(ds["covariance"].values[best], np.linalg.inv(jw.T @ jw), rtol=1e-6)
    # the true-parameter check is the interval test, done independently here
    low, high = ds["parameter_interval"].values[best].T
    assert ds["true_in_interval"].values.tolist() == ((low <= TRUTH) & (TRUTH <= high)).astype(int).tolist()
    np.testing.assert_array_equal(ds["true_parameter"].values, TRUTH)
    # the series keeps its own dim: the band is on `day`, with the model's coordinate
    assert ds["prediction_band"].dims == ("start", "bound", "day")  # the model's dims last (CF)
    np.testing.assert_array_equal(ds["day"].values, TIMES)
    assert ds["day"].attrs["units"] == "day" and "output" not in ds.dims
    assert ds["prediction_band"].sel(bound_name="low").dims == ("start", "day")
    assert np.isnan(ds["y_obs"].values[7]) and ds["observed"].values[7] == 0
    assert ds.attrs["log_parameters"] == "k"  # scale: log in the space
    assert ds["correlation"].dims == ("start", "parameter_i", "parameter_j")
    assert ds["history_cost"].dims == ("start", "iteration")
    assert str(obs_path) in json.loads(ds.attrs["inputs"]) and "observations:" in ds.attrs["config"]
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs, name
    assert cf_errors(path) == []
    for figure in ("calibration_fit.png", "calibration_convergence.png", "calibration_correlation.png",
                   "step_slice.png"):
        assert (tmp_path / figure).stat().st_size > 0
    # the default step map on the slice of the two least identifiable parameters through the best estimate
    sliced = xr.open_dataset(tmp_path / "step_slice.nc")
    names = list("akc")
    # full rank, so every identifiability is 1: the two heaviest in the flattest direction, from numpy's SVD
    assert np.allclose(ds["identifiability"].values[best], 1.0)
    equilibrated = jw / np.linalg.norm(jw, axis=0)
    pair = np.argsort(-np.abs(np.linalg.svd(equilibrated)[2][-1]))[:2]
    assert sliced.attrs["slice_parameters"] == f"{names[pair[0]]} {names[pair[1]]}"
    assert sliced["cost"].shape == (21, 21) and sliced["slice_a"].attrs["long_name"] == names[pair[0]]
    corner = est.copy()
    corner[pair] = sliced["slice_a"].values[0], sliced["slice_b"].values[-1]
    np.testing.assert_allclose(float(sliced["cost"][0, -1]),
                               0.5 * np.nansum(((decay_numpy(corner[None])[0][0] - ds["y_obs"].values) / SIGMA) ** 2),
                               rtol=1e-9)
    # the slice records the calibration of its own result set by name; the set's manifest holds both files' hashes
    assert sliced["in_basin"].values[10, 10] == 1 and path.name in json.loads(sliced.attrs["inputs"])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["workflow"] == "calibrate" and set(manifest["files"]) == {
        "calibration.nc", "step_slice.nc", "calibration_fit.png", "calibration_convergence.png",
        "calibration_correlation.png", "step_slice.png"}  # the figures are part of the set
    assert manifest["files"]["calibration.nc"] == json.loads(sliced.attrs["inputs"])[path.name] == sha256(path)
    assert cf_errors(tmp_path / "step_slice.nc") == []


@pytest.mark.parametrize("solver", ["trust_region", "levenberg_marquardt", "gauss_newton"])
def test_linear_model_matches_weighted_least_squares_in_closed_form(compose_config, tmp_path, solver):
    path, y, sigma = linear_observations(tmp_path)
    ds = xr.open_dataset(calibrate.run(compose_config("calibrate", [*LINEAR, f"observations.path={path}",
                                                                    f"calibrate={solver}"])))
    jw, yw = LINEAR_W / sigma[:, None], y / sigma
    reference = np.linalg.lstsq(jw, yw, rcond=None)[0]
    cov = np.linalg.inv(jw.T @ jw)
    assert (ds["status"].values > 0).all() and int(ds["n_minima"]) == 1
    np.testing.assert_allclose(ds["estimate"].values, np.broadcast_to(reference, (5, 2)), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ds["covariance"].values[0], cov, rtol=1e-9)
    np.testing.assert_allclose(ds["chi2"].values[0], np.sum((jw @ reference - yw) ** 2), rtol=1e-9)
    # the band of a linear model is exact: sqrt(diag(W C W^T)); named outputs keep their `output` axis
    np.testing.assert_allclose(ds["prediction_std"].values[0], np.sqrt(np.diag(LINEAR_W @ cov @ LINEAR_W.T)),
                               rtol=1e-9)
    assert list(ds["output_name"].values) == ["o1", "o2", "o3", "o4", "o5"]
    assert ds["y_obs"].attrs["units_coordinate"] == "output_units"


def test_step_slice_of_a_linear_model_lands_every_step_on_the_estimate(compose_config, tmp_path):
    path, y, sigma = linear_observations(tmp_path)
    cfg = compose_config("calibrate", [*LINEAR, f"observations.path={path}", "step_slice.parameters=[q, p]",
                                       "step_slice.points=5", "plots=true"])
    ds = xr.open_dataset(calibrate.run(cfg))
    sliced = xr.open_dataset(tmp_path / "step_slice.nc")
    reference = np.linalg.lstsq(LINEAR_W / sigma[:, None], y / sigma, rcond=None)[0]
    q, p = np.meshgrid(sliced["slice_a"].values, sliced["slice_b"].values, indexing="ij")
    np.testing.assert_allclose(q + sliced["gn_step_a"].values, reference[1], rtol=1e-9)
    np.testing.assert_allclose(p + sliced["gn_step_b"].values, reference[0], rtol=1e-9)
    assert (sliced["in_basin"].values == 1).all()
    np.testing.assert_allclose(sliced["center"].values, ds["estimate"].values[int(ds["best_start"])])
    assert (tmp_path / "step_slice.png").stat().st_size > 0


def test_float32_steps_stop_within_a_tiny_fraction_of_a_standard_error(compose_config, tmp_path):
    """The default float32 step Jacobian only moves where the iteration stops, by far less than the
    uncertainty; the covariance comes from the float64 Jacobian at the estimate either way."""
    path, y, sigma = linear_observations(tmp_path)
    overrides = [o for o in LINEAR if o != "step_dtype=null"] + [f"observations.path={path}"]
    fast = xr.open_dataset(calibrate.run(compose_config("calibrate", overrides)))
    jw, yw = LINEAR_W / sigma[:, None], y / sigma
    reference = np.linalg.lstsq(jw, yw, rcond=None)[0]
    se = np.sqrt(np.diag(np.linalg.inv(jw.T @ jw)))
    assert "step_dtype=float32" in fast.attrs["engine"]
    assert np.abs((fast["estimate"].values - reference) / se).max() < 1e-5
    np.testing.assert_allclose(fast["standard_error"].values[0], se, rtol=1e-9)


def test_gaussian_prior_gives_the_closed_form_posterior(compose_config, tmp_path):
    path, y, sigma = linear_observations(tmp_path)
    cfg = compose_config("calibrate", [*LINEAR, f"observations.path={path}", "prior.mean={p: 1.0}",
                                       "prior.std={p: 0.05, q: 2.0}"])
    ds = xr.open_dataset(calibrate.run(cfg))
    jw, yw = LINEAR_W / sigma[:, None], y / sigma
    mean, precision = np.array([1.0, 0.0]), np.diag([1 / 0.05**2, 1 / 2.0**2])  # q: the nominal mid-point 0
    cov = np.linalg.inv(jw.T @ jw + precision)
    np.testing.assert_allclose(ds["covariance"].values[0], cov, rtol=1e-9)
    np.testing.assert_allclose(ds["estimate"].values[0], cov @ (jw.T @ yw + precision @ mean), rtol=1e-9)
    np.testing.assert_allclose(ds["prior_std"].values, [0.05, 2.0])


def test_integer_entries_of_prior_cov_are_numbers_and_other_entries_one_line(compose_config, tmp_path):
    """`prior.cov=[[1,0],[0,4]]` (ints, as a user types them) is the covariance diag(1, 4): the closed-form MAP (q's
    prior mean its nominal mid-point 0)."""
    path, y, sigma = linear_observations(tmp_path)
    ds = xr.open_dataset(calibrate.run(compose_config("calibrate", [*LINEAR, f"observations.path={path}",
                                                                    "prior.mean={p: 1.0}", "prior.cov=[[1,0],[0,4]]"])))
    np.testing.assert_array_equal(ds["prior_covariance"].values, [[1.0, 0.0], [0.0, 4.0]])
    jw, yw = LINEAR_W / sigma[:, None], y / sigma
    precision = np.diag([1.0, 0.25])
    cov = np.linalg.inv(jw.T @ jw + precision)
    np.testing.assert_allclose(ds["covariance"].values[0], cov, rtol=1e-9)
    np.testing.assert_allclose(ds["estimate"].values[0], cov @ (jw.T @ yw + precision @ [1.0, 0.0]), rtol=1e-9)
    with pytest.raises(ConfigError, match=r"^`prior.cov` must be a matrix of numbers, got \[\[1, 'a'\], \[0, 4\]\]$"):
        calibrate.run(compose_config("calibrate", [*LINEAR, f"observations.path={path}", "prior.cov=[[1,a],[0,4]]"],
                                     output_dir=tmp_path / "b"))


def test_the_prior_from_the_space_is_its_marginals_moments_and_correlation(compose_config, tmp_path):
    """`prior.from_space`: p ~ N(1.1, 0.05), q ~ U(-10, 10) (mean 0, std 20 / sqrt 12), correlation 0.3, as the
    Gaussian prior D R D: estimate and covariance are the linear MAP closed forms."""
    path, y, sigma = linear_observations(tmp_path)
    space = ("space={parameters: [{name: p, units: '1', distribution: {kind: norm, loc: 1.1, scale: 0.05}}, "
             "{name: q, units: '1', low: -10.0, high: 10.0}], correlation: [[1.0, 0.3], [0.3, 1.0]]}")
    overrides = [o for o in LINEAR if not o.startswith("space.")] + [space, f"observations.path={path}",
                                                                    "prior.from_space=true"]
    ds = xr.open_dataset(calibrate.run(compose_config("calibrate", overrides)))
    std = np.array([0.05, 20 / np.sqrt(12)])
    prior_cov = np.array([[1.0, 0.3], [0.3, 1.0]]) * np.outer(std, std)
    jw, yw = LINEAR_W / sigma[:, None], y / sigma
    precision = np.linalg.inv(prior_cov)
    cov = np.linalg.inv(jw.T @ jw + precision)
    np.testing.assert_allclose(ds["prior_covariance"].values, prior_cov, rtol=1e-12)
    np.testing.assert_allclose(ds["covariance"].values[0], cov, rtol=1e-9)
    np.testing.assert_allclose(ds["estimate"].values[0], cov @ (jw.T @ yw + precision @ [1.1, 0.0]), rtol=1e-9)
    np.testing.assert_allclose(ds["prior_std_reduction"].values[0], 1 - np.sqrt(np.diag(cov)) / std, rtol=1e-9)
    _, s, vt = np.linalg.svd(jw * std)  # relative to the prior: scaled by its stds, where the data outweigh it
    np.testing.assert_allclose(ds["identifiability"].values[0], ((s >= 1)[:, None] * vt**2).sum(axis=0), atol=1e-9)
    with pytest.raises(ConfigError, match=r"`prior.from_space` takes the prior from the space: drop `prior.mean`"):
        calibrate.run(compose_config("calibrate", [*overrides, "prior.std={p: 1.0, q: 1.0}"],
                                     output_dir=tmp_path / "b"))


def test_a_prior_with_observations_of_unknown_noise_is_refused_by_field(compose_config, tmp_path):
    path, y, _ = linear_observations(tmp_path)
    bare = tmp_path / "no_sigma.csv"
    pd.read_csv(path).drop(columns="sigma").to_csv(bare, index=False)
    cfg = compose_config("calibrate", [*LINEAR, f"observations.path={bare}", "prior.std={p: 0.05, q: 2.0}"],
                         output_dir=tmp_path / "out")
    with pytest.raises(ConfigError, match=r"`prior`: a prior needs the observations' errors, and "
                                          r"observations.path=.*no_sigma.csv has no `sigma` or `cov` variable"):
        calibrate.run(cfg)
    assert not (tmp_path / "out" / "calibration.nc").exists()


def test_step_map_of_a_stored_sweep_equals_numpy_at_every_point(compose_config, tmp_path):
    sweep_cfg = compose_config("sweep", [*DECAY_OVERRIDES, "grid.n=50", "jacobian=float64", *FAST],
                               output_dir=tmp_path / "sweep")
    sweep_path = sweep.run(sweep_cfg)
    obs_path = decay_observations(tmp_path, missing=(3, 11))
    cfg = compose_config("calibrate", [*DECAY_OVERRIDES, f"observations.path={obs_path}", "fit=false",
                                       f"sweep_path={sweep_path}", "step_map.block=16", "step_map.damping=0.01",
                                       "step_map.plot_parameters=[a, k]", "jacobian.jit_compile=false"],
                         output_dir=tmp_path / "gn")
    path = calibrate.run(cfg)
    assert path.name == "step_map.nc" and not (tmp_path / "gn" / "calibration.nc").exists()
    ds, stored = xr.open_dataset(path), xr.open_dataset(sweep_path)
    np.testing.assert_array_equal(ds["x"].values, stored["x"].values)
    np.testing.assert_array_equal(ds["sample"].values, stored["sample"].values)
    obs = xr.open_dataset(obs_path)["observed"].values
    keep = np.isfinite(obs)
    for i in range(stored.sizes["sample"]):
        jw = stored["jacobian"].values[i][keep] / SIGMA
        r = (stored["y"].values[i][keep] - obs[keep]) / SIGMA
        np.testing.assert_allclose(ds["gn_step"].values[i], np.linalg.lstsq(jw, -r, rcond=None)[0], rtol=1e-7)
        normal = jw.T @ jw
        damped = np.linalg.solve(normal + 0.01 * np.diag(np.diag(normal)), -jw.T @ r)
        np.testing.assert_allclose(ds["damped_step"].values[i], damped, rtol=1e-7)
        np.testing.assert_allclose(ds["condition_number"].values[i],
                                   np.linalg.cond(jw / np.linalg.norm(jw, axis=0)), rtol=1e-7)
        np.testing.assert_allclose(ds["cost"].values[i], 0.5 * r @ r, rtol=1e-12)
    assert ds["gn_step"].attrs["units_coordinate"] == "parameter_units"
    assert str(sweep_path) in json.loads(ds.attrs["inputs"])
    assert not (tmp_path / "gn" / "step_map.nc.parts").exists() and (tmp_path / "gn" / "step_map.png").stat().st_size
    assert cf_errors(path) == []


@pytest.mark.parametrize("tamper", ["edited", "without a record"])
def test_a_step_map_refuses_a_sweep_that_is_not_verified_as_indices_and_propagate_do(compose_config, tmp_path,
                                                                                      tamper):
    """An edited sweep (its manifest no longer matches) and a copy without any checksum record are refused in one
    line, before any work, and nothing is published; the copy is taken with allow_unverified=true."""
    import shutil

    swept = sweep.run(compose_config("sweep", [*DECAY_OVERRIDES, "grid.n=20", "jacobian=float64", *FAST],
                                     output_dir=tmp_path / "sweep"))
    if tamper == "edited":
        with xr.open_dataset(swept) as ds:
            edited = ds.load()
        edited["y"] = edited["y"] * 2
        edited.to_netcdf(swept)
        used, expected = swept, r"does not match its run's manifest"
    else:
        used = shutil.copy(swept, tmp_path / "copied.nc")
        expected = r"allow_unverified"
    obs_path = decay_observations(tmp_path)
    run = [*DECAY_OVERRIDES, f"observations.path={obs_path}", "fit=false", f"sweep_path={used}", *FAST]
    with pytest.raises(DataError, match=expected):
        calibrate.run(compose_config("calibrate", run, output_dir=tmp_path / "gn"))
    assert not (tmp_path / "gn" / "step_map.nc").exists() and not (tmp_path / "gn" / "manifest.json").exists()
    if tamper != "edited":
        path = calibrate.run(compose_config("calibrate", [*run, "allow_unverified=true"], output_dir=tmp_path / "gn"))
        assert path.name == "step_map.nc"


@pytest.mark.slow
def test_the_shipped_ensembles_estimates_carry_the_combined_interval_in_the_file_log_and_figure(compose_config,
                                                                                                 tmp_path, caplog):
    """``calibrate experiment=seir_ensemble``: ``estimate_combined_interval`` (CF-clean, the fit's interval widened
    by the members' spread: the same definition as the indices', :mod:`sensitivity.outputs.members`), its column in
    the log's estimates table, and ``calibration_estimates.png``."""
    from sensitivity.outputs.members import spread_factor

    cfg = compose_config("calibrate", ["experiment=seir_ensemble", "jacobian.jit_compile=false", "starts.n=4",
                                       "step_slice.enabled=false"])
    with caplog.at_level("INFO", logger="workflows.calibrate"):
        path = calibrate.run(cfg)
    assert cf_errors(path) == []
    ds = open_result(path)
    best, logged = int(ds["best_start"]), ds.attrs["log_parameters"].split()
    combined, own = ds["estimate_combined_interval"], ds["parameter_interval"].isel(start=best)
    assert combined.dims == ("parameter", "bound") and combined.attrs["units_coordinate"] == "parameter_units"
    for j, name in enumerate(str(n) for n in ds["parameter_name"].values):
        scale = np.log if name in logged else (lambda v: v)
        estimate, members = scale(ds["estimate"].values[best, j]), scale(ds["estimate_member"].values[:, j])
        fit_half = scale(own.values[j, 1]) - estimate
        half = np.hypot(fit_half, spread_factor(5, 0.95) * members.std(ddof=1))
        np.testing.assert_allclose(scale(combined.values[j]), [estimate - half, estimate + half], rtol=1e-9)
    assert "95% combined interval (fit and surrogate)" in caplog.text
    assert (tmp_path / "calibration_estimates.png").stat().st_size > 0


@pytest.mark.slow
def test_a_users_step_map_of_a_sweep_with_store_members_reports_the_spread_of_the_members_steps(tmp_path):
    """As a user: in a folder from ``sensitivity init``, ``sensitivity sweep store_members=true`` of the shipped
    5-member SEIR ensemble, then ``sensitivity calibrate fit=false sweep_path=...``. Oracle: each member's own
    single-model engine (spread about the mean by the ensemble's recorded calibration, as the engine returns the
    members), numpy's least-squares and the closed-form damped step of its whitened Jacobian at every point, and
    numpy's std (ddof=1) over the members; the dataset is CF-clean."""
    import sensitivity
    from tests.helpers import CLI

    study = tmp_path / "study"
    assert subprocess.run(CLI + ["init", str(study)], capture_output=True, text=True).returncode == 0
    common = ["experiment=seir_ensemble", "jacobian=float64", "plots=false", "progress=false"]
    done = subprocess.run(CLI + ["sweep", *common, "grid.n=12", "store_members=true", "output_dir=runs/sweep"],
                          capture_output=True, text=True, cwd=study)
    assert done.returncode == 0, done.stderr[-2000:]
    sweep_path = study / "runs" / "sweep" / "sweep.nc"
    done = subprocess.run(CLI + ["calibrate", *common, "fit=false", f"sweep_path={sweep_path}", "step_map.block=5",
                                 "step_map.damping=0.01", "output_dir=runs/step_map"],
                          capture_output=True, text=True, cwd=study)
    assert done.returncode == 0, done.stderr[-2000:]
    path = study / "runs" / "step_map" / "step_map.nc"
    assert cf_errors(path) == []
    ds = open_result(path)
    assert "5 members" in ds.attrs["member_steps"]
    ensemble = sensitivity.load_surrogate(ROOT / "data" / "seir" / "surrogate.ensemble", dtype="float64")
    own = [sensitivity.compile_jacobian(m, jit_compile=False)(ds["x"].values) for m in ensemble.members]
    values, jac = (np.stack([result[k] for result in own]) for k in (0, 1))  # [K, N, day], [K, N, day, n]
    scale = np.asarray(ensemble.spread_scale).reshape(ensemble.output.shape)
    values = values.mean(0) + scale * (values - values.mean(0))
    jac = jac.mean(0) + scale[:, None] * (jac - jac.mean(0))
    obs = xr.open_dataset(ROOT / "data" / "seir" / "observations.nc")
    keep = np.isfinite(obs["observed"].values)
    y, sigma = obs["observed"].values[keep], obs["sigma"].values[keep]
    steps = np.zeros((2, *values.shape[:2], jac.shape[-1]))
    for k, i in np.ndindex(*values.shape[:2]):
        j = jac[k, i][keep] / sigma[:, None]
        r = (values[k, i][keep] - y) / sigma
        steps[0, k, i] = np.linalg.lstsq(j, -r, rcond=None)[0]
        steps[1, k, i] = np.linalg.solve(j.T @ j + 0.01 * np.diag(np.diag(j.T @ j)), -j.T @ r)
    cost = 0.5 * np.sum(((values[..., keep] - y) / sigma) ** 2, axis=-1)
    for name, each in (("gn_step", steps[0]), ("damped_step", steps[1]), ("cost", cost)):
        np.testing.assert_allclose(ds[f"{name}_member_mean"].values, each.mean(axis=0), rtol=1e-8)
        np.testing.assert_allclose(ds[f"{name}_member_std"].values, each.std(axis=0, ddof=1), rtol=1e-8)
    assert ds["gn_step_member_std"].attrs["units_coordinate"] == "parameter_units"  # day-1, day, 1, ...


def bad_file(tmp_path, case):
    """An observation file with one defect, the overrides of its model, and the expected message."""
    if case == "unknown output name":
        path = tmp_path / "obs.csv"
        pd.DataFrame({"output": ["o1", "o9"], "value": [1.0, 2.0], "sigma": [0.1, 0.1]}).to_csv(path, index=False)
        return path, LINEAR, "unknown label 'o9' in column `output`; the model's 'output' labels are ['o1', "
    sigma = np.full(TIMES.size, SIGMA)
    if case == "shape mismatch":
        path = tmp_path / "obs.nc"
        xr.Dataset({"observed": (("day", "member"), np.ones((20, 2)))}, coords={"day": TIMES}).to_netcdf(path)
        return path, DECAY_OVERRIDES, "`observed` is on dims ['day', 'member'] with shape [20, 2] but the model's"
    sigma[2] = np.nan if case == "nan sigma" else -SIGMA
    message = "`sigma` must be finite, got nan" if case == "nan sigma" else "`sigma` must be > 0, got -0.02"
    return decay_observations(tmp_path, sigma=("day", sigma)), DECAY_OVERRIDES, message + " at "


@pytest.mark.parametrize("case", ["unknown output name", "nan sigma", "negative sigma", "shape mismatch"])
def test_bad_observation_files_fail_clearly_without_output(compose_config, tmp_path, case):
    obs_path, model, message = bad_file(tmp_path, case)
    cfg = compose_config("calibrate", [*model, f"observations.path={obs_path}", "starts.n=2", *FAST])
    with pytest.raises(DataError) as info:
        calibrate.run(cfg)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "calibration.nc").exists()


@pytest.mark.parametrize("overrides, message", [
    (["solver.kind=newton"], "`solver.kind` must be one of"),
    (["prior.std={a: 1.0}"], "`prior.std` must give every parameter a standard deviation; missing ['k', 'c']"),
    (["prior.std={a: 1.0, k: 1.0, c: 1.0, z: 1.0}"], "`prior.std`: unknown parameter 'z'"),
    (["log_parameters=[c]"], "`log_parameters`: 'c' needs low > 0"),
    (["fit=false"], "nothing to do"),
    (["step_slice.parameters=[a, z]"], "`step_slice.parameters` must name two different parameters of ['a', 'k', 'c']"),
    (["starts.n=-4"], "starts.n must be an integer >= 1, got -4"),  # named as its own key, not grid.n
])
def test_bad_config_fails_before_any_work(compose_config, tmp_path, overrides, message):
    cfg = compose_config("calibrate", [*DECAY_OVERRIDES, f"observations.path={tmp_path / 'none.nc'}", *overrides])
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        calibrate.run(cfg)


@pytest.mark.slow
def test_cli_reports_a_bad_observation_file_in_one_line(tmp_path):
    obs_path = decay_observations(tmp_path, sigma=("day", np.r_[SIGMA, -1.0, np.full(18, SIGMA)]))
    out = subprocess.run([sys.executable, "-m", "workflows", "calibrate", *DECAY_OVERRIDES,
                          f"observations.path={obs_path}", f"hydra.run.dir={tmp_path / 'run'}", "progress=false"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0
    message = f"observations file {obs_path}: `sigma` must be > 0, got -1.0 at output 'y[day=1]'"
    assert message in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "run" / "calibration.nc").exists()


def test_an_underdetermined_fit_warns_names_the_unidentified_direction_and_records_it(compose_config, tmp_path,
                                                                                     caplog, monkeypatch):
    # y = a b t: only the product a b = 2 is determined; at an estimate (a, b) the step d(a, b) ~ (a, -b)
    # leaves every output unchanged, so standard errors are undefined and the run must say so.
    obs_path = tmp_path / "observations.nc"
    xr.Dataset({"observed": ("day", 2.0 * TIMES), "sigma": ("day", np.full(TIMES.size, SIGMA))},
               coords={"day": TIMES}, attrs={"true_parameters": '{"a": 1.0, "b": 2.0}'}).to_netcdf(obs_path)
    cfg = compose_config("calibrate", [*PRODUCT_OVERRIDES, f"observations.path={obs_path}", "starts.n=4", *FAST],
                         output_dir=tmp_path / "out")
    with caplog.at_level("INFO", logger="workflows.calibrate"):
        path = calibrate.run(cfg)
    ds = open_result(path)
    best = int(ds["best_start"])
    a, b = ds["estimate"].values[best]
    np.testing.assert_allclose(a * b, 2.0, rtol=1e-8)
    assert (ds["standard_error_status"].values == 1).all() and ds.attrs["underdetermined"].startswith("5 of 5 starts")
    assert np.isnan(ds["standard_error"].values).all()
    name, values = str(ds["unidentified"].values[best]).split(" ~ ")
    direction = np.array([a, -b]) / (a if a >= b else -b)
    assert name == "d(a, b)"
    np.testing.assert_allclose([float(v) for v in values.strip("()").split(",")], direction, rtol=1e-3)
    assert "underdetermined: 5 of 5 starts rank-deficient" in caplog.text
    line = next(r.getMessage() for r in caplog.records if "has no standard errors" in r.getMessage())
    shown = re.search(r"\(rank_deficient\); the data do not determine d\((\w) \+1, (\w) [+-][\d.]+\)", line)
    assert shown and {shown.group(1), shown.group(2)} == {"a", "b"}, line
    assert (ds["true_in_interval"].values == -1).all()  # no interval: the truth is not checked, nor called outside
    # the log renders calibration.nc's summary: the truth's row of the estimates says it is not checked
    assert "true value 1; inside the interval unknown" in caplog.text and "OUTSIDE" not in caplog.text
    assert "0 of 2 true parameters inside their intervals (2 without an interval, not checked)" in caplog.text

    from sensitivity.plots import calibration as figures

    drawn = []
    monkeypatch.setattr(figures.lay, "save", lambda fig, path, **_: drawn.append(fig.axes[0].get_title()) or path)
    figures.correlation_figure(ds, tmp_path / "correlation.png")  # an empty matrix says why it is empty
    assert drawn == ["parameter correlation (identifiability)\nnone: the best start has no covariance "
                     "(rank_deficient)"]
    assert cf_errors(path) == []


def test_a_one_parameter_fit_has_its_estimate_a_step_line_and_no_slice(compose_config, tmp_path, caplog):
    """y = w p on three outputs: the weighted least-squares estimate sum(w y / s^2) / sum(w^2 / s^2) and its standard
    error 1 / sqrt(sum(w^2 / s^2)) (closed forms); the 2-D step slice is skipped, not the run's failure (it ended
    the run after the fit before), and the step map of a sweep is a line of steps along the one parameter."""
    w, sigma = np.array([1.0, 2.0, -0.5]), np.array([0.1, 0.2, 0.1])
    y = w * 0.8 + sigma * np.random.default_rng(3).standard_normal(3)
    obs_path = tmp_path / "one.csv"
    pd.DataFrame({"output": ["a", "b", "c"], "value": y, "sigma": sigma}).to_csv(obs_path, index=False)
    study = ["model=function", "model.source=sensitivity.simulators.analytic:linear",
             f"+model.kwargs.weights={w[:, None].tolist()}", "model.output={name: y, units: m, names: [a, b, c]}",
             "space.parameters=[{name: p, units: '1', low: -2.0, high: 2.0}]", "jacobian=float64", *FAST]
    swept = sweep.run(compose_config("sweep", [*study, "grid.n=64"], tmp_path / "sweep"))
    cfg = compose_config("calibrate", [*study, f"observations.path={obs_path}", f"sweep_path={swept}", "starts.n=4",
                                       "step_dtype=null", "plots=true"], tmp_path / "fit")
    with caplog.at_level("INFO", logger="workflows.calibrate"):
        ds = open_result(calibrate.run(cfg))
    best = int(ds["best_start"])
    precision = (w**2 / sigma**2).sum()
    np.testing.assert_allclose(ds["estimate"].values[best, 0], (w * y / sigma**2).sum() / precision, rtol=1e-9)
    np.testing.assert_allclose(ds["standard_error"].values[best, 0], precision**-0.5, rtol=1e-6)
    assert "step_slice: none, a slice needs two parameters and the space has one" in caplog.text
    assert (tmp_path / "fit" / "step_map.png").exists() and not (tmp_path / "fit" / "step_slice.nc").exists()


def test_an_estimate_held_on_a_bound_is_flagged_and_named_in_the_log(compose_config, tmp_path, caplog):
    """y = w p with the data at p = 0.8 and p's bounds [-2, 0.5]: the fit holds p on its upper bound, where the
    least-squares minimum of a linear model lies beyond it, and the run says so (at_bound 1, one warning line)."""
    w, sigma = np.array([1.0, 2.0, -0.5]), np.array([0.1, 0.2, 0.1])
    obs_path = tmp_path / "one.csv"
    pd.DataFrame({"output": ["a", "b", "c"], "value": w * 0.8, "sigma": sigma}).to_csv(obs_path, index=False)
    study = ["model=function", "model.source=sensitivity.simulators.analytic:linear",
             f"+model.kwargs.weights={w[:, None].tolist()}", "model.output={name: y, units: m, names: [a, b, c]}",
             "space.parameters=[{name: p, units: '1', low: -2.0, high: 0.5}]", "jacobian=float64", *FAST]
    cfg = compose_config("calibrate", [*study, f"observations.path={obs_path}", "starts.n=4", "step_dtype=null"],
                         tmp_path / "fit")
    with caplog.at_level("INFO", logger="workflows.calibrate"):
        ds = open_result(calibrate.run(cfg))
    best = int(ds["best_start"])
    assert ds["estimate"].values[best, 0] == 0.5 and ds["at_bound"].values[best, 0] == 1
    assert f"best start {best} holds p on its upper bound, where the fit would go beyond it" in caplog.text
    assert cf_errors(ds.encoding["source"]) == []


def test_the_summary_counts_rank_deficient_fits_as_converged():
    """A rank-deficient fit converged (status SINGULAR): 63 of them and 2 at max_iter read as such, not '0 converged'."""
    from sensitivity.analyses.calibration import Status
    from sensitivity.analyses.calibration.summary import status_counts as _status_counts

    status = np.array([Status.SINGULAR] * 63 + [Status.MAX_ITER] * 2)
    assert _status_counts(status) == "63 converged (63 rank-deficient), 2 at max_iter"
    status = np.array([Status.GTOL, Status.FTOL, Status.NON_FINITE])
    assert _status_counts(status) == "2 converged, 1 non-finite"


def test_the_log_names_an_unidentified_direction_by_its_largest_components():
    """64 cells: the log shows each direction's five largest components and how many it leaves to the file; it
    reads the directions as numbers (``unidentified_direction``), never parses the text back."""
    from sensitivity.analyses.calibration.summary import short_directions as _short_directions

    names = [f"k{i}" for i in range(8)]
    values = np.array([0.01, -0.9, 1, 0.2, -0.3, 0.05, 0.6, -0.002])
    determined = np.full(8, np.nan)
    assert _short_directions(np.array([determined, values]), names) == (
        "d(k2 +1, k1 -0.9, k6 +0.6, k4 -0.3, k3 +0.2; 3 more)")
    assert _short_directions(np.array([values] * 4), names).endswith(
        "; 1 more directions (`unidentified` in calibration.nc)")
    assert _short_directions(np.array([[1.0, -0.5]]), ["a", "b"]) == "d(a +1, b -0.5)"
    assert _short_directions(np.array([determined]), names) == ""
