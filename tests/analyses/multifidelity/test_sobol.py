"""Multifidelity Sobol' indices of Ishigami against the closed forms, with a biased surrogate."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.multifidelity import MFSobol, sobol_indices
from sensitivity.errors import ConfigError, DataError
from tests.helpers.functions import ishigami, ishigami_indices

EXACT = ishigami_indices()
N_SIM, N_SUR, SEEDS = 256, 4096, 30


def design(rng: np.random.Generator, n: int, d: int = 3) -> np.ndarray:
    """An i.i.d. pick-freeze design in the project's layout: row blocks ``A, A_B^(1..d), B`` on [-pi, pi]^d."""
    a, b = rng.uniform(-np.pi, np.pi, (2, n, d))
    swap = np.eye(d, dtype=bool)[None]
    return np.concatenate([a[:, None], np.where(swap, b[:, None], a[:, None]), b[:, None]], axis=1).reshape(-1, d)


def surrogate(x: np.ndarray, error: float = 1.0) -> np.ndarray:
    """Ishigami plus a smooth error that adds to the first input's main effect (R^2 ~ 0.97)."""
    return ishigami(x) + error * (np.cos(x[:, :1]) + 0.5 + 0.2 * np.sin(x[:, 1:2]) * x[:, 2:3] / np.pi)


def run(seed: int, resamples: int = 100, error: float = 1.0):
    x = design(np.random.default_rng(seed), N_SUR)
    return sobol_indices(ishigami(x[: N_SIM * 5]), surrogate(x, error), 3, MFSobol(n_resamples=resamples), seed=seed)


@pytest.fixture(scope="module")
def runs() -> list:
    return [run(seed) for seed in range(SEEDS)]


@pytest.mark.parametrize("key", ["S1", "ST"])
def test_indices_are_unbiased_where_the_surrogate_alone_is_not(runs, key):
    est = np.stack([getattr(r, key)[:, 0] for r in runs])
    sur = np.stack([r.surrogate_only[key][:, 0] for r in runs])
    se = est.std(axis=0, ddof=1) / np.sqrt(SEEDS)
    assert (np.abs(est.mean(axis=0) - EXACT[key]) < 3 * se).all()
    assert np.abs(sur.mean(axis=0) - EXACT[key]).max() > 3 * se.max()


def test_variance_is_unbiased(runs):
    est = np.array([r.variance[0] for r in runs])
    assert abs(est.mean() - EXACT["variance"]) < 3 * est.std(ddof=1) / np.sqrt(SEEDS)


def test_bootstrap_intervals_cover_at_about_their_level(runs):
    inside = [(getattr(r, f"{k}_interval")[:, 0, 0] <= EXACT[k]) & (EXACT[k] <= getattr(r, f"{k}_interval")[:, 0, 1])
              for r in runs for k in ("S1", "ST")]
    assert np.mean(inside) >= 0.87


def test_variance_reduction_against_simulator_only_pick_freeze(runs):
    """The spread over seeds, the bootstrap's measured ratio and the closed-form CV factor agree."""
    ratio = {}
    for key in ("S1", "ST"):
        mf = np.stack([getattr(r, key)[:, 0] for r in runs])
        alone = np.stack([r.simulator_only[key][:, 0] for r in runs])
        ratio[key] = mf.var(axis=0, ddof=1) / alone.var(axis=0, ddof=1)
        boot = np.mean([r.variance_ratio_bootstrap[key][:, 0] for r in runs], axis=0)
        # log of a ratio of two variances over 30 seeds: sd ~ 0.3 (S3's main effect is the noisiest)
        np.testing.assert_allclose(np.log(ratio[key]), np.log(boot), atol=0.9)
        assert (ratio[key] < 0.35).all()
    rho = np.mean([r.correlation["total"][:, 0] for r in runs], axis=0)
    closed = 1 - rho**2 * (N_SUR - N_SIM) / N_SUR
    np.testing.assert_allclose(np.mean([r.variance_ratio_formula["total"][:, 0] for r in runs], axis=0), closed,
                               rtol=0.05)
    # the total index is dominated by its numerator: its ratio is near the numerator's CV factor
    np.testing.assert_allclose(np.log(ratio["ST"]), np.log(closed), atol=0.9)


def test_a_perfect_surrogate_gives_the_surrogates_own_indices():
    r = run(5, resamples=0, error=0.0)
    for key in ("S1", "ST", "variance"):
        np.testing.assert_allclose(getattr(r, key), r.surrogate_only[key], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(r.alpha["main"], 1.0, rtol=1e-12)
    assert np.isnan(r.S1_interval).all()


def test_three_dimensional_blocks_and_the_flat_layout_agree():
    x = design(np.random.default_rng(2), 64)
    y0, y1 = ishigami(x[: 16 * 5]), surrogate(x)
    flat = sobol_indices(y0, y1, 3, MFSobol(n_resamples=0))
    blocks = sobol_indices(y0.reshape(16, 5, 1), y1.reshape(64, 5, 1), 3, MFSobol(n_resamples=0))
    np.testing.assert_array_equal(flat.S1, blocks.S1)


def test_bad_inputs_are_refused_with_one_line_naming_them():
    x = design(np.random.default_rng(0), 32)
    with pytest.raises(DataError, match="multiple of G \\+ 2 = 5"):
        sobol_indices(ishigami(x[:41]), surrogate(x), 3)
    with pytest.raises(DataError, match="`sur` must hold at least the 32 row blocks"):
        sobol_indices(ishigami(x), surrogate(x[:80]), 3)
    with pytest.raises(ConfigError, match="`n_resamples` must be an integer >= 10, got 5"):
        sobol_indices(ishigami(x), surrogate(x), 3, MFSobol(n_resamples=5))
    with pytest.raises(ConfigError, match="`n_factors` must be an integer >= 1, got 0"):
        sobol_indices(ishigami(x), surrogate(x), 0)
