"""The `indices` workflow end to end: closed forms (Ishigami, a linear model, a decaying time series), the
model's own output dims kept (a time series, a 2-D field), groups, DGSM from a stored sweep, CF, bad input."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from sensitivity.analyses.indices.crosschecks import CONSISTENT
from sensitivity.datasets import content_hash, open_result
from sensitivity.errors import ConfigError, DataError
from tests.helpers import CLI, ROOT
from tests.helpers.cf import cf_errors
from tests.helpers.functions import ishigami_indices, ishigami_jacobian
from workflows import indices, sweep

# float64 for closed-form tolerances; no XLA: compiling costs more than it saves on these small designs.
FLOAT64 = ["jacobian=float64", "jacobian.chunk_size=1024", "jacobian.jit_compile=false"]


def test_ishigami_indices_groups_and_cross_checks(compose_config, tmp_path):
    # Tolerances from 20 seeds of the same design at these N (largest error seen, then about 1.5x):
    # N = 8192 as 8 scramblings of 1024: S1 0.0081 -> 0.012, ST 0.0064 -> 0.01, grouped S1/ST 0.0067 -> 0.01,
    # DGSM nu 0.33 % -> 0.5 %.
    cfg = compose_config("indices", FLOAT64 + [
        "sobol.n=8192", "dgsm.n=8192", "active_subspaces.n=8192", "local.sigma_points=8192", "local.across_grid=true",
        "grid.n=64", "active_subspaces.n_active=3", "morris.trajectories=32", "bootstrap.n_resamples=50",
        "sobol.groups={g13: [x1, x3], g2: [x2]}", "plots=false"])
    ds = open_result(indices.run(cfg))
    exact = ishigami_indices()
    np.testing.assert_allclose(ds.sobol_S1.isel(output=0), exact["S1"], atol=0.012)
    np.testing.assert_allclose(ds.sobol_ST.isel(output=0), exact["ST"], atol=0.01)
    v1, v2, v13 = exact["S1"][0], exact["S1"][1], exact["S13"]
    np.testing.assert_allclose(ds.sobol_groups_S1.sel(group_name="g13").isel(output=0), v1 + v13, atol=0.01)
    np.testing.assert_allclose(ds.sobol_groups_ST.sel(group_name="g2").isel(output=0), v2, atol=0.01)
    assert ds.sobol_groups_member.sel(group_name="g13").values.tolist() == [1, 0, 1]
    np.testing.assert_allclose(ds.dgsm_nu.isel(output=0), exact["nu"], rtol=5e-3)
    # With all 3 directions active, the activity score is C_ii = nu_i (b - a)^2 / 4 on the same sample.
    np.testing.assert_allclose(ds.active_subspace_activity_score, ds.dgsm_nu * np.pi**2, rtol=1e-10)
    # Every index has a finite, non-empty interval; the convergence record ends at the full N.
    for var in ("sobol_S1", "sobol_ST", "dgsm_nu", "dgsm_sobol_total_bound", "morris_mu_star",
                "active_subspace_eigenvalue"):
        low, high = ds[f"{var}_interval"].sel(bound_name="low"), ds[f"{var}_interval"].sel(bound_name="high")
        assert np.isfinite(low).all() and (low <= high).all(), var
    np.testing.assert_allclose(ds.sobol_ST_convergence.isel(n_samples=-1), ds.sobol_ST)
    # Randomised QMC on the scrambled-Sobol' designs, the bootstrap on Morris' random trajectories.
    assert [ds.attrs[f"{m}_intervals"] for m in ("sobol", "dgsm", "active_subspace", "morris")] == [
        "rqmc", "rqmc", "rqmc", "bootstrap"]
    assert ds.attrs["sobol_replicates"] == 8 and "Student-t" in ds.sobol_S1_interval.attrs["long_name"]
    # Local: exact derivatives at the nominal point and across the grid (float64 closed form).
    np.testing.assert_allclose(ds.local_derivative.values, ishigami_jacobian(ds.local_x.values[None])[0], atol=1e-12)
    np.testing.assert_allclose(ds.local_sweep_derivative.values, ishigami_jacobian(ds.local_sweep_x.values),
                               rtol=1e-10, atol=1e-10)
    # Cross-checks: the DGSM bound holds for every parameter; rankings compare every measure.
    assert (ds.dgsm_bound_check == CONSISTENT).all() and ds.attrs["dgsm_bound_violations"] == 0
    assert set(ds.measure_name.values) == {"sobol_ST", "dgsm_bound", "morris_mu_star", "activity_score",
                                           "local_sigma_normalized"}
    assert ds.kendall_tau.sel(measure_i_name="sobol_ST", measure_j_name="sobol_ST").item() == 1.0
    for key in ("Conventions", "title", "history", "config", "surrogate_hash", "seed"):
        assert ds.attrs[key], key
    assert "sobol:" in ds.attrs["config"] and ds.attrs["methods"] == "local dgsm sobol morris active_subspaces"


def test_intervals_off_leave_no_interval_variables(compose_config, tmp_path):
    cfg = compose_config("indices", FLOAT64 + ["indices=quick", "intervals.method=none"])
    out = indices.run(cfg)
    ds = open_result(out)
    assert not [v for v in ds.data_vars if v.endswith("_interval")]
    assert {ds.attrs[f"{m}_intervals"] for m in ("sobol", "dgsm", "active_subspace", "morris")} == {"none"}
    assert "dgsm_bound_check" in ds and (tmp_path / "indices_active_subspace.png").exists()


LINEAR = ["model=function", "model.source=sensitivity.simulators.analytic:linear",
          "+model.kwargs.weights=[[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]]", "+model.kwargs.offset=[5.0, -1.0]",
          "model.output={name: power, names: [p, q], units: [W, J]}",
          "space.parameters=[{name: x1, units: m, low: 0, high: 2}, {name: x2, units: s, low: 1, high: 3},"
          " {name: x3, units: kg, low: -1, high: 1}]"]


def test_linear_model_is_exact(compose_config, tmp_path):
    w = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]])
    cfg = compose_config("indices", FLOAT64 + LINEAR + [
        "sobol.n=1024", "dgsm.n=256", "active_subspaces.n=256", "local.sigma_points=256", "bootstrap.n_resamples=20",
        "morris.trajectories=8", "plots=false"])
    ds = open_result(indices.run(cfg))
    x = np.array([1.0, 2.0, 0.0])  # the nominal point (mid-bounds)
    np.testing.assert_allclose(ds.local_derivative.transpose("output", "parameter"), w, rtol=1e-12)
    np.testing.assert_allclose(ds.local_elasticity.transpose("output", "parameter"), w * x / (w @ x + [5, -1])[:, None])
    nu = ds.dgsm_nu.transpose("parameter", "output")
    np.testing.assert_allclose(nu, (w**2).T, rtol=1e-12)
    np.testing.assert_allclose(np.diff(ds.dgsm_nu_interval.values, axis=-1), 0.0, atol=1e-12)
    # Morris: every elementary effect is w_i (b_i - a_i) = 2 w_i, so sigma is 0.
    np.testing.assert_allclose(ds.morris_mu.transpose("parameter", "output"), 2 * w.T, rtol=1e-12)
    np.testing.assert_allclose(ds.morris_sigma, 0.0, atol=1e-12)
    # Active subspace: C = g g^T with g = w (b - a) / 2 = w: one eigenvalue |w|^2 along w, the rest 0.
    lam = ds.active_subspace_eigenvalue.transpose("direction", "output").values
    np.testing.assert_allclose(lam[0], (w**2).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(lam[1:], 0.0, atol=1e-12)
    w1 = ds.active_subspace_eigenvector.isel(direction=0).transpose("output", "parameter").values
    np.testing.assert_allclose(np.abs(w1), np.abs(w) / np.linalg.norm(w, axis=1)[:, None], atol=1e-12)
    # Sobol': S1 = ST = V_i / V with V_i = w_i^2 (b - a)^2 / 12; N = 1024 as 8 scramblings of 128: largest
    # error over 20 seeds 0.011 (one scrambling of 1024: 0.0011).
    exact = (w**2 / (w**2).sum(axis=1, keepdims=True)).T
    np.testing.assert_allclose(ds.sobol_S1.transpose("parameter", "output"), exact, atol=0.017)
    np.testing.assert_allclose(ds.sobol_ST.transpose("parameter", "output"), exact, atol=0.017)
    # Mixed units: tabled in coordinates (the dataset contract).
    assert ds.local_derivative.attrs["units_coordinate"] == "derivative_units"
    assert ds.derivative_units.sel(output_name="q", parameter_name="x2").item() == "J s-1"
    assert ds.morris_mu.attrs["units_coordinate"] == "output_units"
    assert cf_errors(tmp_path / "indices.nc") == []


# The series' dim is `day` (CF's checker wants a dim named `time` to carry standard_name time and
# units '<unit> since <epoch>'; sensitivity.outputs.spec refuses a `time` dim without them).
DECAY = ["model=function", "model.source=tests.helpers.models:decay",
         "model.output={name: signal, long_name: decaying signal, units: '1',"
         " dims: [{name: day, values: {start: 0, stop: 10, step: 1}, units: day, long_name: day of the series}]}",
         "space.parameters=[{name: a, units: '1', low: 1, high: 2}, {name: k, units: day-1, low: 0.1, high: 0.5}]"]


def decay_indices(t: np.ndarray) -> dict[str, np.ndarray]:
    """Closed forms for ``a exp(-k t)``, ``a ~ U(1, 2)``, ``k ~ U(0.1, 0.5)`` independent.

    With ``m_j(t) = E[exp(-j k t)]``: ``V = E[a^2] m_2 - E[a]^2 m_1^2``, ``V_a = Var(a) m_1^2``,
    ``V_k = E[a]^2 (m_2 - m_1^2)``, no interaction beyond ``V - V_a - V_k``; DGSM
    ``nu_a = m_2``, ``nu_k = E[a^2] t^2 m_2``; ``variance`` is ``V``.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        m1 = np.where(t > 0, (np.exp(-0.1 * t) - np.exp(-0.5 * t)) / (0.4 * t), 1.0)
        m2 = np.where(t > 0, (np.exp(-0.2 * t) - np.exp(-1.0 * t)) / (0.8 * t), 1.0)
    ea, ea2 = 1.5, 7.0 / 3.0
    v = ea2 * m2 - ea**2 * m1**2
    va, vk = (ea2 - ea**2) * m1**2, ea**2 * (m2 - m1**2)
    return {"S1": np.stack([va, vk]) / v, "ST": np.stack([v - vk, v - va]) / v, "nu": np.stack([m2, ea2 * t**2 * m2]),
            "variance": v}


def test_time_series_gets_time_resolved_indices(compose_config, tmp_path):
    # N = 1024, 20 seeds: largest S1 error 0.0028, ST 0.0044 -> 0.01; DGSM nu 0.11 % -> 0.5 %.
    cfg = compose_config("indices", FLOAT64 + DECAY + [
        "sobol.n=1024", "dgsm.n=1024", "active_subspaces.n=1024", "local.sigma_points=1024",
        "morris.trajectories=8", "bootstrap.n_resamples=20", "active_subspaces.quantity={name: total, weights: sum}"])
    ds = open_result(indices.run(cfg))
    assert ds.sobol_S1.dims == ("parameter", "day") and ds.sobol_S1_interval.dims == ("parameter", "bound", "day")
    assert ds.local_derivative.dims == ("parameter", "day") and "output" not in ds.dims
    assert ds.day.values.tolist() == list(range(10)) and ds.day.attrs["units"] == "day"
    exact = decay_indices(ds.day.values.astype(float))
    np.testing.assert_allclose(ds.sobol_S1, exact["S1"], atol=0.01)
    np.testing.assert_allclose(ds.sobol_ST, exact["ST"], atol=0.01)
    np.testing.assert_allclose(ds.dgsm_nu.isel(day=slice(1, None)), exact["nu"][:, 1:], rtol=5e-3)
    # At t = 0 the signal is a alone: k has no effect, exactly.
    assert ds.sobol_ST.sel(parameter_name="k", day=0) == 0 and ds.dgsm_nu.sel(parameter_name="k", day=0) == 0
    # One scalar quantity (sum over days) gets its own active subspace on a `quantity` axis.
    assert ds.active_subspace_quantity_eigenvalue.dims == ("direction", "quantity")
    assert ds.quantity_name.values.tolist() == ["total"]
    assert {p.name for p in tmp_path.glob("indices_*.png")} == {
        "indices_bars.png", "indices_ranking.png", "indices_active_subspace.png", "indices_resolved.png"}


def test_whole_series_gets_aggregated_and_pca_indices(compose_config, tmp_path):
    # Aggregated over `day`: S_i = sum_t V_i(t) / sum_t V(t) (Gamboa et al. 2014). N = 2048 as 8 scramblings:
    # 10 seeds, largest error 0.0035 -> 0.006.
    cfg = compose_config("indices", FLOAT64 + DECAY + ["methods=[aggregated]", "aggregated.n=2048",
                                                       "aggregated.n_components=2"])
    ds = open_result(indices.run(cfg))
    exact = decay_indices(ds.day.values.astype(float))
    v = exact["variance"]
    np.testing.assert_allclose(ds.aggregated_S1, (exact["S1"] * v).sum(axis=1) / v.sum(), atol=0.006)
    np.testing.assert_allclose(ds.aggregated_ST, (exact["ST"] * v).sum(axis=1) / v.sum(), atol=0.006)
    assert ds.aggregated_S1.dims == ("parameter",) and ds.aggregated_pca_loading.dims == ("component", "day")
    assert ds.aggregated_pca_S1.dims == ("parameter", "component") and ds.attrs["aggregated_over"] == "day"
    # The series' covariance is C(t, s) = E[a^2] m_1(t + s) - E[a]^2 m_1(t) m_1(s) with m_1(u) = E[exp(-k u)]; the
    # shares of its two largest eigenvalues, 10 seeds: largest error 0.0004 -> 0.002.
    t = ds.day.values.astype(float)[:, None] + ds.day.values.astype(float)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        m1 = np.where(t > 0, (np.exp(-0.1 * t) - np.exp(-0.5 * t)) / (0.4 * t), 1.0)
    eigenvalues = np.linalg.eigvalsh(7 / 3 * m1 - 2.25 * np.outer(m1[0], m1[0]))[::-1]
    np.testing.assert_allclose(ds.aggregated_pca_explained_variance_ratio, eigenvalues[:2] / eigenvalues.sum(),
                               atol=0.002)
    assert (tmp_path / "indices_aggregated.png").exists()
    assert cf_errors(tmp_path / "indices.nc") == []


# Two correlated Gaussian inputs of a linear model with two outputs: with c_i = Var(E[Y | x_i]) = (b_i s_i +
# r b_j s_j)^2, the Shapley effect is (c_i + V - c_j) / (2 V), the full first-order index c_i / V and the
# independent total index b_i^2 s_i^2 (1 - r^2) / V (Gaussian conditioning); a linear model has ST_full = S1_full
# and S1_ind = ST_ind.
CORRELATED = ["model=function", "model.source=sensitivity.simulators.analytic:linear",
              "+model.kwargs.weights=[[1.0, 2.0], [3.0, -1.0]]", "model.output={name: y, names: [p, q], units: [m, m]}",
              "space.parameters=[{name: u, units: m, distribution: {kind: norm, loc: 1.0, scale: 1.0}},"
              " {name: v, units: m, distribution: {kind: norm, loc: 0.0, scale: 0.5}}]",
              "space.correlation=[[1.0, 0.6], [0.6, 1.0]]"]


def correlated_indices() -> dict[str, np.ndarray]:
    b, s, r = np.array([[1.0, 2.0], [3.0, -1.0]]).T, np.array([1.0, 0.5]), 0.6  # b [parameter, output]
    scaled = b * s[:, None]
    v = (scaled**2).sum(axis=0) + 2 * r * scaled[0] * scaled[1]
    c = np.stack([(scaled[0] + r * scaled[1]) ** 2, (scaled[1] + r * scaled[0]) ** 2])
    return {"effect": (c + v - c[::-1]) / (2 * v), "full": c / v, "ind": scaled**2 * (1 - r**2) / v,
            "aggregated_full": c.sum(axis=1) / v.sum()}


def test_a_sweep_through_a_correlated_space_is_a_sample_of_its_copula(compose_config, tmp_path):
    """grid.through=distribution on a correlated space draws the Gaussian copula, so the given-data indices of
    that sweep are the full first-order indices of the dependent inputs (closed form above; the grid's marginals
    are the normals restricted to their 0.1-99.9 % quantiles, a 1.4 % smaller variance)."""
    path = sweep.run(compose_config("sweep", FLOAT64 + CORRELATED + ["grid=random", "grid.n=16384",
                                                                      "grid.through=distribution", "plots=false"],
                                    tmp_path / "sweep"))
    x = open_result(path)["x"].values
    np.testing.assert_allclose(np.corrcoef(x.T)[0, 1], 0.6, atol=0.02)
    cfg = compose_config("indices", FLOAT64 + CORRELATED + ["methods=[given_data]", f"given_data.sweep={path}",
                                                            "plots=false"], tmp_path / "indices")
    ds = open_result(indices.run(cfg))
    np.testing.assert_allclose(ds.given_data_S1.transpose("parameter", "output"), correlated_indices()["full"],
                               atol=0.04)


def test_correlated_space_gets_shapley_and_dependent_indices(compose_config, tmp_path):
    cfg = compose_config("indices", FLOAT64 + CORRELATED + [
        "methods=[shapley,sobol_dependent,aggregated,given_data,dgsm]", "shapley.n_outer=4096", "dgsm.n=256",
        "sobol_dependent.n=4096", "aggregated.n=4096", "given_data.n=65536"])
    ds = open_result(indices.run(cfg))
    exact = correlated_indices()
    shapley = ds.shapley_effect.transpose("parameter", "output")
    assert (np.abs(shapley - exact["effect"]) <= 4 * ds.shapley_effect_se.transpose("parameter", "output")).all()
    np.testing.assert_allclose(shapley.sum("parameter"), 1.0, rtol=1e-12)
    assert ds.attrs["shapley_permutations"] == "exact" and ds.attrs["shapley_inputs"] == "dependent (Gaussian copula)"
    # 10 seeds, largest errors: |error| / se of the Shapley effects 2.6 (so 4); N = 4096 as 8 scramblings 0.0036 ->
    # 0.007 (dependent Sobol') and 0.0034 -> 0.007 (aggregated); given data at N = 65536 0.0052 -> 0.01.
    for key, ref in (("S1_full", "full"), ("ST_full", "full"), ("S1_ind", "ind"), ("ST_ind", "ind")):
        np.testing.assert_allclose(ds[f"sobol_dependent_{key}"].transpose("parameter", "output"), exact[ref],
                                   atol=0.007, err_msg=key)
    np.testing.assert_allclose(ds.given_data_S1.transpose("parameter", "output"), exact["full"], atol=0.01)
    np.testing.assert_allclose(ds.aggregated_S1_full, exact["aggregated_full"], atol=0.007)
    # DGSM: nu = E[b^2] exactly; the Sobol' bound is not claimed for dependent inputs.
    np.testing.assert_allclose(ds.dgsm_nu.transpose("parameter", "output"), [[1.0, 9.0], [4.0, 1.0]], rtol=1e-12)
    assert np.isnan(ds.dgsm_sobol_total_bound).all() and ds.attrs["dgsm_inputs"].startswith("dependent")
    # so it ranks nothing, and the Shapley effects alone have no ranking to agree with
    assert "kendall_tau" not in ds
    assert {p.name for p in tmp_path.glob("indices_*.png")} == {
        "indices_bars.png", "indices_dependent.png", "indices_aggregated.png"}
    assert cf_errors(tmp_path / "indices.nc") == []


def test_classic_sobol_on_a_correlated_space_points_to_the_dependent_methods(compose_config):
    with pytest.raises(ConfigError, match="sobol: Sobol' sampling assumes independent inputs.*`sobol_dependent`"):
        indices.run(compose_config("indices", CORRELATED + ["methods=[sobol]"]))


def test_given_data_from_a_stored_sweep_or_a_samples_file(compose_config, tmp_path):
    # The 8192 points of a random sweep are i.i.d. draws of the uniform inputs; 20 seeds of random points at this
    # N: largest error 0.028 -> 0.04. The samples file is the same data read as a sample (x and the output).
    path = sweep.run(compose_config("sweep", FLOAT64 + ["grid=random", "grid.n=8192", "plots=false"],
                                    tmp_path / "sweep"))
    runs = {}
    for key in ("sweep", "samples"):
        cfg = compose_config("indices", FLOAT64 + ["methods=[given_data]", f"given_data.{key}={path}",
                                                   "given_data.block=1000", "plots=false"], tmp_path / f"from_{key}")
        runs[key] = open_result(indices.run(cfg))
        assert json.loads(runs[key].attrs["inputs"]) == {str(path): content_hash(path)}
    ds = runs["sweep"]
    np.testing.assert_allclose(ds.given_data_S1.isel(output=0), ishigami_indices()["S1"], atol=0.04)
    assert ds.attrs["given_data_n_points"] == 8192 and ds.given_data_S1_se.dims == ("parameter", "output")
    np.testing.assert_array_equal(runs["samples"].given_data_S1, ds.given_data_S1)

    with pytest.raises(DataError, match="given_data.sweep: .*the sweep drew its inputs without the space's "
                                        "correlation matrix"):
        indices.run(compose_config("indices", ["methods=[given_data]", f"given_data.sweep={path}",
                                               "space.correlation=[[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]]"]))
    # A Sobol' net is a sample of the inputs (DGSM takes it) but not an i.i.d. one: the rank estimator is refused.
    net = sweep.run(compose_config("sweep", FLOAT64 + ["grid.n=256", "plots=false"], tmp_path / "net"))
    with pytest.raises(DataError, match="given_data.sweep: .*a 'sobol' grid is not an i.i.d. or Latin hypercube "
                                        r"sample .* needs a sweep on one of \['lhs', 'random'\]"):
        indices.run(compose_config("indices", ["methods=[given_data]", f"given_data.sweep={net}"]))


@pytest.mark.slow
def test_field_output_keeps_its_dims(compose_config, tmp_path):
    import tensorflow as tf

    from sensitivity.simulators.analytic import gaussian_plume

    cfg = compose_config("indices", FLOAT64 + [
        "experiment=plume", "indices=quick", "grid.n=4", "local.across_grid=true", "plots=false", "model.kwargs.size=6",
        "model.output.dims=[{name: lat, values: {start: 0, stop: 6}, units: degrees_north},"
        " {name: lon, values: {start: 100, stop: 106}, units: degrees_east}]"])
    ds = open_result(indices.run(cfg))
    assert ds.sobol_ST.dims == ("parameter", "lat", "lon") and ds.lat.attrs["standard_name"] == "latitude"
    assert ds.local_sweep_derivative.dims == ("sample", "parameter", "lat", "lon")
    assert ds.kendall_tau.dims == ("measure_i", "measure_j", "lat", "lon")
    assert ds.lon.values.tolist() == list(range(100, 106))
    # The derivative at the nominal point lands on the right (lat, lon): central differences, float64.
    x0 = ds.local_x.values
    h = 1e-6 * np.maximum(np.abs(x0), 1.0)
    f = lambda x: gaussian_plume(tf.constant(x[None], tf.float64), size=6).numpy()[0]  # noqa: E731
    fd = np.stack([(f(x0 + h[j] * np.eye(4)[j]) - f(x0 - h[j] * np.eye(4)[j])) / (2 * h[j]) for j in range(4)])
    np.testing.assert_allclose(ds.local_derivative.values, fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())
    assert cf_errors(tmp_path / "indices.nc") == []


@pytest.mark.slow
def test_field_output_gets_area_weighted_aggregated_indices(compose_config, tmp_path):
    cfg = compose_config("indices", FLOAT64 + [
        "experiment=plume", "methods=[aggregated]", "aggregated.n=256", "aggregated.weights=area",
        "model.kwargs.size=6",
        "model.output.dims=[{name: lat, values: [-60, -30, 0, 30, 60, 80], units: degrees_north},"
        " {name: lon, values: {start: 100, stop: 106}, units: degrees_east}]"])
    ds = open_result(indices.run(cfg))
    assert ds.aggregated_S1.dims == ("parameter",) and ds.aggregated_weight.dims == ("lat", "lon")
    np.testing.assert_allclose(ds.aggregated_weight.isel(lon=0), np.cos(np.deg2rad([-60, -30, 0, 30, 60, 80])),
                               rtol=1e-12)
    assert ds.aggregated_pca_loading.dims == ("component", "lat", "lon") and ds.attrs["aggregated_weights"] == "area"
    assert (tmp_path / "indices_aggregated.png").exists()
    assert cf_errors(tmp_path / "indices.nc") == []


def test_dgsm_from_a_stored_sweep(compose_config, tmp_path):
    # The sweep's 8192 scrambled-Sobol' points are draws of the uniform inputs: nu within 0.1 % as above.
    path = sweep.run(compose_config("sweep", FLOAT64 + ["grid.n=8192", "plots=false"], tmp_path / "sweep"))
    cfg = compose_config("indices", FLOAT64 + ["methods=[dgsm,sobol]", f"dgsm.sweep={path}", "dgsm.block=1000",
                                               "sobol.n=256", "bootstrap.n_resamples=50", "plots=false"])
    ds = open_result(indices.run(cfg))
    np.testing.assert_allclose(ds.dgsm_nu.isel(output=0), ishigami_indices()["nu"], rtol=1e-3)
    assert ds.attrs["dgsm_n_points"] == 8192 and "Poisson" in ds.attrs["dgsm_bootstrap"]
    assert json.loads(ds.attrs["inputs"]) == {str(path): content_hash(path)}
    assert "dgsm_bound_check" in ds

    oat = sweep.run(compose_config("sweep", FLOAT64 + ["grid=oat", "plots=false"], tmp_path / "oat"))
    with pytest.raises(DataError, match="dgsm.sweep: .*'oat' grid is not a sample of the input distribution"):
        indices.run(compose_config("indices", ["methods=[dgsm]", f"dgsm.sweep={oat}"], tmp_path / "refused"))


@pytest.mark.parametrize("override, error, message", [
    ("sobol.n=1000", ConfigError, "sobol: `n` must be a power of two >= 16, got 1000"),
    ("sobol.n=8", ConfigError, "sobol: `n` must be a power of two >= 16, got 8"),  # 2 points per scrambling
    ("sobol.groups={g1: [x1, nope], g2: [x2, x3]}", ConfigError, "group 'g1' names unknown parameter 'nope'"),
    ("sobol.groups={g1: [x1], g2: [x2]}", ConfigError, "every parameter in exactly one group, 'x3' is in 0"),
    ("methods=[sobol,anova]", ConfigError, "`methods` must be one of"),
    ("morris.levels=3", ConfigError, "morris: `levels` must be an even integer >= 2, got 3"),
    ("intervals.level=1.5", ConfigError, "intervals: `level` must lie in (0, 1), got 1.5"),
    ("intervals.replicates=3", ConfigError, "intervals: `replicates` must be a power of two >= 2, got 3"),
    ("intervals.method=jackknife", ConfigError, "intervals: `method` must be one of ('rqmc', 'bootstrap', 'none')"),
    ("bootstrap.n_resamples=1", ConfigError, "intervals: `n_resamples` must be 0 (no intervals) or an integer >= 2"),
    ("dgsm.sweep=nowhere.nc", DataError, "`dgsm.sweep`: result not found: nowhere.nc"),
    (["methods=[given_data]", "given_data.sweep=a.nc", "given_data.samples=b.nc"], ConfigError,
     "given_data: give `sweep` or `samples`, not both"),
    (["methods=[given_data]", "given_data.samples=nowhere.csv"], DataError,
     "given_data: `samples` file not found: nowhere.csv"),
    (["methods=[shapley]", "shapley.n_inner=1"], ConfigError, "shapley: `n_inner` must be an integer >= 2, got 1"),
    (["methods=[aggregated]", "aggregated.weights=area"], ConfigError,
     "aggregated: `weights: area` needs a latitude dim"),
])
def test_bad_input_fails_clearly_without_output(compose_config, tmp_path, override, error, message):
    with pytest.raises(error) as info:
        indices.run(compose_config("indices", [*(override if isinstance(override, list) else [override]),
                                               "plots=false"]))
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "indices.nc").exists()


@pytest.mark.slow
def test_cli_unusable_n_exits_nonzero_with_one_line(tmp_path):
    out = subprocess.run(CLI + ["indices", "sobol.n=100", f"hydra.run.dir={tmp_path}", "progress=false"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    errors = [line for line in (out.stdout + out.stderr).splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "sobol: `n` must be a power of two >= 16, got 100" in errors[0]
    assert not (tmp_path / "indices.nc").exists()


@pytest.mark.slow
def test_cli_dependent_preset_on_a_correlated_space(tmp_path):
    out = subprocess.run(CLI + ["indices", "indices=dependent", "space.correlation=[[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], "
                                "[0.0, 0.0, 1.0]]", "shapley.n_outer=512", "shapley.n_variance=4096",
                                "sobol_dependent.n=256", "dgsm.n=256", "active_subspaces.n=256", "given_data.n=1024",
                                f"hydra.run.dir={tmp_path}", "progress=false"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    ds = open_result(tmp_path / "indices.nc")
    assert ds.attrs["methods"] == "shapley sobol_dependent given_data dgsm active_subspaces"
    assert ds.attrs["shapley_inputs"] == "dependent (Gaussian copula)"
    np.testing.assert_allclose(ds.shapley_effect.sum("parameter"), 1.0, rtol=1e-12)
    assert (tmp_path / "indices_dependent.png").exists()


def test_every_method_is_built_by_keyword_from_its_own_section(compose_config):
    """Each method's settings come from the config section of its name, field by field (a field added to a
    settings class cannot be mis-mapped): every non-default value set in the config arrives in the object."""
    import dataclasses

    from sensitivity.analyses import indices as lib
    from workflows.indices import SETTINGS, _method

    assert set(SETTINGS) == set(lib.METHODS)
    cfg = compose_config("indices", ["sobol.n=512", "sobol.second_order=true", "morris.levels=6", "dgsm.block=77",
                                     "shapley.n_inner=5", "aggregated.n_components=2", "given_data.block=99"])
    for name, cls in SETTINGS.items():
        built = _method(cfg, name, None)
        assert isinstance(built, cls)
        for item in dataclasses.fields(cls):
            if item.name in cfg[name] and item.name not in ("points", "quantity"):
                value = cfg[name][item.name]
                assert getattr(built, item.name) == (list(value) if hasattr(value, "__len__") and
                                                     not isinstance(value, str) else value), (name, item.name)


def test_a_constant_output_gets_nan_indices_and_a_warning_not_a_failed_run(compose_config, tmp_path, caplog):
    """y = x W^T + c with W's second row 0: output q is c everywhere (a field's boundary cell, a series' initial
    value). Its variance-based and sigma-normalised indices are 0 / 0 (NaN), its DGSM nu and Morris mu* 0, and
    the other output keeps the linear model's exact first-order indices, w_i^2 var_i / sum_j w_j^2 var_j."""
    w, widths = np.array([1.0, -2.0, 0.5]), np.array([2.0, 2.0, 2.0])  # the LINEAR space's ranges
    cfg = compose_config("indices", FLOAT64 + [o.replace("[[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]]",
                                                         "[[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]]") for o in LINEAR] + [
        "sobol.n=1024", "dgsm.n=256", "active_subspaces.n=256", "local.sigma_points=256", "morris.trajectories=8",
        "plots=false"])
    with caplog.at_level("WARNING", logger="workflows.indices"):
        ds = open_result(indices.run(cfg))
    q = {"output": 1}
    assert np.isnan(ds.sobol_S1.isel(q)).all() and np.isnan(ds.local_sigma_normalized.isel(q)).all()
    np.testing.assert_array_equal(ds.dgsm_nu.isel(q), 0.0)
    share = w**2 * widths**2 / 12
    np.testing.assert_allclose(ds.sobol_S1.isel(output=0), share / share.sum(), atol=0.02)
    assert "1 of 2 outputs are constant over the input sample (output=q)" in caplog.text


HOLE = '''\
import tensorflow as tf


def response(x):
    """y = a - 2 b + 0.5 c, not defined (NaN) where a > 0.9."""
    y = x[:, 0] - 2.0 * x[:, 1] + 0.5 * x[:, 2]
    return tf.where(x[:, 0] > 0.9, tf.constant(float("nan"), x.dtype), y)
'''
UNIT_CUBE = ["space.parameters=[{name: a, units: '1', low: 0, high: 1}, {name: b, units: '1', low: 0, high: 1}, "
             "{name: c, units: '1', low: 0, high: 1}]"]


@pytest.fixture
def holed_model(tmp_path, monkeypatch):
    """A function model that is NaN on a tenth of its space (a > 0.9), importable as ``holed:response``."""
    (tmp_path / "holed.py").write_text(HOLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return ["model=function", "model.source=holed:response", "model.output={name: y, units: '1'}", *UNIT_CUBE,
            *FLOAT64, "plots=false"]


@pytest.mark.parametrize("method", ["sobol", "morris"])
def test_a_model_not_finite_at_some_design_points_is_refused_saying_how_many_and_where(compose_config, tmp_path,
                                                                                       holed_model, method):
    """The design's estimators need every point (one NaN made every index NaN, silently): refused in one line
    naming the method, the count and the first point, which lies in the hole (a > 0.9)."""
    cfg = compose_config("indices", [*holed_model, f"methods=[{method}]", "sobol.n=256"], tmp_path / "out")
    with pytest.raises(DataError, match=rf"^{method}: the model is not finite at \d+ of \d+ points of the design "
                                        r"\(first at a=(0\.9[0-9]*|1), b=") as refused:
        indices.run(cfg)
    assert "\n" not in str(refused.value) and not (tmp_path / "out" / "indices.nc").exists()


def test_dgsm_of_a_sweep_leaves_out_the_points_where_the_model_is_not_finite_and_says_so(compose_config, tmp_path,
                                                                                        holed_model, caplog):
    """DGSM from a sweep is a mean over i.i.d. points: on the finite ones it is exact for this linear model,
    nu = (1, 4, 0.25) (was NaN for every input), with one warning line giving the count of points with a > 0.9
    read from the sweep itself."""
    path = sweep.run(compose_config("sweep", [*holed_model, "grid.n=512"], tmp_path / "sweep"))
    with open_result(path) as stored:
        hole = int((stored["x"].sel(parameter=0).values > 0.9).sum())
    assert 0 < hole < 512
    cfg = compose_config("indices", [*holed_model, "methods=[dgsm]", f"dgsm.sweep={path}", "bootstrap.n_resamples=20"],
                         tmp_path / "out")
    with caplog.at_level("WARNING", logger="workflows.indices"):
        ds = open_result(indices.run(cfg))
    np.testing.assert_allclose(ds.dgsm_nu.isel(output=0), [1.0, 4.0, 0.25], rtol=1e-12)
    assert ds.attrs["dgsm_n_points"] == 512 - hole and ds.attrs["dgsm_nonfinite_points"] == hole
    said = [r.getMessage() for r in caplog.records if "not finite" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"indices: dgsm: the model is not finite at {hole} of 512 sweep points "
                                                 "(first at a=0.9")


SHARDED = FLOAT64 + ["methods=[sobol]", "sobol.n=1024", "sobol.block=64", "sobol.checkpoint_rows=128", "plots=false"]


def test_four_shards_merged_equal_the_single_run_and_a_stranger_is_refused(compose_config, tmp_path):
    whole = open_result(indices.run(compose_config("indices", SHARDED, tmp_path / "whole")))
    for k in range(4):
        out = indices.run(compose_config("indices", [*SHARDED, "sobol.shards=4", f"sobol.shard={k}"],
                                         tmp_path / "shards" / str(k)))
        assert out.name == "sobol_statistics.nc" and not (out.parent / "indices.nc").exists()
        assert not (out.parent / indices.PARTS).exists()  # the kept groups go once the shard is published
    ds = open_result(indices.run(compose_config("indices", [*SHARDED, f"sobol.merge=[{tmp_path / 'shards'}]"],
                                                tmp_path / "merged")))
    for name in ("sobol_S1", "sobol_ST", "sobol_S1_interval", "sobol_ST_interval", "sobol_variance",
                 "sobol_ST_convergence"):
        np.testing.assert_allclose(ds[name].values, whole[name].values, rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(ds.sobol_ST.isel(output=0), ishigami_indices()["ST"], atol=0.05)  # N = 1024
    indices.run(compose_config("indices", [*SHARDED, "seed=1", "sobol.shards=4", "sobol.shard=2"],
                               tmp_path / "stranger"))
    given = [tmp_path / "shards" / str(k) for k in (0, 1, 3)] + [tmp_path / "stranger"]
    with pytest.raises(DataError) as info:
        indices.run(compose_config("indices", [*SHARDED, f"sobol.merge=[{','.join(map(str, given))}]"],
                                   tmp_path / "refused"))
    assert "statistics of another design (seed '1', this run's '0')" in str(info.value)
    assert "\n" not in str(info.value) and not (tmp_path / "refused" / "indices.nc").exists()
