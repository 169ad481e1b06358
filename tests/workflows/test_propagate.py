"""The `propagate` workflow end to end, against closed forms computed here.

Monte Carlo checks allow K_SIGMA = 5 of its own standard errors (16 replicates, Student t with 15 dof:
P(|t| > 5) ~ 1.6e-4 per comparison); seeds are fixed, so the tests are deterministic.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy import special, stats

from sensitivity.datasets import open_result, record_checksum
from sensitivity.errors import ConfigError, DataError
from tests.helpers import ROOT
from tests.helpers.cf import cf_errors
from tests.helpers.propagation import FAST, SIX, C, W, by_method, linear_model, sha256, space
from workflows import propagate, sweep

CLI = [sys.executable, "-m", "workflows"]
K_SIGMA = 5.0
#: One parameter per distribution kind, two normals correlated through the copula (rho = 0.6).
KINDS = [
    "{name: n1, units: m, low: -10, high: 10, distribution: {kind: normal, mean: 1.0, std: 0.5}}",
    "{name: n2, units: m, low: -10, high: 10, distribution: {kind: normal, mean: -2.0, std: 1.5}}",
    "{name: t, units: m, low: 0, high: 3, distribution: {kind: truncnormal, mean: 0.5, std: 1.0}}",
    "{name: u, units: m, low: 1, high: 4}",
    "{name: l, units: m, low: 0.01, high: 100, distribution: {kind: lognormal, median: 2.0, sigma_log: 0.3}}",
    "{name: r, units: m, low: 0, high: 2, distribution: {kind: triangular, mode: 0.5}}",
]
RHO = 0.6


def kinds_moments() -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and covariance of the KINDS inputs, from scipy.stats (an independent oracle)."""
    marginals = [stats.norm(1.0, 0.5), stats.norm(-2.0, 1.5),
                 stats.truncnorm((0 - 0.5) / 1.0, (3 - 0.5) / 1.0, loc=0.5, scale=1.0), stats.uniform(1, 3),
                 stats.lognorm(s=0.3, scale=2.0), stats.triang(c=0.25, loc=0, scale=2)]
    mean = np.array([m.mean() for m in marginals])
    cov = np.diag([m.var() for m in marginals])
    cov[0, 1] = cov[1, 0] = RHO * 0.5 * 1.5  # normal marginals: the copula correlation is Pearson's
    return mean, cov


def kinds_correlation() -> list[list[float]]:
    r = np.eye(6)
    r[0, 1] = r[1, 0] = RHO
    return r.tolist()


def test_linear_model_every_method_equals_the_closed_form(compose_config, tmp_path):
    cfg = compose_config("propagate", linear_model() + space(KINDS, kinds_correlation()) + FAST + ["plots=true"])
    path = propagate.run(cfg)
    ds = open_result(path)
    mean, cov = kinds_moments()
    y_mean, y_cov = W @ mean + C, W @ cov @ W.T
    np.testing.assert_allclose(ds["input_covariance"].values, cov, rtol=1e-8, atol=1e-12)
    for name in ("first_order", "second_order", "unscented"):
        m = by_method(ds, name)
        np.testing.assert_allclose(m["output_mean"].values, y_mean, rtol=1e-10, err_msg=name)
        np.testing.assert_allclose(m["output_covariance"].values, y_cov, rtol=1e-8, err_msg=name)
        p = ds["quantile"].values
        expected = y_mean + np.sqrt(np.diag(y_cov)) * special.ndtri(p)[:, None]
        np.testing.assert_allclose(m["output_quantile"].values, expected, rtol=1e-8, err_msg=name)
    mc = by_method(ds, "monte_carlo")
    assert np.all(np.abs(mc["output_mean"].values - y_mean) < K_SIGMA * mc["output_mean_se"].values)
    assert np.all(np.abs(mc["output_std"].values - np.sqrt(np.diag(y_cov))) < K_SIGMA * mc["output_std_se"].values)
    assert ds["nonlinear"].values.tolist() == [[0, 0], [0, 0], [0, 0], [-1, -1]]
    # the model's own output dim, units and labels travel unchanged; the covariance keeps them on output_i/j
    assert ds["output_mean"].dims == ("propagation_method", "day") and ds["day"].values.tolist() == [1.0, 2.0]
    assert ds["day_i"].dims == ("output_i",) and ds["day_i"].values.tolist() == [1.0, 2.0]
    assert ds["day"].attrs["units"] == "day" and ds["output_mean"].attrs["units"] == "m"
    assert ds["output_covariance"].attrs["units"] == "m2"
    assert ds.sel(propagation_method_name="unscented")["output_std"].shape == (2,)
    for key in ("Conventions", "title", "history", "config", "surrogate_hash", "seed", "input_source"):
        assert ds.attrs[key], key
    assert json.loads(ds.attrs["inputs"]) == {}
    assert (tmp_path / "propagation.png").stat().st_size > 0
    assert cf_errors(path) == []


def test_product_of_correlated_normals_has_its_known_moments(compose_config):
    # analytic `quadratic` with n = 2: outputs [x1^2 + x2^2, x1 x2]; x ~ N(mu, S) with correlation rho:
    # E x1x2 = m1 m2 + rho s1 s2, Var x1x2 = m1^2 s2^2 + m2^2 s1^2 + 2 m1 m2 rho s1 s2 + s1^2 s2^2 (1 + rho^2)
    (m1, m2), (s1, s2), rho = (0.5, -0.3), (0.4, 0.6), 0.5
    params = [f"{{name: a, units: '1', low: -5, high: 5, distribution: {{kind: normal, mean: {m1}, std: {s1}}}}}",
              f"{{name: b, units: '1', low: -5, high: 5, distribution: {{kind: normal, mean: {m2}, std: {s2}}}}}"]
    overrides = ["model=function", "model.source=sensitivity.simulators.analytic:quadratic",
                 "model.output={name: y, names: [square, product]}", *space(params, [[1.0, rho], [rho, 1.0]]), *FAST]
    ds = open_result(propagate.run(compose_config("propagate", overrides)))
    mean = m1 * m2 + rho * s1 * s2
    std = np.sqrt(m1**2 * s2**2 + m2**2 * s1**2 + 2 * m1 * m2 * rho * s1 * s2 + s1**2 * s2**2 * (1 + rho**2))
    product = ds.sel(output_name="product")
    for name in ("second_order", "unscented"):
        assert float(by_method(product, name)["output_mean"]) == pytest.approx(mean, rel=1e-12), name
    assert float(by_method(product, "second_order")["output_std"]) == pytest.approx(std, rel=1e-12)
    assert float(by_method(product, "first_order")["output_mean"]) == pytest.approx(m1 * m2, rel=1e-12)
    mc = by_method(product, "monte_carlo")
    assert abs(float(mc["output_mean"]) - mean) < K_SIGMA * float(mc["output_mean_se"])
    assert abs(float(mc["output_std"]) - std) < K_SIGMA * float(mc["output_std_se"])
    # the delta method misses s1^2 s2^2 (1 + rho^2) of the variance here: flagged; second order is exact
    assert int(by_method(product, "first_order")["nonlinear"]) == 1
    assert int(by_method(product, "second_order")["nonlinear"]) == 0


def write_calibration(path: Path, names: list[str], units: list[str], estimate: np.ndarray,
                      covariance: np.ndarray, best: int = 1) -> Path:
    """A calibration-like result: three starts, the best one holding ``estimate`` and ``covariance``."""
    k, n = 3, len(names)
    est = np.full((k, n), np.nan)
    cov = np.full((k, n, n), np.nan)
    est[best], cov[best] = estimate, covariance
    est[2], cov[2] = estimate + 1.0, 4.0 * np.eye(n)
    label = {"parameter_name": ("parameter", names), "parameter_units": ("parameter", units)}
    xr.Dataset(
        {"estimate": (("start", "parameter"), est, {"long_name": "fitted parameter value"}),
         "covariance": (("start", "parameter_i", "parameter_j"), cov, {"long_name": "parameter covariance"}),
         "best_start": ((), np.int32(best), {"long_name": "best start"})},
        coords={**label, "parameter_i_name": ("parameter_i", names), "parameter_j_name": ("parameter_j", names)},
    ).to_netcdf(path)
    record_checksum(path)  # a hand-made result with its record, as a user re-creates one
    return path


def posterior(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.normal(size=(n, n))
    return rng.uniform(-1, 1, n), a @ a.T / n + 0.1 * np.eye(n)


def test_from_calibration_every_moment_method_equals_the_closed_form(compose_config, tmp_path):
    rng = np.random.default_rng(3)
    mean, cov = posterior(rng, 6)
    order = [3, 0, 5, 1, 4, 2]  # the file stores the parameters in another order than the space
    names = [f"p{i}" for i in order]
    calibration = write_calibration(tmp_path / "calibration.nc", names, ["m"] * 6, mean[order],
                                    cov[np.ix_(order, order)])
    overrides = [*linear_model(), *space(SIX), *FAST, "propagate=calibration", f"uncertainty.path={calibration}",
                 "propagation.methods=[first_order, unscented]"]  # second order: in the tests above
    ds = open_result(propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "out")))
    np.testing.assert_allclose(ds["input_mean"].values, mean, rtol=1e-12)
    for name in ("first_order", "unscented"):
        np.testing.assert_allclose(by_method(ds, name)["output_covariance"].values, W @ cov @ W.T, rtol=1e-9)
        np.testing.assert_allclose(by_method(ds, name)["output_mean"].values, W @ mean + C, rtol=1e-10)
    assert json.loads(ds.attrs["inputs"]) == {str(calibration): sha256(calibration)}
    assert "start best" in ds.attrs["input_source"]


def test_truncated_posterior_has_scipy_truncated_normal_moments(compose_config, tmp_path):
    # a diagonal posterior reaching past the bounds [-10, 10]: each input is a scipy truncnorm
    mean, std = np.array([9.0, -9.5, 0.0, 2.0, -1.0, 9.9]), np.array([2.0, 1.0, 1.0, 0.5, 3.0, 0.5])
    calibration = write_calibration(tmp_path / "calibration.nc", [f"p{i}" for i in range(6)], ["m"] * 6, mean,
                                    np.diag(std**2))
    overrides = [*linear_model(), *space(SIX), *FAST, "propagate=calibration", f"uncertainty.path={calibration}",
                 "uncertainty.truncate=true", "propagation.methods=[first_order]"]
    ds = open_result(propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "out")))
    oracle = [stats.truncnorm((-10 - m) / s, (10 - m) / s, loc=m, scale=s) for m, s in zip(mean, std)]
    truncated_mean = np.array([d.mean() for d in oracle])
    cov = np.diag([d.var() for d in oracle])
    np.testing.assert_allclose(ds["output_mean"].values[0], W @ truncated_mean + C, rtol=1e-10)
    np.testing.assert_allclose(ds["output_covariance"].values[0], W @ cov @ W.T, rtol=1e-8)
    assert "truncated to the bounds" in ds.attrs["input_source"]


def stored_sweep(compose_config, tmp_path: Path) -> Path:
    overrides = ["experiment=plume", "grid.n=40", "jacobian=float64", "jacobian.jit_compile=false", "plots=false"]
    cfg = compose_config("sweep", overrides, output_dir=tmp_path / "sweep")
    return sweep.run(cfg)


def test_pointwise_propagation_of_a_stored_sweep_equals_the_closed_form(compose_config, tmp_path):
    path = stored_sweep(compose_config, tmp_path)
    rng = np.random.default_rng(5)
    _, cov = posterior(rng, 4)
    cov *= 1e-3
    names = ["width", "amplitude", "y0", "x0"]
    space_order = ["amplitude", "x0", "y0", "width"]
    index = [names.index(n) for n in space_order]
    units = {"amplitude": "kg m-3", "x0": "1", "y0": "1", "width": "1"}
    calibration = write_calibration(tmp_path / "calibration.nc", names, [units[n] for n in names],
                                    np.array([0.3, 1.0, 0.5, 0.5]), cov)
    overrides = ["experiment=plume", "propagation.methods=[]", f"pointwise.sweep={path}", "pointwise.block_size=7",
                 "propagate=calibration", f"uncertainty.path={calibration}"]
    out = propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "local"))
    assert out.name == "local_propagation.nc" and not (tmp_path / "local" / "propagation.nc").exists()
    with xr.open_dataset(path) as stored:
        jac = stored["jacobian"].values  # [sample, lat, lon, parameter] in the space's order
    s = cov[np.ix_(index, index)]
    expected = np.sqrt(np.einsum("...i,ij,...j->...", jac, s, jac))
    ds = xr.open_dataset(out)
    assert ds["output_std"].dims == ("sample", "lat", "lon")
    np.testing.assert_allclose(ds["output_std"].values, expected, rtol=1e-12, atol=1e-15)
    assert ds["output_std"].attrs["units"] == "kg m-3" and ds["lat"].attrs["standard_name"] == "latitude"
    assert set(json.loads(ds.attrs["inputs"])) == {str(path), str(calibration)}
    assert not (tmp_path / "local" / "local_propagation.nc.parts").exists()
    assert cf_errors(out) == []


def bad_calibration(tmp_path: Path) -> Path:
    cov = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    return write_calibration(tmp_path / "calibration.nc", ["a", "b"], ["1", "1"], np.array([0.0, 0.0]), cov)


TWO = ["{name: a, units: '1', low: -1, high: 1}", "{name: b, units: '1', low: -1, high: 1}"]
BAD = {
    "non-PD covariance": (["propagate=calibration", "uncertainty.path={calibration}"],
                          DataError, "`covariance` must be positive definite, got smallest eigenvalue -1"),
    "unknown distribution": (space([TWO[0], "{name: b, units: '1', low: -1, high: 1, distribution: {kind: cauchi}}"]),
                             ConfigError, "parameter 'b': distribution `kind` must name a continuous scipy"),
    "no variance": (space([TWO[0], "{name: b, units: '1', low: -1, high: 1, distribution: {kind: cauchy}}"]),
                    ConfigError, "parameter 'b': its distribution has no finite mean and variance"),
    "bounds violated": (space([TWO[0], "{name: b, units: '1', low: -1, high: 1, "
                                       "distribution: {kind: normal, mean: 3.0, std: 1.0}}"]),
                        ConfigError, "input mean of 'b' = 3 is outside its bounds [-1.0, 1.0]"),
    "unknown method": (["propagation.methods=[first_order, fourth_order]"], ConfigError,
                       "`propagation.methods` must be one of"),
    "truncate the space": (["uncertainty.truncate=true"], ConfigError,
                           "`uncertainty.truncate` applies to uncertainty.source=calibration"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_inputs_fail_with_one_line_errors_and_no_output(compose_config, tmp_path, case):
    overrides, error, message = BAD[case]
    overrides = [o.replace("{calibration}", str(bad_calibration(tmp_path))) for o in overrides]
    cfg = compose_config("propagate", ["model=function", "model.source=sensitivity.simulators.analytic:linear",
                                       "++model.kwargs={weights: [[1.0, 2.0]]}", *space(TWO), *overrides],
                         output_dir=tmp_path / "out")
    with pytest.raises(error, match=None) as err:
        propagate.run(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out" / "propagation.nc").exists()


@pytest.mark.slow
def test_cli_rejects_a_non_positive_definite_posterior(tmp_path):
    calibration = bad_calibration(tmp_path)
    out = subprocess.run(CLI + ["propagate", "model=function", "model.source=sensitivity.simulators.analytic:linear",
                                "++model.kwargs={weights: [[1.0, 2.0]]}", *space(TWO), "propagate=calibration",
                                f"uncertainty.path={calibration}", f"hydra.run.dir={tmp_path / 'run'}"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    errors = [line for line in (out.stdout + out.stderr).splitlines() if "must be positive definite" in line]
    assert len(errors) == 1 and str(calibration) in errors[0]
    assert not (tmp_path / "run" / "propagation.nc").exists()


def test_a_calibration_of_another_surrogate_is_refused_unless_allowed(compose_config, tmp_path):
    mean, cov = posterior(np.random.default_rng(4), 6)
    calibration = write_calibration(tmp_path / "calibration.nc", [f"p{i}" for i in range(6)], ["m"] * 6, mean, cov)
    with xr.open_dataset(calibration) as ds:
        other = ds.load().assign_attrs(surrogate_hash="sha256:" + "0" * 64)
    other.to_netcdf(tmp_path / "other.nc")
    overrides = [*linear_model(), *space(SIX), *FAST, "propagate=calibration",
                 f"uncertainty.path={tmp_path / 'other.nc'}", "propagation.methods=[first_order]"]
    record_checksum(tmp_path / "other.nc")  # verified: refused for its surrogate, not for a missing record
    with pytest.raises(DataError, match=r"computed from surrogate sha256:000000000000\.\.\. \(this run's is sha256:"
                                        r".*set allow_other_sources=true"):
        propagate.run(compose_config("propagate", overrides, output_dir=tmp_path / "refused"))
    assert not (tmp_path / "refused" / "propagation.nc").exists()
    allowed = propagate.run(compose_config("propagate", [*overrides, "allow_other_sources=true"],
                                           output_dir=tmp_path / "allowed"))
    np.testing.assert_allclose(open_result(allowed)["output_mean"].values[0], W @ mean + C, rtol=1e-10)


def test_a_sample_count_the_replicate_plan_cannot_honour_is_said_in_one_line(compose_config, tmp_path, caplog):
    """n_samples=1000 in 16 Sobol' replicates: a replicate is a power of two (32), so 992 samples run in 31
    replicates; the run says so in one warning line with the counts; 1024 = 16 x 64 runs as asked, silently."""
    base = linear_model() + space(SIX) + FAST + ["propagation.methods=[monte_carlo]"]
    with caplog.at_level("WARNING", logger="workflows.propagate"):
        ds = open_result(propagate.run(compose_config("propagate", [*base, "propagation.n_samples=1000"],
                                                      tmp_path / "a")))
    said = [r.getMessage() for r in caplog.records if "replicates" in r.getMessage()]
    assert (ds.attrs["monte_carlo_n_samples"], ds.attrs["monte_carlo_n_replicates"]) == (992, 31)
    assert len(said) == 1 and "ran 992 samples in 31 replicates of 32, not propagation.n_samples=1000" in said[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="workflows.propagate"):
        propagate.run(compose_config("propagate", [*base, "propagation.n_samples=1024"], tmp_path / "b"))
    assert not [r for r in caplog.records if "replicates" in r.getMessage()]
