"""Verification of a propagation's moments (sensitivity.analyses.verify.propagation) on a linear model of normal
inputs, whose output mean and std are known in closed form, with a surrogate whose std carries a bias every member
of an ensemble would share."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.propagation.monte_carlo import monte_carlo, sample_points
from sensitivity.analyses.verify.propagation import verify_propagation
from sensitivity.analyses.verify.verdict import ERROR, VerdictSettings
from sensitivity.errors import DataError
from sensitivity.inputs.uncertainty import gaussian_inputs

A, MU, SD = np.array([1.0, -2.0, 0.5]), np.array([0.5, -0.5, 1.0]), np.array([1.0, 0.5, 2.0])
MEAN, STD = float(A @ MU), float(np.sqrt(np.sum((A * SD) ** 2)))  # the exact output mean and std
N, RUNS, Z = 2**16, 256, 1.959963984540054


def simulator(points: np.ndarray) -> np.ndarray:
    return (points @ A)[:, None]


def scaled(scale: float):
    """The simulator with its spread about the exact mean scaled: a bias in the std alone."""
    return lambda points: MEAN + scale * (simulator(points) - MEAN)


def _sample(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(MU, SD, size=(N, 3))


def _own_half_widths() -> dict:
    """The surrogate's sampling half-widths of the mean and std of a normal output on N independent points."""
    return {"mean": np.array([Z * STD / np.sqrt(N)]), "std": np.array([Z * STD / np.sqrt(2 * N)])}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_shared_bias_in_the_std_fails_the_verdict_naming_the_std_and_the_anchored_std_covers_the_exact(seed):
    points = _sample(seed)
    ds = verify_propagation(simulator, scaled(0.99), points, RUNS, _own_half_widths())
    # f_sur = a f_sim + b exactly: the control variate's weight is 1 / 0.99 and the anchored variance is the
    # simulator's sample variance on all N points, so the error is -1 % of the simulator's sample std there
    np.testing.assert_allclose(float(ds["propagation_std_error"][0]), -0.01 * simulator(points).std(ddof=1),
                               rtol=1e-9)
    assert int(ds["propagation_verdict"]) == 0
    assert int(ds["propagation_std_flag"][0]) == ERROR and int(ds["propagation_mean_flag"][0]) == 0
    low, high = ds["propagation_std_simulator_interval"].values[0]
    assert low <= STD <= high
    low, high = ds["propagation_mean_simulator_interval"].values[0]
    assert low <= MEAN <= high
    # the surrogate's own interval misses the exact std: the case its sampling half-width cannot show
    assert abs(float(ds["propagation_std_surrogate"][0]) - STD) > _own_half_widths()["std"][0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_exact_surrogate_holds_and_its_moments_are_the_simulators(seed):
    points = _sample(seed)
    ds = verify_propagation(simulator, simulator, points, RUNS, _own_half_widths())
    assert int(ds["propagation_verdict"]) == 1
    np.testing.assert_allclose(ds["propagation_mean_error"].values, 0.0, atol=1e-12)
    np.testing.assert_allclose(ds["propagation_std_error"].values, 0.0, atol=1e-12)
    np.testing.assert_allclose(ds["propagation_std_simulator"].values, simulator(points).std(ddof=1), rtol=1e-12)


def test_a_bias_within_the_moment_tolerance_holds():
    """A bias of 0.05 % of the std, far outside the error's uncertainty, is below the 0.1 % tolerance; a tolerance
    of 0.01 % flags it."""
    points = _sample(3)
    tight = {"mean": np.zeros(1), "std": np.zeros(1)}
    assert int(verify_propagation(simulator, scaled(0.9995), points, RUNS, tight)["propagation_verdict"]) == 1
    strict = VerdictSettings(moment_tolerance=1e-4)
    assert int(verify_propagation(simulator, scaled(0.9995), points, RUNS, tight,
                                  settings=strict)["propagation_verdict"]) == 0


def test_the_simulator_runs_only_on_the_first_points():
    seen = []

    def counted(points: np.ndarray) -> np.ndarray:
        seen.append(points.copy())
        return simulator(points)

    points = _sample(4)
    ds = verify_propagation(counted, simulator, points, 16, _own_half_widths())
    assert len(seen) == 1 and np.array_equal(seen[0], points[:16])
    assert int(ds["propagation_runs"]) == 16 and int(ds["propagation_sample_size"]) == N


@pytest.mark.parametrize("runs", [2, N + 1, 3.0])
def test_runs_outside_the_sample_are_refused_in_one_line(runs):
    with pytest.raises(DataError, match=r"^`propagation_runs` must be an integer in \[3, 65536\]"):
        verify_propagation(simulator, simulator, _sample(0), runs, _own_half_widths())


@pytest.mark.parametrize("sampler", ["sobol", "random"])
def test_the_redrawn_sample_is_the_one_monte_carlo_evaluated(sampler):
    """sample_points gives the points monte_carlo's model saw, in order (the probe at the mean aside)."""
    inputs = gaussian_inputs(MU, np.diag(SD**2), names=["a", "b", "c"])
    seen = []

    def model(points: np.ndarray) -> np.ndarray:
        seen.append(points.copy())
        return simulator(points)

    settings = dict(n_samples=2**10, n_replicates=4, sampler=sampler, block_size=64)
    monte_carlo(inputs, model, **settings, seed=7)
    np.testing.assert_array_equal(sample_points(inputs, 1, **settings, seed=7), np.vstack(seen[1:]))


def test_the_propagations_own_half_widths_are_its_combined_interval_else_its_sampling_one():
    """An ensemble's propagation: half its combined interval; one model's: Student's t (R - 1 = 15 degrees of
    freedom, 2.1314 at 0.95) times its Monte Carlo standard error."""
    import xarray as xr

    from sensitivity.analyses.verify.propagation import recorded_half_widths

    methods = {"propagation_method_name": ("propagation_method", ["first_order", "monte_carlo"])}
    se = xr.DataArray([[np.nan, np.nan], [0.1, 0.2]], dims=("propagation_method", "output"))
    one = xr.Dataset({"output_mean_se": se, "output_std_se": 2 * se}, coords=methods,
                     attrs={"monte_carlo_n_replicates": 16})
    half = recorded_half_widths(one, ("output",), 0.95)
    np.testing.assert_allclose(half["mean"], 2.131449546 * np.array([0.1, 0.2]), rtol=1e-8)
    np.testing.assert_allclose(half["std"], 2.131449546 * np.array([0.2, 0.4]), rtol=1e-8)
    bounds = xr.DataArray(np.array([[[0, 0], [0, 0]], [[1.0, 2.0], [3.0, 7.0]]]),
                          dims=("propagation_method", "output", "bound"))
    ensemble = one.assign(output_mean_combined_interval=bounds, output_std_combined_interval=2 * bounds)
    half = recorded_half_widths(ensemble, ("output",), 0.95)
    np.testing.assert_allclose(half["mean"], [0.5, 2.0])
    np.testing.assert_allclose(half["std"], [1.0, 4.0])


def test_an_ensembles_members_moments_and_spread_are_each_members_own_on_the_output_spec_dims():
    """Oracle: two members ``f_sim (1 -+ e)``: each member's moments are the simulator's sample moments scaled by
    ``1 -+ e`` (exactly, on the same points); their sd over the members (``ddof=1``) is ``sqrt(2) e`` times the
    simulator's; the combined interval's half-width is ``t_{1, 0.975} sqrt(1 + 1/2)`` times that (scipy's t)."""
    from scipy import stats

    from sensitivity.outputs.spec import OutputDim, OutputSpec

    eps, points = 0.01, _sample(3)[:4096]
    spec = OutputSpec("flow", "m3 s-1", (OutputDim("day", (1.0,), "day"),))
    members = lambda x: np.stack([(1 - eps) * simulator(x), (1 + eps) * simulator(x)])  # noqa: E731
    ds = verify_propagation(simulator, simulator, points, RUNS, _own_half_widths(), members=members, output=spec)
    y = simulator(points)[:, 0]
    for key, own in (("mean", y.mean()), ("std", y.std(ddof=1))):
        name = f"propagation_{key}_surrogate"
        assert ds[f"{name}_member"].dims == ("member", "day") and ds[name].attrs["units"] == "m3 s-1"
        np.testing.assert_allclose(ds[f"{name}_member"].values[:, 0], [(1 - eps) * own, (1 + eps) * own], rtol=1e-12)
        std = np.sqrt(2) * eps * abs(own)
        np.testing.assert_allclose(float(ds[f"{name}_surrogate_std"][0]), std, rtol=1e-9)
        half = stats.t.ppf(0.975, 1) * np.sqrt(1.5) * std
        np.testing.assert_allclose(ds[f"{name}_combined_interval"].isel(day=0).values, [own - half, own + half],
                                   rtol=1e-9)
    assert ds["day"].attrs["units"] == "day" and int(ds["propagation_verdict"]) == 1
