"""The verb `worth` on a linear Gaussian model through the compiled engine, against Bayes' rule by direct inversion."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.worth.driver import worth
from sensitivity.analyses.worth.summary import summary
from sensitivity.analyses.worth.plan import WorthSettings
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.functionals import Functional
from sensitivity.outputs.spec import OutputDim, OutputSpec
from tests.helpers.linear_gaussian import forecast_variance, posterior

RNG = np.random.default_rng(7)
A = RNG.normal(size=(2, 6, 3))  # y[species, day] = A[species, day] . x
SPEC = OutputSpec(name="y", units="m", dims=(OutputDim("species", ("a", "b")), OutputDim("day", tuple(range(1, 7)),
                                                                                         units="day")))
SPACE = ParameterSpace.from_records([{"name": f"x{i}", "units": "1", "low": -1e3, "high": 1e3,
                                      "distribution": {"kind": "norm", "loc": 0.0, "scale": s}}
                                     for i, s in enumerate((1.0, 2.0, 0.5))])
OBSERVED = np.full((2, 6), np.nan)
OBSERVED[0, :3] = 1.0
OBSERVED[1, 1] = 2.0
SIGMA = np.full((2, 6), 0.5)
FORECASTS = (Functional("total_a", "sum", at={"species": "a"}, over=("day",)),
             Functional("b_on_5", at={"species": "b", "day": 5}))
REL = 0.0
CAND_SIGMA = 0.7


class LinearModel:
    """A stand-in of the compiled engine: values and exact Jacobians of ``y = A x``."""

    class surrogate:  # noqa: N801 - the engine's attribute
        output = SPEC

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.einsum("sdn,kn->ksd", A, x), np.broadcast_to(A, (len(x), *A.shape)).copy()


def run(**kw):
    settings = WorthSettings(forecasts=FORECASTS, candidate_sigma=CAND_SIGMA, candidate_relative_sigma=REL,
                             design={"k": 3}, **kw.pop("settings", {}))
    return worth(LinearModel(), SPACE, settings, best_fit=np.array([0.3, -0.2, 0.1]), observed_values=OBSERVED,
                 noise=SIGMA, **kw)


def reference():
    jac = A.reshape(12, 3)
    obs = np.flatnonzero(np.isfinite(OBSERVED.ravel()))
    prior = np.diag([1.0, 4.0, 0.25])
    fore = np.stack([A[0].sum(axis=0), A[1, 4]], axis=1)
    post = posterior(jac[obs], prior, np.full(obs.size, 0.25))
    return jac, obs, prior, fore, post


def test_variances_and_worth_equal_bayes_rule_by_inversion() -> None:
    ds = run()
    jac, obs, prior, fore, post = reference()
    base = forecast_variance(post, fore)
    np.testing.assert_allclose(ds["prior_variance"], forecast_variance(prior, fore), rtol=1e-12)
    np.testing.assert_allclose(ds["posterior_variance"], base, rtol=1e-10)
    added = ds["added_worth"].values.reshape(2, 12)
    for c in range(12):
        if c in obs:
            assert np.isnan(added[:, c]).all()
            continue
        grown = posterior(jac[np.append(obs, c)], prior, np.append(np.full(obs.size, 0.25), CAND_SIGMA**2))
        np.testing.assert_allclose(added[:, c], base - forecast_variance(grown, fore), rtol=1e-8, atol=1e-14)
    removed = ds["removed_worth"].values.reshape(2, 12)
    for i, o in enumerate(obs):
        rest = np.delete(obs, i)
        shrunk = posterior(jac[rest], prior, np.full(rest.size, 0.25))
        np.testing.assert_allclose(removed[:, o], forecast_variance(shrunk, fore) - base, rtol=1e-8, atol=1e-14)
    assert ds["added_worth"].dims == ("forecast", "species", "day")
    assert list(ds["design_name"].values) == ["total_a", "b_on_5"]


def test_the_first_design_step_is_the_best_single_candidate() -> None:
    ds = run()
    for f in range(2):
        best = np.nanargmax(ds["added_worth"].values[f].ravel())
        assert ds["design_choice"].values[f, 0] == SPEC.flat_names()[best]


def test_grouped_by_day_adds_both_species_at_once() -> None:
    ds = run(settings={"group_candidates_by": "day"})
    jac, obs, prior, fore, post = reference()
    base = forecast_variance(post, fore)
    day6 = [5, 11]
    grown = posterior(jac[np.append(obs, day6)], prior, np.append(np.full(obs.size, 0.25), [CAND_SIGMA**2] * 2))
    assert ds["added_worth"].dims == ("forecast", "day")
    np.testing.assert_allclose(ds["added_worth"].sel(day=6), base - forecast_variance(grown, fore), rtol=1e-8)


def test_the_posterior_average_equals_the_linear_analysis_on_a_linear_model() -> None:
    draws = np.random.default_rng(1).normal(size=(2, 40, 3))
    ds = run(draws=draws, settings={"batch_size": 16})
    np.testing.assert_allclose(ds["averaged_posterior_variance"], ds["posterior_variance"], rtol=1e-12)
    np.testing.assert_allclose(ds["averaged_added_worth"], ds["added_worth"], rtol=1e-10)
    assert (ds["linear_disagrees"] == 0).all()
    assert summary(ds).warnings == ()


@pytest.mark.parametrize("settings, message", [
    ({"forecasts": (Functional("f", "sum", over=("days",)),)}, "'days' is not an output dim"),
    ({"candidates": {"day": [2]}}, r"candidates: y\[species=a,day=2\] is already observed"),
    ({"group_candidates_by": "station"}, "`group_candidates_by` 'station' is not an output dim"),
])
def test_bad_settings_are_one_line_errors(settings, message) -> None:
    forecasts = settings.pop("forecasts", FORECASTS)
    with pytest.raises(ConfigError, match=message):
        worth(LinearModel(), SPACE, WorthSettings(forecasts=forecasts, **settings), best_fit=np.zeros(3),
              observed_values=OBSERVED, noise=SIGMA)


def test_a_singular_prior_is_refused() -> None:
    with pytest.raises(ConfigError, match="prior covariance must be positive definite"):
        run(prior_covariance=np.ones((3, 3)))


def test_the_dataset_round_trips_through_netcdf(tmp_path) -> None:
    import xarray as xr

    ds = run(draws=np.zeros((4, 3)))
    ds.to_netcdf(tmp_path / "worth.nc", engine="netcdf4")
    back = xr.open_dataset(tmp_path / "worth.nc")
    np.testing.assert_array_equal(back["added_worth"].values, ds["added_worth"].values)
    assert list(back["design_choice"].values[0]) == list(ds["design_choice"].values[0])


def test_a_best_fit_on_the_bound_of_a_log_scale_parameter_is_that_bound() -> None:
    """A calibration on the lower bound of a log-scale parameter reports ``exp(log(low))``, a rounding below it
    (1e-5 -> 9.999999999999997e-06): the worth at that fit runs, as at the bound (it was refused as outside)."""
    space = ParameterSpace.from_records([{"name": "x0", "units": "1", "low": 1e-5, "high": 1e-3, "scale": "log"},
                                         {"name": "x1", "units": "1", "low": -1.0, "high": 1.0},
                                         {"name": "x2", "units": "1", "low": -1.0, "high": 1.0}])
    fit = np.array([np.exp(np.log(1e-5)), 0.2, 0.1])
    assert fit[0] < 1e-5
    settings = WorthSettings(forecasts=FORECASTS, candidate_relative_sigma=REL, candidate_sigma=CAND_SIGMA)
    common = dict(observed_values=OBSERVED, noise=SIGMA)
    at_fit = worth(LinearModel(), space, settings, best_fit=fit, **common)
    at_bound = worth(LinearModel(), space, settings, best_fit=np.array([1e-5, 0.2, 0.1]), **common)
    np.testing.assert_array_equal(at_fit["forecast_value"].values, at_bound["forecast_value"].values)


def test_the_dataset_records_the_prior_covariance_it_used_with_its_units(tmp_path) -> None:
    import xarray as xr

    space = ParameterSpace.from_records([{"name": f"x{i}", "units": "m", "low": -1e3, "high": 1e3,
                                          "distribution": {"kind": "norm", "loc": 0.0, "scale": s}}
                                         for i, s in enumerate((1.0, 2.0, 0.5))])
    settings = WorthSettings(forecasts=FORECASTS, candidate_sigma=CAND_SIGMA, candidate_relative_sigma=REL)
    given = np.array([[1.0, 0.3, 0.0], [0.3, 2.0, -0.1], [0.0, -0.1, 0.5]])
    for prior, expected in ((given, given), (None, np.diag([1.0, 4.0, 0.25]))):  # None: the space's moments
        ds = worth(LinearModel(), space, settings, best_fit=np.array([0.3, -0.2, 0.1]), observed_values=OBSERVED,
                   noise=SIGMA, prior_covariance=prior)
        ds.to_netcdf(tmp_path / "worth.nc", engine="netcdf4")
        with xr.open_dataset(tmp_path / "worth.nc") as back:
            cov = back["prior_covariance"]
            assert cov.dims == ("parameter_i", "parameter_j") and cov.attrs["units"] == "m2"
            assert list(back["parameter_i_name"].values) == list(back["parameter_j_name"].values) == ["x0", "x1", "x2"]
            np.testing.assert_allclose(cov.values, expected, rtol=1e-12)
            # the posterior variance is the one of this prior (Bayes' rule by inversion)
            jac, obs, _, fore, _ = reference()
            np.testing.assert_allclose(back["posterior_variance"],
                                       forecast_variance(posterior(jac[obs], expected, np.full(obs.size, 0.25)), fore),
                                       rtol=1e-10)
