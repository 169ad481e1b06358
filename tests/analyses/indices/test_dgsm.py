"""DGSM from exact gradients: closed forms, the Poincare bound, and the constants against a FEM spectral gap."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import linalg

from sensitivity.analyses.indices import dgsm, sweep_blocks
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.datasets import record_checksum
from sensitivity.errors import DataError
from sensitivity.inputs.space import Distribution, Parameter, ParameterSpace
from sensitivity.sweep.stored import StoredSweep
from tests.helpers.blocks import sweep_file
from tests.helpers.functions import (
    ishigami,
    ishigami_indices,
    ishigami_jacobian,
    linear,
    linear_jacobian,
    sobol_g,
    sobol_g_indices,
    sobol_g_jacobian,
    uniform_space,
)

ISHIGAMI = uniform_space(3, -np.pi, np.pi)
G_A = (0.0, 1.0, 4.5, 9.0, 99.0, 99.0)


def test_ishigami_nu_and_bound():
    # N = 4096 scrambled-Sobol' points: over 20 seeds the largest relative error of nu was 0.11 %, so 1 %.
    x = dgsm.sample(ISHIGAMI, 4096, seed=1)
    ds = dgsm.analyze(ishigami_jacobian(x), ishigami(x), ISHIGAMI, intervals=IntervalPlan("rqmc", n_resamples=50,
                      seed=2))
    exact = ishigami_indices()
    np.testing.assert_allclose(ds.nu.isel(output=0), exact["nu"], rtol=0.01)
    np.testing.assert_allclose(ds.variance[0], exact["variance"], rtol=0.01)
    # The Poincare inequality: the bound from exact nu and V is >= the analytic total index.
    exact_bound = (2 * np.pi) ** 2 / np.pi**2 * exact["nu"] / exact["variance"]
    np.testing.assert_allclose(ds.sobol_total_bound.isel(output=0), exact_bound, rtol=0.02)
    assert (exact_bound >= exact["ST"]).all()
    low, high = ds.nu_interval.isel(output=0).values.T
    assert (low <= ds.nu.isel(output=0).values).all() and (ds.nu.isel(output=0).values <= high).all()


def test_sobol_g_nu_and_bound():
    # Same N and tolerance as Ishigami (largest relative error over 20 seeds: 0.08 %).
    space = uniform_space(len(G_A), 0.0, 1.0)
    x = dgsm.sample(space, 4096, seed=3)
    ds = dgsm.analyze(sobol_g_jacobian(x, G_A), sobol_g(x, G_A), space, intervals=IntervalPlan("rqmc", n_resamples=20,
                      seed=4))
    exact = sobol_g_indices(G_A)
    np.testing.assert_allclose(ds.nu.isel(output=0), exact["nu"], rtol=0.01)
    assert (ds.sobol_total_bound.isel(output=0).values >= exact["ST"]).all()


def test_linear_model_is_exact():
    # nu = c^2 at every point, so the estimate and every bootstrap replicate are c^2 exactly.
    w = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]])
    space = uniform_space(3, 0.0, 2.0, units="m")
    x = dgsm.sample(space, 256, seed=0)
    y = linear(x, w, np.zeros(2))
    ds = dgsm.analyze(linear_jacobian(x, w), y, space, output_units=["s", "s"], intervals=IntervalPlan("rqmc",
                      n_resamples=20, seed=0))
    np.testing.assert_allclose(ds.nu.values, (w**2).T, rtol=1e-14)
    np.testing.assert_allclose(ds.nu_interval.values, np.repeat((w**2).T[..., None], 2, axis=-1), rtol=1e-14)
    expected = 4.0 / np.pi**2 * (w**2).T / np.var(y, axis=0)
    np.testing.assert_allclose(ds.sobol_total_bound.values, expected, rtol=1e-12)
    assert ds.nu.attrs["units"] == "s2 m-2" and ds.poincare_constant.attrs["units"] == "m2"


def test_normal_inputs_bound_is_tight_for_a_linear_model():
    # For y = c . x with independent normal inputs, C = sigma^2 is attained: bound_i = ST_i = c_i^2 s_i^2 / V.
    sd = np.array([0.5, 2.0])
    space = ParameterSpace(
        tuple(
            Parameter(f"x{i}", "1", -100.0, 100.0, distribution=Distribution("normal", {"mean": 1.0, "std": s}))
            for i, s in enumerate(sd)
        )
    )
    c = np.array([[3.0, 1.0]])
    x = dgsm.sample(space, 4096, seed=5)
    ds = dgsm.analyze(linear_jacobian(x, c), linear(x, c, np.zeros(1)), space, intervals=IntervalPlan("rqmc",
                      n_resamples=10, seed=0))
    exact = c[0] ** 2 * sd**2 / np.sum(c[0] ** 2 * sd**2)
    # Only V is estimated (N = 4096 QMC points; relative sd of a variance ~ sqrt(2/N) = 2 % for MC).
    np.testing.assert_allclose(ds.sobol_total_bound.isel(output=0), exact, rtol=0.02)


def _optimal_poincare_constant(pdf, low: float, high: float, cells: int = 400) -> float:
    """1 / spectral gap of ``-(p u')' = lambda p u`` with Neumann ends, by linear finite elements.

    The optimal constant is the inverse of the first non-zero eigenvalue (Roustant et al. 2017,
    doi:10.1214/17-EJS1310); linear elements on a uniform mesh err by O(h^2) ~ 1e-5 here.
    """
    nodes = np.linspace(low, high, cells + 1)
    h = nodes[1] - nodes[0]
    p = pdf(0.5 * (nodes[:-1] + nodes[1:]))  # density at cell midpoints
    stiff, mass = np.zeros((cells + 1, cells + 1)), np.zeros((cells + 1, cells + 1))
    e = np.arange(cells)
    for (a, b), k, m in (((0, 0), 1, 2), ((1, 1), 1, 2), ((0, 1), -1, 1), ((1, 0), -1, 1)):
        np.add.at(stiff, (e + a, e + b), k * p / h)
        np.add.at(mass, (e + a, e + b), m * p * h / 6)
    return 1.0 / linalg.eigh(stiff, mass, eigvals_only=True, subset_by_index=[1, 1])[0]


@pytest.mark.parametrize(
    ("distribution", "exact"),
    [
        (Distribution("uniform"), True),
        (Distribution("triangular", {"mode": 0.5}), False),
        (Distribution("triangular", {"mode": 2.5}), False),
        (Distribution("truncnormal", {"mean": 1.0, "std": 0.7}), False),
        (Distribution("truncnormal", {"mean": 0.0, "std": 5.0}), False),
        (Distribution("gumbel_r", {"loc": 1.0, "scale": 0.5}, truncate=(0.0, 3.0)), False),   # any scipy kind
        (Distribution("beta", {"a": 2.0, "b": 3.0, "loc": 0.0, "scale": 3.0}), False),
        (Distribution("norm", {"loc": 1.0, "scale": 0.7}, truncate=(0.0, 3.0)), False),
        (Distribution("gamma", {"a": 2.0, "scale": 1.0}, truncate=(0.0, 3.0)), False),
        (Distribution("weibull_min", {"c": 1.5, "scale": 2.0}, truncate=(0.0, 3.0)), False),
    ],
)
def test_poincare_constants_bound_the_optimal_constant(distribution, exact):
    parameter = Parameter("x", "1", 0.0, 3.0, distribution=distribution)
    frozen = parameter.frozen_distribution()
    optimal = _optimal_poincare_constant(frozen.pdf, 0.0, 3.0)
    constant = dgsm.poincare_constant(parameter)
    assert constant >= optimal * (1 - 1e-4)  # slack for the O(h^2) discretisation error
    if exact:
        assert constant == pytest.approx(optimal, rel=1e-4)


def test_spectral_constant_equals_the_closed_forms():
    """Uniform on [0, L]: L^2 / pi^2; the exponential of rate r truncated to [0, L]: 1 / (r^2 / 4 + pi^2 / L^2)
    (its Neumann eigenfunctions e^(r x / 2) (cos, sin)(k pi x / L)); from above, within 1e-6."""
    length, rate = 3.0, 1.3
    truncated = lambda x: rate * np.exp(-rate * x) / (1 - np.exp(-rate * length))  # noqa: E731
    for pdf, exact in ((lambda x: np.full_like(x, 1 / length), length**2 / math.pi**2),
                       (truncated, 1 / (rate**2 / 4 + math.pi**2 / length**2))):
        constant = dgsm.spectral_constant(pdf, 0.0, length)
        assert exact <= constant <= exact * (1 + 1e-6)


@pytest.mark.parametrize("distribution", [
    Distribution("lognorm", {"s": 0.8, "scale": 1.0}, truncate=(0.0, 3.0)),     # not log-concave
    Distribution("beta", {"a": 0.7, "b": 2.0, "loc": -0.5, "scale": 4.0}, truncate=(0.0, 3.0)),  # pole cut off
])
def test_a_bounded_density_without_a_closed_form_gets_its_optimal_constant(distribution):
    """No closed-form bound, but a density finite and positive on [0, 3]: the optimal constant, against the
    consistent-mass elements of :func:`_optimal_poincare_constant` (another discretisation)."""
    parameter = Parameter("x", "1", 0.0, 3.0, distribution=distribution)
    optimal = _optimal_poincare_constant(parameter.frozen_distribution().pdf, 0.0, 3.0, cells=2000)
    assert dgsm.poincare_constant(parameter) == pytest.approx(optimal, rel=1e-5)


def test_lognormal_and_correlated_inputs_give_no_bound():
    lognormal = Parameter("k", "1", 0.1, 10.0, distribution=Distribution("lognormal", {"median": 1.0, "sigma_log": 0.5}))
    assert math.isnan(dgsm.poincare_constant(lognormal))
    u_shaped = Parameter("k", "1", distribution=Distribution("beta", {"a": 0.5, "b": 0.5}))  # not log-concave
    assert math.isnan(dgsm.poincare_constant(u_shaped))
    gumbel = Parameter("k", "1", distribution=Distribution("gumbel_r", {"loc": 0.0, "scale": 1.0}))  # unbounded
    assert math.isnan(dgsm.poincare_constant(gumbel))
    normal = Parameter("k", "1", distribution=Distribution("norm", {"loc": 0.0, "scale": 2.0}, truncate=(-1.0, None)))
    assert dgsm.poincare_constant(normal) == 4.0  # one-sided truncation keeps the Bakry-Emery constant sigma^2
    space = ParameterSpace(ISHIGAMI.parameters, correlation=np.array([[1, 0.3, 0], [0.3, 1, 0], [0, 0, 1.0]]))
    x = dgsm.sample(space, 64, seed=0)
    ds = dgsm.analyze(ishigami_jacobian(x), ishigami(x), space, intervals=IntervalPlan("rqmc", n_resamples=5))
    assert np.isnan(ds.sobol_total_bound).all() and np.isfinite(ds.nu).all()
    assert np.corrcoef(x.T)[0, 1] > 0.1  # the copula did couple the inputs


def test_nu_of_dependent_inputs_is_the_mean_under_the_joint_law():
    # f = x1^2 x2 of zero-mean normals with correlation r: nu_1 = E[(2 x1 x2)^2] = 4 s1^2 s2^2 (1 + 2 r^2)
    # (Isserlis), nu_2 = E[x1^4] = 3 s1^4; the copula's draws must give these, not the independent values.
    # N = 65536 as 8 scramblings: 10 seeds, largest relative error 0.23 % -> 0.7 %.
    s1, s2, r = 1.5, 0.5, 0.6
    space = ParameterSpace.from_records([dict(name="x1", units="m", distribution=dict(kind="norm", loc=0.0, scale=s1)),
                                         dict(name="x2", units="m", distribution=dict(kind="norm", loc=0.0, scale=s2))],
                                        [[1.0, r], [r, 1.0]])
    x = dgsm.sample(space, 65536, seed=3)
    jac = np.stack([2 * x[:, 0] * x[:, 1], x[:, 0] ** 2], axis=1)[:, None, :]
    ds = dgsm.analyze(jac, (x[:, 0] ** 2 * x[:, 1])[:, None], space)
    np.testing.assert_allclose(ds.nu.isel(output=0), [4 * s1**2 * s2**2 * (1 + 2 * r**2), 3 * s1**4], rtol=0.007)
    assert np.isnan(ds.sobol_total_bound).all() and ds.attrs["inputs"].startswith("dependent (Gaussian copula)")


def test_shape_errors():
    x = dgsm.sample(ISHIGAMI, 16, seed=0)
    with pytest.raises(DataError, match=r"`jacobian` must have shape \[N, m, 3\]"):
        dgsm.analyze(np.zeros((16, 1, 2)), ishigami(x), ISHIGAMI)
    with pytest.raises(DataError, match="`values` must have 16 rows"):
        dgsm.analyze(ishigami_jacobian(x), ishigami(x)[:8], ISHIGAMI)


def test_blocks_give_the_whole_sample_estimate_and_a_poisson_interval():
    # The estimate is the same sample mean as `analyze` (equal to rounding); the Poisson bootstrap
    # interval approximates the multinomial one: with R = 400 resamples the Monte Carlo error of a
    # 95 % quantile is a few %, so the widths agree to 25 %.
    x = dgsm.sample(ISHIGAMI, 4096, seed=1, replicates=1)
    jac, y = ishigami_jacobian(x), ishigami(x) + 1e6  # a large mean: the streaming variance must not cancel
    whole = dgsm.analyze(jac, y, ISHIGAMI, intervals=IntervalPlan("bootstrap", n_resamples=400, seed=2))
    blocks = ((jac[s : s + 1000], y[s : s + 1000]) for s in range(0, 4096, 1000))
    streamed = dgsm.analyze_blocks(blocks, ISHIGAMI, intervals=IntervalPlan("bootstrap", n_resamples=400, seed=2))
    for key in ("nu", "variance", "sobol_total_bound"):
        np.testing.assert_allclose(streamed[key].values, whole[key].values, rtol=1e-9)
    np.testing.assert_allclose(streamed.variance.values, np.var(y, axis=0), rtol=1e-9)
    width = lambda ds: np.diff(ds.nu_interval.values, axis=-1)[..., 0]  # noqa: E731
    np.testing.assert_allclose(width(streamed), width(whole), rtol=0.25)
    assert streamed.attrs["n_points"] == 4096


def test_blocks_must_not_be_empty():
    with pytest.raises(DataError, match="at least one block"):
        dgsm.analyze_blocks(iter(()), ISHIGAMI)


def test_mixed_units_are_tabled_in_coordinates():
    # Parameters in m and s: nu's units differ along `parameter`, so they live in a `nu_units` coordinate.
    space = ParameterSpace.from_records([dict(name="a", units="m", low=0, high=1), dict(name="b", units="s", low=0, high=1)])
    w = np.array([[1.0, 2.0]])
    x = dgsm.sample(space, 64, seed=0)
    ds = dgsm.analyze(linear_jacobian(x, w), linear(x, w, np.zeros(1)), space, output_units=["kg"],
                      intervals=IntervalPlan("rqmc", n_resamples=5))
    assert "units" not in ds.nu.attrs and ds.nu.attrs["units_coordinate"] == "nu_units"
    assert list(ds.nu_units.sel(output=0).values) == ["kg2 m-2", "kg2 s-2"]
    assert ds.poincare_constant.attrs["units_coordinate"] == "poincare_constant_units"
    assert ds.variance.attrs["units"] == "kg2"


def test_sweep_blocks_stream_a_stored_sweep_and_refuse_one_changed_after_its_checksum(tmp_path):
    rng = np.random.default_rng(2)
    x, values, jac = rng.uniform(size=(10, 3)), rng.standard_normal((10, 4)), rng.standard_normal((10, 4, 3))
    path = sweep_file(tmp_path / "sweep.nc", x, values, jac)
    record_checksum(path)
    with StoredSweep(path) as sweep:
        blocks = list(sweep_blocks(sweep, block=4))
    assert [len(v) for _, v in blocks] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate([j for j, _ in blocks]), jac)
    np.testing.assert_array_equal(np.concatenate([v for _, v in blocks]), values)
    sweep_file(path, x, values, 2.0 * jac)  # rewritten; the record is the old file's
    with StoredSweep(path) as sweep, pytest.raises(DataError, match="does not match its checksum record sweep.nc"):
        next(sweep_blocks(sweep))
