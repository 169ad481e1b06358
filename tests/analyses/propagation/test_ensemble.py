"""The combined interval of an ensemble's propagated moments and quantiles (issue 48 item 3), against closed forms.

A deliberately biased ensemble of a linear model of Gaussian inputs: member ``k`` is ``y_k = (1 + s_k) w.x + b +
o_k`` with offsets ``o_k ~ N(0, SIGMA_O)`` and scales ``s_k ~ N(0, SIGMA_S)``, and the truth is one more draw from
the same distribution (the exchangeability :mod:`sensitivity.outputs.members` assumes). Its output is Gaussian,
with mean ``(1 + s) w.mu + b + o``, std ``(1 + s) sqrt(w' S w)`` and quantiles ``mean + std Phi^-1(p)``; the
ensemble mean's moments are the members' means of these, so the combined interval is a Student-t prediction
interval of the truth (exact coverage ``level`` up to Monte Carlo error), and the sampling interval alone, far
narrower than the members' spread, misses it.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.propagation import MonteCarlo, Propagation, member_moments, merge_members, propagate
from sensitivity.datasets.summary_text import number
from sensitivity.errors import ConfigError
from sensitivity.inputs.uncertainty import gaussian_inputs
from sensitivity.outputs.members import spread_factor
from sensitivity.outputs.spec import OutputSpec

W, B = np.array([1.5, -2.0, 0.5]), 3.0
MU, COV = np.array([0.2, -0.1, 0.3]), np.array([[0.25, 0.05, 0.0], [0.05, 0.16, 0.02], [0.0, 0.02, 0.09]])
SIGMA_O, SIGMA_S = 0.2, 0.1
K, SEEDS = 5, 40
SETTINGS = Propagation(methods=("first_order", "monte_carlo"),
                       monte_carlo=MonteCarlo(n_samples=2**11, n_replicates=8, sampler="random"))
OUTPUT = OutputSpec(name="y", units="m")
VARIABLES = ("output_mean", "output_std", "output_quantile")


def linear(scale: np.ndarray, offset: np.ndarray):
    """``[N, n] -> [N, len(scale)]``: ``(1 + scale_k) w.x + b + offset_k`` side by side, and its Jacobian."""
    def value_and_jacobian(x):
        values = np.outer(x @ W, 1 + scale) + B + offset
        return values, np.broadcast_to(np.outer(1 + scale, W), (len(x), len(scale), len(W)))
    return value_and_jacobian


def biased_ensemble(seed: int):
    """The ensemble's propagation (its mean's, its members', merged) and the truth's exact mean, std, quantiles."""
    rng = np.random.default_rng(seed)
    scale, offset = rng.normal(0, SIGMA_S, K + 1), rng.normal(0, SIGMA_O, K + 1)  # the last: the truth
    inputs = gaussian_inputs(MU, COV, names=["x1", "x2", "x3"], units=["1"] * 3)
    s, o = scale[:K].mean(), offset[:K].mean()
    mean_model = linear(np.array([s]), np.array([o]))
    primary = propagate(BatchedModel(lambda x: mean_model(x)[0], mean_model, output=OUTPUT), inputs, SETTINGS,
                        seed=seed)
    stacked = linear(scale[:K], offset[:K])
    members = member_moments(BatchedModel(lambda x: stacked(x)[0], stacked, output=OUTPUT), inputs, K, SETTINGS,
                             seed=seed)
    mean = (1 + scale[K]) * W @ MU + B + offset[K]
    std = (1 + scale[K]) * np.sqrt(W @ COV @ W)
    quantiles = mean + std * special.ndtri(np.asarray(SETTINGS.quantiles))
    return merge_members(primary, members, SETTINGS.level), {"output_mean": mean, "output_std": std,
                                                             "output_quantile": quantiles}


@pytest.fixture(scope="module")
def runs():
    return [biased_ensemble(seed) for seed in range(SEEDS)]


def covered(interval, exact) -> np.ndarray:
    return (interval.isel(bound=0).values <= exact) & (exact <= interval.isel(bound=1).values)


def test_every_moment_and_quantile_of_an_ensemble_carries_a_labeled_combined_interval(runs):
    ds, _ = runs[0]
    for name in VARIABLES:
        combined, sampling = ds[f"{name}_combined_interval"], ds[f"{name}_interval"]
        assert combined.dims == (*ds[name].dims, "bound") and list(ds["bound_name"].values) == ["low", "high"]
        assert combined.attrs["units"] == "m" and combined.attrs["level"] == 0.95
        assert "sampling and surrogate error combined" in combined.attrs["long_name"]
        assert ds[f"{name}_surrogate_std"].attrs["units"] == "m"
        mc = {"propagation_method": 1}
        estimate = ds[name].isel(mc).values
        half = spread_factor(K, 0.95) * ds[f"{name}_surrogate_std"].isel(mc).values  # the indices' definition
        np.testing.assert_allclose(combined.isel(mc).isel(bound=1).values - estimate,
                                   np.hypot(sampling.isel(mc).isel(bound=1).values - estimate, half), rtol=1e-12)
        first = {"propagation_method": 0}  # a moment method samples nothing: the surrogate's interval alone
        assert np.isnan(sampling.isel(first).values).all()
        np.testing.assert_allclose(combined.isel(first).isel(bound=1).values - ds[name].isel(first).values,
                                   spread_factor(K, 0.95) * ds[f"{name}_surrogate_std"].isel(first).values,
                                   rtol=1e-12)
    assert ds.attrs["ensemble_members"] == K


def test_the_combined_interval_covers_the_exact_moments_where_the_sampling_interval_does_not(runs):
    mc = {"propagation_method": 1}
    for name in VARIABLES:
        combined = np.mean([covered(ds[f"{name}_combined_interval"].isel(mc), exact[name]).mean()
                            for ds, exact in runs])
        sampling = np.mean([covered(ds[f"{name}_interval"].isel(mc), exact[name]).mean() for ds, exact in runs])
        # 40 seeds at level 0.95: 38 expected, sd 1.4; the members' spread is ~10x the sampling error
        assert 0.85 <= combined <= 1.0, (name, combined)
        assert sampling < 0.5, (name, sampling)


def test_a_level_outside_0_1_is_one_line_naming_it():
    with pytest.raises(ConfigError, match=r"`propagation.level` must lie in \(0, 1\), got 1.5"):
        Propagation(level=1.5)


def test_the_summary_shows_the_combined_interval_beside_the_sampling_one(runs):
    from sensitivity.analyses.propagation.summary import summary

    ds, _ = runs[0]
    table = summary(ds).tables[-1]
    assert table.caption.startswith("Ensemble: 95% intervals of the mean and std")
    row = next(r for r in table.rows if r[2].text == "monte_carlo")
    at = {"propagation_method": 1}
    low, high = ds["output_mean_combined_interval"].isel(at).values
    assert table.columns[3:7] == ("mean", "mean sampling", "mean combined", "mean surrogate std")
    assert row[5].text == f"[{number(low)}, {number(high)}]" and row[4].text.startswith("[")
    assert next(r for r in table.rows if r[2].text == "first_order")[4].text == "none"
    assert not any(t.caption.startswith("Ensemble") for t in summary(ds.drop_vars(
        [v for v in ds.data_vars if "interval" in v])).tables)
