"""The worth of data on an ensemble of linear models: each member's worth against Bayes' rule by direct inversion
with that member's Jacobian, their spread and combined interval, and the ranking verdict against scipy's Spearman."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.worth import summary, worth_ensemble
from sensitivity.analyses.worth.plan import WorthSettings
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.functionals import Functional
from sensitivity.outputs.members import spread_factor
from sensitivity.outputs.spec import OutputDim, OutputSpec
from tests.helpers.linear_gaussian import forecast_variance, posterior

DAYS = 8
SPEC = OutputSpec(name="y", units="m", dims=(OutputDim("day", tuple(range(1, DAYS + 1)), units="day"),))
SCALES = np.array([1.0, 2.0, 0.5])
SPACE = ParameterSpace.from_records([{"name": f"x{i}", "units": "1", "low": -1e3, "high": 1e3,
                                      "distribution": {"kind": "norm", "loc": 0.0, "scale": s}}
                                     for i, s in enumerate(SCALES)])
OBSERVED = np.r_[np.ones(4), np.full(DAYS - 4, np.nan)]  # days 1-4 observed, 5-8 the candidates
SIGMA, CANDIDATE_SIGMA = np.full(DAYS, 0.5), 0.7
FORECASTS = (Functional("total", "sum", over=("day",)), Functional("on_day_8", at={"day": 8}))
SETTINGS = WorthSettings(forecasts=FORECASTS, candidate_sigma=CANDIDATE_SIGMA, candidate_relative_sigma=0.0,
                         min_rank_correlation=0.8)
BASE = np.random.default_rng(3).normal(size=(DAYS, 3))


class LinearEnsemble:
    """A stand-in of the compiled ensemble: every member's values and exact Jacobians of ``y = A_k x``."""

    class surrogate:  # noqa: N801 - the engine's attribute
        output = SPEC

    def __init__(self, jacobians: np.ndarray) -> None:
        self.jacobians = jacobians  # [K, day, n]
        self.members = len(jacobians)

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.einsum("kdn,pn->kpd", self.jacobians, x),
                np.broadcast_to(self.jacobians[:, None], (self.members, len(x), *self.jacobians.shape[1:])).copy())


def closed_form(a: np.ndarray) -> dict:
    """Posterior forecast variances and the worth of each candidate day (added) and observed day (removed) of the
    linear model ``y = a x``: Bayes' rule by direct inversion."""
    prior, g = np.diag(SCALES**2), np.stack([a.sum(axis=0), a[DAYS - 1]], axis=1)
    base = forecast_variance(posterior(a[:4], prior, SIGMA[:4] ** 2), g)
    added = [base - forecast_variance(posterior(a[[0, 1, 2, 3, d]], prior, np.r_[SIGMA[:4] ** 2, CANDIDATE_SIGMA**2]),
                                      g) for d in range(4, DAYS)]
    removed = [forecast_variance(posterior(np.delete(a[:4], d, axis=0), prior, SIGMA[:3] ** 2), g) - base
               for d in range(4)]
    return {"posterior_variance": base, "added": np.array(added).T, "removed": np.array(removed).T}


def run(jacobians: np.ndarray, draws: np.ndarray | None = None):
    return worth_ensemble(LinearEnsemble(jacobians), SPACE, SETTINGS, best_fit=np.array([0.1, -0.2, 0.3]),
                          observed_values=OBSERVED, noise=SIGMA, draws=draws)


def spearman_robust(reference: dict, members: list[dict], level: float) -> np.ndarray:
    """The verdict from the closed forms: every member's Spearman >= level and the same best day, both worths."""
    robust = np.ones(2, dtype=bool)
    for kind in ("added", "removed"):
        for m in members:
            for f in range(2):
                rho = stats.spearmanr(reference[kind][f], m[kind][f]).statistic
                robust[f] &= rho >= level and np.argmax(m[kind][f]) == np.argmax(reference[kind][f])
    return robust


def test_each_members_worth_its_spread_and_the_ranking_verdict_against_closed_forms():
    rng = np.random.default_rng(11)
    jacobians = BASE + rng.normal(0.0, 0.6, size=(3, DAYS, 3))  # members that disagree
    ds = run(jacobians)
    members, mean = [closed_form(a) for a in jacobians], closed_form(jacobians.mean(axis=0))
    assert ds.attrs["ensemble_members"] == 3 and ds["added_worth_member"].dims == ("member", "forecast", "day")
    added = np.stack([m["added"] for m in members])
    np.testing.assert_allclose(ds["added_worth_member"].values[:, :, 4:], added, rtol=1e-9)
    assert np.isnan(ds["added_worth_member"].values[:, :, :4]).all()
    np.testing.assert_allclose(ds["removed_worth_member"].values[:, :, :4], np.stack([m["removed"] for m in members]),
                               rtol=1e-9)
    np.testing.assert_allclose(ds["posterior_variance_member"].values,
                               np.stack([m["posterior_variance"] for m in members]), rtol=1e-10)
    np.testing.assert_allclose(ds["added_worth"].values[:, 4:], mean["added"], rtol=1e-9)  # the ensemble mean's
    std = added.std(axis=0, ddof=1)
    np.testing.assert_allclose(ds["added_worth_surrogate_std"].values[:, 4:], std, rtol=1e-8)
    interval = ds["added_worth_combined_interval"].values[:, 4:]
    half = spread_factor(3, SETTINGS.level) * std
    np.testing.assert_allclose(interval[..., 0], mean["added"] - half, rtol=1e-8)
    np.testing.assert_allclose(interval[..., 1], mean["added"] + half, rtol=1e-8)
    for k in range(3):
        for f in range(2):
            np.testing.assert_allclose(ds["added_worth_rank_correlation"].values[k, f],
                                       stats.spearmanr(mean["added"][f], added[k, f]).statistic, rtol=1e-12)
    expected = spearman_robust(mean, members, SETTINGS.min_rank_correlation)
    np.testing.assert_array_equal(ds["worth_ranking_robust"].values, expected.astype(np.int8))
    assert not expected.all()  # these members do disagree somewhere: the verdict says so
    verdicts = summary(ds).verdicts
    assert [v.holds for v in verdicts] == list(expected)
    assert all("depends on the surrogate's error" in v.statement for v in verdicts if not v.holds)
    assert verdicts[0].worst.columns[0] == "member" and len(verdicts[0].worst.rows) == 3
    assert ds["design_choice_member"].dims == ("member", "design", "step")


def test_members_that_agree_rank_the_data_alike_and_their_posterior_average_is_the_linear_answer():
    """Near-identical members: the verdict holds; on linear members the posterior-averaged worth of each member is
    its linear worth (every draw has the same Jacobian)."""
    jacobians = BASE + np.random.default_rng(2).normal(0.0, 1e-3, size=(3, DAYS, 3))
    draws = np.random.default_rng(4).normal(size=(10, 3))
    ds = run(jacobians, draws=draws)
    assert ds["worth_ranking_robust"].values.tolist() == [1, 1]
    assert all(v.holds for v in summary(ds).verdicts)
    np.testing.assert_allclose(ds["averaged_added_worth_member"].values, ds["added_worth_member"].values, rtol=1e-9)
    np.testing.assert_allclose(ds["averaged_posterior_variance_member"].values,
                               ds["posterior_variance_member"].values, rtol=1e-10)
    for k, a in enumerate(jacobians):
        assert (ds["design_choice_member"].values[k, :, 0] != "").all()
        np.testing.assert_allclose(ds["added_worth_member"].values[k, :, 4:], closed_form(a)["added"], rtol=1e-9)


@pytest.mark.parametrize("key, value, message", [("level", 1.0, "`level` must be a number in (0, 1), got 1.0"),
                                                 ("min_rank_correlation", 2,
                                                  "`min_rank_correlation` must be a number in [-1, 1], got 2")])
def test_bad_ensemble_settings_are_one_line(key, value, message):
    from sensitivity.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        WorthSettings(forecasts=FORECASTS, **{key: value})
    assert str(err.value) == message


def contributions_closed_form(a: np.ndarray) -> np.ndarray:
    """``[n_par, 2]`` drop of each forecast's posterior variance were the parameter known (its row and column gone
    from the diagonal prior, its column from ``a``): Bayes' rule by direct inversion."""
    prior, g = np.diag(SCALES**2), np.stack([a.sum(axis=0), a[DAYS - 1]], axis=1)
    base = forecast_variance(posterior(a[:4], prior, SIGMA[:4] ** 2), g)
    drops = []
    for i in range(3):
        keep = np.delete(np.arange(3), i)
        known = posterior(a[:4][:, keep], prior[np.ix_(keep, keep)], SIGMA[:4] ** 2)
        drops.append(base - forecast_variance(known, g[keep]))
    return np.array(drops)


def test_parameter_contributions_carry_each_members_value_their_spread_and_combined_interval():
    """Members whose Jacobians differ (by 30 % of the base's scale): each member's contribution of each parameter
    against its closed form, their sd and the combined interval of sensitivity.outputs.members around the mean's."""
    jacobians = BASE + np.random.default_rng(12).normal(0.0, 0.3, size=(4, DAYS, 3))
    ds = run(jacobians)
    members = np.stack([contributions_closed_form(a) for a in jacobians])
    mean = contributions_closed_form(jacobians.mean(axis=0))
    assert ds["contribution_member"].dims == ("member", "parameter", "forecast")
    np.testing.assert_allclose(ds["contribution_member"].values, members, rtol=1e-9)
    np.testing.assert_allclose(ds["contribution"].values, mean, rtol=1e-9)
    std = members.std(axis=0, ddof=1)
    np.testing.assert_allclose(ds["contribution_surrogate_std"].values, std, rtol=1e-8)
    half = spread_factor(4, SETTINGS.level) * std
    interval = ds["contribution_combined_interval"]
    assert interval.dims == ("parameter", "forecast", "bound")
    np.testing.assert_allclose(interval.values[..., 0], mean - half, rtol=1e-8)
    np.testing.assert_allclose(interval.values[..., 1], mean + half, rtol=1e-8)
    assert np.all(std > 1e-3 * np.abs(mean))  # the members do disagree: the interval is not the mean alone
    for name in ("posterior_variance_parameter_known", "prior_variance_parameter_known"):
        assert ds[f"{name}_combined_interval"].dims == ("parameter", "forecast", "bound")
