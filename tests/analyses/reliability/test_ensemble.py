"""Reliability of an ensemble: members that are the exact linear limit state plus an offset each, so every member's
Pf has a closed form, and the truth (offset 0) is one more draw of the offsets: the combined interval covers the
exact Pf at about its level where the ensemble mean's own sampling interval does not."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from sensitivity.analyses.reliability import ReliabilitySettings, reliability
from sensitivity.analyses.reliability.form import FormSettings
from sensitivity.analyses.reliability.sampling import ImportanceSettings, MonteCarloSettings
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.spec import OutputSpec

A = np.array([1.0, -2.0, 0.5])
MU = np.array([0.5, -0.5, 1.0])
SD = np.array([1.0, 0.5, 2.0])
S = float(np.sqrt(np.sum((A * SD) ** 2)))  # sd of a . x
THRESHOLD = float(A @ MU + 3.0 * S)  # beta = 3 for the truth
SPACE = ParameterSpace.from_records([{"name": f"x{i}", "units": "1", "distribution": {"kind": "norm", "loc": m,
                                                                                     "scale": s}}
                                     for i, (m, s) in enumerate(zip(MU, SD))])


@dataclass
class _Surrogate:
    output: OutputSpec


@dataclass
class LinearMembers:
    """The engine of an ensemble of ``y_k = a . x + b_k`` (float64 numpy): ``[K, N, 1]`` values and Jacobians."""

    offsets: np.ndarray

    def __post_init__(self) -> None:
        self.members = len(self.offsets)
        self.surrogate = _Surrogate(OutputSpec.from_dict({"name": "y", "units": "1"}))

    def values(self, x: np.ndarray) -> np.ndarray:
        return (x @ A)[None, :, None] + self.offsets[:, None, None]

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.values(x), np.broadcast_to(A, (self.members, len(x), 1, len(A))).copy()


def exact_pf(offset: float | np.ndarray) -> np.ndarray:
    """``P(a . x + b > T)`` of normal ``x``."""
    return stats.norm.sf((THRESHOLD - A @ MU - np.asarray(offset)) / S)


def test_every_members_pf_by_form_importance_sampling_and_monte_carlo_is_its_closed_form():
    offsets = np.array([0.4, 0.1, 0.7, 0.3])
    settings = ReliabilitySettings(thresholds=[THRESHOLD], methods=("form", "importance_sampling", "monte_carlo"),
                                   form=FormSettings(tolerance=1e-8), monte_carlo=MonteCarloSettings(n_samples=200_000))
    ds = reliability(LinearMembers(offsets), SPACE, settings, seed=3).isel(threshold=0, output=0)
    names = list(ds["reliability_method_name"].values)
    assert ds["pf_member"].dims == ("reliability_method", "member")
    exact = exact_pf(offsets)
    np.testing.assert_allclose(ds["pf_member"].values[names.index("form")], exact, rtol=1e-7)
    np.testing.assert_allclose(ds["pf"].values[names.index("form")], exact_pf(offsets.mean()), rtol=1e-7)
    for method, rtol in (("importance_sampling", 0.1), ("monte_carlo", 0.3)):
        np.testing.assert_allclose(ds["pf_member"].values[names.index(method)], exact, rtol=rtol)
    # the members share the samples: their spread is the surrogate's, the closed form's to a few per cent
    np.testing.assert_allclose(ds["pf_surrogate_std"].values[names.index("importance_sampling")],
                               exact.std(ddof=1), rtol=0.1)
    assert ds["pf_combined_interval"].attrs["long_name"].endswith("(the members' importance_sampling pf)")


def test_the_combined_interval_covers_the_exact_pf_at_about_its_level_where_the_sampling_interval_does_not():
    """200 biased ensembles of 5 members, offsets N(0, 0.3 s) (the truth: offset 0, one more draw): the 95 %
    combined interval covers the exact Pf in about 95 % of them, the mean's importance-sampling interval rarely."""
    rng = np.random.default_rng(0)
    settings = ReliabilitySettings(thresholds=[THRESHOLD], methods=("form", "importance_sampling"),
                                   importance=ImportanceSettings(n_samples=2000))
    truth = float(exact_pf(0.0))
    combined = sampling = 0
    runs = 200
    for seed in range(runs):
        ds = reliability(LinearMembers(rng.normal(0.0, 0.3 * S, 5)), SPACE, settings, seed=seed)
        low, high = ds["pf_combined_interval"].values.reshape(2)
        combined += low <= truth <= high
        low, high = ds["pf_interval"].isel(reliability_method=1).values.reshape(2)
        sampling += low <= truth <= high
    print(f"coverage of the exact pf: combined {combined / runs:.3f}, importance sampling alone {sampling / runs:.3f}")
    assert 0.88 <= combined / runs <= 1.0
    assert sampling / runs <= 0.5
