"""Sobol' indices: SALib 1.6 as an oracle on identical samples, closed forms, groups, bad inputs."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from SALib.analyze import sobol as salib_sobol
from SALib.sample import sobol as salib_sample

from sensitivity.analyses.indices import sobol
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.errors import ConfigError, DataError
from sensitivity.inputs.space import ParameterSpace
from tests.helpers.functions import ishigami, ishigami_indices, linear, sobol_g, sobol_g_indices, uniform_space

ISHIGAMI = uniform_space(3, -np.pi, np.pi)
PROBLEM = {"num_vars": 3, "names": ["x0", "x1", "x2"], "bounds": [[-np.pi, np.pi]] * 3}
G_A = (0.0, 1.0, 4.5, 9.0, 99.0, 99.0)


def two_outputs(x: np.ndarray) -> np.ndarray:
    """Ishigami and a second, differently shaped output, so every output is checked at once."""
    y = ishigami(x)[:, 0]
    return np.stack([y, np.exp(0.3 * y) + x[:, 2]], axis=1)


def salib(values: np.ndarray, problem: dict, second: bool, seed: int) -> list[dict]:
    """SALib's analysis, one output at a time (its only mode), with the same bootstrap seed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [
            salib_sobol.analyze(problem, values[:, k].copy(), calc_second_order=second, num_resamples=50, seed=seed)
            for k in range(values.shape[1])
        ]


@pytest.mark.parametrize("second", [False, True])
def test_sample_is_salibs_sobol_layout(second):
    ours = sobol.sample(ISHIGAMI, 64, seed=11, calc_second_order=second, replicates=1)
    # SALib hands `seed` to scipy's Sobol; given the Generator we seed, it draws the same scrambling.
    theirs = salib_sample.sample(dict(PROBLEM), 64, calc_second_order=second, seed=np.random.default_rng(11))
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)


def test_grouped_sample_is_salibs_layout():
    groups = {"g1": ["x0", "x2"], "g2": ["x1"]}
    ours = sobol.sample(ISHIGAMI, 32, seed=5, groups=groups, calc_second_order=True, replicates=1)
    problem = dict(PROBLEM, groups=["g1", "g2", "g1"])
    theirs = salib_sample.sample(problem, 32, calc_second_order=True, seed=np.random.default_rng(5))
    assert ours.shape == (32 * 6, 3)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)


@pytest.mark.parametrize("second", [False, True])
def test_indices_and_intervals_match_salib_on_identical_samples(second):
    x = sobol.sample(ISHIGAMI, 512, seed=3, calc_second_order=second, replicates=1)
    y = two_outputs(x)
    ds = sobol.analyze(y, ISHIGAMI, calc_second_order=second, intervals=IntervalPlan("bootstrap", n_resamples=50,
                       interval="normal", seed=42))
    for k, ref in enumerate(salib(y, dict(PROBLEM), second, seed=42)):
        out = ds.isel(output=k)
        np.testing.assert_allclose(out.S1, ref["S1"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(out.ST, ref["ST"], rtol=0, atol=1e-10)
        # SALib's *_conf is the half-width z * sd of the same bootstrap resamples.
        np.testing.assert_allclose(out.S1_interval.sel(bound=0), ref["S1"] - ref["S1_conf"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(out.ST_interval.sel(bound=1), ref["ST"] + ref["ST_conf"], rtol=0, atol=1e-10)
        if second:
            upper = np.triu(np.ones((3, 3), dtype=bool), 1)
            np.testing.assert_allclose(out.S2.values[upper], ref["S2"][upper], rtol=0, atol=1e-10)
            half = (out.S2_interval.sel(bound=1) - out.S2).values[upper]
            np.testing.assert_allclose(half, ref["S2_conf"][upper], rtol=0, atol=1e-10)
            np.testing.assert_array_equal(out.S2.values, out.S2.values.T)  # symmetric, NaN diagonal


def test_groups_match_salib():
    groups = {"g1": ["x0", "x2"], "g2": ["x1"]}
    x = sobol.sample(ISHIGAMI, 256, seed=8, groups=groups)
    y = two_outputs(x)
    ds = sobol.analyze(y, ISHIGAMI, groups=groups, intervals=IntervalPlan("rqmc", n_resamples=50, seed=9))
    assert list(ds.group_name.values) == ["g1", "g2"]
    np.testing.assert_array_equal(ds.group_member.values, [[1, 0, 1], [0, 1, 0]])
    for k, ref in enumerate(salib(y, dict(PROBLEM, groups=["g1", "g2", "g1"]), False, seed=9)):
        np.testing.assert_allclose(ds.S1.isel(output=k), ref["S1"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(ds.ST.isel(output=k), ref["ST"], rtol=0, atol=1e-10)


def test_convergence_record_is_the_analysis_of_each_prefix():
    x = sobol.sample(ISHIGAMI, 1024, seed=1)
    y = two_outputs(x)
    ds = sobol.analyze(y, ISHIGAMI, convergence_start=256, intervals=IntervalPlan("rqmc", n_resamples=10, seed=1))
    assert list(ds.n_samples.values) == [256, 512, 1024]
    prefix = y[: 256 * 5]  # the first 256 blocks of A, AB_1..3, B
    for k, ref in enumerate(salib(prefix, dict(PROBLEM), False, seed=1)):
        np.testing.assert_allclose(ds.S1_convergence.sel(n_samples=256).isel(output=k), ref["S1"], atol=1e-10)
        np.testing.assert_allclose(ds.ST_convergence.sel(n_samples=256).isel(output=k), ref["ST"], atol=1e-10)
    np.testing.assert_allclose(ds.ST_convergence.sel(n_samples=1024), ds.ST, atol=1e-12)


def test_ishigami_closed_form():
    # N = 8192 base rows (40,960 runs). Over 20 seeds the largest error of any S1 was 0.012 and of
    # any ST 0.001 (the bootstrap standard error of S1 is ~0.011 at this N), so 0.03 is ~2.7 sd.
    x = sobol.sample(ISHIGAMI, 8192, seed=2024, calc_second_order=True)
    ds = sobol.analyze(ishigami(x), ISHIGAMI, calc_second_order=True, intervals=IntervalPlan("rqmc", n_resamples=20,
                       seed=1))
    exact = ishigami_indices()
    np.testing.assert_allclose(ds.S1.isel(output=0), exact["S1"], atol=0.03)
    np.testing.assert_allclose(ds.ST.isel(output=0), exact["ST"], atol=0.03)
    assert ds.S2.isel(output=0, parameter_i=0, parameter_j=2) == pytest.approx(float(exact["S13"]), abs=0.05)
    assert float(ds.variance[0]) == pytest.approx(float(exact["variance"]), rel=0.02)


def test_sobol_g_closed_form():
    # N = 8192 (65,536 runs): over 20 seeds the largest error was 0.003 (S1) and 0.005 (ST).
    space = uniform_space(len(G_A), 0.0, 1.0)
    x = sobol.sample(space, 8192, seed=7)
    ds = sobol.analyze(sobol_g(x, G_A), space, intervals=IntervalPlan("rqmc", n_resamples=20, seed=1))
    exact = sobol_g_indices(G_A)
    np.testing.assert_allclose(ds.S1.isel(output=0), exact["S1"], atol=0.015)
    np.testing.assert_allclose(ds.ST.isel(output=0), exact["ST"], atol=0.015)


def test_linear_model_first_equals_total():
    # y = c . x on U[0,1]^3 (additive): S1_i = ST_i = c_i^2 / sum c^2. N = 4096; the estimators'
    # sd is ~1/sqrt(N) = 0.016 relative to the variance, QMC does better; tolerance 0.02.
    c = np.array([[1.0, 2.0, 3.0]])
    space = uniform_space(3, 0.0, 1.0)
    x = sobol.sample(space, 4096, seed=0)
    ds = sobol.analyze(linear(x, c, np.array([5.0])), space, intervals=IntervalPlan("rqmc", n_resamples=10, seed=0))
    exact = c[0] ** 2 / np.sum(c**2)
    np.testing.assert_allclose(ds.S1.isel(output=0), exact, atol=0.02)
    np.testing.assert_allclose(ds.ST.isel(output=0), exact, atol=0.02)


def test_constant_output_is_flagged_not_raised():
    x = sobol.sample(ISHIGAMI, 64, seed=0)
    y = np.column_stack([ishigami(x)[:, 0], np.full(len(x), 3.0)])
    ds = sobol.analyze(y, ISHIGAMI, output_names=["ishigami", "flat"], intervals=IntervalPlan("rqmc", n_resamples=10,
                       seed=0))
    assert list(ds.status.values) == [0, 1]
    assert np.isnan(ds.S1.isel(output=1)).all() and np.isfinite(ds.S1.isel(output=0)).all()


def test_labels_and_units():
    x = sobol.sample(ISHIGAMI, 64, seed=0)
    ds = sobol.analyze(two_outputs(x), ISHIGAMI, output_names=["a", "b"], output_units=["m", "m"],
                       intervals=IntervalPlan("rqmc", n_resamples=10, seed=0))
    assert list(ds.output_name.values) == ["a", "b"] and list(ds.parameter_name.values) == ["x0", "x1", "x2"]
    assert ds.S1.attrs["units"] == "1" and ds.variance.attrs["units"] == "m2"
    assert all("long_name" in v.attrs for v in ds.data_vars.values())


def test_bad_base_size_and_rows_are_clear_errors():
    with pytest.raises(ConfigError, match="`n` must be a power of two"):
        sobol.sample(ISHIGAMI, 100, seed=0)
    y = np.zeros((64 * 5 + 1, 1))
    with pytest.raises(DataError, match=r"`values` must have N\*5 rows .* got 321 rows"):
        sobol.analyze(y, ISHIGAMI)
    with pytest.raises(DataError, match="N a power of two"):
        sobol.analyze(np.zeros((48 * 5, 1)), ISHIGAMI)
    with pytest.raises(DataError, match=r"N\*8 rows"):  # a first-order design given to a second-order analysis
        sobol.analyze(np.zeros((64 * 5, 1)), ISHIGAMI, calc_second_order=True)


def test_bad_groups_are_clear_errors():
    with pytest.raises(ConfigError, match="group 'g1' names unknown parameter 'x9'"):
        sobol.sample(ISHIGAMI, 64, groups={"g1": ["x0", "x9"], "g2": ["x1", "x2"]})
    with pytest.raises(ConfigError, match="exactly one group, 'x2' is in 0"):
        sobol.analyze(np.zeros((64 * 4, 1)), ISHIGAMI, groups={"g1": ["x0"], "g2": ["x1"]})
    with pytest.raises(ConfigError, match="exactly one group, 'x0' is in 2"):
        sobol.sample(ISHIGAMI, 64, groups={"g1": ["x0"], "g2": ["x0", "x1", "x2"]})


def test_correlated_inputs_are_refused():
    space = ParameterSpace(ISHIGAMI.parameters, correlation=np.array([[1, 0.5, 0], [0.5, 1, 0], [0, 0, 1.0]]))
    with pytest.raises(ConfigError, match="assumes independent inputs.*use method `sobol_dependent`"):
        sobol.sample(space, 64)
