"""Uncertainty propagation against closed forms, numpy oracles and Monte Carlo error bands.

Monte Carlo checks use K_SIGMA = 5 standard errors: every standard error is estimated from 16
independent replicates (Student t with 15 dof), for which P(|t| > 5) ~ 1.6e-4 per comparison. Seeds
are fixed, so the tests are deterministic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import xarray as xr
from scipy import special

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.propagation import (METHODS, MonteCarlo, Propagation, Verdict, first_order, monte_carlo,
                                             pointwise_std, propagate, second_order, unscented)
from sensitivity.outputs.spec import OutputSpec
from sensitivity.inputs.uncertainty import gaussian_inputs, inputs_from_space
from sensitivity.errors import ConfigError, ModelError
from sensitivity.inputs.space import ParameterSpace

K_SIGMA = 5.0
MOMENT_METHODS = ("first_order", "second_order", "unscented")


@dataclass
class Quadratic:
    """``y_k = c_k + b_k . x + 1/2 x^T A_k x`` with analytic Jacobian and Hessian."""

    c: np.ndarray  # [m]
    b: np.ndarray  # [m, n]
    a: np.ndarray  # [m, n, n], symmetric

    def values(self, x: np.ndarray) -> np.ndarray:
        return self.c + x @ self.b.T + 0.5 * np.einsum("pi,kij,pj->pk", x, self.a, x)

    def value_and_jacobian(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.values(x), self.b + np.einsum("kij,pj->pki", self.a, x)

    def hessian(self, x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.a, (len(x), *self.a.shape))

    def gaussian_moments(self, mu: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact moments for x ~ N(mu, cov), from the moments of quadratic forms (Mathai & Provost
        1992): E[x'Ax] = tr(A S) + mu'A mu, Cov(x, x'Ax) = 2 S A mu,
        Cov(x'A x, x'B x) = 2 tr(A S B S) + 4 mu'A S B mu."""
        mean = self.c + self.b @ mu + 0.5 * (np.einsum("kij,ji->k", self.a, cov) + np.einsum("i,kij,j->k", mu, self.a, mu))
        lin = self.b @ cov @ self.b.T
        cross = self.b @ (2 * cov @ np.einsum("lij,j->il", self.a, mu))  # Cov(b_k x, x'A_l x)
        q = (2 * np.einsum("kij,jp,lpq,qi->kl", self.a, cov, self.a, cov)
             + 4 * np.einsum("i,kij,jp,lpq,q->kl", mu, self.a, cov, self.a, mu))
        return mean, lin + 0.5 * (cross + cross.T) + 0.25 * q


def all_methods(model: Quadratic, inputs, output: OutputSpec | None = None) -> xr.Dataset:
    return propagate(BatchedModel(model.values, model.value_and_jacobian, model.hessian, output), inputs,
                     Propagation(monte_carlo=MonteCarlo(n_samples=2**14)), seed=11)


@pytest.fixture
def gaussian():
    mu = np.array([1.0, -0.5, 2.0])
    cov = np.array([[0.5, 0.1, -0.2], [0.1, 0.3, 0.05], [-0.2, 0.05, 0.8]])
    return gaussian_inputs(mu, cov, names=["p", "q", "r"], units=["m", "m", "m"])


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


def random_quadratic(rng, m: int, n: int, curvature: float) -> Quadratic:
    a = rng.normal(size=(m, n, n)) * curvature
    return Quadratic(rng.normal(size=m), rng.normal(size=(m, n)), a + a.transpose(0, 2, 1))


def within_mc_error(ds: xr.Dataset, mean: np.ndarray, std: np.ndarray) -> None:
    mc = ds.isel(propagation_method=list(ds.propagation_method_name.values).index("monte_carlo"))
    assert (np.abs(mc.output_mean.values - mean) <= K_SIGMA * mc.output_mean_se.values).all()
    assert (np.abs(mc.output_std.values - std) <= K_SIGMA * mc.output_std_se.values).all()


def test_linear_model_every_method_equals_the_closed_form(gaussian, rng):
    model = random_quadratic(rng, 4, 3, curvature=0.0)
    ds = all_methods(model, gaussian)
    mean, cov = model.c + model.b @ gaussian.mean, model.b @ gaussian.covariance @ model.b.T
    for method in MOMENT_METHODS:
        row = ds.isel(propagation_method=list(ds.propagation_method_name.values).index(method))
        np.testing.assert_allclose(row.output_mean.values, mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(row.output_covariance.values, cov, rtol=1e-12, atol=1e-12)
        # normal-approximation quantiles are exact for a linear map of Gaussian inputs
        z = special.ndtri(ds["quantile"].values)[:, None]
        np.testing.assert_allclose(row.output_quantile.values, mean + z * np.sqrt(np.diag(cov)), rtol=1e-12)
    within_mc_error(ds, mean, np.sqrt(np.diag(cov)))
    mc = ds.isel(propagation_method=3)
    z = special.ndtri(ds["quantile"].values)[:, None]
    normal_quantiles = mean + z * np.sqrt(np.diag(cov))
    assert (np.abs(mc.output_quantile.values - normal_quantiles) <= K_SIGMA * mc.output_quantile_se).all()
    assert (ds.nonlinear.values[:3] == 0).all() and (ds.nonlinear.values[3] == -1).all()


def test_linear_model_of_copula_inputs_matches_their_exact_covariance(rng):
    # Monte Carlo samples the copula; the moment methods use the quadrature covariance: independent routes.
    space = ParameterSpace.from_records(
        [{"name": "a", "units": "1", "low": 0.0, "high": 1.0},
         {"name": "b", "units": "1", "low": 0.1, "high": 50.0,
          "distribution": {"kind": "lognormal", "median": 2.0, "sigma_log": 0.4}},
         {"name": "c", "units": "1", "low": 0.0, "high": 3.0, "distribution": {"kind": "triangular", "mode": 2.5}}],
        correlation=[[1.0, 0.6, -0.3], [0.6, 1.0, 0.4], [-0.3, 0.4, 1.0]],
    )
    inputs = inputs_from_space(space)
    model = random_quadratic(rng, 3, 3, curvature=0.0)
    ds = monte_carlo(inputs, model.values, n_samples=2**15, seed=5)
    cov = model.b @ inputs.covariance @ model.b.T
    within_mc_error(ds.expand_dims(propagation_method=1).assign_coords(propagation_method_name=("propagation_method", ["monte_carlo"])),
                    model.c + model.b @ inputs.mean, np.sqrt(np.diag(cov)))
    assert float(ds.outside_bounds) == 0.0  # all marginals live inside [0.1, 50] to within 2^-53


def test_quadratic_gaussian_second_order_is_exact_and_unscented_mean_is_exact(gaussian, rng):
    model = random_quadratic(rng, 3, 3, curvature=0.5)
    mean, cov = model.gaussian_moments(gaussian.mean, gaussian.covariance)
    second = second_order(gaussian, model.value_and_jacobian, model.hessian)
    np.testing.assert_allclose(second.output_mean.values, mean, rtol=1e-12)
    np.testing.assert_allclose(second.output_covariance.values, cov, rtol=1e-12, atol=1e-12)
    for kappa in (0.0, 1.0):
        ut = unscented(gaussian, model.values, alpha=0.8, kappa=kappa)
        np.testing.assert_allclose(ut.output_mean.values, mean, rtol=1e-12)
    first = first_order(gaussian, model.value_and_jacobian)
    assert not np.allclose(first.output_mean.values, mean)  # the curvature is large enough to matter
    ds = all_methods(model, gaussian)
    within_mc_error(ds, mean, np.sqrt(np.diag(cov)))


@pytest.mark.parametrize("rho", [0.0, 0.6])
def test_product_of_two_normals_has_its_known_moments(rho):
    # y = x1 x2 with x ~ N(mu, S): E y = mu1 mu2 + rho s1 s2,
    # Var y = mu1^2 s2^2 + mu2^2 s1^2 + 2 mu1 mu2 rho s1 s2 + s1^2 s2^2 (1 + rho^2)
    (m1, m2), (s1, s2) = (1.5, -0.8), (0.7, 1.2)
    inputs = gaussian_inputs([m1, m2], [[s1**2, rho * s1 * s2], [rho * s1 * s2, s2**2]])
    model = Quadratic(np.zeros(1), np.zeros((1, 2)), np.array([[[0.0, 1.0], [1.0, 0.0]]]))
    mean = m1 * m2 + rho * s1 * s2
    var = m1**2 * s2**2 + m2**2 * s1**2 + 2 * m1 * m2 * rho * s1 * s2 + s1**2 * s2**2 * (1 + rho**2)
    ds = all_methods(model, inputs)
    row = dict(zip(ds.propagation_method_name.values, range(4)))
    assert ds.output_mean.values[row["second_order"], 0] == pytest.approx(mean, rel=1e-12)
    assert ds.output_std.values[row["second_order"], 0] ** 2 == pytest.approx(var, rel=1e-12)
    assert ds.output_mean.values[row["unscented"], 0] == pytest.approx(mean, rel=1e-12)
    assert ds.output_mean.values[row["first_order"], 0] == pytest.approx(m1 * m2, rel=1e-12)
    within_mc_error(ds, np.array([mean]), np.array([math.sqrt(var)]))


def test_product_of_independent_uniforms_second_order_is_exact():
    # y = x1 x2, independent: E y = mu1 mu2, Var y = s1^2 s2^2 + mu1^2 s2^2 + mu2^2 s1^2 for any marginals.
    space = ParameterSpace.from_records([{"name": "u", "units": "1", "low": 1.0, "high": 3.0},
                                         {"name": "v", "units": "1", "low": -1.0, "high": 2.0}])
    model = Quadratic(np.zeros(1), np.zeros((1, 2)), np.array([[[0.0, 1.0], [1.0, 0.0]]]))
    (m1, v1), (m2, v2) = (2.0, 4.0 / 12.0), (0.5, 9.0 / 12.0)
    second = second_order(inputs_from_space(space), model.value_and_jacobian, model.hessian)
    assert float(second.output_mean[0]) == pytest.approx(m1 * m2, rel=1e-12)
    assert float(second.output_std[0]) ** 2 == pytest.approx(v1 * v2 + m1**2 * v2 + m2**2 * v1, rel=1e-12)


def test_plain_monte_carlo_standard_errors_match_sigma_over_sqrt_n(gaussian, rng):
    model = random_quadratic(rng, 2, 3, curvature=0.0)
    ds = monte_carlo(gaussian, model.values, n_samples=2**14, sampler="random", seed=3)
    std = np.sqrt(np.diag(model.b @ gaussian.covariance @ model.b.T))
    # the replicate estimate of sigma/sqrt(N) has 15 dof: its ratio to the truth lies in [0.5, 1.6]
    # with probability > 0.999 (chi distribution)
    ratio = ds.output_mean_se.values / (std / math.sqrt(ds.attrs["n_samples"]))
    assert ((ratio > 0.5) & (ratio < 1.6)).all(), ratio
    assert ds.attrs["n_samples"] == 2**14 and ds.attrs["n_replicates"] == 16


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_streaming_statistics_equal_numpy_on_the_whole_sample(gaussian, rng, dtype):
    """Against numpy on the float64 values the model returned: a float32 model's values are kept and
    partitioned in float32, their moments accumulated and their quantiles interpolated in float64."""
    model = random_quadratic(rng, 3, 3, curvature=0.3)
    seen = []

    def recording(x):
        seen.append(model.values(x).astype(dtype))
        return seen[-1]

    m, rep_size = 3, 256
    ds = monte_carlo(gaussian, recording, n_samples=2**13, n_replicates=4, block_size=64,
                     max_bytes=8 * m * rep_size, seed=9, quantiles=(0.1, 0.5))
    assert ds.attrs["n_replicates"] == 32  # the memory cap split 2^13 samples into 32 replicates of 256
    y = np.concatenate(seen[1:]).astype(np.float64)  # the first call learns m at the mean
    np.testing.assert_allclose(ds.output_mean.values, y.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(ds.output_covariance.values, np.cov(y.T), rtol=1e-10)
    reps = y.reshape(32, rep_size, m)
    rep_quantiles = np.quantile(reps, [0.1, 0.5], axis=1)  # [q, R, m]
    np.testing.assert_allclose(ds.output_quantile.values, rep_quantiles.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(ds.output_quantile_se.values, rep_quantiles.std(axis=1, ddof=1) / math.sqrt(32),
                               rtol=1e-10)
    np.testing.assert_allclose(ds.output_mean_se.values, reps.mean(axis=1).std(axis=0, ddof=1) / math.sqrt(32),
                               rtol=1e-10)


def test_verdict_flags_the_nonlinear_output_only():
    # y0 = x0 + x1 (linear), y1 = exp(2 x0) with x0 ~ N(0, 0.5^2): lognormal, E = e^{2 s^2}, Var = (e^{4s^2}-1) e^{4s^2}
    s = 0.5
    inputs = gaussian_inputs([0.0, 1.0], [[s * s, 0.0], [0.0, 1.0]])

    def values(x):
        return np.column_stack([x[:, 0] + x[:, 1], np.exp(2 * x[:, 0])])

    def value_and_jacobian(x):
        zero, one, e = np.zeros(len(x)), np.ones(len(x)), np.exp(2 * x[:, 0])
        return values(x), np.stack([np.stack([one, one], 1), np.stack([2 * e, zero], 1)], 1)

    ds = propagate(BatchedModel(values, value_and_jacobian), inputs, Propagation(
        methods=("first_order", "monte_carlo"), monte_carlo=MonteCarlo(n_samples=2**14), verdict=Verdict(rtol=0.02)),
        seed=1)
    assert ds.nonlinear.values.tolist() == [[0, 1], [-1, -1]]
    mean, std = math.exp(2 * s * s), math.sqrt(math.expm1(4 * s * s) * math.exp(4 * s * s))
    # first order: mean e^0 = 1, std 2 s = 1: discrepancies against the exact moments, to MC accuracy
    assert float(ds.output_mean_discrepancy[0, 1]) == pytest.approx((1.0 - mean) / std, rel=0.02)
    assert float(ds.output_std_discrepancy[0, 1]) == pytest.approx((2 * s - std) / std, rel=0.02)


def test_propagate_dataset_contract(gaussian, rng, tmp_path):
    model = random_quadratic(rng, 2, 3, curvature=0.2)
    ds = all_methods(model, gaussian, OutputSpec.from_dict({"names": ["cases", "deaths"]}))
    assert list(ds.propagation_method_name.values) == list(METHODS)
    assert dict(ds.sizes) == {"propagation_method": 4, "output": 2, "output_i": 2, "output_j": 2, "quantile": 5,
                              "parameter": 3, "parameter_i": 3, "parameter_j": 3}
    assert ds.output_covariance.dims == ("propagation_method", "output_i", "output_j")
    assert ds.output_quantile.dims == ("propagation_method", "quantile", "output")
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs, name
    assert ds.output_mean.attrs["units"] == "1" and ds.input_covariance.attrs["units"] == "m2"
    assert ds.status.values.tolist() == [0, 0, 0, 0]
    assert ds.attrs["monte_carlo_n_samples"] == 2**14
    path = tmp_path / "propagation.nc"
    ds.to_netcdf(path, engine="netcdf4")
    with xr.open_dataset(path) as back:
        xr.testing.assert_allclose(back.output_covariance, ds.output_covariance)
        assert back.set_xindex("propagation_method_name").sel(propagation_method_name="unscented").output_std.shape == (2,)


def test_failed_method_is_data_not_an_exception(gaussian):
    def values(x):
        y = x[:, :1].copy()
        y[np.abs(x[:, 0] - 1.0) > 1.5] = np.nan  # a model that fails in the tails
        return y

    ds = propagate(BatchedModel(values), gaussian, Propagation(methods=("unscented", "monte_carlo"),
                                                               monte_carlo=MonteCarlo(n_samples=2**10)), seed=0)
    assert ds.status.values.tolist() == [0, 1]
    assert "non-finite" in str(ds.status_message.values[1])
    assert ds.nonlinear.values.tolist() == [[-1], [-1]]


def test_pointwise_std_equals_a_per_point_loop(rng):
    jac = rng.normal(size=(50, 4, 3))
    cov = np.array([[1.0, 0.2, 0.0], [0.2, 0.5, -0.1], [0.0, -0.1, 2.0]])
    expected = np.array([np.sqrt(np.diag(j @ cov @ j.T)) for j in jac])
    np.testing.assert_allclose(pointwise_std(jac, cov), expected, rtol=1e-12)
    # a field-shaped output [N, 2, 2, n] gives sigma [N, 2, 2]
    np.testing.assert_allclose(pointwise_std(jac.reshape(50, 2, 2, 3), cov), expected.reshape(50, 2, 2), rtol=1e-12)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda g, f: pointwise_std(np.ones((2, 1, 2)), [[1.0, 2.0], [2.0, 1.0]]), ConfigError, "positive definite"),
        (lambda g, f: propagate(BatchedModel(f.values), g, Propagation(methods=("second_order",))), ConfigError,
         "needs `value_and_jacobian`"),
        (lambda g, f: propagate(BatchedModel(f.values), g, Propagation(methods=("bootstrap",))), ConfigError,
         "bootstrap"),
        (lambda g, f: unscented(g, f.values, alpha=0.0), ConfigError, "`alpha` must be > 0"),
        (lambda g, f: unscented(g, f.values, kappa=-3.0), ConfigError, "n \\+ kappa > 0"),
        (lambda g, f: first_order(g, f.value_and_jacobian, quantiles=(0.5, 1.0)), ConfigError, "quantiles"),
        (lambda g, f: first_order(g, f.value_and_jacobian, output_names=["a"]), ConfigError, "`output_names` must have 2"),
        (lambda g, f: monte_carlo(g, f.values, n_replicates=1), ConfigError, "n_replicates"),
        (lambda g, f: monte_carlo(g, f.values, block_size=1000), ConfigError, "power of 2"),
        (lambda g, f: monte_carlo(g, f.values, sampler="lhs"), ConfigError, "`sampler`"),
        (lambda g, f: unscented(g, lambda x: f.values(x)[:1]), ModelError, "shape \\[1, 2\\]"),
        (lambda g, f: propagate(BatchedModel(f.values), g, Propagation(methods=("monte_carlo",),
                                                                       verdict=Verdict(k_sigma=0))),
         ConfigError, "k_sigma"),
    ],
)
def test_bad_arguments_raise_one_line_errors(gaussian, rng, call, error, message):
    with pytest.raises(error, match=message) as err:
        call(gaussian, random_quadratic(rng, 2, 3, curvature=0.0))
    assert "\n" not in str(err.value)
