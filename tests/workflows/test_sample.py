"""Workflow `sample` wiring and `propagate uncertainty=posterior` (the posterior predictive) on stored draws."""
from __future__ import annotations

import json
import numpy as np
import pytest
import xarray as xr

from sensitivity.datasets import open_result
from sensitivity.errors import ConfigError
from sensitivity.labels import parameter_coords
from tests.helpers.propagation import FAST, SIX, C, W, by_method, linear_model, sha256, space
from workflows import propagate, sample


def write_posterior(path, names, draws, converged=1):
    ds = xr.Dataset({"draws": (("chain", "draw", "parameter"), draws, {"long_name": "posterior draws", "units": "m"}),
                     "converged": ((), np.int8(converged), {"long_name": "converged", "units": "1"})},
                    coords=parameter_coords(names, ["m"] * len(names)), attrs={"diagnostics": "R-hat 1.2 >= 1.01"})
    ds.to_netcdf(path)
    return path


def test_posterior_draws_through_the_model(compose_config, tmp_path):
    """A linear model: every moment method and the Monte Carlo predictive (the resampled draws) give
    W mean(draws) + c; the covariance of the moment methods is W cov(draws) W^T."""
    rng = np.random.default_rng(0)
    draws = rng.uniform(-1, 1, (2, 500, 6)) ** 3
    order = [3, 0, 5, 1, 4, 2]
    path = write_posterior(tmp_path / "posterior.nc", [f"p{i}" for i in order], draws[..., order])
    overrides = [*linear_model(), *space(SIX), *FAST, "uncertainty=posterior", f"uncertainty.path={path}",
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


def test_sample_needs_a_calibration(compose_config):
    with pytest.raises(ConfigError, match="`calibration` is required"):
        sample.run(compose_config("sample", ["observations.path=data/seir/observations.nc"]))


def test_propagate_posterior_needs_a_path(compose_config):
    with pytest.raises(ConfigError, match="must name a posterior result"):
        propagate.run(compose_config("propagate", ["uncertainty=posterior"]))
