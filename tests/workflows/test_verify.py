"""The `verify` workflow end to end: a calibration and Sobol' indices of a surrogate checked against a simulator that
is the surrogate (the verdict holds) and against one that is not (it fails, by the amount the closed form says)."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.datasets import open_result
from sensitivity.errors import ConfigError, DataError
from tests.helpers.calibration_models import LINEAR, LINEAR_W, linear_observations
from workflows import calibrate, indices, verify

LINEAR_SIMULATOR = "verify.simulator=sensitivity.simulators.analytic:linear"


@pytest.mark.parametrize("scale, holds", [(1.0, True), (1.3, False)])
def test_a_calibration_is_verified_by_the_shift_the_simulator_makes(compose_config, tmp_path, scale, holds):
    path, y, sigma = linear_observations(tmp_path)
    common = [*LINEAR, f"observations.path={path}"]
    fit = calibrate.run(compose_config("calibrate", common, output_dir=tmp_path / "calibrate"))
    truth = (LINEAR_W * scale).tolist()
    cfg = compose_config("verify", [*common, LINEAR_SIMULATOR, f"+verify.simulator_kwargs.weights={truth}",
                                    f"verify.calibration={fit}"], output_dir=tmp_path / "verify")
    ds = open_result(verify.run(cfg))
    best = open_result(fit).isel(start=int(open_result(fit)["best_start"]))["estimate"].values
    error = (LINEAR_W - LINEAR_W * scale) @ best
    np.testing.assert_allclose(ds["calibration_surrogate_error"].isel(fit_point=0).values, error, atol=1e-9)
    shift = np.linalg.lstsq(LINEAR_W / sigma[:, None], error / sigma, rcond=None)[0]
    np.testing.assert_allclose(ds["calibration_estimate_shift"].values, shift, rtol=1e-6, atol=1e-9)
    assert int(ds["calibration_verdict"]) == holds
    assert ds.attrs["verdict"] == ("holds" if holds else "fails")
    assert list(ds["output_name"].values) == ["o1", "o2", "o3", "o4", "o5"]
    # a rerun finds the complete result set and does no work
    assert verify.run(cfg) == tmp_path / "verify" / "verify.nc"


def test_sobol_indices_are_verified_on_the_first_rows_of_their_design(compose_config, tmp_path):
    common = ["jacobian=float64", "jacobian.jit_compile=false"]
    result = indices.run(compose_config("indices", [*common, "methods=[sobol]", "sobol.n=1024", "plots=false"],
                                        output_dir=tmp_path / "indices"))
    same = open_result(verify.run(compose_config("verify", [
        *common, "verify.simulator=sensitivity.simulators.analytic:ishigami", f"verify.indices={result}",
        "verify.sobol_rows=128"], output_dir=tmp_path / "same")))
    assert int(same["sobol_verdict"]) == 1
    np.testing.assert_allclose(same["sobol_ST_error"].values, 0.0, atol=1e-6)
    other = open_result(verify.run(compose_config("verify", [
        *common, "verify.simulator=sensitivity.simulators.analytic:ishigami", "+verify.simulator_kwargs.a=3.0",
        f"verify.indices={result}", "verify.sobol_rows=128"], output_dir=tmp_path / "other")))
    # a = 3 instead of 7: the x2 term's share of the variance falls from 0.44 to ~0.13
    assert int(other["sobol_verdict"]) == 0
    assert float(other["sobol_S1_error"].isel(parameter=1, output=0)) > 0.2


def test_nothing_to_verify_and_missing_inputs_are_refused(compose_config, tmp_path):
    with pytest.raises(ConfigError, match="nothing to verify"):
        verify.run(compose_config("verify", ["verify.simulator=sensitivity.simulators.analytic:ishigami"]))
    with pytest.raises(ConfigError, match="verify.simulator"):
        verify.run(compose_config("verify", [f"verify.indices={tmp_path / 'indices.nc'}"]))
    with pytest.raises(DataError, match="not found"):
        verify.run(compose_config("verify", ["verify.simulator=sensitivity.simulators.analytic:ishigami",
                                             f"verify.indices={tmp_path / 'indices.nc'}"]))
