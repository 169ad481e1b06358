"""One-pass statistics and the one-pass Sobol' analysis: numpy's two-pass moments and SALib on the same rows as
oracles, the in-memory analysis of the same design to 1e-10, closed forms (Ishigami, a linear model)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from SALib.analyze import sobol as salib_sobol

from sensitivity.analyses.indices import design, pickfreeze, sobol, sobol_onepass, tails
from sensitivity.analyses.indices.bootstrap import resample_weights
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.analyses.moments import Moments
from sensitivity.errors import ConfigError, DataError
from tests.helpers.functions import ishigami, ishigami_indices, linear, uniform_space
from tests.helpers.functions import ishigami_and_offset as two_outputs

ISHIGAMI = uniform_space(3, -np.pi, np.pi)
PROBLEM = {"num_vars": 3, "names": ["x0", "x1", "x2"], "bounds": [[-np.pi, np.pi]] * 3}
ALL_PAIRS = np.array([(i, j) for i in range(3) for j in range(i, 3)])


# ----------------------------------------------------------------------------- the statistics
def test_merged_blocks_give_numpys_two_pass_moments_in_any_order():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1000, 3, 2)) * [[1.0], [3.0], [0.5]] + 1e4  # an offset: the error grows as eps |mean| / sd
    x[:, 1] += 0.7 * (x[:, 0] - 1e4)
    cuts = [0, 1, 17, 300, 301, 1000]
    blocks = [Moments.of(x[a:b], ALL_PAIRS) for a, b in zip(cuts[:-1], cuts[1:])]
    forward = Moments.empty(3, ALL_PAIRS, (2,))
    for block in blocks:
        forward = forward.merge(block)
    backward = blocks[-1]
    for block in blocks[-2::-1]:
        backward = block.merge(backward)
    cov = np.stack([np.cov(x[:, :, k].T, ddof=0) for k in range(2)], axis=-1)  # [3, 3, 2]
    for stats in (forward, backward):
        assert stats.count == 1000
        np.testing.assert_allclose(stats.mean, x.mean(axis=0), rtol=1e-14)
        np.testing.assert_allclose(stats.covariance(), cov[ALL_PAIRS[:, 0], ALL_PAIRS[:, 1]], rtol=1e-10, atol=1e-12)


def test_a_few_pairs_of_many_variables_are_numpys_two_pass_covariances_also_centred_in_place():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(500, 9, 2)) * np.arange(1.0, 10.0)[:, None] + 1e3
    x[:, 7] += 0.5 * x[:, 3]
    few = np.array([(0, 0), (3, 7), (4, 4), (8, 2), (3, 1), (6, 6), (3, 5)])  # 7 of 81: sums of products per pair
    cov = np.stack([np.cov(x[:, :, k].T, ddof=0) for k in range(2)], axis=-1)
    kept = x.copy()
    for stats in (Moments.of(x, few), Moments.of(kept, few, overwrite=True)):
        np.testing.assert_allclose(stats.mean, x.mean(axis=0), rtol=1e-14)
        np.testing.assert_allclose(stats.covariance(), cov[few[:, 0], few[:, 1]], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kept.mean(axis=0), 0.0, atol=1e-9)  # overwritten: the deviations


def test_row_by_row_updates_are_welfords_and_stay_accurate_at_a_large_offset():
    x = 1e9 + np.arange(200, dtype=np.float64)[:, None, None] % 7  # variance exactly that of 0..6 repeated
    stats = Moments.empty(1, [[0, 0]], (1,))
    for row in x:
        stats = stats.update(row[None])
    # sum(x^2) / n - mean^2 would lose every digit here (1e18 * eps = 1e2 against a variance of 4); Welford keeps
    # the means' round-off, 1e9 eps relative to a unit spread
    np.testing.assert_allclose(stats.covariance()[0, 0], np.var(np.arange(200) % 7), rtol=1e-8)


def test_weighted_statistics_are_those_of_the_resampled_rows():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 3, 2)) + 50.0
    weights = resample_weights(rng, 64, 4)  # [5, 64] multiplicities, each row summing to 64
    stats = Moments.of(x, ALL_PAIRS, weights)
    for k, w in enumerate(weights):
        repeated = Moments.of(np.repeat(x, w.astype(int), axis=0), ALL_PAIRS)
        np.testing.assert_allclose(stats.mean[:, k], repeated.mean, rtol=1e-13)
        np.testing.assert_allclose(stats.comoment[:, k], repeated.comoment, rtol=1e-9, atol=1e-9)


def test_statistics_round_trip_through_a_dataset_and_refuse_a_foreign_merge():
    stats = Moments.of(np.random.default_rng(2).normal(size=(10, 3, 4)), ALL_PAIRS)
    back = Moments.from_dataset(stats.to_dataset())
    assert back.count == 10
    np.testing.assert_array_equal(back.comoment, stats.comoment)
    np.testing.assert_array_equal(back.pairs, stats.pairs)
    with pytest.raises(DataError, match="not of the same variables"):
        stats.merge(Moments.of(np.ones((2, 3, 4)), ALL_PAIRS[:2]))


# ----------------------------------------------------------------------------- the design in blocks
@pytest.mark.parametrize("start, stop", [(0, 256), (0, 8), (24, 40), (56, 200), (128, 256)])
def test_any_rows_of_the_scrambled_design_come_without_the_others(start, stop):
    whole = design.sobol_base(6, 256, seed=5, replicates=4)
    rows = design.SobolBase(6, 256, 5, 4).rows(start, stop)
    np.testing.assert_array_equal(rows, whole[start:stop])


# ----------------------------------------------------------------------------- the one-pass Sobol' analysis
def counted(model, limit):
    """``model`` that fails if asked for more than ``limit`` points at once."""
    def call(points):
        assert len(points) <= limit
        return model(points)
    return call


@pytest.mark.parametrize("second, groups", [(False, None), (True, None), (False, {"a": ["x0", "x2"], "b": ["x1"]})])
def test_one_pass_equals_the_in_memory_analysis_of_the_same_design(second, groups):
    n, r, block = 1024, 8, 16
    plan = IntervalPlan("rqmc", replicates=r)
    points = sobol.sample(ISHIGAMI, n, seed=3, calc_second_order=second, groups=groups, replicates=r)
    held = sobol.analyze(two_outputs(points), ISHIGAMI, calc_second_order=second, groups=groups, intervals=plan,
                         convergence_start=32)
    g = 2 if groups else 3
    streamed = sobol_onepass.analyze_model(counted(two_outputs, block * (2 * g + 2)), ISHIGAMI, n, seed=3,
                                   calc_second_order=second, groups=groups, intervals=plan, convergence_start=32,
                                   block=block)
    assert set(streamed.variables) == set(held.variables) and streamed.attrs == held.attrs
    for name, var in held.data_vars.items():
        np.testing.assert_allclose(streamed[name].values, var.values, rtol=1e-10, atol=1e-10, err_msg=name)


def test_one_pass_estimate_and_replicates_match_salib_on_each_scrambling():
    n, r = 512, 4
    ds = sobol_onepass.analyze_model(two_outputs, ISHIGAMI, n, seed=9, intervals=IntervalPlan("rqmc", replicates=r),
                             block=32)
    y = two_outputs(sobol.sample(ISHIGAMI, n, seed=9, replicates=r))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pooled = [salib_sobol.analyze(PROBLEM, y[:, k].copy(), calc_second_order=False, num_resamples=2)
                  for k in range(2)]
        parts = [[salib_sobol.analyze(PROBLEM, rows[:, k].copy(), calc_second_order=False, num_resamples=2)
                  for k in range(2)] for rows in np.split(y, r)]
    for k in range(2):
        np.testing.assert_allclose(ds.S1.isel(output=k), pooled[k]["S1"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(ds.ST.isel(output=k), pooled[k]["ST"], rtol=0, atol=1e-10)
        reps = np.array([part[k]["ST"] for part in parts])  # the Student-t interval over the scramblings
        half = 3.182446305284263 * reps.std(axis=0, ddof=1) / np.sqrt(r)  # t_{3, 0.975}
        np.testing.assert_allclose(ds.ST_interval.isel(output=k, bound=1) - ds.ST.isel(output=k), half,
                                   rtol=1e-9, atol=1e-12)


def test_one_pass_ishigami_meets_its_closed_form():
    ds = sobol_onepass.analyze_model(ishigami, ISHIGAMI, 1 << 16, seed=0, block=1 << 10)
    exact = ishigami_indices()
    np.testing.assert_allclose(ds.S1.values[:, 0], exact["S1"], atol=5e-3)
    np.testing.assert_allclose(ds.ST.values[:, 0], exact["ST"], atol=5e-3)
    np.testing.assert_allclose(ds.variance.values[0], exact["variance"], rtol=5e-3)


def test_the_heavy_tail_check_made_while_the_rows_stream_is_that_of_the_designs_first_values():
    n = 1 << 14  # 81,920 points: the check's 65,536 are in after 80 % of the blocks
    ds = sobol_onepass.analyze_model(two_outputs, ISHIGAMI, n, seed=4, block=256)
    first = two_outputs(sobol.sample(ISHIGAMI, n, seed=4))[: tails.sample_rows(2)]
    np.testing.assert_allclose(ds.tail_share, tails.tail_share(first), rtol=1e-12)
    np.testing.assert_allclose(ds.tail_index, tails.tail_index(first), rtol=1e-12)


def test_one_pass_additive_model_has_equal_first_and_total_indices_by_its_closed_form():
    w = np.array([[1.0, -2.0, 3.0]])
    ds = sobol_onepass.analyze_model(lambda x: linear(x, w, [5.0]), uniform_space(3, 0.0, 1.0), 1 << 12, seed=1, block=64)
    exact = w[0] ** 2 / (w[0] ** 2).sum()  # uniform inputs: V_i = w_i^2 / 12
    np.testing.assert_allclose(ds.S1.values[:, 0], exact, atol=2e-3)
    np.testing.assert_allclose(ds.ST.values[:, 0], exact, atol=2e-3)
    np.testing.assert_allclose(ds.variance.values[0], (w[0] ** 2).sum() / 12, rtol=2e-3)


def test_the_statistics_held_do_not_grow_with_the_design():
    def held(n):
        acc = pickfreeze.Accumulator(n, 3, False, 2, replicates=8, sizes=[64], tail_rows=0)
        for start in range(0, n, 64):
            acc.update(np.random.default_rng(start).normal(size=(64, 5, 2)))
        return sum(p.mean.nbytes + p.comoment.nbytes for p in acc.segments.values())
    assert held(1 << 10) == held(1 << 14)


def test_one_pass_refuses_the_bootstrap_and_a_bad_block():
    with pytest.raises(ConfigError, match="bootstrap"):
        sobol_onepass.analyze_model(ishigami, ISHIGAMI, 64, intervals=IntervalPlan("bootstrap"))
    with pytest.raises(ConfigError, match="`block` must be a power of two"):
        sobol_onepass.analyze_model(ishigami, ISHIGAMI, 64, block=3)
