"""Shapley effects in one pass (the design drawn, evaluated and reduced block by block): Pebay's merged central
moments against numpy's two-pass ones, the blocked analysis equal to the in-memory one on the same points to 1e-10,
and the closed-form effects of a linear model of correlated Gaussian inputs (Owen & Prieur 2017)."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import shapley
from tests.helpers.closed_forms import SPACE, exact_indices, linear


def test_merged_central_moments_are_numpys_two_pass_ones_at_a_large_offset():
    y = np.random.default_rng(0).gamma(2.0, size=(1001, 2)) + np.array([0.0, 1e4])
    parts = [shapley.CentralMoments.of(y[a:b]) for a, b in ((0, 1), (1, 300), (300, 1001))]
    merged = parts[2].merge(parts[0].merge(parts[1]))
    dev = y - y.mean(axis=0)
    for power, value in ((2, merged.m2), (3, merged.m3), (4, merged.m4)):
        np.testing.assert_allclose(value, (dev**power).sum(axis=0), rtol=1e-9, err_msg=str(power))
    assert merged.count == 1001


@pytest.mark.parametrize("exact_up_to", [6, 2])
def test_blocked_shapley_equals_the_in_memory_analysis_of_the_same_points(monkeypatch, exact_up_to):
    monkeypatch.setattr(shapley, "BLOCK_DRAWS", 64)  # 4 blocks per subset, 16 (the last short) for the variance
    design = shapley.sample(SPACE, n_variance=1000, n_outer=256, n_inner=3, n_permutations=300,
                            exact_up_to=exact_up_to, seed=2)
    assert [len(b) for b in design.blocks(1)] == ([64 * 3] * 4 if exact_up_to == 6 else [design.parts[1].rows])
    held = shapley.analyze(linear(design.all_points()), design, SPACE)
    streamed = shapley.analyze_model(linear, design, SPACE)
    assert set(streamed.data_vars) == set(held.data_vars)
    for key in held.data_vars:
        np.testing.assert_allclose(streamed[key].values, held[key].values, rtol=1e-10, atol=1e-14, err_msg=key)


def test_blocked_shapley_meets_the_closed_form_of_a_correlated_linear_model(monkeypatch):
    monkeypatch.setattr(shapley, "BLOCK_DRAWS", 256)
    design = shapley.sample(SPACE, n_variance=16384, n_outer=2048, n_inner=3, n_permutations=8192, exact_up_to=6,
                            seed=1)
    ds = shapley.analyze_model(linear, design, SPACE)
    error = ds.effect.values - exact_indices()["effect"]
    assert (np.abs(error) <= 4 * ds.effect_se.values).all(), (error, ds.effect_se.values)
    np.testing.assert_allclose(ds.effect.sum("parameter"), 1.0, rtol=1e-12)
