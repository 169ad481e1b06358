"""Do the 95 % intervals of the Sobol' indices cover the closed forms, and are they as wide as the error is?

Over 64 seeds of Ishigami and the Sobol' G-function at N = 1024 (8 scramblings of 128), the share of
intervals that contain the exact S1 / ST must lie in [0.85, 0.99] and each index's mean half-width within
2.5x of 1.96 x its seed-to-seed standard deviation. Measured (`pytest -s` prints it): coverage 0.958-0.969,
width ratio 0.97-1.35 (a Student-t interval on 8 replicates is expected ~1.16x wider than a known-sigma
one). The bootstrap on one scrambling of the same N is 2.7-5.5x too wide on Ishigami (coverage 100 %):
it measures Monte Carlo, not QMC, error (issue 16).
"""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import sobol
from sensitivity.analyses.indices.intervals import IntervalPlan
from tests.helpers.functions import ishigami, ishigami_indices, sobol_g, sobol_g_indices, uniform_space

SEEDS, N, REPLICATES = 64, 1024, 8
G_A = (0.0, 1.0, 4.5, 9.0, 99.0, 99.0)
CASES = {
    "ishigami": (uniform_space(3, -np.pi, np.pi), ishigami, ishigami_indices()),
    "sobol_g": (uniform_space(6, 0.0, 1.0), lambda x: sobol_g(x, G_A), sobol_g_indices(G_A)),
}


def seed_study(case: str, intervals: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{index: (estimates [seeds, d], intervals [seeds, d, 2])}`` over the seeds."""
    space, model, _ = CASES[case]
    replicates = REPLICATES if intervals == "rqmc" else 1
    runs = [sobol.analyze(model(sobol.sample(space, N, seed=s, replicates=replicates)), space,
                          intervals=IntervalPlan(intervals, replicates=REPLICATES, seed=s)) for s in range(SEEDS)]
    return {key: (np.stack([ds[key].values[:, 0] for ds in runs]),
                  np.stack([ds[f"{key}_interval"].values[:, 0] for ds in runs])) for key in ("S1", "ST")}


def coverage_and_width(case: str, intervals: str) -> dict[str, tuple[float, np.ndarray]]:
    """``{index: (coverage over seeds and factors, [d] mean half-width / (1.96 sd over seeds))}``."""
    exact = CASES[case][2]
    out = {}
    for key, (estimates, bounds) in seed_study(case, intervals).items():
        covered = (bounds[..., 0] <= exact[key]) & (exact[key] <= bounds[..., 1])
        half = (bounds[..., 1] - bounds[..., 0]).mean(axis=0) / 2
        out[key] = (float(covered.mean()), half / (1.96 * estimates.std(axis=0, ddof=1)))
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_rqmc_intervals_cover_the_closed_forms_and_are_as_wide_as_the_error(case):
    for key, (coverage, ratio) in coverage_and_width(case, "rqmc").items():
        print(f"{case} {key}: coverage {coverage:.3f}, half-width / (1.96 sd over seeds) {np.round(ratio, 2)}")
        assert 0.85 <= coverage <= 0.99, (key, coverage)
        assert ((ratio >= 1 / 2.5) & (ratio <= 2.5)).all(), (key, ratio)


def test_the_bootstrap_on_a_scrambled_sobol_design_is_too_wide():
    # The failure the randomised-QMC intervals fix: same estimator, one scrambling of N, bootstrap intervals.
    ratios = np.concatenate([ratio for _, ratio in coverage_and_width("ishigami", "bootstrap").values()])
    print(f"ishigami, bootstrap: half-width / (1.96 sd over seeds) {np.round(ratios, 2)}")
    assert np.median(ratios) > 2.5, ratios
