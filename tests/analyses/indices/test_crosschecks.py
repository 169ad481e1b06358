"""Cross-checks: Kendall tau-b against scipy, top-k agreement, DGSM bound flags, an end-to-end Sobol' G run."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from sensitivity.analyses.indices import crosschecks, dgsm, sobol
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.labels import output_coords, parameter_coords
from tests.helpers.functions import sobol_g, sobol_g_jacobian, uniform_space


def measure(values: np.ndarray) -> xr.DataArray:
    n, m = values.shape
    coords = {**parameter_coords([f"x{i}" for i in range(n)]), **output_coords([f"y{k}" for k in range(m)])}
    return xr.DataArray(values, dims=("parameter", "output"), coords=coords)


def test_kendall_tau_b_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, size=(7, 5)).astype(float)  # small integers: many ties
    b = rng.integers(0, 4, size=(7, 5)).astype(float)
    ds = crosschecks.rankings({"a": measure(a), "b": measure(b)}, top_k=2)
    for k in range(5):
        expected = stats.kendalltau(a[:, k], b[:, k], variant="b").statistic
        assert float(ds.kendall_tau.sel(measure_i=0, measure_j=1, output=k)) == pytest.approx(expected, abs=1e-12)
    np.testing.assert_allclose(ds.kendall_tau.sel(measure_i=0, measure_j=0), 1.0)


def test_ranks_and_top_k_agreement():
    a = np.array([[0.9], [0.5], [0.1], [0.3]])
    b = np.array([[0.8], [0.1], [0.7], [0.2]])
    ds = crosschecks.rankings({"a": measure(a), "b": measure(b)}, top_k=2)
    np.testing.assert_array_equal(ds["rank"].sel(measure=0, output=0), [1, 2, 4, 3])
    # top-2 of a: {x0, x1}; of b: {x0, x2}; one shared of two.
    assert float(ds.top_k_agreement.sel(measure_i=0, measure_j=1, output=0)) == 0.5
    assert float(ds.top_k_agreement.sel(measure_i=1, measure_j=1, output=0)) == 1.0


def _bound_datasets(total, total_low, bound, bound_high):
    coords = {**parameter_coords(["p0", "p1", "p2", "p3"]), **output_coords(["y"])}
    col = lambda v: np.asarray(v, dtype=float)[:, None]  # noqa: E731
    sob = xr.Dataset(
        {"ST": (("parameter", "output"), col(total)),
         "ST_interval": (("parameter", "output", "bound"), np.stack([col(total_low), col(total) + 0.01], -1))},
        coords=coords,
    )
    dg = xr.Dataset(
        {"sobol_total_bound": (("parameter", "output"), col(bound)),
         "sobol_total_bound_interval": (("parameter", "output", "bound"), np.stack([col(bound) - 0.01, col(bound_high)], -1))},
        coords=coords,
    )
    return dg, sob


def test_dgsm_bound_flags():
    # p0 below its bound; p1 above it but the intervals overlap; p2 above it beyond both intervals; p3 no bound.
    dg, sob = _bound_datasets(
        total=[0.2, 0.5, 0.6, 0.3], total_low=[0.1, 0.4, 0.55, 0.2], bound=[0.3, 0.45, 0.4, np.nan], bound_high=[0.4, 0.5, 0.45, np.nan]
    )
    ds = crosschecks.dgsm_bound(dg, sob)
    np.testing.assert_array_equal(ds.dgsm_bound_check.isel(output=0), [0, 1, 2, 3])
    np.testing.assert_allclose(ds.dgsm_bound_margin.isel(output=0)[:3], [0.1, -0.05, -0.2])


def test_an_index_at_the_rounding_floor_does_not_violate_its_bound():
    """A field cell 1e-7 as influential as the others: its exact DGSM bound is 4e-16, the Sobol' ST of float32
    outputs 3e-15 with a bootstrap interval [2.7e-15, 3.7e-15] (the estimator's rounding floor, which resampling
    does not see): consistent, not a violation."""
    dg, sob = _bound_datasets(total=[3e-15] * 4, total_low=[2.7e-15] * 4, bound=[4e-16] * 4, bound_high=[4.6e-16] * 4)
    assert int(crosschecks.dgsm_bound(dg, sob).dgsm_bound_check.isel(output=0, parameter=0)) == 0


def test_sobol_g_end_to_end_bound_holds_and_rankings_agree():
    a = (0.0, 1.0, 4.5, 9.0)
    space = uniform_space(4, 0.0, 1.0)
    x = sobol.sample(space, 1024, seed=0)
    st = sobol.analyze(sobol_g(x, a), space, intervals=IntervalPlan("rqmc", n_resamples=30, seed=0))
    p = dgsm.sample(space, 1024, seed=1)
    dg = dgsm.analyze(sobol_g_jacobian(p, a), sobol_g(p, a), space, intervals=IntervalPlan("rqmc", n_resamples=30,
                      seed=1))
    check = crosschecks.dgsm_bound(dg, st)
    assert (check.dgsm_bound_check == crosschecks.CONSISTENT).all()
    ranks = crosschecks.rankings({"ST": st.ST, "dgsm": dg.sobol_total_bound}, top_k=2)
    # The G-function's importance decreases with a_i for both measures: identical rankings.
    assert float(ranks.kendall_tau.sel(measure_i=0, measure_j=1, output=0)) == pytest.approx(1.0)
    assert float(ranks.top_k_agreement.sel(measure_i=0, measure_j=1, output=0)) == 1.0


def test_mismatched_inputs_are_clear_errors():
    dg, sob = _bound_datasets([0.1] * 4, [0.0] * 4, [0.2] * 4, [0.3] * 4)
    with pytest.raises(DataError, match="must share parameter_name"):
        crosschecks.dgsm_bound(dg, sob.assign_coords(parameter_name=("parameter", ["a", "b", "c", "d"])))
    with pytest.raises(ConfigError, match="at least two methods"):
        crosschecks.rankings({"a": measure(np.ones((3, 1)))})
    with pytest.raises(DataError, match=r"measures\['b'\]"):
        crosschecks.rankings({"a": measure(np.ones((3, 1))), "b": measure(np.ones((2, 1)))})


def test_a_measure_undefined_everywhere_is_left_out_of_the_rankings():
    """The DGSM bound of dependent inputs is NaN throughout: it ranks nothing, so it takes no part in the
    agreement (which would read NaN against every other measure); the others' tau is scipy's."""
    from sensitivity.analyses.indices.driver import ranking_measures

    rng = np.random.default_rng(1)
    st, shapley = rng.uniform(size=(5, 2)), rng.uniform(size=(5, 2))
    results = {"dgsm": xr.Dataset({"sobol_total_bound": measure(np.full((5, 2), np.nan))}),
               "sobol": xr.Dataset({"ST": measure(st)}), "shapley": xr.Dataset({"effect": measure(shapley)})}
    measures = ranking_measures(results)
    assert list(measures) == ["sobol_ST", "shapley_effect"]
    tau = crosschecks.rankings(measures).kendall_tau.sel(measure_i=0, measure_j=1).values
    np.testing.assert_allclose(tau, [stats.kendalltau(st[:, k], shapley[:, k]).statistic for k in range(2)])


def test_a_parameter_without_a_measure_leaves_the_others_ranked():
    """A lognormal input has no Poincare constant, so its DGSM bound is NaN: tau-b, ranks and top-k are those of
    the parameters both measures have (scipy on the complete pairs), not NaN for every output."""
    rng = np.random.default_rng(2)
    a, b = rng.uniform(size=(6, 3)), rng.uniform(size=(6, 3))
    a[5] = np.nan  # the last parameter has no bound on any output
    b[0, 2] = np.nan  # and the first none for the third output of the other measure
    ds = crosschecks.rankings({"a": measure(a), "b": measure(b)}, top_k=2)
    for k in range(3):
        both = np.isfinite(a[:, k]) & np.isfinite(b[:, k])
        expected = stats.kendalltau(a[both, k], b[both, k], variant="b").statistic
        assert float(ds.kendall_tau.sel(measure_i=0, measure_j=1, output=k)) == pytest.approx(expected, abs=1e-12)
        expected_self = stats.kendalltau(b[np.isfinite(b[:, k]), k], b[np.isfinite(b[:, k]), k]).statistic
        assert float(ds.kendall_tau.sel(measure_i=1, measure_j=1, output=k)) == pytest.approx(expected_self)
    ranks = ds["rank"].sel(measure=0).values
    assert np.isnan(ranks[5]).all()
    np.testing.assert_array_equal(ranks[:5, 0], stats.rankdata(-a[:5, 0]))
    top = set(np.argsort(-a[:5, 0])[:2]) & set(np.argsort(-b[:, 0])[:2])
    assert float(ds.top_k_agreement.sel(measure_i=0, measure_j=1, output=0)) == len(top) / 2
