"""The SEIR demo simulator against properties known in closed form."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from sensitivity.errors import ConfigError
from sensitivity.sweep.designs import make_grid
from sensitivity.simulators import seir

RNG = np.random.default_rng(11)


def random_points(n: int) -> np.ndarray:
    return make_grid(seir.space(), "random", n=n, seed=5).points()


def no_intervention(beta: float, infectious_period: float, i0: float, incubation_period: float = 3.0) -> np.ndarray:
    return np.array([beta, incubation_period, infectious_period, i0, 30.0, 0.0])


def test_population_is_conserved_and_cumulative_infections_leave_s():
    points = random_points(16)
    states = seir.trajectories(points, np.linspace(0.0, 300.0, 61))
    s, e, i, r, c = np.moveaxis(states, -1, 0)
    # S + E + I + R = 1 is a linear invariant, which Runge-Kutta methods keep to rounding error.
    np.testing.assert_allclose(s + e + i + r, 1.0, rtol=0, atol=1e-13)
    assert np.all(states[..., :4] > -1e-14)
    # Every new infection leaves S: C(t) = S(0) - S(t), again a linear invariant.
    np.testing.assert_allclose(c, s[:, :1] - s, rtol=0, atol=1e-13)


def test_daily_infections_sum_to_the_drop_in_susceptibles():
    points = random_points(8)
    daily = seir.simulate(points)
    s = seir.trajectories(points, np.array([0.0, seir.DAYS]))[..., 0]
    np.testing.assert_allclose(daily.sum(axis=1), seir.PER_100K * (s[:, 0] - s[:, 1]), rtol=1e-12)


@pytest.mark.parametrize("beta, infectious_period, i0", [(0.3, 5.0, 1e-4), (0.5, 5.0, 1e-5), (0.65, 6.0, 1e-3)])
def test_final_size_relation_without_intervention(beta, infectious_period, i0):
    """Kermack-McKendrick: ln(S0 / S_inf) = R0 (1 - S_inf), R0 = beta T_I, i.e. 1 - z = (1 - i0) exp(-R0 z);
    for i0 -> 0 this is the classic z = 1 - exp(-R0 z) (doi:10.1098/rspa.1927.0118)."""
    r0 = beta * infectious_period
    z = brentq(lambda z: 1.0 - z - (1.0 - i0) * np.exp(-r0 * z), i0, 1.0, xtol=1e-15)
    s_final = seir.trajectories(no_intervention(beta, infectious_period, i0)[None], np.array([0.0, 2000.0]))[0, -1, 0]
    # Integration tolerance 1e-10 relative; by day 2000 the residual epidemic is below 1e-30.
    assert 1.0 - s_final == pytest.approx(z, rel=1e-8)


def test_early_growth_rate_is_the_linearised_eigenvalue():
    """While S ~ 1, E and I grow like exp(r t) with r the positive root of (r + 1/T_E)(r + 1/T_I) = beta / T_E."""
    beta, t_e, t_i = 0.5, 3.0, 4.0
    sigma, gamma = 1 / t_e, 1 / t_i
    r = 0.5 * (-(sigma + gamma) + np.sqrt((sigma - gamma) ** 2 + 4 * beta * sigma))
    daily = seir.simulate(no_intervention(beta, t_i, 1e-9, t_e)[None])[0]
    # Days 40-60: the transient of the initial condition has decayed (by exp(-0.8 * 40)) and S > 1 - 1e-4.
    slope = np.log(daily[59] / daily[39]) / 20.0
    assert slope == pytest.approx(r, rel=1e-4)


def test_intervention_lowers_transmission_smoothly():
    points = np.tile(seir.space().nominal, (3, 1))
    points[1, 5] = 0.0  # no intervention
    points[2, 4] = 60.0  # a later one
    daily = seir.simulate(points)
    assert np.all(daily[0, 40:] < daily[1, 40:]) and np.all(daily[0, 45:70] < daily[2, 45:70])
    # Smooth in the intervention day: central differences with steps h and h/2 agree to O(h^2).
    h = 0.05
    shifted = np.tile(points[:1], (4, 1))
    shifted[:, 4] += np.array([h, -h, h / 2, -h / 2])
    y = seir.simulate(shifted)
    coarse, fine = (y[0] - y[1]) / (2 * h), (y[2] - y[3]) / h
    np.testing.assert_allclose(coarse, fine, rtol=1e-4, atol=1e-6 * np.abs(fine).max())


def test_a_batch_equals_its_points_integrated_alone():
    """The stacked integration tightens rtol by sqrt(components), so each point keeps its own tolerance."""
    points = random_points(40)
    together = seir.simulate(points)
    alone = np.concatenate([seir.simulate(points[k : k + 1]) for k in (0, 17, 39)])
    np.testing.assert_allclose(together[[0, 17, 39]], alone, rtol=1e-7)


def test_synthetic_observations_follow_the_documented_noise_model():
    truth = np.array(list(seir.TRUE_PARAMETERS.values()))
    clean, observed, sigma = seir.synthetic_observations(truth, relative_noise=0.1, floor=1.0, observed_days=70,
                                                         seed=3)
    np.testing.assert_allclose(clean, seir.simulate(truth[None])[0])
    np.testing.assert_allclose(sigma, 0.1 * clean + 1.0)
    assert np.all(np.isnan(observed[70:])) and np.all(np.isfinite(observed[:70]))
    eps = np.random.default_rng(3).standard_normal(seir.DAYS)[:70]
    np.testing.assert_allclose(observed[:70], clean[:70] + sigma[:70] * eps)


def test_space_and_output_match_the_configs(compose_config):
    from sensitivity.outputs.spec import OutputSpec
    from workflows.plumbing import build

    cfg = compose_config("sweep", ["experiment=seir"])
    space = build.space_from(cfg)
    assert space == seir.space()
    assert OutputSpec.from_dict(build.plain(cfg.model.output)) == seir.output_spec()
    assert list(space.names) == list(seir.NAMES)


@pytest.mark.parametrize("points, match", [
    (np.ones((2, 5)), r"shape \[N, 6\]"),
    (np.array([[0.4, 3.0, -4.0, 1e-4, 30.0, 0.2]]), "'infectious_period' must be finite"),
])
def test_bad_points_are_named(points, match):
    with pytest.raises(ConfigError, match=match):
        seir.simulate(points)
