"""The combined interval of an ensemble's calibration estimates (``estimate_combined_interval``): the fit's own
interval and the members' spread of their estimates, on a linear Gaussian model whose posterior has a closed form."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.calibration import calibrate_ensemble
from sensitivity.inputs.space import ParameterSpace
from tests.helpers.biased_ensemble import A, K, SIGMA, biased_ensemble

LEVEL = 0.95


def fit(e, **problem):
    """:func:`calibrate_ensemble` of a :func:`biased_ensemble`."""
    return calibrate_ensemble(e.mean, e.members, e.values, e.observations, **problem)


def test_the_combined_interval_is_the_closed_form_fit_interval_widened_by_the_members_spread():
    """Oracle: ordinary least squares for the ensemble mean and each member, ``z`` and Student's ``t`` from scipy."""
    rng = np.random.default_rng(0)
    truth = np.array([0.7, -0.3])
    e = biased_ensemble(rng, truth)
    ds = fit(e, starts=np.zeros((1, 2)))
    y, offsets = e.observations.y_obs, e.offsets[1:]
    estimate = np.linalg.lstsq(A, y - offsets.mean(axis=0), rcond=None)[0]
    se = SIGMA * np.sqrt(np.diag(np.linalg.inv(A.T @ A)))
    own = np.array([np.linalg.lstsq(A, y - b, rcond=None)[0] for b in offsets])
    half = np.hypot(stats.norm.ppf(0.975) * se,
                    stats.t.ppf(0.975, K - 1) * np.sqrt(1 + 1 / K) * own.std(axis=0, ddof=1))
    combined = ds["estimate_combined_interval"]
    np.testing.assert_allclose(combined.values, np.stack([estimate - half, estimate + half], axis=-1), rtol=1e-6)
    assert combined.dims == ("parameter", "bound") and combined.attrs["level"] == LEVEL
    assert "combined" in combined.attrs["long_name"]


def test_a_log_parameters_combined_interval_is_symmetric_in_log_x():
    """Fitted in log a: the members' spread and the fit's interval combine in log a, as the fit's own interval does."""
    rng = np.random.default_rng(1)
    space = ParameterSpace.from_records([dict(name="a", units="m", low=0.1, high=10.0),
                                         dict(name="b", units="1", low=-5.0, high=5.0)])
    ds = fit(biased_ensemble(rng, np.array([2.0, -0.3])), starts=np.array([[1.0, 0.0]]), space=space,
             log_parameters=np.array([True, False]))
    best = int(ds["best_start"])
    low, high = np.log(ds["estimate_combined_interval"].values[0])
    log_estimate = np.log(ds["estimate"].values[best, 0])
    np.testing.assert_allclose(log_estimate - low, high - log_estimate, rtol=1e-9)
    fit_low, fit_high = np.log(ds["parameter_interval"].values[best, 0])
    spread = np.log(ds["estimate_member"].values[:, 0]).std(ddof=1)
    expected = np.hypot(log_estimate - fit_low, stats.t.ppf(0.975, K - 1) * np.sqrt(1 + 1 / K) * spread)
    np.testing.assert_allclose(high - log_estimate, expected, rtol=1e-9)
    assert ds["estimate_combined_interval"].attrs["units_coordinate"] == "parameter_units"


@pytest.mark.slow  # 200 calibrations of an ensemble: about 80 s on 2 shared cores
def test_the_combined_interval_covers_the_truth_at_its_level_where_the_fits_own_interval_does_not():
    """Over 200 biased ensembles of the linear model: the fit's own 95 % interval knows only the noise and misses
    the truth most of the time; the combined one holds it at about its level (a binomial 99.9 % band around 0.95
    for 400 parameter checks is 0.91-0.98; measured: the fit's 0.285, the combined 0.9475)."""
    held = {"fit": 0, "combined": 0}
    runs = 200
    for seed in range(runs):
        rng = np.random.default_rng(100 + seed)
        truth = rng.uniform(-1, 1, 2)
        ds = fit(biased_ensemble(rng, truth), starts=np.zeros((1, 2)))
        for name, interval in (("fit", ds["parameter_interval"].values[int(ds["best_start"])]),
                               ("combined", ds["estimate_combined_interval"].values)):
            held[name] += int(((interval[:, 0] <= truth) & (truth <= interval[:, 1])).sum())
    share = {name: count / (2 * runs) for name, count in held.items()}
    print(f"coverage of the 95 % intervals over {runs} ensembles: {share}")
    assert share["fit"] < 0.5
    assert 0.91 <= share["combined"] <= 0.99


@pytest.mark.parametrize("failed", [1, 4])
def test_members_whose_fit_failed_are_left_out_and_fewer_than_two_give_nan(failed):
    from sensitivity.analyses.calibration.emulator import estimate_combined_interval

    rng = np.random.default_rng(3)
    ds = fit(biased_ensemble(rng, np.array([0.7, -0.3])), starts=np.zeros((1, 2)))
    ds["estimate_member"][:failed] = np.nan
    combined = estimate_combined_interval(ds).values
    if failed == 4:
        assert np.isnan(combined).all()
    else:
        kept = ds["estimate_member"].values[failed:]
        half = combined[:, 1] - ds["estimate"].values[int(ds["best_start"])]
        own = np.diff(ds["parameter_interval"].values[int(ds["best_start"])], axis=-1)[:, 0] / 2
        surrogate = stats.t.ppf(0.975, K - failed - 1) * np.sqrt(1 + 1 / (K - failed)) * kept.std(axis=0, ddof=1)
        np.testing.assert_allclose(half, np.hypot(own, surrogate), rtol=1e-9)


def test_the_summary_shows_the_combined_interval_beside_the_fits_and_whether_it_holds_the_truth():
    from sensitivity.analyses.calibration.observations import with_true_parameters
    from sensitivity.analyses.calibration.summary import summary
    from sensitivity.datasets.summary_text import interval

    truth = np.array([0.7, -0.3])
    ds = with_true_parameters(fit(biased_ensemble(np.random.default_rng(4), truth), starts=np.zeros((1, 2))),
                              {"p0": truth[0], "p1": truth[1]})
    table = summary(ds).tables[0]
    at = table.columns.index("95% interval")
    assert table.columns[at + 1] == "95% combined interval (fit and surrogate)"
    assert table.columns[-1] == "inside the combined interval"
    for j, row in enumerate(table.rows):
        low, high = ds["estimate_combined_interval"].values[j]
        assert row[at + 1].text == interval(low, high)
        assert row[-1].text == ("yes" if low <= truth[j] <= high else "no")
    assert "spread of the 5 members' own estimates" in table.note
