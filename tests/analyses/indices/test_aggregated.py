"""Aggregated (generalized) Sobol' indices and PCA-based indices of a linear multi-output model, in closed form.

``Y_k = sum_i A_ki x_i`` over a 3 x 4 lat/lon field: ``Var(E[Y_k | x_i]) = A_ki^2 Var(x_i)`` and no interactions,
so the aggregated index with weights ``w_k`` is ``S_i = sum_k w_k A_ki^2 Var(x_i) / sum_k,j w_k A_kj^2 Var(x_j)``
(Gamboa et al. 2014) and ``ST_i = S_i``. The weighted PCA is the eigen-decomposition of
``C = W^1/2 A Cov(x) A^T W^1/2``; component ``j``'s score is ``c_j^T x`` with ``c_j = A^T W^1/2 v_j``, so its
index is ``c_ji^2 Var(x_i) / sum_i c_ji^2 Var(x_i)`` (Lamboni et al. 2011).
"""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import aggregated
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.errors import ConfigError
from sensitivity.outputs.spec import OutputDim, OutputSpec
from sensitivity.inputs.space import ParameterSpace
from sensitivity.units import product
from tests.helpers.closed_forms import AREA, FIELD, LAT, UNIFORM, VAR_X, A, closed_form

def test_aggregated_indices_over_the_field_with_area_weights():
    # N = 4096 as 8 scramblings of 512: 10 seeds, largest error 0.0003 -> 0.001 (also without weights).
    x = aggregated.sample(UNIFORM, 4096, seed=1)
    ds = aggregated.analyze(x @ A.T, UNIFORM, FIELD, weights="area", n_components=3, intervals=IntervalPlan("rqmc",
                            seed=1))
    exact = closed_form(AREA)
    np.testing.assert_allclose(ds.S1, exact, atol=0.001)
    np.testing.assert_allclose(ds.ST, exact, atol=0.001)
    np.testing.assert_allclose(ds.weight.values.ravel(), AREA, rtol=1e-12)
    assert ds.S1.dims == ("parameter",) and ds.weight.dims == ("lat", "lon") and ds.attrs["weights"] == "area"
    assert ds.variance.attrs["units"] == product("K", "K") and ds.S1_interval.dims == ("parameter", "bound")
    # Uniform weights differ (the 60 degree rows count half as much under area weights).
    plain = aggregated.analyze(x @ A.T, UNIFORM, FIELD, intervals=IntervalPlan("rqmc", seed=1))
    np.testing.assert_allclose(plain.S1, closed_form(np.ones(12)), atol=0.001)


def test_pca_indices_and_explained_variance():
    # 10 seeds, largest errors: ratio 0.0002 -> 0.001, variance 0.13 % -> 0.5 %, direction cosine 3e-7 -> 1e-5,
    # component indices 0.0013 -> 0.004.
    x = aggregated.sample(UNIFORM, 4096, seed=2)
    ds = aggregated.analyze(x @ A.T, UNIFORM, FIELD, weights="area", n_components=3, intervals=IntervalPlan("rqmc",
                            seed=2))
    root = np.sqrt(AREA)
    lam, vectors = np.linalg.eigh((root[:, None] * A) @ np.diag(VAR_X) @ (root[:, None] * A).T)
    lam, vectors = lam[::-1][:3], vectors[:, ::-1][:, :3]
    np.testing.assert_allclose(ds.pca_explained_variance_ratio, lam / lam.sum(), atol=0.001)  # rank 3: all of it
    np.testing.assert_allclose(ds.pca_explained_variance, lam, rtol=0.005)
    loading = ds.pca_loading.transpose("component", "lat", "lon").values.reshape(3, 12)
    np.testing.assert_allclose(np.abs(np.sum(loading * vectors.T, axis=1)), 1.0, atol=1e-5)  # same directions
    c = (root[:, None] * A).T @ vectors  # [parameter, component]
    exact = c**2 * VAR_X[:, None] / (c**2 * VAR_X[:, None]).sum(axis=0)
    np.testing.assert_allclose(ds.pca_S1.transpose("parameter", "component"), exact, atol=0.004)
    # Lamboni's generalized index: the components' indices weighted by the variance each explains; with every
    # component of a rank-3 output it is the aggregated index, estimator for estimator.
    gsi = (ds.pca_S1 * ds.pca_explained_variance).sum("component") / ds.pca_explained_variance.sum()
    np.testing.assert_allclose(gsi, ds.S1, rtol=1e-10)
    assert ds.pca_S1.dims == ("parameter", "component") and list(ds.component_name.values) == ["pc1", "pc2", "pc3"]


def test_aggregation_over_some_dims_keeps_the_others():
    x = aggregated.sample(UNIFORM, 4096, seed=3)
    ds = aggregated.analyze(x @ A.T, UNIFORM, FIELD, over=["lon"], n_components=2, intervals=IntervalPlan("rqmc",
                            seed=3))
    rows = A.reshape(3, 4, 3)
    exact = np.stack([(r**2).sum(axis=0) / (r**2).sum() for r in rows], axis=1)  # [parameter, lat]
    np.testing.assert_allclose(ds.S1.transpose("parameter", "lat"), exact, atol=0.001)  # 10 seeds: 0.0003
    assert ds.S1.dims == ("parameter", "lat") and ds.pca_loading.dims == ("component", "lon", "lat")
    assert ds.lat.values.tolist() == list(LAT) and ds.attrs["over"] == "lon"
    ratio = ds.pca_explained_variance_ratio.transpose("component", "lat").values
    assert (np.diff(ratio, axis=0) <= 0).all() and (ratio.sum(axis=0) <= 1 + 1e-12).all()


def test_dependent_inputs_get_full_and_independent_aggregated_indices():
    # Correlated Gaussian inputs: Var(E[Y_k | x_i]) = (A_k S_{:,i})^2 / S_ii and E[Var(Y_k | x_~i)] =
    # A_ki^2 / (S^-1)_ii by Gaussian conditioning; aggregated with the element weights as above. 10 seeds,
    # largest error 0.0017 -> 0.005.
    sd, r = np.array([1.0, 0.5, 2.0]), np.array([[1.0, 0.5, 0.0], [0.5, 1.0, -0.4], [0.0, -0.4, 1.0]])
    space = ParameterSpace.from_records([dict(name=f"x{i}", units="1", distribution=dict(kind="norm", loc=0.0,
                                                                                         scale=float(sd[i])))
                                         for i in range(3)], r.tolist())
    s = r * np.outer(sd, sd)
    total = np.einsum("ki,ij,kj->k", A, s, A)
    full = ((A @ s) ** 2 / np.diag(s)).sum(axis=0) / total.sum()
    ind = (A**2 / np.diag(np.linalg.inv(s))).sum(axis=0) / total.sum()
    x = aggregated.sample(space, 8192, seed=4)
    assert x.shape == (8192 * 8, 3)  # the dependent design: N (2 d + 2) rows
    ds = aggregated.analyze(x @ A.T, space, FIELD, intervals=IntervalPlan("rqmc", seed=4))
    for key, exact in (("S1_full", full), ("ST_full", full), ("S1_ind", ind), ("ST_ind", ind)):
        np.testing.assert_allclose(ds[key], exact, atol=0.005, err_msg=key)
    assert "S1" not in ds and "pca_ST_ind" in ds and ds.attrs["inputs"] == "dependent (Gaussian copula)"


NAMED = OutputSpec("y", ("W", "J"), (OutputDim("output", ("p", "q")),))


@pytest.mark.parametrize("spec, kwargs, message", [
    (NAMED, {}, "`over` sums outputs in different units ['J', 'W']; give explicit `weights`"),
    (FIELD, {"weights": "area", "over": ["lon"]}, "`weights: area` needs a latitude dim (lat/latitude, or units "
                                                  "degrees_north) among `over` ['lon'], got none"),
    (FIELD, {"weights": {"lon": [1.0, 2.0]}}, "`weights` of 'lon' must be 4 finite numbers >= 0, got [1.0, 2.0]"),
    (FIELD, {"weights": {"day": [1.0]}}, "`weights` names dim(s) ['day'] that are not aggregated over"),
    (FIELD, {"weights": "volume"}, "`weights` must be 'area', a {dim: [w, ...]} mapping or null, got 'volume'"),
    (FIELD, {"over": ["depth"]}, "`over` must name distinct output dims among ['lat', 'lon'], got ['depth']"),
    (FIELD, {"n_components": 0}, "`n_components` must be an integer >= 1, got 0"),
])
def test_bad_aggregation_settings(spec, kwargs, message):
    values = np.zeros((64 * 5, spec.size))
    with pytest.raises(ConfigError) as info:
        aggregated.analyze(values, UNIFORM, spec, **kwargs)
    assert message in str(info.value)


def test_named_outputs_in_different_units_aggregate_with_explicit_weights():
    x = aggregated.sample(UNIFORM, 1024, seed=5)
    y = x @ A[:2].T
    ds = aggregated.analyze(y, UNIFORM, NAMED, weights={"output": [1.0, 0.0]}, n_components=1,
                            intervals=IntervalPlan("rqmc", seed=5))
    # Only p counts. N = 1024: 10 seeds, largest error 0.010 -> 0.015.
    np.testing.assert_allclose(ds.S1, A[0] ** 2 / (A[0] ** 2).sum(), atol=0.015)
    assert ds.weight.dims == ("output",) and ds.output_name.values.tolist() == ["p", "q"]


def test_labels_by_numbers_output_aggregated_over_the_numbers():
    # Y[s, t] = (t + 1) A_s x for 3 species x 4 days: over days, species s keeps A_si^2 / sum_i A_si^2 (the day
    # factor scales every input alike); over both, the day weights (t + 1)^2 enter as in closed_form. N = 4096:
    # 10 seeds, largest error 0.001 -> 0.003.
    spec = OutputSpec("n", "1", (OutputDim("species", ("fox", "hare", "lynx")),
                                 OutputDim("day", (0, 1, 2, 3), "day")))
    a = A[:3]
    x = aggregated.sample(UNIFORM, 4096, seed=6)
    y = np.einsum("si,ni,t->nst", a, x, np.arange(1.0, 5.0)).reshape(len(x), -1)
    ds = aggregated.analyze(y, UNIFORM, spec, over=["day"], intervals=IntervalPlan("rqmc", seed=6))
    assert ds.S1.dims == ("parameter", "species") and ds.pca_loading.dims == ("component", "day", "species")
    np.testing.assert_allclose(ds.S1.transpose("parameter", "species"), (a**2 / (a**2).sum(axis=1, keepdims=True)).T,
                               atol=0.003)
    both = aggregated.analyze(y, UNIFORM, spec, intervals=IntervalPlan("rqmc", seed=6))
    part = ((a**2)[:, None, :] * (np.arange(1.0, 5.0) ** 2)[None, :, None]).sum(axis=(0, 1))
    np.testing.assert_allclose(both.S1, part / part.sum(), atol=0.003)
