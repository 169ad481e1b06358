"""Every analysis of an ensemble against closed forms: exactly linear members, whose indices, moments, fits and
likelihood are known, so the member results, their spread and the emulator-variance fit have references."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import sensitivity
from sensitivity.analyses import indices
from sensitivity.analyses.calibration import ObservationModel, calibrate_ensemble
from sensitivity.analyses.calibration.emulator import shrunk_covariance
from sensitivity.outputs.members import spread_factor
from sensitivity.inputs.uncertainty import gaussian_inputs
from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.propagation import MonteCarlo, Propagation, member_moments
from sensitivity.surrogates.ensemble import write_ensemble
from sensitivity.engine.ensemble import compile_ensemble
from tests.helpers.functions import uniform_space
from tests.helpers.models import linear_members

WEIGHTS = np.array([[[1.0, 2.0, 0.5], [0.0, 1.0, 1.0]],
                    [[1.2, 1.8, 0.4], [0.1, 0.9, 1.2]],
                    [[0.9, 2.3, 0.6], [-0.1, 1.1, 0.8]]])  # [K, m, n]
BIASES = np.array([[0.0, 1.0], [0.1, 0.9], [-0.2, 1.2]])
OUTPUT = {"name": "y", "units": "1", "names": ["first", "second"]}


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    models = linear_members(WEIGHTS, BIASES, ["x1", "x2", "x3"], OUTPUT)
    path = write_ensemble(tmp_path_factory.mktemp("linear") / "l.ensemble", lambda k, f: models[k].save(f),
                          [{"seed": k} for k in range(3)])
    return sensitivity.load_surrogate(path, dtype="float64")


def linear_s1(weights: np.ndarray) -> np.ndarray:
    """``[n, m]`` first-order (= total) Sobol' indices of ``y = W x`` with i.i.d. inputs: ``w_ji^2 / sum_i w_ji^2``."""
    return (weights**2 / (weights**2).sum(axis=-1, keepdims=True)).T


def test_indices_per_member_their_spread_and_the_combined_interval(ensemble):
    space = uniform_space(3, -1.0, 1.0)
    ds = indices.compute_ensemble(compile_ensemble(ensemble), space, {"sobol": indices.Sobol(n=8192)}, seed=1)
    assert ds["sobol_S1_member"].dims == ("member", "parameter", "output") and ds.attrs["ensemble_members"] == 3
    per_member = np.stack([linear_s1(w) for w in WEIGHTS])
    np.testing.assert_allclose(ds["sobol_S1_member"].values, per_member, atol=0.01)
    np.testing.assert_allclose(ds["sobol_ST_member"].values, per_member, atol=0.01)
    np.testing.assert_allclose(ds["sobol_S1"].values, linear_s1(WEIGHTS.mean(axis=0)), atol=0.01)  # the mean model's
    np.testing.assert_allclose(ds["sobol_S1_surrogate_std"].values, per_member.std(axis=0, ddof=1), atol=0.005)
    combined, sampling = ds["sobol_S1_combined_interval"].values, ds["sobol_S1_interval"].values
    half = spread_factor(3, 0.95) * ds["sobol_S1_surrogate_std"].values
    np.testing.assert_allclose(combined[..., 1] - ds["sobol_S1"].values,
                               np.hypot(sampling[..., 1] - ds["sobol_S1"].values, half), rtol=1e-12)
    assert (combined[..., 0] <= sampling[..., 0]).all() and (combined[..., 1] >= sampling[..., 1]).all()


def test_propagation_gives_each_members_moments(ensemble):
    mean, cov = np.array([0.2, -0.1, 0.3]), np.diag([0.04, 0.01, 0.09])
    engine = compile_ensemble(ensemble)
    stacked = BatchedModel(engine.stacked_values, engine.stacked_value_and_jacobian, output=ensemble.output)
    ds = member_moments(stacked, gaussian_inputs(mean, cov, names=["x1", "x2", "x3"], units=["1"] * 3), 3,
                        Propagation(methods=("first_order", "monte_carlo"), monte_carlo=MonteCarlo(n_samples=2**14)),
                        seed=0)
    assert ds["output_mean_member"].dims == ("propagation_method", "member", "output")
    exact_mean = np.einsum("kmn,n->km", WEIGHTS, mean) + BIASES
    exact_std = np.sqrt(np.einsum("kmn,n,kmn->km", WEIGHTS, np.diag(cov), WEIGHTS))
    for method in (0, 1):  # linear members: both methods exact, Monte Carlo to its sampling error
        np.testing.assert_allclose(ds["output_mean_member"].values[method], exact_mean, atol=2e-3)
        np.testing.assert_allclose(ds["output_std_member"].values[method], exact_std, rtol=5e-3)
    np.testing.assert_allclose(ds["output_std_surrogate_std"].values[0], exact_std.std(axis=0, ddof=1), rtol=1e-6)


def test_emulator_variance_fit_is_generalised_least_squares_with_the_members_covariance():
    """Members that differ by a constant offset: the emulator covariance is the offsets' (shrunk), the same at every
    x, so the fit is one generalised least-squares problem with a closed form."""
    rng = np.random.default_rng(2)
    a = rng.normal(size=(6, 2))
    offsets = rng.normal(0, 0.05, (4, 6))
    sigma, truth = 0.01, np.array([0.7, -0.3])
    y = a @ truth + rng.normal(0, sigma, 6)

    def member(k):
        return lambda x: (x @ a.T + offsets[k], np.broadcast_to(a, (len(x), 6, 2)))

    mean = lambda x: (x @ a.T + offsets.mean(axis=0), np.broadcast_to(a, (len(x), 6, 2)))  # noqa: E731
    values = lambda x: np.stack([x @ a.T + b for b in offsets])  # noqa: E731
    ds = calibrate_ensemble(BatchedModel(value_and_jacobian=mean), [member(k) for k in range(4)], values,
                            ObservationModel.from_arrays(y, sigma=sigma), starts=np.zeros((1, 2)))
    c = sigma**2 * np.eye(6) + (1 + 1 / 4) * shrunk_covariance(offsets)[0]
    info = a.T @ np.linalg.solve(c, a)
    expected = np.linalg.solve(info, a.T @ np.linalg.solve(c, y - offsets.mean(axis=0)))
    np.testing.assert_allclose(ds["estimate_emulator"].values, expected, rtol=1e-6)
    np.testing.assert_allclose(ds["covariance_emulator"].values, np.linalg.inv(info), rtol=1e-6)
    for k in range(4):  # each member alone: ordinary least squares against its own offset
        np.testing.assert_allclose(ds["estimate_member"].values[k], np.linalg.lstsq(a, y - offsets[k], rcond=None)[0],
                                   rtol=1e-6)
    plain = ds["standard_error"].values[int(ds["best_start"])]
    assert (ds["standard_error_emulator"].values > plain).all()


def test_shrinkage_keeps_the_variances_and_shrinks_what_few_members_cannot_estimate():
    rng = np.random.default_rng(0)
    common = rng.normal(size=(200, 1))
    correlated = common + 1e-3 * rng.normal(size=(200, 5))  # one direction: well estimated from many members
    cov, lam = shrunk_covariance(correlated)
    np.testing.assert_allclose(np.diag(cov), correlated.var(axis=0, ddof=1), rtol=1e-12)
    assert lam < 0.01
    few = rng.normal(size=(5, 40))  # 5 members, 40 independent outputs: the correlations are noise
    cov, lam = shrunk_covariance(few)
    assert lam > 0.6 and np.linalg.eigvalsh(cov).min() > 0  # full rank, unlike the rank-4 sample covariance


def test_posterior_likelihood_with_emulator_variance_is_the_gaussian_density(ensemble):
    import tensorflow as tf

    from sensitivity.analyses.calibration import ObservationModel
    from sensitivity.analyses.posterior import Support, flat_prior
    from sensitivity.analyses.posterior.density import log_posterior

    y = np.array([1.0, 2.0])
    for errors in ({"sigma": np.array([0.1, 0.2])}, {"cov": np.array([[0.01, 0.004], [0.004, 0.04]])}):
        observations = ObservationModel.from_arrays(y, **errors)
        support = Support.of(None, None, 3, ["x1", "x2", "x3"])
        posterior = log_posterior(ensemble.fn, observations, flat_prior(), support, members=ensemble.member_fn)
        x = np.array([[0.1, 0.5, -0.2], [0.3, -0.4, 0.6]])
        got = posterior.log_prob(tf.constant(x)).numpy()
        members = np.einsum("kmn,bn->kbm", WEIGHTS, x) + BIASES[:, None]
        c_obs = np.diag(errors["sigma"] ** 2) if "sigma" in errors else errors["cov"]
        expected = [stats.multivariate_normal(members[:, b].mean(axis=0),
                                              c_obs + np.diag(4 / 3 * members[:, b].var(axis=0, ddof=1))).logpdf(y)
                    for b in range(2)]
        np.testing.assert_allclose(got[1] - got[0], expected[1] - expected[0], rtol=1e-6)  # float32 weights
