"""Posterior sampling (sensitivity.analyses.posterior) against closed-form posteriors.

Each posterior below has known moments: a linear-Gaussian model with a Gaussian prior (conjugate), a
correlated 2-D Gaussian through a full observation covariance, a banana-shaped (Rosenbrock-type)
density, and a bounded / log-parameter posterior whose moments follow from scipy's truncated normal and
numerical integration of a lognormal. Means are checked within 4 Monte Carlo standard errors (MCSE from
the chains' ESS), standard deviations within 10 %.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import yaml
from scipy import integrate, stats

from sensitivity.analyses.calibration import ObservationModel
from sensitivity.analyses.posterior import (NUTS, PosteriorError, PosteriorWarning, Sampling, diagnose, flat_prior,
                                            gaussian_prior, initial_points, sample_posterior, space_prior)
from sensitivity.analyses.posterior.density import Support
from sensitivity.analyses.posterior.summary import summary
from sensitivity.datasets import write_atomic
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from tests.helpers.cf import cf_errors
from workflows.init import FILES

tf = pytest.importorskip("tensorflow")
tfp = pytest.importorskip("tensorflow_probability")

SAMPLER = NUTS(num_draws=1000, num_warmup=400)


def labels(names, units=None):
    """A space that only names the parameters: the calls give their support as ``bounds``."""
    return ParameterSpace.from_records([{"name": n, "units": u, "low": -1.0, "high": 1.0}
                                        for n, u in zip(names, units or ["1"] * len(names))])


def unbounded(n):
    """``[n, 2]`` bounds of an unbounded support."""
    return np.tile([-np.inf, np.inf], (n, 1))


def _check_moments(ds, mean, std, k=4.0, rtol=0.10):
    assert int(ds["converged"]) == 1, ds.attrs["diagnostics"]
    got_mean, got_std, mcse = ds["posterior_mean"].values, ds["posterior_std"].values, ds["mcse_mean"].values
    assert np.all(np.abs(got_mean - mean) < k * mcse), (got_mean, mean, mcse)
    np.testing.assert_allclose(got_std, std, rtol=rtol)


@pytest.mark.parametrize("algorithm, groups", [("nuts", 1), ("chees", 1), ("snaper", 1), ("nuts", 2)])
def test_linear_gaussian_conjugate_posterior(tmp_path, algorithm, groups):
    """With ``chain_groups=2``, 5 chains advance as groups of 3 and 2 in two threads: the same posterior."""
    rng = np.random.default_rng(1)
    n, m = 3, 20
    a = rng.normal(size=(m, n))
    sigma = rng.uniform(0.5, 1.5, m)
    y = a @ np.array([1.0, -2.0, 0.5]) + sigma * rng.normal(size=m)
    mu_p, cov_p = np.zeros(n), np.diag([4.0, 1.0, 9.0])
    precision = a.T @ (a / sigma[:, None] ** 2) + np.linalg.inv(cov_p)
    cov = np.linalg.inv(precision)
    mean = cov @ (a.T @ (y / sigma**2) + np.linalg.solve(cov_p, mu_p))
    model = lambda x: tf.matmul(x, tf.constant(a.T))  # noqa: E731
    obs = ObservationModel.from_arrays(y, sigma=sigma)
    chains = 4 if groups == 1 else 5
    start = initial_points(mean[None], mean, cov, Support.of(None, None, n, list("abc")), chains, seed=0)
    sampler = NUTS(num_draws=1000, num_warmup=400, algorithm=algorithm, chain_groups=groups)
    ds = sample_posterior(model, obs, Sampling(sampler=sampler), prior=gaussian_prior(mu_p, cov_p), initial=start,
                          space=labels(list("abc"), ["1", "m", "s"]), bounds=unbounded(3), laplace_mean=mean,
                          laplace_cov=cov, seed=3)
    _check_moments(ds, mean, np.sqrt(np.diag(cov)))
    assert ds["draws"].dims == ("chain", "draw", "parameter") and ds.sizes["chain"] == chains
    assert len({tuple(ds["draws"].values[c, -1]) for c in range(chains)}) == chains  # every chain its own path
    np.testing.assert_allclose(ds["laplace_covariance"].values, cov)
    assert ds["posterior_mean"].attrs["units_coordinate"] == "parameter_units"
    assert cf_errors(write_atomic(ds, tmp_path / "posterior.nc")) == []


@pytest.mark.slow
def test_correlated_gaussian_through_full_observation_covariance():
    y, cov = np.array([1.0, -1.0]), np.array([[1.0, 0.9], [0.9, 1.0]])
    obs = ObservationModel.from_arrays(y, cov=cov)
    start = np.array([[0.0, 0.0], [2.0, -2.0], [1.0, 1.0], [-1.0, 0.0]])
    ds = sample_posterior(lambda x: x, obs, Sampling(sampler=SAMPLER), prior=flat_prior(), initial=start,
                          space=labels(["u", "v"], ["1", "1"]), bounds=unbounded(2), seed=0)
    _check_moments(ds, y, np.ones(2))
    corr = ds["posterior_covariance"].values[0, 1] / np.prod(ds["posterior_std"].values)
    assert abs(corr - 0.9) < 0.03


@pytest.mark.slow
def test_banana_posterior_moments():
    """log p = -x1^2 / 2 - (x2 - b x1^2)^2 / 2 (Rosenbrock-type): x1 ~ N(0, 1), x2 | x1 ~ N(b x1^2, 1), so
    E x2 = b and Var x2 = 1 + b^2 Var(x1^2) = 1 + 2 b^2."""
    b = 0.5
    obs = ObservationModel.from_arrays(np.zeros(2), sigma=1.0)
    model = lambda x: tf.stack([x[:, 0], x[:, 1] - b * x[:, 0] ** 2], axis=1)  # noqa: E731
    start = np.array([[0.0, 0.0], [1.0, 1.0], [-1.0, 1.0], [0.5, 2.0]])
    sampler = NUTS(num_draws=2000, num_warmup=500, target_accept=0.95)
    ds = sample_posterior(model, obs, Sampling(sampler=sampler), prior=flat_prior(), initial=start,
                          space=labels(["x1", "x2"]), bounds=unbounded(2), seed=1)
    _check_moments(ds, np.array([0.0, b]), np.array([1.0, np.sqrt(1.0 + 2.0 * b**2)]))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["nuts", "chees", "snaper"])
def test_bounds_and_log_parameter_change_of_variables(algorithm):
    """p ~ N(0.2, 0.5^2) truncated to [0, 1] (uniform prior, one observation); q: a lognormal prior
    (median 2, sigma_log 0.5) truncated to [0.5, 8], untouched by the data (its output is 0 q). The priors are
    the space's marginals (the original kinds `uniform` on the bounds and `lognormal`)."""
    obs = ObservationModel.from_arrays(np.array([0.2, 0.0]), sigma=np.array([0.5, 1.0]))
    model = lambda x: tf.stack([x[:, 0], 0.0 * x[:, 1]], axis=1)  # noqa: E731
    space = ParameterSpace.from_records([
        {"name": "p", "units": "1", "low": 0.0, "high": 1.0},
        {"name": "q", "units": "1", "low": 0.5, "high": 8.0,
         "distribution": {"kind": "lognormal", "median": 2.0, "sigma_log": 0.5}}])
    prior, bounds = space_prior(space), space.bounds
    start = np.array([[0.5, 2.0], [0.1, 1.0], [0.9, 4.0], [0.3, 3.0]])
    ds = sample_posterior(model, obs, Sampling(sampler=NUTS(num_draws=2000, num_warmup=400, algorithm=algorithm)),
                          prior=prior, initial=start, space=labels(["p", "q"]), bounds=bounds,
                          log_parameters=np.array([False, True]), seed=2)
    tn = stats.truncnorm((0.0 - 0.2) / 0.5, (1.0 - 0.2) / 0.5, loc=0.2, scale=0.5)
    ln = stats.lognorm(s=0.5, scale=2.0)
    mass = ln.cdf(8.0) - ln.cdf(0.5)
    m1 = integrate.quad(lambda q: q * ln.pdf(q), 0.5, 8.0)[0] / mass
    m2 = integrate.quad(lambda q: q * q * ln.pdf(q), 0.5, 8.0)[0] / mass
    _check_moments(ds, np.array([tn.mean(), m1]), np.array([tn.std(), np.sqrt(m2 - m1**2)]))
    assert ds["draws"].values[..., 0].min() > 0 and ds["draws"].values[..., 0].max() < 1


@pytest.mark.slow
def test_space_prior_of_truncated_scipy_families():
    """The space `sensitivity init` writes (a uniform, b normal truncated below at 0.5, c Gumbel truncated to
    [0, 6]) as prior and three observed outputs (a + b^2 c, b, c - a): NUTS's moments against those of a
    Gauss-Legendre quadrature (60 nodes per parameter) of the posterior on the space's bounds."""
    space = ParameterSpace.from_records(yaml.safe_load(FILES["conf/space/study.yaml"])["parameters"])
    y, sigma = np.array([2.6, 1.1, 1.6]), np.array([0.3, 0.2, 0.4])
    outputs = lambda a, b, c: [a + b**2 * c, b, c - a]  # noqa: E731
    model = lambda x: tf.stack(outputs(*tf.unstack(x, axis=1)), axis=1)  # noqa: E731
    nodes, weights = np.polynomial.legendre.leggauss(60)
    grid = [0.5 * (lo + hi) + 0.5 * (hi - lo) * nodes for lo, hi in space.bounds]
    a, b, c = np.meshgrid(*grid, indexing="ij")
    log_w = stats.norm(1.0, 0.2).logpdf(b) + stats.gumbel_r(2.0, 0.5).logpdf(c) - 0.5 * sum(
        ((f - yi) / si) ** 2 for f, yi, si in zip(outputs(a, b, c), y, sigma))
    w = np.exp(log_w - log_w.max()) * np.einsum("i,j,k->ijk", weights, weights, weights)
    w /= w.sum()
    mean = np.array([(w * v).sum() for v in (a, b, c)])
    std = np.array([np.sqrt((w * (v - m) ** 2).sum()) for v, m in zip((a, b, c), mean)])
    start = np.array([[0.3, 1.0, 2.0], [0.7, 1.2, 1.5], [0.5, 0.9, 2.5], [0.2, 1.1, 1.8]])
    ds = sample_posterior(model, ObservationModel.from_arrays(y, sigma=sigma), Sampling(sampler=SAMPLER),
                          prior=space_prior(space), initial=start, space=space, seed=4)
    _check_moments(ds, mean, std)
    assert "gumbel_r(loc=2, scale=0.5) truncated to [0, 6]" in ds.attrs["prior"]


def _counted_groups_run(fail=None):
    """A 2-D Gaussian posterior in 2 groups of 2 chains whose compiled block function counts its calls and,
    with ``fail(seed_tag, calls)`` true, raises in that call: ``(posterior, start, calls)``."""
    from sensitivity.analyses.posterior import log_posterior, run_nuts

    obs = ObservationModel.from_arrays(np.zeros(2), sigma=np.ones(2))
    posterior = log_posterior(lambda x: x, obs, gaussian_prior(np.zeros(2), np.eye(2)),
                              Support.of(None, None, 2, ["a", "b"]))
    start = np.array([[0.1, 0.2], [0.2, -0.1], [-0.3, 0.0], [0.0, 0.3]])
    run_nuts(posterior, start, NUTS(num_warmup=0, num_draws=100, chain_groups=2))  # compiles blocks of 100
    (key, (bootstrap, advance)), = [(k, f) for k, f in posterior.compiled.items() if k[0] == "block"]
    calls = []

    def counted(*args):
        calls.append(1)
        if fail is not None and fail(int(args[-1].numpy()[1]), len(calls)):
            raise ValueError("the model failed in group 1")
        return advance(*args)

    posterior.compiled[key] = bootstrap, counted
    return posterior, start, calls


def test_progress_counts_every_chain_transition_of_both_windows_and_groups():
    """4 chains in 2 groups, 100 warm-up (two windows: the metric is re-estimated halfway) + 60 draws: the progress
    callback, called from the groups' threads once per compiled block, adds up to 4 x 160 transitions, each call a
    whole block of a group's chains."""
    from sensitivity.analyses.posterior import log_posterior, run_nuts

    obs = ObservationModel.from_arrays(np.zeros(2), sigma=np.ones(2))
    posterior = log_posterior(lambda x: x, obs, gaussian_prior(np.zeros(2), np.eye(2)),
                              Support.of(None, None, 2, ["a", "b"]))
    start = np.array([[0.1, 0.2], [0.2, -0.1], [-0.3, 0.0], [0.0, 0.3]])
    counted = []
    chains = run_nuts(posterior, start, NUTS(num_warmup=100, num_draws=60, chain_groups=2), progress=counted.append)
    assert chains.draws.shape == (4, 60, 2) and sum(counted) == 4 * 160
    assert len(set(counted)) == 1 and counted[0] % 2 == 0  # every call: one block of a group's 2 chains


def test_an_interrupt_stops_every_chain_group_at_its_next_block():
    """Ctrl-C during a run in 2 groups is raised in the caller at once, and each group's thread ends at its next
    block of transitions instead of running on through its window (4,000 blocks each here)."""
    import os
    import signal
    import threading

    from sensitivity.analyses.posterior import run_nuts

    posterior, start, calls = _counted_groups_run()
    at_interrupt = []

    def interrupt():
        at_interrupt.append(len(calls))
        os.kill(os.getpid(), signal.SIGINT)  # to the process, as Ctrl-C

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # pytest-xdist's workers ignore SIGINT
    timer = threading.Timer(2.0, interrupt)
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            run_nuts(posterior, start, NUTS(num_warmup=0, num_draws=400_000, chain_groups=2))
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert at_interrupt[0] > 0 and len(calls) - at_interrupt[0] <= 2  # at most the block each group was in
    assert [t.name for t in threading.enumerate() if t.name.startswith("nuts")] == []


def test_a_failing_chain_group_raises_its_own_error_and_stops_the_other():
    from sensitivity.analyses.posterior import run_nuts

    posterior, start, calls = _counted_groups_run(fail=lambda tag, n: tag >= 1 << 24 and n > 20)  # group 1
    with pytest.raises(ValueError, match="the model failed in group 1"):
        run_nuts(posterior, start, NUTS(num_warmup=0, num_draws=400_000, chain_groups=2))
    assert len(calls) < 40  # the other group stopped at its next block, not after its 4,000


@pytest.mark.parametrize("algorithm", ["chees", "snaper"])
def test_chain_groups_need_nuts(algorithm):
    with pytest.raises(ConfigError, match=f"`chain_groups` = 2 needs algorithm 'nuts', got '{algorithm}'"):
        NUTS(algorithm=algorithm, chain_groups=2)
    with pytest.raises(ConfigError, match="`chain_groups` must be an integer >= 1, got 0"):
        NUTS(chain_groups=0)


def test_improper_flat_posterior_is_refused():
    """y = a + b observes only the sum: with a flat prior and no bounds the posterior is improper."""
    obs = ObservationModel.from_arrays(np.array([1.0]), sigma=0.1)
    model = lambda x: tf.reduce_sum(x, axis=1, keepdims=True)  # noqa: E731
    with pytest.raises(PosteriorError, match=r"improper posterior.*\['a', 'b'\]"):
        sample_posterior(model, obs, Sampling(sampler=SAMPLER), prior=flat_prior(),
                         initial=np.array([[0.5, 0.5], [0.0, 1.0]]), space=labels(["a", "b"]), bounds=unbounded(2))


@pytest.mark.slow
def test_chains_that_do_not_mix_are_reported():
    """Two well-separated modes (y = x^2 observed near 4, x = +-2): chains started in either mode stay
    there, R-hat is far above 1.1 and the run raises; with throw=False it warns and flags the dataset."""
    obs = ObservationModel.from_arrays(np.array([4.0]), sigma=0.05)
    model = lambda x: x**2  # noqa: E731
    start = np.array([[2.0], [-2.0], [2.1], [-2.1]])
    prior = gaussian_prior(np.zeros(1), np.eye(1) * 100.0)
    sampler = NUTS(num_draws=100, num_warmup=50)
    with pytest.raises(PosteriorError, match="do not mix"):
        sample_posterior(model, obs, Sampling(sampler=sampler), prior=prior, initial=start, space=labels(["x"]),
                         bounds=unbounded(1))
    with pytest.warns(PosteriorWarning, match="R-hat"):
        ds = sample_posterior(model, obs, Sampling(sampler=sampler, throw=False), prior=prior, initial=start,
                              space=labels(["x"]), bounds=unbounded(1))
    assert int(ds["converged"]) == 0 and "R-hat" in ds.attrs["diagnostics"]
    assert "longer chains (nuts.num_draws)" in ds.attrs["diagnostics"]  # the remedy, with its config key


def _synthetic_run(monkeypatch, draws, log_density):
    """Have :func:`sample_posterior` diagnose these chains in place of running NUTS; returns its call of a 2-D
    standard-normal problem (the density is built, the sampler is not run)."""
    from sensitivity.analyses.posterior import driver
    from sensitivity.analyses.posterior.nuts import Chains

    c, d, _ = draws.shape
    fake = Chains(draws, log_density, np.full((c, d), 0.8), np.zeros((c, d), bool), np.zeros((c, d), bool),
                  np.full((c, d), 3), 0.5, 0.0, 0.1)
    monkeypatch.setattr(driver, "run_nuts", lambda *args, **kwargs: fake)
    obs = ObservationModel.from_arrays(np.zeros(2), sigma=np.ones(2))

    def run(throw):
        return sample_posterior(lambda x: x, obs, Sampling(throw=throw), prior=flat_prior(), initial=draws[:, 0],
                                space=labels(["a", "b"]), bounds=np.tile([-50.0, 50.0], (2, 1)))
    return run


def _normal_chains(c, d, shift=0.0, seed=0):
    """``c`` chains of iid standard-normal draws in 2-D (chain k shifted by ``k shift`` in both), and their
    log density ``-|x|^2 / 2``."""
    x = np.random.default_rng(seed).standard_normal((c, d, 2)) + shift * np.arange(c)[:, None, None]
    return x, -0.5 * np.sum(x**2, axis=2)


@pytest.mark.parametrize("how", ["far", "still", "most"])
def test_a_stuck_chain_is_named_left_out_and_gets_its_own_advice(monkeypatch, how):
    """Chains of a standard normal and one far off (at (39, 39): log density -1521 against -1, as an LV chain
    started on a bound), one that never moved, or three of four far off at different places (the median chain is
    stuck: the best chain is the reference, and its halves are the two chains of R-hat): throw=True names chain 2 with its log density or its stillness and its
    start, and blames a far mode or bound, not the warm-up; throw=False keeps the others, whose moments (numpy, of
    those draws alone) are the summaries, records which chains were kept and does not converge."""
    draws, log_density = _normal_chains(4, 400)
    stuck = [1, 2, 3] if how == "most" else [2]
    for c in stuck:
        draws[c] = 0.3 if how == "still" else 39.0 + 5.0 * abs(c - 2) + 0.01 * draws[c]
        log_density[c] = -0.5 * np.sum(draws[c] ** 2, axis=1)
    run = _synthetic_run(monkeypatch, draws, log_density)
    what = r"never moved \(on 0% of its transitions\)" if how == "still" else \
        r"stuck at mean log density -1521 \(the kept chains' median -[01]\.\d+, more than " \
        + f"{stats.chi2.ppf(0.999, 2) / 2:.3g}" + r" above\)"  # the 99.9 % quantile of chi2_2, halved
    with pytest.raises(PosteriorError, match=r"chain 2 " + what + r", started at \(a .*: a chain far below the "
                                             r"others sits in a far mode or on a bound") as error:
        run(True)
    assert [f"chain {c} " in str(error.value) for c in range(len(draws))] == [c in stuck for c in range(len(draws))]
    with pytest.warns(PosteriorWarning, match="chain 2 "):
        ds = run(False)
    kept = np.delete(draws, stuck, axis=0).reshape(-1, 2)
    np.testing.assert_array_equal(ds["chain_kept"].values, [int(c not in stuck) for c in range(len(draws))])
    np.testing.assert_allclose(ds["posterior_mean"].values, kept.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(ds["posterior_std"].values, kept.std(axis=0, ddof=1), rtol=1e-12)
    assert np.all(ds["rhat"].values < 1.01) and ds.attrs["diagnostics"].startswith(f"chain {stuck[0]} ")
    assert int(ds["converged"]) == 0 and "warm-up" not in ds.attrs["diagnostics"]
    facts = {f.label: f.value for f in summary(ds).facts}
    assert facts["chains x draws"].endswith(f"{', '.join(map(str, stuck))} stuck, left out of the estimates)")


def test_chains_that_all_mix_but_disagree_get_the_warm_up_advice(monkeypatch):
    """Four standard-normal chains shifted by 0.4 each: every one reaches the same log density within a unit (none
    stuck), R-hat is far above 1.1: the advice is more warm-up and draws, and no chain is named or left out."""
    draws, log_density = _normal_chains(4, 400, shift=0.4)
    run = _synthetic_run(monkeypatch, draws, log_density)
    with pytest.raises(PosteriorError, match=r"do not mix: R-hat > 1.1 .*every chain reaches the same log density "
                                             r".*none stuck\): more warm-up \(nuts.num_warmup\)") as error:
        run(True)
    assert "chain " not in str(error.value).replace("every chain", "")
    with pytest.warns(PosteriorWarning, match="R-hat"):
        ds = run(False)
    np.testing.assert_array_equal(ds["chain_kept"].values, [1, 1, 1, 1])
    assert "stuck" not in ds.attrs["diagnostics"] and "longer a warm-up" not in ds.attrs["diagnostics"]


def test_diagnostics_on_autoregressive_chains():
    """AR(1) chains x_t = rho x_{t-1} + e_t have ESS = N (1 - rho) / (1 + rho) and R-hat 1; a shifted chain
    gives R-hat >> 1."""
    rng = np.random.default_rng(0)
    rho, c, d = 0.5, 4, 5000
    e = rng.normal(size=(c, d, 2)) * np.sqrt(1 - rho**2)
    x = np.empty_like(e)
    x[:, 0] = rng.normal(size=(c, 2))
    for t in range(1, d):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    diag = diagnose(x)
    expected = c * d * (1 - rho) / (1 + rho)
    assert np.all(np.abs(diag.rhat - 1) < 0.01)
    np.testing.assert_allclose(diag.ess_bulk, expected, rtol=0.15)
    np.testing.assert_allclose(diag.ess_mean, expected, rtol=0.15)
    assert np.all(diag.ess_tail > 0.3 * expected)
    x[0] += 3.0
    assert np.all(diagnose(x).rhat > 1.5)


@pytest.mark.slow
@pytest.mark.parametrize("draws", [7, 500, 1001])
def test_effective_sample_size_is_tfps_estimator(draws):
    """The vectorised numpy ESS against TFP's ``effective_sample_size`` (Geyer's initial positive sequence,
    multi-chain, on the split chains) as an independent oracle: AR(1) chains of odd and even lengths with
    shifted chain means, trailing dims, blocks smaller than the entries, indicators, a constant series."""
    from sensitivity.analyses.posterior.diagnostics import effective_sample_size

    rng = np.random.default_rng(draws)
    c = 4
    x = np.empty((c, draws, 3, 5))
    x[:, 0] = rng.normal(size=(c, 3, 5))
    for t in range(1, draws):
        x[:, t] = np.linspace(-0.5, 0.9, 5) * x[:, t - 1] + rng.normal(size=(c, 3, 5))
    x += 0.1 * np.arange(c)[:, None, None, None]
    x[..., 0, 0] = 1.5  # a constant series
    indicators = x > 0.2
    half = draws // 2
    for series, block in ((x, 2**10), (x, 2**26), (indicators, 2**12)):
        split = np.concatenate([series[:, :half], series[:, draws - half:]]).astype(float)
        with np.errstate(invalid="ignore"):
            expected = np.asarray(tfp.mcmc.effective_sample_size(np.swapaxes(split, 0, 1), cross_chain_dims=1,
                                                                 filter_beyond_positive_pairs=True))
        np.testing.assert_allclose(effective_sample_size(series, block), np.where(np.isfinite(expected), expected, 0),
                                   rtol=1e-10, atol=1e-10)


def test_demo_posterior_quantiles_match_emcee():
    """The demo SEIR posterior (space prior, bounds, a log parameter): NUTS and emcee's affine-invariant
    ensemble, both on the same compiled log-density, give the same 5/50/95 % quantiles. Compared on the
    probability scale: emcee's CDF at NUTS's quantile q_p must be p within 4 standard errors
    sqrt(p (1 - p) (1 / ESS_nuts + 1 / ESS_emcee))."""
    emcee = pytest.importorskip("emcee")
    from sensitivity import load_surrogate
    from sensitivity.analyses.calibration import BatchedModel, Fit, calibrate
    from sensitivity.analyses.posterior import Support, log_posterior
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.analyses.calibration.observations import read_observations
    from sensitivity.simulators.seir import output_spec
    from sensitivity.simulators.seir import space as seir_space
    from tests.helpers import ROOT

    space = seir_space()
    surrogate = load_surrogate(ROOT / "data/seir/surrogate.keras", input_names=space.names,
                               input_units=space.units, output=output_spec(), dtype="float64")
    obs = read_observations(ROOT / "data/seir/observations.nc", surrogate.output)
    log_mask = np.array([p.scale == "log" for p in space.parameters])
    engine = compile_jacobian(surrogate)
    fit = calibrate(BatchedModel(value_and_jacobian=engine.flat_value_and_jacobian),
                    ObservationModel.from_arrays(obs.values, **obs.errors()), Fit(record_history=False),
                    starts=space.nominal, bounds=space.bounds, log_parameters=log_mask)
    mean, cov = fit["estimate"].values[0], fit["covariance"].values[0]
    observations = ObservationModel.from_arrays(obs.values, **obs.errors())
    support = Support.of(space.bounds, log_mask, len(space), space.names)
    start = initial_points(mean[None], mean, cov, support, 8, seed=0)
    settings = Sampling(sampler=NUTS(num_draws=2500, num_warmup=400, target_accept=0.97), throw=False)  # the default
    ds = sample_posterior(surrogate.fn, observations, settings, prior=space_prior(space), initial=start,  # study's
                          space=space, log_parameters=log_mask, laplace_mean=mean, laplace_cov=cov, seed=0)
    assert int(ds["converged"]) == 1, ds.attrs["diagnostics"]  # R-hat < 1.01, ESS > 400, no divergence

    post = log_posterior(surrogate.fn, observations, space_prior(space), support)
    log_prob = tf.function(post.log_prob, jit_compile=True)
    # flat priors: no draw beats the best fit (the calibration's estimate is the mode, on a bound)
    assert float(ds["log_density"].max()) <= float(post.log_prob(tf.constant(mean[None]))[0]) + 1e-9
    walkers, steps, burn = 32, 6000, 1000
    np.random.seed(1)  # emcee draws its moves from numpy's global generator
    sampler = emcee.EnsembleSampler(walkers, len(space), lambda x: log_prob(tf.constant(x)).numpy(), vectorize=True)
    rng = np.random.default_rng(1)
    sampler.run_mcmc(ds["draws"].values.reshape(-1, len(space))[rng.choice(8 * 2500, walkers, replace=False)], steps)
    chain = sampler.get_chain(discard=burn)
    flat = chain.reshape(-1, len(space))
    ess_emcee = flat.shape[0] / sampler.get_autocorr_time(discard=burn, quiet=True)
    p = np.array([0.05, 0.5, 0.95])
    q_nuts = ds["posterior_quantile"].sel(quantile=p).values  # [3, n]
    cdf = (flat[None, :, :] <= q_nuts[:, None, :]).mean(axis=1)
    ess_nuts = np.minimum(ds["ess_bulk"].values, ds["ess_tail"].values)
    se = np.sqrt(p[:, None] * (1 - p[:, None]) * (1 / ess_nuts + 1 / ess_emcee))
    assert np.all(np.abs(cdf - p[:, None]) < 4 * se), (cdf, se)


@pytest.mark.slow
def test_demo_calibration_estimate_is_the_posterior_mode():
    """With the space's uniform priors the demo posterior is the likelihood on the box, so its mode is the best
    fit. Independent reference: scipy's bounded least squares from 16 Sobol' starts, on numpy residuals of the
    surrogate's values against the observations file read directly (`observed`, `sigma`, days without data
    dropped). The calibration's estimate (infectious_period on its upper bound 6 day) is that global minimum,
    and the library's log-posterior is -cost + const inside the box at the estimate and at random points: a
    posterior whose bulk sits inside the box (mean infectious_period about 5) is the volume of a weakly
    identified ridge, not a better fit (README "Posterior sampling")."""
    import xarray as xr
    from scipy import optimize
    from scipy.stats import qmc

    from sensitivity import load_surrogate
    from sensitivity.analyses.calibration import BatchedModel, Fit, calibrate
    from sensitivity.analyses.posterior import Support, log_posterior
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.analyses.calibration.observations import read_observations
    from sensitivity.simulators.seir import output_spec
    from sensitivity.simulators.seir import space as seir_space
    from tests.helpers import ROOT

    space = seir_space()
    surrogate = load_surrogate(ROOT / "data/seir/surrogate.keras", input_names=space.names,
                               input_units=space.units, output=output_spec(), dtype="float64")
    raw = xr.open_dataset(ROOT / "data/seir/observations.nc")
    y, sigma = raw["observed"].values.astype(float), raw["sigma"].values.astype(float)
    seen = np.isfinite(y)

    def residuals(x):
        return (np.asarray(surrogate.fn(np.atleast_2d(x))).reshape(-1, y.size)[:, seen] - y[seen]) / sigma[seen]

    lo, hi = space.bounds.T
    starts = qmc.scale(qmc.Sobol(len(space), seed=3).random(16), lo, hi)
    best = min((optimize.least_squares(lambda x: residuals(x)[0], s, bounds=(lo, hi), x_scale="jac", xtol=1e-12,
                                       ftol=1e-12, gtol=1e-10) for s in starts), key=lambda r: r.cost)

    obs = read_observations(ROOT / "data/seir/observations.nc", surrogate.output)
    log_mask = np.array([p.scale == "log" for p in space.parameters])
    fit = calibrate(BatchedModel(value_and_jacobian=compile_jacobian(surrogate).flat_value_and_jacobian),
                    ObservationModel.from_arrays(obs.values, **obs.errors()), Fit(record_history=False),
                    starts=space.nominal, bounds=space.bounds, log_parameters=log_mask)
    estimate, cost = fit["estimate"].values[0], float(fit["cost"].values[0])
    np.testing.assert_allclose(cost, best.cost, rtol=1e-6)
    np.testing.assert_allclose(estimate, best.x, rtol=1e-3)
    assert estimate[space.names.index("infectious_period")] == pytest.approx(6.0)

    post = log_posterior(surrogate.fn, ObservationModel.from_arrays(obs.values, **obs.errors()), space_prior(space),
                         Support.of(space.bounds, log_mask, len(space), space.names))
    points = np.vstack([estimate, qmc.scale(qmc.Sobol(len(space), seed=4).random(32), lo, hi)])
    log_density = post.log_prob(tf.constant(points)).numpy()
    expected = -0.5 * (residuals(points) ** 2).sum(axis=1)
    np.testing.assert_allclose(log_density - log_density[0], expected - expected[0], rtol=1e-9, atol=1e-8)
    assert np.all(log_density[1:] < log_density[0])


def test_float32_model_inside_the_float64_density():
    """``model_dtype="float32"``: the model computes in float32, the density in float64. Reference: the same
    linear model in float64 (closed-form residuals); the log-density differs only by float32 rounding of the
    model's outputs, and a bad dtype is refused."""
    from sensitivity.analyses.posterior import log_posterior
    from sensitivity.errors import ConfigError

    rng = np.random.default_rng(3)
    a, y = rng.normal(size=(40, 3)), rng.normal(size=40)
    observations = ObservationModel.from_arrays(y, sigma=0.1)
    support = Support.of(None, None, 3, ["a", "b", "c"])
    model = lambda x: tf.linalg.matvec(tf.constant(a, x.dtype)[None], x[:, None, :])  # noqa: E731 - [B, 40]
    x = rng.normal(size=(16, 3))
    lp32 = log_posterior(model, observations, flat_prior(), support, model_dtype="float32").log_prob(tf.constant(x))
    assert lp32.dtype == tf.float64
    expected = -0.5 * (((x @ a.T - y) / 0.1) ** 2).sum(axis=1)
    np.testing.assert_allclose(lp32.numpy(), expected, rtol=1e-5)
    with pytest.raises(ConfigError, match="`model_dtype` must be"):
        log_posterior(model, observations, flat_prior(), support, model_dtype="float16")


def test_starts_without_a_covariance_are_uniform_over_the_bounds():
    """A rank-deficient calibration has no covariance: after the minima, the starts are uniform over the box
    (in log x for a log parameter), by Kolmogorov-Smirnov against scipy's uniform and log-uniform; a parameter
    without finite bounds is refused."""
    support = Support.of(np.array([[0.0, 2.0], [0.01, 100.0]]), np.array([False, True]), 2, ["a", "k"])
    starts = initial_points(np.array([[1.0, 1.0]]), np.array([1.0, 1.0]), None, support, 2001, seed=4)
    np.testing.assert_array_equal(starts[0], [1.0, 1.0])
    assert support.inside(starts).all()
    assert stats.kstest(starts[1:, 0], stats.uniform(0.0, 2.0).cdf).pvalue > 1e-3
    assert stats.kstest(starts[1:, 1], stats.loguniform(0.01, 100.0).cdf).pvalue > 1e-3
    negative = Support.of(np.array([[-2.0, -0.5], [0.01, 100.0]]), np.array([False, True]), 2, ["aerosol", "k"])
    with warnings.catch_warnings():  # a linear parameter below zero: no log of it, and no RuntimeWarning
        warnings.simplefilter("error")
        starts = initial_points(np.array([[-1.0, 1.0]]), np.array([1.0, 1.0]), None, negative, 200, seed=4)
    assert negative.inside(starts).all()
    open_side = Support.of(np.array([[0.0, 2.0], [-np.inf, 1.0]]), None, 2, ["a", "b"])
    with pytest.raises(ConfigError, match="parameter 1 has no finite bounds"):
        initial_points(np.array([[1.0, 0.0]]), np.array([1.0, 0.0]), None, open_side, 3)


@pytest.mark.slow
def test_lotka_volterra_starts_only_at_minima_and_its_posterior_is_the_laplace_one():
    """Issue 58's case: four rates of a predator-prey model, two species over 31 days, noisy synthetic data. From
    16 Sobol' starts most fits end held on a bound at a cost hundreds of units above the best: the calibration
    rejects them (its cost within chi2.ppf(0.999, 4) / 2 = 9.2 of the best is a minimum, no minimum on a bound)
    and its best fit is scipy's least_squares from the truth. The posterior's chains start at the minima and Laplace
    draws only, none is stuck, and with flat priors on a well-identified problem (standard errors ~5 %) the
    posterior is the Laplace approximation (Gauss-Newton covariance at the best fit): means within a fifth of a
    standard error plus 4 MCSE, standard deviations within 15 %; the true rates within 4 posterior sd."""
    from scipy import optimize
    from scipy.stats import qmc

    from sensitivity.analyses.calibration import BatchedModel, Fit, calibrate
    from sensitivity.analyses.calibration.statistics import minimum_points
    from tests.helpers import lotka_volterra as lv

    x, step = lv.TRUE_RATES, 1e-6 * np.diag(lv.TRUE_RATES)  # the helper's Jacobian: central differences
    central = (lv.value_and_jacobian(x + step)[0] - lv.value_and_jacobian(x - step)[0]).T / (2e-6 * x)
    np.testing.assert_allclose(lv.value_and_jacobian(x[None])[1][0], central, rtol=1e-6, atol=1e-6)
    y, sigma = lv.observations()
    obs = ObservationModel.from_arrays(y.ravel(), sigma=sigma.ravel())
    space = lv.space()
    lo, hi = lv.BOUNDS.T
    starts = np.vstack([space.nominal, qmc.scale(qmc.Sobol(4, seed=0).random(16), lo, hi)])
    fit = calibrate(BatchedModel(value_and_jacobian=lv.value_and_jacobian), obs, Fit(record_history=False),
                    starts=starts, space=space)
    reference = optimize.least_squares(lambda x: (lv.value_and_jacobian(x[None])[0][0] - y.ravel()) / sigma.ravel(),
                                       lv.TRUE_RATES, jac=lambda x: lv.value_and_jacobian(x[None])[1][0]
                                       / sigma.ravel()[:, None], xtol=1e-14, ftol=1e-14, gtol=1e-14)
    best = int(fit["best_start"])
    cost, label = fit["cost"].values, fit["minimum"].values
    np.testing.assert_allclose(cost[best], reference.cost, rtol=1e-9)
    np.testing.assert_allclose(fit["estimate"].values[best], reference.x, rtol=1e-6)
    bound = stats.chi2.ppf(0.999, 4) / 2
    assert np.all(cost[label >= 0] <= cost[best] + bound) and np.all(cost[label == -2] > cost[best] + bound)
    assert int(fit["n_rejected"]) >= 4 and not fit["at_bound"].values[label >= 0].any()
    rejected = fit["estimate"].values[label == -2]

    mean, cov = fit["estimate"].values[best], fit["covariance"].values[best]
    minima = minimum_points(fit["estimate"].values, cost, label)
    start = initial_points(minima, mean, cov, Support.of(space.bounds, None, 4, space.names), 4, seed=0)
    assert not any(np.allclose(s, r) for s in start for r in rejected)
    ds = sample_posterior(lv.lotka_volterra, obs, Sampling(sampler=NUTS(num_draws=400, num_warmup=300)),
                          prior=flat_prior(), initial=start, space=space, laplace_mean=mean, laplace_cov=cov, seed=1)
    assert (ds["chain_kept"].values == 1).all(), ds.attrs["diagnostics"]
    se = np.sqrt(np.diag(cov))
    got, sd, mcse = ds["posterior_mean"].values, ds["posterior_std"].values, ds["mcse_mean"].values
    assert np.all(np.abs(got - mean) < 0.2 * se + 4 * mcse), ((got - mean) / se, mcse / se)
    np.testing.assert_allclose(sd, se, rtol=0.15)
    assert np.all(np.abs(got - lv.TRUE_RATES) < 4 * sd), (got - lv.TRUE_RATES) / sd
