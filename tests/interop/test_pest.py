"""PEST JCO binary and uncertainty files, read back by pyEMU (a test-only oracle)."""
from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
import pytest

import sensitivity
from sensitivity.inputs.space import ParameterSpace
from sensitivity.analyses.calibration import BatchedModel, ObservationModel, calibrate
from sensitivity.datasets import write_atomic
from sensitivity.errors import ConfigError, DataError
from sensitivity.interop.pest import calibration_point, jacobian_at, jco_bytes, observation_names, write_pest
from sensitivity.simulators import analytic

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # pyemu warns about its optional flopy-based legacy module
    pyemu = pytest.importorskip("pyemu")

PLUME_OUTPUT = {"name": "concentration", "units": "kg m-3",
                "dims": [{"name": "lat", "values": {"start": 0, "stop": 16}}, {"name": "lon", "values": {"start": 0, "stop": 16}}]}
PLUME_NAMES = ["Amplitude", "x0", "y0", "width"]


def plume_engine():
    surrogate = sensitivity.load_surrogate(analytic.gaussian_plume, input_names=PLUME_NAMES,
                                           input_units=["kg m-3", "1", "1", "1"], output=PLUME_OUTPUT, dtype="float64")
    return sensitivity.compile_jacobian(surrogate, chunk_size=64)


def test_pyemu_reads_names_and_every_entry(tmp_path):
    j = np.random.default_rng(0).normal(size=(7, 3))
    j[2, 1] = j[5, 0] = 0.0  # zeros are left out of the compressed format and must come back as zeros
    obs = [f"Obs_{i}" for i in range(7)]
    files = write_pest(tmp_path / "case.jcb", j, ["Beta", "gamma", "k"], obs, np.linspace(0.5, 2.0, 7))
    jco = pyemu.Jco.from_binary(str(files.jacobian))
    assert jco.col_names == ["beta", "gamma", "k"] and jco.row_names == [o.lower() for o in obs]
    np.testing.assert_array_equal(jco.x, j)  # float64 stored exactly
    noise = pyemu.Cov.from_uncfile(str(files.uncertainty))
    assert noise.row_names == jco.row_names
    np.testing.assert_allclose(np.diag(noise.as_2d), np.linspace(0.5, 2.0, 7) ** 2, rtol=1e-15)


def test_schur_posterior_equals_our_calibration_covariance(tmp_path):
    """pyEMU's Schur complement on our exported Jacobian equals (J^T W J + P^-1)^-1 of calibrate()."""
    jac = plume_engine()
    point = np.array([1.0, 0.4, 0.6, 0.2])
    j = jacobian_at(jac, point)  # [256, 4] exact, float64
    assert j.shape == (256, 4)
    names = observation_names(jac.surrogate.output)
    assert names[0] == "concentration_0" and names[-1] == "concentration_255"
    std = np.random.default_rng(1).uniform(0.02, 0.1, 256)
    files = write_pest(tmp_path / "plume.jcb", j, PLUME_NAMES, names, std)
    prior_std = np.array([0.5, 0.1, 0.1, 0.05])
    corr = np.array([[1, 0.3, 0, 0], [0.3, 1, 0.2, 0], [0, 0.2, 1, -0.4], [0, 0, -0.4, 1]])
    prior_cov = corr * np.outer(prior_std, prior_std)

    parcov = pyemu.Cov(x=prior_cov, names=[n.lower() for n in PLUME_NAMES])
    schur = pyemu.Schur(jco=str(files.jacobian), parcov=parcov, obscov=str(files.uncertainty), forecasts=[])
    posterior = schur.posterior_parameter.x

    # our calibration math on the same Jacobian: a linear model y = J x has exactly this Jacobian
    def linear(x):
        return x @ j.T, np.broadcast_to(j, (len(x), *j.shape))

    ds = calibrate(BatchedModel(value_and_jacobian=linear), ObservationModel.from_arrays(j @ point, sigma=std),
                   starts=point[None], prior_mean=point, prior_cov=prior_cov, bounds=np.full((4, 2), [-np.inf, np.inf]),
                   space=ParameterSpace.from_records([{"name": n, "units": "1", "low": -1e12, "high": 1e12}
                                                      for n in PLUME_NAMES]))
    ours = ds["covariance"].isel(start=0).values
    np.testing.assert_allclose(posterior, ours, rtol=1e-9, atol=1e-14)
    reference = np.linalg.inv(j.T @ (j / std[:, None] ** 2) + np.linalg.inv(prior_cov))
    np.testing.assert_allclose(ours, reference, rtol=1e-9)

    # the point of a calibration result, read back by name
    write_atomic(ds, tmp_path / "calibration.nc")
    np.testing.assert_allclose(calibration_point(tmp_path / "calibration.nc", PLUME_NAMES), point, rtol=1e-12)
    reordered = calibration_point(tmp_path / "calibration.nc", PLUME_NAMES[::-1], start=0)
    np.testing.assert_allclose(reordered, point[::-1], rtol=1e-12)
    with pytest.raises(DataError, match="no variable `best_fit`"):
        calibration_point(tmp_path / "calibration.nc", PLUME_NAMES, estimate="best_fit")


@pytest.mark.parametrize("pars, obs, message", [
    (["a_very_long_name"], ["o"], "has 16 characters; PEST allows 12"),
    (["a b"], ["o"], "without spaces"),
    (["k", "K"], ["o"], "unique regardless of case"),
    (["k"], ["x" * 21], "PEST allows 20"),
])
def test_names_pest_cannot_hold_are_refused(pars, obs, message):
    with pytest.raises(ConfigError, match=message):
        jco_bytes(np.ones((len(obs), len(pars))), pars, obs, format="pest")


def test_long_names_switch_to_the_pest_plus_plus_format(tmp_path):
    """SEIR-like names beyond PEST's 12 characters: PEST++'s long-name binary, read by pyEMU as well."""
    pars = ["beta", "intervention_strength", "initial_infected"]
    obs = [f"new_infections_{t}" for t in range(5)] + ["a_long_observation_name_over_20"]
    j = np.random.default_rng(3).normal(size=(6, 3))
    j[0, 0] = 0.0
    jco = pyemu.Jco.from_binary(str(write_pest(tmp_path / "long.jcb", j, pars, obs).jacobian))
    assert jco.col_names == pars and jco.row_names == obs
    np.testing.assert_array_equal(jco.x, j)
    with pytest.raises(ConfigError, match="`format` must be one of"):
        jco_bytes(j, pars, obs, format="jco")


def test_nonfinite_jacobian_and_bad_noise_are_refused(tmp_path):
    with pytest.raises(DataError, match="not finite at observation 'o1', parameter 'b'"):
        jco_bytes(np.array([[1.0, 2.0], [3.0, np.nan]]), ["a", "b"], ["o0", "o1"])
    with pytest.raises(DataError, match="must be finite and > 0, got 0.0 for 'o1'"):
        write_pest(tmp_path / "x.jcb", np.ones((2, 1)), ["a"], ["o0", "o1"], np.array([1.0, 0.0]))
    assert not (tmp_path / "x.jcb").exists()


def test_observed_outputs_and_noise_come_from_the_calibration(tmp_path):
    from sensitivity.interop.pest import observations_from

    def result(std, observed=None):
        data = {"observation_std": (("output",), np.asarray(std, float))}
        if observed is not None:
            data["observed"] = (("output",), np.asarray(observed, np.int8))
        return write_atomic(xr.Dataset(data), tmp_path / f"c{len(list(tmp_path.iterdir()))}.nc")

    mask, std = observations_from(result([0.1, np.nan, 0.2], [1, 0, 1]), 3)
    assert mask.tolist() == [True, False, True] and std[mask].tolist() == [0.1, 0.2]
    mask, std = observations_from(result([0.1, np.nan, 0.2]), 3)  # no flag: where the noise is known
    assert mask.tolist() == [True, False, True]
    mask, std = observations_from(result([np.nan] * 3, [1, 1, 1]), 3)  # unknown noise: unit weights
    assert mask.all() and std is None
    with pytest.raises(DataError, match="has 3 entries but the model has 4 outputs"):
        observations_from(result([1.0, 1.0, 1.0]), 4)


class LinearEngine:
    """An engine's interface on ``y = A x``: the exact Jacobian is ``A`` everywhere (outputs a, b, c)."""

    A = np.array([[1.0, -2.0], [0.5, 3.0], [4.0, 0.25]])

    def __init__(self):
        from sensitivity.outputs.spec import OutputSpec

        output = OutputSpec.from_dict({"name": "y", "units": "1", "names": ["a", "b", "c"]})
        self.surrogate = type("Surrogate", (), dict(output=output, input_names=["p", "q"], output_size=3, n_in=2))

    def __call__(self, x):
        return x @ self.A.T, np.broadcast_to(self.A, (len(x), 3, 2))


def test_pest_files_at_a_point_keep_the_calibrations_observed_outputs_and_noise(tmp_path):
    from sensitivity.interop.pest import write_pest_at

    calibration = write_atomic(xr.Dataset({"observation_std": (("output",), [0.1, np.nan, 0.2]),
                                           "observed": (("output",), np.array([1, 0, 1], np.int8))}),
                               tmp_path / "calibration.nc")
    files = write_pest_at(LinearEngine(), np.array([1.0, 2.0]), tmp_path / "j.jcb", calibration=calibration)
    jco = pyemu.Jco.from_binary(str(files.jacobian))
    assert jco.row_names == ["a", "c"] == files.observation_names and jco.col_names == ["p", "q"]
    np.testing.assert_array_equal(jco.x, LinearEngine.A[[0, 2]])
    np.testing.assert_allclose(np.diag(pyemu.Cov.from_uncfile(str(files.uncertainty)).as_2d), [0.01, 0.04])
    files = write_pest_at(LinearEngine(), np.array([1.0, 2.0]), tmp_path / "s.jcb", calibration=calibration,
                          sigma=0.5)  # sigma overrides the calibration's noise
    np.testing.assert_allclose(np.diag(pyemu.Cov.from_uncfile(str(files.uncertainty)).as_2d), [0.25, 0.25])
    files = write_pest_at(LinearEngine(), np.array([1.0, 2.0]), tmp_path / "n.jcb")
    assert files.observation_names == ["a", "b", "c"] and files.uncertainty is None
    with pytest.raises(ConfigError, match=r"`sigma` must be a scalar or have one entry per output \(3\), got shape \[2\]"):
        write_pest_at(LinearEngine(), np.array([1.0, 2.0]), tmp_path / "b.jcb", sigma=[1.0, 2.0])
