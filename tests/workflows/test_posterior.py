"""Workflow `sample` wiring and `propagate propagate=posterior` (the posterior predictive) on stored draws."""
from __future__ import annotations

import json
import numpy as np
import pytest
import xarray as xr

from sensitivity.datasets import open_result, record_checksum
from sensitivity.errors import ConfigError
from sensitivity.outputs.labels import parameter_coords
from tests.helpers.calibration_models import LINEAR, LINEAR_W, linear_observations
from tests.helpers.propagation import FAST, SIX, C, W, by_method, linear_model, sha256, space
from workflows import calibrate, posterior, propagate


def write_posterior(path, names, draws, converged=1):
    ds = xr.Dataset({"draws": (("chain", "draw", "parameter"), draws, {"long_name": "posterior draws", "units": "m"}),
                     "converged": ((), np.int8(converged), {"long_name": "converged", "units": "1"})},
                    coords=parameter_coords(names, ["m"] * len(names)), attrs={"diagnostics": "R-hat 1.2 >= 1.01"})
    ds.to_netcdf(path)
    record_checksum(path)  # a hand-made result with its record, as a user re-creates one
    return path


def test_posterior_draws_through_the_model(compose_config, tmp_path):
    """A linear model: every moment method and the Monte Carlo predictive (the resampled draws) give
    W mean(draws) + c; the covariance of the moment methods is W cov(draws) W^T; the method `posterior`
    (every draw through the model) gives both exactly and is the verdict's reference."""
    rng = np.random.default_rng(0)
    draws = rng.uniform(-1, 1, (2, 500, 6)) ** 3
    order = [3, 0, 5, 1, 4, 2]
    path = write_posterior(tmp_path / "posterior.nc", [f"p{i}" for i in order], draws[..., order])
    overrides = [*linear_model(), *space(SIX), *FAST, "propagate=posterior", f"uncertainty.path={path}",
                 "propagation.methods=[first_order, monte_carlo]"]
    ds = open_result(propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "out")))
    flat = draws.reshape(-1, 6)
    mean, cov = flat.mean(axis=0), np.cov(flat, rowvar=False)
    np.testing.assert_allclose(ds["input_mean"].values, mean, rtol=1e-12)
    np.testing.assert_allclose(by_method(ds, "first_order")["output_covariance"].values, W @ cov @ W.T, rtol=1e-9)
    mc = by_method(ds, "monte_carlo")
    gap = np.abs(mc["output_mean"].values - (W @ mean + C))
    assert np.all(gap < 5 * mc["output_mean_se"].values + 1e-12), (gap, mc["output_mean_se"].values)
    assert json.loads(ds.attrs["inputs"]) == {str(path): sha256(path)}
    assert "posterior draws" in ds.attrs["input_source"]
    assert list(ds["propagation_method_name"].values) == ["first_order", "monte_carlo", "posterior"]
    post = by_method(ds, "posterior")
    np.testing.assert_allclose(post["output_mean"].values, W @ mean + C, rtol=1e-10)
    np.testing.assert_allclose(post["output_covariance"].values, W @ cov @ W.T, rtol=1e-9)
    assert ds["nonlinear"].attrs["verdict_reference"] == "posterior"
    assert (by_method(ds, "posterior")["nonlinear"].values == -1).all()
    assert (by_method(ds, "first_order")["nonlinear"].values == 0).all()  # linear: the moments agree


def test_unconverged_chains_are_reported_once(compose_config, tmp_path, caplog):
    """Draws whose chains failed their checks are the inputs and the reference of one run: one warning, naming
    the file and its diagnostics."""
    draws = np.random.default_rng(2).uniform(-1, 1, (2, 50, 6))
    path = write_posterior(tmp_path / "posterior.nc", [f"p{i}" for i in range(6)], draws, converged=0)
    overrides = [*linear_model(), *space(SIX), *FAST, "propagate=posterior", f"uncertainty.path={path}",
                 "propagation.methods=[first_order]", "plots=false"]
    with caplog.at_level("WARNING", logger="workflows.propagate"):
        propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "out"))
    reports = [r.getMessage() for r in caplog.records if "failed convergence checks" in r.getMessage()]
    assert len(reports) == 1 and str(path) in reports[0] and "R-hat 1.2 >= 1.01" in reports[0], reports


def test_posterior_predictive_beside_the_calibration_methods(compose_config, tmp_path):
    """`propagate=calibration posterior.path=...`: the four methods propagate the calibration's Gaussian and
    the fifth, `posterior`, the draws; the draws' mean is far from the Gaussian's, so against the posterior
    reference the moment methods are flagged on every output while Monte Carlo of the Gaussian agrees with them."""
    names = [f"p{i}" for i in range(6)]
    calibration = tmp_path / "calibration.nc"
    cov = 0.01 * np.eye(6)
    xr.Dataset({"estimate": ("parameter", np.zeros(6), {"units": "m"}),
                "covariance": (("parameter_i", "parameter_j"), cov, {"units": "m2"})},
               coords={**parameter_coords(names, ["m"] * 6)}).to_netcdf(calibration)
    record_checksum(calibration)
    rng = np.random.default_rng(1)
    draws = 0.5 + 0.1 * rng.standard_normal((4, 300, 6))
    path = write_posterior(tmp_path / "posterior.nc", names, draws)
    overrides = [*linear_model(), *space(SIX), *FAST, "propagate=calibration", f"uncertainty.path={calibration}",
                 f"posterior.path={path}"]
    ds = open_result(propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "out")))
    assert list(ds["propagation_method_name"].values)[-1] == "posterior"
    np.testing.assert_allclose(ds["input_mean"].values, 0.0)
    np.testing.assert_allclose(by_method(ds, "posterior")["output_mean"].values,
                               W @ draws.reshape(-1, 6).mean(axis=0) + C, rtol=1e-10)
    assert (by_method(ds, "first_order")["nonlinear"].values == 1).all()
    assert (by_method(ds, "monte_carlo")["nonlinear"].values == 1).all()
    assert set(json.loads(ds.attrs["inputs"])) == {str(calibration), str(path)}


def test_posterior_predictive_beside_the_spaces_distributions_judges_nothing(compose_config, tmp_path, caplog):
    """`propagate=space posterior.path=...`: the methods propagate the space's distributions (a prior), the draws
    are another distribution, so Monte Carlo is the verdict's reference: the moment methods of a linear model
    agree with it, while the posterior predictive (W mean(draws) + c) stands beside them, not judged."""
    names = [f"p{i}" for i in range(6)]
    draws = 0.5 + 0.1 * np.random.default_rng(1).standard_normal((4, 300, 6))
    path = write_posterior(tmp_path / "posterior.nc", names, draws)
    overrides = [*linear_model(), *space(SIX), *FAST, f"posterior.path={path}",
                 "propagation.methods=[first_order, monte_carlo]", "plots=false"]
    with caplog.at_level("INFO", logger="workflows.propagate"):
        ds = open_result(propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "out")))
    assert ds["nonlinear"].attrs["verdict_reference"] == "monte_carlo"
    np.testing.assert_allclose(by_method(ds, "posterior")["output_mean"].values,
                               W @ draws.reshape(-1, 6).mean(axis=0) + C, rtol=1e-10)
    assert (by_method(ds, "first_order")["nonlinear"].values == 0).all()
    assert (by_method(ds, "posterior")["nonlinear"].values == -1).all()
    assert any("a different input uncertainty" in r.getMessage() for r in caplog.records)


def test_sample_needs_a_calibration(compose_config):
    with pytest.raises(ConfigError, match="`calibration` is required"):
        posterior.run(compose_config("posterior", ["observations.path=data/seir/observations.nc"]))


def test_propagate_posterior_needs_a_path(compose_config):
    with pytest.raises(ConfigError, match="must name a posterior result"):
        propagate.run(compose_config("propagate", ["propagate=posterior"]))


PRIOR = ["prior.mean={p: 1.0}", "prior.std={p: 0.05, q: 2.0}"]


@pytest.mark.slow
def test_sample_takes_the_calibrations_own_prior(compose_config, tmp_path):
    """One target: calibrated with a Gaussian prior, the posterior is sampled under that prior by default. The
    model is linear with Gaussian noise, so the posterior is the calibration's N(estimate, covariance) exactly
    (the bounds are 10 posterior std away), checked within 4 Monte Carlo standard errors."""
    path, y, sigma = linear_observations(tmp_path)
    fitted = calibrate.run(compose_config("calibrate", [*LINEAR, f"observations.path={path}", *PRIOR],
                                          output_dir=tmp_path / "calibrate"))
    jw, yw = LINEAR_W / sigma[:, None], y / sigma
    precision = np.diag([1 / 0.05**2, 1 / 2.0**2])
    cov = np.linalg.inv(jw.T @ jw + precision)
    mean = cov @ (jw.T @ yw + precision @ np.array([1.0, 0.0]))
    with open_result(fitted) as ds:
        assert ds.attrs["prior"].startswith("gaussian") and "prior_covariance" in ds
    chains = ["n_chains=4", "nuts.num_warmup=300", "nuts.num_draws=1000", "plots=false", "jacobian.jit_compile=false"]
    ds = open_result(posterior.run(compose_config("posterior", [*LINEAR, f"observations.path={path}", f"calibration={fitted}",
                                                          *chains], output_dir=tmp_path / "sample")))
    assert ds.attrs["prior_source"] == "calibration" and ds.attrs["prior"].startswith("Gaussian")
    se = np.sqrt(np.diag(cov) / ds["ess_bulk"].values)
    assert np.all(np.abs(ds["posterior_mean"].values - mean) < 4 * se), (ds["posterior_mean"].values, mean, se)
    np.testing.assert_allclose(ds["posterior_std"].values, np.sqrt(np.diag(cov)), rtol=0.1)
    with pytest.raises(ConfigError, match="differs from the prior calibration.nc was fitted with"):
        posterior.run(compose_config("posterior", [*LINEAR, f"observations.path={path}", f"calibration={fitted}",
                                             "prior.std={p: 0.1, q: 2.0}", *chains], output_dir=tmp_path / "x"))
    with pytest.raises(ConfigError, match="prior_source=space: give one of them"):
        posterior.run(compose_config("posterior", [*LINEAR, f"observations.path={path}", f"calibration={fitted}",
                                             *PRIOR, "prior_source=space", *chains], output_dir=tmp_path / "y"))


def test_a_rank_deficient_calibration_is_sampled_where_its_gaussian_is_undefined(compose_config, tmp_path, caplog):
    """y = a b t observed at t = 1, 2, 3 (sigma 1): the data determine the product a b only, so the calibration
    has no covariance (NaN). The posterior, flat on the box [0.5, 5]^2, is still proper: sampled from the
    calibration's minima and starts uniform over the box, its means and standard deviations match a 2-D
    quadrature of the density (means within 4 MCSE, stds within 10 %). Propagating the calibration's undefined
    Gaussian is refused with a pointer to the posterior."""
    from tests.helpers.calibration_models import PRODUCT_OVERRIDES, TIMES

    observed = np.full(TIMES.size, np.nan)
    observed[1:4] = 2.0 * TIMES[1:4] + np.array([0.4, -0.9, 0.3])
    obs_path = tmp_path / "observations.nc"
    xr.Dataset({"observed": ("day", observed), "sigma": ("day", np.ones(TIMES.size))},
               coords={"day": TIMES}).to_netcdf(obs_path)
    common = [*PRODUCT_OVERRIDES, f"observations.path={obs_path}", "plots=false", "jacobian.jit_compile=false"]
    fitted = calibrate.run(compose_config("calibrate", [*common, "starts.n=4"], output_dir=tmp_path / "calibrate"))
    with open_result(fitted) as ds:
        assert np.isnan(ds["covariance"].values).all()
    with caplog.at_level("WARNING", logger="workflows.posterior"):
        ds = open_result(posterior.run(compose_config(
            "posterior", [*common, f"calibration={fitted}", "n_chains=4", "nuts.num_warmup=500", "nuts.num_draws=1500",
                     "nuts.target_accept=0.95"],
            output_dir=tmp_path / "posterior")))
    assert "calibration.nc has no covariance (a rank-deficient fit" in caplog.text
    grid = np.linspace(0.5, 5.0, 1801)
    a, b = np.meshgrid(grid, grid, indexing="ij")
    t = TIMES[1:4]
    density = np.exp(-0.5 * (((observed[1:4] - a[..., None] * b[..., None] * t) ** 2).sum(-1)))
    density /= density.sum()
    mean = np.array([(a * density).sum(), (b * density).sum()])
    std = np.sqrt(np.array([(a**2 * density).sum(), (b**2 * density).sum()]) - mean**2)
    assert int(ds["converged"]) == 1, ds.attrs["diagnostics"]
    se = std / np.sqrt(ds["ess_bulk"].values)
    assert np.all(np.abs(ds["posterior_mean"].values - mean) < 4 * se), (ds["posterior_mean"].values, mean, se)
    np.testing.assert_allclose(ds["posterior_std"].values, std, rtol=0.1)
    assert np.isnan(ds["laplace_std"].values).all() and np.isfinite(ds["laplace_mean"].values).all()
    starts = ds["initial"].values  # the best minimum, then three starts drawn over the box
    with open_result(fitted) as fit:
        np.testing.assert_allclose(starts[0], fit["estimate"].values[int(fit["best_start"])], rtol=1e-12)
    assert len({tuple(s) for s in starts}) == 4 and np.all((starts > 0.5) & (starts < 5.0))
    with pytest.raises(Exception, match="no Gaussian to propagate; sample the posterior"):
        propagate.run(compose_config("propagate", [*common, "propagate=calibration", f"uncertainty.path={fitted}"],
                                     output_dir=tmp_path / "propagate"))


def test_a_space_prior_says_it_leaves_the_spaces_correlation_out(compose_config, tmp_path, caplog):
    from workflows.plumbing import build

    corr = "space.correlation=[[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]]"
    for overrides, warned in (([corr], True), ([], False)):
        cfg = compose_config("posterior", ["prior_source=space", *overrides])
        caplog.clear()
        with caplog.at_level("WARNING", logger="workflows.posterior"):
            prior = posterior.prior_of(cfg, build.space_from(cfg), tmp_path / "unused.nc")
        assert prior.kind == "space"
        assert any("`space.correlation`" in r.getMessage() for r in caplog.records) == warned


def test_one_group_of_many_chains_on_a_multicore_cpu_is_told_of_chain_groups(monkeypatch, caplog):
    """16 NUTS chains as one group on 4 cores: the log names nuts.chain_groups=4; 2 groups, 4 chains, ChEES, or
    one core: no hint."""
    import logging
    import os

    from sensitivity.analyses.posterior import NUTS
    from workflows.posterior import _advise_chain_groups

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    with caplog.at_level(logging.INFO, logger="workflows.posterior"):
        _advise_chain_groups(NUTS(), 16)
        assert "on this CPU's 4 cores nuts.chain_groups=4 would run them side by side" in caplog.text
        caplog.clear()
        for sampler, chains in ((NUTS(chain_groups=2), 16), (NUTS(), 4), (NUTS(algorithm="chees"), 16)):
            _advise_chain_groups(sampler, chains)
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
        _advise_chain_groups(NUTS(), 16)
    assert "chain_groups" not in caplog.text


def test_lognormal_and_log_uniform_inputs_are_fitted_and_sampled_in_log_x_by_default():
    """The default `log_parameters` (null): `scale: log`, and the inputs whose law is one of log x on x > 0 (lognormal,
    log-uniform, not shifted by a loc, not truncated at 0); an explicit list, even empty, is taken as it is."""
    from sensitivity.inputs.space import ParameterSpace
    from workflows.plumbing.build import log_mask_from

    def law(kind, **params):
        return {"kind": kind, **params}

    records = [
        {"name": "cl", "units": "L h-1", "distribution": law("lognorm", s=0.3, scale=5.0)},
        {"name": "k", "units": "day-1", "distribution": law("loguniform", a=0.005, b=0.1)},
        {"name": "v", "units": "L", "distribution": {**law("lognormal", median=50.0, sigma_log=0.2)}},
        {"name": "shifted", "units": "1", "distribution": law("lognorm", s=0.3, loc=-1.0, scale=2.0)},
        {"name": "at_zero", "units": "1", "distribution": {**law("lognorm", s=0.3, scale=2.0), "truncate": [0.0, 9.0]}},
        {"name": "f", "units": "1", "distribution": law("beta", a=8, b=2)},
        {"name": "q", "units": "1", "low": 1.0, "high": 100.0, "scale": "log"},
        {"name": "u", "units": "1", "low": 1.0, "high": 100.0},
    ]
    space = ParameterSpace.from_records(records)
    np.testing.assert_array_equal(log_mask_from(None, space), [1, 1, 1, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(log_mask_from([], space), np.zeros(8, bool))
    np.testing.assert_array_equal(log_mask_from(["u"], space), [0, 0, 0, 0, 0, 0, 0, 1])


@pytest.mark.slow
def test_an_ensembles_posterior_predictive_band_carries_the_surrogates_error(compose_config, tmp_path, caplog):
    """`propagate=posterior experiment=seir_ensemble`: every draw through the ensemble mean and each of its 5
    members; ``output_band_combined_interval`` is the posterior band widened by the members' spread at the draws, by
    the indices' definition (:func:`sensitivity.outputs.members.combined_bounds` at the band's probability), CF-clean,
    in the log's table and the figure."""
    from sensitivity.outputs.members import spread_factor
    from sensitivity.simulators import seir
    from tests.helpers.cf import cf_errors

    sp = seir.space()
    truth = np.array([seir.TRUE_PARAMETERS[name] for name in sp.names])
    draws = truth * (1 + 0.01 * np.random.default_rng(2).standard_normal((4, 100, len(truth))))
    path = tmp_path / "posterior.nc"
    xr.Dataset({"draws": (("chain", "draw", "parameter"), draws, {"long_name": "posterior draws"}),
                "converged": ((), np.int8(1), {"long_name": "converged", "units": "1"})},
               coords=parameter_coords(sp.names, sp.units)).to_netcdf(path)
    record_checksum(path)
    overrides = ["experiment=seir_ensemble", "jacobian.jit_compile=false", "propagate=posterior",
                 f"uncertainty.path={path}", "propagation.methods=[first_order]"]
    with caplog.at_level("INFO", logger="workflows.propagate"):
        out = propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "out"))
    assert cf_errors(out) == []
    ds = by_method(open_result(out), "posterior")
    band, wide = ds["output_band"], ds["output_band_combined_interval"]
    level = float(wide.attrs["level"])
    half = spread_factor(5, level) * ds["output_band_surrogate_std"]
    mean = ds["output_mean"]
    np.testing.assert_allclose(wide.isel(bound=0), mean - np.hypot(mean - band.isel(bound=0), half), rtol=1e-9)
    np.testing.assert_allclose(wide.isel(bound=1), mean + np.hypot(band.isel(bound=1) - mean, half), rtol=1e-9)
    assert (ds["output_band_surrogate_std"] > 0).all()
    assert "band with the surrogate's error" in caplog.text
    assert (tmp_path / "out" / "propagation.png").stat().st_size > 0
