"""One-pass aggregated and dependent Sobol' indices: each equal to its in-memory estimator on the same rows and seed
to 1e-10, and to the closed forms of a linear model (the aggregated indices and principal components of a linear
multi-output field, Gamboa et al. 2014 / Lamboni et al. 2011; the full and independent indices of a linear model of
correlated Gaussian inputs, Mara et al. 2015)."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import aggregated, aggregated_onepass, sobol_dependent, sobol_onepass
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.errors import ConfigError
from tests.helpers.closed_forms import AREA, FIELD, SPACE, UNIFORM, VAR_X, A, closed_form, exact_indices, linear

U = np.random.default_rng(11).normal(size=12)  # the interaction's pattern over the field


def field(x: np.ndarray) -> np.ndarray:
    """A linear field plus an interaction ``x0 x2`` with its own pattern: four distinct principal components."""
    return x @ A.T + np.outer(x[:, 0] * x[:, 2], U)


def assert_same(streamed, held) -> None:
    """Every variable, coordinate and attribute of the in-memory result, to 1e-10."""
    assert set(streamed.variables) == set(held.variables) and streamed.attrs == held.attrs
    for key in held.data_vars:
        np.testing.assert_allclose(streamed[key].values, held[key].values, rtol=1e-10, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("space, plan, options", [
    (UNIFORM, IntervalPlan("rqmc", replicates=4), {"weights": "area", "n_components": 3}),
    (UNIFORM, IntervalPlan("none"), {"over": ["lon"], "n_components": 2}),
    (SPACE, IntervalPlan("rqmc", replicates=8), {"n_components": 3}),
])
def test_aggregated_in_one_pass_equals_the_in_memory_estimator(space, plan, options):
    n = 512
    held = aggregated.analyze(field(aggregated.sample(space, n, seed=5, replicates=plan.replicates
                                                      if plan.kind == "rqmc" else 1)),
                              space, FIELD, intervals=plan, **options)
    streamed = aggregated_onepass.analyze_model(field, space, FIELD, n, seed=5, intervals=plan, block=32, **options)
    assert_same(streamed, held)


def test_aggregated_in_one_pass_of_a_linear_field_meets_its_closed_form():
    # Closed forms of tests/analyses/indices/test_aggregated.py at N = 4096 (8 scramblings), the same tolerances.
    ds = aggregated_onepass.analyze_model(lambda x: x @ A.T, UNIFORM, FIELD, 4096, seed=2, weights="area",
                                          intervals=IntervalPlan("rqmc", seed=2))
    np.testing.assert_allclose(ds.S1, closed_form(AREA), atol=0.001)
    np.testing.assert_allclose(ds.ST, closed_form(AREA), atol=0.001)
    root = np.sqrt(AREA)
    lam, vectors = np.linalg.eigh((root[:, None] * A) @ np.diag(VAR_X) @ (root[:, None] * A).T)
    lam, vectors = lam[::-1][:3], vectors[:, ::-1][:, :3]
    np.testing.assert_allclose(ds.pca_explained_variance, lam, rtol=0.005)
    c = (root[:, None] * A).T @ vectors
    exact = c**2 * VAR_X[:, None] / (c**2 * VAR_X[:, None]).sum(axis=0)
    np.testing.assert_allclose(ds.pca_S1.transpose("parameter", "component"), exact, atol=0.004)


def test_aggregated_in_one_pass_refuses_the_bootstrap_and_too_many_elements(monkeypatch):
    with pytest.raises(ConfigError, match="randomised-QMC intervals or none, got `intervals` = 'bootstrap'"):
        aggregated_onepass.analyze_model(field, UNIFORM, FIELD, 64, intervals=IntervalPlan("bootstrap"))
    monkeypatch.setattr(aggregated_onepass, "MATRIX_ELEMENTS", 1000)
    with pytest.raises(ConfigError, match=r"the one-pass PCA of 1 x 12 elements aggregated over \['lat', 'lon'\]"):
        aggregated_onepass.analyze_model(field, UNIFORM, FIELD, 64, intervals=IntervalPlan("none"))


def test_dependent_sobol_in_one_pass_equals_the_in_memory_estimator_and_its_closed_form():
    plan = IntervalPlan("rqmc", replicates=8, seed=4)
    held = sobol_dependent.analyze(linear(sobol_dependent.sample(SPACE, 8192, seed=4)), SPACE, intervals=plan)
    streamed = sobol_onepass.analyze_model(linear, SPACE, 8192, seed=4, intervals=plan, block=256, dependent=True)
    assert_same(streamed, held)
    exact = exact_indices()  # 10 seeds, largest error 0.0016 -> 0.005 (tests/analyses/indices/test_dependent.py)
    for key in ("S1_full", "ST_full", "S1_ind", "ST_ind"):
        np.testing.assert_allclose(streamed[key].values, exact[key], atol=0.005, err_msg=key)


def test_dependent_sobol_shards_merge_into_the_single_run(tmp_path):
    from sensitivity.analyses.indices import shards

    plan = IntervalPlan("rqmc", replicates=4)
    options = dict(seed=1, intervals=plan, dependent=True)
    whole = sobol_onepass.analyze_model(linear, SPACE, 256, block=16, **options)
    ident = sobol_onepass.identity(SPACE, 256, **options)
    parts = [shards.labelled(sobol_onepass.statistics(linear, SPACE, 256, rows=shards.rows_of(k, 4, 256), block=16,
                                                      group=16, **options), ident) for k in range(4)]
    merged = shards.merge(parts[::-1], ident, [f"shard{k}" for k in range(4)])
    assert_same(sobol_onepass.analyze_statistics(merged, SPACE, intervals=plan, dependent=True), whole)
    with pytest.raises(ConfigError, match="the dependent Sobol' design has no `groups` or second order"):
        sobol_onepass.statistics(linear, SPACE, 256, calc_second_order=True, dependent=True)
